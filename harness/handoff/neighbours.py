"""What else ran beside a `bench` launch, measured (the record's shape and its rule: `harness.results.contention`).

A rank's side: its memory sampler (`harness.measure.memory`) reads NVML's list of the processes on its GPU
every sample anyway; each list is `seen` here, and after each configuration the rank hands what it saw (the
peak memory of every process listed but itself) to the launcher in a hidden file. The launcher's side:
`LaunchWatch` reads the load average when the launch starts and when it ends, folds the ranks' sightings in
(dropping the run's own ranks, by pid) and writes the launch's record.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any

from harness.results import contention, files


class GpuSightings:
    """The processes NVML listed on this rank's GPU(s), with the peak memory of each (MiB; None unknown)."""

    def __init__(self) -> None:
        self.gpus: dict[str, dict[str, Any]] = {}

    def seen(self, gpu: str, processes: dict[int, float | None], own_pid: int) -> None:
        entry = self.gpus.setdefault(gpu, {"others": {}, "own_listed": False, "listed": 0})
        entry["own_listed"] |= own_pid in processes
        entry["listed"] = max(entry["listed"], len(processes))
        others = entry["others"]
        for pid, mb in processes.items():
            if pid != own_pid:
                known = others.get(pid)
                others[pid] = mb if known is None else max(known, mb or 0.0)

    def hand_over(self, plan_path: Path, rank: int) -> None:
        """Write what was seen so far for the launcher (nothing on a CPU run); never costs a measurement."""
        if self.gpus:
            with contextlib.suppress(OSError):
                files.write_json(contention.rank_hint(plan_path, rank), {"pid": os.getpid(), "gpus": self.gpus})


SIGHTINGS = GpuSightings()
"""This process's: every memory sampler of a rank adds to it (a rank runs its launch's configurations in turn)."""


def _load_1m() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:  # no load average on this platform
        return None


class LaunchWatch:
    """The launcher's side of one launch: `begin` before it, `end` after it (the record written then)."""

    def __init__(self, *, run_threads: int, device: str) -> None:
        self.run_threads, self.device = run_threads, device
        self.started_at, self.load_start = time.time(), _load_1m()

    def end(
        self, plan_path: Path, launch: str, configurations: list[str], ranks: int, session: str = ""
    ) -> dict[str, Any]:
        record = {
            "launch": launch,
            "configurations": configurations,
            "started_at": self.started_at,
            "ended_at": time.time(),
            "load_1m": [self.load_start, _load_1m()],
            "cpus": os.cpu_count(),
            "run_threads": self.run_threads,
            "device": self.device,
            "gpus": fold_sightings(plan_path, ranks) if self.device == "cuda" else None,
        }
        with contextlib.suppress(OSError):  # an account of the conditions, never worth a run
            files.write_json(contention.path(plan_path, launch, session), record)
        return record


def fold_sightings(plan_path: Path, ranks: int) -> dict[str, dict[str, Any]] | None:
    """Every rank's sightings per GPU, the run's own ranks' pids taken out; the hints removed once read. None where
    no rank saw its GPU (NVML not sampled: --mem-period-ms 0, no NVML): not recorded, not "no other process"."""
    hints = []
    for rank in range(ranks):
        hint = contention.rank_hint(plan_path, rank)
        with contextlib.suppress(OSError, ValueError):
            hints.append((rank, files.read_json(hint)))
        hint.unlink(missing_ok=True)
    run_pids = {str(h["pid"]) for _, h in hints} | {str(os.getpid())}
    gpus: dict[str, dict[str, Any]] = {}
    for rank, hint in hints:
        for gpu, seen in hint["gpus"].items():
            entry = gpus.setdefault(gpu, {"others": {}, "run_ranks": [], "pids_comparable": True, "listed": 0})
            entry["run_ranks"].append(rank)
            entry["pids_comparable"] &= bool(seen["own_listed"])
            entry["listed"] = max(entry["listed"], seen["listed"])
            for pid, mb in seen["others"].items():  # JSON's keys are text
                if pid not in run_pids:
                    known = entry["others"].get(pid)
                    entry["others"][pid] = mb if known is None else max(known, mb or 0.0)
    return gpus or None

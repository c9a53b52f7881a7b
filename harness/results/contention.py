"""What else ran beside each `bench` launch, as measured there, and when that matters.

The launcher writes one record per launch (`plan/<launch>.contention.json`, `harness.results.layout`; a resumed
session's `plan/<launch>.session-<its start>.contention.json`, as its launches reuse the earlier sessions' names):

- `load_1m`: the machine's 1-minute load average (`os.getloadavg`) at the launch's start and end, `cpus` the
  machine's CPUs (the load average counts every CPU, not the run's share), `run_threads` the threads the run's own
  processes on this node may keep runnable (its ranks × threads per rank on the CPU, its ranks on GPUs, plus
  one for the launcher). The load average is a smoothed count of runnable threads, the run's own included: it
  is what is recorded, not the CPU time others took (which /proc cannot give exactly without the run's own).
- `gpus` (on CUDA; null where no rank's sampler read NVML; a GPU whose list was always empty, `listed` 0, was not
  watched: a rank holds its GPU, so NVML cannot list processes there): per GPU a rank used (NVML's UUID), the
  processes NVML listed on it during the launch that are not the run's ranks, with their peak memory (MiB; null
  where NVML does not say), and `pids_comparable`: whether a rank found its own pid in NVML's list (inside a
  container's PID namespace it does not, and then `listed`, the most processes listed at once, is weighed against
  the run's ranks on that GPU instead).

A run from before these records has none: `read` gives None, "not recorded", never "quiet".
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from harness.results import files
from harness.results.layout import PLANS

SUFFIX = ".contention.json"
LOAD_WINDOW_S = 60.0
"""The 1-minute load average's time constant: what ran t seconds ago still counts e^(−t/60 s) of itself."""


def path(plan_path: Path, launch: str, session: str = "") -> Path:
    """A launch's record, beside its plan (`launch`: its name with a retry's suffix, so a retry keeps its own;
    `session`: a resumed session's mark, `session_mark`, as its launches take the names of the earlier's)."""
    return Path(plan_path).with_name(_name(launch, session))


def session_mark(started_at: float) -> str:
    """A resumed session's part of its records' names: its start, in UTC to the second."""
    return "session-" + time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(started_at))


def _name(launch: str, session: str) -> str:
    return f"{launch}.{session}{SUFFIX}" if session else f"{launch}{SUFFIX}"


def rank_hint(plan_path: Path, rank: int) -> Path:
    """A rank's GPU sightings for its launch (hidden; the launcher folds them into the record and removes them)."""
    plan_path = Path(plan_path)
    return plan_path.with_name(f".{plan_path.stem}.gpus.rank{rank}.json")


def read(run: Path, launches: list[str] | None = None, session: str = "") -> list[dict[str, Any]] | None:
    """The run's records, every session's (those of `launches` of `session` only, where given), oldest first; None
    where none was recorded."""
    folder = Path(run) / PLANS
    paths = [folder / _name(name, session) for name in launches] if launches is not None else folder.glob(f"*{SUFFIX}")
    records = []
    for found in paths:
        try:
            records.append(files.read_json(found))
        except (OSError, ValueError):
            continue
    return sorted(records, key=lambda r: r.get("started_at") or 0) or None


def others_load(record: dict[str, Any], before: dict[str, Any] | None = None) -> float | None:
    """The load others added at the least: the launch's higher load average less what the run itself may have
    kept runnable then (its threads, or the launch before's where more: a 1-minute average still carries it, less
    as the time between them grows: e^(−t/60 s), so that a session resumed a day later is not credited with it)."""
    loads = [x for x in record.get("load_1m") or [] if x is not None]
    if not loads:
        return None
    before = before or {}
    carried = before.get("run_threads") or 0
    if record.get("started_at") is not None and before.get("ended_at") is not None:
        carried *= math.exp(-max(record["started_at"] - before["ended_at"], 0.0) / LOAD_WINDOW_S)
    return max(loads) - max(record.get("run_threads") or 0, carried)


def cpu_busy(record: dict[str, Any], before: dict[str, Any] | None = None) -> bool:
    """Others' load above the CPUs the run left free: they took turns on the run's own cores."""
    others, cpus = others_load(record, before), record.get("cpus")
    return others is not None and bool(cpus) and others > max(cpus - (record.get("run_threads") or 0), 0)


def foreign_gpus(record: dict[str, Any]) -> dict[str, int]:
    """Per GPU shared with another process during the launch: how many others (by pid, or by count where NVML's
    pids are another namespace's)."""
    found = {}
    for gpu, seen in (record.get("gpus") or {}).items():
        others = len(seen.get("others") or {})
        if not seen.get("pids_comparable", True):
            others = max((seen.get("listed") or 0) - len(seen.get("run_ranks") or []), 0)
        if others:
            found[gpu] = others
    return found


def watched(record: dict[str, Any]) -> bool:
    """Whether NVML's lists could say who else held the launch's GPUs: read (not null), and each GPU's listing at
    least one process. A rank holds its GPU, so a list that was always empty (WSL, some containers) shows NVML
    cannot list processes there: no other process seen is then no answer."""
    gpus = record.get("gpus")
    return gpus is not None and all(seen.get("listed") for seen in gpus.values())


def findings(records: list[dict[str, Any]] | None) -> list[str]:
    """One sentence per kind of contention the launches ran under (none for quiet launches or none recorded):
    the figure, and what it may distort."""
    if not records:
        return []
    busy = [r for before, r in zip([None, *records], records, strict=False) if cpu_busy(r, before)]
    said = []
    if busy:
        peak = max(max(x for x in r["load_1m"] if x is not None) for r in busy)
        own = max(r.get("run_threads") or 0 for r in busy)
        said.append(f"the 1-minute load average reached {peak:.1f} on {busy[0]['cpus']} CPUs in {len(busy)} of "
                    f"{len(records)} launches, while the run kept at most {own} threads runnable: other work shared "
                    "its cores, so step times may read slow and noisy")  # fmt: skip
    shared = [r for r in records if foreign_gpus(r)]
    if shared:
        gpus = {gpu for r in shared for gpu in foreign_gpus(r)}
        most_mb = max((mb or 0 for r in shared for seen in r["gpus"].values() if seen.get("pids_comparable", True)
                       for mb in (seen.get("others") or {}).values()), default=0)  # fmt: skip
        memory = f" (up to {most_mb:,.0f} MiB)" if most_mb else ""
        said.append(f"{len(gpus)} GPU{'s' if len(gpus) > 1 else ''} of the run also held another process{memory} "
                    f"in {len(shared)} of {len(records)} launches: compute, communication and memory figures may "
                    "read slow or high")  # fmt: skip
    return said


def in_words(records: list[dict[str, Any]] | None) -> str:
    """The environment's line: the load range and the CPUs, the most threads the run's own processes may have kept
    runnable (the average counts them: not others' alone), the GPUs' other processes; or 'not recorded'."""
    if not records:
        return "not recorded (a run from before ddpbench recorded it)"
    loads = [x for r in records for x in r.get("load_1m") or [] if x is not None]
    text = f"1-minute load average {min(loads):.1f}–{max(loads):.1f} on {records[0].get('cpus')} CPUs" if loads else ""
    own = max((r.get("run_threads") or 0 for r in records), default=0)
    text += f" (the run's own threads: up to {own})" if loads and own else ""
    on_gpus = [r for r in records if r.get("device") == "cuda"]
    seen = [r for r in on_gpus if watched(r) or foreign_gpus(r)]  # another process seen is an answer
    shared = sum(1 for r in seen if foreign_gpus(r))
    if on_gpus and not seen:
        text += "; the GPUs' other processes not watched (NVML listed none, or was not read)"
    elif shared or len(seen) < len(on_gpus):
        text += f"; another process on a GPU in {shared} of {len(seen)} launches whose GPUs NVML watched"
        text += f" ({len(on_gpus) - len(seen)} not watched)" if len(seen) < len(on_gpus) else ""
    elif seen:
        text += "; no other process on the run's GPUs"
    return text or "not recorded"

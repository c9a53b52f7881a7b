"""Progress over a run's configurations: a line per finished configuration, always; on a
terminal also a bar with the current configuration and an ETA (tqdm). Off a terminal (CI,
logs, pipes) the bar stays away, so logs hold only the lines.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import TextIO

from harness.plan.config import Configuration
from harness.results import store


def describe_row(row: dict) -> str:
    opts = json.loads(row["impl_options"] or "{}")
    label = f"w{row['world_size']} {row['workload']}/{row['size']} {row['impl']}"
    label += "".join(f" {k}={v}" for k, v in opts.items())
    if row.get("repeat"):
        label += f" (repeat {row['repeat']})"
    if row["status"] != "ok":
        kind = f" ({row['error_kind']})" if row.get("error_kind") else ""
        return f"{label}: {row['status'].upper()}{kind} {row['error']}"
    parity = {True: "parity ok", False: "PARITY FAILED", None: "parity not judged"}[row["parity_ok"]]
    return (
        f"{label}: {row['step_ms_median']:.2f} ms/step (p10 {row['step_ms_p10']:.2f}, p90 {row['step_ms_p90']:.2f}), "
        f"{row['samples_per_s']:.0f} samples/s, {parity}"
    )


PROGRESS_FILE = ".progress.json"  # hidden: readers of the run folder never see it as a result
PROGRESS_PERIOD_S = 0.5


def _write_hint(run: Path, hint: dict) -> None:
    path = run / PROGRESS_FILE
    tmp = path.with_name(f"{PROGRESS_FILE}.{os.getpid()}.tmp")
    with contextlib.suppress(OSError):  # a hint: failing to give it must never cost a measurement
        tmp.write_text(json.dumps(hint))
        os.replace(tmp, path)


def announce_configuration(run: Path, config_id: str) -> None:
    """Rank 0 starts a configuration: its progress (and the launcher's clock for it) begins."""
    _write_hint(run, {"config_id": config_id, "phase": "build", "step": 0, "total": None})


class StepProgress:
    """Rank 0 tells the launcher how far the current configuration is, at most twice a second.

    The launcher shows it and, from it, judges whether the configuration still moves (see
    `harness.launch.supervise.ProgressWatch`). Called between steps (outside every timed window);
    a plain rename, no fsync: it is a hint. `phase` is train, or parity for the reference.
    """

    def __init__(self, run: Path, config_id: str, total_steps: int, *, phase: str = "train") -> None:
        self._run = run
        self._config_id, self._total, self._phase = config_id, total_steps, phase
        self._last = 0.0

    def __call__(self, step: int) -> None:
        now = time.monotonic()
        if now - self._last < PROGRESS_PERIOD_S and step + 1 < self._total:
            return
        self._last = now
        hint = {"config_id": self._config_id, "phase": self._phase, "step": step + 1, "total": self._total}
        _write_hint(self._run, hint)


def read_step_progress(run: Path) -> dict | None:
    try:
        return json.loads((run / PROGRESS_FILE).read_text())
    except (OSError, ValueError):
        return None


class Progress:
    def __init__(self, run: Path, pending: list[Configuration], *, done: int = 0, stream: TextIO = sys.stdout):
        self._run = run
        self._pending = list(pending)
        self._done = done
        self._total = done + len(pending)
        self._stream = stream
        self._bar = None
        if stream.isatty() and pending:
            from tqdm import tqdm

            self._bar = tqdm(total=self._total, initial=done, unit="config", file=stream, dynamic_ncols=True)
            self._show_current()

    def _show_current(self) -> None:
        if self._bar is not None and self._pending:
            self._bar.set_description_str(f"running {self._pending[0].label()}")

    def written(self, cfg: Configuration) -> None:
        self._done += 1
        self._pending = [c for c in self._pending if c.config_id != cfg.config_id]
        line = f"[{self._done}/{self._total}] {describe_row(store.read_config_row(self._run, cfg.config_id))}"
        if self._bar is None:
            print(line, file=self._stream, flush=True)
            return
        self._bar.write(line, file=self._stream)
        self._bar.update(1)
        self._show_current()

    def tick(self) -> None:
        """Show how far the current configuration is (steps done), on a terminal only."""
        if self._bar is None or not self._pending:
            return
        state = read_step_progress(self._run)
        if state and state.get("config_id") == self._pending[0].config_id and state.get("total"):
            what = "parity reference step" if state.get("phase") == "parity" else "step"
            self._bar.set_postfix_str(f"{what} {state['step']}/{state['total']}")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

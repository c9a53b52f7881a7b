"""Progress hints from rank 0 to the launcher: which configuration runs and how many of its steps
are done, in a small hidden file of the run folder. The launcher judges from them whether a
launch still moves; the face (`harness.commands.console.progress.Progress`) shows them on a terminal.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path

from harness.results.layout import RunFolder

PROGRESS_PERIOD_S = 0.5


def _write_hint(run: Path, hint: dict) -> None:
    path = RunFolder(run).progress  # hidden: readers of the run folder never see it as a result
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
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
    a plain rename, no fsync: it is a hint. `phase` is train, or parity for the reference; `warmup`: how many of
    the first steps are warm-up (the launcher names a failure in them so).
    """

    def __init__(self, run: Path, config_id: str, total_steps: int, *, phase: str = "train", warmup: int = 0) -> None:
        self._run = run
        self._config_id, self._total, self._phase, self._warmup = config_id, total_steps, phase, warmup
        self._last = 0.0

    def __call__(self, step: int) -> None:
        now = time.monotonic()
        if now - self._last < PROGRESS_PERIOD_S and step + 1 < self._total:
            return
        self._last = now
        hint = {
            "config_id": self._config_id,
            "phase": self._phase,
            "step": step + 1,
            "total": self._total,
            "warmup": self._warmup,
        }
        _write_hint(self._run, hint)


def read_step_progress(run: Path) -> dict | None:
    try:
        return json.loads(RunFolder(run).progress.read_text())
    except (OSError, ValueError):
        return None

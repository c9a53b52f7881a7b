"""A run's folder: its id (given or new) and the checks made before anything is written."""

from __future__ import annotations

import os
import re
import secrets
import time
from pathlib import Path

from harness.protocols import ConfigError

PARITY_CACHE = "plan/parity"
"""Where in the run folder each setup's parity reference is kept while the run lasts: every launch of
the run (one per world size and repeat) reuses it instead of computing it again; `bench` removes it
when the run has ended (an interrupted run keeps it for --resume)."""

RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def validate_run_id(run_id: str, *, flag: str = "--run-id") -> None:
    """A run id names a folder directly inside --results: never a path (`--resume ../R/x` included)."""
    if run_id and (not RUN_ID_PATTERN.match(run_id) or ".." in run_id):
        raise ConfigError(
            f"{flag} {run_id!r} is not valid; use letters, digits, '.', '_' and '-' "
            "(no '/' or '..', at most 100 characters)"
        )


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


def check_results_folder(results: Path, run_id: str) -> None:
    """The run folder must be new and its parent writable; checked before anything is written."""
    if (results / run_id).exists():
        raise ConfigError(f"--run-id {run_id!r} already exists in {results}; choose another run id")
    existing = results
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"--results {str(results)!r} cannot be written (checked {str(existing)!r})")


def check_output_folder(flag: str, folder: Path) -> None:
    """An output folder (a site) must be a folder or not exist yet, under a writable one; checked
    before anything is written, so that a file given by mistake is one line, not a traceback."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{flag} {str(folder)!r} is a file, not a folder; give a folder (it is made if missing)")
    existing = folder
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"{flag} {str(folder)!r} cannot be made: {str(existing)!r} is a file")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{flag} {str(folder)!r} cannot be written (checked {str(existing)!r})")

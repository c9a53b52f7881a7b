"""Files written whole or not at all, and JSON read back: what every writer of a run folder uses.

Light on purpose (the standard library only): a rank that writes a failure record or a hint never
pays for pandas or Parquet.

Every file is written atomically: to a temporary name beginning with '.', fsync, rename. Readers
(pyarrow, pandas) ignore names beginning with '.', so an interrupted write leaves nothing visible
and loses nothing that was finished.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any


def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """Write through `write(tmp_path)` to a hidden temporary, fsync it, rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # make the rename itself durable
    finally:
        os.close(dir_fd)


def write_json(path: Path, data: dict[str, Any]) -> None:
    text = json.dumps(data, indent=2, sort_keys=True, default=str)
    atomic_write(path, lambda tmp: tmp.write_text(text))


def read_json(path: Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text())

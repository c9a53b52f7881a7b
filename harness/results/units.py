"""Byte counts for reading, in one place. The standard library only: `ddpbench list` says a model's bytes from
its cache without importing pandas or pyarrow (tests/face/test_list_cache.py)."""

from __future__ import annotations


def human_bytes(count: float) -> str:
    """Bytes for reading at one decimal: '160.0 MiB', '1.5 GiB', '512 B'."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count:.0f} B"

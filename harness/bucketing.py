"""DDP's bucket layout, written once: which gradients share an all-reduce, and the first bucket's cap.

A leaf module (torch and the standard library only) so that a strategy in impls/ and the step-time
model in harness/perfmodel/ lay out buckets by the same rules: DDP's own, through the function its reducer
calls. It works on plain numbers — each gradient's size in bytes, its dtype (and device) and the order
gradients are packed in — so a caller with tensors and a caller with a stored profile use it alike. Gradients of
one dtype on one device (every model ddpbench trains: its parameters stay fp32) are laid out in pure Python by the
same rules, so that `predict` over a stored profile imports no torch (2 to 12 s).
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

MIB = 1024 * 1024
"""A mebibyte (2^20 bytes): the unit of DDP's bucket_cap_mb, and of every `_mb` column and figure."""
DDP_DEFAULT_CAP_MB = 25.0
"""DDP's bucket_cap_mb when none is given (torch.nn.parallel.distributed._DEFAULT_BUCKET_CAP_MB), in MiB."""
DDP_FIRST_BUCKET_BYTES = 1024 * 1024
"""DDP's first bucket's cap where it caps it apart (torch.distributed._DEFAULT_FIRST_BUCKET_BYTES)."""
ELEMENT_BYTES = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "complex64": 8, "complex128": 16}
"""A gradient dtype's bytes an element, by torch's name: the dtypes laid out without torch."""


def assign_buckets(
    sizes: Sequence[int],
    dtypes: Sequence[Hashable],
    *,
    cap_bytes: int,
    first_cap_bytes: int,
    order: Sequence[int] | None = None,
) -> list[list[int]]:
    """Buckets exactly as DDP's reducer rebuilds them; indices into `sizes`, bucket by bucket in
    launch order.

    `dtypes` gives each gradient's key: a torch dtype, its name ("float32"), or (dtype, device).
    The rules (torch's `_compute_bucket_assignment_by_size`, which this calls with stand-in tensors
    that hold no memory): walk the gradients in `order` (default: as given; DDP's rebuild uses the
    order gradients became ready), one open bucket per key. A bucket closes as soon as it holds ≥ its
    limit, so a gradient is never split and a big one makes a big bucket; the first bucket of each
    key has the limit `first_cap_bytes`, later ones `cap_bytes`. Buckets launch in the order they
    closed; the ones still open follow in the order DDP's hash table of keys holds them (on a CPU,
    newest key first; the device takes part in the hash, so it is part of the key).
    """
    if len(sizes) != len(dtypes):
        raise ValueError(f"{len(sizes)} sizes but {len(dtypes)} dtypes")
    walk = list(range(len(sizes))) if order is None else [int(i) for i in order]
    if not walk:
        return []
    keys = {_plain_key(key) for key in dtypes}
    if len(keys) == 1 and None not in keys:  # one open bucket at a time: no hash table's order to follow
        return _one_key_buckets([int(n) for n in sizes], walk, next(iter(keys))[0], (first_cap_bytes, cap_bytes))
    import torch.distributed as dist

    scalars: dict[Hashable, Any] = {}
    stand_ins = [_stand_in(int(sizes[i]), dtypes[i], scalars) for i in walk]
    limits = [int(first_cap_bytes), int(cap_bytes)]
    buckets, _ = dist._compute_bucket_assignment_by_size(stand_ins, limits, [False] * len(walk), walk)
    return [list(bucket) for bucket in buckets]


def _plain_key(key: Hashable) -> tuple[str, str] | None:
    """(dtype name, device) of a key `assign_buckets` takes, without torch; None where it is no dtype laid out
    without torch (torch's path judges it)."""
    dtype, device = key if isinstance(key, tuple) and len(key) == 2 else (key, "cpu")
    name = str(dtype).removeprefix("torch.")
    return (name, str(device)) if name in ELEMENT_BYTES else None


def _one_key_buckets(sizes: list[int], walk: list[int], dtype: str, limits: tuple[int, int]) -> list[list[int]]:
    """`_compute_bucket_assignment_by_size`'s rules for gradients of one dtype and device: walk them, close the
    open bucket once it holds at least its limit (the first bucket's, then every later one's), the last open
    bucket after them."""
    buckets: list[list[int]] = []
    open_bucket: list[int] = []
    held = 0
    for index in walk:
        if sizes[index] % ELEMENT_BYTES[dtype]:
            raise ValueError(f"{sizes[index]} bytes is not a whole number of torch.{dtype} elements")
        open_bucket.append(index)
        held += sizes[index]
        if held >= limits[min(len(buckets), 1)]:
            buckets.append(open_bucket)
            open_bucket, held = [], 0
    return [*buckets, open_bucket] if open_bucket else buckets


def _stand_in(nbytes: int, key: Hashable, scalars: dict[Hashable, Any]) -> Any:
    """A tensor of `nbytes` with `key`'s dtype and device that holds one element (a broadcast view)."""
    import torch

    if key not in scalars:
        dtype, device = key if isinstance(key, tuple) else (key, "cpu")
        if isinstance(dtype, str):
            dtype = getattr(torch, dtype.removeprefix("torch."), None)
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"{key!r} is not a torch dtype, its name, or (dtype, device)")
        scalars[key] = torch.empty((), dtype=dtype, device=device)
    scalar = scalars[key]
    if nbytes % scalar.element_size():
        raise ValueError(f"{nbytes} bytes is not a whole number of {scalar.dtype} elements")
    return scalar.expand(nbytes // scalar.element_size())


def first_bucket_bytes(cap_bytes: int, *, cap_given: bool = True) -> int:
    """The first bucket's cap as the installed DDP sets it.

    torch ≥ 2.9 caps the first bucket at _DEFAULT_FIRST_BUCKET_BYTES (1 MiB) only when
    bucket_cap_mb is left at its default (`cap_given=False`); an explicit bucket_cap_mb caps
    every bucket alike. Older torch always used 1 MiB.
    """
    if not _caps_first_bucket_apart_only_by_default():
        return min(DDP_FIRST_BUCKET_BYTES, cap_bytes)
    return cap_bytes if cap_given else DDP_FIRST_BUCKET_BYTES


@functools.cache
def _caps_first_bucket_apart_only_by_default() -> bool:
    """Whether the installed DDP has `_BucketCapacityConfig` (torch ≥ 2.9), read in its source: importing torch for
    one name is 2 to 12 s of `predict`'s wait. Where torch is loaded already, or its source is not on disk (a
    build that ships bytecode only), torch itself is asked."""
    spec = importlib.util.find_spec("torch")
    source = Path(next(iter(spec.submodule_search_locations or []), "")) / "nn" / "parallel" / "distributed.py"
    if "torch" not in sys.modules and source.is_file():
        return "class _BucketCapacityConfig" in source.read_text(encoding="utf-8")
    import torch.nn.parallel.distributed as ddp

    return hasattr(ddp, "_BucketCapacityConfig")

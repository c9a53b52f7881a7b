"""DDP's bucket layout, written once: which gradients share an all-reduce, and the first bucket's cap.

A leaf module (torch and the standard library only) so that a strategy in impls/ and the step-time
model in harness/model/ lay out buckets by the same rules. It works on plain numbers — each
gradient's size in bytes, its dtype (or any hashable key that keeps buckets apart, such as
`(dtype, device)`) and the order gradients are packed in — so a caller with tensors and a caller
with a stored profile use it alike.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

MIB = 1024 * 1024
DDP_DEFAULT_CAP_MB = 25.0
"""DDP's bucket_cap_mb when none is given (torch.nn.parallel.distributed._DEFAULT_BUCKET_CAP_MB), in MiB."""


def assign_buckets(
    sizes: Sequence[int],
    dtypes: Sequence[Hashable],
    *,
    cap_bytes: int,
    first_cap_bytes: int,
    order: Sequence[int] | None = None,
) -> list[list[int]]:
    """Buckets as DDP's reducer builds them (compute_bucket_assignment_by_size); indices into
    `sizes`, bucket by bucket in launch order.

    Walk the gradients in `order` (default: as given; DDP's rebuild uses the order gradients became
    ready), one open bucket per dtype. A bucket closes as soon as it holds ≥ its limit, so a
    gradient is never split and a big one makes a big bucket; the first bucket of each dtype has
    the limit `first_cap_bytes`, later ones `cap_bytes`. Buckets launch in the order they closed;
    the ones still open follow in order of their dtype's first use.
    """
    if len(sizes) != len(dtypes):
        raise ValueError(f"{len(sizes)} sizes but {len(dtypes)} dtypes")
    closed: list[list[int]] = []
    open_buckets: dict[Hashable, list[int]] = {}
    filled: dict[Hashable, int] = {}
    limits: dict[Hashable, int] = {}
    for index in range(len(sizes)) if order is None else order:
        key = dtypes[index]
        bucket = open_buckets.setdefault(key, [])
        limit = limits.setdefault(key, first_cap_bytes)
        bucket.append(index)
        filled[key] = filled.get(key, 0) + int(sizes[index])
        if filled[key] >= limit:
            closed.append(bucket)
            open_buckets[key], filled[key], limits[key] = [], 0, cap_bytes
    return closed + [bucket for bucket in open_buckets.values() if bucket]


def first_bucket_bytes(cap_bytes: int, *, cap_given: bool = True) -> int:
    """The first bucket's cap as the installed DDP sets it.

    torch ≥ 2.9 caps the first bucket at _DEFAULT_FIRST_BUCKET_BYTES (1 MiB) only when
    bucket_cap_mb is left at its default (`cap_given=False`); an explicit bucket_cap_mb caps
    every bucket alike. Older torch always used 1 MiB.
    """
    import torch.distributed as dist

    try:
        from torch.nn.parallel.distributed import _BucketCapacityConfig
    except ImportError:
        return min(dist._DEFAULT_FIRST_BUCKET_BYTES, cap_bytes)
    config = _BucketCapacityConfig.create(cap_bytes / MIB if cap_given else None, None, False)
    return config.first_bucket_bytes_cap

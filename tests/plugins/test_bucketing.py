"""harness.bucketing: DDP's bucket layout, the same as the function DDP's reducer calls, order included."""

from __future__ import annotations

import random

import pytest
import torch
import torch.distributed as dist

from harness.bucketing import assign_buckets

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
CASES = 300


def random_case(seed: int) -> dict:
    """Gradients of 1 to 4 float dtypes in a random ready order, caps small enough to close buckets."""
    rng = random.Random(seed)
    dtypes = rng.sample(FLOATS, rng.randint(1, 4))
    count = rng.randint(1, 12)
    tensors = [torch.zeros(rng.randint(0, 300), dtype=rng.choice(dtypes)) for _ in range(count)]
    order = list(range(count))
    rng.shuffle(order)
    cap = rng.randint(1, 1500)
    return {"tensors": tensors, "order": order, "cap": cap, "first": rng.randint(1, cap)}


def ddps_buckets(case: dict) -> list[list[int]]:
    """What DDP's reducer builds when it rebuilds: the real gradients, handed over in ready order."""
    walked = [case["tensors"][i] for i in case["order"]]
    buckets, _ = dist._compute_bucket_assignment_by_size(
        walked, [case["first"], case["cap"]], [False] * len(walked), case["order"]
    )
    return [list(bucket) for bucket in buckets]


@pytest.mark.parametrize("key", ["dtype", "name", "dtype and device"])
def test_random_mixed_dtype_layouts_match_ddps_own_function_in_launch_order(key):
    mixed = 0
    for seed in range(CASES):
        case = random_case(seed)
        tensors = case["tensors"]
        keys = {
            "dtype": [t.dtype for t in tensors],
            "name": [str(t.dtype).removeprefix("torch.") for t in tensors],
            "dtype and device": [(t.dtype, t.device) for t in tensors],
        }[key]
        sizes = [t.numel() * t.element_size() for t in tensors]
        ours = assign_buckets(sizes, keys, cap_bytes=case["cap"], first_cap_bytes=case["first"], order=case["order"])
        assert ours == ddps_buckets(case), f"seed {seed}"
        mixed += len({t.dtype for t in tensors}) > 1
    assert mixed > CASES / 2  # most cases really mix dtypes


def test_buckets_left_open_follow_ddps_hash_table_not_first_use():
    """The case the reviewer found: f32 closes {1}; {0} (f64) and {2} (f16) stay open, and DDP launches
    the one whose dtype came last first."""
    sizes = [8, 400, 2]
    keys = [torch.float64, torch.float32, torch.float16]
    assert assign_buckets(sizes, keys, cap_bytes=100, first_cap_bytes=100) == [[1], [2], [0]]


def test_a_key_that_is_no_dtype_or_bytes_that_are_no_whole_element_is_refused():
    with pytest.raises(ValueError, match="'f32' is not a torch dtype"):
        assign_buckets([4], ["f32"], cap_bytes=10, first_cap_bytes=10)
    with pytest.raises(ValueError, match=r"6 bytes is not a whole number of torch\.float32 elements"):
        assign_buckets([6], [torch.float32], cap_bytes=10, first_cap_bytes=10)
    assert assign_buckets([], [], cap_bytes=10, first_cap_bytes=10) == []

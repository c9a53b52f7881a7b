"""harness.bucketing: DDP's bucket layout, the same as the function DDP's reducer calls, order included: through torch
for gradients of several dtypes, in pure Python for one (so that `predict` over a stored profile imports no torch)."""

from __future__ import annotations

import random

import pytest
import torch
import torch.distributed as dist

import workloads
from harness import bucketing
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


@pytest.mark.parametrize("model", ["mlp", "gpt2", "bert"])
def test_one_dtypes_layout_in_pure_python_matches_ddps_own_function_on_real_models(model, monkeypatch):
    """The layout a stored profile gets (dtype names, one dtype), never through torch's function, against that
    function over the model's real parameters in backward's order, at caps that split it into many buckets."""
    params = list(workloads.create(model, size="tiny").build_model().parameters())
    walk = list(reversed(range(len(params))))
    sizes, names = [p.numel() * p.element_size() for p in params], [str(p.dtype) for p in params]
    expected = {}
    for cap in (sum(sizes) // 40, sum(sizes) // 7, sum(sizes)):
        layout, _ = dist._compute_bucket_assignment_by_size([params[i] for i in walk], [cap // 3, cap],
                                                            [False] * len(walk), walk)  # fmt: skip
        expected[cap] = [list(bucket) for bucket in layout]
    monkeypatch.setattr(dist, "_compute_bucket_assignment_by_size", None)  # the pure path calls no torch
    for cap, layout in expected.items():
        assert assign_buckets(sizes, names, cap_bytes=cap, first_cap_bytes=cap // 3, order=walk) == layout, cap
    assert len(expected[min(expected)]) > 2  # the smallest cap really splits the model


def test_random_one_dtype_layouts_in_pure_python_match_ddps_own_function():
    for seed in range(CASES):
        case = random_case(seed)
        dtype = case["tensors"][0].dtype if case["tensors"] else torch.float32
        case["tensors"] = [t.to(dtype) for t in case["tensors"]]
        sizes = [t.numel() * t.element_size() for t in case["tensors"]]
        ours = assign_buckets(sizes, [str(dtype)] * len(sizes), cap_bytes=case["cap"], first_cap_bytes=case["first"],
                              order=case["order"])  # fmt: skip
        assert ours == ddps_buckets(case), f"seed {seed}"


def test_the_first_buckets_rule_read_without_torch_is_the_installed_ddps():
    """Read in the installed DDP's source (no torch import): whether it caps the first bucket apart only by
    default, as the class torch ≥ 2.9 decides it by says; and the first bucket's cap as that class sets it."""
    from torch.nn.parallel import distributed as ddp

    has_config = hasattr(ddp, "_BucketCapacityConfig")
    assert bucketing._caps_first_bucket_apart_only_by_default() == has_config
    for cap_mb, given in ((25, False), (25, True), (0.5, True), (100, True)):
        cap = int(cap_mb * bucketing.MIB)
        if has_config:
            expected = ddp._BucketCapacityConfig.create(cap_mb if given else None, None, False).first_bucket_bytes_cap
        else:
            expected = min(dist._DEFAULT_FIRST_BUCKET_BYTES, cap)
        assert bucketing.first_bucket_bytes(cap, cap_given=given) == expected
    assert bucketing.DDP_FIRST_BUCKET_BYTES == dist._DEFAULT_FIRST_BUCKET_BYTES

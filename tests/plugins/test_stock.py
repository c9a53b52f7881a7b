"""`stock` (DistributedDataParallel): each knob reaches the DDP object and changes what it does.

Every check runs on both ranks of the shared world-size-2 gloo group in one call; the tests
read what the ranks observed.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
import torch
import torch.distributed as dist
from dist_helpers import CLASSES, FEATURES, TinyClassification, run_in_process_group
from torch import nn

import impls
from harness.rank import parity
from harness.rank.training import LEARNING_RATE, OPTIMIZER, build_model, make_batch
from impls._common import MIB

SEED = 11
BATCH = 4
STEPS = 4
WIDTH = 32
CPU = torch.device("cpu")


class WithBuffer(nn.Module):
    """Square 32×32 layers (PowerSGD compresses them) and a buffer (for broadcast_buffers)."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(FEATURES, WIDTH)
        self.hidden = nn.Linear(WIDTH, WIDTH)
        self.out = nn.Linear(WIDTH, CLASSES)
        self.register_buffer("marker", torch.zeros(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.hidden(torch.tanh(self.inp(x)))))


WORKLOAD = TinyClassification(model=WithBuffer)

KNOB_CASES: dict[str, dict[str, Any]] = {
    "defaults": {},
    "bucket_cap_mb": {"bucket_cap_mb": 5.0},
    "broadcast_buffers": {"broadcast_buffers": False},
    "find_unused_parameters": {"find_unused_parameters": True},
    "gradient_as_bucket_view": {"gradient_as_bucket_view": True},
    "static_graph": {"static_graph": True},
    "fp16": {"comm_hook": "fp16"},
    "bf16": {"comm_hook": "bf16"},
    "powersgd": {"comm_hook": "powersgd"},
    "tiny_buckets": {"bucket_cap_mb": 0.002},
}


# ---- on every rank ------------------------------------------------------------------------------


def observe_case(options: dict[str, Any]) -> dict[str, Any]:
    rank = dist.get_rank()
    strategy = impls.create("stock", **options)
    ddp = strategy.wrap(build_model(WORKLOAD, seed=SEED + rank, device=CPU))
    observed = {
        "bucket_bytes_cap": ddp.bucket_bytes_cap,
        "broadcast_buffers": ddp.broadcast_buffers,
        "find_unused_parameters": ddp.find_unused_parameters,
        "gradient_as_bucket_view": ddp.gradient_as_bucket_view,
        "static_graph": ddp.static_graph,
        "comm_hook": ddp._get_ddp_logging_data().get("comm_hook"),
        "parity_exact": strategy.parity_exact,
    }
    observed["buffer_after_forward"] = buffer_after_forward_with_rank1_changed(ddp)
    observed["grads_share_storage"] = grads_share_one_storage(ddp)
    observed["final"] = train(strategy, ddp)
    observed["layout"] = strategy.layout()
    return observed


def buffer_after_forward_with_rank1_changed(ddp) -> float:
    """Rank 1 changes its buffer after wrap; DDP with broadcast_buffers puts rank 0's back at forward."""
    if dist.get_rank() == 1:
        ddp.module.marker.fill_(99.0)
    batch = make_batch(WORKLOAD, batch_size=BATCH, seed=SEED, rank=dist.get_rank(), step=0, device=CPU)
    with torch.no_grad():
        WORKLOAD.loss(ddp, batch)
    value = ddp.module.marker.item()
    ddp.module.marker.zero_()
    return value


def grads_share_one_storage(ddp) -> bool:
    """With gradient_as_bucket_view, every .grad of a bucket is a view into the bucket's one tensor."""
    batch = make_batch(WORKLOAD, batch_size=BATCH, seed=SEED, rank=dist.get_rank(), step=0, device=CPU)
    WORKLOAD.loss(ddp, batch).backward()
    storages = {p.grad.untyped_storage().data_ptr() for p in ddp.parameters()}
    ddp.zero_grad(set_to_none=True)
    return len(storages) == 1


def train(strategy, ddp) -> dict[str, torch.Tensor]:
    optimizer = strategy.make_optimizer(ddp.parameters(), OPTIMIZER, lr=LEARNING_RATE)
    for step in range(STEPS):
        batch = make_batch(WORKLOAD, batch_size=BATCH, seed=SEED, rank=dist.get_rank(), step=step, device=CPU)
        WORKLOAD.loss(ddp, batch).backward()
        strategy.sync_gradients()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return parity.state_on_cpu(strategy.full_state_dict(ddp))


def observe_all_cases() -> dict[str, dict[str, Any]]:
    return {name: observe_case(options) for name, options in KNOB_CASES.items()}


# ---- in the test process -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def observed() -> dict[str, dict[str, Any]]:
    """Rank 0's observations per case (rank 1's buffer observation is kept under `rank1_buffer`)."""
    rank0, rank1 = run_in_process_group(observe_all_cases, world_size=2)
    for name in rank0:
        rank0[name]["rank1_buffer"] = rank1[name]["buffer_after_forward"]
    return rank0


@functools.cache
def reference() -> dict[str, torch.Tensor]:
    return parity.reference_parameters(WORKLOAD, world_size=2, batch_size=BATCH, steps=STEPS, seed=SEED, device=CPU)


DEFAULTS = {
    "bucket_bytes_cap": 25 * MIB,
    "broadcast_buffers": True,
    "find_unused_parameters": False,
    "gradient_as_bucket_view": False,
    "static_graph": False,
}


@pytest.mark.parametrize(
    ("case", "attribute", "expected"),
    [
        ("bucket_cap_mb", "bucket_bytes_cap", 5 * MIB),
        ("broadcast_buffers", "broadcast_buffers", False),
        ("find_unused_parameters", "find_unused_parameters", True),
        ("gradient_as_bucket_view", "gradient_as_bucket_view", True),
        ("static_graph", "static_graph", True),
    ],
)
def test_each_knob_changes_its_ddp_attribute_and_only_it(observed, case, attribute, expected):
    assert observed["defaults"][attribute] == DEFAULTS[attribute]
    assert observed[case][attribute] == expected
    for other, default in DEFAULTS.items():
        if other != attribute:
            assert observed[case][other] == default, f"{case} also changed {other}"


def test_broadcast_buffers_puts_rank_zeros_buffer_back_at_every_forward(observed):
    assert observed["defaults"]["rank1_buffer"] == 0.0
    assert observed["broadcast_buffers"]["rank1_buffer"] == 99.0


def test_gradient_as_bucket_view_makes_every_grad_a_view_into_one_bucket(observed):
    assert observed["gradient_as_bucket_view"]["grads_share_storage"]
    assert not observed["defaults"]["grads_share_storage"]


@pytest.mark.parametrize(
    ("case", "hook_name"),
    [("fp16", "fp16_compress_hook"), ("bf16", "bf16_compress_hook"), ("powersgd", "powerSGD_hook")],
)
def test_comm_hook_is_registered_and_marks_parity_as_not_exact(observed, case, hook_name):
    assert observed["defaults"]["comm_hook"] in (None, "", "builtin_allreduce")
    assert observed[case]["comm_hook"] == hook_name
    assert observed[case]["parity_exact"] is False
    assert observed["defaults"]["parity_exact"] is True


@pytest.mark.parametrize(("case", "tolerance"), [("fp16", 1e-3), ("bf16", 1e-2), ("powersgd", 1e-1)])
def test_compression_hooks_train_close_to_but_not_exactly_like_the_reference(observed, case, tolerance):
    """bf16 all-reduce works on gloo in this torch; were it refused, this test would say so by failing."""
    outcome = parity.compare(observed[case]["final"], reference())
    assert 0 < outcome.max_abs_diff < tolerance, f"{case}: {outcome.max_abs_diff:.3g} in {outcome.worst_parameter}"
    assert parity.compare(observed[case]["final"], observed["defaults"]["final"]).max_abs_diff > 0


@pytest.mark.parametrize("case", [c for c in KNOB_CASES if c not in ("fp16", "bf16", "powersgd")])
def test_exact_knobs_match_the_single_process_reference(observed, case):
    outcome = parity.compare(observed[case]["final"], reference())
    assert outcome.within_tolerance, f"{case}: {outcome.max_abs_diff:.3g} in {outcome.worst_parameter}"


def test_layout_reports_several_buckets_when_the_cap_is_small(observed):
    sizes = observed["tiny_buckets"]["layout"]["bucket_sizes_mb"]
    grad_mb = sum(t.numel() * t.element_size() for t in reference().values()) / MIB
    assert len(sizes) > 1
    assert sum(sizes) == pytest.approx(grad_mb, abs=1e-3)
    assert len(observed["defaults"]["layout"]["bucket_sizes_mb"]) == 1

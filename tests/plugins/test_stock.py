"""`stock` (DistributedDataParallel): each knob reaches the DDP object and changes what it does.

Every check runs on both ranks of the shared world-size-2 gloo group in one call; the tests
read what the ranks observed.
"""

from __future__ import annotations

import functools
import time
from typing import Any

import pytest
import torch
import torch.distributed as dist
from dist_helpers import CLASSES, FEATURES, TinyClassification, run_in_process_group
from torch import nn

import impls
from harness.bucketing import MIB
from harness.comm_timeline import CommTimeline
from harness.config.bench import BenchConfig
from harness.config.grid import expand
from harness.measure.training import LEARNING_RATE, OPTIMIZER, build_model, make_batch
from harness.parity import reference as parity
from harness.rank import worker
from harness.results import store
from impls.stock import POWERSGD_ON_GLOO

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


# ---- the bucket timeline of the compression hooks ------------------------------------------------

TIMED_STEPS = 30


def timed_steps(options: dict[str, Any]) -> dict[str, Any]:
    """Train with the bucket timeline attached; per step, when backward and sync ended (ms from the
    step's start, on the timeline's clock, read right before `begin_step`: so a backward end is never
    early against the timeline's stamps, measured from `begin_step`)."""
    rank = dist.get_rank()
    timeline = CommTimeline(CPU)
    strategy = impls.create("stock", **options)
    assert strategy.attach_timeline(timeline)
    ddp = strategy.wrap(build_model(WORKLOAD, seed=SEED + rank, device=CPU))
    ends = []
    for step in range(TIMED_STEPS):
        started = time.perf_counter()
        timeline.begin_step(step)
        batch = make_batch(WORKLOAD, batch_size=BATCH, seed=SEED, rank=rank, step=step, device=CPU)
        WORKLOAD.loss(ddp, batch).backward()
        strategy.sync_gradients()
        ends.append((time.perf_counter() - started) * 1e3)
        ddp.zero_grad(set_to_none=True)
    timeline.end()
    gradient_numel = sum(p.numel() for p in ddp.parameters())
    gradients = [r for r in timeline.rows() if r["bucket"] >= 0]  # the buffers' broadcast: test_broadcast_timeline
    return {"rows": gradients, "backward_end_ms": ends, "gradient_numel": gradient_numel}


TIMED_CASES = {
    "fp16": {"comm_hook": "fp16", "bucket_cap_mb": 0.002},  # several buckets
    "bf16": {"comm_hook": "bf16", "bucket_cap_mb": 0.002},
    "powersgd": {"comm_hook": "powersgd"},  # one bucket: on gloo, more hang (the reason it is skipped there)
}


def timed_all_cases() -> dict[str, dict[str, Any]]:
    return {name: timed_steps(options) for name, options in TIMED_CASES.items()}


@pytest.fixture(scope="module")
def timed() -> list[dict[str, dict[str, Any]]]:
    return run_in_process_group(timed_all_cases, world_size=2)


@pytest.mark.parametrize("case", list(TIMED_CASES))
def test_every_hooked_collective_is_stamped_done_before_backward_returns(timed, case):
    """DDP waits on the hook's future: the stamp must land before that future completes, never after
    backward has returned (a callback on the same future ran after DDP's wait woke up)."""
    for rank, observed in enumerate(timed):
        rows, ends = observed[case]["rows"], observed[case]["backward_end_ms"]
        assert {row["step"] for row in rows} == set(range(TIMED_STEPS))
        late = [(r["step"], r["bucket"], r["done_ms"], ends[r["step"]]) for r in rows
                if r["done_ms"] is None or r["done_ms"] > ends[r["step"]]]  # fmt: skip
        assert late == [], f"rank {rank}: (step, bucket, done_ms, backward end) {late}"


@pytest.mark.parametrize("case", ["fp16", "bf16"])
def test_half_precision_hooks_record_the_half_size_they_all_reduce(timed, case):
    for observed in timed:
        rows = observed[case]["rows"]
        assert len(rows) > TIMED_STEPS  # several buckets a step
        assert {r["collective"] for r in rows} == {"all_reduce"}
        for step in range(TIMED_STEPS):
            sent = sum(r["bytes"] for r in rows if r["step"] == step)
            assert sent == observed[case]["gradient_numel"] * 2  # every fp32 gradient, as 2-byte floats


POWERSGD_RANK1_NUMEL = (32 + 8) + 32 + (32 + 32) + 32 + (4 + 32) + 4
"""What PowerSGD at rank 1 sends for WithBuffer: P and Q of each weight it compresses (inp 32×8,
hidden 32×32, out 4×32: n + m elements each) and the biases it leaves as they are (32, 32, 4)."""


def test_powersgd_is_one_row_per_bucket_with_the_bytes_its_chain_sends(timed):
    for observed in timed:
        rows = observed["powersgd"]["rows"]
        assert [r["step"] for r in rows] == list(range(TIMED_STEPS))  # one bucket, one row a step
        plain = observed["powersgd"]["gradient_numel"] * 4
        # start_powerSGD_iter=2: steps 0 and 1 all-reduce the bucket as it is, then it compresses.
        assert [(r["collective"], r["bytes"]) for r in rows[:2]] == [("all_reduce", plain)] * 2
        assert {(r["collective"], r["bytes"]) for r in rows[2:]} == {("powersgd", POWERSGD_RANK1_NUMEL * 4)}


# ---- where it cannot run --------------------------------------------------------------------------


def test_powersgd_is_unavailable_on_gloo_and_only_there():
    powersgd = impls.create("stock", comm_hook="powersgd")
    assert powersgd.unavailable_reason(device="cpu", world_size=2) == POWERSGD_ON_GLOO
    assert powersgd.unavailable_reason(device="cuda", world_size=2) is None  # no process group: NCCL on CUDA
    for hook in ("none", "fp16", "bf16"):
        assert impls.create("stock", comm_hook=hook).unavailable_reason(device="cpu", world_size=2) is None


def test_powersgd_asks_the_process_groups_backend_where_there_is_one(single_rank):
    """Inside the ranks the group decides: gloo on GPUs (--backend gloo) hangs as well."""
    assert impls.create("stock", comm_hook="powersgd").unavailable_reason(device="cuda", world_size=1) == (
        POWERSGD_ON_GLOO
    )


def test_a_powersgd_configuration_on_the_cpu_is_skipped_with_its_reason(tmp_path, single_rank):
    config = BenchConfig(gpus=1, impls=("stock",), workloads=("mlp",), options=(("comm_hook", ("powersgd",)),),
                         size="small", steps=2, warmup=1, baseline=False)  # fmt: skip
    context = {"run_id": "t", "started_at": "2025-01-01T00:00:00+00:00", "threads_per_rank": 1}
    configurations = [c.to_json() for c in expand(config, device="cpu")]
    worker.run_configurations(
        {"run_dir": str(tmp_path), "context": context, "configurations": configurations}, single_rank
    )
    [row] = store.read_configs(tmp_path).to_dict("records")
    assert (row["status"], row["error"]) == ("skipped", POWERSGD_ON_GLOO)
    assert store.read_steps(tmp_path).empty

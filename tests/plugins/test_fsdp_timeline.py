"""FSDP's collectives in the bucket timeline: every block's all-gathers and reduce-scatter, stamped
through FSDP2's custom collectives, and the training unchanged by it."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
import torch.distributed as dist
from dist_helpers import CLASSES, FEATURES, TinyClassification, run_in_process_group
from torch import nn

import impls
import workloads
from harness.analysis import overlap
from harness.blocks import model_blocks
from harness.comm_timeline import CommTimeline
from harness.measure.timing import StepTimer
from harness.measure.training import OPTIMIZER, build_model, make_batch, train_step
from impls._support import fsdp_timing

STEPS = 3
CPU = torch.device("cpu")


class FrozenStem(nn.Module):
    """Three blocks, the first and last frozen, and a trained head: block 1's inputs need no gradient."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(FEATURES, 32).requires_grad_(False), nn.Linear(32, 32),
                                     nn.Linear(32, 32).requires_grad_(False)])  # fmt: skip
        self.head = nn.Linear(32, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = torch.tanh(block(x))
        return self.head(x)


def timed_fsdp_steps(timed: bool) -> dict:
    steps = _fsdp_steps(workloads.create("gpt2", size="tiny"), timed)
    return {**steps, "frozen_stem": _fsdp_steps(TinyClassification(model=FrozenStem), timed)["rows"]}


def _fsdp_steps(workload, timed: bool) -> dict:
    strategy = impls.create("fsdp")
    timeline = CommTimeline(CPU)
    attached = strategy.attach_timeline(timeline) if timed else False
    model = strategy.wrap(build_model(workload, seed=0, device=CPU))
    optimizer = strategy.make_optimizer(model.parameters(), OPTIMIZER, lr=1e-3)
    timer = StepTimer()
    for step in range(STEPS):
        batch = make_batch(workload, batch_size=2, seed=0, rank=dist.get_rank(), step=step, device=CPU)
        train_step(
            model=model, workload=workload, strategy=strategy, optimizer=optimizer, batch=batch, timer=timer,
            timeline=timeline, step=step,
        )  # fmt: skip
    state = {k: v.detach().clone() for k, v in strategy.full_state_dict(model).items()}
    return {"attached": attached, "rows": timeline.rows(), "phases": timer.collect(), "state": state}


def test_fsdp_stamps_its_all_gathers_and_reduce_scatters_without_changing_the_training():
    timed = run_in_process_group(timed_fsdp_steps, world_size=2, args=(True,))
    plain = run_in_process_group(timed_fsdp_steps, world_size=2, args=(False,))
    rows, phases = timed[0]["rows"], timed[0]["phases"]
    assert timed[0]["attached"] and not plain[0]["rows"]
    last = [r for r in rows if r["step"] == STEPS - 1]
    kinds = {r["collective"] for r in last}
    assert kinds == {"all_gather", "reduce_scatter"}
    sharded = {r["bucket"] for r in last if r["collective"] == "reduce_scatter"}
    assert len(sharded) >= 2  # a reduce-scatter per sharded module (blocks and root) that has gradients
    # as the step model (harness.perfmodel.sharding.fsdp) schedules them: the root gathered once, kept from forward to
    # backward; each block gathered before its forward and again before its backward; one reduce-scatter each
    blocks = len(model_blocks(build_model(workloads.create("gpt2", size="tiny"), seed=0, device=CPU)))
    gathers = [r for r in last if r["collective"] == "all_gather"]
    assert (len(gathers), len(sharded)) == (1 + 2 * blocks, 1 + blocks)
    # in the order the model issues them where every call blocks: forward's gathers, the root's pre-backward
    # gathering the last block, each block's pre-backward the one before it ahead of its own reduce-scatter
    assert _in_order(last, blocks) == _modelled_order(workloads.create("gpt2", size="tiny"))
    # a frozen stem: torch prefetches it for backward though backward never reaches it, and reduce-scatters block 1
    # (whose inputs need no gradient) at backward's end, after the root: so does the model
    stem = [r for r in timed[0]["frozen_stem"] if r["step"] == STEPS - 1]
    modelled = _modelled_order(TinyClassification(model=FrozenStem))
    assert _in_order(stem, 3) == modelled == (*(("all_gather", k) for k in (0, 1, 2, 3, 3, 2, 1)),
                                              ("reduce_scatter", 0), ("reduce_scatter", 2))  # fmt: skip
    assert all(r["launched_ms"] <= r["done_ms"] for r in last)
    figures = overlap.step_communication(phases[-1], last)
    assert 0 <= figures["exposed_comm_ms"] <= figures["comm_ms"] and figures["comm_ms"] > 0
    for name, value in timed[0]["state"].items():
        assert torch.equal(value, plain[0]["state"][name]), name


def _in_order(rows: list[dict], blocks: int) -> tuple[tuple[str, int], ...]:
    """A step's collectives as launched, each with its unit as the model numbers them (the root 0, block k k + 1;
    the timeline numbers them in shard order, the blocks then the root)."""
    unit = {b: b + 1 for b in range(blocks)} | {blocks: 0}
    return tuple((r["collective"], unit[r["bucket"]]) for r in sorted(rows, key=lambda r: r["launched_ms"]))


def _modelled_order(workload) -> tuple[tuple[str, int], ...]:
    """The collectives harness.perfmodel.sharding.fsdp issues for the workload's profile, where every call blocks."""
    from harness.measure import gradprofile
    from harness.perfmodel.schedule import profile_from_rows
    from harness.perfmodel.sharding import fsdp

    rows = gradprofile.measure(workload, batch_size=2, device=CPU, steps=1, warmup=1)
    link = type("Link", (), {"collective_s": staticmethod(lambda op, nbytes, world: 1e-3 if nbytes else 0.0)})
    step = fsdp.predict_fsdp(profile_from_rows(pd.DataFrame(rows)), gather=link, scatter=link, world_size=2,
                             blocking=True)  # fmt: skip
    return step.issued


class _GpuLikeTimeline(CommTimeline):
    """The timeline as on a GPU (`on_gpu`), with the CPU's clock: what `fsdp_timing` decides from it."""

    @property
    def on_gpu(self) -> bool:
        return True


class _Sharded:
    """Stands in for a fully_shard-ed module: keeps the collectives set on it."""

    def set_custom_all_gather(self, comm) -> None:
        self.all_gather = comm

    def set_custom_reduce_scatter(self, comm) -> None:
        self.reduce_scatter = comm


@pytest.mark.parametrize(("on_gpu", "gather_blocks", "scatter_blocks"), [(False, True, True), (True, True, False)])
def test_all_gathers_hold_compute_up_on_gpus_too_and_reduce_scatters_only_on_the_cpu(
    single_rank, on_gpu, gather_blocks, scatter_blocks
):
    """On a GPU FSDP makes the compute stream wait for each all-gather's event (foreach_all_gather_copy_out);
    its reduce-scatters run on FSDP's own stream, waited for once at the end of backward."""
    timeline = _GpuLikeTimeline(CPU) if on_gpu else CommTimeline(CPU)
    module = _Sharded()
    fsdp_timing.time_collectives([module], timeline)
    timeline.begin_step(0)
    gathered, shard = torch.zeros(4), torch.ones(4)
    assert module.all_gather(gathered, shard, dist.group.WORLD) is None  # blocking: stamped done on return
    scattered = torch.zeros(4)
    assert module.reduce_scatter(scattered, torch.ones(4), dist.group.WORLD, dist.ReduceOp.SUM) is None
    timeline.end()
    rows = {row["collective"]: row for row in timeline.rows()}
    assert (rows["all_gather"]["blocking"], rows["reduce_scatter"]["blocking"]) == (gather_blocks, scatter_blocks)
    assert rows["all_gather"]["done_ms"] is not None and rows["reduce_scatter"]["done_ms"] is not None

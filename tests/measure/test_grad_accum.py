"""Gradient accumulation (`bench --grad-accum K`) on one process: the step trains like one batch of its K
micro-batches, each micro-batch but the last inside the strategy's no_sync(), the phases summed; and the flag's
refusals. No torchrun launch: one rank's arithmetic is what accumulation changes (the reduction across ranks is each
strategy's own, judged by every bench run's parity)."""

from __future__ import annotations

import contextlib
import itertools

import pytest
import torch

import workloads
from harness.analysis import overlap
from harness.config import accumulation
from harness.measure.timing import StepTimer
from harness.measure.training import OPTIMIZERS, batch_seed, build_model, step_batches, train_step
from harness.parity import reference
from harness.protocols import ConfigError, StrategyDefaults

CPU = torch.device("cpu")
SETUP = {"batch_size": 4, "seed": 5, "device": CPU}


class Recorded(StrategyDefaults):
    """One rank's strategy that counts its no_sync() entries and its syncs (there is nothing to reduce)."""

    def __init__(self) -> None:
        self.unsynced, self.syncs = 0, 0

    def wrap(self, model):
        return model

    def sync_gradients(self) -> None:
        self.syncs += 1

    @contextlib.contextmanager
    def no_sync(self):
        self.unsynced += 1
        yield


def trained(grad_accum: int, steps: int, *, batches=step_batches) -> tuple[dict, Recorded, StepTimer]:
    workload = workloads.create("mlp", size="tiny")
    model = build_model(workload, seed=SETUP["seed"], device=CPU)
    optimizer_cls, lr = OPTIMIZERS["sgd"]
    optimizer, strategy, timer = optimizer_cls(model.parameters(), lr=lr), Recorded(), StepTimer()
    for step in range(steps):
        *accumulated, batch = batches(workload, ranks=[0], step=step, grad_accum=grad_accum, **SETUP)
        train_step(model=model, workload=workload, strategy=strategy, optimizer=optimizer, batch=batch, timer=timer,
                   accumulated=accumulated)  # fmt: skip
    return reference.parameters_on_cpu(model), strategy, timer


def expected(grad_accum: int, steps: int) -> dict:
    workload = workloads.create("mlp", size="tiny")
    return reference.reference_run(workload, world_size=1, steps=steps, grad_accum=grad_accum, **SETUP)[0]


def test_k_micro_batches_train_like_one_batch_of_them_all():
    got, strategy, _timer = trained(3, steps=2)
    assert reference.compare(got, expected(3, steps=2)).within_tolerance
    assert (strategy.unsynced, strategy.syncs) == (2 * 2, 2)  # K-1 micro-batches unsynced a step, one sync a step
    # And the check can fail: K=3 is not K=1 three times as long, nor the first micro-batch alone.
    assert not reference.compare(got, expected(1, steps=2)).within_tolerance


def test_micro_batches_that_repeat_one_batch_fail_parity():
    """A broken accumulation that feeds the step's first micro-batch K times trains elsewhere: parity catches it."""

    def first_only(workload, *, grad_accum, **setup):
        return step_batches(workload, grad_accum=1, **setup) * grad_accum

    got, _, _ = trained(3, steps=2, batches=first_only)
    assert not reference.compare(got, expected(3, steps=2)).within_tolerance


def test_forward_and_backward_are_summed_over_the_micro_batches():
    _, _, timer = trained(4, steps=1)
    (row,) = timer.collect()
    marks = timer._steps[0]
    forward = sum(timer.clock.ms(a[1], b[1]) for a, b in itertools.pairwise(marks) if b[0] == "forward")
    assert [phase for phase, _ in marks].count("forward") == 4
    assert row["forward_ms"] == pytest.approx(forward)
    assert row["step_ms"] == pytest.approx(sum(row[f"{p}_ms"] for p in ("forward", "backward", "sync", "optimizer")))


def test_k1_batches_are_those_of_before_and_every_micro_batch_is_its_own():
    assert batch_seed(5, 1, 7) == (5 * 1_000_003 + 1) * 1_000_003 + 7  # the batches every earlier run trained on
    seeds = {batch_seed(5, rank, step, micro) for rank in range(2) for step in range(3) for micro in range(8)}
    assert len(seeds) == 2 * 3 * 8


@pytest.mark.parametrize("text", ["0", "two", "1,,4", "4,4"])
def test_bad_counts_are_refused_naming_the_value(text):
    with pytest.raises(ConfigError, match="--grad-accum"):
        accumulation.accumulation_counts(text)


def test_a_parameter_server_cannot_accumulate_and_says_why():
    assert accumulation.accumulation_counts("1, 8") == (1, 8)
    assert accumulation.refused("rpc_hybrid", 1) is None
    assert "no no_sync" in accumulation.refused("rpc_hybrid", 4)
    assert accumulation.refused("stock", 4) is None
    assert accumulation.batch_words(world_size=8, grad_accum=8, batch_size=8) == "global batch 512 = 8 ranks × K=8 × 8"


def test_the_timer_marks_where_each_micro_batch_ran():
    _, _, timer = trained(2, steps=1)
    (row,) = timer.collect()
    spans = row[overlap.SPANS]
    assert len(spans["forward"]) == len(spans["backward"]) == 2 and len(spans["sync"]) == 1
    (f1, b1, f2, b2) = spans["forward"][0], spans["backward"][0], spans["forward"][1], spans["backward"][1]
    assert f1[0] == 0.0 and f1[1] == b1[0] and b1[1] == f2[0] and f2[1] == b2[0]  # F1 B1 F2 B2, back to back
    assert sum(e - s for s, e in spans["forward"]) == pytest.approx(row["forward_ms"])
    (plain,) = trained(1, steps=1)[2].collect()
    assert overlap.SPANS not in plain  # K=1's timing as before


def test_an_all_gather_in_the_second_forward_is_exposed_in_forward():
    """F1 0-2, B1 2-6, F2 6-8, B2 8-12, sync 12-14, optimizer 14-16; the second forward waits 6-7 for its
    all-gather. From summed durations (forward 0-4, backward 4-12) it read as exposed in backward."""
    phases = {"step_ms": 16.0, "forward_ms": 4.0, "backward_ms": 8.0, "sync_ms": 2.0, "optimizer_ms": 2.0,
              overlap.SPANS: {"forward": [(0.0, 2.0), (6.0, 8.0)], "backward": [(2.0, 6.0), (8.0, 12.0)],
                              "sync": [(12.0, 14.0)], "optimizer": [(14.0, 16.0)]}}  # fmt: skip
    gather = {"step": 0, "bucket": 0, "ready_ms": 6.0, "launched_ms": 6.0, "done_ms": 7.0, "blocking": True}
    found = overlap.step_communication(phases, [gather])
    assert (found["exposed_forward_ms"], found["exposed_backward_ms"]) == (1.0, 0.0)
    assert found["exposed_comm_ms"] == 1.0


def test_the_run_pages_table_says_k_and_the_global_batch():
    """Before, its batch/rank cell read '32' for K=1 and K=4 alike; the console line alone said K."""
    import pandas as pd

    from reports.pages.run.run_page import TABLE_COLUMNS, configs_table

    rows = [{column: None for column, _, _ in TABLE_COLUMNS} for _ in range(2)]
    for row, accum in zip(rows, (1, 4), strict=True):
        row.update(config_id=f"c{accum}", status="ok", impl="stock", world_size=2, batch_size=32, grad_accum=accum)
    page = configs_table(pd.DataFrame(rows).drop(columns="batch"))
    assert "K=4 × 32 = 128 (global batch 256)" in page and "<td>32</td>" in page


def test_the_dry_runs_flops_floor_counts_every_micro_batch():
    """Before, pace.compute_floor_s priced a K=4 step as one micro-batch's FLOPs."""
    from harness.config.grid import Configuration
    from harness.measure.pace import compute_floor_s

    def floor(accum: int) -> float:
        cfg = Configuration(config_id="c", impl="stock", impl_options={}, workload="mlp", size="small", world_size=2,
                            nnodes=1, batch_size=32, steps=3, warmup=1, dtype="fp32", device="cpu", backend="gloo",
                            seed=0, parity=False, grad_accum=accum)  # fmt: skip
        return compute_floor_s(cfg, flops_per_sample=1e6, flops_per_s=1e9, threads=1, cores=2)

    assert floor(4) == pytest.approx(4 * floor(1)) and floor(1) == pytest.approx(4 * 32 * 1e6 / 1e9)


def test_the_micro_batches_made_ahead_are_counted_as_held():
    """The K−1 micro-batches made before the step (so that making them is not timed) sit in the memory peaks: their
    bytes are said (held_ahead_batches_mb), so a reader can take them off what a real loop would hold."""
    from harness.measure.held import MB, batch_bytes, held_as_row

    workload = workloads.create("mlp", size="tiny")
    *ahead, last = step_batches(workload, ranks=[0], step=0, grad_accum=4, **SETUP)
    one = batch_bytes(last)
    assert one == sum(t.numel() * t.element_size() for t in (last if isinstance(last, (tuple, list)) else [last]))
    assert batch_bytes(ahead) == 3 * one > 0 and batch_bytes({"x": ahead}) == 3 * one
    assert held_as_row({"ahead_batch_bytes": 3 * one})["held_ahead_batches_mb"] == pytest.approx(3 * one / MB)

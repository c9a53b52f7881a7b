"""Broadcasts a step waits for are communication, not compute: the model's buffers before each forward
(DDP's and bucketed's, with broadcast_buffers) and ZeRO's updated parameters after its optimizer step are in
the bucket timeline, as blocking collectives, so that comm_ms and the cost split count them."""

from __future__ import annotations

import torch
import torch.distributed as dist
from dist_helpers import run_in_process_group

import impls
import workloads
from harness.analysis import overlap
from harness.comm_timeline import BUFFERS, PARAMETERS, CommTimeline
from harness.measure.timing import StepTimer
from harness.measure.training import OPTIMIZER, build_model, make_batch, train_step
from reports.figures.timeline import collective_name

STEPS = 2
CPU = torch.device("cpu")
TIMED = {"bucketed": {}, "stock": {}, "zero": {}}


def timed_steps() -> dict:
    """Each strategy's last step on resnet18/tiny (BatchNorm buffers): its timeline rows and phases."""
    seen = {}
    workload = workloads.create("resnet18", size="tiny")
    for name, options in TIMED.items():
        strategy, timeline = impls.create(name, **options), CommTimeline(CPU)
        assert strategy.attach_timeline(timeline)
        model = strategy.wrap(build_model(workload, seed=0, device=CPU))
        optimizer = strategy.make_optimizer(model.parameters(), OPTIMIZER, lr=1e-3)
        timer = StepTimer()
        for step in range(STEPS):
            batch = make_batch(workload, batch_size=2, seed=0, rank=dist.get_rank(), step=step, device=CPU)
            train_step(model=model, workload=workload, strategy=strategy, optimizer=optimizer, batch=batch,
                       timer=timer, timeline=timeline, step=step)  # fmt: skip
        seen[name] = {"rows": [r for r in timeline.rows() if r["step"] == STEPS - 1], "phases": timer.collect()[-1]}
    return seen


def test_buffer_and_parameter_broadcasts_are_blocking_collectives_in_the_timeline():
    seen = run_in_process_group(timed_steps, world_size=2)[0]
    for name, step in seen.items():
        rows, phases = step["rows"], step["phases"]
        buffers = [r for r in rows if r["bucket"] == BUFFERS]
        assert len(buffers) == 1 and buffers[0]["collective"] == "broadcast_buffers", name
        assert buffers[0]["blocking"] and buffers[0]["bytes"] > 0
        assert buffers[0]["done_ms"] <= phases["forward_ms"] + 1e-6, name  # before the forward's compute ends
        assert collective_name(_row(buffers[0])) == "broadcast buffers"
        figures = overlap.step_communication(phases, rows)
        in_flight = buffers[0]["done_ms"] - buffers[0]["launched_ms"]
        assert figures["exposed_comm_ms"] >= in_flight - 1e-6, name  # nothing computed while it ran
    parameters = [r for r in seen["zero"]["rows"] if r["bucket"] == PARAMETERS]
    assert len(parameters) == 1 and parameters[0]["blocking"]
    forward, backward, sync = (seen["zero"]["phases"][f"{p}_ms"] for p in ("forward", "backward", "sync"))
    assert parameters[0]["launched_ms"] >= forward + backward + sync - 1e-6  # in the optimizer step
    assert not [r for r in seen["stock"]["rows"] if r["bucket"] == PARAMETERS]


def _row(row: dict):
    import types

    return types.SimpleNamespace(**row)

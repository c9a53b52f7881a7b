"""Gradient-ready profile: when each parameter's gradient is ready during backward, at world size 1.

This is the input of the step-time model (`harness.perfmodel.schedule`): DDP launches a bucket's
all-reduce when the bucket's last gradient is ready, so the times at which gradients become
ready, with the forward and optimizer times, fix how much communication backward can hide.

A post-accumulate-grad hook per parameter stamps the time on the rank's clock (harness.clock: the
wall clock on the CPU, a CUDA event on GPUs, read after the profiled steps, so nothing is
synchronised inside backward). A forward pre-hook on each module that holds parameters stamps when
forward first uses them, and each parameter carries the index of the model's block that holds it
(`harness.blocks.model_blocks`): a sharded strategy gathers a block's parameters before the
block's forward, so these fix how much of its gathering forward can hide (`harness.perfmodel.sharding.fsdp`).
No process group is needed: the model runs alone, as one rank of a data-parallel job does
between its collectives.
"""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from harness.blocks import model_blocks
from harness.clock import Clock
from harness.measure.training import OPTIMIZERS, build_model, forward_precision, make_batch
from harness.protocols import Workload

PROFILE_STEPS = 5
PROFILE_WARMUP = 2


@contextlib.contextmanager
def _ready_hooks(params: list[nn.Parameter], clock, marks: dict[int, Any]) -> Iterator[None]:
    """Stamp marks[i] when parameter i's gradient has been accumulated (each step overwrites)."""

    def hook_for(index: int):
        def hook(_param: torch.Tensor) -> None:
            marks[index] = clock.mark()

        return hook

    handles = [p.register_post_accumulate_grad_hook(hook_for(i)) for i, p in enumerate(params) if p.requires_grad]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


@contextlib.contextmanager
def _use_hooks(model: nn.Module, params: list[nn.Parameter], clock, uses: dict[int, Any]) -> Iterator[None]:
    """Stamp uses[i] when forward first runs a module holding parameter i (a module's own parameters, not its
    children's; a shared parameter at the first of its modules). A parameter read outside any module's
    forward (a weight indexed directly) gets no stamp."""
    index = {id(p): i for i, p in enumerate(params)}

    def hook_for(held: list[int]):
        def hook(_module, _inputs) -> None:
            fresh = [i for i in held if i not in uses]
            if fresh:
                mark = clock.mark()
                uses.update(dict.fromkeys(fresh, mark))

        return hook

    held_by = [(m, [index[id(p)] for p in m.parameters(recurse=False) if id(p) in index]) for m in model.modules()]
    handles = [module.register_forward_pre_hook(hook_for(held)) for module, held in held_by if held]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def _block_of(model: nn.Module) -> dict[int, int]:
    """Each parameter's (by id) block index in `model_blocks` order; those no block holds are absent."""
    return {id(p): i for i, block in enumerate(model_blocks(model)) for p in block.parameters()}


def _one_step(model, workload, optimizer, batch, clock, marks, uses, precision) -> dict[str, Any]:
    marks.clear()
    uses.clear()
    start = clock.mark()
    with precision:
        loss = workload.loss(model, batch)
    backward_start = clock.mark()
    loss.backward()
    backward_end = clock.mark()
    optimizer.step()
    end = clock.mark()
    optimizer.zero_grad(set_to_none=True)
    return {"start": start, "backward_start": backward_start, "backward_end": backward_end, "end": end,
            "ready": dict(marks), "used": dict(uses)}  # fmt: skip


def measure(
    workload: Workload,
    *,
    batch_size: int,
    device: torch.device,
    dtype: str = "fp32",
    optimizer: str = "sgd",
    seed: int = 0,
    steps: int = PROFILE_STEPS,
    warmup: int = PROFILE_WARMUP,
    on_step: Callable[[int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """One row per parameter (registration order, each shared parameter once): its size, its block, the
    median over `steps` of when its gradient was ready, in ms after backward began, and of when forward
    first used it, in ms after forward began; every row
    also carries the step's median forward, backward and optimizer times. `on_step(done, total)`
    after each step, warm-up included (a caller's progress)."""
    model = build_model(workload, seed=seed, device=device)
    params = list(model.parameters())
    names = {id(p): name for name, p in model.named_parameters()}
    optimizer_cls, learning_rate = OPTIMIZERS[optimizer]
    opt = optimizer_cls(params, lr=learning_rate)
    clock = Clock(device)
    marks: dict[int, Any] = {}
    uses: dict[int, Any] = {}
    taken = []
    with _ready_hooks(params, clock, marks), _use_hooks(model, params, clock, uses):
        for step in range(warmup + steps):
            batch = make_batch(workload, batch_size=batch_size, seed=seed, rank=0, step=step, device=device)
            record = _one_step(model, workload, opt, batch, clock, marks, uses, forward_precision(dtype, device))
            if step >= warmup:
                taken.append(record)
            if on_step is not None:
                on_step(step + 1, warmup + steps)
    clock.settle()
    return _rows(params, names, _block_of(model), taken, clock)


def _rows(params, names, block_of, taken, clock) -> list[dict[str, Any]]:
    def median_ms(first: str, last: str) -> float:
        return statistics.median(clock.ms(r[first], r[last]) for r in taken)

    forward, backward, optimizer = (median_ms("start", "backward_start"), median_ms("backward_start", "backward_end"),
                                    median_ms("backward_end", "end"))  # fmt: skip
    rows = []
    for index, param in enumerate(params):
        stamps = [clock.ms(r["backward_start"], r["ready"][index]) for r in taken if index in r["ready"]]
        used = [clock.ms(r["start"], r["used"][index]) for r in taken if index in r["used"]]
        rows.append(
            {
                "param_index": index,
                "param_name": names.get(id(param), str(index)),
                "numel": param.numel(),
                "bytes": param.numel() * param.element_size(),
                "param_dtype": str(param.dtype).removeprefix("torch."),
                "requires_grad": param.requires_grad,
                # A parameter that got no gradient is "ready" when backward ends (DDP with
                # find_unused_parameters marks it so); None only if it never needs one.
                "ready_ms": statistics.median(stamps) if stamps else (backward if param.requires_grad else None),
                "used_ms": statistics.median(used) if used else None,
                "block": block_of.get(id(param)),
                "forward_ms": forward,
                "backward_ms": backward,
                "optimizer_ms": optimizer,
                "steps": len(taken),
            }
        )
    return rows


def record_once(cfg, *, run, device: torch.device, context: dict[str, Any], done: set[tuple]) -> None:
    """Called by the worker after each configuration at world size 1: profile each workload
    setup once a run and store it with the run (results/<run_id>/gradprofile/); a later launch of the
    run (a repeat, a round of `--repeats auto`, a retry) finds its file and profiles nothing. Never
    raises: the profile is for the model, and must not cost the run its measurements."""
    import sys
    import traceback

    from harness.results import model_tables

    key = (cfg.workload_spec, cfg.workload, cfg.size, cfg.batch_size, cfg.dtype, cfg.optimizer)
    if cfg.world_size != 1 or key in done:
        return
    done.add(key)
    try:
        path = model_tables.gradprofile_path(run, workload=cfg.workload, size=cfg.size, batch_size=cfg.batch_size,
                                             dtype=cfg.dtype, optimizer=cfg.optimizer)  # fmt: skip
        if path.is_file():  # an earlier launch of the run (a repeat, a round, a retry) profiled it: 1.2-1.7 s here
            return
        workload = cfg.make_workload()
        if workload.unavailable_reason(device=device.type):
            return
        # No more profiled steps than the configuration measured: the profile must not cost more than the run.
        rows = measure(workload, batch_size=cfg.batch_size, device=device, dtype=cfg.dtype, optimizer=cfg.optimizer,
                       seed=cfg.seed, steps=min(PROFILE_STEPS, cfg.steps),
                       warmup=min(PROFILE_WARMUP, max(cfg.warmup, 1)))  # fmt: skip
        setup = {"run_id": context.get("run_id"), "workload": cfg.workload, "size": cfg.size,
                 "batch_size": cfg.batch_size, "dtype": cfg.dtype, "optimizer": cfg.optimizer,
                 "device": device.type, "threads_per_rank": context.get("threads_per_rank")}  # fmt: skip
        model_tables.write_gradprofile(path, [{**setup, **row} for row in rows])
    except Exception:
        traceback.print_exc(file=sys.stderr)

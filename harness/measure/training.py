"""The training step every strategy runs, and the seeds that make its data reproducible.

Kept apart from the worker so that the parity reference runs exactly the same step.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from harness.blocks import record_blocks
from harness.comm_timeline import CommTimeline
from harness.measure.timing import StepTimer
from harness.protocols import Strategy, Workload

OPTIMIZERS = {"sgd": (torch.optim.SGD, 0.01), "adam": (torch.optim.Adam, 1e-3), "adamw": (torch.optim.AdamW, 1e-3)}
"""--optimizer choices: (class, learning rate). Adam and AdamW have state (two moments per parameter),
which is what ZeRO and FSDP shard; plain SGD has none."""
OPTIMIZER, LEARNING_RATE = OPTIMIZERS["sgd"]  # the default


def batch_seed(seed: int, rank: int, step: int, micro: int = 0) -> int:
    """Every rank sees different data, identical from run to run; with gradient accumulation every micro-batch of a
    step too. The first micro-batch (`micro` 0) is the step's batch without accumulation, so that `--grad-accum 1`
    trains on the batches it always did."""
    base = (seed * 1_000_003 + rank) * 1_000_003 + step
    return base if micro == 0 else base * 1_000_003 + micro


def make_batch(
    workload: Workload, *, batch_size: int, seed: int, rank: int, step: int, device: torch.device, micro: int = 0
) -> Any:
    generator = torch.Generator(device=device)
    generator.manual_seed(batch_seed(seed, rank, step, micro))
    return workload.make_batch(batch_size, device=device, generator=generator)


def step_batches(
    workload: Workload,
    *,
    batch_size: int,
    seed: int,
    ranks: Sequence[int],
    step: int,
    device: torch.device,
    grad_accum: int = 1,
) -> list[Any]:
    """A step's `grad_accum` micro-batches, each every rank in `ranks`' batch of it concatenated (one rank's own, or
    the whole job's for a single-process strategy), made before the step: its time is the training's alone."""

    def micro_batch(micro: int) -> Any:
        return concat_batches([make_batch(workload, batch_size=batch_size, seed=seed, rank=rank, step=step,
                                          device=device, micro=micro) for rank in ranks])  # fmt: skip

    return [micro_batch(micro) for micro in range(grad_accum)]


def concat_batches(batches: list[Any]) -> Any:
    """One batch from several of the same structure (tensors, tuples, lists, dicts), along dim 0."""
    if len(batches) == 1:
        return batches[0]
    first = batches[0]
    if isinstance(first, torch.Tensor):
        return torch.cat(batches)
    if isinstance(first, dict):
        return {key: concat_batches([b[key] for b in batches]) for key in first}
    if isinstance(first, tuple) and hasattr(first, "_fields"):  # a namedtuple takes its fields one by one
        return type(first)(*(concat_batches(list(parts)) for parts in zip(*batches, strict=True)))
    if isinstance(first, (tuple, list)):
        return type(first)(concat_batches(list(parts)) for parts in zip(*batches, strict=True))
    raise TypeError(f"cannot concatenate batches of type {type(first).__name__}")


def build_model(workload: Workload, *, seed: int, device: torch.device) -> nn.Module:
    """The workload's model, initialised from `seed`. On a GPU it is built there directly (the
    initialisation runs as kernels, from the GPU's generator), not on the CPU and then copied:
    for gpt2/full that is seconds of every configuration's fixed cost. The weights then differ
    from a CPU build's, and every build of a run (the ranks', the parity reference's) is alike."""
    torch.manual_seed(seed)
    device = torch.device(device)
    if device.type == "cpu":
        model = workload.build_model()
    else:
        with device:
            model = workload.build_model().to(device)  # .to: anything the workload made on the CPU on purpose
    if not any(p.requires_grad for p in model.parameters()):  # else each strategy fails its own obscure way
        raise ValueError(f"the workload's model ({type(model).__name__}) has no parameter that requires a gradient: "
                         f"data parallelism has nothing to train or synchronise")  # fmt: skip
    record_blocks(model, workload.blocks(model))  # for a sharding strategy's wrap
    return model


AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def forward_precision(dtype: str, device: torch.device) -> contextlib.AbstractContextManager:
    """Autocast for bf16/fp16 runs (parameters and gradients stay fp32); nothing for fp32."""
    if dtype == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=AUTOCAST_DTYPES[dtype])


def grad_scaler(dtype: str, device: torch.device) -> torch.amp.GradScaler | None:
    """fp16's loss scaling, as any fp16 training has it (torch's defaults: 2^16 to start, halved on an inf or NaN
    in the gradients, whose step is skipped); None in the other dtypes. FSDP2's gradients are DTensor shards: torch's
    own unscale all-reduces their inf check over the mesh (torch >= 2.5), so every rank skips the same steps."""
    return torch.amp.GradScaler(torch.device(device).type) if dtype == "fp16" else None


def scaled_step(optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler | None) -> bool:
    """The optimizer's step, through the scaler where there is one (unscale, inf check, the step unless skipped, the
    scale's update): whether the scaler skipped it. The inf check is read on the host by the scaler's step itself."""
    if scaler is None:
        optimizer.step()
        return False
    scaler.step(optimizer)
    before = scaler.get_scale()
    scaler.update()
    return scaler.get_scale() < before  # the scale backs off on an inf or NaN, and only then (torch's public word)


def set_tf32(enabled: bool) -> None:
    """`--tf32`: fp32 matmuls and convolutions on TF32 tensor cores, or neither. Set once per rank
    before the model is built. Off also turns off cuDNN's TF32, which torch enables by default, so
    that a row's `tf32 = false` means no TF32 anywhere (NVIDIA_TF32_OVERRIDE=0 can still veto it
    on, below torch: run.json's env_vars records it)."""
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled
    torch.set_float32_matmul_precision("high" if enabled else "highest")


def train_step(
    *,
    model: nn.Module,
    workload: Workload,
    strategy: Strategy,
    optimizer: torch.optim.Optimizer,
    batch: Any,
    timer: StepTimer,
    precision: contextlib.AbstractContextManager | None = None,
    after_optimizer_step: Callable[[], None] | None = None,
    timeline: CommTimeline | None = None,
    step: int = 0,
    before_backward: Callable[[], None] | None = None,
    scaler: torch.amp.GradScaler | None = None,
    accumulated: Sequence[Any] = (),
) -> bool:
    """One step, timed per phase; with a `timeline`, the strategy's collectives are stamped from the
    step's start (the timer's), as step `step`. `before_backward`: an injected straggler's delay
    (harness.handoff.faults), inside the backward phase. `scaler` (fp16's, `grad_scaler`): the loss scaled before
    backward, its unscale and inf check timed with the optimizer's step. Whether the scaler skipped the step.

    `accumulated`: gradient accumulation's micro-batches before `batch`, each run forward and backward inside the
    strategy's `no_sync()` (gradients add up locally, nothing is reduced); `batch`, the last, is run outside it and
    synchronised. Each micro-batch's loss is divided by their number, so that the step trains as one batch of them
    all. The forward and backward phases are the sums over the micro-batches; sync is what follows the last
    backward."""
    timer.start()
    if timeline is not None:
        timeline.begin_step(step)
    micro_batches = [*accumulated, batch]
    for index, micro_batch in enumerate(micro_batches):
        synced = index == len(micro_batches) - 1
        with contextlib.nullcontext() if synced else strategy.no_sync():
            delay = before_backward if synced else None  # a straggler's, once a step
            _forward_backward(model, workload, micro_batch, timer, precision=precision, scaler=scaler,
                              before_backward=delay, share=len(micro_batches))  # fmt: skip
    strategy.sync_gradients()
    timer.lap("sync")
    skipped = scaled_step(optimizer, scaler)
    timer.lap("optimizer")
    if after_optimizer_step is not None:  # e.g. to see what a rank holds while gradients still exist
        after_optimizer_step()
    # Untimed, as the step's end: it lets the hook above see the gradients. The strategy says how
    # (dropping them costs microseconds; DDP's bucket views must be zeroed in place instead).
    optimizer.zero_grad(set_to_none=strategy.zero_grad_set_to_none)
    return skipped


def _forward_backward(model, workload, batch, timer: StepTimer, *, precision, scaler, before_backward, share: int):
    """One micro-batch forward and backward, timed as the step's forward and backward (the timer sums repeated
    phases); its loss divided by `share`, the micro-batches of the step (1: the loss as it is, not divided)."""
    with precision or contextlib.nullcontext():
        loss = workload.loss(model, batch)
        loss = loss / share if share > 1 else loss
    timer.lap("forward")
    if before_backward is not None:
        before_backward()
    (loss if scaler is None else scaler.scale(loss)).backward()
    timer.lap("backward")

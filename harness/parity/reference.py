"""Gradient parity: did the strategy train exactly like one process on the whole batch?

The reference is one process that, for every step, runs each rank's batch in turn,
accumulating gradients, then divides by the number of ranks and steps the optimizer.
For models whose loss is a mean over independent samples that equals one process on the
concatenated batch; for BatchNorm it is what data parallelism without SyncBatchNorm means
(statistics per rank's batch). Parameters are compared; buffers are not (DDP broadcasts
rank 0's buffers, which no single-process run reproduces).

The tolerance follows the *compute* dtype: under bf16/fp16 autocast a parameter that differs
from the reference by one fp32 rounding can round to another bf16 value in the next forward,
and training carries that on, so those runs are allowed a share of each parameter's own movement
(`COMPUTE_RTOL`). A wrong reduction (a sum for a mean, a bucket left out) moves parameters by a
large share of their movement and still fails in every dtype: by the tolerance, or, for a parameter that moves less
than it, by that share (`harness.parity.movement`).

Adam and its kind (an optimizer with an `eps`: it divides by a running gradient magnitude) move an element by about
the learning rate a step whatever its gradient's size: where the gradient is within rounding of zero, the update's
sign and size are rounding too (`SignLike`). Such an element is allowed 2·lr more for each step its gradient was
that close to zero; every other element keeps the dtype's tolerance, under which a missing reduction, a wrong
learning rate or a parameter left unstepped still fails.

On a GPU, cuDNN picks non-deterministic algorithms by default, and two identical single-process
trainings of a small ResNet differ by up to 0.9 after 20 steps (measured on an H200): parity
there is judged on a replay under deterministic algorithms (`deterministic_algorithms`), with
the reference computed the same way, while the timed steps keep the fast algorithms.

A strategy with other semantics has its own reference: rpc_hybrid's parameter server
(harness.parity.parameter_server), judged on updates, since its difference from plain data
parallelism is the size of some updates.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
from collections.abc import Callable, Iterator

import torch
from torch import nn

from harness.measure.training import (
    OPTIMIZERS,
    build_model,
    concat_batches,
    forward_precision,
    grad_scaler,
    make_batch,
    scaled_step,
)
from harness.protocols import Workload
from harness.results.values import LARGEST_IN

# (atol, rtol) per parameter dtype after a few steps.
TOLERANCE = {
    torch.float64: (1e-8, 1e-6),
    torch.float32: (1e-5, 1e-4),
    torch.bfloat16: (1e-2, 1e-2),
    torch.float16: (1e-3, 1e-3),
}


COMPUTE_RTOL = {"fp32": 0.0, "bf16": 1e-2, "fp16": 2e-3}
"""Allowance per compute dtype, as a share of the largest change of each parameter over the run
(about 2.5 times the dtype's rounding step: bf16 2^-8, fp16 2^-11); fp32 keeps `TOLERANCE` alone."""


@contextlib.contextmanager
def deterministic_algorithms() -> Iterator[None]:
    """cuDNN's deterministic algorithms (and no autotuning) inside the block; the flags as they were after it."""
    before = (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    try:
        yield
    finally:
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = before


@dataclasses.dataclass(frozen=True)
class ParityResult:
    max_abs_diff: float
    within_tolerance: bool
    worst_parameter: str | None
    allowed: float | None = None  # what the largest difference was allowed, at its element (`compare`)

    def where(self) -> str:
        """Where it differs most, for the row's parity note: a difference of 0 has no 'largest' to name."""
        if self.max_abs_diff == 0:
            return "identical to the reference in every parameter"
        return f"{LARGEST_IN}{self.worst_parameter}"


NEAR_ZERO_EPS = 10
"""An averaged gradient within this many times the optimizer's `eps` of zero, but not 0, is within rounding of zero
for Adam's update lr·m̂/(√v̂ + eps): its slope there is lr/eps, so a reordering's rounding of the gradient moves the
update by a share of lr. A gradient of exactly 0 (a unit ReLU left dead, an embedding row no batch used) is 0 in
every order of summing. Measured: FSDP at one rank on hf:t5/small, AdamW, 4 steps: the 46 of 8.4 M elements that
differed from the reference by over 1e-6 all had a gradient within 5.1e-8 (5 eps) of zero at some step, none of them
0; every element whose gradient never was differed by at most 6.2e-7, every one with a gradient of 0 by 9.2e-7."""


@dataclasses.dataclass(frozen=True)
class SignLike:
    """Where a sign-like optimizer's update is rounding (`NEAR_ZERO_EPS`): per parameter, the count of steps at which
    each element's averaged gradient was within rounding of zero (uint8), and what each such step allows: 2·lr, an
    update of lr the one way in the reference and the other in the strategy."""

    steps: dict[str, torch.Tensor]
    step_allowance: float

    def at(self, name: str, device: torch.device) -> torch.Tensor | None:
        """The parameter's allowance per element, on `device` (None where it has none)."""
        counts = self.steps.get(name)
        return None if counts is None else counts.to(device).float().mul_(self.step_allowance)


class NearZeroSteps:
    """Counts, per element, the steps at which the reference's averaged gradient is within rounding of zero for a
    sign-like optimizer (one with `eps`); None (`result`) for the others, whose update is linear in the gradient."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        group = optimizer.param_groups[0]
        self.eps, self.lr = group.get("eps"), group["lr"]
        self.names = {id(p): name for name, p in model.named_parameters()}
        self.steps: dict[str, torch.Tensor] = {}
        self.was_large: dict[str, torch.Tensor] = {}

    def count(self, model: nn.Module, scale: float) -> None:
        """One step's gradients, `scale` times their true size (fp16's loss scale, 1 otherwise). A step counts only
        where no earlier step's gradient was beyond rounding: once one was, Adam's second moment keeps it (√v̂ ≫ eps
        for the steps a run takes), and a gradient near zero moves the update by its rounding alone, not by lr."""
        if self.eps is None:
            return
        for p in model.parameters():
            if p.grad is not None:
                size, name = p.grad.abs(), self.names[id(p)]
                large = size.gt(NEAR_ZERO_EPS * self.eps * scale)
                before = self.was_large.get(name)
                near = large.logical_not().logical_and_(size.gt(0))
                if before is not None:
                    near.logical_and_(before.logical_not())
                    large.logical_or_(before)
                self.was_large[name] = large
                near = near.to(torch.uint8)
                self.steps[name] = near if name not in self.steps else self.steps[name].add_(near)

    def result(self) -> SignLike | None:
        if self.eps is None:
            return None
        kept = {name: t.cpu() for name, t in self.steps.items() if t.any()}  # none near zero: nothing to allow
        return SignLike(kept, 2 * self.lr)


def reference_parameters(workload: Workload, **setup) -> dict[str, torch.Tensor]:
    """Parameters of the single-process reference after `steps` steps, on the CPU (see `reference_run`)."""
    return reference_run(workload, **setup)[0]


def reference_run(
    workload: Workload,
    *,
    world_size: int,
    batch_size: int,
    steps: int,
    seed: int,
    device: torch.device,
    dtype: str = "fp32",
    optimizer: str = "sgd",
    on_step: Callable[[int], None] | None = None,
    sign_like: list[SignLike | None] | None = None,
    grad_accum: int = 1,
    nudged: bool = False,
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """(final, initial) parameters of the single-process reference over `steps` steps, on the CPU. With
    `grad_accum` K, each rank's K micro-batches of a step are run in turn too, and the summed gradients divided by
    world_size × K: one process on the step's whole world × K × batch_size samples, which no no_sync() can enter.
    `nudged`: each averaged gradient one rounding step larger, as another order of summing may leave it
    (`movement.beyond_rounding`).

    `on_step(step)` after each step tells the launcher the reference is still moving; `sign_like`, where given, is
    appended the run's `SignLike` (None for an optimizer whose update is linear in the gradient). In fp16 every
    rank's loss is scaled as the strategies' are (`grad_scaler`), and a step whose summed gradients hold an inf is
    skipped, as the strategies skip one whose reduced gradients do.
    """
    model = build_model(workload, seed=seed, device=device)
    initial = parameters_on_cpu(model)
    optimizer_cls, learning_rate = OPTIMIZERS[optimizer]
    optimizer = optimizer_cls(model.parameters(), lr=learning_rate)
    scaler = grad_scaler(dtype, device)
    near_zero = NearZeroSteps(model, optimizer)
    for step in range(steps):
        for rank, micro in itertools.product(range(world_size), range(grad_accum)):
            batch = make_batch(workload, batch_size=batch_size, seed=seed, rank=rank, step=step, device=device,
                               micro=micro)  # fmt: skip
            with forward_precision(dtype, device):
                loss = workload.loss(model, batch)
            (loss if scaler is None else scaler.scale(loss)).backward()
        for p in model.parameters():
            if p.grad is not None:
                p.grad.div_(world_size * grad_accum)
                if nudged:
                    p.grad.copy_(torch.nextafter(p.grad, p.grad * 2))  # away from 0; a 0 stays 0
        near_zero.count(model, 1.0 if scaler is None else scaler.get_scale())
        scaled_step(optimizer, scaler)
        optimizer.zero_grad(set_to_none=True)
        if on_step is not None:
            on_step(step)
    if sign_like is not None:
        sign_like.append(near_zero.result())
    return parameters_on_cpu(model), initial


SUMS_FROM = 1.6
"""A loss over two ranks' batches together this many times their losses' mean or more sums over samples
(a mean gives 1; a sum 2, exactly, where samples are independent)."""


def loss_growth(workload: Workload, *, batch_size: int, seed: int, device: torch.device, dtype: str = "fp32") -> float:
    """The loss of two ranks' batches as one batch over the mean of their own losses, at the model's first
    parameters: 1 for a mean over samples, 2 for a sum. Data parallelism averages the ranks' gradients, which
    equals one process's on the whole batch only for a mean; for a sum each step is 1/N of that one."""
    model = build_model(workload, seed=seed, device=device)
    batches = [make_batch(workload, batch_size=batch_size, seed=seed, rank=rank, step=0, device=device)
               for rank in range(2)]  # fmt: skip
    with torch.no_grad(), forward_precision(dtype, device):
        alone = [float(workload.loss(model, batch)) for batch in batches]
        together = float(workload.loss(model, concat_batches(batches)))
    mean = sum(alone) / 2
    return together / mean if mean else float("nan")


def parameters_on_cpu(model: nn.Module) -> dict[str, torch.Tensor]:
    """Named parameters (each tied parameter once), copied to the CPU."""
    return {name: p.detach().to("cpu", copy=True) for name, p in model.named_parameters()}


def state_on_cpu(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {name: t.detach().to("cpu", copy=True) for name, t in state.items()}


def detached(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The state's tensors where they are, without autograd and without a copy: what `compare` judges once the
    model that trained them is released (they keep only the parameters alive)."""
    return {name: t.detach() for name, t in state.items()}


def allowances(
    expected: dict[str, torch.Tensor], initial: dict[str, torch.Tensor] | None, *, compute_dtype: str
) -> dict[str, float] | None:
    """What an autocast run may differ by beyond `TOLERANCE`, per parameter: `COMPUTE_RTOL` of its largest change
    from `initial` over the reference's steps; None in fp32. A property of the reference alone, so computed once
    with it (a pass over two model-sized states that every verdict repeated)."""
    share = COMPUTE_RTOL[compute_dtype]
    if not share:
        return None
    if initial is None:
        raise ValueError(f"judging a {compute_dtype} run needs the reference's initial parameters")
    return {name: share * _largest_gap(ref, initial[name]) if ref.numel() else 0.0 for name, ref in expected.items()}


def compare(
    actual: dict[str, torch.Tensor],
    expected: dict[str, torch.Tensor],
    *,
    initial: dict[str, torch.Tensor] | None = None,
    allowance: dict[str, float] | None = None,
    compute_dtype: str = "fp32",
    sign_like: SignLike | None = None,
) -> ParityResult:
    """Every parameter within the tolerance of its dtype, plus, for autocast runs, `COMPUTE_RTOL` of the
    parameter's largest change from `initial` (`allowance`: those figures as `allowances` gave them), plus, under a
    sign-like optimizer, 2·lr at each step an element's gradient was within rounding of zero (`sign_like`). Compared
    where `actual` lives (a GPU's state is not copied to the host; the reference is brought to it a parameter at
    a time)."""
    missing = sorted(set(expected) - set(actual))
    if missing:
        raise KeyError(f"parameters missing from the strategy's state: {missing[:5]}")
    if allowance is None:
        allowance = allowances(expected, initial, compute_dtype=compute_dtype)
    worst_name, worst_diff, worst_allowed, ok = None, 0.0, None, True
    for name, ref in expected.items():
        atol, rtol = TOLERANCE.get(ref.dtype, TOLERANCE[torch.float32])
        if allowance is not None:
            atol += allowance[name]
        got = actual[name].detach()
        per_element = None if sign_like is None else sign_like.at(name, got.device)
        diff, close, allowed = _difference(got.to(ref.dtype), ref.to(got.device), atol=atol, rtol=rtol,
                                           per_element=per_element)  # fmt: skip
        ok = ok and close
        if diff >= worst_diff:
            worst_name, worst_diff, worst_allowed = name, diff, allowed
    return ParityResult(max_abs_diff=worst_diff, within_tolerance=ok, worst_parameter=worst_name,
                        allowed=worst_allowed)  # fmt: skip


def _largest_gap(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a − b|, in the tensors' own dtype (one temporary, no float64 copies)."""
    return torch.sub(a, b).abs_().max().item()


def _difference(
    got: torch.Tensor, ref: torch.Tensor, *, atol: float, rtol: float, per_element: torch.Tensor | None = None
) -> tuple[float, bool, float]:
    """(max |got − ref|, every element within atol + rtol·|ref| (+ `per_element`, a sign-like optimizer's allowance
    where the gradient was within rounding of zero): torch.allclose's rule, NaN never close, the bound
    at the element of that largest difference: the tolerance the run page names beside it), in the
    parameters' own dtype. In float64, as this was first written, gpt2/full's 124 M parameters took 5 s a
    verdict on two cores, most of each GPU configuration's parity; two nearby floats subtract exactly. Where the
    largest difference is within atol alone every element is (atol + rtol·|ref| ≥ atol), and the element-wise
    bound is not computed: a NaN's largest difference is NaN, never ≤ atol, so it still meets the bound."""
    if not ref.numel():
        return 0.0, True, atol
    gap = torch.sub(got, ref).abs_()
    where = int(gap.argmax())
    largest = gap.flatten()[where].item()
    allowed = atol + rtol * abs(ref.flatten()[where].item())
    if per_element is not None:
        allowed += per_element.flatten()[where].item()
    if largest <= atol:
        return largest, True, allowed
    bound = ref.abs().mul_(rtol).add_(atol)
    if per_element is not None:
        bound.add_(per_element)
    return largest, bool(gap.le(bound).all()), allowed

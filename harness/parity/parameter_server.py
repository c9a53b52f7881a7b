"""rpc_hybrid's reference: the parameter-server semantics, judged on updates rather than parameters.

Its difference from plain data parallelism is the size of some updates (the remote part steps once per trainer),
so the parameters stay close to their initial values and within `reference.compare`'s tolerance either way; the
updates differ by a factor, and `compare_updates` judges those.
"""

from __future__ import annotations

import torch

from harness.measure.training import OPTIMIZERS, build_model, forward_precision, make_batch
from harness.parity.reference import ParityResult, parameters_on_cpu
from harness.protocols import Workload


def parameter_server_reference(
    workload: Workload,
    *,
    trainers: int,
    batch_size: int,
    steps: int,
    seed: int,
    device: torch.device,
    dtype: str = "fp32",
    optimizer: str = "sgd",
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """(final, initial) parameters of `steps` steps of the parameter-server semantics (rpc_hybrid), on the CPU.

    One process, every trainer's batch in turn from the same parameters; then the dense part
    (everything but `workload.remote_part`) steps once with the mean of the trainers' gradients,
    as DDP does, and the remote part steps once per trainer, with that trainer's gradient alone,
    through an optimizer of its own per trainer (as DistributedOptimizer makes one per trainer on
    the server). With SGD the remote part so moves by the sum of the trainers' updates. The
    initial parameters come with the final ones, for `compare_updates`.
    """
    model = build_model(workload, seed=seed, device=device)
    initial = parameters_on_cpu(model)
    remote = list(model.get_submodule(workload.remote_part).parameters())
    remote_ids = {id(p) for p in remote}
    dense = [p for p in model.parameters() if id(p) not in remote_ids]
    optimizer_cls, learning_rate = OPTIMIZERS[optimizer]
    dense_optimizer = optimizer_cls(dense, lr=learning_rate)
    remote_optimizers = [optimizer_cls(remote, lr=learning_rate) for _ in range(trainers)]
    for step in range(steps):
        remote_grads = []
        for rank in range(trainers):
            batch = make_batch(workload, batch_size=batch_size, seed=seed, rank=rank, step=step, device=device)
            with forward_precision(dtype, device):
                loss = workload.loss(model, batch)
            loss.backward()
            remote_grads.append([p.grad for p in remote])
            for p in remote:
                p.grad = None  # the next trainer's gradient is its own, not accumulated
        for p in dense:
            if p.grad is not None:
                p.grad.div_(trainers)
        dense_optimizer.step()
        for remote_optimizer, grads in zip(remote_optimizers, remote_grads, strict=True):
            for p, grad in zip(remote, grads, strict=True):
                p.grad = grad
            remote_optimizer.step()
        model.zero_grad(set_to_none=True)
    return parameters_on_cpu(model), initial


UPDATE_RTOL = {torch.float64: 1e-6, torch.float32: 1e-3}
"""Relative tolerance on a parameter's update (its change over the run), per dtype; 1e-2 for others."""


def compare_updates(
    actual: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], initial: dict[str, torch.Tensor]
) -> ParityResult:
    """Like `compare`, but judges each parameter's change from `initial`, relative to the largest change.

    For a strategy whose semantics differ from another's only in how large some updates are (a
    sum over trainers instead of a mean), the parameters themselves stay close to their initial
    values and within `compare`'s tolerance either way; the updates differ by a factor. Allowed:
    UPDATE_RTOL × the parameter's largest expected update, plus a few float32 rounding steps of
    the parameter (the server may apply the trainers' updates in another order).
    """
    worst_name, worst_diff, ok = None, 0.0, True
    for name, ref in expected.items():
        got, start = actual[name].double(), initial[name].double()
        change, ref_change = got - start, ref.double() - start
        rtol = UPDATE_RTOL.get(ref.dtype, 1e-2)
        rounding = 8 * torch.finfo(ref.dtype).eps * ref.double().abs()
        allowed = rtol * ref_change.abs().max() + rounding if ref.numel() else rounding
        ok = ok and bool(((change - ref_change).abs() <= allowed).all())
        diff = (got - ref.double()).abs().max().item() if ref.numel() else 0.0
        if diff >= worst_diff:
            worst_name, worst_diff = name, diff
    return ParityResult(max_abs_diff=worst_diff, within_tolerance=ok, worst_parameter=worst_name)

"""Pieces several strategies share. Private (its folder's leading underscore): not a plug-in."""

from __future__ import annotations

from harness.protocols import lazy_module, no_grad

torch = lazy_module("torch")
dist = lazy_module("torch.distributed")
nn = lazy_module("torch.nn")


@no_grad
def broadcast_module_state(model: nn.Module, *, src: int = 0) -> None:
    """Make every rank start from rank `src`'s parameters and buffers, as DDP does at wrap."""
    for tensor in [*model.parameters(), *model.buffers()]:
        dist.broadcast(tensor.data, src=src)


@no_grad
def broadcast_tensors(tensors: list[torch.Tensor], *, src: int = 0) -> None:
    """Rank `src`'s values of `tensors` to every rank, coalesced into few messages where torch offers
    it (the call DDP makes to broadcast buffers), one broadcast per tensor otherwise."""
    coalesced = getattr(dist, "_broadcast_coalesced", None)
    if coalesced is None:
        for tensor in tensors:
            dist.broadcast(tensor, src=src)
        return
    coalesced(dist.group.WORLD, tensors, BROADCAST_BUCKET_BYTES, src)


BROADCAST_BUCKET_BYTES = 250 * 1024 * 1024
"""The message size DDP coalesces its buffer broadcasts into (its broadcast_bucket_size)."""


DDP_WARMUP = {"cuda": 11}
"""Warm-up steps a strategy built on torch DDP needs before its steps are steady. DDP times its first 10
iterations for its logger (then one in 100): at each of the next forwards' start it waits for the
previous iteration's CUDA events, which drains the queue the host had run ahead to fill, so the forward's
kernels wait for their launches. On an H200 with ResNet-50 that cost 2.3-2.5 ms a step, all in forward,
until the 11th forward had run. The CPU timer waits for nothing."""


def collective_backend(device: str) -> str:
    """The backend this rank's collectives run on: the default process group's once there is one
    (the harness asks from inside its ranks, where `--backend gloo` may run on GPUs); before that,
    the harness's default for `device` (NCCL on CUDA, gloo on the CPU)."""
    if dist.is_available() and dist.is_initialized():
        return str(dist.get_backend())
    return "nccl" if device == "cuda" else "gloo"


def trainable_parameters(model: nn.Module) -> list[nn.Parameter]:
    """Parameters that get gradients, each once even when shared (tied) between modules."""
    return [p for p in model.parameters() if p.requires_grad]


def zero_missing_grads(params: list[nn.Parameter]) -> None:
    """A parameter that got no gradient on this rank still takes part in the all-reduce."""
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)


def nbytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def group_by_dtype_and_device(params: list[nn.Parameter]) -> dict[tuple[torch.dtype, torch.device], list[nn.Parameter]]:
    """A collective moves one dtype on one device, so flat buffers never mix them. Order is kept."""
    groups: dict[tuple[torch.dtype, torch.device], list[nn.Parameter]] = {}
    for p in params:
        groups.setdefault((p.dtype, p.device), []).append(p)
    return groups


def flat_buffer_with_views(params: list[nn.Parameter]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """One zeroed flat buffer holding every parameter's gradient, and a view shaped like each parameter.

    All `params` must share one dtype and device.
    """
    buffer = torch.zeros(sum(p.numel() for p in params), dtype=params[0].dtype, device=params[0].device)
    views, offset = [], 0
    for p in params:
        views.append(buffer[offset : offset + p.numel()].view_as(p))
        offset += p.numel()
    return buffer, views


@no_grad
def stage_mean_gradient(param: nn.Parameter, view: torch.Tensor, world_size: int) -> None:
    """Write .grad / world_size into its slot of a flat buffer, in one pass (copy and divide fused).

    Dividing before the all-reduce (SUM) gives the mean without a second pass over the buffer;
    a missing gradient (none on this rank) counts as zeros, so every rank joins the collective.
    """
    grad = param.grad
    if grad is None:
        view.zero_()
    elif grad.data_ptr() == view.data_ptr():
        view.div_(world_size)  # .grad already is this slot (left from the previous step)
    else:
        torch.div(grad, world_size, out=view)


def point_grads_at_views(params: list[nn.Parameter], views: list[torch.Tensor]) -> None:
    """Make each .grad the reduced slot itself: saves copying the buffer back, gradient by gradient."""
    for p, view in zip(params, views, strict=True):
        if p.grad is not view:
            p.grad = view

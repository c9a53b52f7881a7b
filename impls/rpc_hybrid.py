"""`rpc_hybrid`: DDP over the dense part, the workload's remote part on a parameter server over RPC.

The pattern PyTorch documents for large embedding tables (DDP combined with
`torch.distributed.rpc`): N trainers and one parameter server. The server holds the workload's
`remote_part` (e.g. an EmbeddingBag) behind an RRef made with `rpc.remote`; on each trainer that
submodule is replaced by `RemotePart`, whose forward is an RPC to it, and the rest is wrapped in
DDP over the trainers' process group. A step runs inside a distributed-autograd context:

    loss = workload.loss(model, batch)               # the remote forward is an RPC to the server
    dist_autograd.backward(context_id, [loss])       # DDP all-reduces the dense gradients (mean);
                                                     # the remote output's gradient goes back to the server
    optimizer.step(context_id)                       # DistributedOptimizer: dense on the trainer,
                                                     # remote on the server, with this trainer's gradient

What a step computes, exactly: the dense parameters get the mean of the trainers' gradients, as
with DDP; the remote parameters are updated once per trainer, each with that trainer's own
gradient, by that trainer's own optimizer instance on the server (DistributedOptimizer makes one
per trainer and owner). With SGD that is the *sum* of the trainers' updates, N times the step
DDP would take; with Adam it is the sum of N Adam updates, each from its own moments. The server
applies the trainers' updates one at a time (a lock) in arrival order: the order is not
deterministic, so results may differ from run to run by float rounding, nothing more, because
neither update reads the parameters (no weight decay). The harness adds a barrier among the
trainers after the optimizer step (its `sync` phase) so that every trainer's next forward sees
every update of this step; without it this would be asynchronous (stale reads).

The harness drives this strategy in its own flow (harness/rank/rpc_flow.py), through the
`ParameterServer` protocol (harness/protocols.py): it starts RPC, makes
the trainers' group and calls `serve` on the server and `connect`, `wrap` and `make_optimizer`
on the trainers. On CUDA the RPCs carry CPU tensors (the trainer moves inputs to the CPU and the
output back to its GPU), so no TensorPipe device maps are needed; that transfer is part of the
measured forward and backward.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any, ClassVar

from harness.protocols import StrategyDefaults, lazy_module, option
from impls import register
from impls._support.common import DDP_WARMUP
from impls.stock import ddp_layout

torch = lazy_module("torch")
dist = lazy_module("torch.distributed")
dist_autograd = lazy_module("torch.distributed.autograd")
rpc = lazy_module("torch.distributed.rpc")
nn = lazy_module("torch.nn")

if TYPE_CHECKING:  # annotations only
    from torch.nn.parallel import DistributedDataParallel

_SERVED: dict[str, Any] = {}
"""On the server process: the module it serves, its device, and the first error it raised."""


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _tensors(item)]
    return []


def _payload_bytes(value: Any) -> int:
    return sum(t.numel() * t.element_size() for t in _tensors(value))


# ---- run on the server, through RPC -----------------------------------------------------------


def _served_module() -> nn.Module:
    """The value of the RRef that `rpc.remote` makes on the server: the served module itself."""
    if "module" not in _SERVED:
        raise RuntimeError("the parameter server has no module to serve (it failed to build it)")
    return _SERVED["module"]


def _remote_forward(module_rref: rpc.RRef, *inputs: torch.Tensor) -> torch.Tensor:
    try:
        device = _SERVED["device"]
        return module_rref.local_value()(*(t.to(device) for t in inputs)).cpu()
    except Exception as exc:
        _SERVED.setdefault("failure", f"{type(exc).__name__}: {exc}")
        raise


def _parameter_rrefs(module_rref: rpc.RRef) -> list[rpc.RRef]:
    return [rpc.RRef(p) for p in module_rref.local_value().parameters()]


def _state_on_cpu(module_rref: rpc.RRef) -> dict[str, torch.Tensor]:
    return {name: t.detach().to("cpu", copy=True) for name, t in module_rref.local_value().state_dict().items()}


# ---- on a trainer ------------------------------------------------------------------------------


@dataclasses.dataclass
class Traffic:
    """What a trainer's forward RPCs carried since the last `reset`: calls and tensor bytes each way."""

    calls: int = 0
    sent_bytes: int = 0
    received_bytes: int = 0

    def reset(self) -> None:
        self.calls = self.sent_bytes = self.received_bytes = 0


@functools.cache
def _remote_part_class() -> type:
    """RemotePart, made at its first use: a torch module's subclass needs torch imported, and listing the strategies
    imports none (`lazy_module`)."""

    class RemotePart(nn.Module):
        """Stands in for the remote submodule on a trainer: its forward is an RPC to the server's module."""

        def __init__(self, module_rref: rpc.RRef, *, device: torch.device, traffic: Traffic) -> None:
            super().__init__()
            self.module_rref = module_rref
            self.device = device
            self.traffic = traffic

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            on_cpu = [t.cpu() for t in inputs]  # CPU tensors over RPC: no device maps needed on CUDA
            output = rpc.rpc_sync(self.module_rref.owner(), _remote_forward, args=(self.module_rref, *on_cpu))
            self.traffic.calls += 1
            self.traffic.sent_bytes += _payload_bytes(on_cpu)
            self.traffic.received_bytes += _payload_bytes(output)
            return output.to(self.device)

    return RemotePart


@register("rpc_hybrid", description="DDP on the dense part + the workload's remote part on an RPC parameter server")
@dataclasses.dataclass(kw_only=True)
class RpcHybrid(StrategyDefaults):
    extra_ranks: ClassVar[int] = 1  # the parameter server, the launch's last rank
    keeps_buckets: ClassVar[bool] = True  # the dense part's DDP
    fp16_refused: ClassVar[str] = (
        "its remote part's gradients live in distributed autograd's contexts, which torch's grad scaler cannot unscale"
    )
    grad_accum_refused: ClassVar[str] = (
        "its remote part steps on the server through distributed autograd after every backward, with no no_sync"
    )
    warmup_needed: ClassVar[dict[str, int]] = DDP_WARMUP  # the dense part's DDP

    bucket_cap_mb: float | None = option(
        None,
        "Bucket cap of the DDP over the dense part, in MiB; unset: DDP's default (as `stock`).",
        valid="MiB > 0",
        above=0,
    )
    _server: str | None = dataclasses.field(default=None, init=False, repr=False)
    _remote_part: str | None = dataclasses.field(default=None, init=False, repr=False)
    _group: Any = dataclasses.field(default=None, init=False, repr=False)
    _module_rref: rpc.RRef | None = dataclasses.field(default=None, init=False, repr=False)
    _ddp: DistributedDataParallel | None = dataclasses.field(default=None, init=False, repr=False)
    traffic: Traffic = dataclasses.field(default_factory=Traffic, init=False, repr=False)

    # -- the server

    def serve(self, module: nn.Module, *, device: torch.device) -> None:
        """Hold `module` on this (the server's) process until `stop_serving`; trainers reach it by RPC."""
        _SERVED.clear()
        _SERVED.update(module=module.to(device), device=device)

    def served_failure(self) -> str | None:
        """The first error the served module raised while answering a trainer, if any."""
        return _SERVED.get("failure")

    def served_parameter_bytes(self) -> int:
        return sum(p.numel() * p.element_size() for p in _SERVED["module"].parameters())

    def stop_serving(self) -> None:
        _SERVED.clear()

    # -- a trainer

    def connect(self, *, server: str, remote_part: str, process_group: dist.ProcessGroup) -> None:
        """Where the remote part lives, and the trainers' group that DDP reduces over."""
        self._server, self._remote_part, self._group = server, remote_part, process_group

    def wrap(self, model: nn.Module) -> nn.Module:
        """The remote part replaced by an RPC proxy to the server's module; the rest in DDP over the trainers."""
        if self._server is None:
            raise RuntimeError(
                "rpc_hybrid needs a parameter server: harness.rank.rpc_flow calls connect() before wrap()"
            )
        device = next(model.parameters()).device
        self._module_rref = rpc.remote(self._server, _served_module)
        parent_name, _, child = self._remote_part.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, _remote_part_class()(self._module_rref, device=device, traffic=self.traffic))
        self._ddp = nn.parallel.DistributedDataParallel(
            model,
            device_ids=[device] if device.type == "cuda" else None,
            process_group=self._group,
            **({} if self.bucket_cap_mb is None else {"bucket_cap_mb": self.bucket_cap_mb}),
        )
        return self._ddp

    def layout(self) -> dict[str, Any] | None:
        return None if self._ddp is None else ddp_layout(self._ddp)

    def sync_gradients(self) -> None:
        pass  # DDP reduced the dense part inside backward; the server holds the remote part's gradients

    def make_optimizer(self, params, optimizer_cls, **kwargs) -> Any:
        """One optimizer over RRefs to the dense parameters here and the remote ones on the server;
        `step(context_id)` applies this trainer's gradients of that distributed-autograd context."""
        # Imported here: torch.distributed.optim costs every process that loads the registry 0.45 s.
        from torch.distributed.optim import DistributedOptimizer

        remote = rpc.rpc_sync(self._server, _parameter_rrefs, args=(self._module_rref,))
        return DistributedOptimizer(optimizer_cls, [rpc.RRef(p) for p in params] + remote, **kwargs)

    def full_state_dict(self, model: nn.Module) -> dict[str, torch.Tensor]:
        """The dense part from here and the remote part from the server, under the original model's names."""
        remote = rpc.rpc_sync(self._server, _state_on_cpu, args=(self._module_rref,))
        return {**self._ddp.module.state_dict(), **{f"{self._remote_part}.{k}": v for k, v in remote.items()}}

    def step_traffic(self, context_id: int, optimizer: Any) -> dict[str, int]:
        """Round trips to other processes in the step that just ended, and their tensor bytes, read
        from what ran; the forward counters start again at zero for the next step.

        Forward: one RPC per remote call (counted by RemotePart). Backward: distributed autograd
        sends one gradient message back per message received in forward (its recv functions); each
        carries a gradient shaped like that output. Optimizer: one RPC per optimizer on another process.
        """
        backward_messages = len(dist_autograd._retrieve_context(context_id)._recv_functions())
        me = rpc.get_worker_info()
        optimizer_messages = sum(1 for o in optimizer.remote_optimizers if o.owner() != me)
        per_message = self.traffic.received_bytes / self.traffic.calls if self.traffic.calls else 0
        counted = {
            "round_trips": self.traffic.calls + backward_messages + optimizer_messages,
            "bytes": int(self.traffic.sent_bytes + self.traffic.received_bytes + backward_messages * per_message),
        }
        self.traffic.reset()
        return counted

    @property
    def parity_exact(self) -> bool:
        return True  # judged against the parameter-server reference (harness.parity.reference)

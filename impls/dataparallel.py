"""`dataparallel`: torch.nn.DataParallel, one process driving every local GPU.

Each forward scatters the batch over the GPUs, replicates the module onto each of them and
gathers the outputs on the first; gradients are summed onto the first GPU's parameters by
autograd itself, so there is nothing to synchronise after backward. PyTorch recommends DDP
instead; this strategy measures by how much. The harness runs it on rank 0 alone, with the
concatenation of every rank's batch (`single_process`).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from harness.protocols import ConfigError, StrategyDefaults, lazy_module
from impls import register

torch = lazy_module("torch")
dist = lazy_module("torch.distributed")
nn = lazy_module("torch.nn")


def batch_note(batch_size: int, devices: int) -> str | None:
    """Why a batch of `batch_size` splits badly over `devices` GPUs, or None when it splits evenly.

    DataParallel cuts the batch into `devices` chunks along dimension 0: fewer samples than
    devices leaves GPUs without work (ConfigError); a remainder gives the devices unequal
    chunks, so the fastest wait for the slowest (a note worth recording, not an error).
    """
    if batch_size < devices:
        raise ConfigError(
            f"batch size {batch_size} is smaller than the {devices} GPUs nn.DataParallel splits it over; "
            f"give at least {devices}"
        )
    if batch_size % devices:
        chunk = -(-batch_size // devices)
        return (
            f"batch size {batch_size} does not split evenly over {devices} GPUs: chunks of up to {chunk} samples, "
            f"so some GPUs wait; a multiple of {devices} splits evenly"
        )
    return None


def _device_count() -> int:
    """One GPU per rank of the launch (the idle ranks lend theirs); without a process group, every visible GPU."""
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else torch.cuda.device_count()


@register("dataparallel", description="torch nn.DataParallel: one process over all local GPUs (needs CUDA)")
@dataclasses.dataclass(kw_only=True)
class DataParallel(StrategyDefaults):
    single_process: ClassVar[bool] = True  # the harness runs rank 0 alone, over every local GPU

    _module: nn.DataParallel | None = dataclasses.field(default=None, init=False, repr=False)

    def attach_timeline(self, timeline) -> bool:
        return False  # its gradients are summed inside autograd's replicas: no collective of its own to stamp

    def unavailable_reason(self, *, device: str, world_size: int) -> str | None:
        if device != "cuda" or not torch.cuda.is_available():
            return "needs CUDA GPUs: nn.DataParallel runs one process over several GPUs"
        visible = torch.cuda.device_count()
        if visible < world_size:
            return f"needs {world_size} GPUs in one process, {visible} visible"
        return None

    def wrap(self, model: nn.Module) -> nn.Module:
        devices = _device_count()
        # DataParallel keeps the master copy of the parameters on device_ids[0].
        self._module = nn.DataParallel(model.to(torch.device("cuda", 0)), device_ids=list(range(devices)))
        return self._module

    def sync_gradients(self) -> None:
        pass  # autograd already summed every replica's gradient onto device_ids[0]

    def full_state_dict(self, model: nn.Module) -> dict[str, torch.Tensor]:
        return self._module.module.state_dict()

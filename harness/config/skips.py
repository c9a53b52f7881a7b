"""Which planned configurations can only be skipped, and why, in the words the ranks will say it
(harness.rank.configuration, rpc_flow): a strategy that refuses the device, the world size or the accumulation, a
parameter server with nothing to serve. The dry run and the forecast read them before anything is launched."""

from __future__ import annotations

import functools
from typing import Any

from harness.config.accumulation import refused


def extra_ranks(impl: str, remote_part: str | None, nnodes: int) -> int:
    """The strategy's extra ranks where they will be used: none for a workload without a remote
    part or a multi-node job, whose rows the worker records as skipped in an ordinary launch."""
    import impls as impl_registry

    wanted = impl_registry.entry(impl).cls.extra_ranks
    return wanted if wanted and remote_part is not None and nnodes == 1 else 0


def runnable(grids: dict[str, list[dict]], *, device: str, remote_parts: list, nnodes: int):
    """World size -> per strategy, the option sets it can run at that size on `device` (those it cannot are
    recorded as skipped rows: no verdict rests on them); a parameter server only where some workload has a remote
    part for it, on one node (`extra_ranks`)."""

    def at(world: int) -> dict[str, list[dict]]:
        def runs(name: str, opts: dict) -> bool:
            if all(serves_nothing(name, extra_ranks(name, part, nnodes)) for part in remote_parts):
                return False
            return not _strategy_refuses(name, opts, device=device, world=world)

        return {name: [opts for opts in grid if runs(name, opts)] for name, grid in grids.items()}

    return functools.cache(at)


def skip_reason(cfg: Any) -> str | None:  # a harness.config.grid.Configuration (which imports this module)
    """Why a planned configuration will be a skipped row, as the rank will say it (harness.rank.configuration,
    rpc_flow), from what the parent knows; None where it will run."""
    if why := refused(cfg.impl, cfg.grad_accum):
        return why
    if serves_nothing(cfg.impl, cfg.extra_ranks):
        return ("runs on one node: the parameter server is an extra rank of a single-node launch" if cfg.nnodes > 1
                else no_remote_part(cfg.workload))  # fmt: skip
    return _strategy_refuses(cfg.impl, cfg.impl_options, device=cfg.device, world=cfg.world_size) or (
        cfg.make_workload().unavailable_reason(device=cfg.device)
    )


def no_remote_part(workload: str) -> str:
    """Why a parameter server has nothing to serve on `workload`, and the workloads that give it something: the one
    wording of the dry run's skip and the rank's (a newcomer read the rank's 'see WorkloadDefaults.remote_part', a
    class in the code, and the dry run's shorter line, as two reasons)."""
    import workloads as workload_registry

    serving = [entry.name for entry in workload_registry.REGISTRY.entries() if getattr(entry.cls, "remote_part", None)]
    has = f"{' and '.join(serving)} {'has' if len(serving) == 1 else 'have'} one: --workloads {','.join(serving)}; "
    return (
        f"workload {workload!r} has no remote part for the parameter server ({has * bool(serving)}"
        "a model of your own names its own with remote_part, docs/your-model.md)"
    )


def serves_nothing(impl: str, extra: int) -> bool:
    """A parameter server given no extra rank (no remote part to serve, or several nodes): rpc_flow skips it."""
    import impls as impl_registry

    return bool(impl_registry.entry(impl).cls.extra_ranks) and not extra


def _strategy_refuses(name: str, opts: dict, *, device: str, world: int) -> str | None:
    """Why the strategy will skip itself, as its rank will say it; on the CPU only, where the backend is gloo
    whatever is asked: on GPUs its check reads the process group's backend (--backend gloo is no NCCL) and the
    GPUs a launch sees, which the parent cannot, so the ranks decide there."""
    import impls as impl_registry

    if device != "cpu":
        return None
    return impl_registry.create(name, **opts).unavailable_reason(device=device, world_size=world)

"""The two plug-in protocols (strategy, workload) and the registry that finds them.

`impls/` and `workloads/` import this module and nothing else from the harness: it is the
whole contract between a plug-in and the runner. A plug-in is a keyword-only dataclass whose
init fields are its options; the registry reads those fields to validate and coerce
`--opt key=value` from the command line, so a plug-in never parses text itself.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import inspect
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, runtime_checkable

from harness.registry import (  # noqa: F401 (the contract's)
    ConfigError,
    Entry,
    Option,
    Registry,
    UnknownOption,
    lazy_module,
    option,
)

if TYPE_CHECKING:  # annotations only: the command line's flags are checked before torch's 2-3 s import
    import torch
    from torch import nn

    from harness.comm_timeline import CommTimeline

SIZES = ("tiny", "small", "full")
"""Workload sizes: tiny for tests (milliseconds on a CPU), small for CPU benchmarks, full for GPUs."""


def no_grad(function: Callable) -> Callable:
    """`function` run under torch.no_grad(), as torch's decorator runs it, with torch imported at its first call
    rather than where it is defined: a plug-in defining one imports no torch until a strategy runs (`lazy_module`).
    Not for generator functions: calling one only makes the generator, so grad mode would be restored before its
    body runs (torch's own decorator wraps each resumption instead): one is refused where it is defined."""
    if inspect.isgeneratorfunction(function):
        raise TypeError(f"@no_grad does not cover a generator's body ({function.__qualname__}); use torch.no_grad()")

    @functools.wraps(function)
    def without_grad(*args: Any, **kwargs: Any) -> Any:
        import torch

        with torch.no_grad():
            return function(*args, **kwargs)

    return without_grad


@runtime_checkable
class Strategy(Protocol):
    """A data-parallel strategy, created with its options and used in every training step.

    Everything the runner asks of a strategy is declared here. A strategy class must define
    `wrap` and `sync_gradients`; `StrategyDefaults` gives every other member a plain default.
    `wrap` runs after `init_process_group`; rank 0's parameters and buffers win.
    `sync_gradients` returns once every `.grad` holds the mean over all ranks.
    """

    baseline: ClassVar[bool]
    reference: ClassVar[bool]
    gradient_traffic: ClassVar[str]
    shards_state: ClassVar[bool]
    comm_after_backward: ClassVar[bool]
    keeps_buckets: ClassVar[bool]
    sync_temporaries: ClassVar[float]
    single_process: ClassVar[bool]
    extra_ranks: ClassVar[int]

    def wrap(self, model: nn.Module) -> nn.Module: ...

    def sync_gradients(self) -> None: ...

    def make_optimizer(
        self, params: Iterable[nn.Parameter], optimizer_cls: type[torch.optim.Optimizer], **kwargs
    ) -> torch.optim.Optimizer: ...

    def full_state_dict(self, model: nn.Module) -> dict[str, torch.Tensor]: ...

    def no_sync(self) -> contextlib.AbstractContextManager: ...

    def layout(self) -> dict[str, Any] | None: ...

    def unavailable_reason(self, *, device: str, world_size: int) -> str | None: ...

    @property
    def parity_exact(self) -> bool: ...

    @property
    def zero_grad_set_to_none(self) -> bool: ...

    def attach_timeline(self, timeline: CommTimeline) -> bool: ...

    def timeline_cost(self) -> str | None: ...

    def timeline_caveat(self, device: str) -> str | None: ...


REQUIRED_STRATEGY_MEMBERS = ("wrap", "sync_gradients")
"""What a new strategy file must define itself; the rest of `Strategy` has defaults."""

GRADIENT_TRAFFIC = ("allreduce", "sharded", "none", "other")
"""What a strategy sends for the gradients each step (`Strategy.gradient_traffic`): every gradient byte
all-reduced once; shards of them (reduce-scatter, with all-gathers of parameters); nothing; anything else."""

ROLES = (
    "baseline",
    "reference",
    "gradient_traffic",
    "shards_state",
    "comm_after_backward",
    "keeps_buckets",
    "sync_temporaries",
    "single_process",
)
"""The class attributes that say what the harness, the model and the reports need to know of a strategy.
Every row records them (columns of the same names), and every reader decides by them, never by a name."""


def roles_of(cls: type) -> dict[str, bool | str | float]:
    """A strategy class's roles, {attribute: value}, defaults included (what its rows record)."""
    return {name: getattr(cls, name, getattr(StrategyDefaults, name)) for name in ROLES}


def role_gaps(cls: type) -> list[str]:
    """What is wrong with a strategy class's declared roles (an unknown traffic kind), for the registry."""
    traffic = getattr(cls, "gradient_traffic", StrategyDefaults.gradient_traffic)
    return [] if traffic in GRADIENT_TRAFFIC else [f"gradient_traffic as one of {', '.join(GRADIENT_TRAFFIC)} "
                                                   f"(it is {traffic!r})"]  # fmt: skip


class StrategyDefaults:
    """Plain defaults for the optional parts of `Strategy`; a strategy overrides what it owns."""

    baseline: ClassVar[bool] = False
    """True for the one strategy that communicates nothing (`local`): the compute-only floor that every
    other strategy is measured against at the same world size. It is listed last, never "the fastest",
    and the run adds it to every world size (`--no-baseline` leaves it out). `impls.baseline_name()`
    finds it."""

    reference: ClassVar[bool] = False
    """True for the one strategy every other is measured against (`stock`: DDP as torch ships
    it): sweeps recommend its bucket cap and the model predicts its step time. `impls.reference_name()`
    finds it; nothing else names it."""

    gradient_traffic: ClassVar[str] = "other"
    """What crosses the network for the gradients each step, one of GRADIENT_TRAFFIC. "allreduce": every
    gradient byte all-reduced once (with a full optimizer step on every rank, the step is then at least
    the baseline's plus that all-reduce: the model draws that floor)."""

    shards_state: ClassVar[bool] = False
    """True for strategies that trade communication for memory: each rank keeps (and updates) a shard of
    the optimizer state or the parameters (ZeRO, FSDP). The baseline's optimizer step is then no lower
    bound on theirs."""

    comm_after_backward: ClassVar[bool] = False
    """True where every collective runs after backward by design: no overlap to expect (naive, flat)."""

    keeps_buckets: ClassVar[bool] = False
    """True where the strategy keeps buffers its gradients travel in beside the gradients (DDP's buckets, a flat
    buffer): memory a rank needs, reported by `layout` (none where the gradients are views of them)."""

    sync_temporaries: ClassVar[float] = 0.0
    """What `sync_gradients` allocates beside the gradients and frees again within the step, as a multiple of the
    gradients' bytes (a flat copy of every gradient made anew, reduce-scattered, and a flat buffer all-gathered
    into: 2.0): memory a rank needs at its peak that neither its state held after the step nor `layout` shows, so
    the memory model counts only what is declared here (0: none). `keeps_buckets` is for buffers kept from step
    to step."""

    single_process: ClassVar[bool] = False
    """True for strategies that drive every local GPU from one process (nn.DataParallel).
    The harness then lets rank 0 alone train, on the concatenation of every rank's batch,
    over `world_size` devices; the other ranks of the launch stay idle."""

    extra_ranks: ClassVar[int] = 0
    """Ranks the strategy needs beyond the world size's trainers (rpc_hybrid: 1, its parameter
    server). The launcher starts world size + extra_ranks processes; the extra ones are the last
    ranks. A strategy with extra ranks is a `ParameterServer` and has its own worker flow
    (harness.rank.rpc_flow)."""

    instrument: ClassVar[str] = ""
    """Where the strategy is one ddpbench runs to measure what DDP's parts cost, not one a team would train with
    (naive, flat, bucketed): that, in a few words, which the run page says beside its description where it is
    shown; "" for a strategy to deploy."""

    model_needs: ClassVar[tuple[str, ...]] = ()
    """Options some models need for the strategy to run them at all, not knobs tuned for speed (DDP's
    find_unused_parameters, for a loss that leaves parameters unused): where every reference row of a run sets them
    alike, those rows stand for the strategy as shipped, named with them (harness.analysis.roles.needed_by_every)."""

    fp16_refused: ClassVar[str] = ""
    """Why the strategy cannot train in fp16, whose step goes through torch's grad scaler (unscale, an inf check every
    rank must agree on, a skipped step); "" where it can. `bench --dtype fp16` with it is refused with these words."""

    grad_accum_refused: ClassVar[str] = ""
    """Why the strategy cannot accumulate gradients over micro-batches (`bench --grad-accum K` above 1: no no_sync()
    keeps a micro-batch's gradients local); "" where it can. Its rows at such a K are skipped with these words."""

    warmup_needed: ClassVar[dict[str, int]] = {}
    """Warm-up steps the strategy needs on a device type ("cuda", "cpu") before its steps are steady, where
    the run's default is too few. A run without --warmup gives it them (harness.config.grid.warmup_steps);
    one with a lower --warmup is warned."""

    def make_optimizer(self, params, optimizer_cls, **kwargs):
        return optimizer_cls(params, **kwargs)

    def full_state_dict(self, model: nn.Module) -> dict[str, torch.Tensor]:
        return model.state_dict()

    def no_sync(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def layout(self) -> dict[str, Any] | None:
        """The bucket layout, for strategies that have one: {"bucket_sizes_mb": [...]}."""
        return None

    def unavailable_reason(self, *, device: str, world_size: int) -> str | None:
        """Why this strategy cannot run here (the row is then `skipped`), or None."""
        return None

    @classmethod
    def inert_options(cls, options: dict[str, Any]) -> dict[str, str]:
        """The options of `options` that change nothing given the rest, each with what it needs to act ('applies
        only with comm_hook=powersgd'): two option sets alike but for these run alike, so a sweep runs them once,
        a row asking one is its strategy at its defaults, and asking one alone is an error."""
        return {}

    @property
    def parity_exact(self) -> bool:
        """Whether this strategy should reproduce the single-process reference exactly.

        False for strategies that are lossy (compression hooks) or that do not synchronise
        (`local`): their parity difference is recorded but not judged.
        """
        return True

    @property
    def parity_inexact_why(self) -> str:
        """Why it does not reproduce the reference, where `parity_exact` is False: the row's parity note says it
        ('not judged: comm_hook=bf16 compresses gradients (lossy by design)'), naming what makes it differ,
        since the strategy itself (stock) is judged everywhere else."""
        return "this strategy is not expected to match exactly"

    @property
    def zero_grad_set_to_none(self) -> bool:
        """How the training step zeroes gradients: True drops them (`zero_grad(set_to_none=True)`, the
        cheapest), False zeroes them in place, for strategies whose `.grad` must stay where it is
        (DDP's gradient_as_bucket_view: the gradient *is* the bucket, and backward accumulates into it)."""
        return True

    def attach_timeline(self, timeline: CommTimeline) -> bool:
        """Record this strategy's collectives in `timeline` (harness.comm_timeline); called before `wrap`.

        False (the default) when the strategy cannot, or stamps none: its rows have no measured communication. A
        strategy that runs its own collectives stamps each with `timeline.launching(bucket=…, nbytes=…)` before it
        and `timeline.finished(entry)` after (impls/flat.py); one whose collectives run inside a library that offers
        no hook declares it, returning False, so that its rows say so."""
        return False

    def timeline_cost(self) -> str | None:
        """What recording the timeline would cost this strategy's step, or None when it costs nothing
        measurable. The harness then attaches one only when asked (`--bucket-timeline`): a number
        must not change because it is being recorded."""
        return None

    def timeline_caveat(self, device: str) -> str | None:
        """What the timeline's figures of this strategy carry on `device` beyond what they say (its row's
        `comm_note`), or None: where a collective's stamps bound the time compute waited rather than measure it."""
        return None


@runtime_checkable
class ParameterServer(Strategy, Protocol):
    """A strategy with a parameter server on its extra rank, as harness.rank.rpc_flow drives it.

    The server rank calls `serve`, then (after the trainers are done) `served_failure` and
    `stop_serving`. Each trainer calls `connect`, then `wrap` and `make_optimizer`, and after
    every step `step_traffic`. No defaults: a strategy with `extra_ranks` defines all six.
    """

    # -- on the server
    def serve(self, module: nn.Module, *, device: torch.device) -> None:
        """Hold `module` (the workload's remote part) on this process until `stop_serving`."""

    def served_parameter_bytes(self) -> int:
        """Bytes of the parameters the server holds."""

    def served_failure(self) -> str | None:
        """The first error the served module raised while answering a trainer, if any."""

    def stop_serving(self) -> None: ...

    # -- on a trainer
    def connect(self, *, server: str, remote_part: str, process_group: Any) -> None:
        """Where the remote part lives (an RPC worker name), and the trainers' group for the rest."""

    def step_traffic(self, context_id: int, optimizer: Any) -> dict[str, int]:
        """{"round_trips", "bytes"} of the step that just ended (since the previous call)."""


def protocol_members(protocol: type) -> tuple[str, ...]:
    """The names a protocol declares (attributes and methods, its bases' included)."""
    names: set[str] = set()
    for klass in protocol.__mro__:
        if klass in (Protocol, Generic, object) or not getattr(klass, "_is_protocol", False):
            continue
        names.update(inspect.get_annotations(klass))
        names.update(n for n, v in klass.__dict__.items() if callable(v) or isinstance(v, property))
    return tuple(sorted(n for n in names if not n.startswith("_")))


def missing_members(cls: type, protocol: type) -> list[str]:
    """Members of `protocol` that `cls` neither defines nor inherits."""
    return [name for name in protocol_members(protocol) if not hasattr(cls, name)]


def strategy_contract_gaps(cls: type) -> list[str]:
    """What a strategy class lacks: any `Strategy` member, and with extra ranks any `ParameterServer` one;
    a role it declares wrongly."""
    return missing_members(cls, ParameterServer if getattr(cls, "extra_ranks", 0) else Strategy) + role_gaps(cls)


@runtime_checkable
class Workload(Protocol):
    """A standard model with synthetic data made on the device."""

    size: str

    def build_model(self) -> nn.Module: ...

    def make_batch(self, batch_size: int, *, device: torch.device, generator: torch.Generator) -> Any: ...

    def loss(self, model: nn.Module, batch: Any) -> torch.Tensor: ...

    def default_batch_size(self) -> int: ...

    def tokens_per_sample(self) -> int | None: ...

    def unavailable_reason(self, *, device: str) -> str | None: ...

    def blocks(self, model: nn.Module) -> list[nn.Module] | None: ...


class WorkloadDefaults:
    """Plain defaults for the optional parts of `Workload`."""

    requires: tuple[str, ...] = ()
    """Python modules the workload imports lazily; a missing one makes its rows `skipped`."""

    remote_part: str | None = None
    """Name of the submodule (as for `model.get_submodule`) that a parameter-server strategy
    (rpc_hybrid) places on its server, typically a large embedding table; None when the workload
    has no such part (rpc_hybrid is then skipped). Its forward must take and return tensors, and
    its backward must not read its own parameters (true of embedding lookups): the server may
    apply one trainer's update while another trainer's backward still runs there. A subclass
    sets it as a plain class attribute, so that it is not an option."""

    def default_batch_size(self) -> int:
        return 8

    def tokens_per_sample(self) -> int | None:
        """Tokens in one sample for language models (so reports can show tokens/s), else None."""
        return None

    def unavailable_reason(self, *, device: str) -> str | None:
        missing = [m for m in self.requires if importlib.util.find_spec(m) is None]
        if not missing:
            return None
        package = "package" if len(missing) == 1 else "packages"
        return f"needs the Python {package} {', '.join(missing)} (pip install {' '.join(missing)})"

    def blocks(self, model: nn.Module) -> list[nn.Module] | None:
        """The model's repeated blocks (transformer layers, residual blocks), the units a sharding
        strategy (`fsdp`) wraps one by one; the root keeps the rest (embeddings, stems, heads).
        None: not known, and the strategy guesses from the model's shape."""
        return None

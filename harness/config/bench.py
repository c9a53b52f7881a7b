"""Typed, validated configuration: what the user asked for (`BenchConfig`) and the grid of
`Configuration`s it expands into, one per measured row.

The CLI parses text into these objects at the edge; everything inside reads only them.
Every check raises `ConfigError` with one line naming the bad value and the valid choices,
before anything is written.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness.config.precision import DTYPES, resolve_dtype
from harness.config.units import parse_bandwidth, parse_latency
from harness.protocols import SIZES, ConfigError
from harness.results.layout import check_results_folder, new_run_id, validate_run_id  # noqa: F401 (the plan's API)

DEVICES = ("auto", "cpu", "cuda")
BACKENDS = ("auto", "nccl", "gloo")
OPTIMIZER_CHOICES = ("sgd", "adam")
SIZE_CHOICES = ("auto", *SIZES)
DEFAULT_WORKLOADS = ("mlp",)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class BenchConfig:
    """Everything `ddpbench bench` was asked to do."""

    gpus: int
    """Ranks per node (one per GPU; simulated by CPU processes without GPUs). World sizes run
    as the ladder 1, 2, 4, … up to this, plus this."""
    impls: tuple[str, ...]
    """Strategies to run (names from `ddpbench list`)."""
    workloads: tuple[str, ...] = DEFAULT_WORKLOADS
    """Workloads to run."""
    options: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Strategy options as (key, values): each value list is a sweep axis."""
    size: str = "auto"
    """tiny, small or full; auto is small on the CPU and full on GPUs."""
    steps: int = 20
    """Measured steps per configuration."""
    warmup: int = 3
    """Unmeasured steps before them (DDP rebuilds its buckets in step 2)."""
    batch_size: int | None = None
    """Samples per rank per step; None takes each workload's default."""
    optimizer: str = "sgd"
    """sgd or adam (Adam keeps two moments per parameter: the state ZeRO and FSDP shard)."""
    dtype: str = "auto"
    """auto, fp32, or bf16/fp16 autocast for the forward (fp16 needs CUDA); parameters stay fp32.
    auto: bf16 on GPUs that support it natively, fp32 elsewhere (the CPU); rows record the result."""
    tf32: bool = False
    """TF32 tensor cores for fp32 matmuls and convolutions (in fp32 runs, and outside autocast);
    off: none, cuDNN's included."""
    device: str = "auto"
    """auto, cpu or cuda."""
    backend: str = "auto"
    """auto (NCCL on GPUs, gloo on the CPU), nccl or gloo. gloo on GPUs lets ranks share a GPU."""
    results: Path = Path("results")
    """Folder that holds one sub-folder per run."""
    run_id: str = ""
    """Name of this run's folder; empty makes a timestamp plus a random suffix."""
    nnodes: int = 1
    """Nodes in the job; above 1, torchrun's c10d rendezvous joins them."""
    node_rank: int = 0
    """This node's rank among `nnodes`."""
    rdzv_endpoint: str | None = None
    """HOST:PORT of the rendezvous, needed when nnodes > 1."""
    baseline: bool = True
    """Add a `local` (no communication) configuration per group, the floor for exposed comm."""
    parity: bool = True
    """Check every configuration against the single-process reference."""
    seed: int = 0
    """Base seed for model weights and synthetic batches."""
    mem_period_ms: float = 20.0
    """Memory sampling period; 0 turns the sampler off."""
    profile: bool = False
    """Capture a torch.profiler trace per rank after each configuration's measured steps."""
    bucket_timeline: bool = False
    """Also time the collectives of strategies whose timing costs something (DDP's buckets, through a
    Python communication hook); strategies that launch their own collectives are always timed."""
    repeats: int = 1
    """Run every configuration this many times, interleaved, so drift hits all alike."""
    timeout_s: float | None = None
    """Seconds a configuration may go without progress before it is declared hung and its
    launch ended; None: ten times its slowest step so far, at least a minute."""
    fail_fast: bool = False
    """Stop the run at the first failed configuration instead of going on with the next."""
    command: tuple[str, ...] = ()
    """The command line, recorded with the run."""
    busbw: str | None = None
    """All-reduce bus bandwidth of the cluster (e.g. 90GB/s), for the communication floor when no
    `ddpbench collectives` run of this machine is at hand; stored in run.json."""
    latency: str | None = None
    """All-reduce latency (e.g. 30us) that goes with `busbw`."""

    def __post_init__(self) -> None:
        _require_positive_int("--gpus", self.gpus)
        _require_positive_int("--steps", self.steps)
        _require_positive_int("--nnodes", self.nnodes)
        _require_positive_int("--repeats", self.repeats)
        if not isinstance(self.warmup, int) or self.warmup < 0:
            raise ConfigError(f"--warmup {self.warmup} is not valid; give a whole number ≥ 0")
        if self.batch_size is not None:
            _require_positive_int("--batch-size", self.batch_size)
        if self.size not in SIZE_CHOICES:
            raise ConfigError(f"--size {self.size!r} is not valid; choose one of {', '.join(SIZE_CHOICES)}")
        if self.optimizer not in OPTIMIZER_CHOICES:
            raise ConfigError(
                f"--optimizer {self.optimizer!r} is not valid; choose one of {', '.join(OPTIMIZER_CHOICES)}"
            )
        if self.dtype not in DTYPES:
            raise ConfigError(f"--dtype {self.dtype!r} is not valid; choose one of {', '.join(DTYPES)}")
        if self.backend not in BACKENDS:
            raise ConfigError(f"--backend {self.backend!r} is not valid; choose one of {', '.join(BACKENDS)}")
        if self.device not in DEVICES:
            raise ConfigError(f"--device {self.device!r} is not valid; choose one of {', '.join(DEVICES)}")
        if not self.impls:
            raise ConfigError("--impls is empty; give at least one strategy (see `ddpbench list`)")
        if not self.workloads:
            raise ConfigError("--workloads is empty; give at least one workload (see `ddpbench list`)")
        if not 0 <= self.node_rank < self.nnodes:
            raise ConfigError(f"--node-rank {self.node_rank} is not valid; give 0 to {self.nnodes - 1}")
        if self.nnodes > 1 and not self.rdzv_endpoint:
            raise ConfigError("--nnodes above 1 needs --rdzv-endpoint HOST:PORT")
        if self.rdzv_endpoint is not None:
            check_endpoint(self.rdzv_endpoint)
        if not math.isfinite(self.mem_period_ms) or self.mem_period_ms < 0:
            raise ConfigError(f"--mem-period-ms {self.mem_period_ms} is not valid; give milliseconds ≥ 0 (0: off)")
        if self.timeout_s is not None and not (math.isfinite(self.timeout_s) and self.timeout_s > 0):
            raise ConfigError(f"--timeout {self.timeout_s} is not valid; give seconds > 0 (or leave it out: automatic)")
        if self.nnodes > 1 and not self.run_id:
            raise ConfigError("--nnodes above 1 needs --run-id: every node's launcher must name the same run")
        validate_run_id(self.run_id)
        keys = [key for key, _ in self.options]
        if len(set(keys)) < len(keys):
            twice = next(key for key in keys if keys.count(key) > 1)
            raise ConfigError(f"option {twice!r} is given twice; give it once with every value, e.g. --opt {twice}=A,B")
        self._check_network()

    def _check_network(self) -> None:
        if self.busbw is not None:
            parse_bandwidth(self.busbw)
        if self.latency is not None:
            if self.busbw is None:
                raise ConfigError("--latency needs --busbw too")
            parse_latency(self.latency)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BenchConfig:
        """The inverse of dataclasses.asdict after a JSON round trip (tuples came back as lists)."""
        fields = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in fields}
        for key in ("impls", "workloads", "command"):
            if key in values:
                values[key] = tuple(values[key])
        values["options"] = tuple((key, tuple(texts)) for key, texts in values.get("options", ()))
        values["results"] = Path(values.get("results", "results"))
        return cls(**values)

    @property
    def world_sizes(self) -> list[int]:
        return [self.nnodes * ranks for ranks in rank_ladder(self.gpus)]


ENDPOINT = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])(?::(\d{1,5}))?$")


def check_endpoint(endpoint: str) -> None:
    """HOST[:PORT] as torchrun's c10d rendezvous takes it (a host name, an IPv4 or a [bracketed] IPv6 address)."""
    match = ENDPOINT.match(endpoint)
    if match is None or (match.group(1) is not None and not 1 <= int(match.group(1)) <= 65535):
        raise ConfigError(f"--rdzv-endpoint {endpoint!r} is not valid; give HOST[:PORT] (e.g. node0:29500; PORT "
                          "1-65535, torchrun's default 29400)")  # fmt: skip


def _require_positive_int(flag: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{flag} {value!r} is not valid; give a whole number ≥ 1")


def rank_ladder(gpus: int) -> list[int]:
    """1, 2, 4, … below `gpus`, then `gpus` itself: the world sizes of a scaling run."""
    ladder = [1]
    while ladder[-1] * 2 < gpus:
        ladder.append(ladder[-1] * 2)
    if gpus > 1:
        ladder.append(gpus)
    return ladder


@dataclasses.dataclass(frozen=True, kw_only=True)
class Configuration:
    """One measured row: a strategy with its options on a workload at one world size."""

    config_id: str
    impl: str
    impl_options: dict[str, Any]
    workload: str
    size: str
    world_size: int
    nnodes: int
    batch_size: int
    steps: int
    warmup: int
    dtype: str
    device: str
    backend: str
    seed: int
    parity: bool
    mem_period_ms: float = 20.0
    profile: bool = False
    bucket_timeline: bool = False
    repeat: int = 0
    optimizer: str = "sgd"
    extra_ranks: int = 0
    """Processes beyond `world_size` trainers that this configuration's launch needs
    (rpc_hybrid's parameter server); rows still report `world_size` trainers."""
    tf32: bool = False
    """TF32 for fp32 matmuls and convolutions in the ranks (`--tf32`)."""

    @property
    def mem_period_s(self) -> float:
        """The memory sampler's period, as the sampler takes it."""
        return self.mem_period_ms / 1000.0

    @property
    def processes(self) -> int:
        """Ranks in this configuration's launch: the trainers and any extra ranks."""
        return self.world_size + self.extra_ranks

    @property
    def options_json(self) -> str:
        return json.dumps(self.impl_options, sort_keys=True)

    @property
    def bucket_cap_mb(self) -> float | None:
        value = self.impl_options.get("bucket_cap_mb")
        return float(value) if value is not None else None

    def label(self) -> str:
        opts = " ".join(f"{k}={v}" for k, v in sorted(self.impl_options.items()))
        return f"w{self.world_size} {self.workload}/{self.size} {self.impl}" + (f" {opts}" if opts else "")

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Configuration:
        data = dict(data)
        if "mem_period_s" in data:  # run.json before the period was kept once, in ms
            data.setdefault("mem_period_ms", data.pop("mem_period_s") * 1000.0)
        return cls(**data)


def impl_option_grids(
    impls: Iterable[str], options: tuple[tuple[str, tuple[str, ...]], ...]
) -> dict[str, list[dict[str, Any]]]:
    """Per strategy, the list of option dicts to run: the product of the axes it accepts.

    A key that none of the chosen strategies accepts is an error; a key that only some
    accept applies to those (so `--bucket-cap-mb` sweeps stock and bucketed, not naive).
    """
    import impls as impl_registry

    impls = list(impls)
    accepted = {name: impl_registry.entry(name).options() for name in impls}
    for key, values in options:
        if not any(key in opts for opts in accepted.values()):
            valid = sorted({k for opts in accepted.values() for k in opts})
            raise ConfigError(f"no chosen strategy has option {key!r}; valid options: {', '.join(valid) or '(none)'}")
        if not values:
            raise ConfigError(f"option {key!r} has no value")
    grids: dict[str, list[dict[str, Any]]] = {}
    for name in impls:
        axes = [(key, values) for key, values in options if key in accepted[name]]
        combos = itertools.product(*(values for _, values in axes))
        grid = []
        for combo in combos:
            texts = {key: text for (key, _), text in zip(axes, combo, strict=True)}
            typed = impl_registry.REGISTRY.parse_options(name, texts)
            impl_registry.create(name, **typed)  # validates values (e.g. bucket_cap_mb > 0)
            if typed not in grid:  # '1' and '1.0' are one cap: one configuration, not two alike
                grid.append(typed)
        grids[name] = grid
    return grids


def resolve_device(requested: str, *, cuda_available: bool) -> str:
    if requested == "auto":
        return "cuda" if cuda_available else "cpu"
    if requested == "cuda" and not cuda_available:
        raise ConfigError("--device cuda is not valid here: no CUDA GPU is visible; use --device cpu or auto")
    return requested


def resolve_backend(requested: str, *, device: str) -> str:
    if requested == "auto":
        return "nccl" if device == "cuda" else "gloo"
    if requested == "nccl" and device != "cuda":
        raise ConfigError("--backend nccl needs CUDA GPUs; use gloo (or auto) on the CPU")
    return requested


def check_gpu_count(*, gpus: int, available: int, backend: str) -> None:
    """NCCL needs a GPU per rank; gloo lets several ranks share one (a GPU check, not a benchmark)."""
    if gpus > available and backend != "gloo":
        raise ConfigError(
            f"--gpus {gpus} is more than the {available} GPU(s) visible here; "
            "give at most that, or --backend gloo to let ranks share GPUs"
        )


def expand(config: BenchConfig, *, device: str, bf16_supported: bool = False) -> list[Configuration]:
    """The grid in run order: world sizes ascending, the baseline strategy (no communication) first in
    each. `bf16_supported`: whether the GPU runs bf16 natively (what `--dtype auto` resolves by)."""
    import impls as impl_registry
    import workloads as workload_registry

    names = list(dict.fromkeys(config.impls))
    baseline = impl_registry.baseline_name()
    if config.baseline and baseline not in names:
        names.insert(0, baseline)
    names.sort(key=lambda n: n != baseline)
    for name in config.workloads:
        workload_registry.entry(name)
    grids = impl_option_grids(names, config.options)
    dtype = resolve_dtype(config.dtype, device=device, bf16_supported=bf16_supported)
    size = config.size if config.size != "auto" else ("full" if device == "cuda" else "small")
    backend = resolve_backend(config.backend, device=device)
    configurations: list[Configuration] = []
    for world in config.world_sizes:
        group = []
        for workload in config.workloads:
            sized = workload_registry.create(workload, size=size)
            batch = config.batch_size or sized.default_batch_size()
            group += [
                (workload, batch, impl, opts, extra_ranks(impl, sized, config.nnodes))
                for impl in names
                for opts in grids[impl]
            ]
        # Repeats interleave (A B C A B C …) so that the machine's drift hits every configuration alike.
        for repeat in range(config.repeats):
            for workload, batch, impl, opts, extra in group:
                configurations.append(
                    Configuration(
                        config_id=_config_id(
                            len(configurations), world, workload, size, impl, opts, repeat, config.repeats
                        ),
                        impl=impl,
                        impl_options=opts,
                        workload=workload,
                        size=size,
                        world_size=world,
                        nnodes=config.nnodes,
                        batch_size=batch,
                        steps=config.steps,
                        warmup=config.warmup,
                        dtype=dtype,
                        tf32=config.tf32,
                        device=device,
                        backend=backend,
                        seed=config.seed,
                        parity=config.parity,
                        mem_period_ms=config.mem_period_ms,
                        profile=config.profile,
                        bucket_timeline=config.bucket_timeline,
                        repeat=repeat,
                        optimizer=config.optimizer,
                        extra_ranks=extra,
                    )
                )
    return configurations


def extra_ranks(impl: str, workload, nnodes: int) -> int:
    """The strategy's extra ranks where they will be used: none for a workload without a remote
    part or a multi-node job, whose rows the worker records as skipped in an ordinary launch."""
    import impls as impl_registry

    wanted = impl_registry.entry(impl).cls.extra_ranks
    return wanted if wanted and workload.remote_part is not None and nnodes == 1 else 0


def _config_id(
    index: int, world: int, workload: str, size: str, impl: str, opts: dict, repeat: int, repeats: int
) -> str:
    parts = [f"{index:04d}", f"w{world}", workload, size, impl]
    parts += [f"{k}{v}" for k, v in sorted(opts.items())]
    if repeats > 1:
        parts.append(f"r{repeat}")
    return re.sub(r"[^A-Za-z0-9._-]", "_", "-".join(parts))

"""The grid a `BenchConfig` expands into: one `Configuration` per measured row, in run order."""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
from collections.abc import Iterable
from typing import Any

from harness.config.bench import BenchConfig, resolve_backend
from harness.config.precision import resolve_dtype
from harness.protocols import ConfigError


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

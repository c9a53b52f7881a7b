"""The grid a `BenchConfig` expands into: one `Configuration` per measured row, in run order."""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Iterable
from typing import Any

from harness.config.accumulation import refused
from harness.config.bench import DEFAULT_WARMUP, MIN_AUTO_REPEATS, BenchConfig, resolve_backend
from harness.config.flags import AUTO
from harness.config.precision import resolve_dtype
from harness.config.skips import (
    extra_ranks,
    runnable,
    serves_nothing,
    skip_reason,  # noqa: F401 (the grid's API, as before)
)
from harness.config.workload_grid import workload_choices
from harness.protocols import ConfigError
from harness.results.layout import safe_name
from harness.results.values import configuration_label


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
    workload_spec: str = ""
    """What the ranks rebuild the workload from (a registered name, or a spec with a file's absolute path);
    `workload` is its name as rows show it, its options included. Empty: `workload` itself."""
    workload_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    """The workload's options (`--wopt`)."""
    repeated: bool = False
    """Whether it is one of several repeats (its id and its launch then say which)."""
    judging_repeat: int = 0
    """The repeat that judges its parity: the first not failed (`launcher.first_to_judge` sets it)."""
    grad_accum: int = 1  # micro-batches of `batch_size` per rank in a step, synchronised after the last only

    def make_workload(self):
        """This configuration's workload, as every rank builds it (`workloads.create`)."""
        import workloads

        return workloads.create(self.workload_spec or self.workload, size=self.size, options=self.workload_options)

    @property
    def workload_options_json(self) -> str:
        return json.dumps(self.workload_options, sort_keys=True)

    @property
    def mem_period_s(self) -> float:
        """The memory sampler's period, as the sampler takes it."""
        return self.mem_period_ms / 1000.0

    @property
    def judges_parity(self) -> bool:
        """Whether this repeat judges parity: one a configuration (`judging_repeat`). Its repeats train alike from
        the same seed, and judging each again cost a GPU configuration 1.7 s (a replay, its state to the host)."""
        return self.parity and self.repeat == self.judging_repeat

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
        accum = f" K={self.grad_accum}" if self.grad_accum > 1 else ""
        return (
            f"w{self.world_size} {self.workload}/{self.size} {configuration_label(self.impl, self.impl_options)}{accum}"
        )

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        if not data["judging_repeat"]:  # run.json's (always 0): a run an older ddpbench can still resume
            del data["judging_repeat"]
        return data

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
            takers = [n for n in impl_registry.names() if key in impl_registry.entry(n).options()]
            who = f"; {', '.join(takers)} take{'s' if len(takers) == 1 else ''} it" if takers else ""
            raise ConfigError(f"no chosen strategy has option {key!r}; valid options: {', '.join(valid) or '(none)'}"
                              f"{who}")  # fmt: skip
        if not values:
            default = next((o.default for opts in accepted.values() if (o := opts.get(key))), None)
            example = f", e.g. {key}={default}" if default is not None else ""
            raise ConfigError(f"option {key!r} has no value; give {key}=VALUE[,VALUE…]{example}")
    grids: dict[str, list[dict[str, Any]]] = {}
    acted, inert = set(), {}  # the keys that changed something somewhere; why the others did not
    for name in impls:
        axes = [(key, values) for key, values in options if key in accepted[name]]
        combos = itertools.product(*(values for _, values in axes))
        grid = []
        for combo in combos:
            texts = {key: text for (key, _), text in zip(axes, combo, strict=True)}
            typed = impl_registry.REGISTRY.parse_options(name, texts, flag="--opt")
            impl_registry.create(name, **typed)  # validates values (e.g. bucket_cap_mb > 0)
            idle = impl_registry.entry(name).cls.inert_options(typed)
            inert.update({key: f"{key} would change nothing: {name}'s {key} {why}" for key, why in idle.items()})
            acted |= set(typed) - set(idle)
            typed = {key: value for key, value in typed.items() if key not in idle}  # runs as without it
            if typed not in grid:  # '1' and '1.0' are one cap: one configuration, not two alike
                grid.append(typed)
        grids[name] = grid
    if idle := [why for key, why in inert.items() if key not in acted]:
        raise ConfigError(f"option {'; '.join(idle)}")
    return grids


def expand(config: BenchConfig, *, device: str, bf16_supported: bool = False) -> list[Configuration]:
    """The grid in run order: world sizes ascending, each repeat's strategies (the baseline, no communication,
    listed first) rotated by the repeat (`rotated`). `bf16_supported`: whether the GPU runs bf16 natively (what
    `--dtype auto` resolves by)."""
    import impls as impl_registry

    names = list(dict.fromkeys(config.impls))
    baseline = impl_registry.baseline_name()
    if config.baseline and baseline not in names:
        names.insert(0, baseline)
    names.sort(key=lambda n: n != baseline)
    size = config.size if config.size != "auto" else ("full" if device == "cuda" else "small")
    choices = workload_choices(config, size=size, device=device)
    if choices and all(choice.unavailable for choice in choices):  # every row would be skipped: nothing to measure
        reasons = "; ".join(dict.fromkeys(f"{choice.name} {choice.unavailable}" for choice in choices))
        raise ConfigError(f"nothing to run: {reasons}")
    grids = impl_option_grids(names, config.options)
    dtype = resolve_dtype(config.dtype, device=device, bf16_supported=bf16_supported)
    if dtype == "fp16":
        refuse_fp16(names)
    backend = resolve_backend(config.backend, device=device)
    runs_here = runnable(grids, device=device, remote_parts=[c.remote_part for c in choices], nnodes=config.nnodes)
    decides = any(decides_anything([n for n in names if runs_here(world)[n]], runs_here(world), [world])
                  for world in config.world_sizes)  # fmt: skip
    repeats = initial_repeats(config, decides)
    several = repeats > 1 or (config.repeats == AUTO and decides)
    configurations: list[Configuration] = []
    for world in config.world_sizes:
        group = [
            (choice, impl, opts, extra_ranks(impl, choice.remote_part, config.nnodes), accum)
            for accum in config.grad_accum
            for choice in choices
            for impl in names
            for opts in grids[impl]
        ]
        # Repeats interleave (A B C A B C …) so that the machine's drift hits every configuration alike, and each
        # pair of repeats runs an order and then its reverse (C B A, …: `rotated`): every place alike on average.
        for repeat in range(repeats):
            planned = [
                (choice, impl, opts, extra, accum)
                for choice, impl, opts, extra, accum in group
                if not repeat
                or not (choice.unavailable or opts not in runs_here(world)[impl] or serves_nothing(impl, extra))
            ]  # one that can only be skipped here is planned once: a repeat would repeat the skip
            planned = [member for member in planned if not repeat or not refused(member[1], member[4])]
            for choice, impl, opts, extra, accum in rotated(planned, repeat):
                configurations.append(
                    Configuration(
                        config_id=_config_id(
                            len(configurations), world, choice.name, size, impl, opts, repeat, several, accum
                        ),
                        grad_accum=accum,
                        impl=impl,
                        impl_options=opts,
                        workload=choice.name,
                        workload_spec=choice.spec,
                        workload_options=choice.options,
                        size=size,
                        world_size=world,
                        nnodes=config.nnodes,
                        batch_size=choice.batch_size,
                        steps=config.steps,
                        warmup=warmup_steps(impl, device, chosen=config.warmup),
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
                        repeated=several,
                        optimizer=config.optimizer,
                        extra_ranks=extra,
                    )
                )
    return configurations


def rotated(members: list, repeat: int) -> list:
    """One launch's configurations in the order they run, counterbalanced: repeats go in pairs, the first of a
    pair starting at the pair's number (mod their number) and wrapping, the second running that order backwards
    (A B C, C B A, B C A, A C B, …). A drift along the launch (the first place after the processes start pays
    what is cold; the machine's load moves) then falls on every configuration alike at every even repeat count:
    each one's mean place is the middle. Rotation alone balanced it only after as many repeats as there are
    configurations, and --repeats auto stops at two: stock, listed right after the baseline, ran at places 1 and
    0 where the last option ran at 4 and 3, and on a CPU whose early places read 19 % slow every option read
    faster than stock (find_unused_parameters, which does more, "decided" 0.71×). Over twice as many repeats as
    configurations each runs first twice. Each row records its place (`launch_position`)."""
    if not members:
        return members
    pair, backwards = divmod(repeat, 2)
    start = pair % len(members)
    order = members[start:] + members[:start]
    return order[::-1] if backwards else order


def warmup_steps(impl: str, device: str, *, chosen: int | None) -> int:
    """The run's --warmup where given; else the default, or what the strategy needs on `device` where
    more (StrategyDefaults.warmup_needed: a measured step must be a steady one)."""
    if chosen is not None:
        return chosen
    return max(DEFAULT_WARMUP, warmup_needed(impl, device))


def refuse_fp16(names: list[str]) -> None:
    """fp16 trains through torch's grad scaler: a strategy that cannot (its class's `fp16_refused` says why) is
    refused, in one line, before anything runs."""
    import impls as impl_registry

    for name in names:
        if why := getattr(impl_registry.entry(name).cls, "fp16_refused", ""):
            raise ConfigError(f"--dtype fp16 is refused with {name}: {why}; use bf16 or fp32 with it, or leave it "
                              "out of --impls")  # fmt: skip


def warmup_needed(impl: str, device: str) -> int:
    import impls as impl_registry

    return getattr(impl_registry.entry(impl).cls, "warmup_needed", {}).get(device, 0)


def decides_anything(names: list[str], grids: dict[str, list[dict]], worlds) -> bool:
    """Whether the run has a verdict to decide (harness.analysis.verdicts.decide): a world size that communicates, and
    a strategy swept over bucket caps or a strategy to hold against the reference (the reference at another
    option than the cap is one, where it also runs at its defaults)."""
    import impls as impl_registry

    if not any(world > 1 for world in worlds):  # every node's ranks
        return False
    swept = any(len({opts.get("bucket_cap_mb") for opts in grids[name]}) > 1 for name in names)
    chosen = [impl_registry.roles(name) for name in names]
    rivals = [r for r in chosen if not r["baseline"] and not r["reference"]]
    reference = next((name for name in names if impl_registry.roles(name)["reference"]), None)
    grid = grids.get(reference, [])
    # DDP as shipped, or at an explicit 25 MiB (decide's reference), beside DDP at another option than the cap
    shipped = any(impl_registry.reference_stand_in(reference, opts) is not None for opts in grid)
    varied = shipped and any(set(impl_registry.beyond_defaults(reference, opts)) - {"bucket_cap_mb"} for opts in grid)
    return swept or (reference is not None and (bool(rivals) or varied))


def initial_repeats(config: BenchConfig, decides: bool) -> int:
    """The repeats every configuration gets first: --repeats N; under auto, two where there is something to
    decide (a verdict needs two a side), else one."""
    if config.repeats != AUTO:
        return config.repeats
    return MIN_AUTO_REPEATS if decides else 1


def identity(cfg: Configuration) -> str:
    """What every repeat of one configuration shares, as a key."""
    mine = ("config_id", "repeat", "judging_repeat")
    return json.dumps({k: v for k, v in cfg.to_json().items() if k not in mine}, sort_keys=True)


def again(cfg: Configuration, *, index: int, repeat: int) -> Configuration:
    """Repeat `repeat` of configuration `cfg` (any repeat of it), as the `index`-th of its run."""
    c = cfg
    config_id = _config_id(index, c.world_size, c.workload, c.size, c.impl, c.impl_options, repeat, True, c.grad_accum)
    return dataclasses.replace(cfg, config_id=config_id, repeat=repeat, repeated=True)


def _config_id(
    index: int, world: int, workload: str, size: str, impl: str, opts: dict, repeat: int, repeated: bool, accum: int = 1
) -> str:
    parts = [f"{index:04d}", f"w{world}", safe_name(workload), size, impl]
    parts += [f"{k}{v}" for k, v in sorted(opts.items())] + ([f"k{accum}"] if accum > 1 else [])
    if repeated:
        parts.append(f"r{repeat}")
    return safe_name("-".join(parts), limit=120)

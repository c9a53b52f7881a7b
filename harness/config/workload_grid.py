"""The workloads of a bench grid: every workload × `--wopt` combination, each resolved and built once on the
parent side (its name, batch size, remote part and whether it can run here), before any rank starts."""

from __future__ import annotations

import collections
import dataclasses
import itertools
from pathlib import Path
from typing import Any

from harness.config.bench import BenchConfig
from harness.config.flags import Unsplit
from harness.protocols import ConfigError, UnknownOption
from harness.results.layout import bounded
from harness.results.values import options_words


@dataclasses.dataclass(frozen=True)
class WorkloadChoice:
    """One workload of the grid with one combination of its options, resolved once on the parent side."""

    name: str
    """As rows show it: the source's name, with the options ('hf:llama[num_hidden_layers=4]')."""
    spec: str
    options: dict[str, Any]
    batch_size: int
    remote_part: str | None
    provenance: dict[str, Any]
    unavailable: str | None = None
    """Why its rows would all be skipped here (a package it needs is missing), else None."""


def workload_choices(config: BenchConfig, *, size: str, device: str = "cpu") -> list[WorkloadChoice]:
    """Every workload × option combination: `--wopt` keys apply to the workloads that take them (a key
    none takes is refused, naming what each takes; a value one of them refuses is refused), several
    values sweep."""
    import workloads as workload_registry

    sources = _named_apart([workload_registry.resolve(spec) for spec in config.workloads])
    check_given(sources, config.workload_options)
    refusals: dict[str, list[str]] = {}  # per key, each workload's own words for why it does not take it
    grids = {source.spec: _workload_option_grid(source, config.workload_options, refusals) for source in sources}
    _check_taken(config.workload_options, [combo for grid in grids.values() for combo in grid], refusals)
    choices = []
    for source in sources:
        for options in grids[source.spec]:
            workload = _built(source, size=size, options=options)
            name = bounded(source.name + (f"[{options_words(options)}]" if options else ""))
            batch = config.batch_size or workload.default_batch_size()
            unavailable = workload.unavailable_reason(device=device)
            choices.append(WorkloadChoice(name, source.spec, options, batch, workload.remote_part, source.provenance(),
                                          unavailable))  # fmt: skip
    return choices


def check_given(sources: list, given) -> None:
    """--wopt's texts refused before any is typed, alike from bench and list: one not KEY=V[,V…] (flags.Unsplit),
    with each workload's words for the key it may have meant (its keys: a bare 'classes' read 'is not key=value'
    alone), one without a value."""
    for item in given:
        key, values = item
        if isinstance(item, Unsplit):
            meant = key.partition("=")[0].strip() or key
            words = {source.name: _key_words(source, meant) for source in sources}
            takers = [name for name, said in words.items() if said is None]
            why = (f"{', '.join(takers)} take{'s' * (len(takers) == 1)} {meant}=VALUE" if takers
                   else "; ".join(words.values()))  # fmt: skip
            raise ConfigError(f"--wopt {key!r} is not key=value[,value…] ({why})")
        if not values:
            raise ConfigError(f"--wopt {key} has no value")


def typed_options(source, given) -> dict[str, Any]:
    """One workload's --wopt options, one value each (list's), typed and checked, or refused, as bench does."""
    check_given([source], given)
    refusals: dict[str, list[str]] = {}
    combos = _workload_option_grid(source, given, refusals)
    _check_taken(given, combos, refusals)
    return combos[0]


def _check_taken(given, combos: list[dict[str, Any]], refusals: dict[str, list[str]]) -> None:
    for key, _ in given:
        if not any(key in combo for combo in combos):
            raise untaken(key, refusals[key])


def untaken(key: str, refusals: list[str]) -> ConfigError:
    """--wopt `key` that no workload chosen takes, with each one's refusal in its words."""
    return ConfigError(f"--wopt {key}: no chosen workload takes it ({') ('.join(refusals)})")


def _key_words(source, key: str) -> str | None:
    """Why `source` does not take `key`, in its words (which name the keys it does); None where it takes it."""
    try:
        taken = _typed_values(source, key, ["1"])
    except ConfigError:  # it takes the key: the value tried was its to refuse
        taken = []
    return str(taken) if isinstance(taken, UnknownOption) else None


def _named_apart(sources: list) -> list:
    """Sources of one name (models.py:Net from two folders) named by as much of their paths as tells them apart:
    rows, config ids and run.json's provenance are keyed by the name."""
    counts = collections.Counter(source.name for source in sources)
    clashing = [s for s in sources if counts[s.name] > 1 and s.path and s.path in s.spec]
    names: dict[str, str] = {}
    for depth in range(2, 1 + max((len(Path(s.path).parts) for s in clashing), default=1)):
        names = {s.spec: s.spec.replace(s.path, str(Path(*Path(s.path).parts[-depth:]))) for s in clashing}
        if len(set(names.values())) == len(names):
            break
    return [dataclasses.replace(s, name=names[s.spec]) if s.spec in names else s for s in sources]


def _workload_option_grid(source, axes, refusals: dict[str, list[str]]) -> list[dict[str, Any]]:
    """The product of the option axes this workload takes ('4' and '4.0' one value, not two alike); the keys
    it does not take are added to `refusals` in its words."""
    taken = []
    for key, values in axes:
        typed = _typed_values(source, key, values)
        if isinstance(typed, UnknownOption):
            refusals.setdefault(key, []).append(str(typed))
        else:
            taken.append((key, typed))
    keys = [key for key, _ in taken]
    combos = [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(values for _, values in taken))]
    for combo in combos:
        if len(combo) > 1:  # values each good alone may not go together (an image size and a patch size)
            try:
                source.check_options(combo)
            except ConfigError as exc:
                raise _bad_value(source, " --wopt ".join(f"{k}={v}" for k, v in combo.items()), exc) from None
    return combos


def _typed_values(source, key: str, texts) -> list[Any] | UnknownOption:
    """The option's distinct values for `source`, or why it does not take `key` at all. A value
    it refuses is bad input (dropping the key for this workload would run it with its default unsaid)."""
    import workloads as workload_registry

    typed: list[Any] = []
    for text in texts:
        try:
            value = workload_registry.parse_options(source.spec, {key: text})[key]
            source.check_options({key: value})
        except UnknownOption as exc:
            return exc
        except ConfigError as exc:
            raise _bad_value(source, f"{key}={text}", exc) from None
        if value not in typed:
            typed.append(value)
    return typed


def _bad_value(source, given: str, exc: ConfigError) -> ConfigError:
    """The refusal naming the value (`given`: 'key=value') and the workload (most workloads' own words do)."""
    if source.name in str(exc):
        return exc
    return ConfigError(f"--wopt {given} is not valid for {source.name} ({exc})")


def _built(source, *, size: str, options: dict[str, Any]):
    """The workload object (its batch size, its remote part), built once here: a user's class that raises
    is bad input, one line naming it."""
    try:
        workload = source.create(size=size, options=options)
        source.check_workload(workload)
        return workload
    except ConfigError as exc:  # a registered workload's own check of a value does not name it
        if source.name in str(exc):
            raise
        raise ConfigError(f"workload {source.name}: {exc}") from None
    except Exception as exc:
        lines = [line for line in str(exc).splitlines() if line.strip()]
        raise ConfigError(f"workload {source.name}: building it raised {type(exc).__name__}: "
                          f"{lines[-1].strip() if lines else ''}") from None  # fmt: skip

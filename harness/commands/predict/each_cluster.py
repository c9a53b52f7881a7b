"""`predict --cluster A,B --batch-size NAME=N,… --local-step-ms NAME=MS,…`: each cluster's own batch a GPU, and its
own one-GPU step at that batch, as `--nodes NAME=N,…` gives each its node counts. One value still means every cluster.
Unlike batches need each cluster's step, since one step is timed at one batch: 16 H100s and 8 H200s were compared at
one batch a GPU, the H200's 121 GiB left over unused, for want of a way to give it another."""

from __future__ import annotations

import argparse
import math

from harness.config.bench import ConfigError

EACH = (("batch_size", "--batch-size", "N", "a whole number ≥ 1"),
        ("local_step_ms", "--local-step-ms", "MS", "the one-GPU step in ms, a finite number > 0"))  # fmt: skip
"""The flags that name each cluster's value: (args' key, flag, its value's name, what a value must be)."""


def split(args: argparse.Namespace) -> None:
    """Before any flag is checked: where --batch-size or --local-step-ms names each cluster's value, its text is kept
    in `args.<key>_each` and the flag set to the first value (read, not yet checked), so that every check of one value
    reads a number; `resolve` checks and keys them once the clusters are read. Refused without --cluster."""
    for key, flag, _, _ in EACH:
        text = getattr(args, key, None)
        setattr(args, f"{key}_each", text if isinstance(text, str) else None)
        if not isinstance(text, str):
            continue
        first = text.split(",")[0].partition("=")[2].strip()
        if not args.cluster:
            named = ",".join(item.partition("=")[0].strip() for item in text.split(",") if "=" in item) or "A,B"
            one = f"{flag} {_example(key, first)}"
            raise ConfigError(f"{flag} {text!r} names a cluster's value without --cluster; give one value, e.g. {one}, "
                              f"or name the clusters with --cluster {named}")  # fmt: skip
        setattr(args, key, _number(key, first, text) if first else None)


def resolve(args: argparse.Namespace, clusters: dict[str, str]) -> None:
    """Each of --batch-size and --local-step-ms given as NAME=VALUE,…: `args.<key>_each`, {as --cluster names it:
    value}, every cluster of `clusters` ({as --cluster names it: its profile's name}; either names it) given one;
    refused in one line where a name is not one compared or is named twice, a value is not one, a cluster is left
    without one; and where the batches differ with one --local-step-ms (a step is timed at one batch), or an
    --local-optimizer-ms is not below each step."""
    texts = {key: getattr(args, f"{key}_each", None) for key, _, _, _ in EACH}
    for key, flag, value, _ in EACH:
        text = texts[key]
        if not isinstance(text, str):
            continue
        example = ",".join(f"{given}={value}" for given in clusters)
        form = f"give NAME={value} for each cluster compared ({', '.join(clusters)}), e.g. {example}, or one value"

        def parse(figure: str, key: str = key, text: str = text, form: str = form):
            return _number(key, figure, text, form=form)

        each = named_values(text, clusters, flag=flag, value=value, form=form, parse=parse)
        setattr(args, f"{key}_each", {given: each[given] for given in clusters})
    batches, steps = getattr(args, "batch_size_each", None), getattr(args, "local_step_ms_each", None)
    if batches and len(set(batches.values())) > 1 and args.local_step_ms is not None and not steps:
        each = ",".join(f"{given}=MS" for given in clusters)
        raise ConfigError(f"--batch-size {texts['batch_size']!r} gives the clusters unlike batches, but "
                          f"--local-step-ms {args.local_step_ms:g} is one step, timed at one batch: give each "
                          f"cluster's step at its batch, --local-step-ms {each}")  # fmt: skip
    optimizer = getattr(args, "local_optimizer_ms", None)
    for given, ms in (steps or {}).items():
        if optimizer is not None and not optimizer < ms:
            raise ConfigError(f"--local-optimizer-ms {optimizer:g} is not below {given}'s step, {ms:g} ms; give the "
                              "optimizer's part of each step in ms, ≥ 0 and below it")  # fmt: skip


def named_values(
    text: str, clusters: dict[str, str], *, flag: str, value: str, form: str, parse, noun: str = "value"
) -> dict:
    """NAME=VALUE,…: each cluster of `clusters` ({as --cluster names it: its profile's name}; either names it) with
    its value, `parse(figure)` (which refuses a bad one), keyed by the name --cluster gives; refused in one line where
    an item is not NAME=VALUE, a name is not one compared or is named twice, a cluster is left without one. `form`:
    what to give, said after each refusal; `noun`: what a value is, where one is missing. --batch-size's and
    --local-step-ms' (`resolve`), --gpu-hour-price's."""
    names = {**{profile: given for given, profile in clusters.items()}, **{given: given for given in clusters}}
    each: dict[str, object] = {}
    for item in text.split(","):
        typed, equals, figure = (part.strip() for part in item.partition("="))
        if not equals:
            raise ConfigError(f"{flag} {text!r}: {item.strip()!r} is not NAME={value}; {form}")
        if typed not in names:
            raise ConfigError(f"{flag} {text!r}: {typed!r} is not a cluster compared; {form}")
        if names[typed] in each:
            raise ConfigError(f"{flag} {text!r} names {typed!r} twice; {form}")
        each[names[typed]] = parse(figure)
    missing = [given for given in clusters if given not in each]
    if missing:
        raise ConfigError(f"{flag} {text!r} has no {noun} for {', '.join(missing)}; {form}")
    return each


def with_each(args: argparse.Namespace, name: str) -> argparse.Namespace:
    """`args` (a copy, as predict_each's per cluster) with `name`'s own batch and step, where given each's."""
    for key, _, _, _ in EACH:
        each = getattr(args, f"{key}_each", None)
        if isinstance(each, dict):
            setattr(args, key, each[name])
    return args


def one_clusters(args: argparse.Namespace, cluster: str, profile_name: str) -> None:
    """NAME=VALUE with one cluster: its value, NAME its name (or its profile's), as one value."""
    resolve(args, {cluster: profile_name})
    for key, _, _, _ in EACH:
        each = getattr(args, f"{key}_each", None)
        if isinstance(each, dict):
            setattr(args, key, each[cluster])
            setattr(args, f"{key}_each", None)


def _example(key: str, first: str) -> str:
    """The value typed first where it is one ('4' of 'dgx-a100=4'), else the value's name (N, MS)."""
    try:
        return f"{_number(key, first, first):g}"
    except ConfigError:
        return next(value for k, _, value, _ in EACH if k == key)


def _number(key: str, text: str, given: str, *, form: str = ""):
    """`text` as the flag's value (a batch: a whole number ≥ 1; a step: a finite number > 0), or refused."""
    flag, what = {k: (f, w) for k, f, _, w in EACH}[key]
    whole = key == "batch_size"
    try:
        value = int(text) if whole else float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(f"{flag} {given!r}: {text!r} is not {what}" + (f"; {form}" if form else ""))
    return value

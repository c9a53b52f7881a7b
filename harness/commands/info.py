"""`ddpbench list` (the strategies with their options, the workloads with their sizes) and
`ddpbench env` (the environment a run would record, as JSON)."""

from __future__ import annotations

import argparse
import json
import os

from harness.commands import console
from harness.protocols import SIZES


def run_list(args: argparse.Namespace, *, command: tuple[str, ...]) -> int:
    import impls
    import workloads

    console.say("strategies:")
    for entry in impls.REGISTRY.entries():
        # An option left unset by default lets the library choose (DDP's own bucket cap): say so, not "None".
        options = ", ".join(f"{o.name}={'unset' if o.default is None else o.default}" for o in entry.options().values())
        warmups = getattr(entry.cls, "warmup_needed", {})
        needs = ", ".join(f"{steps} steps on {device}" for device, steps in warmups.items())
        console.say(f"  {entry.name:<14} {entry.description}" + (f"  [options: {options}]" if options else "")
                    + (f"  [warm-up: {needs}]" if needs else ""))  # fmt: skip
    console.say("workloads (parameters per size; options set with --wopt KEY=V[,V…]):")
    counts = _read_counts()
    for entry in workloads.REGISTRY.entries():
        console.say(f"  {entry.name:<14} {entry.description}")
        console.say(f"  {'':<14} {_sizes_line(entry.name, counts)}")
        options = ", ".join(f"{o.name}={o.default}" for o in entry.options().values() if o.name != "size")
        if options:
            console.say(f"  {'':<14} options: {options}")
    _write_counts(counts)
    console.say("your model, or any of a zoo's (docs/your-model.md):")
    for spec, what in SPECS:
        console.say(f"  {spec:<24} {what}")
    _list_clusters()
    return 0


def _list_clusters() -> None:
    from harness.perfmodel.clusters import cluster

    console.say("clusters for `predict --cluster` (or your own .toml: docs/clusters.md):")
    for name in cluster.builtin_names():
        profile = cluster.load(name)
        nvls = f", NVLS {profile.nvls_busbw_gbps:g}" if profile.nvls_busbw_gbps else ""
        console.say(f"  {name:<14} {profile.description}")
        console.say(f"  {'':<14} all-reduce busbw GB/s: one node {profile.intra_busbw_gbps:g}{nvls}; between nodes "
                    f"{profile.inter_busbw_gbps:g} (sources in {profile.path})")  # fmt: skip
        checks = cluster.published_checks(profile)
        within, sizes = sum(c["within_25"] for c in checks), sum(c["count"] for c in checks)
        console.say(f"  {'':<14} against published nccl-tests all-reduce tables: " + (
            f"{len(checks)} table{'s' if len(checks) > 1 else ''}, {within} of {sizes} sizes within 25 % "
            f"(`predict --cluster {name}` says where)" if checks else "none found"))  # fmt: skip


SPECS = (
    ("FILE.py:NAME", "your class (--wopt: its keyword arguments) or zero-argument factory; no ddpbench import"),
    ("package.module:NAME", "the same, imported (the working directory is on the path)"),
    ("torchvision:NAME", "any torchvision classification model, weights=None (--wopt image_size, num_classes, …)"),
    ("hf:MODEL_TYPE", "any transformers architecture from its configuration, scaled by --size (--wopt: its fields)"),
    ("hf:path/config.json", "your own transformers configuration"),
    ("timm:NAME", "any timm model, pretrained=False, when timm is installed"),
)


def _sizes_line(name: str, counts: dict) -> str:
    """'tiny 34.2k, small 4.2M, full 124.4M': each size's parameters, counted on the meta device once and kept in
    `counts` (the user's cache) for the workload's code and the libraries that build it (counting them imported
    transformers and built every model: 7 of `list`'s 8 s here)."""
    import workloads

    key = _counts_key(workloads.REGISTRY.entry(name).cls)
    if counts.get(name, {}).get("key") != key:
        counts[name] = {"key": key, "sizes": {size: _count(workloads.create(name, size=size)) for size in SIZES}}
    return ", ".join(f"{size} {counts[name]['sizes'][size]}" for size in SIZES)


def _count(workload) -> str:
    from harness.measure.modelinfo import parameter_count_on_meta

    reason = workload.unavailable_reason(device="cpu")
    return f"unavailable ({reason})" if reason else _human_count(parameter_count_on_meta(workload))


def _counts_cache():
    from pathlib import Path

    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ddpbench" / "parameter-counts.json"


def _counts_key(cls: type) -> str:
    """What a count depends on: the workload's source file and the versions of the libraries that build models."""
    import hashlib
    import inspect

    from harness.measure.env import library_versions

    versions = library_versions()
    source = hashlib.sha256(inspect.getsource(inspect.getmodule(cls)).encode()).hexdigest()[:16]
    return json.dumps([source, [versions[name] for name in ("torch", "torchvision", "transformers")]])


def _read_counts() -> dict:
    from harness.results.files import read_json

    try:
        return read_json(_counts_cache())
    except (OSError, ValueError):  # none yet, or unreadable: counted again
        return {}


def _write_counts(counts: dict) -> None:
    """Whole or not at all (results.files); a cache that cannot be written is only slower."""
    from harness.results.files import write_json

    try:
        if counts != _read_counts():
            write_json(_counts_cache(), counts)
    except OSError:
        pass


def _human_count(count: int) -> str:
    for unit, scale in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f}{unit}"
    return str(count)


def run_env(args: argparse.Namespace, *, command: tuple[str, ...]) -> int:
    from harness.measure import env

    # As a default `bench` records it: the math flags its ranks run with (--tf32 off), not ours.
    console.say(json.dumps(env.capture(list(command), tf32=False), indent=2, default=str))
    return 0

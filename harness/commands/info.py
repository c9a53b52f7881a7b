"""`ddpbench list` (the strategies with their options, the workloads with their sizes, the cluster profiles; one of
each in full where named: `ddpbench list hf:llama my-cluster.toml`) and `ddpbench env` (the environment a run would
record, as JSON)."""

from __future__ import annotations

import argparse
import json
import re

from harness.commands import console
from harness.commands.fits_here import (
    bench_smaller,
    human_count,
    input_text,
    parameter_count,
    too_large_here,
    widths_given,
)
from harness.protocols import SIZES
from harness.results.units import human_bytes


def run_list(args: argparse.Namespace, *, command: tuple[str, ...]) -> int:
    import impls
    import workloads
    from harness.commands.console.progress import Status
    from workloads import _zoo

    _refuse_untaken_before_torch(args.names, args.wopt or [])
    if args.wopt and not any(_is_workload(name) for name in args.names):  # options said of nothing
        from harness.commands.console.invoked import ddpbench_command
        from harness.config.bench import ConfigError

        raise ConfigError(f"--wopt needs a workload NAME to count: {ddpbench_command()} list hf:llama --wopt "
                          "hidden_size=2048")  # fmt: skip
    if args.names:  # each checked, then counted, before any is said: a bad name is one line and nothing else
        status = Status("list")
        specs = [name for name in args.names if _zoo.is_spec(name) and not name.endswith(".toml")]
        if specs:  # a 1.3B Llama's options: 22 to 27 s before the first line, most of it here
            libraries = "torch and transformers" if any(name.startswith("hf:") for name in specs) else "torch"
            status.show(f"importing {libraries} to check {', '.join(specs)}", checked=False)
        counters = [_describer(name, args.wopt or []) for name in args.names]
        if specs:
            status.show(f"counting {', '.join(specs)} on the meta device")
        for describe in [count() for count in counters]:
            describe()
        return 0
    status = Status("list")  # every strategy's and workload's module imported (torch), each model counted once
    status.show("importing the strategies")
    strategies = list(impls.REGISTRY.entries())  # every file loaded first: a broken one refused before any line
    console.say("strategies:")
    for entry in strategies:
        # An option left unset by default lets the library choose (DDP's own bucket cap): say so, not "None".
        options = ", ".join(f"{o.name}={'unset' if o.default is None else o.default}" for o in entry.options().values())
        warmups = getattr(entry.cls, "warmup_needed", {})
        needs = ", ".join(f"{steps} steps on {device}" for device, steps in warmups.items())
        console.say(f"  {entry.name:<14} {entry.description}" + (f"  [options: {options}]" if options else "")
                    + (f"  [warm-up: {needs}]" if needs else ""))  # fmt: skip
    console.say("workloads (parameters per size; options set with --wopt KEY=V[,V…]):")
    for entry in workloads.REGISTRY.entries():
        console.say(f"  {entry.name:<14} {entry.description}")
        status.show(f"counting {entry.name} at each size on the meta device")
        console.say(f"  {'':<14} {_sizes_line(entry.name)}")
        options = ", ".join(f"{o.name}={o.default}" for o in entry.options().values() if o.name != "size")
        if options:
            console.say(f"  {'':<14} options: {options}")
    console.say("your model, or any of a zoo's (docs/your-model.md):")
    for spec, what in SPECS:
        console.say(f"  {spec:<24} {what}")
    _list_clusters()
    return 0


def _list_clusters() -> None:
    from harness.perfmodel.clusters import cluster, published

    console.say("clusters for `predict --cluster` (or your own .toml: docs/clusters.md):")
    for name in cluster.builtin_names():
        profile = cluster.load(name)
        nvls = f", NVLS {profile.nvls_busbw_gbps:g}" if profile.nvls_busbw_gbps else ""
        console.say(f"  {name:<14} {profile.description}")
        console.say(f"  {'':<14} all-reduce busbw GB/s: one node {profile.intra_busbw_gbps:g}{nvls}; between nodes "
                    f"{profile.inter_busbw_gbps:g} (sources in {profile.path})")  # fmt: skip
        checks = published.published_checks(profile)
        within, sizes = sum(c["within_25"] for c in checks), sum(c["count"] for c in checks)
        console.say(f"  {'':<14} against published nccl-tests all-reduce tables: " + (
            f"{len(checks)} table{'s' if len(checks) > 1 else ''}, {within} of {sizes} sizes within 25 % "
            f"(`predict --cluster {name}` says where)" if checks else "none found"))  # fmt: skip


def _refuse_untaken_before_torch(names: list[str], given: list) -> None:
    """`list torchvision:NAME --wopt KEY=V` where torchvision's source shows the first model named takes KEY nowhere
    (workloads._zoo.vision_keywords): refused before torch's import (10-20 s; `_options` would import it to say so),
    in the words it says it with. Only where it would say that first: every name such a model and every --wopt one
    KEY=V, none of them taken; any other case is checked by the build."""
    from harness.config.flags import Unsplit
    from harness.config.workload_grid import untaken
    from workloads._zoo import vision_keywords

    models = [name.partition(":")[2] for name in names if name.startswith("torchvision:")]
    if not given or not names or len(models) != len(names):
        return
    if any(isinstance(item, Unsplit) or len(item[1]) != 1 for item in given):
        return
    refusals = [vision_keywords.untaken_words(models[0], key) for key, _ in given]
    if all(refusals):
        raise untaken(given[0][0], [refusals[0]])


def _describer(name: str, given: list[tuple[str, tuple[str, ...]]]):
    """What `list NAME` says of NAME, a strategy, a cluster profile (built-in, or a .toml file) or a workload
    (registered, or a spec), checked: a function that counts it and returns the function that says it; ConfigError
    naming the kinds there are for any other name."""
    import impls
    import workloads
    from harness.config.bench import ConfigError
    from harness.perfmodel.clusters import cluster
    from workloads import _zoo

    if name in cluster.builtin_names() or name.endswith(".toml"):  # asked first: no strategy's import (torch's)
        try:
            profile = cluster.load(name)
        except ConfigError as error:  # its words are predict's (--cluster NAME): this command's name instead
            raise ConfigError(str(error).replace("--cluster ", "ddpbench list ", 1)) from None
        return lambda: lambda: _describe_cluster(profile)
    if name in impls.names():
        return lambda: lambda: _describe_strategy(name)
    if name in workloads.names() or _zoo.is_spec(name):
        options = _options(name, given)
        return lambda: _counted(name, options)
    near = " or ".join(_zoo.specs_named(name))
    raise ConfigError(f"ddpbench list {name!r}: " + (f"did you mean {near}? " if near else "")
                      + f"name a strategy ({', '.join(impls.names())}), a workload "
                      f"({', '.join(workloads.names())}, or a spec such as hf:llama or FILE.py:NAME) or a cluster "
                      f"profile ({', '.join(cluster.builtin_names())}, or a .toml file)")  # fmt: skip


def _counted(name: str, options: dict):
    """Workload `name` built and counted at each size (on the meta device), as the function that says it."""
    import workloads

    sizes = ("full",) if _yours(name) else SIZES  # built as written: --size changes nothing
    built = {size: workloads.create(name, size=size, options=options) for size in sizes}
    counts = {size: parameter_count(name, size, options, count=True) for size in sizes}
    inputs = {size: input_text(workload) for size, workload in built.items()}
    ignored = getattr(built["full"], "dtype_ignored", None)
    full_is = getattr(built["full"], "full_is", None)  # a zoo's configuration: which model full is
    return lambda: _describe_workload(name, counts, options, inputs, ignored=ignored, full_is=full_is)


def _is_workload(name: str) -> bool:
    import workloads
    from workloads import _zoo

    return name in workloads.names() or (_zoo.is_spec(name) and not name.endswith(".toml"))


def _yours(name: str) -> bool:
    """Whether workload `name` is a file or module of yours: built as written, whatever --size."""
    import workloads
    from workloads._zoo import ZOOS

    return name not in workloads.names() and name.partition(":")[0] not in ZOOS


def _options(spec: str, given: list[tuple[str, tuple[str, ...]]]) -> dict:
    """--wopt KEY=VALUE pairs as workload `spec`'s options, typed and checked as bench checks them; one value each."""
    import workloads
    from harness.config import workload_grid
    from harness.config.bench import ConfigError

    source = workloads.resolve(spec)
    workload_grid.check_given([source], given)
    for key, values in given:
        if len(values) != 1:
            raise ConfigError(f"--wopt {key}={','.join(values)}: list counts one model; give one value")
    if not given:  # a zoo model refused without options too (hf:whisper's task builds a part of it alone)
        source.check_options({})
    return workload_grid.typed_options(source, given)


def _describe_workload(name: str, counts: dict, options: dict, inputs: dict | None = None, *,
                       ignored: str | None = None, full_is: str | None = None) -> None:  # fmt: skip
    """Its parameters and gradients per size, and how to bench it (`ignored`: the dtype its configuration names,
    which it is not built in, and `full_is`: which model full is, as a registered one's description says it: said
    on the first line)."""
    import workloads

    registered, yours = name in workloads.names(), _yours(name)
    asked = " ".join(f"--wopt {key}={value}" for key, value in options.items())
    console.say(f"workload {name}" + (f" {asked}" if asked else "")
                + (f": {workloads.REGISTRY.entry(name).description}" if registered else "")
                + (f": {full_is}{_unlike_its_name(full_is, counts.get('full'))}" if full_is else "")
                + (f": {ignored} ignored: parameters fp32, --dtype picks the compute" if ignored else ""))  # fmt: skip
    inputs = inputs or {}
    if counts and all(isinstance(count, str) for count in counts.values()):  # timm not installed: nothing to count
        console.say(f"  unavailable at every --size ({next(iter(counts.values()))}): nothing counted, its name and "
                    f"options unchecked, and bench skips its rows until then")  # fmt: skip
        return
    one = not yours and len(counts) > 1 and len(set(counts.values())) == 1 and not isinstance(counts["full"], str)
    if one:  # the --wopt given fix every size's shape: one model, said once, --size only its input
        alike = len(set(inputs.values())) <= 1  # none said (a registered model's) or one for all
        why = (
            "the --wopt given fix its shape" if options else "no larger than tiny's: a size scales your file down only"
        )
        every = f" at every --size ({why})"
        _say_count("", counts["full"], every + (inputs.get("full", "") if alike else ""))
        if not alike:
            each = ", ".join(f"{size} {text.removeprefix(', ')}" for size, text in inputs.items())
            console.say(f"  --size sets its input alone: {each}")
    for size, count in {} if one else counts.items():
        if isinstance(count, str):
            console.say(f"  {size:<6} unavailable ({count})")
        else:  # a file of yours: one model, whatever --size
            _say_count("" if yours else f"{size:<6} ", count, inputs.get(size, ""))
    if not one and (fixed := widths_given(name, options)):  # hf:gpt2 --wopt n_layer=24 was 1.2B at tiny
        console.say(f"  --wopt {', '.join(fixed)} override --size's widths: every size has them as given, --size "
                    "scaling only the rest (vocabulary, sequence): no size is a smaller model")  # fmt: skip
    if registered:
        for option in workloads.REGISTRY.entry(name).options().values():
            if option.name != "size":
                console.say(f"  --wopt {option.name}={option.default}: {option.doc}")
    else:
        said = workloads.resolve(name).options_said
        said = (
            said(options) if callable(said) and yours else said() if callable(said) else said
        ) or "its configuration's fields or its keyword arguments"
        console.say(f"  --wopt: {said} (docs/your-model.md)")
    full = counts.get("full")
    too_large = too_large_here(name, "full", options) if full is not None and not isinstance(full, str) else ""
    if not too_large:
        from harness.commands.console.invoked import ddpbench_command

        console.say(f"  counted on the meta device; bench it: {ddpbench_command()} bench --workloads {name}"
                    + ("" if yours else " --size full") + (f" {asked}" if asked else ""))  # fmt: skip
        return
    how, then = bench_smaller(name, options, yours=yours)
    console.say(f"  counted on the meta device; {'' if yours else 'at full, '}{too_large}: bench it smaller{how}")
    if then:
        console.say(f"  then {then}")


NAMED_SIZE = re.compile(r"like \S*?(\d+(?:\.\d+)?)([bm])\b", re.IGNORECASE)
"""A size in the name of the checkpoint a configuration's docs call it like ("like Qwen/Qwen2-7B")."""


def _unlike_its_name(full_is: str, count) -> str:
    """Where the checkpoint full is said to be like names a size its default configuration does not count within
    a quarter (transformers' Qwen2Config, "like Qwen/Qwen2-7B", counts 12.0B: 32 key/value heads, not 4), say so:
    the count, not the name, is what ddpbench builds."""
    named = NAMED_SIZE.search(full_is)
    if not named or count is None or isinstance(count, str):
        return ""
    size = float(named[1]) * (1e9 if named[2].lower() == "b" else 1e6)
    if abs(count.parameters - size) <= 0.25 * size:
        return ""
    return f", though its defaults count {human_count(count.parameters)}, not {named[1]}{named[2].upper()}"


def _say_count(label: str, count, text: str) -> None:
    """A model's parameters, `text` after them, and the gradients DDP all-reduces a step: every parameter's that
    trains, in its dtype, a frozen one's not."""
    dtypes = "/".join(DTYPE_NAMES.get(d, d) for d in count.grad_dtypes)
    which = ("DDP all-reduces them all" if count.trained == count.parameters else
             f"{human_count(count.trained)} trained: DDP all-reduces theirs")  # fmt: skip
    console.say(f"  {label}{human_count(count.parameters):>7} parameters{text}, {human_bytes(count.grad_bytes)} of "
                f"{dtypes + ' ' if dtypes else ''}gradients a step ({which})")  # fmt: skip


def _describe_strategy(name: str) -> None:
    import impls

    entry = impls.REGISTRY.entry(name)
    console.say(f"strategy {name}: {entry.description}")
    for option in entry.options().values():
        default = "unset" if option.default is None else option.default
        choices = option.choices()  # a Literal's: the values to type, beside the default
        valid = (
            f" (one of {', '.join(map(str, choices))})" if choices else (f" ({option.valid})" if option.valid else "")
        )
        console.say(f"  --opt {option.name}={default}{valid}: {option.doc}")
    for device, steps in getattr(entry.cls, "warmup_needed", {}).items():
        console.say(f"  warm-up: {steps} steps on {device}")


def _describe_cluster(profile) -> None:
    """The profile as its TOML file (every number with its source: a file to copy and edit), then how it
    compares with published tables."""
    from harness.perfmodel.clusters import cluster, published

    console.say(cluster.to_toml(profile).rstrip("\n"))
    if missing := cluster.unsourced(profile):
        console.say(f"# no source given for: {', '.join(missing)}")
    checks = published.published_checks(profile)
    console.say(
        "# against published nccl-tests all-reduce tables (none fitted to; docs/measured/cluster-model.md):"
        if checks
        else "# against published nccl-tests all-reduce tables: checked for built-in profiles only"
    )
    for line in published.published_check_summary(checks):
        console.say(f"#   {line}")


SPECS = (
    ("FILE.py:NAME", "your class (--wopt: its keyword arguments) or zero-argument factory; no ddpbench import"),
    ("package.module:NAME", "the same, imported (the working directory is on the path)"),
    ("torchvision:NAME", "any torchvision classification model, weights=None (--wopt image_size, num_classes, …)"),
    ("hf:MODEL_TYPE", "any transformers architecture from its configuration, scaled by --size (--wopt: its fields)"),
    ("hf:path/config.json", "your own transformers configuration"),
    ("timm:NAME", "any timm model, pretrained=False, when timm is installed"),
)


def _sizes_line(name: str) -> str:
    """'tiny 34.2k, small 4.2M, full 124.4M': each size's parameters, counted on the meta device once and kept in the
    user's cache (harness.measure.meta_counts: counting them imported transformers and built every model, 7 of
    `list`'s 8 s here)."""
    return ", ".join(f"{size} {_count_text(parameter_count(name, size))}" for size in SIZES)


def _count_text(count: int | str) -> str:
    """parameter_count's figure as `list` says it: '4.2M', or why it cannot be built here."""
    return f"unavailable ({count})" if isinstance(count, str) else human_count(count)


DTYPE_NAMES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
"""A parameter's torch dtype as the project names it elsewhere (--dtype)."""


def run_env(args: argparse.Namespace, *, command: tuple[str, ...]) -> int:
    from harness.measure import env

    # As a default `bench` records it: the math flags its ranks run with (--tf32 off), not ours.
    console.say(json.dumps(env.capture(list(command), tf32=False), indent=2, default=str))
    return 0

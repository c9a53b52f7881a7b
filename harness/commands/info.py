"""`ddpbench list` (the strategies with their options, the workloads with their sizes, the cluster profiles; one of
each in full where named: `ddpbench list hf:llama my-cluster.toml`) and `ddpbench env` (the environment a run would
record, as JSON)."""

from __future__ import annotations

import argparse
import json

from harness.commands import console
from harness.protocols import SIZES


def run_list(args: argparse.Namespace, *, command: tuple[str, ...]) -> int:
    import impls
    import workloads

    if args.wopt and not any(_is_workload(name) for name in args.names):  # options said of nothing
        from harness.config.bench import ConfigError

        raise ConfigError("--wopt needs a workload NAME to count: ddpbench list hf:llama --wopt hidden_size=2048")
    if args.names:  # each resolved before any is said: a bad name is one line and nothing else
        for describe in [_describer(name, args.wopt or []) for name in args.names]:
            describe()
        return 0
    console.say("strategies:")
    for entry in impls.REGISTRY.entries():
        # An option left unset by default lets the library choose (DDP's own bucket cap): say so, not "None".
        options = ", ".join(f"{o.name}={'unset' if o.default is None else o.default}" for o in entry.options().values())
        warmups = getattr(entry.cls, "warmup_needed", {})
        needs = ", ".join(f"{steps} steps on {device}" for device, steps in warmups.items())
        console.say(f"  {entry.name:<14} {entry.description}" + (f"  [options: {options}]" if options else "")
                    + (f"  [warm-up: {needs}]" if needs else ""))  # fmt: skip
    console.say("workloads (parameters per size; options set with --wopt KEY=V[,V…]):")
    for entry in workloads.REGISTRY.entries():
        console.say(f"  {entry.name:<14} {entry.description}")
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


def _describer(name: str, given: list[tuple[str, tuple[str, ...]]]):
    """What `list NAME` says of NAME, a strategy, a cluster profile (built-in, or a .toml file) or a workload
    (registered, or a spec), as a function to call; ConfigError naming the kinds there are for any other name."""
    import impls
    import workloads
    from harness.config.bench import ConfigError
    from harness.perfmodel.clusters import cluster
    from workloads import _zoo

    if name in impls.names():
        return lambda: _describe_strategy(name)
    if name in cluster.builtin_names() or name.endswith(".toml"):
        try:
            profile = cluster.load(name)
        except ConfigError as error:  # its words are predict's (--cluster NAME): this command's name instead
            raise ConfigError(str(error).replace("--cluster ", "ddpbench list ", 1)) from None
        return lambda: _describe_cluster(profile)
    if name in workloads.names() or _zoo.is_spec(name):
        options = _options(name, given)
        sizes = ("full",) if _yours(name) else SIZES  # built as written: --size changes nothing
        built = {size: workloads.create(name, size=size, options=options) for size in sizes}
        counts = {size: parameter_count(name, size, options, count=True) for size in sizes}
        inputs = {size: input_text(workload) for size, workload in built.items()}
        ignored = getattr(built["full"], "dtype_ignored", None)
        return lambda: _describe_workload(name, counts, options, inputs, ignored=ignored)
    raise ConfigError(f"ddpbench list {name!r}: name a strategy ({', '.join(impls.names())}), a workload "
                      f"({', '.join(workloads.names())}, or a spec such as hf:llama or FILE.py:NAME) or a cluster "
                      f"profile ({', '.join(cluster.builtin_names())}, or a .toml file)")  # fmt: skip


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
    from harness.config.bench import ConfigError

    texts = {}
    for key, values in given:
        if len(values) != 1:
            raise ConfigError(f"--wopt {key}={','.join(values)}: list counts one model; give one value")
        texts[key] = values[0]
    options = workloads.parse_options(spec, texts)
    workloads.resolve(spec).check_options(options)
    return options


def parameter_count(spec: str, size: str, options: dict | None = None, *, count: bool = False):
    """The parameters of workload `spec` at `size` with `options`, counted on the meta device (nothing allocated,
    nothing downloaded) and kept in the user's cache (harness.measure.meta_counts); the whole
    modelinfo.ParameterCount where `count`; the reason where it cannot be built here."""
    from harness.measure import meta_counts

    counted = meta_counts.parameters(spec, size, options)
    return counted if count or isinstance(counted, str) else counted.parameters


def input_text(workload) -> str:
    """', 32×32 input' or ', sequence 128': what one sample is at a size, where the workload says (a zoo model),
    so that `list` shows what a size costs (vit_l_16's tiny once hid a 224×224 input behind its parameters)."""
    side = getattr(workload, "image_size", None)
    if isinstance(side, int):
        return f", {side}×{side} input"
    seq = getattr(workload, "seq", None)
    if isinstance(seq, int) and workload.tokens_per_sample() is not None:
        both = " (source and target)" if workload.task == "seq2seq" else ""
        positions = getattr(workload, "positions_beyond_seq", None)  # hf at full: 1024 of a config's 2048, unsaid
        more = f" (not its max_position_embeddings, {positions}: --wopt seq_len=N sets it)" if positions else ""
        return f", sequence {seq}{both}{more}"
    return ""


def _describe_workload(name: str, counts: dict, options: dict, inputs: dict | None = None, *,
                       ignored: str | None = None) -> None:  # fmt: skip
    """Its parameters and gradients per size, and how to bench it (`ignored`: the dtype its configuration names,
    which it is not built in: said on the first line)."""
    import workloads

    registered, yours = name in workloads.names(), _yours(name)
    asked = " ".join(f"--wopt {key}={value}" for key, value in options.items())
    console.say(f"workload {name}" + (f" {asked}" if asked else "")
                + (f": {workloads.REGISTRY.entry(name).description}" if registered else "")
                + (f": {ignored} ignored: parameters fp32, --dtype picks the compute" if ignored else ""))  # fmt: skip
    for size, count in counts.items():
        if isinstance(count, str):
            console.say(f"  {size:<6} unavailable ({count})")
        else:  # DDP all-reduces the gradient of every parameter that trains, in its dtype, a frozen one's not
            dtypes = "/".join(DTYPE_NAMES.get(d, d) for d in count.grad_dtypes)
            which = ("DDP all-reduces them all" if count.trained == count.parameters else
                     f"{_human_count(count.trained)} trained: DDP all-reduces theirs")  # fmt: skip
            label = "" if yours else f"{size:<6} "  # a file of yours: one model, whatever --size
            console.say(f"  {label}{_human_count(count.parameters):>7} parameters{(inputs or {}).get(size, '')}, "
                        f"{_human_bytes(count.grad_bytes)} of {dtypes + ' ' if dtypes else ''}gradients a step "
                        f"({which})")  # fmt: skip
    if registered:
        for option in workloads.REGISTRY.entry(name).options().values():
            if option.name != "size":
                console.say(f"  --wopt {option.name}={option.default}: {option.doc}")
    else:
        console.say("  --wopt: its configuration's fields or its keyword arguments (docs/your-model.md)")
    full = counts.get("full")
    too_large = _too_large_here(name, "full", options) if full is not None and not isinstance(full, str) else ""
    if not too_large:
        console.say(f"  counted on the meta device; bench it: ddpbench bench --workloads {name}"
                    + ("" if yours else " --size full") + (f" {asked}" if asked else ""))  # fmt: skip
        return
    how, then = _bench_smaller(name, options, yours=yours)
    console.say(f"  counted on the meta device; {'' if yours else 'at full, '}{too_large}: bench it smaller{how}")
    if then:
        console.say(f"  then {then}")


def _bench_smaller(name: str, options: dict, *, yours: bool) -> tuple[str, str | None]:
    """How to bench a model whose full size outgrows this machine: the bench command, at a size that fits and steps
    briefly here, then the predict that counts the one to train from its run (None where no command was found). A
    zoo's or registered model at the largest size that does, its own batch and sequence, the options given to `list`
    (but task) left to predict --train-wopt; a file of yours (--size scales nothing) with its whole-number options
    halved until it does. A user's 1.1B config.json was told "bench it at --size small", with no command, and benched
    it at the sequence it trains at, 2048: 12 minutes, its first configuration unfinished."""
    from harness.commands.console.invoked import ddpbench_command

    if yours:
        kept, sizes = _halved_to_fit(name, options), ("full",)
    else:
        kept, sizes = {key: value for key, value in options.items() if key == "task"}, ("small", "tiny")
    size = next((size for size in sizes if kept is not None and _short(name, size, kept)), None)
    if size is None:  # nothing found that does: how, in words
        how = " with --wopt" if yours else " at --size tiny with --wopt (its fields)"
        return f"{how}, then give these options to predict --train-wopt KEY=VALUE (docs/your-model.md)", None
    import workloads

    workload = workloads.create(name, size=size, options=kept)
    program, train = ddpbench_command(), {key: value for key, value in options.items() if kept.get(key) != value}
    wopts = "".join(f" --wopt {key}={value}" for key, value in kept.items())
    trains = "".join(f" --train-wopt {key}={value}" for key, value in train.items())
    seq = "seq_len" not in train and _takes(name, "seq_len", getattr(workload, "seq", None))
    bench = (f" ({_human_count(parameter_count(name, size, kept))} parameters{input_text(workload)}): {program} "
             f"bench --workloads {name}{'' if yours else f' --size {size}'}{wopts} --batch-size "
             f"{workload.default_batch_size()}")  # fmt: skip
    predict = f"{program} predict --run RUN --cluster dgx-h100{trains}" + (" --train-wopt seq_len=N" if seq else "")
    return bench, (f"{predict} predicts the model you train" + (", at the sequence N you train at," if seq else "")
                   + " from that run (docs/your-model.md)")  # fmt: skip


def _takes(name: str, key: str, value) -> bool:
    """Whether workload `name` takes option `key` at `value` (an hf model its seq_len), as predict --train-wopt
    checks it."""
    import workloads
    from harness.config.bench import ConfigError

    try:
        workloads.resolve(name).check_options(workloads.parse_options(name, {key: str(value)}))
    except ConfigError:
        return False
    return isinstance(value, int)


SHORT_PARAMETERS = 20e6
"""The most parameters a model benched smaller has: a zoo's --size small (4 to 7M) steps in about a second on a CPU
thread at its batch, and its dry run stays short; a file of yours halved only until its state fit was 625M."""


def _short(name: str, size: str, options: dict) -> bool:
    """Whether workload `name` at `size` with `options` fits this machine and steps briefly here."""
    count = parameter_count(name, size, options)
    return not isinstance(count, str) and count <= SHORT_PARAMETERS and not _too_large_here(name, size, options)


def _halved_to_fit(name: str, options: dict, *, most: int = 10) -> dict | None:
    """The whole-number options of a file of yours halved together (to 1 at least) until it is `_short`; None where
    none are given, or halving them does not make it so (or it cannot be built)."""
    counted = {key: value for key, value in options.items() if isinstance(value, int) and not isinstance(value, bool)}
    for _ in range(most if counted else 0):
        counted = {key: max(1, value // 2) for key, value in counted.items()}
        halved = {**options, **counted}
        if isinstance(parameter_count(name, "full", halved), str):
            return None
        if _short(name, "full", halved):
            return halved
    return None


def _too_large_here(name: str, size: str, options: dict) -> str:
    """'a DDP rank holds about 31.2 GiB at batch 8 (parameters, …), more than the 18.2 GiB this
    machine has available for 2 ranks' where `bench --workloads NAME` (its default batch, fp32, SGD) would outgrow
    it: on the CPU as bench's own check judges it (console.plan: the host's available memory, shared by its 2
    simulated ranks), on a GPU by its memory, one rank (bench checks none there); else, on the CPU, where it has more
    than SHORT_PARAMETERS, list's own limit (bench --dry-run says how long its steps take); '' where it fits or
    cannot be counted. Memory is judged first: a 40B model was told only its count, never that no rank could hold
    it. A user's 350M file was listed with 'bench it', whose dry run said its ranks would be killed: list counted
    16 B a parameter against the host's total memory."""
    import torch

    import workloads
    from harness.commands.console.plan import available_bytes, ddp_rank_bytes
    from harness.measure import meta_counts

    count, gpu = parameter_count(name, size, options), torch.cuda.is_available()
    many = not gpu and not isinstance(count, str) and count > SHORT_PARAMETERS
    many_words = (f"{_human_count(count)} parameters, more than the {_human_count(SHORT_PARAMETERS)} list benches on "
                  "a CPU (bench --dry-run says how long)") if many else ""  # fmt: skip
    batch = workloads.create(name, size=size, options=options).default_batch_size()
    counts = meta_counts.counts(name, size, options, batch_size=batch, dtype="fp32")
    if gpu:
        memory, ranks, where = torch.cuda.get_device_properties(0).total_memory, 1, "this machine's GPU has"
    else:
        memory, ranks, where = available_bytes(), 2, "this machine has available"
    if counts is None or memory is None:
        return many_words
    rank, parts = ddp_rank_bytes(counts, "sgd")
    if rank * ranks <= memory:
        return many_words
    for_ranks = f" for {ranks} ranks" if ranks > 1 else ""
    return (f"a DDP rank holds about {_human_bytes(rank)} at batch {batch} ({', '.join(parts[:-1])} and {parts[-1]}), "
            f"more than the {_human_bytes(memory)} {where}{for_ranks}")  # fmt: skip


def _describe_strategy(name: str) -> None:
    import impls

    entry = impls.REGISTRY.entry(name)
    console.say(f"strategy {name}: {entry.description}")
    for option in entry.options().values():
        default = "unset" if option.default is None else option.default
        valid = f" ({option.valid})" if option.valid else ""
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
    return f"unavailable ({count})" if isinstance(count, str) else _human_count(count)


DTYPE_NAMES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
"""A parameter's torch dtype as the project names it elsewhere (--dtype)."""


def _human_bytes(count: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count:.0f} B"


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

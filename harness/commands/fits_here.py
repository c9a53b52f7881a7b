"""What `ddpbench list` says of a model's size and of whether it fits here: its parameters counted on the meta
device, what one sample is, whether a DDP rank of it outgrows this machine (`too_large_here`) and then the bench at a
size that does and the predict that counts the one to train from its run (`bench_smaller`)."""

from __future__ import annotations

import re


def parameter_count(spec: str, size: str, options: dict | None = None, *, count: bool = False):
    """The parameters of workload `spec` at `size` with `options`, counted on the meta device (nothing allocated,
    nothing downloaded) and kept in the user's cache (harness.measure.meta_counts); the whole
    modelinfo.ParameterCount where `count`; the reason where it cannot be built here."""
    from harness.measure import meta_counts

    counted = meta_counts.parameters(spec, size, options)
    return counted if count or isinstance(counted, str) else counted.parameters


def input_text(workload, *, positions: bool = True) -> str:
    """', 32×32 input' or ', sequence 128': what one sample is at a size, where the workload says (a zoo model),
    so that `list` shows what a size costs (vit_l_16's tiny once hid a 224×224 input behind its parameters); with
    the positions an hf configuration has beyond it where `positions`."""
    side = getattr(workload, "image_size", None)
    if isinstance(side, int):
        return f", {side}×{side} input"
    seq = getattr(workload, "seq", None)
    if isinstance(seq, int) and workload.tokens_per_sample() is not None:
        both = " (source and target)" if workload.task == "seq2seq" else ""
        beyond = positions and getattr(workload, "positions_beyond_seq", None)  # hf at full: 1024 of a config's 2048
        more = f" (not its max_position_embeddings, {beyond}: --wopt seq_len=N sets it)" if beyond else ""
        return f", sequence {seq}{both}{more}"
    return ""


def bench_smaller(name: str, options: dict, *, yours: bool, optimizer: str | None = None,
                  cluster: str = "dgx-h100") -> tuple[str, str | None]:  # fmt: skip
    """How to bench a model whose full size outgrows this machine: the bench command, at a size that fits and steps
    briefly here, then the predict that counts the one to train from its run (None where no command was found). A
    zoo's or registered model at the largest size that does, its own batch and sequence, the options given to `list`
    (but task) left to predict --train-wopt (an hf model's widths given: at small in their shape, `shape_kept`); a
    file of yours (--size scales nothing) with its whole-number options halved until it does. A user's 1.1B
    config.json was told "bench it at --size small", with no command, and benched it at the sequence it trains at,
    2048: 12 minutes, its first configuration unfinished. The optimizer you train with, where known (predict's), is
    on the bench's line, else one to choose (an Adam user copying it got SGD's memory, and predict counts the run's
    optimizer). `cluster`: predict's --cluster (and --nodes) as given there,
    carried into the predict said (it once said dgx-h100 to a user who had asked of dgx-a100-40gb)."""
    from harness.commands.console.invoked import ddpbench_command

    shaped = None if yours else shape_kept(name, options)  # an hf model's widths given: smaller, of its shape
    if yours:
        kept, sizes = _halved_to_fit(name, options), ("full",)
    elif shaped:
        kept, sizes = shaped, ("small",)
    else:
        kept, sizes = {key: value for key, value in options.items() if key == "task"}, ("small", "tiny")
    size = next((size for size in sizes if kept is not None and _short(name, size, kept)), None)
    whole = size is None and not yours and _whole_at_every_size(name, kept)
    if whole:  # a zoo image model: every size is the architecture named, tiny its cheapest input
        size = "tiny"
    elif size is None:  # nothing found that does: how, in words
        how = " with --wopt" if yours else " at --size tiny with --wopt (its fields)"
        return f"{how}, then give these options to predict --train-wopt KEY=VALUE (docs/your-model.md)", None
    import workloads

    workload = workloads.create(name, size=size, options=kept)
    program, train = ddpbench_command(), {key: value for key, value in options.items() if kept.get(key) != value}
    train.update(_own_widths(name, options, kept) if shaped else {})  # hf:llama's 16 key/value heads, halved too
    wopts = "".join(f" --wopt {key}={value}" for key, value in kept.items())
    trains = "".join(f" --train-wopt {key}={value}" for key, value in train.items())
    seq = "seq_len" not in train and _takes(name, "seq_len", getattr(workload, "seq", None))
    chosen = f" --optimizer {optimizer}" if optimizer and optimizer != "sgd" else "" if optimizer else ADAM_TOO
    bench = (f" ({human_count(parameter_count(name, size, kept))} parameters{input_text(workload)}): {program} "
             f"bench --workloads {name}{'' if yours else f' --size {size}'}{wopts} --batch-size "
             f"{workload.default_batch_size()}")  # fmt: skip
    if shaped:  # the widths given halved together: what is kept said, as --size alone would keep the widths given
        bench = bench.replace(f"{input_text(workload)})", f"{input_text(workload)}; {_shape_words(options, kept)})", 1)
    if whole:
        kin = _registered_kin(name)
        bench = (", in its input alone (--size sets only the input and classes; the architecture is whole at every "
                 "size; tiny's " + bench.removeprefix(" (") + (f" (or the registered {kin}, the same family at smaller "
                 f"widths: {program} list {kin})" if kin else ""))  # fmt: skip
    bench += chosen  # the optimizer last: a zoo model's kin is said of the command before it
    predict = f"{program} predict --run RUN --cluster {cluster}{trains}" + (" --train-wopt seq_len=N" if seq else "")
    return bench, (f"{predict} predicts the model you train" + (", at the sequence N you train at," if seq else "")
                   + " from that run (docs/your-model.md)")  # fmt: skip


WIDTHS = ("layers", "hidden", "heads", "intermediate")
"""The standard fields of an hf configuration (workloads._zoo.hf.FIELDS) that --size scales, unless a --wopt sets
them: then as given at every size."""


def _full_widths(name: str, options: dict) -> tuple[dict, dict, dict]:
    """(an hf model's WIDTHS at full with `options`, by its configuration's own names (gpt2's n_layer), those it
    counts; its attribute_map; its vocabulary, {"vocab_size": 50257}); empty for any other workload, or no options."""
    import workloads
    from workloads._zoo.hf import FIELDS
    from workloads._zoo.hf_heads import is_count

    if not options or workloads.resolve(name).kind != "hf":  # none given: no configuration built (list's cache)
        return {}, {}, {}
    config = workloads.create(name, size="full", options=options).settings
    aliases = getattr(config, "attribute_map", {})
    own = dict.fromkeys(aliases.get(field, field) for standard in WIDTHS for field in FIELDS[standard])
    widths = {field: getattr(config, field) for field in own if field in vars(config)}
    vocab = {field: getattr(config, field) for field in [aliases.get("vocab_size", "vocab_size")]}
    return ({key: value for key, value in widths.items() if is_count(value)}, aliases,
            {key: value for key, value in vocab.items() if is_count(value)})  # fmt: skip


def widths_given(name: str, options: dict) -> list[str]:
    """The --wopt given that set an hf model's width, depth or heads (WIDTHS), which --size then scales no more at
    any size: hf:gpt2 --wopt n_layer=24 --wopt n_embd=2048 --wopt n_head=16 is 1.2B at tiny, 1.3B at full."""
    widths, aliases, _ = _full_widths(name, options)
    return [key for key in options if aliases.get(key, key) in widths]


def shape_kept(name: str, options: dict, *, most: int = 10) -> dict | None:
    """`options` with the hf model's widths (its WIDTHS at full: those given, its own the rest) halved together until
    it is `_short` at --size small, its vocabulary the full's: the model's kind kept (its layers to heads, a head's
    width, its MLP's ratio, its vocabulary) at smaller widths. None where no width is given (--size scales it), or
    a width would be halved to an odd count first. A 1.3B gpt2's widths, given, were benched as gpt2's own small."""
    widths, aliases, vocab = _full_widths(name, options)
    given = {aliases.get(key, key): key for key in options}  # the user's names for them, where given
    if not set(given) & set(widths):
        return None
    halved = {given.get(field, field): value for field, value in widths.items()}
    for _ in range(most):
        if any(value % 2 for value in halved.values()):
            return None
        halved = {key: value // 2 for key, value in halved.items()}
        kept = {**options, **halved, **{key: value for key, value in vocab.items() if key not in given}}
        if _short(name, "small", kept):
            return kept
    return None


def _own_widths(name: str, options: dict, kept: dict) -> dict:
    """The model's own widths at full that `shape_kept` halved though not given (hf:llama's num_key_value_heads,
    which follow its heads): predict --train-wopt restores them, else the model it counts keeps the bench's."""
    widths, aliases, _ = _full_widths(name, options)
    return {
        key: widths[aliases.get(key, key)] for key in kept if key not in options and aliases.get(key, key) in widths
    }


def _shape_words(options: dict, kept: dict) -> str:
    """'its widths ÷8, its shape kept: layers to heads, a head's width, its vocabulary': how `shape_kept`'s options
    stand to those given."""
    ratio = next(options[key] // kept[key] for key in options if kept.get(key) != options[key])
    return f"its widths ÷{ratio}, its shape kept: layers to heads, a head's width, its vocabulary"


def _whole_at_every_size(name: str, options: dict) -> bool:
    """Whether `name` is a zoo image model (--size sets its input and head, never its architecture: vit_b_16 is
    85.7M parameters at tiny) whose tiny size a DDP rank here holds: list once offered "--size tiny with --wopt (its
    fields)", no command, and the fields it suggested were ones the builder fixes."""
    import workloads

    if name in workloads.names() or ":" not in name:
        return False
    workload = workloads.create(name, size="tiny", options=options)
    return isinstance(getattr(workload, "image_size", None), int) and not too_large_here(
        name, "tiny", options, many=False
    )


def _registered_kin(name: str) -> str | None:
    """The registered workload that is torchvision model `name`'s family at smaller widths (`vit` for vit_b_16,
    `resnet50` for resnet50), if one is."""
    import workloads

    kind, _, model = name.partition(":")
    return next((w for w in workloads.names() if kind == "torchvision" and (model == w or model.startswith(w + "_"))),
                None)  # fmt: skip


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


ADAM_TOO = ", with --optimizer adam or adamw where you train with it (predict counts the run's optimizer)"
"""After list's bench command, the optimizer unknown: an Adam user copying it got SGD's memory."""

SHORT_PARAMETERS = 20e6
"""The most parameters a model benched smaller has: a zoo's --size small (4 to 7M) steps in about a second on a CPU
thread at its batch, and its dry run stays short; a file of yours halved only until its state fit was 625M."""


def _short(name: str, size: str, options: dict) -> bool:
    """Whether workload `name` at `size` with `options` fits this machine and steps briefly here."""
    count = parameter_count(name, size, options)
    return not isinstance(count, str) and count <= SHORT_PARAMETERS and not too_large_here(name, size, options)


COUNTS_OF_KINDS = re.compile(r"(experts?|heads?|groups?|top_?k|per_tok)$", re.IGNORECASE)
"""Options that count a model's parallel parts (experts, attention heads, groups, experts a token routes to): halving
them changes the model's kind, not its size (a 300M MoE's 8 experts halved to 2 lost its idle experts), so a file
of yours is benched smaller by its widths and depth alone."""


def _halved_to_fit(name: str, options: dict, *, most: int = 10) -> dict | None:
    """The whole-number options of a file of yours, but its COUNTS_OF_KINDS, halved together (to 1 at least) until
    it is `_short`; None where none are given, or halving them does not make it so (or it cannot be built)."""
    whole = {key: value for key, value in options.items() if isinstance(value, int) and not isinstance(value, bool)}
    counted = {key: value for key, value in whole.items() if not COUNTS_OF_KINDS.search(key)}
    for _ in range(most if counted else 0):
        counted = {key: max(1, value // 2) for key, value in counted.items()}
        halved = {**options, **counted}
        if isinstance(parameter_count(name, "full", halved), str):
            return None
        if _short(name, "full", halved):
            return halved
    return None


def too_large_here(
    name: str,
    size: str,
    options: dict,
    *,
    batch: int | None = None,
    optimizer: str = "sgd",
    ranks: int | None = None,
    many: bool = True,
) -> str:
    """'a DDP rank holds about 31.2 GiB of parameters, … at batch 8, sequence 1024, fp32, SGD (bench's defaults): 2
    ranks × 31.2 GiB = 62.4 GiB, more than the 18.2 GiB this machine has available' where `bench --workloads NAME` (its
    default batch, fp32, SGD: said, as a 1.3B model's 47 GiB read as what training it takes, AdamW's 10 GiB more unsaid)
    would outgrow it: on the CPU as bench's own check judges it (console.plan: the host's available memory, shared by
    its 2 simulated ranks), on a GPU by its memory, one rank (bench checks none there); else, on the CPU, where it has
    more than SHORT_PARAMETERS, list's own limit (bench --dry-run says how long its steps take); '' where it fits or
    cannot be counted. Memory is judged first: a 40B model was told only its count, never that no rank could hold it. A
    user's 350M file was listed with 'bench it', whose dry run said its ranks would be killed: list counted 16 B a
    parameter against the host's total memory. `batch`, `optimizer` and `ranks` judge another setup than bench's
    defaults (predict's profile: one process, its batch and optimizer), `many` False its memory alone."""
    import workloads
    from harness.commands.console.plan import available_bytes, ddp_rank_bytes
    from harness.config.bench import cuda_here
    from harness.measure import meta_counts
    from harness.results.units import human_bytes

    count, gpu = parameter_count(name, size, options), cuda_here()  # no GPU driver here: said without torch
    many = many and not gpu and not isinstance(count, str) and count > SHORT_PARAMETERS
    many_words = (f"{human_count(count)} parameters, more than the {human_count(SHORT_PARAMETERS)} a CPU steps "
                  "through briefly (bench --dry-run says how long)") if many else ""  # fmt: skip
    workload = workloads.create(name, size=size, options=options)
    batch = batch or workload.default_batch_size()
    counts = meta_counts.counts(name, size, options, batch_size=batch, dtype="fp32")
    if gpu:
        import torch

        memory, ranks, where = torch.cuda.get_device_properties(0).total_memory, ranks or 1, "this machine's GPU has"
    else:
        memory, ranks, where = available_bytes(), ranks or 2, "this machine has available"
    if counts is None or memory is None:
        return many_words
    rank, parts = ddp_rank_bytes(counts, optimizer)
    if rank * ranks <= memory:
        return many_words
    # the ranks' sum against the memory, said so: "a rank holds 10.3 GiB, more than the 18.4 GiB … for 2 ranks"
    # read as 10.3 > 18.4
    total = f": {ranks} ranks × {human_bytes(rank)} = {human_bytes(rank * ranks)}," if ranks > 1 else ","
    defaults = "" if gpu or optimizer != "sgd" else " (bench's defaults)"  # on a GPU its --dtype auto computes in bf16
    named = {"sgd": "SGD", "adam": "Adam", "adamw": "AdamW"}.get(optimizer, optimizer)
    return (f"a DDP rank holds about {human_bytes(rank)} of {', '.join(parts[:-1])} and {parts[-1]} at batch {batch}"
            f"{input_text(workload, positions=False)}, fp32, {named}{defaults}{total} more than the "
            f"{human_bytes(memory)} {where}")  # fmt: skip


def human_count(count: int) -> str:
    for unit, scale in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f}{unit}"
    return str(count)

"""What `predict` says of each strategy's memory per rank, as a table: the model state at each GPU count asked, the
step's peak, what is kept beside the state, and whether it fits the cluster's GPU; the strategies whose figures are
all alike said in one row (harness.perfmodel.memory counts them, as the what-if page does)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.commands.console import once, say, say_once
from harness.perfmodel.fits import COUNT_BELOW_PEAK

if TYPE_CHECKING:
    import pandas as pd


def model_state(state: pd.DataFrame, worlds: list[int], cluster=None, *, size_note: str = "") -> None:
    """Each strategy's model state per rank at `worlds` (memory.state_per_rank's rows of one setup), smallest first:
    what the run's ranks held, carried to GPU counts it did not reach; with the activations counted, its step's peak
    and, given a `cluster` with a GPU memory, whether it fits there (`size_note`: the rows are not the run's model)."""
    if state.empty:
        return
    from harness.commands.console.predictions import labelled
    from harness.perfmodel.fits import fit_phrase
    from harness.perfmodel.memory import need_mb, unrecorded
    from harness.perfmodel.memory_words import activation_words, floor_words
    from harness.perfmodel.pick import failed

    state = labelled(state)
    at = state[state["world_size"].isin(worlds)].sort_values(["world_size", "total_mb"], kind="stable")
    counted = "activation_mb" in at and at["activation_mb"].notna().any()
    capacity = getattr(cluster, "gpu_memory_gib", 0.0) if counted else 0.0
    order = list(dict.fromkeys(at[at["world_size"] == worlds[-1]].sort_values("total_mb", kind="stable")["strategy"]))
    # what is kept beside the state at the peak, a column a kind any strategy keeps (a sharded optimizer's
    # temporaries shrink with the GPUs: said at each, as the peak is); unrecorded ones are said below
    kept = [(column, short) for column, short in KEPT if counted and column in at and (at[column] > 0).any()]
    groups: dict[tuple, list[str]] = {}
    for name in order:
        rows = at[at["strategy"] == name]
        cells = [_figures(rows["total_mb"]) + _split(rows)]
        if counted:
            uncounted = rows["activation_mb"].isna().all()
            cells += ["not counted" if uncounted else _figures(need_mb(rows))]
            cells += [_figures(rows[column]) if (rows[column] > 0).any() else "" for column, _ in kept]
            cells += ["" if uncounted or not capacity else fit_phrase(rows, capacity, terse=True)]
        groups.setdefault(tuple(cells), []).append(name)
    header = ["model state"] + (["peak", *(short for _, short in kept)] if counted else [])
    header += [f"left of {capacity:g} GiB"] if capacity else []  # what fits leaves
    names = [_named(group, state) for group in groups.values()]
    table = [("", *header), *((name, *cells[: len(header)]) for name, cells in zip(names, groups, strict=True))]
    widths = [max(len(row[k]) for row in table) for k in range(len(header))]
    measured = ", ".join(str(int(w)) for w in sorted(state.loc[state["measured"], "world_size"].unique()))
    counts = " / ".join(f"w{w}" for w in worlds)  # the order of a cell's figures; where none differs, said so
    counts = f", alike at {counts}" if len(worlds) > 1 and not any(" / " in c for g in groups for c in g) else \
        f" at {counts}"  # fmt: skip
    whole = " (unsharded: parameters and gradients held whole)" * any(c == "unsharded_mb" for c, _ in kept)
    peak = f"; peak: the state, backward's or the optimizer's part and what is kept beside{whole}" * bool(counted)
    roomy = _roomy(at, order, capacity) if capacity else ""  # the batch asked: said in the header, the rows narrow
    fit = (
        f"; left: in one GPU of {cluster.name}, for buffers, working memory, CUDA's and NCCL's{roomy}"
        if capacity
        else ""
    )
    legend = once(
        f"model state (parameters + gradients + optimizer state, at the most GPUs) as held at {measured} ranks, then "
        f"whole + split / n{peak}"
    )  # several clusters: the first's, the others' 'as above'
    if legend:
        say(f"ddpbench predict: memory per rank{counts}: {legend}{fit}:")
    else:
        say(f"ddpbench predict: memory per rank{counts} on {getattr(cluster, 'name', 'the GPU')}, as above{roomy}:")
    for row in table:
        say("  " + "  ".join(cell.ljust(width) for cell, width in zip(row, [*widths, 0], strict=False)).rstrip())
    notes = (
        *_variants(groups.values(), state),
        floor_words(state),
        unrecorded(at) if counted else "",
        size_note,
        failed.left_out_words(state),
    )  # a strategy that failed: why it is never booked, in the table or not
    for words in notes:  # several clusters: a note the first's but for its name, said with the first alone
        name = getattr(cluster, "name", "")
        if words and once(f"memory note: {words.replace(name, '{cluster}') if name else words}"):
            say(f"  {words}")
    if words := activation_words(at[at["world_size"] == worlds[-1]], totals=False, seq2seq=_seq2seq(at)):
        say_once(f"ddpbench predict: and {words}")


def no_state(run_dir, rows: pd.DataFrame) -> None:
    """Why a run with rows gave no model state per rank (perfmodel.memory.state_per_rank fits a rank's share from two
    world sizes or more), and the bench that measures them: the ladder, where the run left it out (--largest-only)."""
    from harness.commands.console import warning
    from harness.commands.console.rounds import fresh_run_command
    from harness.results import store

    try:
        meta = store.read_run_meta(run_dir)
    except (OSError, ValueError):  # its words need no command: said without one
        meta = {}
    worlds = sorted({int(w) for w in rows["world_size"].dropna()}) if "world_size" in rows else []
    measured = f"run {meta.get('run_id', run_dir.name)} measured each strategy at {_ranks(worlds)} alone"
    if (meta.get("config") or {}).get("ladder") is False and max(worlds, default=1) > 1:
        rerun = fresh_run_command(tuple(meta.get("command") or ()), (), drop={"--largest-only": 0})
        fix = f"bench the ladder of world sizes, without --largest-only{f': {rerun}' if rerun else ''}"
    else:
        fix = "bench at --gpus 2 too"
    warning(f"no model state per rank, so no choice of strategy: a rank's share of the state is fitted from a strategy "
            f"measured at two world sizes or more, and {measured}: {fix}")  # fmt: skip


def _ranks(worlds: list[int]) -> str:
    return " and ".join(f"{w} rank{'s' * (w > 1)}" for w in worlds) or "no world size"


def _roomy(at: pd.DataFrame, order: list[str], capacity_gib: float) -> str:
    """', with room (8% of the count) up to a batch a rank of fsdp 10, zero 8, stock about 1,100 by its slope,
    checked to 16': per strategy, the most samples a rank at which it fits with room at every GPU count of `at`
    (fits.roomy_batch: a tight fit's note says it too); past ROOMY_BATCH_CHECKED × the batch counted, as far as
    the count's growth was checked, what its slope gives (fits.largest_batch), said unchecked (a tiny model's read
    537826; vit_b_16's 'at least 128' hid some 1,100); '' where none would, or no batch is counted."""
    from harness.perfmodel.fits import ROOMY_BATCH_CHECKED, largest_batch, roomy_batch

    if "batch_size" not in at or at.empty:
        return ""
    batches = roomy_batch(at, capacity_gib).groupby(at["strategy"]).min()
    sloped = largest_batch(at, capacity_gib / (1 + COUNT_BELOW_PEAK)).groupby(at["strategy"]).min()
    checked = (at["batch_size"] * ROOMY_BATCH_CHECKED).groupby(at["strategy"]).min()
    said = {name: (f"about {_about(sloped[name])} by its slope, checked to {int(checked[name])}"
                   if batches[name] >= checked[name] else f"{int(batches[name])}")
            for name in order if batches.get(name, 0) > 0}  # fmt: skip
    if not said:
        return ""
    alike = len(set(said.values())) == 1 and len(said) > 1  # one figure for all: said once
    listed = f"{next(iter(said.values()))}, each" if alike else ", ".join(f"{n} {t}" for n, t in said.items())
    return f", with room ({COUNT_BELOW_PEAK:.0%} of the count) up to a batch a rank of {listed}"


def _about(count: float) -> str:
    """A count past what was checked, to two figures: '1,100' (1,137), '26'."""
    return f"{int(float(f'{count:.2g}')):,}"


KEPT = (("buckets_mb", "buckets"), ("unsharded_mb", "unsharded"), ("sync_temp_mb", "sync temps"),
        ("optimizer_temp_mb", "optim. temps"),
        ("hook_copies_mb", "hook copies"), ("hook_state_mb", "hook state"))  # fmt: skip
"""The table's columns of what is kept beside the state at the peak (memory_words.BESIDE's, headed short: the
parameters and gradients held whole, a sync's declared temporaries, a GPU's Adam temporaries, PowerSGD's copies
and error feedback)."""


def _mib(value: float) -> str:
    from harness.perfmodel.memory import mib_text

    return mib_text(value)


def _split(rows: pd.DataFrame) -> str:
    """' = 5.01+5.01+10': the model state's parts (parameters, gradients, optimizer state) at the most GPUs,
    beside its total, whose last figure they add up to (a 1.3B Llama's table said 20 GiB alone, its Adam state's
    10 GiB unsaid); a unit said once, by the total, where every part not 0 is in it (SGD's state: '0'); '' where
    the rows do not tell them apart, or their total differs by GPU count."""
    from harness.perfmodel.memory import HELD

    if not all(column in rows for column in HELD) or " / " in _figures(rows["total_mb"]):
        return ""  # a total that differs by GPU count (sharded) keeps its cell to the counts' figures: the width
    values = [float(rows[column].iloc[-1]) for column in HELD]
    said = [_mib(value) for value in values]
    unit = _mib(float(rows["total_mb"].iloc[-1])).rsplit(" ", 1)[-1]
    if all(text.endswith(f" {unit}") for text, value in zip(said, values, strict=True) if value):
        said = [text.rsplit(" ", 1)[0] if value else "0" for text, value in zip(said, values, strict=True)]
    return " = " + "+".join(said)  # tight: the table keeps to the console's width


def _figures(values) -> str:
    """'949 MiB' where alike at every GPU count, else '119 / 59.3 / 29.7 MiB', a unit said once where it repeats
    ('1.25 GiB / 642 / 322 MiB')."""
    said = [_mib(float(v)) for v in values]
    if len(set(said)) == 1:
        return said[0]
    parts = [text.rsplit(" ", 1) for text in said]
    return " / ".join(
        figure if k + 1 < len(parts) and parts[k + 1][1] == unit else f"{figure} {unit}"
        for k, (figure, unit) in enumerate(parts)
    )


def _named(group: list[str], state: pd.DataFrame) -> str:
    """A row's strategies: 'fsdp'; where every variant of a strategy that shares an option's value shares the row,
    that strategy with the option and their count, 'stock ×4', 'stock gradient_as_bucket_view=True ×4'."""
    impl_of = dict(zip(state["strategy"], state["impl"], strict=False))
    said = []
    for impl in dict.fromkeys(impl_of[name] for name in group):
        mine = [name for name in group if impl_of[name] == impl]
        said += [head] if (head := _shared(mine, impl, state)) else mine
    return ", ".join(said)


def _shared(mine: list[str], impl: str, state: pd.DataFrame) -> str | None:
    """'stock gradient_as_bucket_view=True ×4': the name of several variants of `impl` that are every variant whose
    options (as asked) agree with theirs on the options where all of them agree and the others do not; else None."""
    import impls
    from harness.results.values import options_of, options_words

    asked = {n: options_of(o) for n, o, i in zip(state["strategy"], state["impl_options"], state["impl"],
                                                   strict=False) if i == impl}  # fmt: skip
    if len(mine) < 2:
        return None
    declared = impls.entry(impl).options() if impl in impls.names() else {}
    for options in asked.values():  # an option a variant left (or dropped as acting on nothing) at what it is
        options |= {k: declared[k].default for d in asked.values() for k in d if k not in options and k in declared}

    def agreed(names):  # the options all of `names` ask alike
        return {k: v for k, v in asked[names[0]].items() if all(k in asked[n] and asked[n][k] == v for n in names)}

    keys = {k: v for k, v in agreed(mine).items() if k not in agreed(list(asked))}
    alike = [n for n in asked if all(k in asked[n] and asked[n][k] == v for k, v in keys.items())]
    return " ".join(filter(None, (impl, options_words(keys), f"×{len(mine)}"))) if set(alike) == set(mine) else None


def _variants(groups, state: pd.DataFrame) -> list[str]:
    """The variants a '×n' row stands for, once: 'stock ×4: stock, stock comm_hook=fp16, …'."""
    impl_of = dict(zip(state["strategy"], state["impl"], strict=False))
    said = []
    for group in groups:
        for impl in dict.fromkeys(impl_of[name] for name in group):
            mine = [name for name in group if impl_of[name] == impl]
            if head := _shared(mine, impl, state):
                said.append(f"{head}: {', '.join(mine)}")
    return ["; ".join(said)] if said else []


def _seq2seq(rows: pd.DataFrame) -> bool:
    """Whether the rows' workload trains on a source and a target (t5): "2 samples of 1,024 tokens" then follows
    --train-wopt seq_len=512 unexplained."""
    import workloads

    label = str(rows["workload"].iloc[0]) if "workload" in rows and len(rows) else ""
    try:
        return getattr(workloads.create(label.partition("[")[0], size="tiny"), "task", None) == "seq2seq"
    except Exception:  # a workload not built again here: its tokens said as they are
        return False

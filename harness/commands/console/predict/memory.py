"""What `predict` says of each strategy's memory per rank, as a table: the model state at each GPU count asked, the
step's peak, what is kept beside the state, and whether it fits the cluster's GPU; the strategies whose figures are
all alike said in one row (harness.perfmodel.memory counts them, as the what-if page does)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.commands.console import say, say_once

if TYPE_CHECKING:
    import pandas as pd


def model_state(state: pd.DataFrame, worlds: list[int], cluster=None, *, size_note: str = "") -> None:
    """Each strategy's model state per rank at `worlds` (memory.state_per_rank's rows of one setup), smallest first:
    what the run's ranks held, carried to GPU counts it did not reach; with the activations counted, its step's peak
    and, given a `cluster` with a GPU memory, whether it fits there (`size_note`: the rows are not the run's model)."""
    if state.empty:
        return
    from harness.commands.console.predictions import labelled
    from harness.perfmodel.memory import fit_phrase, need_mb, unrecorded
    from harness.perfmodel.memory_words import BESIDE, activation_words, floor_words

    state = labelled(state)
    at = state[state["world_size"].isin(worlds)].sort_values(["world_size", "total_mb"], kind="stable")
    counted = "activation_mb" in at and at["activation_mb"].notna().any()
    capacity = getattr(cluster, "gpu_memory_gib", 0.0) if counted else 0.0
    order = list(dict.fromkeys(at[at["world_size"] == worlds[-1]].sort_values("total_mb", kind="stable")["strategy"]))
    groups: dict[tuple, list[str]] = {}
    for name in order:
        rows = at[at["strategy"] == name]
        cells = [_figures(rows["total_mb"])]
        if counted:
            # what is kept beside the state at each GPU count, as the peak is: one that shrinks with the GPUs (a
            # sharded optimizer's temporaries) is said at each, under the header's counts
            kept = ", ".join(f"{short} {_figures(rows[column])}" for column, _, short in BESIDE
                             if column in rows and (rows[column] > 0).any())  # fmt: skip  # unrecorded: said below
            uncounted = rows["activation_mb"].isna().all()
            cells += ["not counted" if uncounted else _figures(need_mb(rows)), kept or "none"]
            fits = "" if uncounted or not capacity else fit_phrase(rows, capacity, terse=True)
            cells += [fits]  # with what it leaves, as the what-if page says it
        groups.setdefault(tuple(cells), []).append(name)
    header = [f"model state {' / '.join(f'w{w}' for w in worlds)}"]
    if counted:
        header += [f"{what} {' / '.join(f'w{w}' for w in worlds)}" for what in ("peak", "kept beside at the peak")]
        header += [f"in a GPU of {capacity:g} GiB ({cluster.name})"] if capacity else []
    names = [_named(group, state) for group in groups.values()]
    table = [
        ("strategies", *header),
        *((name, *cells[: len(header)]) for name, cells in zip(names, groups, strict=True)),
    ]
    widths = [max(len(row[k]) for row in table) for k in range(len(header))]
    measured = ", ".join(str(int(w)) for w in sorted(state.loc[state["measured"], "world_size"].unique()))
    peak = "; the step's peak: the state, backward's or the optimizer's part, and what is kept beside" * bool(counted)
    before = "before buffers, working memory, the CUDA context and NCCL's (what is left is for them)"
    fit = f"; fits one GPU: {before}" if capacity else ""  # the rows say what is left; the what-if page each in full
    say(f"ddpbench predict: memory per rank: the model state (parameters, gradients, optimizer state) as held at "
        f"{measured} ranks, then whole + split / n{peak}{fit}:")  # fmt: skip
    for row in table:
        say("  " + "  ".join(cell.ljust(width) for cell, width in zip(row, [*widths, 0], strict=False)).rstrip())
    notes = (*_variants(groups.values(), state), floor_words(state), unrecorded(at) if counted else "", size_note)
    for words in notes:
        if words:
            say(f"  {words}")
    if words := activation_words(at[at["world_size"] == worlds[-1]], totals=False):
        say_once(f"ddpbench predict: and {words}")


def _mib(value: float) -> str:
    from harness.perfmodel.memory import mib_text

    return mib_text(value)


def _figures(values) -> str:
    """'949 MiB' where alike at every GPU count, else '119 MiB / 59.3 MiB / 29.7 MiB'."""
    said = [_mib(float(v)) for v in values]
    return said[0] if len(set(said)) == 1 else " / ".join(said)


def _named(group: list[str], state: pd.DataFrame) -> str:
    """A row's strategies: 'fsdp', or where every labelled variant of a strategy shares the row, 'stock ×4'."""
    impl_of = dict(zip(state["strategy"], state["impl"], strict=False))
    said = []
    for impl in dict.fromkeys(impl_of[name] for name in group):
        variants = {name for name, whose in impl_of.items() if whose == impl}
        mine = [name for name in group if impl_of[name] == impl]
        said += [f"{impl} ×{len(mine)}"] if len(mine) > 1 and set(mine) == variants else mine
    return ", ".join(said)


def _variants(groups, state: pd.DataFrame) -> list[str]:
    """The variants a '×n' row stands for, once: 'stock ×4: stock, stock comm_hook=fp16, …'."""
    impl_of = dict(zip(state["strategy"], state["impl"], strict=False))
    said = []
    for group in groups:
        for impl in dict.fromkeys(impl_of[name] for name in group):
            mine = [name for name in group if impl_of[name] == impl]
            if len(mine) > 1 and set(mine) == {name for name, whose in impl_of.items() if whose == impl}:
                said.append(f"{impl} ×{len(mine)}: {', '.join(mine)}")
    return ["; ".join(said)] if said else []

"""What a rank keeps beside its model state, in words the console and the what-if page share: the activations
the model's forward keeps for backward (and what one more sample adds to them, where counted at two batches), what is
kept beside the state at the step's peak, and the floor under an even split (harness.perfmodel.memory counts them).
And what the choice of strategy on a cluster leaves out (choice.choose): the strategies that fit without a step
model (and the options the step models leave out of them), the shares of memory a run from before did not record,
the strategies whose activations were not counted.
"""

from __future__ import annotations

import pandas as pd

from harness.analysis import roles
from harness.perfmodel.fits import COUNT_BELOW_PEAK, fit_phrase, largest_batch
from harness.perfmodel.memory import compute_dtype, mib_text, need_mb, unrecorded, unsharded_mb
from harness.results.units import human_bytes


def activation_words(rows: pd.DataFrame, *, holds: str = "", totals: bool = True, seq2seq: bool = False) -> str:
    """What the model's forward keeps, said alike by the console and the what-if page (rows of one setup, with a
    `strategy` label, at one world size): 'the model's forward keeps 1.18 GiB of activations for backward at 8
    samples a rank in fp32 (each further sample adds 151 MiB; most kept by NewGELUActivation 48%), every strategy
    alike at any GPU count: stock 3.03 GiB, … in all' (`holds` before the totals: 'at w64 a rank holds '; none
    without `totals`); what one more sample adds only where counted at two batches (`activation_sample_added_mb`:
    the total over the batch would carry what is kept once, a bf16 run's copies of its weights, said apart where
    over 5 % of it: mlp/full's 481 MiB at 8 samples in bf16 is 480 of them and 0.133 MiB a sample); a `seq2seq`
    sample's tokens as a source's and a target's. '' where the run did not count them."""
    if "activation_mb" not in rows or rows["activation_mb"].isna().all():
        return ""
    others = rows[rows["activation_mb"].isna()]  # computing in another dtype, uncounted; or one process
    rows = rows[rows["activation_mb"].notna()]
    own = rows["computes_in"].fillna("").astype(bool) if "computes_in" in rows else pd.Series(False, rows.index)
    first = rows[~own].iloc[0] if (~own).any() else rows.iloc[0]  # the run's dtype's count leads where there is one
    kept, dtype = (
        float(first["activation_mb"]),
        first.get("computes_in") or first.get("activation_dtype") or first["dtype"],
    )
    exceptions = [*(f"{r.strategy}, {_why_uncounted(r)}" for r in others.itertuples()),
                  *(f"{r.strategy}, which computes in {r.computes_in}: {mib_text(r.activation_mb)}"
                    for r in rows[own].itertuples() if r.Index != first.name)]  # fmt: skip
    batch = int(first["batch_size"])
    top = first.get("activation_top") or ""
    added = first.get("activation_sample_added_mb")  # where counted at two batches (the total over the batch is no
    notes = [f"each further sample adds {mib_text(added)}"] if pd.notna(added) and added > 0 else []  # such figure)
    once = kept - added * batch if notes and dtype in ("bf16", "fp16") and not first.get("computes_in") else 0.0
    notes += [f"{mib_text(once)} kept once at any batch: the weights' {dtype} copies"] if once > 0.05 * kept else []
    notes += [f"most kept by {top}"] if top else []
    noted = f" ({'; '.join(notes)})" if notes else ""
    held = ", ".join(f"{r.strategy} {mib_text(need)}" for r, need in zip(rows.itertuples(), need_mb(rows), strict=True))
    beside = "; ".join(part for part in (_beside(rows, *kept_beside) for kept_beside in BESIDE) if part)
    buckets = f" (its state and the larger of backward's part and the optimizer step's; {beside})" if beside else ""
    tokens = first.get("tokens_per_batch")  # a language model's: its activations grow with the sequence's length
    each = int(tokens) // batch if tokens > 0 else 0  # `seq2seq`: a source's and a target's (t5 at seq_len=512: 1,024)
    both = f" ({each // 2:,} source + {each // 2:,} target)" if seq2seq and each else ""
    samples = f"{batch} sample{'s' * bool(batch != 1)}" + (f" of {each:,} tokens{both}" if each else "")
    alike = "every strategy alike" + "".join(f"{' but' if k == 0 else ','} {e}" for k, e in enumerate(exceptions))
    return (f"the model's forward keeps {mib_text(kept)} of activations for backward at {samples} a rank in "
            f"{dtype}{noted}, {alike} at any GPU count" + (f": {holds}{held} at the step's peak{buckets}" if totals
                                                            else ""))  # fmt: skip


BESIDE = (("buckets_mb", "the gradient buckets kept beside the gradients", "buckets"),
          ("unsharded_mb", "the parameters and gradients held whole at the peak", "unsharded parameters and gradients"),
          ("sync_temp_mb", "the temporary buffers a strategy's sync allocates, as its plug-in declares them",
           "sync temporaries"),
          ("optimizer_temp_mb", "a GPU's Adam temporaries", "optimizer temporaries"),
          ("hook_copies_mb", "PowerSGD's copies of a bucket while it compresses it", "copies"),
          ("hook_state_mb", "PowerSGD's error feedback, kept from step to step", "the hook's state"))  # fmt: skip
"""What a rank keeps beside its state at the step's peak (need_mb): its column, in words, in short."""


def _why_uncounted(row) -> str:
    if getattr(row, "single_process", False):
        return "whose first GPU also gathers every replica's outputs and the whole batch's loss (not counted)"
    return f"which computes in {getattr(row, 'computes_in', '') or 'another dtype'} (not counted)"


def _beside(rows: pd.DataFrame, column: str, what: str, short: str) -> str:
    """'the gradient buckets …, stock 32 MiB, zero 32 MiB' for the rows holding some; the rows that do not know
    their share (NaN) named as not recorded."""
    if column not in rows:
        return ""
    held = [f"{r.strategy} {mib_text(v)}" for r, v in zip(rows.itertuples(), rows[column], strict=True) if v > 0]
    unknown = [r.strategy for r, v in zip(rows.itertuples(), rows[column], strict=True) if pd.isna(v)]
    said = f"{what}, {', '.join(held)}" if held else ""
    return said + (f"{'; ' if said else ''}{short} not recorded for {', '.join(unknown)} (a run from before "
                   "ddpbench recorded them)" if unknown else "")  # fmt: skip


def floor_words(state: pd.DataFrame) -> str:
    """'zero keeps at least 294 MiB: its largest parameter's optimizer state, whole on one rank' for each strategy
    with a floor under its even split (_whole_parameter_floor); '' for none."""
    floors = state.loc[state["floor_mb"] > 0, ["strategy", "floor_mb"]].drop_duplicates("strategy")
    return "; ".join(f"{r.strategy} keeps at least {mib_text(r.floor_mb)}: its largest parameter's optimizer state, "
                     "whole on one rank" for r in floors.itertuples())  # fmt: skip


def untimed_that_fit(state: pd.DataFrame, choices: list, capacity_gib: float) -> dict[str, list[int]]:
    """The strategies without a step model that fit at some GPU count of `choices`, with the counts where they do."""
    worlds = {c.world_size for c in choices}
    at = state[state["world_size"].isin(worlds) & state["activation_mb"].notna()]
    timed = {c.strategy for choice in choices for c in (*choice.picked, *choice.others)}
    fitting = at[(need_mb(at) <= capacity_gib * 1024) & ~at["strategy"].isin(timed)]
    return {name: sorted(int(w) for w in group["world_size"].unique())
            for name, group in fitting.groupby("strategy", sort=False)}  # fmt: skip


def uncounted(state: pd.DataFrame, choices: list) -> list[str]:
    """The strategies left out of the choice because their activations were not counted, in the state's order."""
    worlds = {c.world_size for c in choices}
    at = state[state["world_size"].isin(worlds)]
    counted = set(at.loc[at["activation_mb"].notna(), "strategy"])
    return [name for name in dict.fromkeys(at.loc[at["activation_mb"].isna(), "strategy"]) if name not in counted]


SAME_COLLECTIVES = ("static_graph", "gradient_as_bucket_view")
"""DDP's options that leave its buckets and all-reduces as they are (torch's reducer: static_graph skips the per-step
search for unused parameters and bucket-rebuild checks; gradient_as_bucket_view makes .grad a view of its bucket, one
copy fewer, which the memory per rank counts): what they change on the host no step model here times."""


def same_collectives_note(asked: dict) -> str:
    """What DDP's step model rests on for a row asking options of SAME_COLLECTIVES alone (`asked`: its options beyond
    its strategy's defaults), which it prices as DDP's; '' for none."""
    named = " and ".join(sorted(key for key in asked if key != "bucket_cap_mb"))
    return f"priced as DDP's: {named} leave{'s' * (' and ' not in named)} its buckets and all-reduces as they are, " \
        "its host work untimed" if named else ""  # fmt: skip


def _unmodelled_why(state: pd.DataFrame, labels: list[str]) -> str:
    """' (the step models leave out static_graph: …)': the options of `labels`' rows beyond their strategies' defaults
    that no step model prices (a 2-byte hook's bytes it does: compression.WIRE_BYTES), and where each is one that
    leaves the collectives as they are (SAME_COLLECTIVES), that their communication is the same strategy's without
    it; '' where none is known."""
    from harness.perfmodel.compression import WIRE_BYTES

    rows = state[state["strategy"].isin(labels)]
    asked = [{k: v for k, v in options.items() if k != "bucket_cap_mb" and not (k == "comm_hook" and v in WIRE_BYTES)}
             for options in roles.beyond_defaults_of(rows)]  # fmt: skip
    options = sorted({key if key != "comm_hook" else f"{key}={value}" for o in asked for key, value in o.items()})
    if not options:
        return ""
    same = [key for key in options if key in SAME_COLLECTIVES]
    said = f" (the step models leave out {', '.join(options)}"
    if same:
        said += (f"; {' and '.join(same)} change{'s' if len(same) == 1 else ''} DDP's own work on the host, not its "
                 f"buckets or all-reduces: their communication is the same strategy's without "
                 f"{'it' if len(same) == 1 else 'them'}")  # fmt: skip
    if "gradient_as_bucket_view" in same:
        said += "; the gradient copy gradient_as_bucket_view saves is in the memory per rank"
    return said + ")"


def unchosen_words(state: pd.DataFrame, choices: list, capacity_gib: float) -> list[str]:
    """What the choice leaves out, each in a phrase: the strategies that fit without a step model, the shares of
    memory a run from before did not record, the strategies whose activations were not counted; first, the strategies
    that failed parity in the run (pick.parity) or failed outright (pick.failed), which it never offers."""
    from harness.perfmodel.pick import failed as died
    from harness.perfmodel.pick import parity

    failed, gone, state = parity.left_out_words(state), died.left_out_words(state), died.bookable(parity.passed(state))
    untimed = untimed_that_fit(state, choices, capacity_gib)
    one = len(untimed) == 1
    every = sorted(c.world_size for c in choices)  # a name alone fits at every one
    where = ", ".join(name if worlds == every else f"{name} at {'/'.join(f'w{w}' for w in worlds)}"
                      for name, worlds in untimed.items())  # fmt: skip
    why = _unmodelled_why(state, list(untimed))
    said = [failed] if failed and choices else []
    said += [gone] if gone and choices else []
    if untimed:
        said.append(f"{where} fit{'s' if one else ''} too, with no step model to predict {'its' if one else 'their'} "
                    f"step here{why}: the run page compares what the run measured")  # fmt: skip
    if missing := unrecorded(state[state["world_size"].isin({c.world_size for c in choices})]):
        said.append(missing)
    if left := uncounted(state, choices):
        said.append(f"{', '.join(left)} left out: {'its' if len(left) == 1 else 'their'} activations were not counted")
    return said


def tight_words(need: float, capacity_gib: float) -> str:
    """'1.75 GiB left: under 8 % of the count, which has read up to 8 % below a measured peak': what a need (MiB)
    that fits only tightly (fits.is_tight) leaves in a GPU of `capacity_gib`, and why that is tight."""
    return f"{mib_text(capacity_gib * 1024 - need)} left: {tight_why()}"


def tight_why() -> str:
    share = f"{COUNT_BELOW_PEAK:.0%}"
    return f"under {share} of the count, which has read up to {share} below a measured peak"


def batch_words(state: pd.DataFrame, capacity_gib: float) -> str:
    """'at batch 6 a rank or fewer fsdp would fit, zero at 2': where nothing fits at the rows' batch, the batch a rank
    at which each would (largest_batch); '' where none would at any."""
    rows = state[state["activation_mb"].notna()] if "activation_mb" in state else state.iloc[:0]
    batches = [(int(b), s) for b, s, at in zip(largest_batch(rows, capacity_gib), rows["strategy"], rows["batch_size"],
                                               strict=True) if 0 < b < at]  # fmt: skip  # (one that fits says nothing)
    ranked = sorted(batches, reverse=True)  # none: ''
    others = "".join(f", {s} at {b}" for b, s in ranked[1:])
    # the batch that leaves COUNT_BELOW_PEAK of the count, where the largest leaves less: the header's and answer's
    roomy = dict(zip(rows["strategy"], largest_batch(rows, capacity_gib / (1 + COUNT_BELOW_PEAK)), strict=True))
    tight = [f"{s} {int(roomy[s])}" for b, s in ranked if roomy[s] < b]
    room = f" (tight; with room: {', '.join(tight)})" if tight else ""
    return f"at batch {ranked[0][0]} a rank or fewer {ranked[0][1]} would fit{others}{room}" if ranked else ""


def fit_words(state: pd.DataFrame, capacity_gib: float) -> str:
    """Whether each strategy's need at its step's peak (`need_mb`) fits in a GPU of `capacity_gib`, at the world
    sizes of `state` (state_per_rank's, labelled): 'stock does not fit (177 GiB a rank at the least); zero fits from
    w64 (72.8 of 79.11 GiB a rank there: 6.31 GiB left for …); fsdp fits at w8, not at w64 (91 GiB a rank there)'.
    '' without a capacity or counted activations (the state alone would pass a model whose activations do not fit);
    a strategy without them (another compute dtype, uncounted) is left out."""
    state = state[state["activation_mb"].notna()] if "activation_mb" in state else state.iloc[:0]
    if not capacity_gib or state.empty:
        return ""
    said = [f"{name} {fit_phrase(rows, capacity_gib)}" for name, rows in state.sort_values("world_size").groupby(
        "strategy", sort=False)]  # fmt: skip
    return "; ".join([*said, *filter(None, [unrecorded(state)])])


FSDP_SIZES = ("param_bytes", "root_param_bytes", "root_grad_bytes", "largest_block_bytes", "largest_block_grad_bytes")
"""The model's counts (modelinfo.counts_on_meta's, a run's columns of the same names) fsdp_bf16_figures needs."""


def fsdp_bf16_figures(full) -> str:
    """FSDP2's bytes a step at param_dtype=bf16 beside fp32 (reduce_dtype fp32, its default), counted from the
    model's sizes (`full`: FSDP_SIZES, a dict or a row), said alike by predict's console and the what-if page: 'its
    all-gathers would assemble 1.0 GiB a step, not 2.0 GiB (…), and a rank would hold 160.0 MiB unsharded at its
    peak, not 256.1 MiB (…)': the parameters its all-gathers assemble (each block's twice, before its forward and
    again before its backward, the root's once) and what it holds unsharded at its peak (memory.unsharded_mb)."""
    sizes = {key: float(full[key]) for key in FSDP_SIZES}
    gathered = 2 * (sizes["param_bytes"] - sizes["root_param_bytes"]) + sizes["root_param_bytes"]
    fp32, bf16 = (unsharded_mb(**sizes, kept=False, param_scale=scale) * 2**20 for scale in (1.0, 0.5))
    return (f"its all-gathers would assemble {human_bytes(gathered / 2)} a step, not {human_bytes(gathered)} (each "
            f"block's parameters twice, the root's once), and a rank would hold {human_bytes(bf16)} unsharded at its "
            f"peak, not {human_bytes(fp32)} (the root and the largest block gathered, their gradients; reduce-scatters "
            "stay fp32, its reduce_dtype)")  # fmt: skip


BF16_UNCOUNTED = " (--opt param_dtype=bf16 halves what they gather: predict --cluster says the bytes, counted)"
"""fsdp_bf16_counted's words where the rows lack the model's sizes (a run from before they were recorded): where
the figure is said, counted from the model on the meta device (full_size_counts), not guessed here."""


def fsdp_bf16_counted(rows: pd.DataFrame | None) -> str:
    """'; at --opt param_dtype=bf16 (counted from the model's sizes, not measured: …) its all-gathers would assemble
    …': the what-if page's words beside FSDP2's gathers priced in fp32, the figures predict's console counts
    (fsdp_bf16_figures) from the model's sizes in `rows` (a setup's, as predict counts its memory: the model you will
    train); BF16_UNCOUNTED where the rows lack them; '' where a row measured FSDP at bf16 (its own figures stand)."""
    if rows is not None and "impl_options" in rows and (rows["impl_options"].map(compute_dtype) == "bf16").any():
        return ""
    sized = rows.dropna(subset=list(FSDP_SIZES)) if rows is not None and set(FSDP_SIZES) <= set(rows) else None
    if sized is None or sized.empty or not sized["largest_block_bytes"].iloc[0]:
        return BF16_UNCOUNTED
    return ("; at --opt param_dtype=bf16 (counted from the model's sizes, not measured: bench runs FSDP at bf16 on "
            f"CUDA only) {fsdp_bf16_figures(sized.iloc[0])}")  # fmt: skip

"""What a rank keeps beside its model state, in words the console and the what-if page share: the activations
the model's forward keeps for backward (and what one more sample adds to them, where counted at two batches), what is
kept beside the state at the step's peak, and the floor under an even split (harness.perfmodel.memory counts them).
"""

from __future__ import annotations

import pandas as pd

from harness.perfmodel.memory import mib_text, need_mb


def activation_words(rows: pd.DataFrame, *, holds: str = "", totals: bool = True) -> str:
    """What the model's forward keeps, said alike by the console and the what-if page (rows of one setup, with a
    `strategy` label, at one world size): 'the model's forward keeps 1.18 GiB of activations for backward at 8
    samples a rank in fp32 (each further sample adds 151 MiB; most kept by NewGELUActivation 48%), every strategy
    alike at any GPU count: stock 3.03 GiB, … in all' (`holds` before the totals: 'at w64 a rank holds '; none
    without `totals`); what one more sample adds only where counted at two batches (`activation_sample_added_mb`:
    the total over the batch would carry what is kept once, a bf16 run's copies of its weights). '' where the run
    did not count them."""
    if "activation_mb" not in rows or rows["activation_mb"].isna().all():
        return ""
    others = rows[rows["activation_mb"].isna()]  # computing in another dtype, uncounted; or one process
    rows = rows[rows["activation_mb"].notna()]
    own = rows["computes_in"].fillna("").astype(bool) if "computes_in" in rows else pd.Series(False, rows.index)
    first = rows[~own].iloc[0] if (~own).any() else rows.iloc[0]  # the run's dtype's count leads where there is one
    kept, dtype = float(first["activation_mb"]), first.get("computes_in") or first["dtype"]
    exceptions = [*(f"{r.strategy}, {_why_uncounted(r)}" for r in others.itertuples()),
                  *(f"{r.strategy}, which computes in {r.computes_in}: {mib_text(r.activation_mb)}"
                    for r in rows[own].itertuples() if r.Index != first.name)]  # fmt: skip
    batch = int(first["batch_size"])
    top = first.get("activation_top") or ""
    added = first.get("activation_sample_added_mb")  # where counted at two batches (the total over the batch is no
    notes = [f"each further sample adds {mib_text(added)}"] if pd.notna(added) and added > 0 else []  # such figure)
    notes += [f"most kept by {top}"] if top else []
    noted = f" ({'; '.join(notes)})" if notes else ""
    held = ", ".join(f"{r.strategy} {mib_text(need)}" for r, need in zip(rows.itertuples(), need_mb(rows), strict=True))
    beside = "; ".join(part for part in (_beside(rows, *kept_beside) for kept_beside in BESIDE) if part)
    buckets = f" (its state and the larger of backward's part and the optimizer step's; {beside})" if beside else ""
    tokens = first.get("tokens_per_batch")  # a language model's: its activations grow with the sequence's length
    samples = f"{batch} sample{'s' * bool(batch != 1)}" + (f" of {int(tokens) // batch:,} tokens" if tokens > 0 else "")
    alike = "every strategy alike" + "".join(f"{' but' if k == 0 else ','} {e}" for k, e in enumerate(exceptions))
    return (f"the model's forward keeps {mib_text(kept)} of activations for backward at {samples} a rank in "
            f"{dtype}{noted}, {alike} at any GPU count" + (f": {holds}{held} at the step's peak{buckets}" if totals
                                                            else ""))  # fmt: skip


BESIDE = (("buckets_mb", "the gradient buckets kept beside the gradients", "buckets"),
          ("unsharded_mb", "the parameters and gradients held whole at the peak", "unsharded parameters and gradients"),
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

"""A strategy whose gradient parity failed in the run is no booking: it does not train as one process on the whole
batch would, so the choice leaves it out (`passed`) and says so once, by name, with its largest difference and the
tolerance there (`left_out_words`), where it once booked fsdp, failed at both world sizes, with a note below."""

from __future__ import annotations

import pandas as pd

FAILED_BY = "parity_failed_by"
"""A model-state row's column (memory.state_per_rank): the strategy's largest difference from the reference in the
run's rows that failed parity; NaN where none failed."""
TOLERANCE = "parity_failed_tolerance"
"""The tolerance that difference was judged by (the row's parity_tolerance); NaN in a run from before it was kept."""


def failure(rows: pd.DataFrame) -> dict[str, float]:
    """`FAILED_BY` and `TOLERANCE` of one strategy's run rows: those of its row that failed by most."""
    if "parity_ok" not in rows:
        return {FAILED_BY: float("nan"), TOLERANCE: float("nan")}
    failed = rows[rows["parity_ok"].eq(False)]  # null: not judged
    if failed.empty or failed["parity_max_abs_diff"].isna().all():
        return {FAILED_BY: float("nan"), TOLERANCE: float("nan")}
    worst = failed.loc[failed["parity_max_abs_diff"].idxmax()]
    return {FAILED_BY: float(worst["parity_max_abs_diff"]), TOLERANCE: float(worst.get("parity_tolerance", "nan"))}


def passed(state: pd.DataFrame) -> pd.DataFrame:
    """The model-state rows of strategies whose parity did not fail in the run (not judged passes: the run says so)."""
    return state[state[FAILED_BY].isna()] if FAILED_BY in state and not state.empty else state


def benched_models(state: pd.DataFrame, world: int, models) -> set[str]:
    """The step models (choice.MODELS: name, rows) whose strategies the run benched at GPU count `world` and that failed
    parity there: benched, so not named as never benched (choice._unbenched), yet left out."""
    if FAILED_BY not in state or state.empty:
        return set()
    failed = state[state[FAILED_BY].notna() & (state["world_size"] == world)]
    return {name for name, rows in models if len(failed) and rows(failed).any()}


def left_out_words(state: pd.DataFrame) -> str:
    """'fsdp left out: it failed parity in this run (largest difference 2.8e-03, tolerance 6.1e-05 there), not
    training as one process on the whole batch would', once whatever the GPU counts; '' where none failed. `state`
    labelled by `strategy`."""
    if FAILED_BY not in state or state.empty:
        return ""
    failed = state[state[FAILED_BY].notna()].drop_duplicates("strategy")
    if failed.empty:
        return ""
    each = []
    for row in failed.itertuples():
        tolerance = getattr(row, TOLERANCE)
        there = f", tolerance {tolerance:.1e} there" if tolerance == tolerance else ""  # NaN: not kept then
        each.append(f"{row.strategy} (largest difference {getattr(row, FAILED_BY):.1e}{there})")
    one = len(each) == 1
    return (f"{', '.join(each)} left out: {'it' if one else 'they'} failed parity in this run, not training as one "
            "process on the whole batch would (the run page's parity table says where)")  # fmt: skip

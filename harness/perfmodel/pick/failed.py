"""A strategy that failed in the run is no booking: its configuration died on the user's model at a world size the
run reached (a collective mismatch, an exception, an out-of-memory), so the choice leaves it out (`bookable`), never
names it as not benched (`benched_models`), and says once why (`left_out_words`: 'fsdp failed at 2 ranks here: rank 1
killed by SIGABRT …'), even where the run measured it too few times to fit its memory (no model-state row of its own).
"""

from __future__ import annotations

import json

import pandas as pd

from harness.analysis import roles
from harness.results.values import strategy_labels

FAILED = "failed_here"
"""A model-state row's column (memory.state_per_rank), the same on every row: the setup's strategies that failed, as
JSON, one entry a strategy and world size ({impl, impl_options, world_size, error}: `failures`); '[]' where none did."""
GIST_CHARS = 320
"""The most of a failure's text the clause quotes: the error's first words, which name the cause."""


def failures(configs: pd.DataFrame, as_run=lambda impl, options: options) -> str:
    """`FAILED` of a setup's rows: each strategy's first failure at each world size where no repeat of it ran to the
    end (one that did there ran the model: a repeat's failure beside it is the launch's, a hang or the machine, and
    its row is on the run page) (`as_run`: its options as the state rows name them, memory._as_run)."""
    if configs.empty or "status" not in configs:
        return "[]"
    keys = [as_run(impl, options) for impl, options in zip(configs["impl"], configs["impl_options"], strict=True)]
    rows = configs.assign(as_run=keys, world=configs["world_size"].astype(int))
    ran = {(r.impl, r.as_run, r.world) for r in rows[rows["status"] == "ok"].itertuples()}
    found: dict[tuple, dict] = {}
    for row in rows[rows["status"] == "failed"].sort_values("world", kind="stable").itertuples():
        key = (row.impl, row.as_run, row.world)
        if key not in ran:
            found.setdefault(key, {"impl": row.impl, "impl_options": row.as_run, "world_size": row.world,
                                   "error": str(getattr(row, "error", "") or "")})  # fmt: skip
    return json.dumps(list(found.values()))


def _listed(state: pd.DataFrame) -> pd.DataFrame:
    """The failures `state` carries, one row each (impl, impl_options, world_size, error, strategy); empty if none."""
    if FAILED not in state or state.empty:
        return pd.DataFrame()
    listed = pd.DataFrame(json.loads(state[FAILED].iloc[0]))
    return listed.assign(strategy=strategy_labels(listed)) if len(listed) else listed


def _keys(frame: pd.DataFrame) -> pd.Series:
    return frame["impl"].astype(str) + "\0" + frame["impl_options"].astype(str)


def bookable(state: pd.DataFrame) -> pd.DataFrame:
    """The model-state rows of strategies that failed nowhere in the run."""
    listed = _listed(state)
    return state if listed.empty else state[~_keys(state).isin(set(_keys(listed)))]


def benched_models(state: pd.DataFrame, models) -> set[str]:
    """The step models (choice.MODELS: name, rows) that time a strategy the run benched and saw fail: benched, so not
    named as never benched (choice._unbenched), yet left out."""
    listed = _listed(state)
    if listed.empty:
        return set()
    listed = roles.with_roles(listed)
    return {name for name, rows in models if rows(listed).any()}


def left_out_words(state: pd.DataFrame) -> str:
    """'fsdp failed at 2 ranks here: rank 1 killed by SIGABRT (exit code -6) …', a clause a strategy (its first
    failure's words, at the fewest ranks it failed at), joined by '; '; '' where none failed."""
    listed = _listed(state)
    said = []
    for strategy, rows in listed.groupby("strategy", sort=False) if len(listed) else ():
        said.append(f"{strategy} failed at {_ranks(rows)} here: {_gist(rows['error'].iloc[0])}")
    return "; ".join(said)


def _ranks(rows: pd.DataFrame) -> str:
    """'2 ranks', '1, 2 ranks': the world sizes one strategy's failures were at."""
    worlds = ", ".join(str(w) for w in sorted(rows["world_size"].unique()))
    return f"{worlds} {'rank' if worlds == '1' else 'ranks'}"


def _gist(error: str) -> str:
    """A failure's words without where its traceback lies (the run page links it), cut at GIST_CHARS."""
    error = error.split(" [traceback in the run folder", 1)[0].strip() or "no error recorded"
    return error if len(error) <= GIST_CHARS else error[: GIST_CHARS - 1].rstrip() + "…"


def timed_by(state: pd.DataFrame | None, rows) -> str:
    """'fsdp failed at 2 ranks here, so it is no booking: a prediction only', said beside a step model's answer
    (`rows`: the role mask of the strategies it times, as choice.MODELS gives it) where the run saw such a strategy
    fail; '' where none did, or without a run's state."""
    listed = roles.with_roles(_listed(state)) if state is not None else pd.DataFrame()
    timed = listed[rows(listed).to_numpy()] if len(listed) else listed
    said = []
    for strategy, failures in timed.groupby("strategy", sort=False) if len(timed) else ():
        said.append(f"{strategy} failed at {_ranks(failures)} here, so it is no booking: a prediction only")
    return "; ".join(said)

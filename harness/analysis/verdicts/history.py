"""How an auto run's answer formed: each verdict judged again from the run's own rows, look by look, and the
repeats it had when it was decided for good (the run page's "decided after" column)."""

from __future__ import annotations

import pandas as pd

from harness.analysis.verdicts.decide import DEFAULT_MAX_REPEATS, look_confidence, looks, verdicts
from harness.config.flags import AUTO

HISTORY_COLUMNS = ("kind", "subject", "word", "decided", "decided_after", "repeats", "repeats_needed", "so_far")


def history(configs: pd.DataFrame, steps: pd.DataFrame, *, max_repeats: int,
            seen_by_look: list[pd.DataFrame] | None = None) -> pd.DataFrame:  # fmt: skip
    """How an auto run's answer formed, judged again from its own rows: per verdict, its word now, and the
    repeats it had at the look from which on it stayed decided; null where it is open now.

    `seen_by_look`: the rows each of the run's own looks saw (`live_looks`), so that a verdict reads as
    decided where the run decided it. Without them (a run from before they were recorded) each look is
    replayed on every configuration's first k repeats, which can name an earlier look than the run's
    own where one side ran ahead for another verdict."""
    confidence = look_confidence(max_repeats)
    since: dict[str, int] = {}
    for seen in seen_by_look or _replayed_looks(configs, max_repeats):
        current = verdicts(seen, steps, confidence=confidence, max_repeats=max_repeats)
        for verdict in current:
            if verdict.decided:
                since.setdefault(verdict.subject, verdict.repeats)
            else:  # reopened by repeats another open verdict asked for: decided only from a later look
                since.pop(verdict.subject, None)
        if len(seen) == len(configs):
            break  # later looks would see the same rows: `current` is the run's verdicts now
    rows = [{"kind": v.kind, "subject": v.subject, "word": v.word, "decided": v.decided,
             "decided_after": since.get(v.subject), "repeats": v.repeats, "repeats_needed": v.repeats_needed,
             "so_far": v.so_far}
            for v in current]  # fmt: skip
    return pd.DataFrame(rows, columns=list(HISTORY_COLUMNS))


def _replayed_looks(configs: pd.DataFrame, max_repeats: int) -> list[pd.DataFrame]:
    most = int(configs["repeat"].max()) + 1  # beyond the last look only where --max-repeats was lowered
    return [configs[configs["repeat"] < look] for look in sorted({*looks(max_repeats), most})]


def live_looks(meta: dict, configs: pd.DataFrame) -> list[pd.DataFrame] | None:
    """The rows each look of the run saw: run.json's `look_sizes` counts the configurations planned when a look
    asked for another round (harness.launch.repeats), and the last look saw them all. None where unrecorded."""
    sizes = meta.get("look_sizes")
    if not sizes:
        return None
    position = {c["config_id"]: i for i, c in enumerate(meta.get("configurations") or [])}
    planned_at = configs["config_id"].map(position)
    return [configs[planned_at < size] for size in sizes] + [configs]


def run_history(meta: dict, configs: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """`history` for a run whose run.json says --repeats auto (at its --max-repeats); else empty."""
    config = meta.get("config") or {}
    if config.get("repeats") != AUTO or configs.empty:
        return pd.DataFrame(columns=list(HISTORY_COLUMNS))
    max_repeats = int(config.get("max_repeats") or DEFAULT_MAX_REPEATS)
    return history(configs, steps, max_repeats=max_repeats, seen_by_look=live_looks(meta, configs))

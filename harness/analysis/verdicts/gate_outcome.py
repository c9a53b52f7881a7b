"""`compare`'s outcome as a whole, what its exit code says (1, 3, 0): a gate fails on a slower or failed
configuration (or one whose peak memory is significantly higher: memory_compare), cannot pass on short evidence,
and passes only when every configuration was judged; each failure named by its configuration."""

from __future__ import annotations

import pandas as pd

from harness.analysis import stats
from harness.analysis.verdicts import memory_compare
from harness.results.values import counted

REGRESSED, UNDECIDED, PASSED = "slower", "cannot tell", "nothing slower"
FAILED_WORDS = {"slower": REGRESSED, "memory_higher": memory_compare.MEMORY_REGRESSED, "failed": "failed in NEW"}
"""A failing outcome named for what failed the gate ('more memory' alone, 'slower, failed in NEW'): `regressed`."""


def regressed(outcome: str | None) -> bool:
    """Whether an outcome failed the gate (exit 1), whatever failed it (FAILED_WORDS)."""
    return bool(outcome) and outcome not in (UNDECIDED, PASSED)


def outcome(frame: pd.DataFrame, *, failed: list[str], missing: list[str], not_compared: list[str]) -> dict:
    """The comparison as a whole: {"outcome": UNDECIDED, PASSED, or what failed the gate (FAILED_WORDS, joined),
    "sentence": why, in words, and the counts it rests on}, the same for the console, the page and the index."""
    verdicts = frame["verdict"].value_counts().to_dict() if "verdict" in frame else {}
    matched = len(frame)
    tally = {"matched": matched, "slower": int(verdicts.get(stats.SLOWER, 0)),
             "faster": int(verdicts.get(stats.FASTER, 0)), "unchanged": int(verdicts.get(stats.NO_CHANGE, 0)),
             "too_few": int(verdicts.get(stats.TOO_FEW, 0)), "not_compared": len(not_compared),
             "failed": len(failed), "missing": len(missing),
             "memory_higher": len(memory_compare.higher(frame))}  # fmt: skip
    of_matched = f"of {counted(matched, 'matched configuration')}"  # '1 of 1 matched configuration', '… of 4 …s'
    regressed = _counted(tally, slower=f"{of_matched} significantly slower",
                         memory_higher=f"{of_matched} with peak memory significantly higher",
                         failed=f"failed in NEW ({_failed_names(failed)})")  # fmt: skip
    if regressed:  # named for what failed it: 'more memory' where memory alone did (exit 1 all the same)
        said = [words for key, words in FAILED_WORDS.items() if tally[key]]  # the sentence's counts name the rest
        return {"outcome": ", ".join(said), "sentence": f"{said[0]}: {regressed}", **tally}
    short = _counted(tally, too_few=f"{of_matched} with too few repeats to tell",
                     not_compared="not compared (a setting differs)", missing="with no ok result in NEW")  # fmt: skip
    if frame.empty or short:
        why = ("no configuration was judged" + (f": {short}" if short else "")) if frame.empty else short
        return {"outcome": UNDECIDED, "sentence": f"{UNDECIDED}: {why}", **tally}
    judged = f"{tally['faster']} faster, {tally['unchanged']} with no significant change"
    every = ("all " if matched > 1 else "") + counted(matched, "matched configuration")
    said = f"{PASSED}: {every} judged, none significantly slower ({judged})"
    return {"outcome": PASSED, "sentence": said, **tally}


def _counted(tally: dict, **words: str) -> str:
    """'2 of 10 matched configurations significantly slower, 1 failed in NEW': each count that is not 0."""
    return ", ".join(f"{tally[key]} {said}" for key, said in words.items() if tally[key])


def _failed_names(failed: list[str], shown: int = 3) -> str:
    """'w2 mlp/tiny stock, w1 mlp/tiny fsdp and 4 more': the configurations the 'failed in NEW' lines
    (compare.without_counterpart) name, so that the last line and the page's banner say which failed, as the warnings
    above them do; past `shown`, counted (the warnings and the page list them all)."""
    names = [line.partition(": failed in NEW")[0] for line in failed]
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more

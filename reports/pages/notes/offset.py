"""The configurations whose launches cannot tell what data parallelism costs them (faster than the baseline though
they communicate: why.offset_exposed_ms) in one sentence, not one identical sentence each: the console's last words
(console.ending) and the run page's 'how each differs from local' say it alike. Pure: rows in, words out."""

from __future__ import annotations

import pandas as pd

from harness.analysis import gap, roles, why
from harness.results.values import configuration_label


def _range(values: list[float], unit: str = "") -> str:
    low, high = min(values), max(values)
    return f"{low:.2f}{unit}" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}–{high:.2f}{unit}"


def offset_line(rows: list[pd.Series], *, named: bool = False) -> str:
    """'naive, bucketed, flat and fsdp at 2 ranks run at 0.45–0.94× local's mean step, though 149–427 ms a step is
    exposed communication …: these launches cannot tell what data parallelism costs them': `why.sentence`'s words
    for rows of one workload and world size that `why.offset_exposed_ms` finds offset, said once for all of them;
    `named`: after their workload ('mlp: naive, …'), as why.sentence names it where a run has several."""
    names = [configuration_label(row["impl"], row.get("impl_options")) for row in rows]
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    ratios = [row["step_ms_mean"] / (row["step_ms_mean"] - row["gap_ms"]) for row in rows]
    exposed = [why.offset_exposed_ms(row) for row in rows]
    low, high = min(exposed), max(exposed)
    ms = f"{low:.0f}" if round(low) == round(high) else f"{low:.0f}–{high:.0f}"
    local = roles.baseline_name()
    worlds = sorted({int(row["world_size"]) for row in rows})
    whose = f"{rows[0]['workload']}: " if named else ""
    return (
        f"{whose}{listed} at {'/'.join(map(str, worlds))} ranks run at {_range(ratios, '×')} {local}'s mean step, "
        f"though {ms} ms a step is exposed communication (waiting for the slowest rank included): their other parts "
        f"ran faster than {local}'s, so these launches cannot tell what data parallelism costs them{gap.UNTOLD_NEXT}"
    )


def said_once(rows: pd.DataFrame, lines: list[list[str]], *, named: bool = False) -> list[str]:
    """Each row's `lines` (why.lines: its sentence, then its slow rank), but where two configurations or more of one
    world size and workload are offset, their sentences as one offset_line in the first one's place (their slow ranks
    kept; a configuration named once, however many of its repeats why.typical_repeats kept); `named`: each such
    sentence after its workload (the console's, of a run of several)."""
    keys = [(row["workload"], int(row["world_size"])) for _, row in rows.iterrows()]
    offset = [why.offset_exposed_ms(row) is not None for _, row in rows.iterrows()]
    together: dict[tuple, dict[str, pd.Series]] = {key: {} for key in keys}  # a configuration once, of its repeats
    for (_, row), key, is_offset in zip(rows.iterrows(), keys, offset, strict=True):
        if is_offset:
            together[key].setdefault(configuration_label(row["impl"], row.get("impl_options")), row)
    said, done = [], set()
    for key, is_offset, own in zip(keys, offset, lines, strict=True):
        if not is_offset or len(together[key]) < 2:
            said += own
            continue
        if key not in done:  # the first of them: the one sentence for all
            done.add(key)
            said.append(offset_line(list(together[key].values()), named=named))
        said += own[1:]  # its slow rank, a finding of its own
    return said

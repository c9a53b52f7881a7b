"""A bench run's last words: the strategies whose launches cannot tell what data parallelism costs them (faster than
the baseline though they communicate) said in one line, not one identical sentence each; and the answer line, the
leader to deploy and whether its lead is decided, as the report's index names it, or 'no answer yet: …'."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pandas as pd

from harness.analysis import roles, why
from harness.results.values import configuration_label

NO_ANSWER = ("nothing measured", "only the no-communication floor")
"""What the index's headline says where no strategy to deploy was measured: no answer to give."""


def _range(values: list[float], unit: str = "") -> str:
    low, high = min(values), max(values)
    return f"{low:.2f}{unit}" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}–{high:.2f}{unit}"


def offset_line(rows: list[pd.Series]) -> str:
    """'naive, bucketed, flat and fsdp at 2 ranks run at 0.45–0.94× local's mean step, though 149–427 ms a step is
    exposed communication …: these launches cannot tell what data parallelism costs them': `why.sentence`'s words
    for rows of one world size that `why.offset_exposed_ms` finds offset, said once for all of them."""
    names = [configuration_label(row["impl"], row.get("impl_options")) for row in rows]
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    ratios = [row["step_ms_mean"] / (row["step_ms_mean"] - row["gap_ms"]) for row in rows]
    exposed = [why.offset_exposed_ms(row) for row in rows]
    low, high = min(exposed), max(exposed)
    ms = f"{low:.0f}" if round(low) == round(high) else f"{low:.0f}–{high:.0f}"
    local = roles.baseline_name()
    worlds = sorted({int(row["world_size"]) for row in rows})
    return (
        f"{listed} at {'/'.join(map(str, worlds))} ranks run at {_range(ratios, '×')} {local}'s mean step, though "
        f"{ms} ms a step is exposed communication (waiting for the slowest rank included): their other parts ran "
        f"faster than {local}'s, so these launches cannot tell what data parallelism costs them"
    )


def answer_line(run: Path) -> str:
    """'the answer: gpt2/small fp32 sgd, 2 ranks: stock 1539.1 ms (leads; too few repeats; …)': the index's headline
    of `run` (per workload, the leader to deploy at the largest world size, decided or open), in plain words; 'no
    answer yet: …' where no strategy to deploy was measured."""
    from harness.results import layout, store
    from reports.pages import index

    try:
        meta = store.read_json(Path(run) / layout.RUN_JSON)
    except (OSError, ValueError):
        meta = {}
    lines = [html.unescape(re.sub(r"<[^>]+>", "", line)) for line in
             index.run_headline(store.read_configs(run), meta).split("<br>")]  # fmt: skip
    answered = [line for line in lines if not line.endswith(NO_ANSWER)]
    if not answered:
        return f"no answer yet: {'; '.join(lines)} (the run page says what each configuration did)"
    return f"the answer (the strategy to deploy, at the largest world size): {'; '.join(lines)}"

"""A bench run's last words: the answer line, the leader to deploy and whether its lead is decided, as the report's
index names it, or 'no answer yet: …' (the strategies whose launches cannot tell what data parallelism costs them are
said in one line before it, as the run page says them: reports.pages.notes.offset); before it, where the run swept no
bucket cap, the bench that sweeps one."""

from __future__ import annotations

import html
import re
from pathlib import Path

NO_ANSWER = ("nothing measured", "only the no-communication floor")
"""What the index's headline says where no strategy to deploy was measured: no answer to give."""


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


def cap_line(run: Path, program: str) -> str:
    """Where the run swept no bucket cap though it ran a strategy that has one: what ran and the bench that sweeps it,
    per workload, as the run page's answer says it; '' otherwise (a newcomer asked for the cap to use read the answer
    line and found none)."""
    from harness.results import layout, store
    from reports.pages import answer

    try:
        meta = store.read_json(Path(run) / layout.RUN_JSON)
    except (OSError, ValueError):
        meta = {}
    meta = {**meta, "results_folder": str(Path(run).parent)}
    configs, swept = store.read_configs(run), store.read_recommendations(run)
    unswept = [name for name in configs["workload"].dropna().unique() if answer.unswept(configs, swept, name)]
    alike: dict[tuple, list[str]] = {}  # workloads that ran the same caps at one size: one bench sweeps them all
    for name in unswept:
        sizes = tuple(sorted(configs.loc[configs["workload"] == name, "size"].dropna().unique()))
        alike.setdefault((answer.caps_ran(configs, name), sizes), []).append(name)
    said = [f"{caps}: {answer.sweep_command(configs, meta, names, program=program)}"
            for (caps, _), names in alike.items()]  # fmt: skip
    return f"no bucket cap swept ({'; '.join(said)} sweeps it until each cap's verdict is decided)" if said else ""

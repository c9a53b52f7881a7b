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


def answers(run: Path) -> list:
    """Per workload, the leader to deploy at the largest world size, decided or open, with the figures it names
    (reports.pages.headline.Answer): what the answer line says and summary.json's `answer` holds."""
    from harness.results import layout, store
    from reports.pages import headline

    try:
        meta = store.read_json(Path(run) / layout.RUN_JSON)
    except (OSError, ValueError):
        meta = {}
    return headline.run_answers(store.read_configs(run), meta)


def plain(line: str) -> str:
    """An index headline's HTML as the console says it."""
    return html.unescape(re.sub(r"<[^>]+>", "", line))


def answer_line(run: Path, found: list | None = None) -> str:
    """'the answer: gpt2/small fp32 sgd, 2 ranks: stock 1539.1 ms (leads; too few repeats; …)': the index's headline
    of `run` (per workload, the leader to deploy at the largest world size, decided or open), in plain words; 'no
    answer yet: …' where no strategy to deploy was measured. `found`: its `answers`, where already read."""
    lines = [plain(answer.line) for answer in (answers(run) if found is None else found)] or ["nothing measured"]
    answered = [line for line in lines if not line.endswith(NO_ANSWER)]
    if not answered:
        return f"no answer yet: {'; '.join(lines)} (the run page says what each configuration did)"
    return f"the answer (the strategy to deploy, at the largest world size): {'; '.join(lines)}"


def summary_record(found: list) -> list[dict]:
    """summary.json's `answer`: each workload's answer as plain values, its line in the console's words."""
    import dataclasses

    return [{**{k: v for k, v in dataclasses.asdict(a).items() if k != "line"}, "said": plain(a.line)} for a in found]


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

"""The index's headline of a run, per workload: the fastest strategy to deploy at the largest world size and what its
repeats say of its lead (`run_answers`), as the index, the console's last line and summary.json's `answer` give it."""

from __future__ import annotations

import dataclasses
from typing import Any

import pandas as pd

from harness.analysis import roles
from harness.analysis.verdicts import decide
from reports import aggregate
from reports.pages import evidence, legend, pooled
from reports.pages.html import esc
from reports.pages.notes import winner


@dataclasses.dataclass(frozen=True)
class Answer:
    """One workload's answer at its largest world size: `line`, the index's headline of it (HTML), and the figures it
    names, for a script (summary.json's `answer`: docs/output.md). `strategy` is None where only the floor ran."""

    line: str
    workload: str
    size: str | None
    dtype: str | None
    optimizer: str | None
    world_size: int
    strategy: str | None = None  # as the run page names it: its options beside its name ('stock bucket_cap_mb=5')
    impl: str | None = None
    options: dict[str, Any] | None = None
    bucket_cap_mb: float | None = None  # the cap it ran at; None where none, or several pooled (`pooled_caps_mb`)
    pooled_caps_mb: list[float] | None = None  # caps of one bucket layout taken as one configuration
    step_ms: float | None = None  # the geometric mean of its repeats' median steps (the answer's figure)
    repeats: int | None = None
    decided: bool = False  # the repeats back it against the next strategy (the words' 'fastest')
    to_deploy: bool = False  # a strategy to deploy, not one of ddpbench's measuring instruments
    parity_ok: bool | None = None
    noise: str = ""
    words: list[str] = dataclasses.field(default_factory=list)  # the caveats the line says in brackets


def run_answers(configs: pd.DataFrame, meta: dict[str, Any] | None = None) -> list[Answer]:
    """Per workload, the fastest communicating strategy at the largest world size: 'mlp/small fp32 sgd: at 2 ranks,
    bucketed bucket_cap_mb=25 2.46 ms', with the answer's doubt where the repeats do not back the winner
    ('… 2.46 ms (leads; no 5% change shown)', lead_words); caps of one layout pooled said so, as the run page says
    it (winner.step_said: '… 8.98 ms, both caps' launches pooled (…)')."""
    answers = []
    config = (meta or {}).get("config") or {}
    auto = config.get("repeats") == "auto"  # the console's own, given up where its rounds gave up
    found = decide.strategy_verdicts(configs, confidence=pooled.run_confidence(meta or {}),
                                     max_repeats=int(config.get("max_repeats") or decide.DEFAULT_MAX_REPEATS) if auto
                                     else None)  # fmt: skip
    for workload in dict.fromkeys(configs.loc[configs["status"] == "ok", "workload"]) if not configs.empty else []:
        frame = pooled.ranked(configs, workload=workload, confidence=pooled.run_confidence(meta or {}))
        if frame.empty:
            continue
        world = int(frame["world_size"].max())
        group = evidence.one_layout_pooled(frame[frame["world_size"] == world])  # as the run page's headline
        contenders = legend.deployable(group[~group["is_floor"]])  # the leader named: one to deploy
        rows = configs[configs["workload"] == workload]
        size, dtype, optimizer = (_first(rows, column) for column in ("size", "dtype", "optimizer"))
        setup = "/".join(str(v) for v in (workload, size) if v is not None)
        said_setup = " ".join(str(v) for v in (dtype, optimizer) if v)
        where = f"{esc(setup)}{' ' + esc(said_setup) if said_setup else ''}, {aggregate.world_label(world)}: "
        of = {"workload": str(workload), "size": size, "dtype": dtype, "optimizer": optimizer, "world_size": world}
        if contenders.empty:
            answers.append(Answer(where + "only the no-communication floor", **of))
            continue
        best = contenders.iloc[0]
        barred = legend.not_to_deploy(best)
        lead = lead_words(group, found)
        said = barred + lead
        said += ["one rank: nothing communicated, only each strategy's own cost"] if world == 1 else []
        said += [over] if (over := legend.passed_over(group[~group["is_floor"]])) else []
        line = (
            where
            + f"<b>{esc(best['strategy'])}</b> {esc(winner.step_said(best))}"
            + (f" ({esc('; '.join(said))})" if said else "")
        )
        answers.append(Answer(line, **of, **_figures(best), decided=lead[:1] == ["fastest"], words=said,
                              to_deploy=not roles.described(best["impl"])[1]))  # fmt: skip
    return answers


def _figures(best: pd.Series) -> dict[str, Any]:
    """What the answer's leader ran and measured, as plain values (JSON's: None where not known)."""
    caps = best.get("pooled_caps")
    cap = best.get("bucket_cap_mb")
    parity = best.get("parity_ok")
    return {
        "strategy": str(best["strategy"]),
        "impl": str(best["impl"]),
        "options": dict(best["options"]) if isinstance(best.get("options"), dict) else None,
        "bucket_cap_mb": float(cap) if not isinstance(caps, list) and cap is not None and pd.notna(cap) else None,
        "pooled_caps_mb": [float(c) for c in caps] if isinstance(caps, list) else None,
        "step_ms": float(best["step_ms"]),
        "repeats": int(best["repeats"]) if pd.notna(best.get("repeats")) else None,
        "parity_ok": bool(parity) if parity is not None and pd.notna(parity) else None,
        "noise": str(best.get("noise") or ""),
    }


GIVEN_UP = "leads; too few repeats to tell it from {next}, the next, and given up as out of reach within --max-repeats"
"""The index's caveat where the leader's pair with the reference is a verdict --repeats auto gave up on, naming it."""


def lead_words(group: pd.DataFrame, found: list[decide.Verdict]) -> list[str]:
    """What the repeats say of the leader (winner.lead_caveat: against the next, as the run page's headline judges
    it): ['fastest'], ['leads; too few repeats'], …; where the next is not the reference, it is named, and the run's
    own verdict of the leader against the reference follows in the console's words ('vs stock: faster, at 0.61×
    stock's step (1.64× faster)'): the verdict --repeats auto decided, which the lead over the next is not."""
    contenders = legend.deployable(measured := group[~group["is_floor"]])
    if len(contenders) < 2:  # as the run page's lead(): a peer that failed or was skipped is not beaten
        return legend.only_one(measured)
    caveat = winner.lead_caveat(group) or "fastest"  # as the header promises
    best, runner, reference = contenders.iloc[0], contenders.iloc[1], winner.reference_row(group)
    mine = _verdict_of(best, found) if reference is not None and best["strategy"] != reference["strategy"] else None
    pair = mine if reference is None or best["strategy"] != reference["strategy"] else _verdict_of(runner, found)
    if (
        caveat == "leads; too few repeats"
        and pair is not None
        and pair.given_up
        and (reference["strategy"] in (best["strategy"], runner["strategy"]))
    ):  # the console's word: more repeats will not decide it
        caveat = GIVEN_UP.format(next=runner["strategy"])
    if mine is None or runner["strategy"] == reference["strategy"]:  # the next is the reference: that very verdict
        return [caveat]
    if caveat in (f"leads; {evidence.NO_CHANGE_SHOWN}", "leads; too few repeats"):
        caveat = f"{caveat} {'from' if 'shown' in caveat else 'to tell it from'} {runner['strategy']}, the next"
    return [caveat, f"vs {reference['strategy']}: {mine.word}"]  # as the row names it (a verdict's pair: its note once)


def _verdict_of(row: pd.Series, found: list[decide.Verdict]) -> decide.Verdict | None:
    """The run's verdict of a strategy (not the reference) against the reference: the one resting on its rows."""
    ids = row.get("config_ids") or frozenset()
    return next((v for v in found if v.kind == decide.STRATEGY and ids and ids <= v.config_ids), None)


def _first(rows: pd.DataFrame, column: str):
    values = rows[column].dropna() if column in rows else []
    return values.iloc[0] if len(values) else None

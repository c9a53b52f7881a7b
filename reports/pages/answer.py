"""The run page's answer, before any figure: per workload and world size, the strategies ranked by
step time (repeats pooled), each against stock as DDP ships it, with the recommended bucket cap,
parity and a noise flag; then a one-line headline per world size. Pure: DataFrames in, HTML out.

A winner is named with its evidence (the repeat is its unit, docs/statistics.md): "fastest" and "N× faster"
carry the repeats' interval, and say "leads …, no 5% change shown" or "too few repeats to tell" where the
repeats cannot back them. Ranks, ratios, verdicts and the sweep's cap all rest on one estimate, the
geometric mean of the repeats' medians, so that no row ranked first is "slower" than the one below it.
Columns a run does not have (older schemas) show as "—".
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pandas as pd

from harness.analysis import roles, stats
from harness.analysis.verdicts import decide, sweep
from harness.results.invocation import DEFAULT_RESULTS, NAME, on_every_node, page_run_words
from harness.results.values import options_of, parity_words
from reports.aggregate import RunData, precision
from reports.pages import alerts
from reports.pages.evidence import (
    CAPTION,
    CELL_DOUBT,
    POOLED_CAPS,
    TOO_FEW,
    caps_alone_spread,
    evidence,
    inverted,
    levels_note,
    one_layout_pooled,
    stand_in_note,
)
from reports.pages.html import HEADING_NAME, esc, name_html, table
from reports.pages.legend import deployable, not_a_gpu_booking, predict_links, strategies_legend
from reports.pages.notes import floor, hidden
from reports.pages.notes.winner import headline, milliseconds, reference_name, reference_row
from reports.pages.optimizer_lead import optimizer_lead
from reports.pages.pooled import MISSING, ranked, run_confidence, value


def any_pooled(group: pd.DataFrame) -> bool:
    """Whether one_layout_pooled made one row of some strategy's caps in `group` (its answer rows, pooled)."""
    return "pooled_caps" in group and bool(group["pooled_caps"].map(lambda caps: isinstance(caps, list)).any())


def against_reference(row: pd.Series, reference: pd.Series | None) -> str:
    """'0.81× (1.24× faster; 0.70–0.93)', '1.30× (1.10–1.50)', '0.99× (1.01× faster; 0.96–1.04), no 5% change shown',
    'too few repeats to tell (estimate 0.81×, 1.24× faster, interval 0.56–1.17)' ('not judged (…)' at one rank
    whatever its repeats showed: no verdict is about it, ONE_RANK): this one's step over stock's (decide.versus, as
    the console's verdicts say it), with the interval over repeats of that ratio."""
    if reference is None:
        return MISSING
    if row["strategy"] == reference["strategy"]:
        return "reference"
    proof = evidence(row, reference)
    faster = proof["times"] >= 1  # by the estimate the interval is built around, so that it lies inside
    if proof.get("same_buckets"):  # one measurement: its two figures differ by the launches alone
        apart = proof["times"] if faster else evidence(reference, row)["times"]
        return f"the same buckets: one measurement ({apart:.2f}× apart: the launches' spread)"
    own = inverted(proof) if faster else evidence(reference, row)  # this row's step over the reference's
    interval = _interval(own)
    one_rank = int(row["world_size"]) == 1  # ONE_RANK: no verdict is about it, however its repeats came out
    if one_rank or own["judged"] == TOO_FEW:  # the doubt first: the estimate is no finding
        said = [f"{own['times']:.2f}×", decide.faster_words(own["times"]), interval and f"interval {interval}"]
        doubt = "not judged" if one_rank else "too few repeats to tell"
        return f"{doubt} (estimate {', '.join(words for words in said if words)})"
    return decide.versus(own["times"], interval=interval) + CELL_DOUBT[own["judged"]]


def _interval(own: dict) -> str:
    return sweep.ratio_interval_text(own["low"], own["high"]) if own["low"] is not None else ""


def bounds_note(group: pd.DataFrame) -> str:
    """Why one row's interval is given ('interval 0.18–4.63') beside others' 'too wide to bound it', where world_table
    shows both for `group`: a newcomer read that as two rules. It is one (sweep.ratio_interval_text), said here."""
    group = one_layout_pooled(group)  # the rows as world_table shows them
    reference = reference_row(group)
    if reference is None:
        return ""
    shown, too_wide = [], []
    for _, row in group.iterrows():
        if row["strategy"] == reference["strategy"]:
            continue
        proof = evidence(row, reference)
        if proof.get("same_buckets") or proof["low"] is None:
            continue
        interval = _interval(inverted(proof) if proof["times"] >= 1 else evidence(reference, row))
        (too_wide if interval == sweep.TOO_WIDE else shown).append((row["strategy"], interval))
    if not shown or not too_wide:
        return ""
    rule = f"An interval reads “too wide to bound it” where an end lies below {1 / sweep.BOUNDS_NOTHING:g}× or above "
    rule += f"{sweep.BOUNDS_NOTHING:g}×"
    if len(shown) > len(too_wide):  # the few too wide named, the rest said as the others
        wide = " and ".join(f"{name}'s" for name, _ in too_wide)
        return f"<p class=caption>{esc(f'{rule}, as {wide} does; the others lie within, so they are given.')}</p>"
    within = ", ".join(f"{name}'s {interval}" for name, interval in shown)
    one = len(shown) == 1
    words = f"{rule}; {within}, however wide, {'lies' if one else 'lie'} within, so {'it is' if one else 'they are'}"
    return f"<p class=caption>{esc(words)} given.</p>"


def recommendation_text(
    recommendations: pd.DataFrame, *, workload: str, impl: str, world: int, options: dict | None = None
) -> str | None:
    """The sweep's verdict for one strategy (impl and, where given, its options other than the cap) at one
    world size: 'use bucket_cap_mb=5', 'flat: any of 1, 5, 25 MiB', or None. A table without the options
    that names the impl twice (two hooks swept) cannot say which verdict is this one's: None."""
    if world == 1:
        return None
    if recommendations.empty or "impl" not in recommendations:
        return None
    rows = recommendations[(recommendations["impl"] == impl) & (recommendations["workload"] == workload)
                           & (recommendations["world_size"] == world)]  # fmt: skip
    if options is not None and "other_options" in rows:
        rows = rows[rows["other_options"].map(_canonical) == _canonical(options)]
    if len(rows) != 1:
        return None
    row = rows.iloc[0]
    if isinstance(value(row, "decision"), str):  # the sweep's decision over repeats (docs/statistics.md)
        return sweep.answer(row, why=False)  # the buckets every cap made: the line above says
    best = value(row, "best_cap_mb")
    as_good = _caps(value(row, "equivalent_caps_mb"))
    if best is None:
        return None
    if len(as_good) > 1 and stats.REFERENCE_CAP_MB in as_good:  # the 25 MiB cap is as good as the best
        return "flat: any of " + ", ".join(f"{c:g}" for c in as_good) + " MiB"
    return f"{best:g} MiB"


def _canonical(options: Any) -> str:
    """A strategy's options but the cap, as the sweep keys them (its `other_options`)."""
    parsed = options_of(options)
    return json.dumps({k: v for k, v in parsed.items() if k != "bucket_cap_mb"}, sort_keys=True)


def _caps(text: Any) -> list[float]:
    if text is None:
        return []
    caps = json.loads(text) if isinstance(text, str) else list(text)
    return sorted(float(c) for c in caps)


def parity_cell(row: pd.Series) -> str:
    words = parity_words(row, why=not row["is_floor"]).removeprefix("parity ")  # a lossy hook's: why, how far
    return "<b>FAILED</b>" if row["parity_ok"] is False else esc(words)


def noise_cell(row: pd.Series) -> str:
    """The step CV as stats.noise_note judges it (the median over repeats), and why it is noisy if it is."""
    if row["cv"] is None and not row["noise"]:
        return MISSING
    steady = f"steady (cv {stats.cv_text(row['cv'])})" if row["cv"] is not None else "steady"
    by_cap = row.get("noise_by_cap")  # caps of one layout as one row (one_layout_pooled): each cap's note
    return f"<b>noisy</b>: {esc(by_cap if isinstance(by_cap, str) else row['noise'])}" if row["noise"] else steady


def world_table(group: pd.DataFrame, recommendations: pd.DataFrame, *, workload: str) -> str:
    group = one_layout_pooled(group)  # ranked as the headline ranks: caps of one bucket layout are one row
    reference = reference_row(group)
    rows, classes, shown_caps = [], [], set()
    rank, leader = 0, deployable(group[~group["is_floor"]]).index[:1]  # bold: the one the headline names
    for _, row in group.iterrows():
        rank += not row["is_floor"]
        cap = MISSING
        strategy = (row["impl"], _canonical(row["options"]))
        if strategy not in shown_caps:  # the verdict once per strategy, on its fastest row
            shown_caps.add(strategy)
            cap = esc(recommendation_text(recommendations, workload=workload, impl=row["impl"],
                                          world=int(row["world_size"]), options=row["options"]) or MISSING)  # fmt: skip
        rows.append([
            "floor" if row["is_floor"] else str(rank),
            f"<b>{esc(row['strategy'])}</b>" if row.name in leader else esc(row["strategy"]),
            milliseconds(row["step_ms"]), esc(against_reference(row, reference)), cap,
            hidden.hidden_cell(row), parity_cell(row), noise_cell(row),
        ])  # fmt: skip
        classes.append("failed" if row["parity_ok"] is False else ("noisy" if row["noise"] else ""))
    head = ["#", "strategy", "step (geometric mean of repeats)", f"× {decide.step_of(reference_name(reference))}",
            "bucket cap to use",
            "comm. hidden (over repeats)", "parity", "noise (median CV of repeats)"]  # fmt: skip
    if recommendations.empty:  # no sweep: a '—' on every row read as 'no cap needed'; no_sweep_note says why
        head, rows = _without_column(head, CAP_COLUMN), [_without_column(cells, CAP_COLUMN) for cells in rows]
    return table(head, rows, row_classes=classes)


CAP_COLUMN = 4
"""The answer table's 'bucket cap to use' column, left out where the run swept no cap."""

SWEPT_CAPS = "1,5,10,25,50,100"
"""The caps `make sweep` sweeps: the command a run without a sweep is pointed to."""


def _without_column(cells: list[str], column: int) -> list[str]:
    return cells[:column] + cells[column + 1 :]


def _one_node_world(rows: pd.DataFrame) -> int | None:
    """The largest world size, where every row ran on one node: the --gpus that runs it again."""
    one_node = "nnodes" not in rows or bool((rows["nnodes"].fillna(1) == 1).all())
    return int(rows["world_size"].max()) if one_node and len(rows) else None


def sweep_command(configs: pd.DataFrame, meta: dict, workload: str | list[str], *, program: str = NAME) -> str:
    """`ddpbench bench --impls stock --workloads W --size S --gpus N --bucket-cap-mb 1,…,100 [--results DIR]`: the
    bench that sweeps the cap of a run that swept none, for its workload (or workloads of one size: one bench for
    them all), size and GPUs (the page's and the console's answer both point to it); a run across nodes's with its
    --nnodes and --rdzv-endpoint, to run on every node with its own --node-rank and one new --run-id."""
    names = [workload] if isinstance(workload, str) else list(workload)
    mine = configs[configs["workload"].isin(names)]
    spec = ",".join(((meta.get("workloads") or {}).get(name) or {}).get("spec") or name for name in names)
    sizes = mine["size"].dropna() if "size" in mine else pd.Series(dtype=object)
    nnodes = int((meta.get("config") or {}).get("nnodes") or 1)
    gpus = (meta.get("config") or {}).get("gpus") or _one_node_world(mine)  # a run.json without its config
    # at one rank no cap is judged (sweep.sweeps): the sweep needs two, which two nodes give at a GPU each
    gpus = max(gpus, 2 if nnodes == 1 else 1) if gpus else None
    words = [program, "bench", "--impls", roles.reference_name(), "--workloads", str(spec)]
    words += ["--size", str(sizes.iloc[0])] if len(sizes) else []
    words += ["--gpus", str(gpus)] if gpus else []
    words += ["--bucket-cap-mb", SWEPT_CAPS]
    results = meta.get("results_folder")
    words += ["--results", str(results)] if results and Path(results) != DEFAULT_RESULTS else []
    if nnodes > 1:  # the sweep spans the run's nodes, as the run did; a new run, so a new --run-id, the user's
        words += ["--nnodes", str(nnodes), "--rdzv-endpoint", str(meta["config"].get("rdzv_endpoint"))]
    # the program as the console names it: maybe several words
    return f"{program} {shlex.join(words[1:])}{on_every_node(nnodes, new_run=True)}"


def no_sweep_note(run: RunData, workload: str) -> str:
    """Why the answer names no bucket cap where the run swept none, and the bench that sweeps one (a team lead's
    second question, said where the answer is, not three sections down)."""
    if not unswept(run.configs, run.recommendations, workload):
        return ""
    command = sweep_command(run.configs, run.meta, workload)
    return (
        f"<p>No bucket cap to use: this run swept none ({caps_ran(run.configs, workload)}); <code>{esc(command)}"
        "</code> sweeps it until each cap's verdict is decided (<a href=#buckets>3. Which bucket cap?</a>).</p>"
    )


def unswept(configs: pd.DataFrame, recommendations: pd.DataFrame, workload: str) -> bool:
    """Whether the run swept no cap, though `workload` ran a strategy that has one (a row that records its cap)."""
    rows = configs[configs["workload"] == workload]
    capped = "bucket_cap_mb" in rows and bool(rows["bucket_cap_mb"].notna().any())
    return recommendations.empty and (capped or bool(roles.is_reference(rows).any()))  # older rows record no cap


def caps_ran(configs: pd.DataFrame, workload: str) -> str:
    """The one cap a run without a sweep ran at: DDP's default, or the one `--bucket-cap-mb` gave (no sweep)."""
    rows = configs[configs["workload"] == workload]
    caps = sorted(set(rows["bucket_cap_mb"].dropna())) if "bucket_cap_mb" in rows else []
    if set(caps) <= {stats.REFERENCE_CAP_MB}:
        return f"DDP ran its default, {stats.REFERENCE_CAP_MB:g} MiB, a first bucket of 1 MiB"
    ran = ", ".join(f"{cap:g}" for cap in caps)
    if len(caps) > 1 and "world_size" in rows and rows["world_size"].max() < 2:  # sweep.sweeps judges none at one
        return f"it ran {ran} MiB at one rank only, where no cap is judged: a cap's cost is its communication"
    return f"it ran at {ran} MiB only"


def measured_window(rows: pd.DataFrame, repeats: pd.Series) -> str:
    """'Each step below: the median of 4 measured steps a repeat, after 2 warm-up steps left out, over 2 repeats.':
    what one figure of a workload's answer rests on, from its measured `rows` (a resumed run's may differ from the
    flags that began it: each count as the rows have it, '4 or 8') and its answer rows' `repeats`. Said where the
    answer states its figures: a reader found it only in the Reproduce command, six sections down."""
    steps, warmup = _counts(rows, "steps"), _counts(rows, "warmup")
    if not steps:  # an older schema's rows: nothing to say the window from
        return ""
    window = f"the median of {_steps(steps, 'measured step')} a repeat (each step the slowest rank's)"
    if warmup:
        window += ", with no warm-up step" if warmup == ["0"] else f", after {_steps(warmup, 'warm-up step')} left out"
    counts = sorted({int(n) for n in repeats.dropna()})
    if counts:
        spread = f"{counts[0]}–{counts[-1]} repeats a configuration" if len(counts) > 1 else ""
        over = spread or stats.repeats_text(counts[0])
        window += f", over {over}" + (", their geometric mean" if counts[-1] > 1 else "")
    return f"<p class=caption>Each step below: {esc(window)}.</p>"


def _steps(counts: list[str], noun: str) -> str:
    """'4 measured steps', '1 warm-up step', '4 or 8 measured steps'."""
    return f"{' or '.join(counts)} {noun}{'s' * (counts != ['1'])}"


def _counts(rows: pd.DataFrame, column: str) -> list[str]:
    return [f"{n:g}" for n in sorted(set(rows[column].dropna()))] if column in rows else []


def answer_section(run: RunData, workloads: list[str]) -> str:
    frames = {workload: ranked(run.configs, workload=workload, confidence=run_confidence(run.meta)) for workload in
              workloads}  # fmt: skip
    # why the intervals are at two levels: said above the first table, after the first headline, so the answer leads
    levels = levels_note(list(frames.values()), run.meta.get("config") or {}, swept=not run.recommendations.empty)
    caveat = not_a_gpu_booking(run.meta)  # a CPU run's: before any ranking, with where a GPU's answer is
    parts = ["<h2 id=answer>The answer</h2>", caveat]
    stand_in = pooled = explained = False
    leaders: set[str] = set()  # the strategies a headline names first
    for workload, frame in frames.items():
        if frame.empty:
            continue
        size = run.configs.loc[run.configs["workload"] == workload, "size"].dropna()
        mine = run.configs[run.configs["workload"] == workload]
        optimizers = mine["optimizer"].dropna().unique() if "optimizer" in mine else []  # what the state costs
        setup = " · ".join(filter(None, [precision(mine), " or ".join(optimizers)]))  # each changes the answer
        parts.append(f"<h3>{name_html(workload, HEADING_NAME)}{esc('/' + str(size.iloc[0])) if len(size) else ''}"
                     f"{esc(' · ' + setup) if setup else ''}</h3>")  # fmt: skip
        parts.append(measured_window(mine[mine["status"] == "ok"], frame["repeats"]))  # the rows ranked below
        # the largest world size first: the answer the run exists for (one rank communicates nothing)
        one = one_layout_pooled(frame[frame["world_size"] == 1])  # the caps' control: nothing to all-reduce
        control = caps_alone_spread(one[~one["is_floor"]]) if len(one) else None
        for _, group in sorted(frame.groupby("world_size"), key=lambda item: -item[0]):
            reference = reference_row(group)
            stand_in = stand_in or stand_in_note(reference)  # the first the page compares with: said once
            pooled |= any_pooled(one_layout_pooled(group))
            world, verdicts = int(group["world_size"].iloc[0]), run.recommendations  # the caps' verdicts, then all
            caps, said = alerts.cap_verdicts(verdicts, workload=workload, world=world, explain=not explained,
                                             run=page_run_words(run.meta))  # fmt: skip
            explained |= said  # the buckets' why, once a page
            contenders = deployable(one_layout_pooled(group).loc[lambda rows: ~rows["is_floor"]])
            lead = optimizer_lead(contenders, reference, run)
            no_sweep = no_sweep_note(run, workload) if world == frame["world_size"].max() else ""
            parts += [f"<p class=headline>{headline(group, control)}{lead}</p>", caps, no_sweep, levels,
                      world_table(group, verdicts, workload=workload)]  # fmt: skip
            levels = ""
            leaders.update(contenders["impl"].head(1))
            parts.append(bounds_note(group))
            parts.append(floor.answer_below_floor(one_layout_pooled(group)) + hidden.late_note(group))  # as ranked
    if len(parts) == 2:
        parts.append("<p>No configuration of this run was measured: nothing to rank.</p>")
    parts.append(strategies_legend(list(dict.fromkeys(run.configs.loc[run.configs["status"] == "ok", "impl"])),
                                   leaders))  # fmt: skip
    parts.append("" if caveat else predict_links(run.meta))  # a CPU run's: in its caveat, above
    parts.append(f"<p class=caption>{CAPTION}{POOLED_CAPS * pooled}{stand_in or ''}</p>")
    return "\n".join(parts)

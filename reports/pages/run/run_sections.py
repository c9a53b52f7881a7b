"""The run page's sections, one per question it answers (which strategy is fastest, how it scales,
which bucket cap, where the time goes, what memory costs, whether to trust it), each a heading, its figures
with a one-line caption, and its small tables; how far from the floor and whether the model agrees is
`reports.pages.run.model_section`'s, whether to trust it `reports.pages.run.trust_section`'s.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from harness.analysis import roles, stats, why
from harness.analysis.verdicts import sweep
from harness.results.invocation import page_run_words
from harness.results.values import configuration_label, options_words, samples_text
from reports import aggregate
from reports.aggregate import RunData, usable_cores, world_sizes
from reports.figures import gap as gapfigures
from reports.figures import memory as memory_figures
from reports.figures import steps as stepfigures
from reports.figures import strategies as figures
from reports.figures.captions import (
    BEATS_REFERENCE,
    CAPTIONS,
    COMM_POOLED,
    GAP_REPEATS,
    MEMORY_REPEATS,
    ONE_REPEAT_EACH,
    OR_REFERENCE_ITSELF,
    POOLED,
    SCALING_REPEATS,
)
from reports.pages import alerts, pooled
from reports.pages.html import HEADING_NAME, FigureList, code_spans, esc, format_number, name_html, shared_link, table
from reports.pages.notes import hidden, offset
from reports.pages.notes.winner import milliseconds
from reports.pages.run import takeaways, timeline_section


def one_repeat_each(configs: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The configurations a per-configuration figure draws (one repeat each: aggregate.typical_repeats) and what
    its caption adds to say so ('' without repeats)."""
    return aggregate.typical_repeats(configs), ONE_REPEAT_EACH if aggregate.has_repeats(configs) else ""


def options_text(impl_options: Any) -> str:
    """'bucket_cap_mb=25 static_graph=True', not the raw JSON the table stores."""
    return options_words(impl_options)


def config_cell(column: str, value: Any, digits: int | None) -> str:
    missing = value is None or (isinstance(value, float) and pd.isna(value))
    if column == "parity_ok":
        return {True: "ok", False: "<b>FAILED</b>"}.get(None if missing else bool(value), "not judged")
    if column in ("parity_max_abs_diff", "parity_tolerance") and not missing:
        return f"{value:.2e}"
    if column == "samples_per_s":
        return "" if missing else samples_text(float(value))
    if column == "impl_options":
        return esc(options_text(value))
    if column in ("workload", "config_id"):
        return name_html(value)
    if column == "step_ms_cv" and not missing and value > stats.NOISY_CV:
        return f"<b>{value:.3f} noisy</b>"
    if digits is not None:
        return format_number(None if missing else float(value), digits)
    return esc(value)


def fastest_section(run: RunData, workloads: list[str], figs: FigureList) -> str:
    parts = ["<h2 id=fastest>1. Which strategy is fastest here?</h2>"]
    for workload in workloads:
        said = takeaways.fastest(run.configs, workload=workload, confidence=pooled.run_confidence(run.meta))
        parts.append(takeaway(workload, said))
        repeated = aggregate.has_repeats(run.configs)
        parts.append(figs.add(figures.step_time_by_strategy(run.configs, workload=workload),
                              CAPTIONS["step_time"] + (POOLED if repeated else CAPTIONS["step_whiskers"])))  # fmt: skip
        parts.append(figs.add(figures.throughput_by_strategy(run.configs, workload=workload),
                              CAPTIONS["throughput"] + CAPTIONS["throughput_pooled"] * repeated))  # fmt: skip
    return "\n".join(parts)


def scaling_section(run: RunData, workloads: list[str], figs: FigureList) -> str:
    parts = ["<h2 id=scaling>2. How does it scale?</h2>"]
    if len(world_sizes(run.configs)) < 2:
        # a cluster's scaling needs no second world size here: predict measures the profile a what-if page lacks
        return parts[0] + "<p>This run has one world size only: nothing to scale.</p>" + on_a_cluster(run.meta)
    for workload in workloads:
        parts.append(takeaway(workload, takeaways.scaling(run.configs, workload=workload, meta=run.meta)))
        pooled = SCALING_REPEATS if aggregate.has_repeats(run.configs) else ""
        parts.append(figs.add(figures.scaling(run.configs, workload=workload), CAPTIONS["scaling"] + pooled))
    return "\n".join([*parts, on_a_cluster(run.meta)])


def on_a_cluster(meta: dict) -> str:
    """Where the scaling on GPUs is said: the pages `predict --page` wrote of the run (their scaling efficiency per GPU
    count), else a GPU run's what-if page, else the command that writes one (a CPU's shared cores say little of it)."""
    pages = "; ".join(shared_link(p, up="../") for p in meta.get("predict_pages") or [])
    if pages:
        return f"<p>Its scaling efficiency on a cluster, per GPU count: {pages}.</p>"
    if meta.get("whatif") and meta.get("device") == "cuda":
        return f'<p>Its scaling efficiency on a cluster, per GPU count: <a href="{esc(meta["whatif"])}">what if on ' \
               f"{esc(meta.get('whatif_cluster'))}</a>.</p>"  # fmt: skip
    step = "" if meta.get("device") == "cuda" else " --local-step-ms MS"  # a CPU's step is no GPU's
    missing = meta.get("whatif_missing")
    none = f" No what-if page on {esc(meta.get('whatif_cluster'))}: {code_spans(missing)}." if missing else ""
    return (
        "<p>Its scaling efficiency on a cluster, per GPU count: <code>ddpbench predict --run "
        f"{esc(page_run_words(meta))} --cluster NAME{step} --page FILE.html</code>.{none}</p>"
    )


def bucket_section(run: RunData, workloads: list[str], figs: FigureList) -> str:
    parts, drawn = ["<h2 id=buckets>3. Which bucket cap?</h2>"], []
    for workload in workloads:
        best = aggregate.best_caps(run.configs, workload=workload)
        for strategy, _ in best.groupby("strategy", sort=False):
            stars = recommended_caps(run.recommendations, workload=workload, strategy=strategy)
            figure = figures.bucket_cap_sweep(run.configs, workload=workload, strategy=strategy, recommended=stars)
            note = one_layout_note(run.recommendations, workload=workload, strategy=strategy).strip()
            drawn += [(figure, note)] if figure is not None else []
    parts += [figs.add(figure, caption) for (figure, _), caption in zip(drawn, sweep_captions([n for _, n in drawn]),
                                                                       strict=True)]  # fmt: skip
    if not run.recommendations.empty:
        parts.append(recommendation_table(run.recommendations))
    if len(parts) == 1:
        parts.append(
            "<p>This run does not sweep <code>bucket_cap_mb</code>; <code>make sweep</code> does "
            "(<code>--bucket-cap-mb 1,5,10,25,50,100</code>).</p>"
        )
    return "\n".join(parts)


def sweep_captions(notes: list[str]) -> list[str]:
    """Each sweep figure's caption from its one-layout note: the sweep's caption holds for every strategy's figure,
    said once, under the last (per figure it ran 8 lines × 3), and so does a note that every figure shares (a run page
    said "At 2 ranks every cap made the same buckets: …" under stock's figure and again under bucketed's)."""
    shared = len(notes) > 1 and len(set(notes)) == 1
    return [f"{CAPTIONS['sweep']} {note}".strip() if k == len(notes) - 1 else "" if shared else note
            for k, note in enumerate(notes)]  # fmt: skip


def recommended_caps(frame: pd.DataFrame, *, workload: str, strategy: str) -> dict[int, tuple[float, float]]:
    """World size → (the cap the sweep's verdict recommends for `strategy`, its best_step_ms), only where
    it recommends one."""
    if frame.empty or "decision" not in frame:
        return {}
    chosen = frame[(frame["workload"] == workload) & (frame["decision"] == "recommend")]
    return {
        int(r.world_size): (float(r.best_cap_mb), float(r.best_step_ms))
        for r in chosen.itertuples()
        if configuration_label(r.impl, r.other_options) == strategy
    }


def one_layout_note(frame: pd.DataFrame, *, workload: str, strategy: str) -> str:
    """' At 2 ranks every cap made the same buckets: …' where the sweep's verdict found one layout (sweep.answer's
    'flat: any of …'): a CPU sweep's line fell from 16.5 ms at 1 MiB to 7.9 ms at 100 MiB between caps that were one
    measurement, and read as a cap to pick."""
    if frame.empty or "same_buckets_mb" not in frame:
        return ""
    rows = frame[(frame["workload"] == workload) & frame["same_buckets_mb"].map(lambda v: isinstance(v, str))]
    worlds = [aggregate.world_label(int(r.world_size)) for r in rows.itertuples()
              if configuration_label(r.impl, r.other_options) == strategy]  # fmt: skip
    return (f" At {' and '.join(worlds)} every cap made the same buckets: the line's rise and fall there is the "
            "launches' spread, one measurement, not the cap's doing.") if worlds else ""  # fmt: skip


def cap_cell(row: pd.Series) -> str:
    """The cap column of the cap table as its answer has it: the cap recommended, 'any' (or the tied caps) where flat,
    the leader 'so far' where undecided. A walkthrough's table read 'fastest cap 100' beside 'flat: any of 1, 5, 25,
    100 MiB', where every cap made one bucket: 100 led by the launches' spread alone."""
    if row.get("decision") == stats.FLAT:
        tied = sorted(json.loads(row["equivalent_caps_mb"]))
        every = tied == sorted(json.loads(row["caps_mb"]))
        return "any" if every else "any of " + ", ".join(f"{c:g}" for c in tied)
    best = sweep.point_text(row, row["best_cap_mb"], unit="")  # '1 (or 2: the same buckets)': one point
    return best + (" (leading so far)" if row.get("decision") == stats.TOO_FEW else "")


def recommendation_table(frame: pd.DataFrame) -> str:
    """The sweep's verdict (harness.analysis.verdicts.sweep.answer): the cap to use, 'flat: any of …' or too few
    repeats; the fastest cap, how sure, how much longer the 25 MiB cap takes (sweep.versus_reference), and
    the noise behind it."""
    rows = []
    for r in frame.itertuples():
        row = pd.Series(r._asdict())
        interval = _step_interval(r.best_ci_low_ms, r.best_ci_high_ms)
        answer, gain = sweep.answer(row, why=False), sweep.versus_reference(row) or sweep.no_reference_ratio(row)
        rows.append([
            esc(r.workload), esc(sweep.label(row)), esc(aggregate.world_label(int(r.world_size))),
            f"<b>{esc(answer)}</b>" if r.decision == "recommend" else esc(answer),
            esc(cap_cell(row)), _step(r.best_step_ms), interval, gain, esc(r.repeats), esc(r.noise or ""),
        ])  # fmt: skip
    head = ["workload", "strategy", "world size", "answer", "cap (MiB), as the answer says",
            "the fastest cap's step (ms, geometric mean of repeats; caps of one layout, their launches pooled)",
            f"its {stats.CONFIDENCE:.0%} CI (ms)",
            f"the {stats.REFERENCE_CAP_MB:g} MiB cap", "repeats", "noise"]  # fmt: skip
    without = sweep.without_reference(frame)  # the rule where 25 MiB is not swept
    return (
        "<h3>Recommended bucket_cap_mb</h3><p>Each repeat's median step is one piece of evidence. A cap is "
        f"recommended only when it {BEATS_REFERENCE} (Welch's t over repeats, as <code>compare</code> judges; from "
        f"{stats.PAIRED_FROM} repeats on, caps that ran side by side in each launch are judged launch by launch) "
        f"{OR_REFERENCE_ITSELF}{'; ' * bool(without)}{esc(without)}; "
        "otherwise the optimum is flat, or the repeats are too few to tell. The 25 MiB cap is given explicitly, "
        "as every cap of a sweep (since torch 2.9 that caps the first bucket too): it is not DDP's default layout "
        "(no options: first bucket 1 MiB). No recommendation at world size 1 (nothing is communicated).</p>"
        + table(head, rows)
    )


def _step(ms: float) -> str:
    """A step in the cap table as the answer's headline rounds it (winner.milliseconds, its unit in the head): a
    page read '145.0 ms' above and '144.96' here, one figure at two precisions."""
    return milliseconds(ms).removesuffix(" ms")


def _step_interval(low: float, high: float) -> str:
    """sweep.interval_text at the step's rounding (`_step`): '94.80–221.7' beside 145.0, not '94.80–221.67'."""
    said = sweep.interval_text(low, high)
    return f"{_step(low)}–{_step(high)}" if said and said != sweep.TOO_WIDE else said


def time_section(run: RunData, workloads: list[str], figs: FigureList) -> str:
    parts = ["<h2 id=time>4. Where does the time go?</h2>"]
    shown, note = one_repeat_each(run.configs)
    for workload in workloads:
        parts.append(takeaway(workload, takeaways.communication(run.configs, workload=workload)))
        breakdown = stepfigures.time_breakdown(shown, run.phases, workload=workload)
        parts.append(figs.add(breakdown, CAPTIONS["breakdown"], once=note))
        parts.extend(why_slower(run, workload, figs))
        pooled_comm = aggregate.communication_over_repeats(shown, run.configs) if note else shown
        exposed = stepfigures.exposed_communication(pooled_comm, workload=workload)
        if exposed is not None:
            parts.append(figs.add(exposed, CAPTIONS["exposed"] + (COMM_POOLED if note else "")))
        parts.append(hidden.casts_note(run.configs[run.configs["workload"] == workload]))
        parts.extend(timeline_section.timeline_figures(run, workload, figs, shown=shown, note=note))
    return "\n".join(parts)


def why_slower(run: RunData, workload: str, figs: FigureList) -> list[str]:
    """The gap over local taken apart, as a figure and a sentence per configuration (harness.analysis.why); those
    whose launches cannot tell their cost in one sentence a world size, as the console's (notes.offset)."""
    rows = why.typical_repeats(run.configs[run.configs["workload"] == workload])  # one per configuration
    figure = gapfigures.gap_breakdown(aggregate.with_labels(rows), workload=workload)
    if figure is None:
        return []
    cores = usable_cores(run.meta.get("environment") or {})
    same = run.configs[run.configs["workload"] == workload]
    level = pooled.run_confidence(run.meta)  # the verdicts': a smaller cap's lead said decided or open as they say it
    rows = rows.sort_values("config_id")
    said = offset.said_once(
        rows, [why.lines(row, same, cores=cores, confidence=level) for _, row in rows.iterrows()]
    )  # the offset ones' sentence once, as the console's
    items = "".join(f"<li>{esc(line)}</li>" for line in said)
    note = GAP_REPEATS if aggregate.has_repeats(run.configs) else ""
    return [figs.add(figure, CAPTIONS["gap"] + note), f"<ul class=why>{items}</ul>" if items else ""]


def takeaway(workload: str, sentence: str) -> str:
    """The section's one-sentence answer for `workload`, computed from the run ("" when there is none)."""
    return f"<p class=takeaway><b>{name_html(workload, HEADING_NAME)}:</b> {esc(sentence)}</p>" if sentence else ""


def frontier_caption(configs: pd.DataFrame, peak: str) -> str:
    """The caption names only the sharded strategies this run measured, and where their saving shows: in a GPU's
    peak, not in a process's RSS (`peak`: the figure drawn), which is mostly the interpreter and torch."""
    ok = configs[configs["status"] == "ok"]
    ran = ", ".join(sorted(set(ok.loc[roles.shards_state(ok), "impl"])))
    if not ran:
        return CAPTIONS["frontier"]
    if peak == "mem_peak_rss_mb":
        return CAPTIONS["frontier"] + (f" The sharded strategies ({ran}) hold less model state per rank (the figure "
                                       "of held tensors below), which a process's RSS, mostly the interpreter and "
                                       "torch, does not show.")  # fmt: skip
    return CAPTIONS["frontier"] + f" The sharded strategies ({ran}) trade communication for memory."


SHARED_GPU_METRICS = (
    (pooled.PROCESS_PEAK, "each rank's own peak (NVML, its process)"),
    ("mem_peak_nvml_mb", "device peak (NVML): whole GPU, all ranks"),
    *memory_figures.MEMORY_METRICS[1:],
)
"""Where ranks share a GPU, NVML's device peak counts every rank on it: each rank's own comes first."""


def memory_section(run: RunData, workloads: list[str], figs: FigureList) -> str:
    parts = ["<h2 id=memory>5. What does it cost in memory?</h2>"]
    shared = alerts.gpu_shared_worlds(run.meta, run.configs)
    own = bool(shared) and pooled.PROCESS_PEAK in run.configs and run.configs[pooled.PROCESS_PEAK].notna().any()
    peaks = [c for c in pooled.MEMORY_PEAKS if c in run.configs and run.configs[c].notna().any()]  # the sentence's
    peak = pooled.PROCESS_PEAK if own else peaks[0] if peaks else "step_ms_median"
    shown = aggregate.typical_repeats(run.configs, by=peak, highest=True)  # the peak to plan for, as the sentence
    note = MEMORY_REPEATS if aggregate.has_repeats(run.configs) else ""
    caption = CAPTIONS["memory_cpu" if run.meta.get("device") == "cpu" else "memory"]
    caption += CAPTIONS["memory_shared"] if own else ""
    metrics = SHARED_GPU_METRICS if own else memory_figures.MEMORY_METRICS
    for workload in workloads:
        said = takeaways.memory(run.configs, workload=workload, shared=shared, gpu_mb=alerts.gpu_memory_mb(run.meta))
        parts.append(takeaway(workload, said and said + takeaways.full_size_pointer(run.meta, run.configs, workload)))
        by_rank = memory_figures.memory_by_rank(shown, run.ranks, workload=workload, metrics=metrics)
        parts.append(figs.add(by_rank, caption, once=note))
        frontier = memory_figures.memory_vs_time(shown, workload=workload, metrics=metrics)
        parts.append(figs.add(frontier, frontier_caption(run.configs, peak), once=note))
        if "held_param_mb" in run.ranks and run.ranks["held_param_mb"].notna().any():
            figure = memory_figures.held_by_rank(shown, run.ranks, workload=workload)
            parts.append(figs.add(figure, CAPTIONS["held"], once=note))
    return "\n".join(parts)

"""The run page's sections, one per question it answers (which strategy is fastest, how it scales,
which bucket cap, where the time goes, how far from the floor, what memory costs, whether to trust
it), each a heading, its figures with a one-line caption, and its small tables.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from harness.analysis import agreement, roles, stats, sweep, why
from harness.results.values import options_words
from reports import aggregate
from reports.aggregate import RunData, world_sizes
from reports.figures import gap as gapfigures
from reports.figures import network as netfigures
from reports.figures import steps as stepfigures
from reports.figures import strategies as figures
from reports.figures import timeline as timelinefigures
from reports.pages import answer, decisions, takeaways
from reports.pages.html import FigureList, esc, format_number, name_html, table

BEATS_REFERENCE = (
    f"beats the {stats.REFERENCE_CAP_MB:g} MiB cap significantly and by at least {stats.DEFAULT_THRESHOLD * 100:g} %"
)
"""The recommended cap's rule (stats.recommend_cap: stats.verdict's 'faster' against the 25 MiB cap), in words."""
OR_REFERENCE_ITSELF = f"(or {stats.REFERENCE_CAP_MB:g} MiB itself, when it beats every other cap)"
"""The rule's other half: when the 25 MiB cap is the fastest, recommend_cap judges it against every other cap."""
NOT_BEATEN = f"that its best does not beat significantly and by {stats.DEFAULT_THRESHOLD * 100:g} % or more"
"""What 'as good' caps are (stats.recommend_cap's equivalent_caps_mb: the caps its verdict does not call slower)."""

CAPTIONS = {
    "step_time": "Shorter bars are faster: compare strategies within a world size, and each against local "
    "(no communication); whiskers span p10–p90, and a hatched bar marked PARITY FAILED trained wrongly.",
    "throughput": "Taller is better: samples per second over all ranks; at equal world size the ranking "
    "mirrors step time, across world sizes it shows what adding ranks buys.",
    "scaling": "Lines near the dashed ideal (1.0) scale well: each point is throughput at n ranks over n times "
    "the throughput at one rank, with the batch per rank fixed (weak scaling).",
    "sweep": "Step time against the cap, one line per world size through each cap's centre over its repeats (the "
    "geometric mean of the repeats' median steps, as the verdict below pools them), whiskers its 95% interval over "
    "repeats (none with one repeat). A star marks a cap the recommendation below names, at the recommendation's own "
    f"figure: one that {BEATS_REFERENCE} over repeats {OR_REFERENCE_ITSELF}. No star: the optimum is flat, or the "
    "repeats were too few to tell (the table says which).",
    "floor": "Each bar is a configuration's median step; its black tick is the floor max(local step, one all-reduce "
    "of the bytes it sends at the measured latency and bus bandwidth: every gradient byte, half under an fp16/bf16 "
    "hook): this configuration cannot go below it, "
    "and the gap is what better overlap could still win. Where local was not measured at that world size, the "
    "tick is the all-reduce alone. Strategies that do not all-reduce their whole gradient (PowerSGD, rpc_hybrid, "
    "DataParallel) have no floor and are not shown, nor do those that shard the optimizer (zero, fsdp: each rank "
    "updates 1/n of the parameters, so the local step bounds nothing).",
    "model": "The black line is measured; the others are ddpbench predict's simulation of DDP's buckets over the "
    "run's gradient-ready profile and the measured network: dotted on the profile as measured, dashed calibrated "
    "on the run's own steps at one rank, where nothing is communicated (local's step, DDP's own cost), and with the "
    "measured compute/communication contention. The legend gives each curve's MAPE and best cap (several where "
    f"they tie within {agreement.TIE_TOLERANCE:.1%}).",
    "gap": "Each bar is one configuration's cost over local at the same world size (its mean step on the slowest "
    "rank less local's), split into parts that are each measured: communication no compute hid, the part of it "
    "spent waiting for a rank that launched later, compute slower than local's (below zero where faster), time "
    "neither computing nor communicating (the strategy's own work), and the residual, what local's own step holds "
    "beyond its compute. They add up to the gap (the black tick). Only configurations whose collectives were timed "
    "(stock and zero with --bucket-timeline).",
    "breakdown": "Each bar is one configuration's mean step on its slowest rank (the rank with the longest mean "
    "step; measured steps only), split into the mean of each segment over those steps: the segments add up to that "
    "mean step, which can differ from the median step the answer ranks by. The red segment is measured "
    "communication that no compute hid (mean per step), taken out of the phase it fell in "
    "(DDP waits for its buckets inside backward; naive, flat and bucketed in sync). Where communication was not "
    "timed (DDP without --bucket-timeline, FSDP) there is no red segment and backward or sync include it.",
    "exposed": "Left: the mean per step (over measured steps and ranks, not a median) of how long the strategy's "
    "collectives were in flight (outline) and of the part of it with no compute running (filled), both measured "
    "from the bucket timeline. Right: the share hidden, 1 − Σ not hidden / Σ in flight (naive and flat communicate "
    "after backward by design: 0; a strategy with a single bucket hides none either).",
    "timeline": "One ordinary step of rank 0 (its median step): the phases on the first row of each strategy, "
    "then each bucket's all-reduce from launch to completion. A bucket that overlaps the orange backward is "
    "hidden; one that starts after it is exposed. A tick marks when a bucket was ready, where it had to wait "
    "for an earlier bucket (buckets launch in order).",
    "memory": "Bars side by side are the ranks of one configuration: a taller rank 0 is a rank-0 skew. "
    "Panels without data were not measurable on this machine (null, never 0).",
    "frontier": "Lower-left is better; both axes start at zero, so small differences look small. Compare points "
    "of one colour (one world size).",
    "held": "Sizes of the tensors each rank holds after its last step: a sharded strategy's bars shrink with "
    "the world size where a replicated one's stay put. Buffers (DDP buckets, FSDP gathers) are not included.",
    "memory_cpu": "On the CPU only the process's peak RSS is measured (GPU panels are absent, not zero); "
    "bars side by side are the ranks of one configuration, so a rank-0 skew shows.",
    "distribution": "Narrow boxes are steady: quartiles of the measured slowest-rank step times, whiskers "
    "min–max; drawn from precomputed quartiles, not raw points.",
    "series": "Look for a flat line after the hollow circles (warm-up steps, not counted): a slope is drift. "
    f"Series with more than {aggregate.MAX_SERIES_POINTS} measured steps show the median of each bin.",
    "noise": f"Red bars (cv above {stats.NOISY_CV:g}, dashed) are noisy: their medians differ by chance more "
    "than usual; rerun them with more steps before trusting small differences.",
}


def options_text(impl_options: Any) -> str:
    """'bucket_cap_mb=25 static_graph=True', not the raw JSON the table stores."""
    return options_words(impl_options)


def config_cell(column: str, value: Any, digits: int | None) -> str:
    missing = value is None or (isinstance(value, float) and pd.isna(value))
    if column == "parity_ok":
        return {True: "ok", False: "<b>FAILED</b>"}.get(None if missing else bool(value), "not judged")
    if column == "parity_max_abs_diff" and not missing:
        return f"{value:.2e}"
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
        said = takeaways.fastest(run.configs, workload=workload, confidence=answer.run_confidence(run.meta))
        parts.append(takeaway(workload, said))
        parts.append(figs.add(figures.step_time_by_strategy(run.configs, workload=workload), CAPTIONS["step_time"]))
        parts.append(figs.add(figures.throughput_by_strategy(run.configs, workload=workload), CAPTIONS["throughput"]))
    return "\n".join(parts)


def scaling_section(run: RunData, workloads: list[str], figs: FigureList) -> str:
    parts = ["<h2 id=scaling>2. How does it scale?</h2>"]
    if len(world_sizes(run.configs)) < 2:
        return parts[0] + "<p>This run has one world size only: nothing to scale.</p>"
    for workload in workloads:
        parts.append(takeaway(workload, takeaways.scaling(run.configs, workload=workload)))
        parts.append(figs.add(figures.scaling(run.configs, workload=workload), CAPTIONS["scaling"]))
    return "\n".join(parts)


def bucket_section(run: RunData, workloads: list[str], figs: FigureList) -> str:
    parts = ["<h2 id=buckets>3. Which bucket cap?</h2>"]
    for workload in workloads:
        best = aggregate.best_caps(run.configs, workload=workload)
        for strategy, _ in best.groupby("strategy", sort=False):
            stars = recommended_caps(run.recommendations, workload=workload, strategy=strategy)
            figure = figures.bucket_cap_sweep(run.configs, workload=workload, strategy=strategy, recommended=stars)
            parts.append(figs.add(figure, CAPTIONS["sweep"]))
    if not run.recommendations.empty:
        parts.append(recommendation_table(run.recommendations))
    if len(parts) == 1:
        parts.append(
            "<p>This run does not sweep <code>bucket_cap_mb</code>; <code>make sweep</code> does "
            "(<code>--bucket-cap-mb 1,5,10,25,50,100</code>).</p>"
        )
    return "\n".join(parts)


def recommended_caps(frame: pd.DataFrame, *, workload: str, strategy: str) -> dict[int, tuple[float, float]]:
    """World size → (the cap the sweep's verdict recommends for `strategy`, its best_step_ms), only where
    it recommends one."""
    if frame.empty or "decision" not in frame:
        return {}
    chosen = frame[(frame["workload"] == workload) & (frame["decision"] == "recommend")]
    return {
        int(r.world_size): (float(r.best_cap_mb), float(r.best_step_ms))
        for r in chosen.itertuples()
        if aggregate.strategy_label(r.impl, r.other_options) == strategy
    }


def recommendation_table(frame: pd.DataFrame) -> str:
    """The sweep's verdict (harness.analysis.sweep.answer): the cap to use, 'flat: any of …' or too few
    repeats; the fastest cap, how sure, how much longer the 25 MiB cap takes (sweep.versus_reference), and
    the noise behind it."""
    rows = []
    for r in frame.itertuples():
        row = pd.Series(r._asdict())
        interval = "" if pd.isna(r.best_ci_low_ms) else f"{r.best_ci_low_ms:.2f}–{r.best_ci_high_ms:.2f}"
        answer, gain = sweep.answer(row), sweep.versus_reference(row)
        rows.append([
            esc(r.workload), esc(r.impl), esc(aggregate.world_label(int(r.world_size))),
            f"<b>{esc(answer)}</b>" if r.decision == "recommend" else esc(answer),
            f"{r.best_cap_mb:g}", f"{r.best_step_ms:.2f}", interval, gain, esc(r.repeats), esc(r.noise or ""),
        ])  # fmt: skip
    head = ["workload", "strategy", "world size", "answer", "fastest cap (MiB)", "its ms", "95% CI",
            f"the {stats.REFERENCE_CAP_MB:g} MiB cap", "repeats", "noise"]  # fmt: skip
    return (
        "<h3>Recommended bucket_cap_mb</h3><p>Each repeat's median step is one piece of evidence. A cap is "
        f"recommended only when it {BEATS_REFERENCE} (Welch's t over repeats, as <code>compare</code> judges; from "
        f"{stats.PAIRED_FROM} repeats on, caps that ran side by side in each launch are judged launch by launch) "
        f"{OR_REFERENCE_ITSELF}; "
        "otherwise the optimum is flat, or the repeats are too few to tell. The 25 MiB cap is given explicitly, "
        "as every cap of a sweep (since torch 2.9 that caps the first bucket too): it is not DDP's default layout "
        "(no options: first bucket 1 MiB). No recommendation at world size 1 (nothing is communicated).</p>"
        + table(head, rows)
    )


def time_section(run: RunData, workloads: list[str], figs: FigureList) -> str:
    parts = ["<h2 id=time>4. Where does the time go?</h2>"]
    for workload in workloads:
        parts.append(takeaway(workload, takeaways.communication(run.configs, workload=workload)))
        parts.append(
            figs.add(stepfigures.time_breakdown(run.configs, run.phases, workload=workload), CAPTIONS["breakdown"])
        )
        parts.extend(why_slower(run, workload, figs))
        exposed = stepfigures.exposed_communication(run.configs, workload=workload)
        if exposed is not None:
            parts.append(figs.add(exposed, CAPTIONS["exposed"]))
        parts.extend(timeline_figures(run, workload, figs))
    return "\n".join(parts)


def why_slower(run: RunData, workload: str, figs: FigureList) -> list[str]:
    """The gap over local taken apart, as a figure and a sentence per configuration (harness.analysis.why)."""
    figure = gapfigures.gap_breakdown(run.configs, workload=workload)
    if figure is None:
        return []
    rows = why.typical_repeats(run.configs[run.configs["workload"] == workload])  # one per configuration
    cores = (run.meta.get("environment") or {}).get("cpu_count")
    same = run.configs[run.configs["workload"] == workload]
    said = [line for _, row in rows.sort_values("config_id").iterrows() for line in why.lines(row, same, cores=cores)]
    items = "".join(f"<li>{esc(line)}</li>" for line in said)
    return [figs.add(figure, CAPTIONS["gap"]), f"<ul class=why>{items}</ul>" if items else ""]


def timeline_figures(run: RunData, workload: str, figs: FigureList) -> list[str]:
    """The bucket timeline at the largest world size that timed collectives (where they matter most)."""
    if run.timeline.empty:
        return []
    timed = run.configs[
        run.configs["config_id"].isin(run.timeline["config_id"]) & (run.configs["workload"] == workload)
    ]
    if timed.empty:
        return []
    figure = timelinefigures.bucket_timeline(
        run.configs, run.timeline, workload=workload, world_size=int(timed["world_size"].max())
    )
    return [figs.add(figure, CAPTIONS["timeline"])] if figure is not None else []


def takeaway(workload: str, sentence: str) -> str:
    """The section's one-sentence answer for `workload`, computed from the run ("" when there is none)."""
    return f"<p class=takeaway><b>{name_html(workload)}:</b> {esc(sentence)}</p>" if sentence else ""


def frontier_caption(configs: pd.DataFrame) -> str:
    """The caption names only the sharded strategies (they trade communication for memory) this run measured."""
    ok = configs[configs["status"] == "ok"]
    ran = sorted(set(ok.loc[roles.shards_state(ok), "impl"]))
    if not ran:
        return CAPTIONS["frontier"]
    return CAPTIONS["frontier"] + f" The sharded strategies ({', '.join(ran)}) trade communication for memory."


def memory_section(run: RunData, workloads: list[str], figs: FigureList) -> str:
    parts = ["<h2 id=memory>5. What does it cost in memory?</h2>"]
    caption = CAPTIONS["memory_cpu" if run.meta.get("device") == "cpu" else "memory"]
    for workload in workloads:
        parts.append(takeaway(workload, takeaways.memory(run.configs, workload=workload)))
        parts.append(figs.add(figures.memory_by_rank(run.configs, run.ranks, workload=workload), caption))
        parts.append(figs.add(figures.memory_vs_time(run.configs, workload=workload), frontier_caption(run.configs)))
        if "held_param_mb" in run.ranks and run.ranks["held_param_mb"].notna().any():
            parts.append(figs.add(figures.held_by_rank(run.configs, run.ranks, workload=workload), CAPTIONS["held"]))
    return "\n".join(parts)


def parity_table(configs: pd.DataFrame) -> str:
    ok = aggregate.labelled(configs)
    rows = [
        [
            esc(r.config_label),
            config_cell("parity_ok", r.parity_ok, None),
            config_cell("parity_max_abs_diff", r.parity_max_abs_diff, None),
            esc(r.parity_note),
        ]
        for r in ok.itertuples()
    ]
    classes = ["failed" if r.parity_ok is False else "" for r in ok.itertuples()]
    return table(["configuration", "parity", "max |Δ| vs reference", "note"], rows, row_classes=classes)


def trust_section(run: RunData, workloads: list[str], figs: FigureList) -> str:
    parts = ["<h2 id=trust>6. Is every number trustworthy?</h2>"]
    for workload in workloads:
        parts.append(
            figs.add(
                stepfigures.step_time_distribution(run.configs, run.boxes, workload=workload), CAPTIONS["distribution"]
            )
        )
        parts.append(
            figs.add(stepfigures.step_time_series(run.configs, run.series, workload=workload), CAPTIONS["series"])
        )
        parts.append(figs.add(stepfigures.noise(run.configs, workload=workload), CAPTIONS["noise"]))
    parts.append("<h3>Gradient parity</h3>" + parity_table(run.configs))
    parts.append(decisions.decisions_section(run.decisions, run.meta.get("config") or {}))
    return "\n".join(parts)


def model_section(run: RunData, workloads: list[str], figs: FigureList) -> str:
    """How far each strategy is from the physical limit, and whether the step-time model agrees with the sweeps."""
    parts = ["<h2 id=model>4b. How far from the floor, and does the model agree?</h2>"]
    if run.floor.empty and run.predictions.empty:
        parts.append(
            "<p>No network measurement for this run: <code>ddpbench collectives</code> on the same machine, into "
            "the same results folder (or <code>--busbw</code> to <code>ddpbench predict</code>), then "
            "<code>ddpbench report</code>, adds the communication floor and the predicted bucket-cap curves.</p>"
        )
        return "\n".join(parts)
    for workload in workloads:
        if not run.floor.empty:
            parts.append(floor_figure(run, workload, figs))
        for world in sorted(run.predictions.loc[run.predictions["workload"] == workload, "world_size"].unique()):
            figure = netfigures.predicted_vs_measured(run.predictions, workload=workload, world_size=int(world))
            parts.append(figs.add(figure, CAPTIONS["model"]))
    if not run.predictions.empty:
        parts.append(prediction_error_table(run.predictions, run.recommendations))
    return "\n".join(parts)


def floor_figure(run: RunData, workload: str, figs: FigureList) -> str:
    """The step-against-floor figure, its caption naming the configurations it leaves out (no floor row);
    a sentence instead where none of the workload's configurations has a floor."""
    absent = netfigures.without_floor(run.configs, run.floor, workload=workload)
    left_out = f" Not shown here, having no floor: {', '.join(absent)}." if absent else ""
    if netfigures.with_floor(run.configs, run.floor, workload=workload).empty:
        return takeaway(workload, "no configuration has a communication floor." + left_out)
    return figs.add(netfigures.step_vs_floor(run.configs, run.floor, workload=workload), CAPTIONS["floor"] + left_out)


# The model's variants (as harness.perfmodel.predict.VARIANTS; reports read results, never the model's code).
MODEL_VARIANTS = (
    ("predicted_raw_ms", "raw profile"),
    ("predicted_raw_contention_ms", "raw profile, with measured contention"),
    ("predicted_ms", "calibrated on the run's one-rank steps"),
    ("predicted_contention_ms", "calibrated, with measured contention"),
)


def describe_error(error: dict) -> str:
    """'MAPE 4.0%; best cap 5 or 25 MiB (tied) vs measured 25 MiB (0 grid step(s) apart)': every cap the
    prediction (and the measurement) cannot tell from its fastest (agreement.tied_best), and the grid steps
    between the two sets at their closest."""
    return (
        f"MAPE {error['mape']:.1%}; best cap {agreement.caps_text(error['best_predicted_caps_mb'])} vs measured "
        f"{agreement.caps_text(error['best_measured_caps_mb'])} ({error['best_cap_grid_steps']} grid step(s) apart)"
    )


def among_as_good(error: dict, as_good: list[float] | None) -> str:
    """Whether the prediction's best (any of its tied caps) is a cap the sweep's best does not beat."""
    if as_good is None:
        return ""
    picked = error["best_predicted_caps_mb"]
    inside = [cap for cap in picked if cap in as_good]
    if not inside:
        return "; not among the measured 'as good' caps"
    if len(inside) == len(picked):
        return "; among the measured 'as good' caps"
    return f"; {agreement.caps_text(inside).removesuffix(' (tied)')} among the measured 'as good' caps"


def prediction_error_table(predictions: pd.DataFrame, recommendations: pd.DataFrame | None = None) -> str:
    """Per sweep: each model variant's error, its best caps (ties included) against the measured ones, and
    whether they are among the caps the sweep's best does not beat (a flat optimum: equivalent_caps_mb)."""
    rows = []
    for (workload, size, world), group in predictions.groupby(["workload", "size", "world_size"]):
        cells = [esc(workload), esc(size), esc(aggregate.world_label(int(world))), esc(group["network"].iloc[0])]
        as_good = sweep.as_good_caps(recommendations if recommendations is not None else pd.DataFrame(),
                                     workload=workload, size=size, world=int(world))  # fmt: skip
        for column, _ in MODEL_VARIANTS:
            if column in group and group[column].notna().all() and len(group) > 1:
                error = agreement.prediction_error(group["bucket_cap_mb"], group["measured_ms"], group[column])
                cells.append(esc(describe_error(error) + among_as_good(error, as_good)))
            else:
                cells.append("not available")
        rows.append(cells)
    head = ["workload", "size", "world size", "network", *(f"model: {label}" for _, label in MODEL_VARIANTS)]
    return (
        "<h3>Model error</h3><p>Target: MAPE ≤ 10 % and the best cap within one grid step. 'As good' caps are those "
        f"of the sweep {NOT_BEATEN} (Welch's t over repeats). Several best caps are a tie: each within "
        f"{agreement.TIE_TOLERANCE:.1%} of the fastest.</p>" + table(head, rows)
    )

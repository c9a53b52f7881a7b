"""The run page's section 4b: each configuration's step against its communication floor (the collectives run's
network, or --busbw), and the step-time model against the run's bucket-cap sweeps, its curves and their errors."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.analysis import agreement, roles, stats
from harness.analysis.verdicts import sweep
from harness.perfmodel.network import collectives_command
from harness.results.invocation import report_command
from harness.results.values import counted
from reports import aggregate
from reports.aggregate import RunData
from reports.figures import network as netfigures
from reports.figures.captions import CAPTIONS, FLOOR_REPEATS, NOT_BEATEN
from reports.pages.html import FigureList, esc, table
from reports.pages.notes import floor
from reports.pages.run.run_sections import one_repeat_each, takeaway


def model_section(run: RunData, workloads: list[str], figs: FigureList) -> str:
    """How far each strategy is from the physical limit, and whether the step-time model agrees with the sweeps."""
    parts = ["<h2 id=model>4b. How far from the floor, and does the model agree?</h2>"]
    if run.floor.empty and run.predictions.empty:
        parts.append(no_network(run))
        return "\n".join(parts)
    if note := fewer_nodes_note(run):
        parts.append(note)
    for workload in workloads:
        if not run.floor.empty:
            parts.append(floor_figure(run, workload, figs))
        for world in sorted(run.predictions.loc[run.predictions["workload"] == workload, "world_size"].unique()):
            figure = netfigures.predicted_vs_measured(run.predictions, workload=workload, world_size=int(world))
            parts.append(figs.add(figure, CAPTIONS["model"]))
    if not run.predictions.empty:
        parts.append(prediction_error_table(run.predictions, run.recommendations))
    elif not swept_reference(run, workloads) and (checked := shipped_check(run)):
        parts.append(checked)
    elif not swept_reference(run, workloads):  # the floor alone: why the heading's second question has no answer
        reference = roles.reference_name()
        parts.append(
            f"<p>Nothing to check the model against: it predicts {reference}'s step at each "
            "<code>bucket_cap_mb</code>, and this run swept none (<code>make sweep</code>: "
            f"<code>--bucket-cap-mb 1,5,10,25,50,100</code>, {reference} among the <code>--impls</code>).</p>"
        )
    return "\n".join(parts)


def shipped_check(run: RunData) -> str:
    """The check `predict --run RUN` says of a run without a cap sweep: the model held against the reference's steps
    as shipped (its 1 MiB first bucket, then 25 MiB) at each world size ≥ 2, the same figures; "" where it has none."""
    from harness.perfmodel import predict
    from harness.perfmodel.network import network_for_run
    from harness.results import model_tables

    folder = Path(run.run_path) if run.run_path else None
    network = network_for_run(folder.parent, folder) if folder is not None and folder.is_dir() else None
    if network is None or not network.links:
        return ""
    rows = predict.sweep_predictions(run.configs, model_tables.read_gradprofiles(folder), network, shipped=True,
                                     cores=predict.run_cores(folder))  # fmt: skip
    items = "".join(f"<li>w{r['world_size']} {esc(r['workload'])}/{esc(r['size'])}: forecast "
                    f"{predict.forecast_ms(r):.2f} ms, measured {r['measured_ms']:.2f} ms, error "
                    f"{predict.forecast_ms(r) / r['measured_ms'] - 1:+.1%}</li>" for r in rows)  # fmt: skip
    run_id = esc(run.meta.get("run_id", folder.name))
    return (f"<p>This run swept no <code>bucket_cap_mb</code>: the model is checked, as <code>ddpbench predict "
            f"--run {run_id}</code> checks it, against {esc(roles.reference_name())}'s step as shipped (its 1 MiB "
            "first bucket, then 25 MiB), calibrated on the run's one-rank steps:</p>"
            f"<ul>{items}</ul><p>A later run's steps: <code>ddpbench predict --run {run_id} --against "
            "LATER_RUN</code>.</p>") if rows else ""  # fmt: skip


def fewer_nodes_note(run: RunData) -> str:
    """Where the floor and the curves of a run across nodes are priced on a network measured on fewer nodes, that in
    one line (`network.fewer_nodes`, as `predict --run` warns it); '' else."""
    from harness.perfmodel.network import network_for_run

    folder = Path(run.run_path) if run.run_path else None
    network = network_for_run(folder.parent, folder) if folder is not None and folder.is_dir() else None
    if network is None or not network.fewer_nodes:
        return ""
    return f"<p class=note>Priced on fewer nodes: {esc(network.fewer_nodes)}.</p>"


def swept_reference(run: RunData, workloads: list[str]) -> bool:
    """Whether the run swept the reference strategy's cap (the sweeps the model's predictions are checked on)."""
    rows = [aggregate.sweep_rows(run.configs, workload=workload) for workload in workloads]
    return any(roles.is_reference(frame).any() for frame in rows if not frame.empty)


def no_network(run: RunData) -> str:
    """What adds the floor and the model's curves to a run measured without a network: the collectives run that
    measures its machine into its results folder, then the report that rebuilds this site, each as it runs."""
    collectives = collectives_command(Path(run.run_path)) if run.run_path else "ddpbench collectives"
    report = report_command(run.meta.get("results_folder"), run.meta.get("site_folder"))
    return (
        f"<p>No network measurement for this run: <code>{esc(collectives)}</code> on the same machine, into "
        "the same results folder (or <code>--busbw</code> to <code>ddpbench predict</code>), then "
        f"<code>{esc(report)}</code>, adds the communication floor and the predicted bucket-cap curves.</p>"
    )


def floor_figure(run: RunData, workload: str, figs: FigureList) -> str:
    """The step-against-floor figure, its caption naming the configurations it leaves out (no floor row);
    a sentence instead where none of the workload's configurations has a floor."""
    shown, note = one_repeat_each(run.configs)
    absent = netfigures.without_floor(shown, run.floor, workload=workload)
    left_out = f" Not shown here, having no floor: {', '.join(absent)}." if absent else ""
    # With repeats each bar pools them as the tick's local step does (not the median repeat, the lower of two).
    pooled = aggregate.geometric_over_repeats(shown, run.configs) if note else shown
    drawn = netfigures.with_floor(pooled, run.floor, workload=workload)
    if drawn.empty:
        return takeaway(workload, "no configuration has a communication floor." + left_out)
    figure = netfigures.step_vs_floor(pooled, run.floor, workload=workload, pooled=bool(note))
    # Where a drawn bar is below its tick, the page says so beside the figure, with the floor's own spread.
    below = floor.figure_below_floor(drawn, run.configs[run.configs["workload"] == workload])
    return figs.add(figure, CAPTIONS["floor"] + (FLOOR_REPEATS if note else "") + left_out) + below


# The model's variants (as harness.perfmodel.predict.VARIANTS; reports read results, never the model's code).
MODEL_VARIANTS = (
    ("predicted_raw_ms", "raw profile"),
    ("predicted_raw_contention_ms", "raw profile, with measured contention"),
    ("predicted_ms", "calibrated on the run's one-rank steps"),
    ("predicted_contention_ms", "calibrated, with measured contention"),
)


def describe_error(error: dict) -> str:
    """'MAPE 4.0%; best cap 5 or 25 MiB (tied) vs measured 25 MiB (0 grid steps apart)': every cap the
    prediction (and the measurement) cannot tell from its fastest (agreement.tied_best), and the grid steps
    between the two sets at their closest."""
    missed = f" (over the {agreement.TARGET_MAPE:.0%} target)" if error["mape"] > agreement.TARGET_MAPE else ""
    return (
        f"MAPE {error['mape']:.1%}{missed}; best cap {agreement.caps_text(error['best_predicted_caps_mb'])} vs "
        f"measured {agreement.caps_text(error['best_measured_caps_mb'])} "
        f"({counted(error['best_cap_grid_steps'], 'grid step')} apart)"
    )


def among_as_good(error: dict, as_good: list[float] | None, caps=()) -> str:
    """Whether the prediction's best (any of its tied caps) is a cap the sweep's best does not beat; where that is
    every cap of the sweep (`caps`), that the check says nothing."""
    if as_good is None:
        return ""
    if caps is not None and len(caps) and agreement.tells_no_cap_apart(caps, as_good):
        return "; the sweep calls every cap as good: no check of the best cap"
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
                cells.append(esc(describe_error(error) + among_as_good(error, as_good, group["bucket_cap_mb"])))
            else:
                cells.append("not available")
        rows.append(cells)
    head = ["workload", "size", "world size", "network", *(f"model: {label}" for _, label in MODEL_VARIANTS)]
    return (
        f"<h3>Model error</h3><p>Target: MAPE ≤ {agreement.TARGET_MAPE:.0%} and the best cap within one grid step. "
        f"'As good' caps are those of the sweep {NOT_BEATEN} (judged as the cap table above judges them: Welch's t "
        f"over repeats, launch by launch from {stats.PAIRED_FROM} repeats that ran side by side). Several best caps "
        f"are a tie: each within {agreement.TIE_TOLERANCE:.1%} of the fastest.</p>" + table(head, rows)
    )

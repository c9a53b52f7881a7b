"""Each figure measures what its title and caption say: the sweep pools repeats, the breakdown adds up
to the step it splits, communication says it is a mean, a missing completion is drawn as it is counted."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sp

from harness.results.values import ms_text
from reports import aggregate, step_series
from reports.figures import captions
from reports.figures import steps as stepfigures
from reports.figures import strategies as figures
from reports.figures import timeline as timelinefigures


def sweep_run() -> pd.DataFrame:
    """stock at caps 1 and 25, two repeats each, at two world sizes."""
    rows = []
    medians = {(1, 1.0): [4.0, 6.0], (1, 25.0): [3.0, 3.3], (2, 1.0): [8.0, 9.0], (2, 25.0): [10.0, 12.0]}
    for (world, cap), values in medians.items():
        for r, ms in enumerate(values):
            rows.append({"config_id": f"w{world}-c{cap:g}-r{r}", "status": "ok", "impl": "stock", "workload": "mlp",
                         "impl_options": json.dumps({"bucket_cap_mb": cap}), "bucket_cap_mb": cap, "repeat": r,
                         "world_size": world, "step_ms_median": ms})  # fmt: skip
    return aggregate.with_labels(pd.DataFrame(rows))


def geometric_interval(values: list[float]) -> tuple[float, float, float]:
    logs = np.log(values)
    half = sp.t.ppf(0.975, len(values) - 1) * logs.std(ddof=1) / np.sqrt(len(values))
    return float(np.exp(logs.mean())), float(np.exp(logs.mean() - half)), float(np.exp(logs.mean() + half))


def test_the_sweep_draws_one_pooled_point_per_cap_with_its_interval_and_the_star_at_the_verdicts_figure():
    figure = figures.bucket_cap_sweep(sweep_run(), workload="mlp", strategy="stock", recommended={2: (1.0, 8.47)})
    lines = {trace.name: trace for trace in figure.data}
    assert list(lines["1 rank"].x) == [1.0, 25.0]  # one point per cap, not one per repeat
    centre, low, high = geometric_interval([8.0, 9.0])
    assert lines["2 ranks"].y[0] == pytest.approx(centre)
    assert lines["2 ranks"].error_y.arrayminus[0] == pytest.approx(centre - low)
    assert lines["2 ranks"].error_y.array[0] == pytest.approx(high - centre)
    star = lines["recommended cap"]
    assert list(star.x) == [1.0] and list(star.y) == [8.47]  # the recommendation's best_step_ms, not a repeat's
    assert "whiskers 95% interval" in figure.layout.title.text and "p10" not in figure.layout.title.text
    best = aggregate.best_caps(sweep_run(), workload="mlp")
    assert best[["world_size", "bucket_cap_mb"]].values.tolist() == [[1, 25.0], [2, 1.0]]


def test_the_breakdown_bar_adds_up_to_the_slowest_ranks_mean_step():
    steps = pd.DataFrame({
        "config_id": ["c"] * 6, "rank": [0, 0, 0, 1, 1, 1], "step": [0, 1, 2, 0, 1, 2],
        "warmup": [True, False, False, True, False, False],
        "forward_ms": [9.0, 1.0, 1.0, 9.0, 1.5, 2.5], "backward_ms": [9.0, 2.0, 2.0, 9.0, 3.0, 3.0],
        "sync_ms": [9.0, 1.0, 1.0, 9.0, 2.0, 4.0], "optimizer_ms": [9.0, 0.5, 0.5, 9.0, 0.5, 0.5],
        "exposed_comm_ms": [9.0, 0.5, 0.5, 9.0, 1.0, 3.0], "exposed_backward_ms": [0.0] * 6,
    })  # fmt: skip
    steps["step_ms"] = steps[["forward_ms", "backward_ms", "sync_ms", "optimizer_ms"]].sum(axis=1)
    phases = step_series.phase_means(steps).set_index("config_id")
    assert phases.loc["c", "rank"] == 1  # mean step (7 + 10) / 2 = 8.5 ms against rank 0's 4.5 ms
    assert phases.loc["c", "step_ms"] == pytest.approx(8.5)
    assert phases.loc["c", list(step_series.SEGMENTS)].sum() == pytest.approx(8.5)  # the bar is that step
    assert phases.loc["c", "exposed_comm_ms"] == pytest.approx(2.0)
    assert phases.loc["c", "sync_ms"] == pytest.approx(1.0)  # (2 − 1 + 4 − 3) / 2: sync less its exposed part
    assert "mean step on its slowest rank" in captions.CAPTIONS["breakdown"]
    assert "add up to that mean step" in captions.CAPTIONS["breakdown"]
    assert "median step split" not in captions.CAPTIONS["breakdown"]


def test_a_broadcast_exposed_in_forward_or_the_optimizer_step_comes_out_of_that_phase():
    """ZeRO's parameter broadcast lies in its optimizer step and a buffer broadcast in forward: taken out of sync,
    then forward, they once drew zero's forward at −21 ms with the broadcast still inside the optimizer's bar."""
    steps = pd.DataFrame({
        "config_id": ["z", "b"], "rank": [0, 0], "step": [0, 0], "warmup": [False, False],
        "forward_ms": [10.0, 10.0], "backward_ms": [20.0, 20.0], "sync_ms": [0.0, 6.0], "optimizer_ms": [30.0, 1.0],
        "exposed_comm_ms": [31.0, 9.0], "exposed_backward_ms": [0.0, 0.0], "exposed_forward_ms": [3.0, 4.0],
        "exposed_optimizer_ms": [28.0, 0.0],
    })  # fmt: skip
    steps["step_ms"] = steps[["forward_ms", "backward_ms", "sync_ms", "optimizer_ms"]].sum(axis=1)
    phases = step_series.phase_means(steps).set_index("config_id")
    zero, bucketed = phases.loc["z"], phases.loc["b"]
    assert (zero["forward_ms"], zero["optimizer_ms"], zero["sync_ms"]) == (7.0, 2.0, 0.0)
    assert (bucketed["forward_ms"], bucketed["sync_ms"], bucketed["optimizer_ms"]) == (6.0, 1.0, 1.0)
    for row in (zero, bucketed):
        assert (
            row[list(step_series.SEGMENTS)].sum() == pytest.approx(row["step_ms"])
            and (row[list(step_series.SEGMENTS)] >= 0).all()
        )


def test_exposed_communication_sync_cannot_hold_comes_out_of_forward_and_untimed_stacks_as_zero():
    """FSDP's all-gathers wait in forward: more exposed outside backward than sync holds once drew a negative
    'sync (rest)' (−35.6 ms, a bar 33 ms too tall); and a null segment (stock, not timed) broke plotly's stack."""
    steps = pd.DataFrame({
        "config_id": ["f", "f", "s", "s"], "rank": [0, 0, 0, 0], "step": [0, 1, 0, 1], "warmup": [False] * 4,
        "forward_ms": [10.0, 10.0, 3.0, 3.0], "backward_ms": [20.0, 20.0, 5.0, 5.0], "sync_ms": [1.0, 1.0, 2.0, 2.0],
        "optimizer_ms": [2.0, 2.0, 1.0, 1.0], "exposed_comm_ms": [7.0, 7.0, np.nan, np.nan],
        "exposed_backward_ms": [2.0, 2.0, np.nan, np.nan],
    })  # fmt: skip
    steps["step_ms"] = steps[["forward_ms", "backward_ms", "sync_ms", "optimizer_ms"]].sum(axis=1)
    phases = step_series.phase_means(steps).set_index("config_id")
    fsdp = phases.loc["f"]
    assert (fsdp["sync_ms"], fsdp["forward_ms"], fsdp["backward_ms"]) == (0.0, 6.0, 18.0)  # 5 outside backward
    assert (
        fsdp[list(step_series.SEGMENTS)].sum() == pytest.approx(33.0) and (fsdp[list(step_series.SEGMENTS)] >= 0).all()
    )
    configs = aggregate.with_labels(pd.DataFrame([
        {"config_id": c, "status": "ok", "impl": impl, "impl_options": "{}", "workload": "mlp", "world_size": 2}
        for c, impl in (("f", "fsdp"), ("s", "stock"))]))  # fmt: skip
    figure = stepfigures.time_breakdown(configs, phases.reset_index(), workload="mlp")
    exposed = next(trace for trace in figure.data if trace.name == "communication not hidden")
    assert list(exposed.y) == [5.0 + 2.0, 0.0] and "not timed" in exposed.customdata[1]  # stock: a zero, said so
    heights = [sum(trace.y[i] for trace in figure.data) for i in range(2)]
    assert heights == pytest.approx([33.0, 11.0])  # every bar as tall as its mean step


def test_communication_figures_say_they_are_means_per_step():
    configs = aggregate.with_labels(pd.DataFrame([{
        "config_id": "c", "status": "ok", "impl": "bucketed", "impl_options": "{}", "workload": "mlp",
        "world_size": 2, "comm_ms": 8.6, "exposed_comm_ms": 2.0, "overlap_efficiency": 0.77, "step_ms_median": 3.87,
    }]))  # fmt: skip
    figure = stepfigures.exposed_communication(configs, workload="mlp")
    assert figure.layout.annotations[0].text.startswith("mean per step (ms)")
    assert list(figure.data[2].text) == ["77%"]  # the share written on its bar
    none_hidden = stepfigures.exposed_communication(configs.assign(overlap_efficiency=0.0), workload="mlp")
    assert list(none_hidden.data[2].text) == ["0%"]  # a bar of no height still says its figure: no empty panel
    assert "(mean per step)" in figure.data[0].hovertemplate and "(mean per step)" in figure.data[1].hovertemplate
    phases = pd.DataFrame([{"config_id": "c", "rank": 0, "step_ms": 4.0, "forward_ms": 1.0, "backward_ms": 1.0,
                            "exposed_comm_ms": 1.0, "sync_ms": 0.5, "optimizer_ms": 0.5}])  # fmt: skip
    breakdown = stepfigures.time_breakdown(configs, phases, workload="mlp")
    assert all("mean per step" in trace.hovertemplate for trace in breakdown.data)
    assert "median" not in breakdown.layout.title.text
    assert "mean per step" in captions.CAPTIONS["exposed"]


def test_a_collective_without_a_completion_is_drawn_to_the_end_of_sync_and_says_so():
    configs = aggregate.with_labels(pd.DataFrame([{
        "config_id": "c", "status": "ok", "impl": "bucketed", "impl_options": "{}", "workload": "mlp",
        "world_size": 2, "step_ms_median": 10.0,
    }]))  # fmt: skip
    timeline = pd.DataFrame([
        {"config_id": "c", "rank": 0, "step": 3, "bucket": 0, "bytes": 1024, "ready_ms": 2.0, "launched_ms": 2.0,
         "done_ms": 4.0, "forward_ms": 1.0, "backward_ms": 4.0, "sync_ms": 3.0, "optimizer_ms": 1.0},
        {"config_id": "c", "rank": 0, "step": 3, "bucket": 1, "bytes": 1024, "ready_ms": 4.5, "launched_ms": 4.5,
         "done_ms": np.nan, "forward_ms": 1.0, "backward_ms": 4.0, "sync_ms": 3.0, "optimizer_ms": 1.0},
    ])  # fmt: skip
    figure = timelinefigures.bucket_timeline(configs, timeline, workload="mlp", world_size=2)
    [bars] = [trace for trace in figure.data if trace.name == "collective in flight"]
    assert list(zip(bars.base, bars.x, strict=True)) == [(2.0, 2.0), (4.5, 3.5)]  # ends at 1 + 4 + 3 = 8 ms
    assert [row[3] for row in bars.customdata] == ["done 4.00 ms", "done: not stamped (counted until the end of sync)"]
    assert list(bars.marker.pattern.shape) == ["", "/"] and "%{customdata[3]}" in bars.hovertemplate
    # in flight from launch, not %{x}: a based bar's x in its hover is where it ends
    assert [row[5] for row in bars.customdata] == [2.0, 3.5]
    assert "in flight %{customdata[5]:.2f} ms" in bars.hovertemplate


def test_the_model_chart_says_its_measured_line_is_stocks_geometric_mean_of_repeats():
    from reports.figures import network as netfigures

    predictions = pd.DataFrame({"workload": "mlp", "size": "tiny", "impl": "stock", "world_size": 2,
                                "bucket_cap_mb": [1.0, 25.0], "measured_ms": [124.46, 99.50],
                                "predicted_ms": [50.8, 69.7], "network": "net"})  # fmt: skip
    figure = netfigures.predicted_vs_measured(predictions, workload="mlp", world_size=2)
    measured = figure.data[0]
    assert measured.name == "measured: stock (geometric mean of repeats' medians)"
    assert "stock's measured step time (black)" in figure.layout.title.text
    assert "median step time" not in figure.layout.yaxis.title.text  # the values are not medians
    assert captions.CAPTIONS["model"].startswith("The black line is stock's measured step per cap (the geometric "
                                                 "mean of its repeats' median steps")  # fmt: skip


def test_the_sweep_axis_stays_on_its_points_and_marks_a_whisker_it_cuts():
    """r1's stock sweep: a 95 % interval of two repeats reached 1,700 ms over a 124 ms point and flattened both
    lines. The axis now ends near twice the slowest point; the cut whisker is marked and its hover has it whole."""
    wide = sweep_run().assign(step_ms_median=[101.3, 152.9, 98.2, 100.8, 43.2, 43.5, 37.4, 53.5])
    figure = figures.bucket_cap_sweep(wide, workload="mlp", strategy="stock")
    lines = {trace.name: trace for trace in figure.data}
    top = figure.layout.yaxis.range[1]
    centre, _, high = geometric_interval([101.3, 152.9])
    assert high > 1500 and top == pytest.approx(2 * centre * 1.05)  # the slowest point: w1 at cap 1, 124 ms
    assert lines["1 rank"].y[0] + lines["1 rank"].error_y.array[0] == pytest.approx(top)  # cut at the edge
    cut = lines["95% interval runs past the axis (cut)"]
    assert list(cut.x) == [1.0, 25.0] and list(cut.y) == [top, top]
    assert cut.customdata[0][2] == pytest.approx(high)  # the hover gives the interval whole
    assert cut.customdata[0][0] == "1 rank" and lines["1 rank"].customdata[0][0] == "2 repeats"  # not 'rank(s)'
    assert "%{customdata[0]}: 95% interval" in cut.hovertemplate
    assert "geometric mean of %{customdata[0]}' medians" in lines["1 rank"].hovertemplate
    assert lines["1 rank"].customdata[0][1] == (
        f"95% interval {ms_text(geometric_interval([101.3, 152.9])[1])}–{ms_text(high)} ms"
    )  # no exponent: 1702, not 1.7e+03
    once = figures.bucket_cap_sweep(wide[wide["repeat"] == 0], workload="mlp", strategy="stock")
    assert {row[1] for row in once.data[0].customdata} == {"one repeat: no interval"}  # no NaN–NaN interval
    assert "cut at its top, marked by an arrow, and given whole in the hover" in captions.CAPTIONS["sweep"]
    close = sweep_run().assign(step_ms_median=[4.0, 4.1, 3.0, 3.1, 8.0, 8.2, 10.0, 10.3])
    steady = figures.bucket_cap_sweep(close, workload="mlp", strategy="stock")
    assert not any("cut" in trace.name for trace in steady.data)  # whiskers that fit are drawn whole
    assert steady.layout.yaxis.range[1] == pytest.approx(geometric_interval([10.0, 10.3])[2] * 1.05)


def test_the_comparison_axis_ticks_read_as_ratios_not_as_log_digits():
    """Plotly's own log ticks read '3 4 5 … 9 1 2', so 0.3 looked like 3."""
    from reports.pages import compare as comparison

    frame = pd.DataFrame({"impl": ["stock", "naive"], "workload": ["mlp"] * 2, "size": ["tiny"] * 2,
                          "world_size": [2, 2], "ratio": [1.02, 0.9], "ratio_ci_low": [0.008, 0.85],
                          "ratio_ci_high": [169.5, 0.95]})  # fmt: skip
    axis = comparison.ratio_figure(frame, threshold=0.05).layout.xaxis
    assert list(axis.tickvals) == [0.25, 0.5, 0.8, 1, 1.25, 2, 4]
    assert list(axis.ticktext) == ["0.25×", "0.5×", "0.8×", "1×", "1.25×", "2×", "4×"]
    narrow = comparison.ratio_figure(frame.assign(ratio_ci_low=[0.98, 0.93], ratio_ci_high=[1.06, 0.95]),
                                     threshold=0.05).layout.xaxis  # fmt: skip
    assert list(narrow.ticktext) == ["0.9×", "0.95×", "1×", "1.05×", "1.1×"]  # finer where the range is


def test_the_what_if_step_axis_starts_at_zero_so_a_small_rise_looks_small():
    from reports.figures import whatif as whatiffigures

    rows = pd.DataFrame({"world_size": [8, 1024] * 2, "bucket_cap_mb": [1.0, 1.0, 25.0, 25.0], "nodes": [1, 128] * 2,
                         "step_ms": [46.78, 46.92, 46.78, 46.92], "exposed_comm_ms": [0.0, 0.16] * 2})  # fmt: skip
    figure = whatiffigures.step_vs_gpus(rows, cluster="dgx-h100")
    assert figure.layout.yaxis.rangemode == "tozero"
    assert figure.layout.title.text == "Predicted step time on dgx-h100, per bucket cap (lower is better)"
    smaller = whatiffigures.step_vs_gpus(rows, cluster="dgx-h100", profiled="the tiny size's").layout.title.text
    assert smaller == "Predicted step on dgx-h100 per bucket cap, the tiny size's gradients (not the model to train's)"


def test_a_step_of_many_collectives_is_one_row_each_at_its_own_time():
    """naive's one all-reduce per parameter (148 for gpt2) made one row each: a figure thousands of pixels tall."""
    many = timelinefigures.MAX_BUCKET_ROWS + 1
    configs = aggregate.with_labels(pd.DataFrame([{
        "config_id": "c", "status": "ok", "impl": "naive", "impl_options": "{}", "workload": "mlp",
        "world_size": 2, "step_ms_median": 10.0,
    }]))  # fmt: skip
    timeline = pd.DataFrame([{"config_id": "c", "rank": 0, "step": 3, "bucket": i, "bytes": 1024, "ready_ms": 5.0,
                              "launched_ms": 5.0 + i, "done_ms": 5.5 + i if i else np.nan, "forward_ms": 1.0,
                              "backward_ms": 4.0, "sync_ms": float(many), "optimizer_ms": 1.0}
                             for i in range(many)])  # fmt: skip
    figure = timelinefigures.bucket_timeline(configs, timeline, workload="mlp", world_size=2)
    assert list(figure.layout.yaxis.categoryarray) == ["naive: phases", f"naive: all {many} collectives (25 KiB)"]
    [bars] = [trace for trace in figure.data if trace.name == "collective in flight"]
    assert list(bars.base) == [5.0 + i for i in range(many)] and bars.x[1] == 0.5
    assert bars.x[0] == 1.0 + 4.0 + many - 5.0  # unstamped: drawn to the end of sync, as a bucket's row draws it
    # its hover's time in flight is the bar's length: plotly's %{x} of a based bar is where it ends (launch + length)
    assert [row[4] for row in bars.customdata] == list(bars.x) and "%{x" not in bars.hovertemplate


def test_the_scaling_chart_says_its_throughput_is_the_median_steps_not_the_bars_window():
    """A walkthrough read stock's one-rank point 0.52 beside throughput bars of 367 and 540 samples/s (0.68): the
    chart's samples/s are from the median step (as the sentence and the answer), the bars' over the measured window.
    The axis and the caption say which; each point is that figure, pooled over the repeats."""
    rows = []
    for impl, world, median_rate, window_rate in [("local", 1, [500.0, 520.0], [540.0, 540.0]),
                                                  ("stock", 1, [260.0, 265.0], [367.0, 367.0]),
                                                  ("stock", 2, [400.0, 420.0], [600.0, 610.0])]:  # fmt: skip
        for repeat, (rate, window) in enumerate(zip(median_rate, window_rate, strict=True)):
            rows.append({"config_id": f"{impl}-w{world}-r{repeat}", "status": "ok", "impl": impl, "impl_options": "{}",
                         "workload": "mlp", "size": "tiny", "batch_size": 8, "dtype": "fp32", "optimizer": "sgd",
                         "device": "cpu", "backend": "gloo", "world_size": world, "nnodes": 1, "grad_accum": 1,
                         "repeat": repeat, "samples_per_s": rate, "window_samples_per_s": window,
                         "step_ms_median": 1.0})  # fmt: skip
    configs = aggregate.with_labels(pd.DataFrame(rows))
    figure = figures.scaling(configs, workload="mlp")
    stock = next(trace for trace in figure.data if trace.name == "stock")
    geometric = lambda a, b: float(np.sqrt(a * b))  # noqa: E731
    assert stock.y[0] == pytest.approx(geometric(260.0, 265.0) / geometric(500.0, 520.0))  # 0.51, not 367/540
    assert stock.y[1] == pytest.approx(geometric(400.0, 420.0) / (2 * geometric(500.0, 520.0)))
    assert "from the median step" in figure.layout.yaxis.title.text
    assert "from the median step" in captions.CAPTIONS["scaling"] and "throughput bars" in captions.CAPTIONS["scaling"]


def test_the_timeline_draws_backwards_wait_for_its_buckets_apart_from_its_compute():
    """A team lead read gpt2 bucketed@1's bucket inside the orange backward, which the caption calls hidden, while
    the page said it hid none: its backward (13.69 ms) held 7.28 ms of waiting for that bucket (16.72–24.00 ms).
    The phases' row draws that wait in the stacked bars' red, as the step's exposed_backward_ms counts it."""
    from harness.analysis import overlap

    configs = aggregate.with_labels(pd.DataFrame([{
        "config_id": "c", "status": "ok", "impl": "bucketed", "impl_options": "{}", "workload": "gpt2",
        "world_size": 2, "step_ms_median": 24.4,
    }]))  # fmt: skip
    phases = {"forward_ms": 10.31, "backward_ms": 13.69, "sync_ms": 0.1, "optimizer_ms": 0.27}
    bucket = {"ready_ms": 16.72, "launched_ms": 16.72, "done_ms": 24.0}
    timeline = pd.DataFrame([{"config_id": "c", "rank": 0, "step": 8, "bucket": 0, "bytes": 1024, **bucket,
                              **phases}])  # fmt: skip
    figure = timelinefigures.bucket_timeline(configs, timeline, workload="gpt2", world_size=2)
    spans = {trace.name: [(b, b + x) for b, x in zip(trace.base, trace.x, strict=True)] for trace in figure.data
             if trace.y[0].endswith(": phases")}  # fmt: skip
    assert spans["backward"] == [(10.31, pytest.approx(16.72))]  # its compute, up to its last gradient
    (red,) = spans["communication not hidden"]
    assert red == (pytest.approx(16.72), pytest.approx(24.0))
    exposed = overlap.step_communication(phases, [bucket])["exposed_backward_ms"]
    assert red[1] - red[0] == pytest.approx(exposed)  # the step's own figure, drawn where it lies
    assert "a bucket over the orange backward is hidden, and one over the red is not" in captions.CAPTIONS["timeline"]


def test_the_timeline_draws_every_ranks_step_so_a_bucket_waiting_for_rank_0_shows():
    """A bucket-cap skeptic's gpt2 at 2 ranks: rank 1's bucket 0 was in flight 278 → 564 ms waiting for rank 0's
    launch, but the timeline drew rank 0 alone. It draws each rank in rank 0's median step, on its own clock; above
    MAX_RANKS_DRAWN ranks, rank 0 and the rank longest in flight, named so."""
    configs = aggregate.with_labels(pd.DataFrame([{
        "config_id": "c", "status": "ok", "impl": "stock", "impl_options": "{}", "workload": "gpt2",
        "world_size": 2, "step_ms_median": 600.0,
    }]))  # fmt: skip
    phases = {"forward_ms": 200.0, "backward_ms": 360.0, "sync_ms": 5.0, "optimizer_ms": 20.0}
    steps = pd.DataFrame([{"config_id": "c", "rank": rank, "step": step, "warmup": False, "step_ms": ms, **phases}
                          for rank in (0, 1) for step, ms in ((3, 600.0), (4, 580.0), (5, 610.0))])  # fmt: skip
    stamps = {0: (559.0, 560.0, 565.0), 1: (277.0, 278.0, 564.0)}  # rank 0 launched late: rank 1's bucket waited
    timeline = pd.DataFrame([{"config_id": "c", "rank": rank, "step": step, "bucket": 0, "bytes": 16 * 2**20,
                              "ready_ms": ready, "launched_ms": launched, "done_ms": done}
                             for rank, (ready, launched, done) in stamps.items() for step in (3, 4, 5)])  # fmt: skip
    typical = step_series.typical_step_timeline(timeline, steps)
    assert sorted(zip(typical["rank"], typical["step"], strict=True)) == [(0, 3), (1, 3)]  # rank 0's median step
    figure = timelinefigures.bucket_timeline(configs, typical, workload="gpt2", world_size=2)
    assert list(figure.layout.yaxis.categoryarray) == ["stock: phases", "stock: rank 1: phases",
                                                       "stock: bucket 0 (16 MiB)"]  # fmt: skip
    bars = {trace.name: (trace.y[0], trace.base[0], trace.base[0] + trace.x[0]) for trace in figure.data
            if trace.name.endswith("collective in flight")}  # fmt: skip
    assert bars == {
        "rank 0: collective in flight": ("stock: bucket 0 (16 MiB)", 560.0, 565.0),
        "rank 1: collective in flight": ("stock: bucket 0 (16 MiB)", 278.0, 564.0),
    }
    assert (
        "each rank's phases, then its buckets, a lane per rank in each bucket's row (each rank on its own step's clock)"
        in figure.layout.title.text
    )
    assert "rank 0's median" in figure.layout.title.text and "longest in flight" in captions.CAPTIONS["timeline"]
    many = pd.DataFrame([{"config_id": "c", "rank": rank, "bucket": 0, "launched_ms": 1.0, "done_ms": 2.0 + rank % 3}
                         for rank in range(timelinefigures.MAX_RANKS_DRAWN + 2)])  # fmt: skip
    assert timelinefigures.drawn_ranks(many) == [0, 2]  # in flight 3 ms, the longest (rank 5 ties: the first)


def test_each_ranks_bucket_is_drawn_in_a_lane_of_its_own_in_that_buckets_row():
    """A performance engineer could not tell rank 1's bucket 3 from rank 0's: every other rank's collectives were
    drawn in one row, on top of each other where several were in flight at once. Each bucket has one row, and in
    it each rank's collective a lane of its own (rank 0's on top), named by rank and bucket, none overlapping."""
    configs = aggregate.with_labels(pd.DataFrame([{
        "config_id": "c", "status": "ok", "impl": "bucketed", "impl_options": "{}", "workload": "gpt2",
        "world_size": 3, "step_ms_median": 100.0,
    }]))  # fmt: skip
    phases = {"forward_ms": 30.0, "backward_ms": 60.0, "sync_ms": 5.0, "optimizer_ms": 5.0}
    timeline = pd.DataFrame([{"config_id": "c", "rank": rank, "step": 4, "collective": "all_reduce", "bucket": b,
                              "bytes": (b + 1) * 2**20, "ready_ms": 40.0 + 10 * b, "launched_ms": 41.0 + 10 * b + rank,
                              "done_ms": 80.0 + b + rank, **phases}
                             for rank in range(3) for b in range(4)])  # fmt: skip
    figure = timelinefigures.bucket_timeline(configs, timeline, workload="gpt2", world_size=3)
    rows = list(figure.layout.yaxis.categoryarray)
    assert rows == ["bucketed: phases", "bucketed: rank 1: phases", "bucketed: rank 2: phases",
                    *[f"bucketed: bucket {b} ({b + 1} MiB)" for b in range(4)]]  # fmt: skip
    lanes = {}  # (row, rank) -> the lane's extent within the row
    for trace in figure.data:
        if trace.name.endswith("collective in flight"):
            rank = int(trace.name.split(":")[0].removeprefix("rank "))
            assert trace.hovertemplate.startswith(f"rank {rank}: %{{customdata[0]}} (%{{customdata[1]}})")
            for row, (bucket, size, *_) in zip(trace.y, trace.customdata, strict=True):
                lanes[(row, rank)] = (trace.offset, trace.offset + trace.width)
                assert row == f"bucketed: {bucket} ({size})"
    assert len(lanes) == 12 and {rank for _, rank in lanes} == {0, 1, 2}
    for b in range(4):
        extents = sorted(lanes[(rows[3 + b], rank)] for rank in range(3))
        assert extents == [lanes[(rows[3 + b], rank)] for rank in range(3)]  # rank 0's lane on top (lowest)
        assert all(upper <= lower for (_, upper), (lower, _) in itertools.pairwise(extents))  # no two overlap
    waits = [t for t in figure.data if t.name == timelinefigures.WAITED]  # a trace a rank: launched − ready
    waited = {int(t.hovertemplate.split(":")[0].removeprefix("rank ")): list(t.x) for t in waits}
    assert waited == {rank: [pytest.approx(1.0 + rank)] * 4 for rank in range(3)}
    assert figure.layout.height >= timelinefigures.row_height(3) * len(rows)


def test_the_line_under_the_timeline_names_the_bucket_the_step_waited_for_without_compute():
    """The engineer asked which bucket exposed the end of backward: the timeline drew red on the phases' row but no
    line said which collective it waited for. Each exposed span is charged to the collective still in flight at its
    end that completed last; they add up to the step's exposed_comm_ms. Each swept cap's exposure is said beside,
    measured, and not as a verdict."""
    from harness.analysis import overlap
    from reports.pages.run import held_up

    phases = {"forward_ms": 300.0, "backward_ms": 1690.0, "sync_ms": 5.0, "optimizer_ms": 5.0}  # DDP waits in backward
    stamps = [(900.0, 900.0, 1100.0), (1250.0, 1281.0, 1980.0)]  # bucket 1: ready at the last gradient, launched late
    rows = [{"config_id": f"c{cap}", "rank": 0, "step": 5, "collective": "all_reduce", "bucket": b,
             "bytes": size, "ready_ms": ready, "launched_ms": launched, "done_ms": done, **phases}
            for cap in (1, 5) for b, ((ready, launched, done), size) in enumerate(zip(stamps, (2**20, 6.14 * 2**20),
                                                                                   strict=True))]  # fmt: skip
    timeline = pd.DataFrame(rows)
    collectives = [{"ready_ms": r, "launched_ms": la, "done_ms": d} for r, la, d in stamps]
    charged = overlap.exposure_ended_by(phases, collectives)
    assert charged == [0.0, pytest.approx(1980.0 - 1281.0)]  # compute ended at the last gradient (1250); then waited
    assert sum(charged) == pytest.approx(overlap.step_communication(phases, collectives)["exposed_comm_ms"])
    configs = aggregate.with_labels(pd.DataFrame([{
        "config_id": f"c{cap}", "status": "ok", "impl": "stock", "impl_options": json.dumps({"bucket_cap_mb": cap}),
        "workload": "gpt2", "world_size": 2, "step_ms_median": 2000.0, "bucket_cap_mb": float(cap),
        "exposed_comm_ms": exposed,
    } for cap, exposed in ((1, 174.5), (5, 180.1))]))  # fmt: skip
    lines = held_up.held_up_lines(configs, timeline, workload="gpt2", world_size=2)
    assert len(lines) == 2 and lines[1].startswith("stock bucket_cap_mb=5: in rank 0's typical step 699.0 ms ran")
    waited = (
        "699.0 ms of it ending when bucket 1 completed (6.14 MiB, the last launched, ready with backward's last "
        "gradient, launched 31.0 ms after (an earlier bucket's launch first), in flight 699.0 ms)"
    )
    assert waited in lines[1]
    assert (
        "at each of its caps here: 1 MiB 174.5 ms, 5 MiB 180.1 ms (measured" in lines[1] and "not a verdict" in lines[1]
    )
    assert held_up.waited_for(timeline[timeline["config_id"] == "c1"].assign(done_ms=1240.0)) == ""  # all hidden
    unstamped = held_up.waited_for(timeline[timeline["config_id"] == "c1"].assign(done_ms=np.nan))
    assert "ending when bucket 1 was counted done (no completion stamp: the end of sync)" in unstamped
    old_run = held_up.held_up_lines(configs.drop(columns="exposed_comm_ms"), timeline, workload="gpt2", world_size=2)
    assert old_run[1].endswith("in flight 699.0 ms).")  # no column to compare the caps by: the bucket alone


def _bucketed_step(sent: dict[int, list[int]]) -> pd.DataFrame:
    """A typical step's timeline of configuration 'c': per rank, its all-reduces' bytes in bucket order, and a
    broadcast of buffers (no bucket's)."""
    phases = {"forward_ms": 10.0, "backward_ms": 30.0, "sync_ms": 5.0, "optimizer_ms": 2.0}
    rows = [{"config_id": "c", "rank": rank, "step": 3, "collective": "all_reduce", "bucket": b, "bytes": n,
             "ready_ms": 15.0 + 5 * b, "launched_ms": 15.0 + 5 * b, "done_ms": 20.0 + 8 * b, **phases}
            for rank, sizes in sent.items() for b, n in enumerate(sizes)]  # fmt: skip
    rows += [{**rows[0], "collective": "broadcast_buffers", "bucket": -1, "bytes": 64}]
    return pd.DataFrame(rows)


def _profile_and_config() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Five parameters, backward making them last registered first; DDP's caps 500 B first, then 1000 B."""
    setup = {"workload": "m", "size": "tiny", "batch_size": 8, "dtype": "fp32", "optimizer": "sgd"}
    sizes = [400, 800, 200, 600, 400]
    profile = pd.DataFrame([{**setup, "param_index": k, "param_name": f"net.layer{k}.weight", "numel": n // 4,
                             "bytes": n, "param_dtype": "float32", "requires_grad": True, "ready_ms": 50.0 - 10 * k,
                             "used_ms": None, "block": None, "forward_ms": 10.0, "backward_ms": 30.0,
                             "optimizer_ms": 2.0} for k, n in enumerate(sizes)])  # fmt: skip
    configs = aggregate.with_labels(pd.DataFrame([{
        **setup, "config_id": "c", "status": "ok", "impl": "stock", "impl_options": json.dumps({"bucket_cap_mb": 1}),
        "world_size": 2, "step_ms_median": 50.0, "bucket_cap_mb": 1000 / 2**20, "first_bucket_cap_mb": 500 / 2**20,
    }]))  # fmt: skip
    return profile, configs


def test_a_bucket_names_what_it_holds_only_where_ddps_rule_gives_its_measured_bytes():
    """The timeline recorded a bucket's bytes alone. The gradient profile laid out by DDP's rule (ready order, the
    first bucket's cap then the cap, a tensor closing the bucket it takes past the cap) names its tensors, shown
    only where every rank's buckets carried exactly those bytes; elsewhere why not."""
    from reports.pages.run import bucket_contents, held_up

    profile, configs = _profile_and_config()
    laid = [1000, 1000, 400]  # layer4+layer3 (600 B takes 400 past the first cap), layer2+layer1, layer0
    contents = bucket_contents.bucket_contents(configs, _bucketed_step({0: laid, 1: laid}), profile)
    held = contents.held["c"]
    assert [h.names for h in held.values()] == [
        ("net.layer4.weight", "net.layer3.weight"),
        ("net.layer2.weight", "net.layer1.weight"),
        ("net.layer0.weight",),
    ]
    assert [h.nbytes for h in held.values()] == laid and held[0].parameters == 250
    row = next(_bucketed_step({0: laid}).itertuples())
    label, hover = contents.of("c", row)
    assert label == "layer3.weight + 1 more" and contents.prefix == "net."
    assert hover.startswith("2 tensors, 250 parameters, in the order backward made them:<br>net.layer4.weight, ")
    assert contents.of("c", row._replace(collective="broadcast_buffers")) == ("", "")
    figure = timelinefigures.bucket_timeline(configs, _bucketed_step({0: laid, 1: laid}), workload="m",
                                             world_size=2, holds=contents.of)  # fmt: skip
    assert "stock bucket_cap_mb=1: bucket 0 (1000 B: layer3.weight + 1 more)" in figure.layout.yaxis.categoryarray
    # one trace and one hover template a rank; the tensors named in rank 0's lane, rank 1's pointing to it (a copy a
    # lane grew a gpt2 page by half)
    lanes = {t.name: t for t in figure.data if t.name.endswith("collective in flight")}
    assert list(lanes) == ["rank 0: collective in flight", "rank 1: collective in flight"]
    held = {r: {row[0]: row[4] for row in lanes[f"rank {r}: collective in flight"].customdata} for r in (0, 1)}
    assert held[0]["bucket 0"] == f"<br>holds {hover}" and held[1]["bucket 0"] == (
        "<br>holds the tensors rank 0's lane names"
    )
    assert held[0]["broadcast buffers"] == ""  # rank 0's alone, no bucket's tensors
    line = held_up.held_up_lines(configs, _bucketed_step({0: laid, 1: laid}), workload="m", world_size=2,
                                 holds=contents.of)  # fmt: skip
    assert "ending when bucket 2 completed (400 B: layer0.weight," in line[0]
    assert "shown where that gives every bucket's measured bytes exactly" in bucket_contents.contents_lines(
        contents, {"c": "stock bucket_cap_mb=1"})[0]  # fmt: skip

    other = bucket_contents.bucket_contents(configs, _bucketed_step({0: laid, 1: [1000, 1200, 200]}), profile)
    assert other.held == {} and other.unknown["c"] == (
        "DDP's rule over the gradient profile makes bucket 1 1000 B (1000 B), rank 1's step sent 1200 B"
    )
    fewer = bucket_contents.bucket_contents(configs, _bucketed_step({0: [1000, 1400]}), profile)
    assert fewer.unknown["c"] == "DDP's rule over the gradient profile makes 3 buckets, rank 0's step sent 2"
    assert [line.split(": ")[0] for line in bucket_contents.contents_lines(other, {"c": "stock"})] == ["stock"]
    none = bucket_contents.bucket_contents(configs, _bucketed_step({0: laid}), profile.iloc[0:0])
    assert none.unknown["c"].startswith("the run stored no gradient profile of m/tiny")
    uncapped = bucket_contents.bucket_contents(configs.assign(first_bucket_cap_mb=np.nan), _bucketed_step({0: laid}),
                                               profile)  # fmt: skip
    assert uncapped.held == {} and uncapped.unknown == {}  # no bucket cap (naive, flat): nothing to lay out


def test_the_timeline_is_drawn_at_every_world_size_the_smaller_folded_and_one_rank_named_with_its_file():
    """Only the largest world size was drawn: the 2-rank timeline a user benched was nowhere on the page."""
    from reports.pages.html import FigureList
    from reports.pages.run import timeline_section

    profile, configs = _profile_and_config()
    laid = [1000, 1000, 400]
    at = {"c": 2, "d": 3, "e": 1}
    configs = pd.concat([configs.assign(config_id=c, world_size=w) for c, w in at.items()], ignore_index=True)
    steps = [_bucketed_step({rank: laid for rank in range(w)}).assign(config_id=c) for c, w in at.items()]
    empty = pd.DataFrame()
    run = aggregate.RunData(
        meta={},
        configs=configs,
        ranks=empty,
        phases=empty,
        boxes=empty,
        series=empty,
        timeline=pd.concat(steps, ignore_index=True),
        gradprofiles=profile,
        run_path="/r/run",
    )
    page = "".join(timeline_section.timeline_figures(run, "m", FigureList(), shown=configs, note=""))
    largest, folded = page.split("<details", 1)
    assert "m at 3 ranks" in largest and "m at 2 ranks" not in largest
    assert "<summary>The bucket timeline at 2 ranks</summary>" in folded and "m at 2 ranks" in folded
    assert "Plotly.Plots.resize" in folded  # drawn closed, it takes the page's width once opened
    assert (
        "The bucket timeline at 1 rank is not drawn" in folded
        and "/r/run/timeline/&lt;config_id&gt;.parquet (e)" in folded
    )
    assert folded.count("layer3.weight + 1 more") >= 1 and largest.count("layer3.weight + 1 more") >= 1

"""Figure functions on the golden runs in tests/data/: each figure has the traces that answer its question."""

from __future__ import annotations

import dataclasses
import html
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.analysis import scaling
from harness.results import store
from reports import aggregate, step_series
from reports.figures import memory as memory_figures
from reports.figures import steps as stepfigures
from reports.figures import strategies as figures
from reports.pages.run import run_sections, trust_section

DATA = Path(__file__).resolve().parents[1] / "data"


def load(scenario: str) -> aggregate.RunData:
    run = DATA / scenario
    meta = store.read_json(run / "run.json")
    return aggregate.summarize_run(meta, store.read_configs(run), store.read_steps(run), store.read_ranks(run))


@pytest.fixture(scope="module")
def cpu_run() -> aggregate.RunData:
    return load("cpu_run")


@pytest.fixture(scope="module")
def sweep() -> aggregate.RunData:
    return load("bucket_sweep")


@pytest.fixture(scope="module")
def failures() -> aggregate.RunData:
    return load("failures")


@pytest.fixture(scope="module")
def gpu() -> aggregate.RunData:
    return load("gpu_memory")


def names(figure) -> list[str]:
    return [trace.name for trace in figure.data]


@pytest.mark.parametrize("scenario", ["cpu_run", "bucket_sweep", "failures", "gpu_memory"])
def test_golden_runs_have_the_current_schema(scenario):
    run = DATA / scenario
    assert list(store.read_configs(run).columns) == store.CONFIG_SCHEMA.names
    assert list(store.read_steps(run).columns) == store.STEP_SCHEMA.names
    assert list(store.read_ranks(run).columns) == store.RANK_SCHEMA.names


def test_step_time_has_a_bar_per_strategy_over_world_sizes_with_p10_p90_whiskers(cpu_run):
    figure = figures.step_time_by_strategy(cpu_run.configs, workload="mlp")
    assert sorted(names(figure)) == ["local", "naive", "stock"]
    ok = cpu_run.configs.set_index("config_id")
    for trace in figure.data:
        assert list(trace.x) == ["1 rank", "2 ranks"]
        rows = ok[ok["impl"] == trace.name].sort_values("world_size")
        assert np.allclose(trace.y, rows["step_ms_median"])
        assert np.allclose(trace.error_y.arrayminus, rows["step_ms_median"] - rows["step_ms_p10"])


def test_a_parity_failure_is_marked_in_the_legend_and_failed_rows_are_not_drawn(failures):
    figure = figures.step_time_by_strategy(failures.configs, workload="mlp")
    assert sorted(names(figure)) == ["local", "naive (PARITY FAILED)"]
    hatched = next(t for t in figure.data if t.name.startswith("naive"))
    assert hatched.marker.pattern.shape == "x"


def test_throughput_bars_are_the_measured_windows_samples_per_second(cpu_run):
    """Throughput as the run delivered it (samples in the measured window / its wall time); a run from before
    that column (the golden one's are null) gets the median step's, and its title says so."""
    older = figures.throughput_by_strategy(cpu_run.configs, workload="mlp")
    rows = cpu_run.configs[cpu_run.configs["impl"] == "stock"].sort_values("world_size")
    stock = next(t for t in older.data if t.name == "stock")
    assert np.allclose(stock.y, rows["samples_per_s"]) and "from the median step" in older.layout.title.text
    windowed = cpu_run.configs.assign(window_samples_per_s=cpu_run.configs["samples_per_s"] * 0.9)
    figure = figures.throughput_by_strategy(windowed, workload="mlp")
    stock = next(t for t in figure.data if t.name == "stock")
    assert np.allclose(stock.y, 0.9 * rows["samples_per_s"]) and "over the measured window" in figure.layout.title.text


def test_scaling_has_one_line_per_strategy_against_local_at_one_rank_and_the_ideal_line(cpu_run):
    """Against local at one rank (the run has it), as the sentence ranks, even with one repeat: each line starts at
    its one-rank throughput over local's, its own figure (1 at one rank) in the hover."""
    figure = figures.scaling(cpu_run.configs, workload="mlp")
    assert names(figure) == ["local", "stock", "naive", "ideal"]  # as the lines end, best first
    one_rank = cpu_run.configs[cpu_run.configs["world_size"] == 1].set_index("impl")["samples_per_s"]
    for trace in figure.data[:-1]:
        assert trace.y[0] == pytest.approx(one_rank[trace.name] / one_rank["local"])
        assert trace.customdata[0] == pytest.approx(1.0)
    assert "local's at 1 rank" in figure.layout.yaxis.title.text
    assert list(figure.data[-1].y) == [1.0, 1.0]
    # its title names its base, and says what a point above 1.0 is where one is (zero at 1.44 read as a gain)
    above = any(y > 1.005 for trace in figure.data[:-1] for y in trace.y)
    title = figure.layout.title.text
    assert title.startswith("mlp: weak-scaling efficiency against local at 1 rank (1.0 = linear)")
    assert ("above 1.0: faster than linear from that base" in title) == above
    rows = cpu_run.configs
    stock_one = (rows["impl"] == "stock") & (rows["world_size"] == 1)
    fast = rows.assign(samples_per_s=rows["samples_per_s"].where(~stock_one, one_rank["local"] * 1.44))
    assert "above 1.0: faster than linear from that base" in figures.scaling(fast, workload="mlp").layout.title.text


def test_the_configurations_table_names_each_scaling_efficiency_for_its_base():
    from reports.pages.run import run_page

    heads = [head for column, head, _ in run_page.TABLE_COLUMNS if column.startswith("scaling_efficiency")]
    assert heads == ["scaling eff. (own 1 rank)", "scaling eff. (local at 1 rank)"]


def test_the_bucket_sweep_stars_only_the_cap_the_recommendation_names_on_a_log_axis(sweep):
    best = aggregate.best_caps(sweep.configs, workload="mlp")
    assert best[["world_size", "bucket_cap_mb"]].values.tolist() == [[1, 25.0], [2, 5.0]]
    figure = figures.bucket_cap_sweep(sweep.configs, workload="mlp", strategy="stock")
    assert names(figure) == ["1 rank", "2 ranks"]  # nothing recommended: no star, however fast a cap looks
    assert list(figure.data[0].x) == [1.0, 5.0, 25.0]
    assert figure.layout.xaxis.type == "log"
    starred = figures.bucket_cap_sweep(sweep.configs, workload="mlp", strategy="stock", recommended={2: (5.0, 11.4)})
    assert names(starred) == ["1 rank", "2 ranks", "recommended cap"]
    assert list(starred.data[-1].x) == [5.0] and list(starred.data[-1].y) == [11.4]


def test_the_stars_come_from_the_sweeps_recommendations_only_where_it_recommends():
    from reports.pages.run.run_sections import recommended_caps

    keys = ("workload", "impl", "other_options", "world_size", "decision", "best_cap_mb")
    frame = pd.DataFrame([
        dict(zip(keys, ("mlp", "stock", "{}", 2, "recommend", 5.0), strict=True)),
        dict(zip(keys, ("mlp", "stock", "{}", 4, "flat", 1.0), strict=True)),
        dict(zip(keys, ("mlp", "bucketed", "{}", 2, "recommend", 9.0), strict=True)),
    ])  # fmt: skip
    assert recommended_caps(frame.assign(best_step_ms=[3.5, 4.0, 2.0]), workload="mlp", strategy="stock") == {
        2: (5.0, 3.5)
    }


def test_a_sweep_line_between_caps_that_made_one_layout_is_captioned_as_the_launches_spread():
    """A CPU sweep's stock line fell from 16.5 ms at 1 MiB to 7.9 ms at 100 MiB under the generic caption, where every
    cap had made the same one bucket of 0.13 MiB: the figure read as a cap to pick."""
    from reports.pages.run.run_sections import one_layout_note

    keys = ("workload", "impl", "other_options", "world_size", "decision", "same_buckets_mb")
    frame = pd.DataFrame([
        dict(zip(keys, ("mlp", "stock", "{}", 2, "flat", "[0.13]"), strict=True)),
        dict(zip(keys, ("mlp", "stock", "{}", 4, "recommend", None), strict=True)),
        dict(zip(keys, ("mlp", "bucketed", "{}", 4, "flat", "[0.13]"), strict=True)),
    ])  # fmt: skip
    assert one_layout_note(frame, workload="mlp", strategy="stock") == (
        " At 2 ranks every cap made the same buckets: the line's rise and fall there is the launches' spread, one "
        "measurement, not the cap's doing."
    )
    assert one_layout_note(frame.iloc[1:2], workload="mlp", strategy="stock") == ""


def test_a_one_layout_note_every_sweep_figure_shares_is_said_once():
    """A run page said "At 2 ranks every cap made the same buckets: …" under bucketed's sweep figure and again under
    stock's, the second time after the sweep's caption: once, with the caption, under the last."""
    from reports.pages.run.run_sections import CAPTIONS, sweep_captions

    note = "At 2 ranks every cap made the same buckets: the launches' spread."
    assert sweep_captions([note, note]) == ["", f"{CAPTIONS['sweep']} {note}"]
    assert sweep_captions([note, ""]) == [note, CAPTIONS["sweep"]]  # bucketed's alone: under its own figure
    assert sweep_captions([note]) == [f"{CAPTIONS['sweep']} {note}"]


def test_a_run_without_a_sweep_has_no_best_cap(cpu_run):
    assert aggregate.best_caps(cpu_run.configs, workload="mlp").empty


def test_time_breakdown_stacks_the_phases_from_measured_steps_only(cpu_run):
    figure = stepfigures.time_breakdown(cpu_run.configs, cpu_run.phases, workload="mlp")
    assert names(figure) == ["forward", "backward", "communication not hidden", "sync (rest)", "optimizer"]
    assert figure.layout.barmode == "stack"
    steps = store.read_steps(DATA / "cpu_run")
    first = cpu_run.configs.sort_values(["world_size", "impl"]).iloc[0]
    measured = steps[(steps["config_id"] == first["config_id"]) & ~steps["warmup"]]
    slowest = measured.groupby("rank")["step_ms"].mean().idxmax()
    assert figure.data[0].y[0] == pytest.approx(measured.loc[measured["rank"] == slowest, "forward_ms"].mean())
    assert figure.data[0].y[0] < steps.loc[steps["warmup"], "forward_ms"].min()  # warm-up steps are twice as slow
    # a run from before communication was timed: every strategy that communicates says its bar holds it unmarked
    untimed = [label for label in figure.data[0].x if label.endswith(" (comm. not timed)")]
    assert sorted(label.split(" · ")[0] for label in untimed) == ["naive", "stock"]
    assert all(" · w2" in label for label in untimed)  # one rank communicates nothing; local communicates nothing


def test_time_breakdown_names_the_rank_each_bar_draws(cpu_run):
    """Two ranks that wait for each other end their steps nearly together: a straggler's bar (more compute) and
    its peer's (more communication not hidden) differ in kind, so each bar says whose steps it draws."""
    figure = stepfigures.time_breakdown(cpu_run.configs, cpu_run.phases, workload="mlp")
    steps = store.read_steps(DATA / "cpu_run")
    measured = steps[~steps["warmup"]]
    slowest = measured.groupby(["config_id", "rank"])["step_ms"].mean().groupby("config_id").idxmax()
    shown = aggregate.labelled(cpu_run.configs, workload="mlp").merge(cpu_run.phases, on="config_id")  # the bars' order
    assert len(shown) == len(figure.data[0].x) > 2
    for label, (config_id, row) in zip(figure.data[0].x, shown.set_index("config_id").iterrows(), strict=True):
        if row["world_size"] > 1:
            assert f" · rank {slowest[config_id][1]}" in label, (label, config_id)
        else:
            assert " · rank " not in label, label


def test_time_breakdown_of_a_workload_with_no_phases_left_draws_no_bar(cpu_run):
    """A workload whose rows merge with no phases (every configuration failed, or another workload's phases): the
    empty merge keeps the rank column's integer type, which once could not be added to the labels' strings and
    stopped the run page, the report and the compare site with it."""
    other = cpu_run.phases.assign(config_id="no-such-configuration")
    figure = stepfigures.time_breakdown(cpu_run.configs, other, workload="mlp")
    assert all(len(trace.x) == 0 for trace in figure.data)


def test_a_run_from_before_communication_was_measured_draws_no_communication_figure(cpu_run):
    assert cpu_run.configs["comm_ms"].isna().all()  # schema 3: inferred, not measured
    assert stepfigures.exposed_communication(cpu_run.configs, workload="mlp") is None
    assert cpu_run.phases["exposed_comm_ms"].isna().all()  # and no segment claims any


@pytest.fixture(scope="module")
def measured_run(small_run) -> aggregate.RunData:
    from reports.site import read_run

    return read_run(small_run)


def test_exposed_communication_draws_the_measured_figures_and_leaves_out_local(measured_run):
    figure = stepfigures.exposed_communication(measured_run.configs, workload="mlp")
    configs = measured_run.configs
    timed = configs[(configs["impl"] != "local") & (configs["comm_ms"] > 0)]
    assert set(names(figure)) == set(timed["impl"]) and "local" not in names(figure)
    naive = timed[timed["impl"] == "naive"].sort_values("world_size")
    in_flight, not_hidden, hidden_share = [trace.y for trace in figure.data if trace.name == "naive"]
    assert np.allclose(in_flight, naive["comm_ms"]) and np.allclose(not_hidden, naive["exposed_comm_ms"])
    assert np.allclose(hidden_share, naive["overlap_efficiency"])


def test_the_phase_segments_take_the_exposed_communication_out_of_its_phase(measured_run):
    phases = measured_run.phases.set_index("config_id")
    configs = measured_run.configs.set_index("config_id")
    stock = configs[(configs["impl"] == "stock") & (configs["world_size"] == 2)].index[0]
    naive = configs[(configs["impl"] == "naive") & (configs["world_size"] == 2)].index[0]
    assert phases.loc[stock, "exposed_comm_ms"] > 0 and phases.loc[naive, "exposed_comm_ms"] > 0
    steps = store.read_steps(measured_run.run_path)
    measured = steps[(steps["config_id"] == naive) & ~steps["warmup"]]
    # naive communicates in sync: its sync segment is what is left of sync once communication is out
    measured = measured[measured["rank"] == phases.loc[naive, "rank"]]  # the slowest rank's steps
    # (what is exposed inside another phase, as a loaded machine's scheduling may place a little of it, stays there)
    in_phases = sum(measured[f"exposed_{p}_ms"].fillna(0.0) for p in ("backward", "forward", "optimizer"))
    rest = (measured["sync_ms"] - measured["exposed_comm_ms"] + in_phases).clip(lower=0.0)
    assert phases.loc[naive, "sync_ms"] == pytest.approx(rest.mean())


def test_the_bucket_timeline_draws_a_phase_row_and_one_row_per_bucket(measured_run):
    from reports.figures import timeline as timelinefigures

    figure = timelinefigures.bucket_timeline(measured_run.configs, measured_run.timeline, workload="mlp", world_size=2)
    rows = list(figure.layout.yaxis.categoryarray)
    timed = measured_run.timeline.merge(measured_run.configs[["config_id", "world_size"]], on="config_id")
    at_2 = timed[timed["world_size"] == 2]
    buckets = at_2.groupby("config_id")[["collective", "bucket"]].apply(lambda c: len(c.drop_duplicates()))
    phases = at_2.groupby("config_id")["rank"].nunique()  # a phases row a rank, then a row per bucket, lanes in it
    assert (phases > 1).all() and len(rows) == buckets.sum() + phases.sum()
    assert any(r.endswith(": rank 1: phases") for r in rows)
    assert any(r.endswith(": phases") for r in rows) and any("bucket 0" in r for r in rows)
    sizes = [re.search(r"\(([\d.]+) [KMG]?i?B\)$", r).group(1) for r in rows if ": bucket " in r]
    assert sizes and all(len(size.replace(".", "").lstrip("0")) <= 3 for size in sizes)  # '9.01', not '9.00879'


def test_the_rule_that_names_a_buckets_tensors_gives_ddps_own_buckets_in_a_real_run(measured_run):
    """What each bucket holds is shown only where DDP's rule over the run's gradient profile gives every bucket's
    measured bytes: in a real run, DDP's and bucketed's buckets are named (a rule that drifted from DDP's would
    leave them unnamed), with every trained parameter once."""
    from reports.pages.run import bucket_contents

    run = measured_run
    contents = bucket_contents.bucket_contents(run.configs, run.timeline, run.gradprofiles)
    capped = run.configs[run.configs["impl"].isin(["stock", "bucketed"]) & run.configs["config_id"].isin(
        run.timeline["config_id"])]  # fmt: skip
    assert not capped.empty and set(capped["config_id"]) <= set(contents.held) and not contents.unknown
    trained = run.gradprofiles[run.gradprofiles["requires_grad"]]
    for held in contents.held.values():
        names = [n for bucket in held.values() for n in bucket.names]
        assert sorted(names) == sorted(trained["param_name"].unique())


def test_sizes_read_in_three_significant_figures():
    from reports.figures.network import size_label

    assert size_label(9.00879 * 2**20) == "9.01 MiB" and size_label(25 * 2**20) == "25 MiB"
    assert size_label(1000 * 2**20) == "1000 MiB" and size_label(1536) == "1.5 KiB" and size_label(512) == "512 B"


def test_cpu_memory_shows_rss_per_rank_only(cpu_run):
    figure = memory_figures.memory_by_rank(cpu_run.configs, cpu_run.ranks, workload="mlp")
    assert names(figure) == ["rank 0", "rank 1"]
    assert [a.text for a in figure.layout.annotations] == ["process RSS peak"]


def test_gpu_memory_shows_every_measured_peak_per_rank_and_the_rank0_skew(gpu):
    figure = memory_figures.memory_by_rank(gpu.configs, gpu.ranks, workload="mlp")
    panels = [a.text for a in figure.layout.annotations]
    assert panels == ["device peak (NVML)", "allocator reserved peak", "allocator allocated peak", "process RSS peak"]
    assert names(figure) == ["rank 0", "rank 1"] * 4
    reserved_rank0 = figure.data[2]
    assert dict(zip(reserved_rank0.x, reserved_rank0.y, strict=True))["dataparallel · w2"] == 3500.0 / 1024
    assert figure.layout.yaxis.title.text == "GiB"  # MiB columns shown in GiB once they reach one


def test_ranks_sharing_a_gpu_quote_and_plot_each_ranks_own_peak_not_the_whole_devices(gpu):
    """Two ranks on one GPU: NVML's device peak counts both (1.95 GiB on each rank's row), which read as memory
    doubling with the world size; each rank's own is its process's."""
    from reports.pages.html import FigureList

    one_gpu = dataclasses.replace(gpu, meta={**gpu.meta, "environment": {**gpu.meta["environment"], "gpu_count": 1}})
    shared = html.unescape(run_sections.memory_section(one_gpu, ["mlp"], FigureList()))
    own = f"{one_gpu.configs['mem_peak_nvml_process_mb'].max() / 1024:.2f} GiB"
    assert f"the largest peak GPU memory of one rank (NVML, its process) is dataparallel's ({own})" in shared
    assert "(the whole GPU, all ranks on it: " in shared and "whole GPU, all ranks" in shared
    panels = memory_figures.memory_by_rank(
        gpu.configs, gpu.ranks, workload="mlp", metrics=run_sections.SHARED_GPU_METRICS
    )
    assert [a.text for a in panels.layout.annotations][:2] == [
        "each rank's own peak (NVML, its process)", "device peak (NVML): whole GPU, all ranks"]  # fmt: skip
    apart = run_sections.memory_section(gpu, ["mlp"], FigureList())  # two GPUs: the device's peak is the rank's
    assert "peak GPU memory (NVML) is" in apart and "its process" not in apart


def test_distribution_boxes_have_the_same_median_as_the_configs_table(cpu_run):
    figure = stepfigures.step_time_distribution(cpu_run.configs, cpu_run.boxes, workload="mlp")
    (box,) = figure.data
    medians = dict(zip(box.x, box.median, strict=True))
    labelled = aggregate.labelled(cpu_run.configs)
    for row in labelled.itertuples():
        assert medians[row.config_label] == pytest.approx(row.step_ms_median)


def test_series_draws_measured_steps_as_lines_and_warm_up_steps_apart(cpu_run):
    figure = stepfigures.step_time_series(cpu_run.configs, cpu_run.series, workload="mlp")
    lines = [t for t in figure.data if t.mode == "lines"]
    warm = [t for t in figure.data if t.mode == "markers"]
    assert len(lines) == len(warm) == 6
    assert all(list(t.x) == [0, 1] for t in warm) and all(list(t.x) == [2, 3, 4, 5] for t in lines)


def test_downsampling_caps_points_per_configuration_and_keeps_warm_up():
    steps = np.arange(10_000)
    series = pd.DataFrame({"config_id": "c", "step": steps, "warmup": steps < 3, "step_ms": 1.0 + steps % 7})
    sampled = step_series.downsample(series, max_points=100)
    assert sampled["warmup"].sum() == 3
    assert (~sampled["warmup"]).sum() == 100
    assert sampled["step"].is_monotonic_increasing


def test_noise_splits_configurations_at_the_threshold():
    configs = pd.DataFrame(
        {
            "status": "ok",
            "workload": "mlp",
            "impl": ["a", "b"],
            "impl_options": "{}",
            "world_size": 1,
            "step_ms_cv": [0.05, 0.3],
        }
    )
    figure = stepfigures.noise(configs, workload="mlp", threshold=0.1)
    assert [list(t.x) for t in figure.data] == [["a · w1"], ["b · w1"]]
    assert figure.data[1].name == "cv > 0.1 (noisy)"


def repeated(run: aggregate.RunData, factors: tuple[float, ...]) -> pd.DataFrame:
    """The run's configurations repeated, repeat k's steps `factors[k]` times as long (throughput as much lower),
    labelled as a run's page labels them."""
    plain = run.configs.drop(columns=["label", "config_label"])
    copies = [plain.assign(repeat=k, config_id=plain["config_id"] + f"-r{k}",
                           step_ms_median=plain["step_ms_median"] * f, samples_per_s=plain["samples_per_s"] / f)
              for k, f in enumerate(factors)]  # fmt: skip
    return aggregate.with_labels(pd.concat(copies, ignore_index=True))


def test_repeats_of_a_configuration_are_labelled_apart_until_pooled(cpu_run):
    both = repeated(cpu_run, (1.0, 1.5))
    assert sorted(set(both["label"])) == ["local #1", "local #2", "naive #1", "naive #2", "stock #1", "stock #2"]


def test_with_repeats_each_strategy_is_one_bar_at_the_geometric_mean_of_its_repeats_and_a_dot_for_each(cpu_run):
    runs = repeated(cpu_run, (1.0, 1.5, 1.2))
    figure = figures.step_time_by_strategy(runs, workload="mlp")
    bars = [trace for trace in figure.data if trace.type == "bar"]
    assert sorted(trace.name for trace in bars) == ["local", "naive", "stock"]
    assert "lowest–highest repeat" in figure.layout.title.text and figure.layout.scattermode == "group"
    one = cpu_run.configs.set_index(["impl", "world_size"])["step_ms_median"]
    for bar in bars:
        plain = np.array([one[(bar.name, 1)], one[(bar.name, 2)]])
        assert np.allclose(bar.y, 1.8 ** (1 / 3) * plain)  # the geometric mean of the three repeats, as ranked
        centre = 1.8 ** (1 / 3)
        assert np.allclose(bar.error_y.array, (1.5 - centre) * plain)
        assert np.allclose(bar.error_y.arrayminus, (centre - 1.0) * plain)
        dots = next(trace for trace in figure.data if trace.type == "scatter" and trace.legendgroup == bar.name)
        assert sorted(dots.y) == sorted(np.outer([1.0, 1.5, 1.2], plain).ravel())
    throughput = figures.throughput_by_strategy(runs, workload="mlp")
    assert sorted(trace.name for trace in throughput.data if trace.type == "bar") == ["local", "naive", "stock"]


def test_with_repeats_the_throughput_caption_says_its_bars_pool_the_windows_not_the_median_steps(cpu_run):
    """A walkthrough read 'each bar is the geometric mean of the strategy's repeats' medians (the answer's figure)'
    under the throughput bars, which pool each repeat's window throughput (1340.7 samples/s against the
    table's 1379 from the median step)."""
    import dataclasses

    from reports.pages.html import FigureList
    from reports.pages.run import run_sections

    said = run_sections.fastest_section(dataclasses.replace(cpu_run, configs=repeated(cpu_run, (1.0, 1.5))), ["mlp"],
                                        FigureList())  # fmt: skip
    step_caption, throughput_caption = map(html.unescape, re.findall(r'<p class="caption">(.*?)</p>', said))
    assert "repeats' medians (the answer's figure)" in step_caption
    assert "repeats' medians" not in throughput_caption
    assert "repeats' throughputs over their measured windows" in throughput_caption


def test_with_repeats_a_per_configuration_figure_draws_the_median_repeat_of_each(cpu_run):
    runs = repeated(cpu_run, (1.0, 1.5, 1.2))
    shown = aggregate.typical_repeats(runs)
    assert len(shown) == len(cpu_run.configs) and set(shown["repeat"]) == {2}  # 1.2×: the median of 1, 1.5, 1.2
    assert not shown["label"].str.contains("#").any()
    even = aggregate.typical_repeats(repeated(cpu_run, (1.5, 1.0)))
    assert set(even["repeat"]) == {1}  # the lower middle of two: the faster
    failed = runs.assign(status=np.where(runs["repeat"] == 2, "failed", runs["status"]))
    assert set(aggregate.typical_repeats(failed)["repeat"]) == {0}  # of the ok ones, 1 and 1.5: the lower
    noise = stepfigures.noise(shown, workload="mlp")
    assert sum(len(trace.x) for trace in noise.data) == len(cpu_run.configs)


def test_with_repeats_scaling_is_one_line_per_strategy_pooled_over_them(cpu_run):
    runs = repeated(cpu_run, (1.0, 1.5, 1.2))
    figure = figures.scaling(runs, workload="mlp")
    lines = {trace.name: trace for trace in figure.data if trace.name != "ideal"}
    assert sorted(lines) == ["local", "naive", "stock"]
    pooled = scaling.pooled_scaling(runs).set_index(["impl", "world_size"])
    assert "local's at 1 rank" in figure.layout.yaxis.title.text  # the run has local at one rank
    for name, line in lines.items():
        assert np.allclose(line.y, [pooled.loc[(name, int(w)), "scaling_efficiency_vs_local"] for w in line.x])
        assert np.allclose(line.customdata, [pooled.loc[(name, int(w)), "scaling_efficiency"] for w in line.x])
    # Against local at one rank, stock's one-rank point is below 1 by DDP's own cost there; local's is 1.
    assert lines["local"].y[0] == pytest.approx(1.0) and lines["stock"].y[0] < 1.0
    without = figures.scaling(runs[runs["impl"] != "local"], workload="mlp")
    assert "its own at 1 rank" in without.layout.yaxis.title.text


def test_memory_against_time_has_a_point_per_strategy_for_each_world_size(gpu):
    figure = memory_figures.memory_vs_time(gpu.configs, workload=gpu.configs["workload"].iloc[0])
    ok = gpu.configs[gpu.configs["status"] == "ok"]
    assert sorted(trace.name for trace in figure.data) == sorted(
        aggregate.world_label(int(w)) for w in ok["world_size"].unique()
    )
    assert sum(len(trace.x) for trace in figure.data) == len(ok)
    assert "device peak (NVML)" in figure.layout.title.text  # NVML wins over allocator and RSS


def test_held_memory_stacks_parameters_gradients_and_optimizer_state_per_rank():
    configs = pd.DataFrame(
        [{"config_id": "z", "status": "ok", "impl": "zero", "impl_options": "{}", "workload": "mlp", "world_size": 2}]
    )
    ranks = pd.DataFrame(
        [
            {"config_id": "z", "rank": r, "held_param_mb": 4.0, "held_grad_mb": 4.0, "held_optimizer_state_mb": 4.0 + r}
            for r in (0, 1)
        ]
    )
    figure = memory_figures.held_by_rank(aggregate.with_labels(configs), ranks, workload="mlp")
    assert [trace.name for trace in figure.data] == ["parameters", "gradients", "optimizer state"]
    assert list(figure.data[2].y) == [4.0, 5.0]
    assert figure.layout.barmode == "stack"


def test_step_time_bars_are_fastest_first_with_their_values_on_them(cpu_run):
    figure = figures.step_time_by_strategy(cpu_run.configs, workload="mlp")
    ok = cpu_run.configs[(cpu_run.configs["status"] == "ok") & (cpu_run.configs["world_size"] == 2)]
    by_speed = list(ok.sort_values("step_ms_median")["label"])
    assert [trace.name for trace in figure.data] == by_speed
    for trace in figure.data:
        assert trace.texttemplate == "%{text}" and list(trace.text) == [f"{y:.3g}" for y in trace.y]


def test_throughput_labels_keep_three_significant_figures_however_small_or_large(cpu_run):
    """A gpt2/full CPU run's 0.46–0.72 samples/s read '0' and '1' on their bars (d3's '.0f')."""
    slow = cpu_run.configs.assign(
        samples_per_s=cpu_run.configs["samples_per_s"] / cpu_run.configs["samples_per_s"].max() * 0.72
    )
    for trace in figures.throughput_by_strategy(slow, workload="mlp").data:
        assert trace.texttemplate == "%{text}" and list(trace.text) == [f"{y:.3g}" for y in trace.y]
        assert "%{text} samples/s" in trace.hovertemplate and ".0f" not in trace.hovertemplate
    fast = cpu_run.configs.assign(samples_per_s=cpu_run.configs["samples_per_s"] * 1e3)
    for trace in figures.throughput_by_strategy(fast, workload="mlp").data:
        assert list(trace.text) == [f"{y:.0f}" for y in trace.y]  # whole numbers from 100 up, never '1.23e+05'


def test_memory_against_time_starts_both_axes_at_zero_in_mib_or_gib(gpu, cpu_run):
    figure = memory_figures.memory_vs_time(gpu.configs, workload="mlp")
    assert figure.layout.xaxis.rangemode == "tozero" and figure.layout.yaxis.rangemode == "tozero"
    assert figure.layout.yaxis.title.text in ("MiB", "GiB")
    assert all(trace.cliponaxis is False for trace in figure.data)  # labels at the edge are not cut off


def test_memory_against_time_gives_points_drawn_on_each_other_one_label_naming_both():
    rows = pd.DataFrame([{"config_id": c, "status": "ok", "impl": impl, "impl_options": "{}", "workload": "mlp",
                          "world_size": 1, "step_ms_median": ms, "mem_peak_rss_mb": mb}
                         for c, impl, ms, mb in (("a", "stock", 50.0, 800.0), ("b", "zero", 51.0, 805.0),
                                                 ("c", "fsdp", 90.0, 820.0))])  # fmt: skip
    (trace,) = memory_figures.memory_vs_time(aggregate.with_labels(rows), workload="mlp").data
    assert dict(zip(trace.customdata, trace.text, strict=True)) == {"stock": "stock, zero", "zero": "", "fsdp": "fsdp"}


def test_warm_up_steps_are_drawn_in_their_series_colour_not_as_red_crosses(cpu_run):
    figure = stepfigures.step_time_series(cpu_run.configs, cpu_run.series, workload="mlp")
    lines = {t.legendgroup: t.line.color for t in figure.data if t.mode == "lines"}
    warm = [t for t in figure.data if t.mode == "markers"]
    assert warm and all(t.marker.symbol == "circle-open" for t in warm)
    assert all(t.marker.color == lines[t.legendgroup] for t in warm)
    assert figure.layout.yaxis.rangemode == "tozero"


def test_with_repeats_parity_is_one_row_per_configuration_failed_where_any_repeat_failed(cpu_run):
    runs = repeated(cpu_run, (1.0, 1.5, 1.2))
    stock_w2 = (runs["impl"] == "stock") & (runs["world_size"] == 2)
    runs.loc[stock_w2 & (runs["repeat"] == 1), ["parity_ok", "parity_max_abs_diff", "parity_tolerance"]] = [
        False, 0.5, 1e-4]  # fmt: skip
    rows = trust_section.parity_by_configuration(aggregate.labelled(runs)).set_index("config_label")
    assert len(rows) == len(cpu_run.configs)
    failed = rows.loc["stock · w2 (3 repeats)"]
    assert failed["parity_ok"] is False and failed["parity_max_abs_diff"] == 0.5
    assert failed["parity_tolerance"] == 1e-4  # the tolerance of the repeat that differed most
    assert failed["parity_note"] == "failed in repeat 2"  # counted as said: not 'repeat(s)'
    runs.loc[stock_w2 & (runs["repeat"] == 2), "parity_ok"] = False
    twice = trust_section.parity_by_configuration(aggregate.labelled(runs)).set_index("config_label")
    assert twice.loc["stock · w2 (3 repeats)", "parity_note"] == "failed in repeats 2, 3"
    assert rows.loc["naive · w1 (3 repeats)", "parity_ok"] is True
    assert rows.loc["local · w1 (3 repeats)", "parity_ok"] is None  # local is never judged
    # one repeat checked, the others not: said as the others', not as a verdict and its denial
    noted = runs.assign(parity_note=np.where(runs["repeat"] == 0, "not judged: …; identical to the reference",
                                             "not checked"))  # fmt: skip
    local = trust_section.parity_by_configuration(aggregate.labelled(noted)).set_index("config_label")
    assert local.loc["local · w1 (3 repeats)", "parity_note"] == (
        "not judged: …; identical to the reference (the other repeats: not checked)"
    )
    # a never-judged strategy's later repeats say its reason alone (records.parity_columns): said once, not twice
    reasons = runs.assign(parity_note=np.where(runs["repeat"] == 0, "not judged: why; identical to the reference",
                                               "not judged: why"))  # fmt: skip
    local = trust_section.parity_by_configuration(aggregate.labelled(reasons)).set_index("config_label")
    assert local.loc["local · w1 (3 repeats)", "parity_note"] == "not judged: why; identical to the reference"
    markup = trust_section.parity_table(runs)
    assert markup.count("<b>FAILED</b>") == 1 and "(3 repeats)" in markup
    assert "<td>5.00e-01</td><td>1.00e-04</td>" in markup.replace("\n", "")


def test_parity_rows_of_a_run_of_several_models_name_each_model(cpu_run):
    """A run of gpt2 and resnet18 listed each configuration twice under one label: a failure did not say whose."""
    runs = repeated(cpu_run, (1.0, 1.5))
    other = runs.assign(workload="gpt2", parity_ok=False, parity_max_abs_diff=0.5)
    markup = trust_section.parity_table(pd.concat([runs, other], ignore_index=True)).replace("\n", "")
    assert "<th>model</th><th>configuration</th>" in markup
    assert "<td>gpt2/tiny</td><td>stock · w2 (2 repeats)</td><td><b>FAILED</b>" in markup
    assert "<td>mlp/tiny</td><td>stock · w2 (2 repeats)</td><td>ok" in markup
    assert "<th>model</th>" not in trust_section.parity_table(runs)  # one model: said by the page's headings


def test_the_comparison_figure_is_on_a_log_axis_that_an_interval_of_two_repeats_cannot_flatten():
    from reports.pages import compare as comparison

    frame = pd.DataFrame({"impl": ["stock", "naive"], "workload": ["mlp"] * 2, "size": ["tiny"] * 2,
                          "world_size": [2, 2], "ratio": [1.02, 0.9], "ratio_ci_low": [0.008, 0.85],
                          "ratio_ci_high": [169.5, 0.95]})  # fmt: skip
    figure = comparison.ratio_figure(frame, threshold=0.05)
    assert figure.layout.xaxis.type == "log"
    low, high = (10**end for end in figure.layout.xaxis.range)
    assert low == pytest.approx(0.25) and high == pytest.approx(4.0)  # not 0.008–170: the points stay apart
    assert "geometric means" in figure.layout.title.text and "median" not in figure.layout.title.text
    narrow = comparison.ratio_figure(
        frame.assign(ratio_ci_low=[0.98, 0.85], ratio_ci_high=[1.06, 0.95]), threshold=0.05
    )
    assert 10 ** narrow.layout.xaxis.range[1] == pytest.approx(1.06 * 1.1)  # a tight interval keeps its scale
    assert len(narrow.data) == 1  # nothing cut: no arrow


def test_the_comparison_figure_marks_each_whisker_cut_at_its_axis_with_an_arrow_at_the_edge():
    """A team lead read a two-repeat interval of 0.036–20.9 as a line that ended at the 0.25×–4× axis's edges: an
    arrow there now says it runs on, on that side only, and its hover gives the interval whole."""
    from reports.pages import compare as comparison

    frame = pd.DataFrame({"impl": ["stock", "naive", "flat"], "workload": ["mlp"] * 3, "size": ["tiny"] * 3,
                          "world_size": [2, 2, 2], "ratio": [1.02, 0.9, 1.5], "ratio_ci_low": [0.036, 0.85, 1.2],
                          "ratio_ci_high": [20.9, 0.95, 9.0]})  # fmt: skip
    arrows = {trace.marker.symbol: trace for trace in comparison.ratio_figure(frame, threshold=0.05).data[1:]}
    assert set(arrows) == {"arrow-left", "arrow-right"}
    assert list(arrows["arrow-left"].y) == ["w2 mlp/tiny stock"] and arrows["arrow-left"].x[0] == pytest.approx(0.25)
    assert list(arrows["arrow-right"].y) == ["w2 mlp/tiny stock", "w2 mlp/tiny flat"]
    assert arrows["arrow-right"].x[0] == pytest.approx(4.0)
    assert [list(pair) for pair in arrows["arrow-right"].customdata] == [[0.036, 20.9], [1.2, 9.0]]


def test_memory_draws_each_configurations_highest_peak_and_noise_its_median_cv_over_repeats(cpu_run):
    """A review found the memory sentence (the highest peak of any repeat) beside a figure of the median repeat's,
    and the noise figure green where the answer said 'noisy': each now draws what its neighbour says."""
    runs = repeated(cpu_run, (1.0, 1.5, 1.2))
    runs["mem_peak_rss_mb"] = 100.0 + 10.0 * runs["repeat"] ** 2 * (runs["repeat"] != 1)  # repeat 2 peaks highest
    runs["step_ms_cv"] = runs["repeat"].map({0: 0.05, 1: 0.12, 2: 0.13})
    peaks = aggregate.typical_repeats(runs, by="mem_peak_rss_mb", highest=True)
    assert set(peaks["repeat"]) == {2} and (peaks["mem_peak_rss_mb"] == 140.0).all()
    shown = aggregate.typical_repeats(runs)  # the median repeat by step time: repeat 2 (1.2×), CV 0.13
    noise = aggregate.over_repeats(shown, runs, "step_ms_cv")
    assert noise["step_ms_cv"].tolist() == pytest.approx([0.12] * len(shown)) and noise.index.equals(shown.index)


def test_the_strategies_figure_draws_each_modelled_step_and_floor_and_nothing_for_ddp_alone():
    from reports.figures import whatif

    best = pd.DataFrame({"world_size": [16, 8], "step_ms": [101.0, 100.0], "zero_step_ms": [95.0, 90.0],
                         "zero_full_size_step_floor_ms": [110.0, 105.0],
                         "fsdp_step_ms": [float("nan")] * 2})  # fmt: skip
    figure = whatif.strategies_vs_gpus(best, cluster="dgx-h100")
    assert [trace.name for trace in figure.data] == ["DDP, predicted", "ZeRO-1, predicted", "ZeRO-1, full-size floor"]
    assert list(figure.data[1].x) == [8, 16] and list(figure.data[1].y) == [90.0, 95.0]  # by GPU count
    assert whatif.strategies_vs_gpus(best[["world_size", "step_ms"]], cluster="dgx-h100") is None


@pytest.mark.parametrize("scenario", ["cpu_run", "bucket_sweep"])
def test_the_scaling_legend_lists_the_lines_as_they_end_best_first_as_the_bars_rank(scenario):
    """A team lead read the scaling legend in name order ('stock bucket_cap_mb=1, …=25, …=5'; 'bucketed, fsdp,
    local, …') under step-time bars ranked fastest first: the legend is now the order the lines end at the
    largest world size, highest first, which against local at one rank is the bars' order."""
    configs = load(scenario).configs
    lines = [trace for trace in figures.scaling(configs, workload="mlp").data if trace.name != "ideal"]
    ends = [trace.y[-1] for trace in lines]
    assert len(lines) >= 3 and ends == sorted(ends, reverse=True)
    bars = [trace.name for trace in figures.step_time_by_strategy(configs, workload="mlp").data]
    assert [trace.name for trace in lines] == [name for name in bars if name in {t.name for t in lines}]

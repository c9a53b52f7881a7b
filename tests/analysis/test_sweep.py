"""Sweeps: interleaved repeats, the recommendation from a run's rows, resume, progress off a terminal."""

from __future__ import annotations

import contextlib
import dataclasses
import html
import io
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from terminal import Terminal

from harness import cli
from harness.analysis import stats
from harness.analysis.verdicts import decide, sweep
from harness.commands import console
from harness.commands.console.progress import Progress
from harness.config.bench import BenchConfig
from harness.config.grid import expand
from harness.launch import bench_run
from harness.results import store
from reports.pages import evidence
from reports.pages.run import run_sections


def test_repeats_interleave_so_drift_hits_every_configuration_alike():
    config = BenchConfig(gpus=1, impls=("naive", "stock"), size="tiny", repeats=3, baseline=False)
    order = [(c.impl, c.repeat) for c in expand(config, device="cpu")]
    # repeat by repeat, each pair of repeats an order then its reverse (grid.rotated): no strategy always first
    assert order == [("naive", 0), ("stock", 0), ("stock", 1), ("naive", 1), ("stock", 2), ("naive", 2)]
    assert all(c.config_id.endswith(f"-r{c.repeat}") for c in expand(config, device="cpu"))


def sweep_rows(
    curve: dict[float, float],
    world_sizes=(1, 2),
    *,
    repeats: int = 5,
    impl: str = "stock",
    shared: float = 0.0,
    buckets: dict[float, list[float]] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A sweep's rows: per world size, cap and repeat a configuration with a 1 % launch offset of its own,
    times one of sd `shared` that every cap of that launch (world size and repeat) shares, and 30 steps per
    rank scattered by 2 %; `buckets`: the layout each cap made (recorded on every launch of it)."""
    configs, steps = [], []
    rng = np.random.default_rng(0)
    launches = {(world, repeat): 1 + rng.normal(0, shared) for world in world_sizes for repeat in range(repeats)}
    for world in world_sizes:
        for cap, ms in curve.items():
            for repeat in range(repeats):
                config_id = f"w{world}-{cap}-r{repeat}"
                options = f'{{"bucket_cap_mb": {cap}}}'
                configs.append({"config_id": config_id, "repeat": repeat, "status": "ok", "impl": impl,
                                "impl_options": options,
                                "bucket_cap_mb": cap, "workload": "gpt2", "size": "tiny", "batch_size": 2,
                                "dtype": "fp32", "optimizer": "sgd", "world_size": world, "nnodes": 1, "grad_accum": 1,
                                "bucket_sizes_mb": (buckets or {}).get(cap)})  # fmt: skip
                launch = (1 + rng.normal(0, 0.01)) * launches[world, repeat]
                for step in range(30):
                    for rank in range(world):
                        steps.append({"config_id": config_id, "step": step, "rank": rank, "warmup": False,
                                      "step_ms": rng.normal(ms * launch, ms * 0.02)})  # fmt: skip
    return pd.DataFrame(configs), pd.DataFrame(steps)


def test_a_sweep_recommends_its_known_optimum_and_nothing_at_world_size_1():
    configs, steps = sweep_rows({1.0: 120.0, 5.0: 100.0, 25.0: 110.0})
    frame = sweep.recommendations(configs, steps)
    assert frame["world_size"].tolist() == [2]  # world size 1 has nothing to communicate
    row = frame.iloc[0]
    assert row["best_cap_mb"] == 5.0 and row["decision"] == "recommend" and row["repeats"] == 5
    assert 0.05 < row["gain_vs_default"] < 0.15
    assert "w2 gpt2/tiny stock: use bucket_cap_mb=5; fastest 5 MiB" in sweep.describe(row)
    assert "; the fewest repeats a cap had: 5" in sweep.describe(
        row
    )  # the fewest: --repeats auto reruns open caps only


def test_a_cap_is_named_as_given_not_as_the_whole_bytes_ddp_recorded():
    # DDP keeps int(0.05 MiB) = 52,428 bytes, recorded as 0.0499992 MiB; the user typed 0.05 and will again.
    configs, steps = sweep_rows({0.05: 80.0, 25.0: 100.0})
    configs.loc[configs["bucket_cap_mb"] == 0.05, "bucket_cap_mb"] = 52_428 / 2**20
    row = sweep.recommendations(configs, steps).iloc[0]
    assert row["best_cap_mb"] == 0.05 and "use bucket_cap_mb=0.05; fastest 0.05 MiB" in sweep.describe(row)


def test_the_local_baseline_gets_no_recommendation():
    configs, steps = sweep_rows({1.0: 120.0, 25.0: 100.0}, world_sizes=(2,), impl="local")
    assert sweep.recommendations(configs, steps).empty


def test_a_flat_optimum_says_any_of_its_caps_and_stars_none():
    configs, steps = sweep_rows({1.0: 130.0, 5.0: 100.0, 25.0: 100.2}, world_sizes=(2,))
    row = sweep.recommendations(configs, steps).iloc[0]
    assert row["decision"] == "flat" and sweep.answer(row) == "flat: any of 5, 25 MiB"


def test_one_repeat_per_cap_is_too_few_to_tell():
    configs, steps = sweep_rows({1.0: 130.0, 25.0: 100.0}, world_sizes=(2,), repeats=1)
    row = sweep.recommendations(configs, steps).iloc[0]
    assert sweep.answer(row).startswith("too few repeats to tell (have 1, need about ")
    assert "; leading so far 25 MiB: " in sweep.describe(row) and "fastest" not in sweep.describe(row)


def test_a_run_without_several_caps_has_no_recommendation():
    configs, steps = sweep_rows({25.0: 100.0})
    assert sweep.recommendations(configs, steps).empty


def test_recommendations_round_trip_through_the_store(tmp_path):
    configs, steps = sweep_rows({1.0: 120.0, 5.0: 100.0, 25.0: 110.0}, world_sizes=(2,))
    frame = sweep.recommendations(configs, steps)
    store.write_recommendations(tmp_path, frame)
    back = store.read_recommendations(tmp_path)
    assert back[["decision", "best_cap_mb", "repeats", "noise"]].to_dict("records") == [
        {"decision": "recommend", "best_cap_mb": 5.0, "repeats": 5, "noise": ""}
    ]
    assert pq.read_table(tmp_path / "recommendations.parquet").column("run_id").to_pylist() == [tmp_path.name]


def test_recommendations_written_before_their_run_id_read_it_from_their_folder():
    run = Path(__file__).resolve().parents[1] / "data" / "bucket_sweep"
    assert "run_id" not in pq.read_schema(run / "recommendations.parquet").names  # the fixture predates it
    assert set(store.read_recommendations(run)["run_id"]) == {"bucket_sweep"}


def test_progress_off_a_terminal_is_plain_lines(small_run):
    stream = io.StringIO()
    config_ids = sorted(store.written_config_ids(small_run))[:2]
    meta = store.read_json(small_run / "run.json")
    from harness.config.grid import Configuration

    pending = [Configuration.from_json(c) for c in meta["configurations"] if c["config_id"] in config_ids]
    progress = Progress(small_run, pending, stream=stream)
    for cfg in pending:
        progress.written(cfg)
    progress.close()
    lines = stream.getvalue().splitlines()
    assert [line.split("]")[0] for line in lines] == ["[1/2", "[2/2"]
    assert "\r" not in stream.getvalue()  # no bar redraws in a log


def test_a_stop_announces_what_reached_the_disk_unannounced_so_the_lines_add_up(small_run):
    """A signal between a configuration's write and its line once left '[1/20]' above '2 of 20 saved'."""
    stream = io.StringIO()
    meta = store.read_json(small_run / "run.json")
    from harness.config.grid import Configuration

    pending = [Configuration.from_json(c) for c in meta["configurations"]][:3]
    pending.append(dataclasses.replace(pending[0], config_id="never-written"))
    progress = Progress(small_run, pending, stream=stream)
    progress.written(pending[0])
    progress.catch_up()
    assert [line.split("]")[0] for line in stream.getvalue().splitlines()] == ["[1/4", "[2/4", "[3/4"]


def test_resume_runs_exactly_what_an_interrupted_run_did_not_write(small_run, tmp_path):
    results = tmp_path / "results"
    shutil.copytree(small_run, results / "e2e")
    written = sorted(store.written_config_ids(results / "e2e"))
    lost = [written[1], written[-1]]  # one of each world size: both launches are needed
    for config_id in lost:
        (results / "e2e" / "configs" / f"{config_id}.parquet").unlink()
    kept_mtimes = {p.name: p.stat().st_mtime_ns for p in (results / "e2e" / "configs").iterdir()}

    _, plan, done = bench_run.resume_run(results, "e2e")
    assert sorted(c.config_id for c in plan.configurations) == sorted(lost)
    assert done == len(written) - 2

    # The command's own entry point, in this process: a fresh interpreter would only add its start-up.
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["bench", "--resume", "e2e", "--results", str(results)])
    assert code == 0, out.getvalue() + err.getvalue()
    assert f"{len(written) - 2} finished configurations kept, 2 to run" in out.getvalue()
    assert store.written_config_ids(results / "e2e") == set(written)
    for name, mtime in kept_mtimes.items():  # nothing already written was touched
        assert (results / "e2e" / "configs" / name).stat().st_mtime_ns == mtime


def test_on_a_terminal_a_bar_shows_the_current_configuration_its_steps_and_an_eta(small_run, tmp_path):
    from harness.config.grid import Configuration
    from harness.handoff.progress import StepProgress

    run = tmp_path / "run"
    shutil.copytree(small_run, run)
    meta = store.read_json(run / "run.json")
    pending = [Configuration.from_json(c) for c in meta["configurations"][:2]]
    terminal = Terminal()
    progress = Progress(run, pending, stream=terminal)
    first = pending[0]
    progress.tick()  # its rank 0 has not said a word: not the steps of the configuration before
    StepProgress(run, pending[1].config_id, total_steps=9)(0)  # the second runs first: the bar names it
    progress.tick()
    StepProgress(run, first.config_id, total_steps=first.warmup + first.steps)(0)  # a warm-up step done
    progress.tick()
    StepProgress(run, first.config_id, total_steps=first.warmup + first.steps)(first.warmup)  # a timed one
    progress.tick()
    progress.written(first)
    StepProgress(run, pending[1].config_id, total_steps=pending[1].warmup + pending[1].steps)(0)  # the next's hint
    progress.tick()
    assert progress.on_terminal  # --repeats auto's standing goes into the bar, in place (console.rounds)
    progress.show_standing("verdicts open 1/2, about 53 s more")
    progress.close()
    shown = terminal.getvalue()
    assert f"verdicts open 1/2, about 53 s more · running {pending[1].label()}" in shown
    assert f"running {first.label()}" in shown and "launching the next configuration" in shown
    assert (
        shown.index(f"running {pending[1].label()}") < shown.index(f"running {first.label()}")
        and f"warm-up step 1/{first.warmup}" in shown
    )
    assert f"step 1/{first.steps}" in shown  # counted as --steps counts them
    assert "[1/2]" in shown and "<" in shown  # tqdm's elapsed<remaining: the ETA
    assert not list(run.glob("*.tmp"))


def with_layouts(configs: pd.DataFrame) -> pd.DataFrame:
    """Rows as torch ≥ 2.9 records them: an explicit cap caps the first bucket too."""
    return configs.assign(first_bucket_cap_mb=configs["bucket_cap_mb"])


def test_a_row_without_a_cap_option_is_never_pooled_with_an_explicit_25():
    explicit, explicit_steps = sweep_rows({1.0: 100.0, 25.0: 110.0}, world_sizes=(2,))
    default, default_steps = sweep_rows({25.0: 50.0}, world_sizes=(2,))  # DDP's layout: 25 MiB, first bucket 1 MiB
    default = default.assign(config_id="default-" + default["config_id"], impl_options="{}", first_bucket_cap_mb=1.0)
    default_steps = default_steps.assign(config_id="default-" + default_steps["config_id"])
    configs = pd.concat([with_layouts(explicit), default], ignore_index=True)
    frame = sweep.recommendations(configs, pd.concat([explicit_steps, default_steps], ignore_index=True))
    assert len(frame) == 1
    row = frame.iloc[0]
    assert row["caps_mb"] == "[1.0, 25.0]" and row["best_cap_mb"] == 1.0 and row["decision"] == "recommend"
    assert 0.07 < row["gain_vs_default"] < 0.13  # against the explicit 25 (110 ms), not a blend with the 50 ms rows


def test_one_cap_measured_under_two_first_buckets_is_never_pooled():
    # A resume under another torch: 25 MiB with first bucket 1 MiB (older) and with 25 MiB (≥ 2.9).
    older, older_steps = sweep_rows({1.0: 100.0, 25.0: 110.0}, world_sizes=(2,))
    newer, newer_steps = sweep_rows({1.0: 100.0, 25.0: 60.0}, world_sizes=(2,))
    newer = with_layouts(newer).assign(config_id="new-" + newer["config_id"])
    newer_steps = newer_steps.assign(config_id="new-" + newer_steps["config_id"])
    configs = pd.concat([older.assign(first_bucket_cap_mb=1.0), newer], ignore_index=True)
    frame = sweep.recommendations(configs, pd.concat([older_steps, newer_steps], ignore_index=True))
    row = frame.iloc[
        0
    ]  # 1 MiB (first bucket 1 MiB either way) against the older 25 MiB; the newer one alone is no sweep
    assert len(frame) == 1 and row["caps_mb"] == "[1.0, 25.0]" and row["best_cap_mb"] == 1.0
    assert 0.07 < row["gain_vs_default"] < 0.13  # 110 ms over 100, not a blend with the 60 ms rows


def test_the_line_says_how_much_longer_25_mib_takes_so_its_direction_cannot_be_misread():
    configs, steps = sweep_rows({1.0: 100.0, 5.0: 120.0, 25.0: 150.0}, world_sizes=(2,))
    row = sweep.recommendations(configs, steps).iloc[0]
    assert f"fastest 1 MiB: {row['best_step_ms']:.2f} ms" in sweep.describe(row)
    interval = f"({row['confidence'] * 100:.3g}% interval {1 + row['gain_low']:.2f}–{1 + row['gain_high']:.2f})"
    assert f"; 25 MiB takes {1 + row['gain_vs_default']:.2f}× as long {interval};" in sweep.describe(row)
    assert row["gain_low"] < row["gain_vs_default"] < row["gain_high"]  # the interval of the same ratio
    assert "vs 25 MiB" not in sweep.describe(row) and 1.45 < 1 + row["gain_vs_default"] < 1.55
    fastest_25 = sweep.recommendations(*sweep_rows({1.0: 150.0, 25.0: 100.0}, world_sizes=(2,))).iloc[0]
    said = sweep.describe(fastest_25)  # 25 MiB is the fastest: how far the next point is behind it, its interval
    assert "25 MiB takes" not in said and f"the next, 1 MiB, takes {1 + fastest_25['next_gain']:.2f}× as long (" in said
    assert 1.45 < 1 + fastest_25["next_gain"] < 1.55 and fastest_25["next_gain_low"] < fastest_25["next_gain"]


def test_a_cap_is_given_only_when_the_options_name_one():
    """DDP's default layout (no option, recorded as 25) is never taken for an explicit 25."""
    assert sweep.given_cap('{"bucket_cap_mb": 25}') == 25.0 and sweep.cap_given('{"bucket_cap_mb": 25}')
    assert sweep.given_cap('{"comm_hook": "fp16"}') is None and not sweep.cap_given('{"comm_hook": "fp16"}')
    assert sweep.given_cap("") is None and sweep.given_cap(None) is None


def test_caps_of_the_same_launches_are_judged_launch_by_launch_where_launches_differ_more_than_the_caps():
    # Launches 20 % apart hide a 10 % gain between independent sets of repeats; within each launch it is plain.
    configs, steps = sweep_rows({1.0: 100.0, 25.0: 110.0}, world_sizes=(2,), repeats=stats.PAIRED_FROM, shared=0.2)
    row = sweep.recommendations(configs, steps).iloc[0]
    assert bool(row["paired"]) and row["decision"] == stats.RECOMMEND and row["best_cap_mb"] == 1.0
    unpaired = sweep.recommendations(configs.drop(columns="repeat"), steps).iloc[0]
    assert not unpaired["paired"] and unpaired["decision"] == stats.TOO_FEW
    assert unpaired["repeats_needed"] > row["repeats_needed"]


def test_a_sweep_whose_caps_ran_in_different_repeats_is_not_paired():
    configs, steps = sweep_rows({1.0: 100.0, 25.0: 130.0}, world_sizes=(2,), repeats=stats.PAIRED_FROM + 1)
    dropped = configs[(configs["bucket_cap_mb"] == 1.0) & (configs["repeat"] == 3)]["config_id"]
    row = sweep.recommendations(configs[~configs["config_id"].isin(dropped)], steps).iloc[0]
    assert not row["paired"] and row["decision"] == stats.RECOMMEND  # 30 % is plain either way


def test_caps_that_make_the_same_buckets_are_one_measurement_flat_and_decided():
    """A model whose gradients fit under the smallest cap gets one bucket whatever the cap: once 'too few
    repeats to tell (need about 191)' for a comparison of a layout with itself."""
    configs, steps = sweep_rows({1.0: 100.0, 25.0: 112.0}, repeats=2)
    one_bucket = configs.assign(bucket_sizes_mb=[[0.19]] * len(configs))
    (row,) = sweep.recommendations(one_bucket, steps).to_dict("records")
    assert row["decision"] == stats.FLAT and json.loads(row["same_buckets_mb"]) == [0.19]
    assert row["repeats_needed"] is None  # one measurement: no number of repeats tells the caps apart
    assert sweep.answer(pd.Series(row)) == ("flat: any of 1, 25 MiB (every cap makes one bucket of 0.19 MiB, every "
                                            "gradient: a cap splits buckets only between parameters, so a smaller "
                                            "one may not split it)")  # fmt: skip
    # One program: its step is the caps' launches pooled, not the luckier cap's, and no ratio between them (a CPU
    # run's 'gain_vs_default 2.78' between two identical programs; its console named the 'fastest 1 MiB' of them).
    assert row["best_step_ms"] == pytest.approx(np.sqrt(100.0 * 112.0), rel=0.03) and row["best_cap_mb"] == 25.0
    assert all(row[key] is None or pd.isna(row[key]) for key in ("gain_vs_default", "next_cap_mb", "next_gain"))
    said = sweep.describe(pd.Series(row))
    assert f"; the caps' launches pooled: {row['best_step_ms']:.2f} ms, " in said and "fastest" not in said, said
    assert "the caps' launches pooled: " in console._fastest_cap(pd.Series(row))  # --repeats auto's line alike
    out = io.StringIO()
    with contextlib.redirect_stdout(out):  # two strategies' sweeps of one layout: the why said once, not twice
        console.recommendations(pd.DataFrame([row, {**row, "impl": "zero"}]))
    assert out.getvalue().count(sweep.ONLY_BETWEEN) == 1, out.getvalue()
    assert "zero: flat: any of 1, 25 MiB (every cap makes the same buckets); " in out.getvalue()
    split = one_bucket.assign(bucket_sizes_mb=[[0.19]] * (len(configs) - 1) + [[0.1, 0.09]])  # one layout differs
    (row,) = sweep.recommendations(split, steps).to_dict("records")
    assert row["same_buckets_mb"] is None and row["decision"] == stats.RECOMMEND  # judged on its repeats


def test_the_cap_tables_cap_is_the_one_its_answer_gives_not_a_flat_sweeps_fastest():
    """A walkthrough's cap table read 'fastest cap (MiB) 100' in the row whose answer was 'flat: any of 1, 5, 25,
    100 MiB' (every cap made one bucket): the cap column says what the answer says."""
    from reports.pages.run import run_sections

    configs, steps = sweep_rows({1.0: 100.0, 5.0: 98.0, 25.0: 112.0}, repeats=2)
    one_bucket = configs.assign(bucket_sizes_mb=[[0.19]] * len(configs))
    flat = sweep.recommendations(one_bucket, steps)
    table = run_sections.recommendation_table(flat)
    assert "<th>cap (MiB), as the answer says</th>" in table and "<td>any</td>" in table and "<td>5</td>" not in table
    assert "their launches pooled)</th>" in table
    # the step and its interval as the headline rounds it ('145.0 ms'), not '144.96' with '94.80–221.67' beside it
    wide = run_sections.recommendation_table(
        flat.assign(best_step_ms=144.96, best_ci_low_ms=94.8, best_ci_high_ms=221.67)
    )
    assert "<td>145.0</td>" in wide and "<td>94.80–221.7</td>" in wide and "144.96" not in wide
    tied = flat.assign(equivalent_caps_mb=json.dumps([1.0, 5.0]))  # flat among some caps: those
    assert run_sections.cap_cell(tied.iloc[0]) == "any of 1, 5"
    decided = sweep.recommendations(*sweep_rows({1.0: 80.0, 25.0: 100.0}, repeats=stats.PAIRED_FROM))
    assert decided["decision"].iloc[0] == stats.RECOMMEND and run_sections.cap_cell(decided.iloc[0]) == "1"
    assert run_sections.cap_cell(decided.assign(decision=stats.TOO_FEW).iloc[0]) == "1 (leading so far)"


def test_an_interval_too_wide_to_bound_the_step_is_said_so_not_printed():
    """A walkthrough read '95% CI 20.36–169658.62' after two repeats: a t-interval of one degree of freedom."""
    configs, steps = sweep_rows({1.0: 130.0, 25.0: 100.0}, world_sizes=(2,), repeats=1)
    row = sweep.recommendations(configs, steps).iloc[0].copy()
    row["best_ci_low_ms"], row["best_ci_high_ms"] = 20.36, 169658.62
    assert "its step's 95% CI too wide to bound it until more repeats narrow it" in sweep.describe(row)
    row["best_ci_low_ms"], row["best_ci_high_ms"] = 95.0, 105.0
    assert ", its step's 95% CI 95.00–105.00" in sweep.describe(row)  # the step's, beside the ratio's interval


def test_an_interval_that_bounds_nothing_is_said_too_wide_on_the_console_and_the_page_alike():
    """A walkthrough read 'its 95% CI (ms) 4.95–9340.62' in the run page's cap table (two repeats' t-interval)."""
    from harness.analysis.verdicts.sweep import interval_text
    from reports.pages.run import run_sections

    assert interval_text(20.36, 23.1) == "20.36–23.10" and interval_text(float("nan"), float("nan")) == ""
    assert interval_text(4.95, 9340.62) == "too wide to bound it until more repeats narrow it"
    frame = pd.DataFrame([{"workload": "mlp", "impl": "stock", "world_size": 2, "decision": "too few repeats to tell",
                           "best_cap_mb": 1.0, "best_step_ms": 7.0, "best_ci_low_ms": 4.95, "best_ci_high_ms": 9340.62,
                           "repeats": 2, "noise": "", "caps_mb": "[1.0, 25.0]", "reference_ratio": float("nan"),
                           "reference_ratio_low": float("nan"), "reference_ratio_high": float("nan"),
                           "equivalent_caps_mb": "[]", "repeats_needed": 9}])  # fmt: skip
    assert "<td>too wide to bound it until more repeats narrow it</td>" in run_sections.recommendation_table(frame)


def test_a_ratio_interval_that_bounds_nothing_is_said_too_wide_as_a_steps_is():
    """A walkthrough's page said a step's interval was 'too wide to bound it' and, lines below, a ratio's after the
    same two repeats '<0.01–>1000': one wording for an interval that bounds nothing."""
    configs, steps = sweep_rows({1.0: 80.0, 25.0: 100.0}, world_sizes=(2,), repeats=2)
    row = sweep.recommendations(configs, steps).iloc[0].copy()
    row["gain_low"], row["gain_high"], row["confidence"] = 0.001 - 1, 2500.0 - 1, 0.995
    assert sweep.versus_reference(row) == "25 MiB takes 1.25× as long (99.5% interval " + sweep.TOO_WIDE + ")"
    assert sweep.ratio_interval_text(0.004, 140.0) == sweep.TOO_WIDE  # '<0.01–140' bounds nothing either
    assert sweep.ratio_interval_text(0.69, 1.37) == "0.69–1.37"
    proof = {"confidence": 0.95, "low": 0.004, "high": 83191606.53}
    assert evidence.interval_text(proof) == f"95% interval {sweep.TOO_WIDE}"


EIGHT_OF_4 = [4.04] + [4.0] * 7  # caps 1 and 2 on mlp/small: the same 8 buckets of 4 MiB
LAYOUTS = {1.0: EIGHT_OF_4, 2.0: EIGHT_OF_4, 25.0: [28.07, 4.0], 100.0: [32.07]}


def test_caps_that_made_one_layout_are_one_point_never_the_luckier_named_apart():
    """A run said 'so far fastest 2 MiB … need about 236' and an identical one 'so far fastest 1 MiB … need about
    310': caps 1 and 2 made the same buckets, so the luckier of one layout was named and its need sized from its
    luck. However lucky one of them is (cap 2 here 25 % faster in every launch: no spread one program has), they are
    one point: per launch the geometric mean of their medians, named together, the first a value to type."""
    for lucky in (1.0, 2.0):
        curve = {1.0: 100.0, 2.0: 100.0, 25.0: 140.0, 100.0: 150.0, lucky: 75.0}
        configs, steps = sweep_rows(curve, world_sizes=(2,), buckets=LAYOUTS)
        row = sweep.recommendations(configs, steps).iloc[0]
        assert row["one_layout_caps_mb"] == "[[1.0, 2.0]]" and row["best_cap_mb"] == 1.0
        assert sweep.answer(row) == "use bucket_cap_mb=1 (or 2: the same buckets)", sweep.answer(row)
        assert row["best_step_ms"] == pytest.approx(np.sqrt(75.0 * 100.0), rel=0.03)  # the two caps' launches pooled
        assert "leading" not in sweep.describe(row) and "fastest 1 MiB (or 2: the same buckets): " in sweep.describe(
            row
        )
        (cap_verdict,) = [
            v
            for v in decide.verdicts(configs.assign(step_ms_median=1.0), steps, confidence=0.95)
            if v.kind == decide.CAP
        ]
        assert cap_verdict.word == sweep.answer(row) and len(cap_verdict.config_ids) == 20  # every cap of each point
    flat = sweep.recommendations(*sweep_rows({1.0: 100.0, 2.0: 100.5, 25.0: 101.0}, world_sizes=(2,),
                                             buckets={**LAYOUTS, 25.0: EIGHT_OF_4})).iloc[0]  # fmt: skip
    assert flat["decision"] == stats.FLAT and isinstance(
        flat["same_buckets_mb"], str
    )  # every cap one layout: as before
    assert pd.isna(flat["one_layout_caps_mb"])


def test_the_25_mib_point_is_the_layout_25_made_and_is_named_with_its_caps():
    configs, steps = sweep_rows({1.0: 100.0, 25.0: 150.0, 100.0: 150.0}, world_sizes=(2,),
                                buckets={1.0: EIGHT_OF_4, 25.0: [32.07], 100.0: [32.07]})  # fmt: skip
    row = sweep.recommendations(configs, steps).iloc[0]
    assert row["one_layout_caps_mb"] == "[[25.0, 100.0]]" and row["decision"] == stats.RECOMMEND
    assert "; 25 MiB (or 100: the same buckets) takes 1.4" in sweep.describe(row)


def test_each_sweep_of_a_knob_sweep_names_the_options_it_adds_to_ddp_as_shipped():
    """A sweep of comm_hook × find_unused_parameters printed four verdicts all 'w2 gpt2/small stock: …' (console,
    --repeats auto's lines, the page's table), only the answer paragraph telling them apart."""
    from reports.pages import alerts
    from reports.pages.run import run_sections

    frames = []
    for hook in ("none", "bf16"):
        configs, steps = sweep_rows({1.0: 100.0, 25.0: 130.0}, world_sizes=(2,), repeats=2)
        options = configs["impl_options"].map(
            lambda o, h=hook: json.dumps({**json.loads(o), "comm_hook": h, "find_unused_parameters": False})
        )
        ids = configs["config_id"] + hook
        frames.append(
            (configs.assign(impl_options=options, config_id=ids), steps.assign(config_id=steps["config_id"] + hook))
        )
    configs, steps = (pd.concat(parts, ignore_index=True) for parts in zip(*frames, strict=True))
    frame = sweep.recommendations(configs, steps)
    names = {"w2 gpt2/tiny stock:", "w2 gpt2/tiny stock comm_hook=bf16:"}  # the defaults asked by name unsaid
    assert {sweep.describe(r).split(": ")[0] + ":" for _, r in frame.iterrows()} == names
    assert {console._fastest_cap(r).split(": ")[0] + ":" for _, r in frame.iterrows()} == names
    found = decide._cap_verdicts(configs, steps, stats.CONFIDENCE, None)  # --repeats auto's lines
    assert {v.subject + ":" for v in found if v.kind == decide.CAP} == names
    assert ">stock comm_hook=bf16<" in run_sections.recommendation_table(frame)
    said, _ = alerts.cap_verdicts(frame, workload="gpt2", world=2, explain=False)
    assert "stock comm_hook=bf16 — " in said and "find_unused_parameters" not in said


def test_a_smaller_sizes_sweep_that_pooled_its_largest_caps_names_the_way_to_the_full_sizes_cap():
    """A walkthrough's gpt2/small (16.2 MiB of gradients) read '25 MiB (or 50, 100: the same buckets)' and no more:
    that the full size's cap needs --size full or predict went unsaid."""
    from harness.analysis.verdicts import layouts

    row = {"workload": "gpt2", "size": "small", "one_layout_caps_mb": "[[1.0, 2.0], [25.0, 50.0, 100.0]]"}
    said = layouts.smaller_size_caps(row, run="r1")
    assert said.startswith("; caps 25, 50, 100 MiB made one bucket layout of gpt2/small's gradients")
    assert "--size full" in said and "ddpbench predict --run r1 --cluster NAME" in said
    assert layouts.smaller_size_caps({**row, "size": "full"}, run="r1") == ""  # the size you train: said as is
    assert layouts.smaller_size_caps({**row, "one_layout_caps_mb": None}, run="r1") == ""


def test_a_sweep_without_25_mib_says_its_rule_and_why_the_command_to_decide_it_keeps_its_caps():
    """A review read 'a cap is recommended only when it beats the 25 MiB cap' over a sweep of 1 and 5 MiB, whose
    command to decide it never added 25: the rule there is 'beats every other cap swept', said, with why the
    command keeps the sweep's caps (its repeats and time are the open verdicts') and how to judge against 25."""
    open_sweep = sweep.recommendations(*sweep_rows({1.0: 130.0, 5.0: 100.0}, world_sizes=(2,), repeats=1))
    said = sweep.without_reference(open_sweep)
    assert "when it beats every other cap swept, which says nothing against DDP's default" in said
    assert "no sweep here has it" in said and "add 25 to its --bucket-cap-mb" in said
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        console.recommendations(open_sweep)
    assert said in out.getvalue().splitlines()[0]
    assert said in html.unescape(run_sections.recommendation_table(open_sweep))  # the run page says it too
    decided = sweep.recommendations(*sweep_rows({1.0: 130.0, 5.0: 100.0}, world_sizes=(2,)))
    assert decided.iloc[0]["decision"] != stats.TOO_FEW and "command" not in sweep.without_reference(decided)
    with_25 = sweep.recommendations(*sweep_rows({1.0: 130.0, 25.0: 100.0}, world_sizes=(2,), repeats=1))
    assert sweep.without_reference(with_25) == ""
    both = pd.concat([open_sweep, with_25.assign(world_size=3)], ignore_index=True)
    assert "(1 of 2 sweeps lack it)" in sweep.without_reference(both)

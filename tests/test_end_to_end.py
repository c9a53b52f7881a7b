"""`ddpbench bench` end to end on the CPU: rows, columns and the parity verdict."""

from __future__ import annotations

import json

import pandas as pd

# The columns every configs part promises (docs/results.md).
PROMISED_CONFIG_COLUMNS = [
    "schema_version",
    "run_id",
    "config_id",
    "status",
    "error",
    "impl",
    "workload",
    "size",
    "world_size",
    "nnodes",
    "bucket_cap_mb",
    "batch_size",
    "device",
    "backend",
    "steps",
    "warmup",
    "step_ms_median",
    "step_ms_p10",
    "step_ms_p90",
    "samples_per_s",
    "scaling_efficiency",
    "exposed_comm_ms",
    "mem_peak_nvml_mb",
    "mem_peak_allocated_mb",
    "mem_peak_reserved_mb",
    "mem_peak_rss_mb",
    "parity_max_abs_diff",
    "parity_ok",
    "torch_version",
    "gpu_name",
    "hostname",
    "git_sha",
    "started_at",
]
PROMISED_STEP_COLUMNS = [
    "run_id",
    "config_id",
    "rank",
    "step",
    "step_ms",
    "forward_ms",
    "backward_ms",
    "sync_ms",
    "optimizer_ms",
]


LADDER = ["bucketed", "dataparallel", "flat", "local", "naive", "stock"]


def test_bench_writes_one_config_row_per_strategy_and_world_size(small_run):
    configs = pd.read_parquet(small_run / "configs")
    assert sorted(zip(configs["impl"], configs["world_size"], strict=True)) == [(i, w) for i in LADDER for w in (1, 2)]
    assert set(PROMISED_CONFIG_COLUMNS) <= set(configs.columns)
    assert configs["config_id"].iloc[0].endswith("local")  # the baseline runs first in each group


def test_dataparallel_is_skipped_on_the_cpu_with_its_reason_and_the_rest_run(small_run):
    configs = pd.read_parquet(small_run / "configs").set_index(["impl", "world_size"])
    for world in (1, 2):
        assert configs.loc[("dataparallel", world), "status"] == "skipped"
        assert "needs CUDA" in configs.loc[("dataparallel", world), "error"]
    others = configs.drop(index="dataparallel", level="impl")
    assert set(others["status"]) == {"ok"}
    # the fixed cost is shared out over the configurations launched: a skipped one launches nothing
    assert json.loads((small_run / "summary.json").read_text())["session"]["launched"] == len(others)


def test_bench_writes_every_step_of_every_rank(small_run):
    steps = pd.read_parquet(small_run / "steps")
    assert set(PROMISED_STEP_COLUMNS) <= set(steps.columns)
    per_config = steps.groupby("config_id").size()
    configs = pd.read_parquet(small_run / "configs").set_index("config_id")
    configs = configs[configs["status"] == "ok"]
    expected = configs["world_size"] * (configs["steps"] + configs["warmup"])
    assert per_config.sort_index().tolist() == expected.sort_index().tolist()
    measured = steps[~steps["warmup"]]
    assert len(measured) == (configs["world_size"] * configs["steps"]).sum()
    assert (steps["step_ms"] > 0).all()


def test_step_time_is_the_slowest_rank_median(small_run):
    configs = pd.read_parquet(small_run / "configs").set_index("config_id")
    steps = pd.read_parquet(small_run / "steps")
    slowest = steps[~steps["warmup"]].groupby(["config_id", "step"])["step_ms"].max()
    for config_id, row in configs[configs["status"] == "ok"].iterrows():
        assert row["step_ms_median"] == slowest.loc[config_id].median()


def test_communicating_strategies_match_the_single_process_reference(small_run):
    configs = pd.read_parquet(small_run / "configs")
    communicating = configs[configs["impl"].isin(["naive", "flat", "stock", "bucketed"])]
    assert len(communicating) == 8
    assert communicating["parity_ok"].tolist() == [True] * 8
    local_two_ranks = configs[(configs["impl"] == "local") & (configs["world_size"] == 2)].iloc[0]
    # Each local rank trains on its own batch: the check sees a difference and does not judge it.
    assert local_two_ranks["parity_max_abs_diff"] > 1e-4
    assert local_two_ranks["parity_ok"] is None


def test_cpu_run_has_null_gpu_memory_and_measured_rss(small_run):
    configs = pd.read_parquet(small_run / "configs")
    configs = configs[configs["status"] == "ok"]
    assert configs["mem_peak_nvml_mb"].isna().all()
    assert configs["mem_peak_allocated_mb"].isna().all()
    assert (configs["mem_peak_rss_mb"] > 10).all()
    assert set(configs["device"]) == {"cpu"} and set(configs["backend"]) == {"gloo"}


def test_derived_metrics_use_the_local_baseline_and_world_size_one(small_run):
    configs = pd.read_parquet(small_run / "configs").set_index(["impl", "world_size"])
    stock2, local2 = configs.loc[("stock", 2)], configs.loc[("local", 2)]
    assert stock2["speedup_vs_local"] == local2["step_ms_median"] / stock2["step_ms_median"]
    stock1 = configs.loc[("stock", 1)]
    assert stock2["scaling_efficiency"] == stock2["samples_per_s"] / (2 * stock1["samples_per_s"])
    local1 = configs.loc[("local", 1)]
    assert stock2["scaling_efficiency_vs_local"] == stock2["samples_per_s"] / (2 * local1["samples_per_s"])


def test_communication_is_measured_for_every_communicating_strategy_and_its_bounds_hold(small_run):
    configs = pd.read_parquet(small_run / "configs")
    ok = configs[(configs["status"] == "ok") & (configs["world_size"] == 2)].set_index("impl")
    for impl in ("naive", "flat", "stock", "bucketed"):
        row = ok.loc[impl]
        assert row["comm_ms"] > 0, impl
        assert 0 <= row["exposed_comm_ms"] <= row["comm_ms"], impl
        assert 0 <= row["overlap_efficiency"] <= 1, impl
    assert ok.loc["naive", "overlap_efficiency"] <= 0.1 and ok.loc["flat", "overlap_efficiency"] <= 0.1
    assert ok.loc["local", "comm_ms"] == 0
    steps = pd.read_parquet(small_run / "steps")
    timed = steps.dropna(subset=["comm_ms"])
    assert ((timed["exposed_comm_ms"] >= 0) & (timed["exposed_comm_ms"] <= timed["comm_ms"] + 1e-9)).all()


def test_stock_and_bucketed_record_ddps_default_cap_and_the_same_buckets(small_run):
    configs = pd.read_parquet(small_run / "configs")
    rows = configs[configs["impl"].isin(["stock", "bucketed"]) & (configs["world_size"] == 2)].set_index("impl")
    assert list(rows["bucket_cap_mb"]) == [25.0, 25.0] and list(rows["first_bucket_cap_mb"]) == [1.0, 1.0]
    assert list(rows.loc["stock", "bucket_sizes_mb"]) == list(rows.loc["bucketed", "bucket_sizes_mb"])


def test_the_bucket_timeline_has_every_collective_of_every_measured_step(small_run):
    timeline = pd.read_parquet(small_run / "timeline")
    configs = pd.read_parquet(small_run / "configs").set_index("config_id")
    for config_id, rows in timeline.groupby("config_id"):
        measured = rows[~rows["warmup"]]
        assert set(measured["step"]) == set(range(2, 2 + 4)), config_id  # --warmup 2 --steps 4
        assert (measured["launched_ms"] <= measured["done_ms"]).all() and (measured["bytes"] > 0).all()
        assert configs.loc[config_id, "impl"] in {"naive", "flat", "stock", "bucketed"}


def test_run_json_carries_the_environment_and_command(small_run):
    import json

    meta = json.loads((small_run / "run.json").read_text())
    assert meta["device"] == "cpu"
    assert "bench" in meta["command"]
    assert meta["environment"]["torch_version"]
    assert len(meta["configurations"]) == 12


def test_each_launch_records_the_load_it_ran_under(small_run):
    """What else ran beside each launch (harness.results.contention): measured at its start and end, per launch."""
    import os

    from harness.results import contention

    records = contention.read(small_run)
    meta = json.loads((small_run / "run.json").read_text())
    assert len(records) == json.loads((small_run / "summary.json").read_text())["session"]["launches"]
    for record in records:
        assert len(record["load_1m"]) == 2 and all(load >= 0 for load in record["load_1m"])
        assert record["cpus"] == os.cpu_count() and record["started_at"] <= record["ended_at"]
        world = int(record["launch"].removeprefix("world-"))
        assert record["run_threads"] == world * meta["threads_per_rank"] + 1  # its ranks' threads and the launcher
        assert record["device"] == "cpu" and record["gpus"] is None  # no GPU watched: null, not "none there"
    ran = {c for r in records for c in r["configurations"]}
    configs = pd.read_parquet(small_run / "configs")
    assert set(configs.loc[configs["status"] != "skipped", "config_id"]) <= ran


def test_profile_writes_one_readable_chrome_trace_per_rank(small_run):
    import json

    configs = pd.read_parquet(small_run / "configs")
    row = configs[(configs["impl"] == "stock") & (configs["world_size"] == 2)].iloc[0]
    trace_dir = small_run / row["trace_dir"]
    assert sorted(p.name for p in trace_dir.iterdir()) == ["rank0.json", "rank1.json"]
    for rank in (0, 1):
        trace = json.loads((trace_dir / f"rank{rank}.json").read_text())
        assert trace["distributedInfo"]["rank"] == rank  # what HTA reads to tell ranks apart
        names = {event.get("name", "") for event in trace["traceEvents"]}
        assert any(name.startswith("ProfilerStep#") for name in names)


def test_summary_json_holds_the_answer_the_last_line_says_with_its_figures_from_the_rows(small_run):
    """A CI script reads the answer from summary.json, not the console: the leader to deploy at the largest world
    size, its step (the geometric mean of its repeats' medians, recomputed here from the rows) and whether it is
    decided, as the last line says it."""
    import numpy as np

    from harness.commands.console import ending

    (answer,) = json.loads((small_run / "summary.json").read_text())["answer"]  # one workload
    assert "the answer (the strategy to deploy, at the largest world size): " + answer["said"] == ending.answer_line(
        small_run
    )
    configs = pd.read_parquet(small_run / "configs")
    ok = configs[(configs["status"] == "ok") & (configs["impl"] == answer["impl"])]
    world = int(configs.loc[configs["status"] == "ok", "world_size"].max())
    assert (answer["workload"], answer["size"], answer["world_size"]) == ("mlp", "tiny", world)
    assert answer["impl"] == "stock" and answer["to_deploy"]  # naive, flat and bucketed are instruments
    medians = ok.loc[ok["world_size"] == world, "step_ms_median"]
    assert answer["step_ms"] == np.exp(np.log(medians).mean()).item()
    assert f"{answer['step_ms']:.2f}" in answer["said"] or f"{answer['step_ms']:.1f}" in answer["said"]
    assert answer["repeats"] == len(medians) == 1 and answer["decided"] is False  # one repeat decides nothing
    assert answer["bucket_cap_mb"] == ok["bucket_cap_mb"].iloc[0] and answer["parity_ok"] is True

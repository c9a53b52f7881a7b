"""Gradient accumulation through a real launch: at world size 2, DDP (stock) and bucketed all-reduce once per step,
after the last of its K micro-batches, so the first K−1 really ran inside no_sync(); parity holds, and the rows
name K. One small launch (mlp/tiny, two strategies, world size 2 only, 2 measured steps): the shared small_run
(tests/conftest.py) measures every strategy at K=1, whose row counts other tests read."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import run_ddpbench

from harness.results import store

K = 3


@pytest.fixture(scope="module")
def accumulated_run(tmp_path_factory):
    results = tmp_path_factory.mktemp("grad-accum")
    done = run_ddpbench(
        "bench", "--gpus", "2", "--largest-only", "--no-baseline", "--impls", "stock,bucketed", "--workloads", "mlp",
        "--size", "tiny", "--steps", "2", "--warmup", "1", "--grad-accum", str(K), "--bucket-timeline",
        "--repeats", "1", "--results", str(results), "--run-id", "k",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return results / "k", done.stdout


def test_ddp_and_bucketed_all_reduce_once_a_step_not_once_a_micro_batch(accumulated_run):
    run, _ = accumulated_run
    configs = store.read_configs(run).set_index("config_id")
    timeline = pd.concat(pd.read_parquet(part) for part in sorted((run / "timeline").glob("*.parquet")))
    timeline = timeline[~timeline["warmup"] & (timeline["collective"] == "all_reduce")]
    assert set(configs["impl"]) == {"stock", "bucketed"} and set(configs["grad_accum"]) == {K}
    for config_id, row in configs.iterrows():
        per_step = timeline[timeline["config_id"] == config_id].groupby(["rank", "step"]).size()
        assert len(per_step) == 2 * 2, config_id  # both ranks' two measured steps were timed
        # one all-reduce per bucket a step: a sync on every micro-batch would launch K times as many
        assert set(per_step) == {len(row["bucket_sizes_mb"])}, (config_id, per_step.to_dict())
        assert row["parity_ok"]


def test_the_console_names_k_and_the_global_batch(accumulated_run):
    _, stdout = accumulated_run
    assert f"w2 mlp/tiny stock K={K} (global batch" in stdout

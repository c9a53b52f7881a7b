"""Every workload runs end to end under the launcher with two strategies, and trains right."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import run_ddpbench

import workloads


# The subprocess's own limit (480 s) must end before pytest's, so that its message (the tail of the
# run's output) is what a failure shows.
@pytest.mark.timeout(540)
def test_every_workload_runs_with_stock_and_bucketed_at_two_world_sizes(tmp_path):
    names = workloads.names()
    done = run_ddpbench(
        "bench", "--gpus", "2", "--impls", "stock,bucketed", "--workloads", ",".join(names), "--size", "tiny",
        "--steps", "2", "--warmup", "1", "--no-baseline", "--repeats", "1", "--results", str(tmp_path),
        "--run-id", "all", timeout=480,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # every strategy's verdict against the reference is said, open with one repeat (a walkthrough found them only
    # on the run page unless --repeats auto)
    verdicts = done.stdout.split("ddpbench: each strategy against stock at its world size", 1)[1]
    assert all(f"  w2 {name}/tiny bucketed vs stock: open after 1 repeat; " in verdicts for name in names)
    configs = pd.read_parquet(tmp_path / "all" / "configs")
    assert len(configs) == len(names) * 2 * 2
    failed = configs[configs["status"] != "ok"]
    assert failed.empty, failed[["config_id", "error"]].to_string()
    assert configs["parity_ok"].tolist() == [True] * len(configs)
    assert (configs["flops_per_sample"] > 0).all() and (configs["param_count"] > 0).all()
    assert (configs["activation_mb"] > 0).all()  # what each forward keeps for backward, counted once a setup
    assert configs["activation_top"].str.len().gt(0).all()  # and who keeps the most of it
    language = configs[configs["workload"].isin(["gpt2", "bert"])]
    assert (language["tokens_per_s"] > 0).all()

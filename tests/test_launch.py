"""The launcher: torchrun commands, core shares, and what a launch that dies leaves behind."""

from __future__ import annotations

import sys

from harness.launch import launcher as launch
from harness.plan.config import BenchConfig, expand
from harness.results import store


def test_single_node_uses_standalone_and_several_nodes_the_c10d_rendezvous(tmp_path):
    one = BenchConfig(gpus=2, impls=("naive",))
    command = launch.torchrun_command(one, local_ranks=2, plan_path=tmp_path / "p.json", run_id="r")
    assert "--standalone" in command and "--nproc-per-node=2" in command
    assert command[-3:] == ["-m", "harness.rank.worker", str(tmp_path / "p.json")]
    two = BenchConfig(gpus=8, impls=("naive",), nnodes=2, node_rank=1, rdzv_endpoint="node0:29500", run_id="job")
    command = launch.torchrun_command(two, local_ranks=8, plan_path=tmp_path / "p.json", run_id="r")
    assert "--standalone" not in command
    assert {"--nnodes=2", "--node-rank=1", "--rdzv-backend=c10d", "--rdzv-endpoint=node0:29500", "--rdzv-id=r"} <= set(
        command
    )


def test_every_simulated_gpu_gets_the_same_share_of_cores_at_every_world_size():
    assert launch.threads_per_rank(device="cpu", max_local_ranks=2, cpu_count=8) == 4
    assert launch.threads_per_rank(device="cpu", max_local_ranks=4, cpu_count=2) == 1
    assert launch.threads_per_rank(device="cuda", max_local_ranks=8, cpu_count=64) == 1


def test_a_launch_that_dies_leaves_its_finished_configurations_and_records_the_rest_failed(tmp_path, monkeypatch):
    config = BenchConfig(gpus=2, impls=("naive",), size="tiny", results=tmp_path, baseline=False)
    configurations = expand(config, device="cpu")
    plan = launch.create_run(config, configurations, run_id="dies", device="cpu", environment={})
    first = configurations[0]  # pretend world size 1 finished before the crash
    store.write_configuration(
        plan.run, first.config_id, {"run_id": "dies", "config_id": first.config_id, "status": "ok"}
    )

    def crashing_torchrun(config, *, local_ranks, plan_path, run_id, log_dir):
        return [sys.executable, "-c", "import sys; print('RuntimeError: rank 1 died'); sys.exit(3)"]

    monkeypatch.setattr(launch, "torchrun_command", crashing_torchrun)
    seen = []
    codes = launch.run_groups(config, plan, on_written=lambda cfg: seen.append(cfg.config_id))
    rows = store.read_configs(plan.run).set_index("config_id")
    assert codes == [0, 3]  # world size 1 had nothing left to run
    assert rows.loc[first.config_id, "status"] == "ok"  # kept, not overwritten
    second = configurations[1].config_id
    assert rows.loc[second, "status"] == "failed"
    assert rows.loc[second, "error_kind"] == "launch"  # no rank ever started: not retried
    assert (
        "exited with code 3" in rows.loc[second, "error"] and "RuntimeError: rank 1 died" in rows.loc[second, "error"]
    )
    assert seen == [second]

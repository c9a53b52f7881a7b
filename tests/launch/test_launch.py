"""The launcher: torchrun commands, core shares, what a launch that dies leaves behind, and a
launch that hangs (any rank module: `bench`'s worker and `collectives` share the one launch)."""

from __future__ import annotations

import sys
import time

import pytest

from harness.config.bench import BenchConfig
from harness.config.grid import expand
from harness.config.ranks import FORK_RANKS, GPU_ZYGOTE_ENV, forks_ranks, threads_per_rank
from harness.launch import bench_run, supervise, torchrun
from harness.launch import launcher as launch
from harness.launch.rendezvous import ONE_NODE
from harness.results import store


def test_single_node_uses_its_own_rendezvous_and_several_nodes_the_c10d_one(tmp_path):
    one = launch.rendezvous(BenchConfig(gpus=2, impls=("naive",)), "r")
    command = torchrun.torchrun_command(launch.WORKER, tmp_path / "p.json", local_ranks=2, rendezvous=one)
    assert f"--rdzv-backend={ONE_NODE}" in command and "--nproc-per-node=2" in command
    assert command[-3:] == ["-m", "harness.rank.worker", str(tmp_path / "p.json")]
    two = BenchConfig(gpus=8, impls=("naive",), nnodes=2, node_rank=1, rdzv_endpoint="node0:29500", run_id="job")
    command = torchrun.torchrun_command(
        "harness.rank.collectives", tmp_path / "p.json", local_ranks=8, rendezvous=launch.rendezvous(two, "r")
    )
    assert not any(ONE_NODE in flag for flag in command)
    assert {"--nnodes=2", "--node-rank=1", "--rdzv-backend=c10d", "--rdzv-endpoint=node0:29500", "--rdzv-id=r"} <= set(
        command
    )
    assert command[-3:] == ["-m", "harness.rank.collectives", str(tmp_path / "p.json")]


def test_ranks_are_forked_from_the_agent_and_cuda_ranks_start_fresh_unless_the_gpu_zygote_is_on(tmp_path, monkeypatch):
    one = launch.rendezvous(BenchConfig(gpus=2, impls=("naive",)), "r")

    def command(device):
        return torchrun.torchrun_command(launch.WORKER, tmp_path / "p.json", local_ranks=2, rendezvous=one,
                                         fork_ranks=forks_ranks(device))  # fmt: skip

    for switch in (None, "0"):  # off by default until a GPU has measured it
        monkeypatch.delenv(GPU_ZYGOTE_ENV, raising=False) if switch is None else monkeypatch.setenv(
            GPU_ZYGOTE_ENV, switch
        )
        assert command("cpu")[2:4] == ["harness.launch.agent", FORK_RANKS]  # the switch is the GPU's alone
        fresh = command("cuda")
        assert FORK_RANKS not in fresh and fresh[2] == "harness.launch.agent"
    monkeypatch.setenv(GPU_ZYGOTE_ENV, "1")
    assert command("cuda")[2:4] == ["harness.launch.agent", FORK_RANKS]


def test_every_simulated_gpu_gets_the_same_share_of_cores_at_every_world_size():
    assert threads_per_rank(device="cpu", max_local_ranks=2, cpu_count=8) == 4
    assert threads_per_rank(device="cpu", max_local_ranks=4, cpu_count=2) == 1
    assert threads_per_rank(device="cuda", max_local_ranks=8, cpu_count=64) == 1


def test_a_launch_that_dies_leaves_its_finished_configurations_and_records_the_rest_failed(tmp_path, monkeypatch):
    config = BenchConfig(gpus=2, impls=("naive",), size="tiny", results=tmp_path, baseline=False)
    configurations = expand(config, device="cpu")
    plan = bench_run.create_run(config, configurations, run_id="dies", device="cpu", environment={})
    first = configurations[0]  # pretend world size 1 finished before the crash
    store.write_configuration(
        plan.run, first.config_id, {"run_id": "dies", "config_id": first.config_id, "status": "ok"}
    )

    def crashing_torchrun(module, plan_path, *, local_ranks, rendezvous, log_dir, fork_ranks):
        assert module == "harness.rank.worker" and log_dir.parent == plan.run / "logs" and fork_ranks
        return [sys.executable, "-c", "import sys; print('RuntimeError: rank 1 died'); sys.exit(3)"]

    monkeypatch.setattr(torchrun, "torchrun_command", crashing_torchrun)
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


def test_each_repeat_runs_in_launches_of_its_own_interleaved_rotated_and_world_size_one_first(tmp_path, monkeypatch):
    config = BenchConfig(gpus=2, impls=("naive", "stock"), size="tiny", results=tmp_path, repeats=2)
    configurations = expand(config, device="cpu")
    plan = bench_run.create_run(config, configurations, run_id="reps", device="cpu", environment={})
    launches = []
    monkeypatch.setattr(launch, "launch_group", lambda config, plan, group, **_: launches.append(group) or 0)
    launch.run_groups(config, plan, on_written=lambda cfg: None)
    shape = [(group[0].repeat, group[0].world_size, [c.impl for c in group]) for group in launches]
    assert shape == [
        (0, 1, ["local", "naive", "stock"]),
        (0, 2, ["local", "naive", "stock"]),
        (1, 1, ["stock", "naive", "local"]),
        (1, 2, ["stock", "naive", "local"]),
    ]  # fmt: skip: the second repeat runs the first's order backwards, so that every place is alike on average
    assert all(len({c.repeat for c in group}) == 1 for group in launches)
    names = {launch.launch_name(config, group[0]) for group in launches}
    assert names == {"world-1.r0", "world-2.r0", "world-1.r1", "world-2.r1"}  # plans and logs apart


# A "torchrun" that never makes progress, with a "rank" in a session of its own (as torchrun's are).
SILENT_LAUNCH = """
import subprocess, sys, time
rank = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
print(f"rank pid {rank.pid}", flush=True)
time.sleep(120)
"""


def test_a_silent_launch_is_ended_as_a_hang_with_every_rank_named_and_none_left(tmp_path, monkeypatch):
    monkeypatch.setattr(supervise, "STARTUP_S", 0.5)  # the limit before a launch's first sign of life
    monkeypatch.setattr(torchrun, "torchrun_command", lambda *args, **kwargs: [sys.executable, "-c", SILENT_LAUNCH])
    began = time.monotonic()
    end = torchrun.launch_ranks(
        "harness.rank.collectives",
        tmp_path / "p.json",
        2,
        run=tmp_path,
        name="world-2",
        threads=1,
        timeout_s=0.5,
        device="cpu",
    )
    assert time.monotonic() - began < 30
    assert end.hang is not None and end.hang.startswith("timeout: no progress for")
    assert "rank 0, 1 did not respond" in end.hang
    assert not end.came_alive and end.log == tmp_path / "logs" / "world-2.log"
    rank_pid = int(end.log.read_text().split("rank pid ")[1].split()[0])
    assert not supervise._alive(rank_pid)  # the rank in its own session went down with the launch


def test_the_one_node_rendezvous_gives_the_ranks_the_port_its_store_was_given():
    import datetime

    from torch.distributed import TCPStore
    from torch.distributed.elastic.rendezvous import RendezvousParameters, registry

    from harness.launch.rendezvous import HOST, register_one_node

    register_one_node()
    register_one_node()  # the zygote's import and a fresh agent's: registering twice is harmless
    handler = registry.get_rendezvous_handler(RendezvousParameters(ONE_NODE, f"{HOST}:0", "run", 1, 1))
    info = handler.next_rendezvous()
    assert (info.rank, info.world_size, handler.get_backend()) == (0, 1, ONE_NODE)
    port = info.bootstrap_store_info.master_port
    assert port != 0 and info.bootstrap_store_info.master_addr == HOST
    info.store.set("seen", "yes")  # under the run's prefix, as the agent writes it
    rank = TCPStore(HOST, port, is_master=False, timeout=datetime.timedelta(seconds=10))
    assert rank.get("run/seen") == b"yes"
    with pytest.raises(ValueError, match="one node"):
        registry.get_rendezvous_handler(RendezvousParameters(ONE_NODE, f"{HOST}:0", "run", 2, 2))

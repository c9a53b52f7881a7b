"""Several nodes through torchrun's c10d rendezvous, and several runs at once: two launchers on
this machine act as two nodes of one job (one rank each); two runs started together into one
results folder get distinct run folders."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import PROJECT

from harness.config.bench import BenchConfig, ConfigError
from harness.config.grid import expand
from harness.launch import bench_run
from harness.results import store

FIXTURE = PROJECT / "tests" / "data" / "bucket_sweep"
TINY = ["--impls", "naive", "--no-baseline", "--size", "tiny", "--steps", "3", "--warmup", "1", "--no-parity"]


def ddpbench(*args: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "harness", "bench", *TINY, *args]
    return subprocess.Popen(command, cwd=PROJECT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_launchers_on_localhost_run_one_job_and_rank_0_writes(tmp_path):
    endpoint = f"127.0.0.1:{free_port()}"
    job = ["--gpus", "1", "--nnodes", "2", "--rdzv-endpoint", endpoint, "--run-id", "job", "--results", str(tmp_path)]
    nodes = [ddpbench(*job, "--node-rank", str(rank)) for rank in (0, 1)]
    outputs = [node.communicate(timeout=240)[0] for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], outputs
    for output in outputs:  # the rendezvous may wait minutes: never in silence
        assert f"ddpbench: waiting for 2 nodes at {endpoint} … (each node runs the same command" in output

    configs = store.read_configs(tmp_path / "job")
    assert len(configs) == 1  # one job: written once, by rank 0
    row = configs.iloc[0]
    assert (row["status"], row["world_size"], row["nnodes"]) == ("ok", 2, 2)
    assert sorted(store.read_steps(tmp_path / "job")["rank"].unique()) == [0, 1]
    assert (tmp_path / "job" / "logs" / "world-2.node0.log").is_file()
    assert (tmp_path / "job" / "logs" / "world-2.node1.log").is_file()
    nodes = store.read_json(tmp_path / "job" / "run.json")["nodes"]  # every node's host, not node 0's alone
    assert [node["node_rank"] for node in nodes] == [0, 1] and all(node["hostname"] for node in nodes)
    # node 1's launcher ran beside node 0's, in its session: not a second session, nor its time added
    assert store.read_json(tmp_path / "job" / "summary.json")["sessions"] == 1
    assert "node 1's part of run job ended in " in outputs[1] and "sessions" not in outputs[1], outputs[1]
    answer = "ddpbench: the answer (the strategy to deploy"  # said once, by the node that judges the rows
    assert answer not in outputs[1] and answer in outputs[0]
    # --repeats auto's rounds are node 0's: node 1 took its word that there are none (it decided none of its own)
    decided = store.read_json(tmp_path / "job" / "plan" / "rounds.json")
    assert decided["next"] == [] and decided["session"] == (tmp_path / "job" / ".session.lock").read_text()
    assert "ddpbench: node 0 decided no more rounds" in outputs[1] and "repeats auto:" not in outputs[1], outputs[1]


def test_another_node_neither_adds_a_session_to_summary_json_nor_says_the_runs_counts(tmp_path, capsys):
    """Node 1 ending after node 0 had added its 36 s to node 0's summary as a second session ("over its 2 sessions
    the run took 73 s, 8.9 s of training steps"), and the run page then spoke of a --resume none ran."""
    from harness.commands import summary

    run = tmp_path / "job"
    shutil.copytree(FIXTURE, run)
    written = {"sessions": 1, "wall_s": 36.0, "training_step_s": 4.5, "status_counts": {"ok": 8}, "complete": True}
    store.write_json(run / "summary.json", written)
    plan = bench_run.BenchRun("job", run, "cpu", 1, [], {}, launches=["world-2.node1"], node_rank=1)
    assert summary.summarize(plan, 36.4) == 0
    assert store.read_json(run / "summary.json") == written
    out = capsys.readouterr().out
    assert out == (f"ddpbench: node 1's part of run job ended in 36 s (1 launch of its ranks); node 0 holds the run: "
                   f"its last lines give the counts and the answer, its summary.json the run's time; results in "
                   f"{run}/\n")  # fmt: skip


def test_two_runs_started_together_into_one_results_folder_do_not_clobber_each_other(tmp_path):
    runs = [ddpbench("--gpus", "1", "--results", str(tmp_path)) for _ in range(2)]
    outputs = [run.communicate(timeout=240)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    folders = store.list_runs(tmp_path)
    assert len(folders) == 2
    for folder in folders:
        assert store.read_configs(folder)["status"].tolist() == ["ok"]


def test_a_run_folder_is_made_exclusively_so_a_second_run_cannot_take_the_same_id(tmp_path):
    config = BenchConfig(gpus=1, impls=("naive",), size="tiny", baseline=False, results=tmp_path, run_id="same")
    configurations = expand(config, device="cpu")
    bench_run.create_run(config, configurations, run_id="same", device="cpu", environment={})
    with pytest.raises(ConfigError, match="--run-id 'same' already exists"):
        bench_run.create_run(config, configurations, run_id="same", device="cpu", environment={})


def test_a_failed_row_another_node_set_aside_first_is_no_error_and_its_records_are_kept(tmp_path, monkeypatch):
    """Under --resume --retry-failed every node's launcher sets the failed rows aside at once: a part seen here
    and moved by the other node before this one's move raised FileNotFoundError."""
    import os

    from harness.results import layout

    run = tmp_path / "job"
    folder = layout.RunFolder(run)
    part, records, aside = folder.part("configs", "c1"), folder.failures("c1"), folder.retried("c1")
    part.parent.mkdir(parents=True)
    part.write_bytes(b"row")
    records.mkdir(parents=True)
    (records / "rank0.json").write_text("{}")
    real_replace = os.replace

    def other_node_first(source, target):  # the other node's launcher makes every move just before this one's
        if Path(source).exists():
            real_replace(source, aside / (Path(target).name if source == part else layout.FAILURES))
        real_replace(source, target)

    monkeypatch.setattr(bench_run.os, "replace", other_node_first)
    bench_run._set_aside(run, "c1")
    assert (aside / "configs.parquet").read_bytes() == b"row" and not part.exists()
    assert (aside / layout.FAILURES / "rank0.json").is_file() and not records.exists()


def test_node_0_records_every_nodes_host_from_their_plans_and_the_run_page_lists_them(tmp_path):
    """run.json's environment is node 0's; the run page's "On what?" named node 0's host alone for a two-node run."""
    from reports.aggregate import hosts_text

    run = tmp_path / "job"
    store.write_json(run / "run.json", {"run_id": "job", "environment": {"hostname": "a"}})
    for rank, host in ((0, "a"), (1, "b")):
        context = {"hostname": host, "torch_version": "2.5.1", "gpu_name": "NVIDIA H100", "gpu_count": 8}
        store.write_json(run / "plan" / f"world-16.node{rank}.json", {"node_rank": rank, "context": context})
    store.write_json(run / "plan" / "world-16.node1.costs.json", {"hostname": "not a plan"})
    bench_run.record_nodes(run)
    meta = store.read_json(run / "run.json")
    assert [(node["node_rank"], node["hostname"], node["gpu_count"]) for node in meta["nodes"]] == [
        (0, "a", 8),
        (1, "b", 8),
    ]
    assert hosts_text(meta) == ("the run spanned 2 nodes: node 0 a (8 × NVIDIA H100, torch 2.5.1); "
                                "node 1 b (8 × NVIDIA H100, torch 2.5.1)")  # fmt: skip
    assert hosts_text({"environment": {"hostname": "a"}}) == "a"  # one node: its host, as before


def test_a_resumed_runs_other_node_plans_with_its_own_host_not_node_0s(tmp_path, capsys, monkeypatch):
    """A resumed node 1 planned with run.json's context, node 0's: its plans, and so run.json's `nodes`, named node 0's
    host, torch and commit for both nodes ("node 0 a …; node 1 a …")."""
    from harness import cli
    from harness.launch import torchrun
    from harness.measure import env

    config = BenchConfig(gpus=1, impls=("naive",), size="tiny", baseline=False, results=tmp_path, run_id="job",
                         nnodes=2, rdzv_endpoint="localhost:29400")  # fmt: skip
    configurations = expand(config, device="cpu")
    node_0 = {"hostname": "a", "torch_version": "2.5.1", "git_sha": "aaaa"}
    made = bench_run.create_run(config, configurations, run_id="job", device="cpu", environment=node_0)
    bench_run.release_runs()
    node_1 = {"hostname": "b", "torch_version": "2.6.0", "git_sha": "bbbb", "gpu_name": "H100", "gpu_count": 8}
    _, plan, _ = bench_run.resume_run(tmp_path, "job", node_rank=1, environment=node_1)
    assert (plan.context["hostname"], plan.context["torch_version"], plan.context["git_sha"]) == ("b", "2.6.0", "bbbb")
    assert plan.context["gpu_name"] is None  # a CPU run's context names no GPU, as node 0's
    kept = ("run_id", "started_at", "threads_per_rank")
    assert {key: plan.context[key] for key in kept} == {key: made.context[key] for key in kept}
    _, plan, _ = bench_run.resume_run(tmp_path, "job", node_rank=0)
    bench_run.release_runs()
    assert plan.context == made.context  # node 0's rows keep the run's context

    asked = []  # `bench --resume --node-rank 1` gives resume_run this host's facts; node 0's resume none

    def noted(*args, environment=None, **kwargs):
        asked.append(environment)
        raise ConfigError("noted")

    monkeypatch.setattr(bench_run, "resume_run", noted)
    monkeypatch.setattr(torchrun, "start_early", lambda *_, **__: None)
    for rank in ("1", "0"):
        assert cli.main(["bench", "--resume", "job", "--results", str(tmp_path), "--node-rank", rank]) == 2
    assert asked == [env.host_facts(), None], capsys.readouterr().err


def test_a_stopped_run_across_nodes_names_every_node_and_which_it_could_not_learn(tmp_path):
    """Stopped (Ctrl-C on node 0, or node 1 killed and the wait for it stopped), a two-node run's run.json had no
    `nodes` and its run page named node 0's host alone; a finished one named both. A node of --nnodes that left no
    plan is named, with why its host is not known."""
    from types import SimpleNamespace

    from harness.commands.summary import write_summary
    from reports.aggregate import hosts_text

    run = tmp_path / "job"
    shutil.copytree(FIXTURE, run)
    meta = store.read_json(run / "run.json")
    store.write_json(run / "run.json", {**meta, "config": {**meta.get("config", {}), "nnodes": 3}})
    for rank, host in ((0, "a"), (1, "b")):  # node 2 never planned: its launcher never started
        store.write_json(run / "plan" / f"world-2.node{rank}.json", {"node_rank": rank, "context": {"hostname": host}})
    planned = [SimpleNamespace(config_id="0000-w1-mlp-tiny-local", nnodes=3)]
    plan = SimpleNamespace(run=run, node_rank=0, configurations=planned, phases_s={}, launches=["world-2.node0"])
    write_summary(plan, 12.0, complete=False)  # as bench's stop writes it
    nodes = store.read_json(run / "run.json")["nodes"]
    assert [(node["node_rank"], node["hostname"]) for node in nodes] == [(0, "a"), (1, "b"), (2, None)]
    assert hosts_text(store.read_json(run / "run.json")) == (
        f"the run spanned 3 nodes: node 0 a; node 1 b; node 2 unknown host ({bench_run.NOT_PLANNED})"
    )


def _written_late(run: Path, config_id: str, status: str, after_s: float = 0.3):
    """A row node 0 writes `after_s` after this node ended: its launcher records a failure once its own launch ends."""
    import os
    import threading
    import time

    import pandas as pd

    def write() -> None:
        time.sleep(after_s)
        row = pd.read_parquet(run / "configs" / "0007-w2-mlp-tiny-stock-bucket_cap_mb25.parquet")
        row = row.assign(config_id=config_id, status=status)
        hidden = run / "configs" / f".{config_id}.parquet"  # as the store writes: whole, then renamed into sight
        row.to_parquet(hidden)
        os.replace(hidden, run / "configs" / f"{config_id}.parquet")

    thread = threading.Thread(target=write)
    thread.start()
    return thread


@pytest.mark.parametrize("status, code", [("failed", 1), ("ok", 0)])
def test_another_nodes_exit_status_is_node_0s_though_its_row_comes_after_this_node_ends(tmp_path, status, code):
    """A configuration that failed on node 0's ranks is recorded by node 0's launcher after its launch ends; node 1
    read the rows once as it ended, and exited 0 of a run node 0 exited 1 of. It now waits for its plan's rows."""
    from types import SimpleNamespace

    from harness.commands import summary

    run = tmp_path / "job"
    shutil.copytree(FIXTURE, run)
    late = _written_late(run, "0008-w2-mlp-tiny-stock-late", status)
    planned = [SimpleNamespace(config_id="0008-w2-mlp-tiny-stock-late", nnodes=2)]
    plan = bench_run.BenchRun("job", run, "cpu", 1, planned, {}, launches=["world-2.node1"], node_rank=1)
    assert summary.summarize(plan, 30.0) == code
    late.join()
    assert summary.summarize(plan, 30.0) == code  # read again once written: the status node 0 gives


def test_another_node_whose_plan_node_0_never_writes_says_node_0s_status_is_the_runs(tmp_path, capsys, monkeypatch):
    """Node 0 stopped or gone: its rows never come; node 1 does not exit 0 as if all were measured, and says why."""
    from types import SimpleNamespace

    from harness.commands import summary

    run = tmp_path / "job"
    shutil.copytree(FIXTURE, run)
    monkeypatch.setattr(bench_run, "NODE_ZERO_WAIT_S", 0.2)
    planned = [SimpleNamespace(config_id="0008-w2-mlp-tiny-stock-never", nnodes=2)]
    plan = bench_run.BenchRun("job", run, "cpu", 1, planned, {}, launches=["world-2.node1"], node_rank=1)
    assert summary.summarize(plan, 30.0) == 1
    assert capsys.readouterr().out.endswith(
        f"results in {run}/; exit 1: 1 configuration of its plan not written by node 0 within 0 s of its end (node 0 "
        "stopped or gone?): node 0's exit status is the run's\n"
    )


def _node_1(run: Path, **kw) -> tuple[BenchConfig, list]:
    config = BenchConfig(gpus=1, impls=("naive",), size="tiny", baseline=False, results=run.parent, run_id=run.name,
                         nnodes=2, node_rank=1, rdzv_endpoint="127.0.0.1:29400", **kw)  # fmt: skip
    return config, expand(config, device="cpu")


def test_another_node_runs_the_rounds_node_0_decided_not_its_own(tmp_path, monkeypatch):
    """Every node's launcher judged the rows and added its own round to the shared run.json: node 1 planned past
    node 0's round, and every launch from the third round on failed with PlanMismatchError. Node 1 now runs the
    rounds node 0 decides, in node 0's session (a decision an earlier session left is not this one's)."""
    import threading

    from harness.config.grid import again
    from harness.launch import repeats

    run = tmp_path / "job"
    config, planned = _node_1(run, repeats="auto")
    ahead = again(planned[0], index=1, repeat=1)  # node 0 judged first and added its round before node 1 looked
    store.write_json(run / "run.json", {"configurations": [c.to_json() for c in (*planned, ahead)]})
    bench_run.hold_run(run, "job")  # node 0's session (here: this process's lock, taken through another file)
    node_0 = (run / ".session.lock").read_text()  # as the lock names it: pid, host, start
    rounds = run / "plan" / "rounds.json"  # layout.ROUNDS
    store.write_json(rounds, {"session": '{"pid": 1, "host": "earlier"}', "looked": 1, "next": []})  # left before
    decided = {"session": node_0, "looked": 1, "next": [ahead.config_id]}
    threading.Timer(0.5, store.write_json, (rounds, decided)).start()  # node 0 decides after node 1 began to wait
    launched, said = [], []

    def run_groups(config, plan, **kw):
        launched.append([c.config_id for c in plan.configurations])
        store.write_json(rounds, {"session": node_0, "looked": 2, "next": []})  # node 0's next look: none more

    monkeypatch.setattr(repeats, "run_groups", run_groups)
    plan = bench_run.BenchRun("job", run, "cpu", 1, list(planned), {}, node_rank=1)
    try:
        repeats.until_decided(config, plan, began=0.0, on_round=lambda standing, more: said.append((standing, more)),
                              on_written=lambda cfg: None)  # fmt: skip
    finally:
        bench_run.release_runs()
    assert launched == [[ahead.config_id]]
    assert said == [(None, [ahead]), (None, [])]
    assert len(store.read_json(run / "run.json")["configurations"]) == 2  # node 1 added none of its own


SILENT_AGENT = "import time; print('waiting on node 0', flush=True); time.sleep(40)"


def test_another_nodes_launch_ends_within_seconds_once_node_0s_session_lets_go(tmp_path, monkeypatch):
    """After Ctrl-C on node 0, node 1 sat 'building the model' for over 6 minutes: its ranks waited on node 0's, and
    its launcher on them, up to the 10-minute first-step limit. It now ends the launch once node 0's session lets go
    of the run (NodeZeroGone: bench's stop line says so)."""
    from harness.launch import launcher, torchrun

    run = tmp_path / "job"
    run.mkdir()
    config, planned = _node_1(run, repeats=1, timeout_s=600.0)
    holds = ("import sys, time; from harness.launch import bench_run; bench_run.hold_run(sys.argv[1], 'job'); "
             "print('held', flush=True); time.sleep(3)")  # fmt: skip
    node_0 = subprocess.Popen([sys.executable, "-c", holds, str(run)], cwd=PROJECT, stdout=subprocess.PIPE, text=True)
    assert node_0.stdout.readline().strip() == "held"
    monkeypatch.setattr(torchrun, "torchrun_command", lambda *args, **kwargs: [sys.executable, "-c", SILENT_AGENT])
    plan = bench_run.BenchRun("job", run, "cpu", 1, list(planned), {}, node_rank=1)
    began = time.monotonic()
    with pytest.raises(Exception, match="node 0's end") as stopped:
        launcher.launch_group(config, plan, list(planned), on_written=lambda cfg: None)
    # node 0 let go 3 s in; its launch would have waited 40 s
    assert isinstance(stopped.value, bench_run.NodeZeroGone) and time.monotonic() - began < 15
    node_0.wait(timeout=10)


def test_repeats_auto_across_nodes_without_a_shared_results_folder_is_refused_in_one_line(tmp_path, monkeypatch):
    """Node 0 decides each round in the run folder: a node that never sees node 0's run.json (node-local disks)
    would decide rounds of its own and fail every launch after the second; refused, nothing written."""
    monkeypatch.setattr(bench_run, "NODE_ZERO_WAIT_S", 0.2)
    config, planned = _node_1(tmp_path / "job", repeats="auto")
    refused = (r"^--repeats auto across nodes needs --results on a file system every node shares, where node 0 "
               r"decides each round: its run.json did not appear in ")  # fmt: skip
    with pytest.raises(ConfigError, match=refused):
        bench_run.create_run(config, planned, run_id="job", device="cpu", environment={})
    assert not (tmp_path / "job").exists()

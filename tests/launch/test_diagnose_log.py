"""A launch that failed before any configuration started is diagnosed from its log: the ranks' own
exception (root cause), never torchrun's ChildFailedError wrapper, and a log path relative to the run
folder (true wherever bench ran from)."""

from __future__ import annotations

from harness.config.grid import Configuration
from harness.launch import diagnose
from harness.launch.torchrun import LaunchEnd

# torchrun's log of a launch whose module failed to import in both ranks (torch 2.x, abridged only in
# the repeated frames).
TORCHRUN_LOG = """
*****************************************
Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded
*****************************************
Traceback (most recent call last):
  File "<frozen runpy>", line 189, in _run_module_as_main
  File "/tmp/tr/boommod.py", line 2
    raise RuntimeError(f"boom in rank {os.environ["RANK"]}")
SyntaxError: f-string: unmatched '['
Traceback (most recent call last):
  File "<frozen runpy>", line 189, in _run_module_as_main
SyntaxError: f-string: unmatched '['
E1130 20:47:35.250000 5798 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) local_rank: 0
Traceback (most recent call last):
  File "/work/main/.venv/lib/python3.11/site-packages/torch/distributed/launcher/api.py", line 386, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
boommod FAILED
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 5804)
============================================================
"""


def test_the_ranks_own_exception_is_named_not_torchruns_wrapper(tmp_path):
    log = tmp_path / "world-2.log"
    log.write_text(TORCHRUN_LOG)
    assert diagnose.error_in_log(log) == "SyntaxError: f-string: unmatched '['"


def test_a_rank_prefixed_line_and_a_chained_exception_give_the_first_cause(tmp_path):
    log = tmp_path / "w.log"
    log.write_text("[rank1]: Traceback (most recent call last):\n[rank1]: KeyError: 'layer'\n"
                   "[rank1]: RuntimeError: while building\ntorch.distributed.elastic.multiprocessing.errors."
                   "ChildFailedError: \n")  # fmt: skip
    assert diagnose.error_in_log(log) == "KeyError: 'layer'"


def test_a_log_without_an_exception_gives_its_last_line(tmp_path):
    log = tmp_path / "w.log"
    log.write_text("starting\nsomething odd happened\n")
    assert diagnose.error_in_log(log) == "something odd happened"


def test_a_launch_failure_names_the_cause_and_the_log_relative_to_the_run_folder(tmp_path, monkeypatch):
    run = tmp_path / "results" / "r1"
    (run / "logs").mkdir(parents=True)
    (run / "logs" / "world-2.log").write_text(TORCHRUN_LOG)
    monkeypatch.chdir(tmp_path)  # bench ran from here, with --results results
    cfg = Configuration(config_id="0001-w2", impl="stock", impl_options={}, workload="mlp", size="tiny",
                        world_size=2, nnodes=1, batch_size=8, steps=2, warmup=2, dtype="fp32", device="cpu",
                        backend="gloo", seed=0, parity=True)  # fmt: skip
    end = LaunchEnd(returncode=1, log=run.relative_to(tmp_path) / "logs" / "world-2.log", hint=None, came_alive=False)
    failure = diagnose.diagnose(run.relative_to(tmp_path), cfg, end)
    assert failure == {
        "error_kind": "launch",
        "error": "launch exited with code 1: SyntaxError: f-string: unmatched '[' "
        "(log: logs/world-2.log, in the run folder)",
    }


def test_a_log_outside_the_run_folder_is_named_absolute_and_not_said_to_be_in_it(tmp_path):
    run, log = tmp_path / "results" / "r1", tmp_path / "elsewhere" / "world-2.log"
    run.mkdir(parents=True)
    log.parent.mkdir()
    log.write_text(TORCHRUN_LOG)
    cfg = Configuration(config_id="0001-w2", impl="stock", impl_options={}, workload="mlp", size="tiny",
                        world_size=2, nnodes=1, batch_size=8, steps=2, warmup=2, dtype="fp32", device="cpu",
                        backend="gloo", seed=0, parity=True)  # fmt: skip
    failure = diagnose.diagnose(run, cfg, LaunchEnd(returncode=1, log=log, hint=None, came_alive=False))
    assert failure["error"] == f"launch exited with code 1: SyntaxError: f-string: unmatched '[' (log: {log})"


def two_nodes(tmp_path) -> tuple:
    run = tmp_path / "r"
    (run / "logs").mkdir(parents=True)
    cfg = Configuration(config_id="0000-w2", impl="local", impl_options={}, workload="mlp", size="tiny",
                        world_size=2, nnodes=2, batch_size=8, steps=2, warmup=1, dtype="fp32", device="cpu",
                        backend="gloo", seed=0, parity=True)  # fmt: skip
    return run, cfg


def test_a_node_that_never_came_is_named_as_the_likely_cause_not_ranks_that_did_not_respond(tmp_path):
    """Node 1 never started: node 0 said 'rank 0, 1 did not respond (stopped, dead, or holding the interpreter)'
    after 302 s, of ranks that never ran, having said torchrun waits up to 10 minutes."""
    run, cfg = two_nodes(tmp_path)
    hang = ("timeout: no progress for 302 s (limit 300 s); rank 0, 1 did not respond (stopped, dead, or holding the "
            "interpreter)")  # fmt: skip
    end = LaunchEnd(returncode=-15, log=run / "logs" / "w.log", hint=None, came_alive=False, hang=hang)
    failure = diagnose.diagnose(run, cfg, end)
    assert failure["error_kind"] == "timeout"
    assert failure["error"].startswith(
        "timeout: no progress for 302 s (limit 300 s), and no rank started a "
        "configuration: across 2 nodes they start once every node has joined"
    )
    assert "did not respond" not in failure["error"]
    # the retry across nodes in the one wording every line gives it (harness.results.invocation.on_every_node)
    assert failure["error"].endswith("`bench --resume RUN_ID --retry-failed` runs them again on every node, with its "
                                     "own --node-rank")  # fmt: skip
    alive = LaunchEnd(returncode=-15, log=run / "logs" / "w.log", hint=None, came_alive=True, hang=hang)
    assert diagnose.diagnose(run, cfg, alive)["error"] == hang  # ranks that ran: theirs is the story


def test_a_lost_peer_across_nodes_points_at_the_other_nodes_log(tmp_path):
    """Node 1 killed mid-run: node 0's row said only gloo's 'Connection closed by peer … GLHF!'."""
    run, cfg = two_nodes(tmp_path)
    log = run / "logs" / "w.log"
    log.write_text("RuntimeError: [../gloo/transport/tcp/pair.cc:561] Connection closed by peer [127.0.0.1]:19364\n")
    failure = diagnose.diagnose(run, cfg, LaunchEnd(returncode=1, log=log, hint=None, came_alive=True))
    assert failure["error"].endswith("(across 2 nodes a lost peer is most likely a rank or launcher of another node "
                                     "that died: its log is logs/world-2.node<K>.log, in the run folder, where that "
                                     "node shares it)")  # fmt: skip


def test_the_nodes_wait_said_is_the_one_the_launch_keeps():
    from harness.launch import supervise

    assert supervise.startup_limit_s(None) == supervise.STARTUP_S == 300  # ended by the supervisor first
    assert supervise.startup_limit_s(900) == supervise.RENDEZVOUS_JOIN_S  # torchrun gives up first

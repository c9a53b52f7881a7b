"""The launcher's judgement, on hand-made inputs: when a quiet configuration counts as hung,
what torchrun's failure summary says, whom a hang is blamed on, and the fault switch."""

from __future__ import annotations

import json

import pytest
import torch

from harness.handoff import faults, liveness
from harness.launch import supervise
from harness.launch.diagnose import diagnose_launch
from harness.launch.torchrun import LaunchEnd

SUMMARY = """
[W] something earlier
============================================================
harness.rank.worker FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-11-30_02:08:59
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 3881)  (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 3881
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-30_02:08:59
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : {code} (pid: 3882)
  error_file: {error_file}
  traceback : Signal 9 (SIGKILL) received by PID 3882
============================================================
"""


def test_torchrun_summary_gives_every_failed_rank_with_its_signal():
    exits = supervise.rank_exits(SUMMARY.format(code=-9, error_file="<N/A>"))
    assert [(e.rank, e.exitcode, e.error_file) for e in exits] == [(0, -15, None), (1, -9, None)]
    assert exits[1].describe() == "rank 1 killed by SIGKILL (exit code -9)"
    assert supervise.rank_exits("no summary here") == []


def test_an_exception_outside_a_measurement_is_read_from_torchruns_error_file(tmp_path):
    error_file = tmp_path / "error.json"
    message = {"message": "OSError: [Errno 28] No space left on device", "extraInfo": {"py_callstack": "..."}}
    error_file.write_text(json.dumps({"message": message}))
    [_, rank_1] = supervise.rank_exits(SUMMARY.format(code=1, error_file=error_file))
    assert rank_1.describe() == "rank 1 exited with code 1"
    assert rank_1.exception_line() == "OSError: [Errno 28] No space left on device"


def test_with_a_timeout_a_stepping_configuration_may_be_quiet_that_long():
    watch = supervise.ProgressWatch(5.0, now=0.0)
    assert watch.limit_s() == supervise.STARTUP_S  # interpreters and imports first
    watch.progressed(new_configuration=True, now=10.0)
    assert watch.limit_s() == supervise.FIRST_STEP_MIN_S  # building, before the first step
    watch.progressed(now=11.0)
    assert watch.limit_s() == 5.0
    assert not watch.expired(now=15.9) and watch.expired(now=16.1)
    watch.progressed(new_configuration=True, stepping=True, now=20.0)  # the hint's first word is a step
    assert watch.limit_s() == 5.0


def test_without_a_timeout_the_limit_follows_the_slowest_step_seen():
    watch = supervise.ProgressWatch(None, now=0.0)
    watch.progressed(new_configuration=True, now=1.0)
    assert watch.limit_s() == supervise.FIRST_STEP_S
    watch.progressed(now=3.0)  # 2 s
    watch.progressed(now=20.0)  # 17 s: the slowest so far
    assert watch.limit_s() == pytest.approx(supervise.AUTO_TIMEOUT_FACTOR * 17.0)
    watch.progressed(new_configuration=True, now=21.0)  # a new configuration starts over
    watch.progressed(now=21.5)
    assert watch.limit_s() == supervise.MIN_AUTO_TIMEOUT_S


def test_a_hang_is_blamed_on_the_silent_rank_else_on_the_rank_behind():
    waiting = {"step": 3, "position": "graph.py:829 _engine_run_backward"}
    assert liveness.describe_hang({0: waiting, 1: None}).startswith("rank 1 did not respond")
    described = liveness.describe_hang({0: waiting, 1: {"step": 2, "position": "faults.py:9 fire"}})
    assert described.startswith("rank 1 is behind (step 2)")
    assert "rank 0 at step 3 in graph.py:829 _engine_run_backward" in described


def test_the_fault_switch_parses_its_conditions_and_rejects_nonsense():
    fault = faults.Fault.parse("stop:impl=stock,world=2,rank=1,step=3")
    assert fault.applies(impl="stock", world=2, rank=1, step=3)
    assert not fault.applies(impl="naive", world=2, rank=1, step=3)
    assert not fault.applies(impl="stock", world=2, rank=0, step=3)
    one_cap = faults.Fault.parse("exit:cap=1,rank=1")  # one configuration of a launch that sweeps caps
    at = {"impl": "stock", "world": 2, "rank": 1, "step": 0}
    assert one_cap.applies(**at, cap=1.0) and not one_cap.applies(**at, cap=25.0) and not one_cap.applies(**at)
    small = faults.Fault.parse("exit:cap=0.005,rank=1")  # a cap below 1 MiB, as --bucket-cap-mb takes it
    assert small.applies(**at, cap=0.005) and not small.applies(**at, cap=1.0)
    with pytest.raises(ValueError, match="cap='1e3' is not a number of MiB"):
        faults.Fault.parse("exit:cap=1e3")
    with pytest.raises(ValueError, match="'melt' is not one of"):
        faults.Fault.parse("melt:rank=1")
    with pytest.raises(ValueError, match="'node' is not one of"):
        faults.Fault.parse("kill:node=1")


def test_a_slow_fault_holds_every_step_from_its_step_on_and_fires_nothing():
    slow = faults.Fault.parse("slow:rank=1,ms=20,step=3")
    assert (slow.kind, slow.ms) == ("slow", 20)
    assert [slow.applies(impl="stock", world=2, rank=1, step=s) for s in range(6)] == [False] * 3 + [True] * 3
    assert not slow.applies(impl="stock", world=2, rank=0, step=4)
    stop = faults.Fault.parse("stop:rank=1,step=3")
    assert [stop.applies(impl="stock", world=2, rank=1, step=s) for s in range(6)] == [False] * 3 + [True] + [False] * 2
    slow.fire(torch.device("cpu"))  # returns: its whole effect is delay_backward


def test_out_of_memory_is_recognised_on_cuda_and_on_the_cpu():
    assert faults.kind_from_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB") == "oom"
    assert faults.kind_from_text("RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried") == "oom"
    assert faults.kind_from_text("RuntimeError: shapes do not match") == "exception"


def test_a_rank_killed_without_a_word_is_the_cause_and_its_peers_exception_the_echo(tmp_path):
    error_file = tmp_path / "error.json"
    error_file.write_text(json.dumps({"message": {"message": "RuntimeError: Connection reset by peer"}}))
    log = tmp_path / "world-2.log"
    # Rank 0 raised ("connection reset": rank 1 was gone), rank 1 was killed: rank 1 is the cause.
    rank_0_raised = f"exitcode  : 1 (pid: 3881)\n  error_file: {error_file}"
    summary = SUMMARY.format(code=-9, error_file="<N/A>")
    log.write_text(summary.replace("exitcode  : -15 (pid: 3881)  (SIGTERM)\n  error_file: <N/A>", rank_0_raised))
    hint = {"config_id": "w2-all_reduce", "phase": "all_reduce message size", "step": 2, "total": 4}
    failure = diagnose_launch(tmp_path, LaunchEnd(1, log, hint, came_alive=True))
    assert failure["error_kind"] == "killed" and failure["rank"] == 1
    assert (
        failure["error"]
        == "rank 1 killed by SIGKILL (exit code -9) after rank 0 had reported all_reduce message size 2/4"
    )
    hung = LaunchEnd(-15, log, hint, came_alive=True, hang="timeout: no progress for 61 s")
    assert diagnose_launch(tmp_path, hung) == {"error_kind": "timeout", "error": "timeout: no progress for 61 s"}


def test_a_rank_killed_without_a_word_points_its_row_at_the_traceback_its_peer_wrote(tmp_path):
    """After kill -9 of rank 1 the row's error_file was empty, though rank 0's traceback of the broken collective
    was written under failures/: it is the file there is, said to be rank 0's."""
    from types import SimpleNamespace

    from harness.launch.diagnose import diagnose

    log = tmp_path / "world-2.log"
    log.write_text(SUMMARY.format(code=-9, error_file="<N/A>"))
    cfg = SimpleNamespace(config_id="0001-w2-mlp-tiny-stock", world_size=2, nnodes=1)
    killed = LaunchEnd(1, log, None, came_alive=True)
    assert "error_file" not in diagnose(tmp_path, cfg, killed)  # no peer wrote one: none to point at
    faults.write_rank_failure(tmp_path, cfg.config_id, 0, RuntimeError("Connection reset by peer"), {})
    record = tmp_path / "failures" / cfg.config_id / "rank0.json"
    assert diagnose(tmp_path, cfg, killed)["error_file"] == "failures/0001-w2-mlp-tiny-stock/rank0.traceback.txt"
    record.unlink()  # rank 0 stopped (torchrun's SIGTERM) after its traceback, before its record: the file is still it
    failure = diagnose(tmp_path, cfg, killed)
    assert failure["error_kind"] == "killed" and failure["rank"] == 1
    assert failure["error_file"] == "failures/0001-w2-mlp-tiny-stock/rank0.traceback.txt"
    assert "Connection reset by peer" in (tmp_path / failure["error_file"]).read_text()
    assert failure["error"] == ("rank 1 killed by SIGKILL (exit code -9) (its traceback file is rank 0's, whose "
                                "collective it broke)")  # fmt: skip


# What a rank printed before it aborted, from a MoE model's run under fsdp (its ranks routed tokens to different
# experts, so their reduce-scatters' sizes differed), with rank 0's echo after it.
GLOO_ABORT = (
    "terminate called after throwing an instance of 'gloo::EnforceNotMet'\n"
    "  what():  [enforce fail at /__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:464] "
    "op.preamble.length <= op.nbytes. 598048 vs 532128. Received data size doesn't match expected size. Is there a "
    "distributed collective mismatch in your code?\nFatal Python error: Aborted\n"
    "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:545] Read error "
    "[127.0.0.1]:6051: Connection reset by peer.\n"
)


def test_an_aborted_rank_is_told_with_its_backends_words_and_only_the_phase_rank_0_noted(tmp_path):
    """rank 0's note said only that the configuration had started (its first step was in backward): not 'building'."""
    log = tmp_path / "world-2.log"
    log.write_text(GLOO_ABORT + SUMMARY.format(code=-6, error_file="<N/A>"))
    hint = {"config_id": "0007-w2-moe-small-fsdp", "phase": "build", "step": 0, "total": None}
    failure = diagnose_launch(tmp_path, LaunchEnd(1, log, hint, came_alive=True))
    assert failure["error"] == (
        "rank 1 killed by SIGABRT (exit code -6) before its first step completed: gloo::EnforceNotMet: "
        "op.preamble.length <= op.nbytes. 598048 vs 532128. Received data size doesn't match expected size. Is there "
        "a distributed collective mismatch in your code?"
    )
    warming = {**hint, "phase": "train", "step": 1, "total": 5, "warmup": 2}
    assert diagnose_launch(tmp_path, LaunchEnd(1, log, warming, came_alive=True))["error"].startswith(
        "rank 1 killed by SIGABRT (exit code -6) after rank 0 had reported step 1/5, a warm-up step: gloo::"
    )
    log.write_text(SUMMARY.format(code=-9, error_file="<N/A>"))  # no abort printed: nothing added
    measured = {**warming, "step": 3}
    assert diagnose_launch(tmp_path, LaunchEnd(1, log, measured, came_alive=True))["error"] == (
        "rank 1 killed by SIGKILL (exit code -9) after rank 0 had reported step 3/5"
    )

"""Faults during a run, produced for real on CPU ranks: a rank killed with SIGKILL, a rank that
freezes (a hang as its peers see it), an exception, an out-of-memory, --fail-fast, Ctrl-C and
SIGTERM to ddpbench. Each run keeps what finished, records what failed with the rank and the
cause, goes on in a fresh launch, and leaves no process behind.

The runs are made through the launcher's API at world size 2 only (the CLI would add a world
size 1 launch per test); the signal tests use the real command line.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from conftest import PROJECT
from dist_helpers import processes_of

from harness import cli
from harness.config.bench import BenchConfig
from harness.config.grid import expand
from harness.handoff import faults
from harness.handoff.liveness import registered_ranks
from harness.handoff.progress import read_step_progress
from harness.launch import bench_run
from harness.launch import launcher as launch
from harness.results import store


def start_plan(tmp_path: Path, impls: tuple[str, ...], **options):
    config = BenchConfig(
        gpus=2,
        impls=impls,
        size="tiny",
        warmup=1,
        baseline=False,
        parity=False,
        results=tmp_path,
        repeats=1,
        **options,
    )
    configurations = [c for c in expand(config, device="cpu") if c.world_size == 2]
    plan = bench_run.create_run(config, configurations, run_id="faulty", device="cpu", environment={})
    return config, plan


def rows_by_impl(run: Path):
    return store.read_configs(run).set_index("impl")


def test_kill_9_of_one_rank_costs_that_configuration_only(tmp_path, monkeypatch):
    """The acceptance: kill -9 of rank 1 in the middle of configuration 2 of 4 gives 3 ok rows,
    1 failed row naming rank 1 and SIGKILL, within a minute, and no process of the run left."""
    # Its steps held 30 ms, the victim is still training when this test (sharing the GIL with the launcher's
    # thread, and the cores with another worker) gets round to the kill: 60 steps of 12 ms were 0.7 s.
    monkeypatch.setenv("DDPBENCH_FAULT", "slow:impl=naive,ms=30")
    config, plan = start_plan(tmp_path, ("stock", "naive", "flat", "bucketed"), steps=60)
    victim = plan.configurations[1]
    assert victim.impl == "naive"
    written_at: dict[str, float] = {}
    runner = threading.Thread(
        target=launch.run_groups,
        args=(config, plan),
        kwargs={"on_written": lambda cfg: written_at.setdefault(cfg.config_id, time.monotonic())},
    )
    runner.start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        hint = read_step_progress(plan.run) or {}
        if hint.get("config_id") == victim.config_id and hint.get("phase") == "train" and hint["step"] >= 1:
            break
        time.sleep(0.02)
    else:
        pytest.fail("configuration 2 never started")
    os.kill(registered_ranks(plan.run)[1]["pid"], signal.SIGKILL)
    killed_at = time.monotonic()
    runner.join(timeout=180)

    configs = store.read_configs(plan.run)
    assert sorted(configs["status"]) == ["failed", "ok", "ok", "ok"]
    failed = configs[configs["status"] == "failed"].iloc[0]
    assert failed["config_id"] == victim.config_id
    assert failed["error_kind"] == "killed", failed["error"]
    assert "rank 1 killed by SIGKILL (exit code -9) after rank 0 had reported step " in failed["error"]  # its note
    assert written_at[victim.config_id] - killed_at < 60
    assert processes_of(plan.run) == []


@pytest.fixture(scope="module")
def three_faults(tmp_path_factory):
    """One run, one fault per configuration, each ending its launch: an exception in rank 1, an
    out-of-memory in rank 0, then rank 1 freezing (a hang, --timeout 3). Three launches in all."""
    faults = ";".join(
        [
            "raise:impl=stock,world=2,rank=1,step=2",
            "oom:impl=naive,world=2,rank=0,step=1",
            "stop:impl=flat,world=2,rank=1,step=3",
        ]
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DDPBENCH_FAULT", faults)
        config, plan = start_plan(tmp_path_factory.mktemp("faults"), ("stock", "naive", "flat"), steps=5, timeout_s=3.0)
        launch.run_groups(config, plan, on_written=lambda cfg: None)
    return plan.run, rows_by_impl(plan.run)


def test_an_exception_is_recorded_with_its_rank_last_line_and_full_traceback(three_faults):
    run, rows = three_faults
    assert rows.loc["stock", "status"] == "failed"
    assert rows.loc["stock", "error_kind"] == "exception"
    assert rows.loc["stock", "error"] == "rank 1: RuntimeError: fault injected by DDPBENCH_FAULT at step 2"
    traceback_text = (run / rows.loc["stock", "error_file"]).read_text()
    assert "Traceback (most recent call last)" in traceback_text and "fault injected" in traceback_text
    # torchrun's own error file (the rank left by raising through @record) is in the run folder too.
    assert any("fault injected" in p.read_text() for p in (run / "logs").rglob("error.json"))
    # An exception of the code itself comes again in a repeat; an out-of-memory may not.
    assert faults.failure_that_repeats(run, rows.loc["stock", "config_id"]) == rows.loc["stock", "error"]
    assert faults.failure_that_repeats(run, rows.loc["naive", "config_id"]) is None


def test_an_out_of_memory_is_recorded_as_oom_with_the_memory_it_reached_and_the_next_runs(three_faults):
    run, rows = three_faults
    assert rows.loc["naive", "status"] == "failed"  # run in a fresh launch after stock's failure
    assert rows.loc["naive", "error_kind"] == "oom"
    assert rows.loc["naive", "error"].startswith("rank 0: RuntimeError:")
    assert rows.loc["naive", "mem_peak_rss_mb"] > 0  # the memory it had reached when it failed
    ranks = store.read_ranks(run)
    naive_ranks = ranks[ranks["config_id"] == rows.loc["naive", "config_id"]].set_index("rank")
    assert naive_ranks.loc[0, "status"] == "failed" and naive_ranks.loc[1, "status"] == "stopped"


def test_a_frozen_rank_is_a_timeout_that_names_it(three_faults):
    run, rows = three_faults
    assert rows.loc["flat", "status"] == "failed"
    assert rows.loc["flat", "error_kind"] == "timeout"
    assert "no progress for" in rows.loc["flat", "error"]
    assert "s) after rank 0 had reported step " in rows.loc["flat", "error"]  # its note, not the frozen rank's step
    assert "rank 1 did not respond" in rows.loc["flat", "error"]
    assert "rank 0 at step 3" in rows.loc["flat", "error"]  # the rank left waiting, and where
    assert processes_of(run) == []  # the stopped rank too: SIGKILL reaches a stopped process


def test_a_repeat_of_what_raised_is_recorded_not_run_and_a_communication_error_runs_again(tmp_path, monkeypatch):
    """A model that breaks under a strategy breaks in every repeat: its later repeats are failed rows that
    name the first failure, without a launch. A peer's connection lost may not come again: that runs."""
    config = BenchConfig(gpus=1, impls=("stock", "naive"), size="tiny", baseline=False, repeats=3, results=tmp_path)
    plan = bench_run.create_run(config, expand(config, device="cpu"), run_id="again", device="cpu", environment={})
    first = {cfg.impl: cfg for cfg in plan.configurations if cfg.repeat == 0}
    for impl, exc in [("stock", ValueError("heads=3 does not divide 16")),
                      ("naive", torch.distributed.DistBackendError("Connection closed by peer"))]:  # fmt: skip
        faults.write_rank_failure(plan.run, first[impl].config_id, 0, exc, memory={})
        failure = {"error_kind": "exception", "error": f"rank 0: {type(exc).__name__}: {exc}", "rank": 0}
        launch._record_failure(plan, first[impl], failure)
    launched, written = [], []

    def launch_stopped_here(config, plan, pending, **_):
        launched.extend(pending)
        raise InterruptedError

    monkeypatch.setattr(launch, "_run_launch", launch_stopped_here)
    for repeat in (1, 2):
        with pytest.raises(InterruptedError):
            launch.launch_group(config, plan, [c for c in plan.configurations if c.repeat == repeat],
                                on_written=written.append)  # fmt: skip
    assert [(c.impl, c.repeat) for c in launched] == [("naive", 1), ("naive", 2)]
    assert [(c.impl, c.repeat) for c in written] == [("stock", 1), ("stock", 2)]
    rows = store.read_configs(plan.run).set_index("config_id")
    for cfg in written:
        assert rows.loc[cfg.config_id, ["status", "error_kind"]].tolist() == ["failed", "exception"]
        assert rows.loc[cfg.config_id, "error"] == (
            "not run: its repeat 1 raised rank 0: ValueError: heads=3 does not divide 16, which a repeat raises "
            f"again; `ddpbench bench --resume again --results {plan.run.parent} --retry-failed` runs it "
            "again")  # fmt: skip


def test_fail_fast_stops_at_the_first_failure(tmp_path, monkeypatch):
    monkeypatch.setenv("DDPBENCH_FAULT", "exit:impl=stock,world=2,rank=1,step=1")
    config, plan = start_plan(tmp_path, ("stock", "naive"), steps=2, fail_fast=True)
    with pytest.raises(launch.FailFast, match="rank 1 exited with code 3"):
        launch.run_groups(config, plan, on_written=lambda cfg: None)
    rows = rows_by_impl(plan.run)
    assert list(rows.index) == ["stock"]  # naive was not run: --resume runs it
    assert (rows.loc["stock", "status"], rows.loc["stock", "error_kind"]) == ("failed", "killed")


def default_sigint() -> None:
    """A shell's background job inherits SIGINT ignored, and Python then keeps ignoring it;
    a terminal's foreground job has it at its default: that is the case tested."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def path_without_ddpbench() -> str:
    """PATH as a shell without ddpbench on it has it (an activated venv puts it there): the hint asserted
    below is the one for `python -m`."""
    folders = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join(folder for folder in folders if not (Path(folder) / "ddpbench").exists())


@pytest.mark.parametrize(("sig", "code", "name"), [(signal.SIGINT, 130, "SIGINT"), (signal.SIGTERM, 143, "SIGTERM")])
def test_ctrl_c_or_sigterm_stops_every_rank_keeps_what_finished_and_says_how_to_resume(tmp_path, sig, code, name):
    command = [sys.executable, "-m", "harness", "bench", "--gpus", "1", "--impls", "naive,flat", "--no-baseline",
               "--size", "tiny", "--steps", "20", "--no-parity", "--results", str(tmp_path),
               "--run-id", "cut"]  # fmt: skip
    # flat's every step held a second: it is surely still running when the signal comes (20 s), and naive's 20 steps
    # are quick (200 steps held 100 ms made naive's take 5 s of a loaded machine for nothing tested here).
    env = {**os.environ, "DDPBENCH_FAULT": "slow:impl=flat,ms=1000", "PATH": path_without_ddpbench()}
    # A session of its own, as a shell gives a foreground job: Ctrl-C signals the whole group.
    process = subprocess.Popen(
        command, cwd=PROJECT, env=env, stdout=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=default_sigint,
    )  # fmt: skip
    run = tmp_path / "cut"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # signal as the second configuration starts
        if len(store.written_config_ids(run)) == 1 and "flat" in (read_step_progress(run) or {}).get("config_id", ""):
            break
        time.sleep(0.05)
    else:
        pytest.fail("the second configuration never started")
    os.killpg(process.pid, sig) if sig == signal.SIGINT else process.send_signal(sig)
    out, _ = process.communicate(timeout=60)

    assert process.returncode == code
    last = out.strip().splitlines()[-1]
    assert last.startswith(f"ddpbench: stopped by {name}: 1 of 2 configurations saved")
    # started as `python -m harness`, so the command to copy is that one (console.invoked.ddpbench_command): a user
    # who typed it was told `-m harness.cli`
    assert f"-m harness bench --resume cut --results {tmp_path}" in last
    assert list(store.read_configs(run)["impl"]) == ["naive"]
    assert processes_of(run) == []


@pytest.mark.parametrize(("sig", "code", "name"), [(signal.SIGINT, 130, "SIGINT"), (signal.SIGTERM, 143, "SIGTERM")])
def test_a_signal_a_library_turned_into_its_own_error_still_stops_the_run_as_asked(
    tmp_path, monkeypatch, capsys, sig, code, name
):
    """Seen in the suite: Ctrl-C while pyarrow imported zoneinfo to read a row came up as ArrowInvalid, a
    traceback and exit 1, not the stop line and its resume command."""

    def interrupted_read(config, plan, *, on_written, on_tick=None):
        try:
            os.kill(os.getpid(), sig)  # the handler raises here, inside the library
            time.sleep(5)
        except BaseException as exc:
            raise ValueError("The zoneinfo module or pytz package must be installed.") from exc

    monkeypatch.setattr(launch, "run_groups", interrupted_read)
    args = ["bench", "--gpus", "1", "--impls", "naive", "--no-baseline", "--size", "tiny",
            "--results", str(tmp_path), "--run-id", "cut"]  # fmt: skip
    with default_sigint_here():
        assert cli.main(args) == code
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith(f"ddpbench: stopped by {name}: 0 of 1 configurations saved") and "--resume cut" in last


@contextlib.contextmanager
def default_sigint_here():
    """Ctrl-C as a foreground job has it (pytest may run with it ignored): restored after."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_full_disk_stops_the_run_with_exit_1_and_the_resume_command(tmp_path, monkeypatch, capsys):
    def disk_full(config, plan, *, on_written, on_tick=None):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(launch, "run_groups", disk_full)
    args = ["bench", "--gpus", "1", "--impls", "naive", "--no-baseline", "--size", "tiny",
            "--results", str(tmp_path), "--run-id", "full"]  # fmt: skip
    assert cli.main(args) == 1
    out, err = capsys.readouterr()
    assert f"ddpbench: error: cannot write results in {tmp_path / 'full'}/: [Errno 28] No space left on device" in err
    assert out.strip().splitlines()[-1].startswith("ddpbench: stopped by a write error: 0 of 1 configurations saved")


def test_ctrl_c_in_a_command_without_runs_to_keep_is_one_line_not_a_traceback(tmp_path, monkeypatch, capsys):
    """predict and report once printed 40 lines of KeyboardInterrupt; they write whole files or nothing."""
    from harness.commands import report

    def interrupted(args, *, command):
        raise KeyboardInterrupt

    monkeypatch.setattr(report, "run", interrupted)
    assert cli.main(["report", "--results", str(tmp_path)]) == 130
    assert capsys.readouterr().err == "ddpbench report: stopped by SIGINT\n"


@pytest.mark.parametrize(("sig", "code", "name"), [(signal.SIGINT, 130, "SIGINT"), (signal.SIGTERM, 143, "SIGTERM")])
def test_a_collectives_run_stopped_before_its_first_world_size_keeps_nothing(
    tmp_path, monkeypatch, capsys, sig, code, name
):
    """An empty run folder was listed, and chosen by predict as the newest, as if it had measured the network;
    and SIGTERM ended collectives without a word."""
    from harness.launch import collectives

    def interrupted(config, *, run_id, environment, on_world_done=None):
        store.write_json(config.results / run_id / "collectives" / "run.json", {"run_id": run_id})
        os.kill(os.getpid(), sig)
        time.sleep(5)

    monkeypatch.setattr(collectives, "run_collectives", interrupted)
    args = ["collectives", "--results", str(tmp_path), "--run-id", "cut", "--gpus", "2"]
    with default_sigint_here():
        assert cli.main(args) == code
    out = capsys.readouterr().out
    assert f"stopped by {name} before the first message size was measured: nothing kept" in out
    assert not (tmp_path / "cut").exists()


def test_a_collectives_world_size_that_times_out_says_what_was_kept_and_predict_says_it_failed(
    tmp_path, monkeypatch, capsys
):
    """h6's `collectives --gpus 4` on 2 busy cores timed out at 4 ranks and said only "failed (timeout)", though w2
    was kept and predict priced on it; predict at 3-4 ranks then said "extrapolated" without a word of the failure."""
    from harness.commands.predict import counts
    from harness.launch import collectives
    from harness.perfmodel import network
    from harness.results import model_tables

    def timed_out(config, *, run_id, environment, on_world_done=None):
        run = config.results / run_id
        rows = [{"run_id": run_id, "op": "all_reduce", "world_size": 2, "bytes": size, "time_us": 50 + size / 1e3,
                 "correct": True} for size in (1024, 1 << 20)]  # fmt: skip
        store.write_parquet(model_tables.collectives_part(run, 2), rows, model_tables.COLLECTIVE_SCHEMA)
        for world in (2, 4):
            store.write_json(run / "plan" / f"world-{world}.json", {})
        failure = {"error_kind": "timeout", "error": "timeout: no progress for 602 s"}
        raise collectives.LaunchFailed(4, failure, run / "logs" / "world-4.log")

    monkeypatch.setattr(collectives, "run_collectives", timed_out)
    assert cli.main(["collectives", "--results", str(tmp_path), "--run-id", "slow", "--gpus", "4"]) == 1
    out = capsys.readouterr().out
    run = tmp_path / "slow"
    assert f"ddpbench: kept w2 (2 op × size rows) in {run}/: predict and report price on them, w4 and larger on " \
        "the nearest measured world size's fit, carried over (predict says so where it does)" in out  # fmt: skip
    measured = network.measured_network(run)
    assert measured.unfinished == {4: run / "logs" / "world-4.log"}
    counts.warn_unmeasured_world(measured, 3)
    assert (f"the one measured at 2 ranks, carried over (collectives run slow's launch at 4 ranks failed, nothing "
            f"kept: log {run}/logs/world-4.log)") in capsys.readouterr().err  # fmt: skip


def test_a_collectives_launch_still_running_is_said_to_run_not_to_have_failed(tmp_path, capsys):
    """A collectives run whose w4 launch was still in flight read as "failed, nothing kept": its session holds the
    run's lock (as run_collectives does) until it ends, and predict says the launch is still running."""
    from harness.commands.predict import counts
    from harness.launch import bench_run
    from harness.perfmodel import network
    from harness.results import model_tables

    run = tmp_path / "going"
    rows = [{"run_id": "going", "op": "all_reduce", "world_size": 2, "bytes": size, "time_us": 50 + size / 1e3,
             "correct": True} for size in (1024, 1 << 20)]  # fmt: skip
    store.write_parquet(model_tables.collectives_part(run, 2), rows, model_tables.COLLECTIVE_SCHEMA)
    for world in (2, 4):
        store.write_json(run / "plan" / f"world-{world}.json", {})
    bench_run.hold_run(run, "going")
    try:
        counts.warn_unmeasured_world(network.measured_network(run), 3)
        assert "launch at 4 ranks is still running, nothing kept yet" in capsys.readouterr().err
    finally:
        bench_run.release_runs()
    counts.warn_unmeasured_world(network.measured_network(run), 3)  # its session gone, the launch kept nothing
    assert "launch at 4 ranks failed, nothing kept" in capsys.readouterr().err


def test_run_collectives_holds_its_run_while_it_launches_and_says_what_running_unlocked_costs(
    tmp_path, monkeypatch, caplog
):
    """795e3b9d's reading rests on run_collectives holding the run's lock through its launches, which no test ran;
    where the folder cannot be locked (NFS without flock), its warning spoke of bench's resumes, which collectives
    has none of."""
    import errno
    import os

    from harness.config.collectives import CollectivesConfig
    from harness.launch import bench_run, collectives
    from harness.results.layout import session_running

    config = CollectivesConfig(gpus=4, device="cpu", backend="gloo", sizes=(1024, 4096), iters=1, warmup=0,
                               results=tmp_path)  # fmt: skip
    seen = []
    monkeypatch.setattr(collectives, "launch_world", lambda config, plan, world, **_: seen.append(
        (world, session_running(plan.run))))  # fmt: skip
    run = collectives.run_collectives(config, run_id="held", environment={})
    assert seen == [(2, True), (4, True)] and not session_running(run)  # held while it launches, let go at its end

    def no_flock(fd, operation):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(bench_run.fcntl, "flock", no_flock)
    collectives.run_collectives(config, run_id="unlockable", environment={})
    [warned] = [record.getMessage() for record in caplog.records]
    assert warned.endswith(f"cannot be locked (No locks available): {collectives.UNLOCKED}") and "resum" not in warned

"""`bench --resume`: a complete run is left as it is; a resumed run adds its timings to the earlier
session's; flags that would change the stored run are refused; `--retry-failed` runs the failed
configurations again and keeps their failed rows in retried/."""

from __future__ import annotations

import argparse
import errno
import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pyarrow.parquet as pq
import pytest

from harness import cli
from harness.results import contention, layout, store

TINY = ["--impls", "naive,flat", "--no-baseline", "--size", "tiny", "--gpus", "1", "--steps", "2", "--warmup", "2"]


def bench(capsys, results, *args: str) -> tuple[int, str, str]:
    try:
        code = cli.main(["bench", "--results", str(results), *args])
    except SystemExit as exit_:
        code = exit_.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_resume_leaves_a_complete_run_alone_and_adds_a_retry_to_its_timings(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DDPBENCH_FAULT", "raise:impl=flat,rank=0,step=1")
    code, out, _ = bench(capsys, tmp_path, "--run-id", "r", *TINY)
    assert code == 1 and "1 ok, 1 failed" in out, out
    # a failure is kept, not run again: the finished line says the command that does
    again = out.split("; 1 failed: ")[1]  # as ddpbench was called, then, as resume and a stopped run say it:
    assert again.split("\n")[0].endswith(f" bench --resume r --results {tmp_path} --retry-failed runs it again"), out
    monkeypatch.delenv("DDPBENCH_FAULT")
    summary_path = tmp_path / "r" / "summary.json"
    first = json.loads(summary_path.read_text())
    assert first["sessions"] == 1 and first["complete"] is True and first["wall_s"] == first["session"]["wall_s"]

    code, out, _ = bench(capsys, tmp_path, "--resume", "r", "--timeout", "30")
    assert code == 0
    assert "--timeout applies" not in out  # nothing runs, so nothing is steered
    assert ("ddpbench: run r is complete (2 configurations written): nothing to resume (1 failed: --retry-failed "
            "runs it again); nothing was written") in out  # fmt: skip
    assert json.loads(summary_path.read_text()) == first  # the first session's timings kept as they were

    assert "sessions" not in store.read_run_meta(tmp_path / "r")  # nothing resumed: nothing recorded
    resumed = ["--resume", "r", "--retry-failed", "--timeout", "30"]
    monkeypatch.setattr("sys.argv", ["/x/python", "-m", "pytest"])  # the caller's own argv: not this session's command
    code, out, _ = bench(capsys, tmp_path, *resumed)
    assert code == 0 and "1 to run (the failed ones set aside in retried/ to run again)" in out, out
    meta = store.read_run_meta(tmp_path / "r")  # each session, the first as the run recorded it
    typed = ["ddpbench", "bench", "--results", str(tmp_path), *resumed]  # as called, named as the README names it
    assert [s["command"] for s in meta["sessions"]] == [meta["command"], typed]
    assert meta["sessions"][0]["started_at"] == meta["started_at"]
    assert "ddpbench: --resume: --timeout applies (steering the running only)" in out
    statuses = dict(zip(*store.read_configs(tmp_path / "r")[["impl", "status"]].to_dict("list").values(), strict=True))
    assert statuses == {"naive": "ok", "flat": "ok"}
    kept = pq.read_table(next((tmp_path / "r" / "retried").glob("*flat*/configs.parquet"))).to_pylist()[0]
    assert kept["status"] == "failed" and "fault injected by DDPBENCH_FAULT" in kept["error"]
    total = json.loads(summary_path.read_text())
    second = total["session"]
    assert total["sessions"] == 2 and total["status_counts"] == {"ok": 2}
    assert total["wall_s"] == pytest.approx(first["wall_s"] + second["wall_s"])
    assert total["training_step_s"] == pytest.approx(first["training_step_s"] + second["training_step_s"])
    for phase in ("launch", "build", "steps"):
        assert total["phases_s"][phase] == pytest.approx(first["phases_s"][phase] + second["phases_s"][phase])
    assert "; over its 2 sessions the run took" in out.split(" finished ")[-1].splitlines()[0]  # its end's first line
    names = [r["launch"] for r in contention.read(tmp_path / "r")]  # each session's, the names reused
    assert len(names) == first["session"]["launches"] + second["launches"] and len(set(names)) < len(names)

    # stopped after its last row was written (Ctrl-C in the last teardown): the resume its stop named runs only the
    # end; it once said "complete ... nothing to resume", and the verdicts and the answer were never said
    store.write_json(summary_path, {**total, "complete": False})
    code, out, _ = bench(capsys, tmp_path, "--resume", "r")
    assert code == 0 and out.startswith("ddpbench: resuming run r: its 2 configurations are written, but it stopped "
                                        "before its end: only the end runs"), out  # fmt: skip
    assert out.splitlines()[-1].startswith("ddpbench: the answer (the strategy to deploy"), out
    ended = json.loads(summary_path.read_text())
    assert ended["complete"] is True and ended["sessions"] == 3 and ended["session"]["launched"] == 0
    assert ended["status_counts"] == {"ok": 2} and len(store.read_run_meta(tmp_path / "r")["sessions"]) == 3


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--steps", "500", "--timeout", "5"], "--resume runs the stored run's own grid and settings; --steps would "
         "change them: leave it out, or start a new run (flags that apply: --node-rank, --rdzv-endpoint, --budget, "
         "--timeout, --fail-fast)"),
        (["--gpus", "4", "--opt", "bucket_cap_mb=1", "--steps", "20"], "--gpus, --opt, --steps would change them"),
        (["--size", "tiny", "--impls", "stock,naive", "--steps", "20"], "; --steps would change them"),  # the same: ok
        (["--size", "small", "--impls", "stock"], "; --impls, --size would change them"),
    ],
)  # fmt: skip
def test_resume_refuses_a_flag_that_would_change_the_stored_run(tmp_path, capsys, args, said):
    stored = {"size": "tiny", "impls": ["stock", "naive"], "steps": 10}
    store.write_json(tmp_path / "x" / "run.json", {"run_id": "x", "config": stored})
    code, _, err = bench(capsys, tmp_path, "--resume", "x", *args)
    assert code == 2 and said in err and err.count("\n") == 1, err


@pytest.mark.parametrize("run_id", ["../R/x", "/abs/x", "a/b", ".."])
def test_resume_takes_a_run_id_inside_results_or_a_run_folder(tmp_path, capsys, run_id):
    code, _, err = bench(capsys, tmp_path, "--resume", run_id)
    said = "is not valid; use letters, digits" if "/" not in run_id else "is not a run folder; give a run's folder, or"
    assert code == 2 and err.startswith(f"ddpbench: error: --resume {run_id!r} {said}"), err


def test_resume_of_a_run_folder_reads_it_from_its_parent(tmp_path, capsys):
    """A run's folder, as compare and predict take it: its parent is --results, its name the id."""
    store.write_json(tmp_path / "x" / "run.json", {"run_id": "x", "config": {"steps": 10}})
    code, _, err = bench(capsys, tmp_path, "--resume", str(tmp_path / "x"), "--steps", "500")
    assert code == 2 and "--resume runs the stored run's own grid and settings; --steps would change" in err, err
    code, _, err = bench(capsys, tmp_path / "other", "--resume", str(tmp_path / "x"))
    assert code == 2 and f"--resume {str(tmp_path / 'x')!r} is not in --results {str(tmp_path / 'other')!r}" in err


HOLD = (
    "import sys; from pathlib import Path; from harness.launch import bench_run; "
    "bench_run.hold_run(Path(sys.argv[1]), 'failures'); print('held', flush=True); sys.stdin.read()"
)


def test_a_resume_while_another_session_runs_the_run_is_refused_and_sets_nothing_aside(tmp_path, capsys):
    """Two sessions in one run folder would both run what is left, each overwriting the other's rows (two
    resumes at once once printed the same figures and kept one session's); a session that ended, even by
    SIGKILL, holds it no longer."""
    run = tmp_path / "failures"
    shutil.copytree(Path(__file__).parents[1] / "data" / "failures", run)
    meta = json.loads((run / "run.json").read_text())  # a plan to go on with (the fixture's run.json records none)
    (run / "run.json").write_text(json.dumps({**meta, "config": {}, "configurations": []}))
    root = str(Path(__file__).parents[2])
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(run)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, cwd=root, env={"PYTHONPATH": root, "PATH": "/usr/bin:/bin"})  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        before = sorted(p.name for p in run.rglob("*"))
        code, _, err = bench(capsys, tmp_path, "--resume", "failures", "--retry-failed")
        assert code == 2 and err.count("\n") == 1, err
        assert f"run 'failures' in {str(tmp_path)!r} is being run by another ddpbench session (pid {holder.pid} " in err
        assert f"then ddpbench bench --resume failures --results {tmp_path} runs what it left" in err
        assert sorted(p.name for p in run.rglob("*")) == before  # no failed row set aside
    finally:
        holder.kill()
        holder.wait()
    from harness.launch import bench_run

    bench_run.hold_run(run, "failures")  # the killed holder's lock went with it
    bench_run.release_runs()


def test_a_folder_flock_cannot_lock_is_run_unlocked_with_one_warning(tmp_path, monkeypatch, caplog):
    """Some NFS mounts and Lustre without flock fail the call outright (ENOLCK, EOPNOTSUPP): once a traceback,
    exit 1 and an empty run folder left; now a one-line warning and the session goes on."""
    from harness.launch import bench_run

    def no_flock(fd, operation):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(bench_run.fcntl, "flock", no_flock)
    bench_run.hold_run(tmp_path, "unlockable")
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1 and "run 'unlockable''s folder cannot be locked (No locks available)" in warned[0]
    assert "\n" not in warned[0]
    bench_run.release_runs()


def test_a_session_that_ends_lets_go_of_its_run_though_the_process_goes_on(tmp_path, monkeypatch):
    from harness.commands import bench as bench_command
    from harness.launch import bench_run

    monkeypatch.setattr(bench_command, "_session", lambda args, command: bench_run.hold_run(tmp_path, "ended") or 0)
    assert bench_command.run(argparse.Namespace(), command=()) == 0
    other = os.open(tmp_path / layout.SESSION_LOCK, os.O_RDWR)  # another session's open file: its flock would
    try:  # fail (BlockingIOError) while this process still held the run
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(other)


def test_resume_of_a_run_json_without_a_plan_is_refused_in_one_line(tmp_path, capsys):
    """`bench --resume` of a tests/data run (whose run.json records no config or configurations) ended in a
    KeyError traceback: refused in one line, nothing written."""
    shutil.copytree(Path(__file__).resolve().parents[1] / "data" / "cpu_run", tmp_path / "cpu_run")
    before = sorted(p.name for p in (tmp_path / "cpu_run").rglob("*"))
    code, _, err = bench(capsys, tmp_path, "--resume", "cpu_run", "--retry-failed")
    assert code == 2 and err.count("\n") == 1 and "its run.json records no plan" in err, err
    assert sorted(p.name for p in (tmp_path / "cpu_run").rglob("*")) == before


def test_retry_failed_without_resume_is_refused(tmp_path, capsys, no_early_ranks):
    code, _, err = bench(capsys, tmp_path / "results", "--retry-failed", *TINY)
    assert code == 2 and "--retry-failed needs --resume RUN_ID" in err and not (tmp_path / "results").exists()


def test_the_command_a_hint_gives_is_this_install_not_another_on_path(tmp_path, monkeypatch):
    """Started as `python -m harness`: the hint says `-m harness` as typed (it once said `-m harness.cli`), with the
    interpreter by name only where PATH finds this very one; `ddpbench` only when the one on PATH is this
    interpreter's own (called from Python, not from a shell)."""
    import shutil
    import sys
    from pathlib import Path

    from harness.commands.console import invoked

    here = Path(sys.executable).absolute().parent
    monkeypatch.setattr(sys, "argv", [str(Path(cli.__file__).parent / "__main__.py")])
    monkeypatch.setattr(shutil, "which", lambda name: str(tmp_path / "elsewhere" / "bin" / name))
    assert (
        invoked.ddpbench_command() == f"{invoked._relative(Path(sys.executable))} -m harness"
    )  # another python on PATH
    monkeypatch.setattr(shutil, "which", lambda name: str(here / name) if name == Path(sys.executable).name else None)
    assert invoked.ddpbench_command() == f"{Path(sys.executable).name} -m harness"  # this one, an activated venv
    monkeypatch.setattr(sys, "argv", [str(Path(cli.__file__))])
    assert invoked.ddpbench_command().endswith(" -m harness.cli")  # as typed
    monkeypatch.setattr(sys, "argv", ["-c"])  # from Python: the script on PATH is this interpreter's own
    monkeypatch.setattr(shutil, "which", lambda name: str(here / name))
    assert invoked.ddpbench_command() == "ddpbench"
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert invoked.ddpbench_command().endswith(" -m harness")


def _stopped_auto_run(tmp_path, monkeypatch, *, needed: int, budget_s: float | None = 1.0, have: int = 2):
    """A stored auto run a --budget stopped between rounds, its one open verdict needing `needed` repeats (the
    verdicts and next round as harness.launch.repeats would judge them), its last session at 2 s a configuration."""
    from harness.analysis.verdicts import decide
    from harness.config.bench import BenchConfig
    from harness.launch import bench_run, repeats

    run = tmp_path / "r"
    store.write_json(run / "run.json", {"run_id": "r", "config": {}})
    store.write_json(run / "summary.json", {"session": {"wall_s": 30.0, "phases_s": {"start": 6.0}, "launched": 12}})
    command = ("ddpbench", "bench", "--impls", "stock", "--max-repeats", "6", "--budget", "1s", "--run-id", "r")
    config = BenchConfig(gpus=2, impls=("stock",), repeats="auto", max_repeats=6, budget_s=budget_s, command=command)
    plan = bench_run.BenchRun("r", run, "cpu", 1, [], {})
    monkeypatch.setattr(bench_run, "resume_run", lambda *a, **k: (config, plan, 12))
    verdict = decide.Verdict("cap", "w2 mlp/tiny stock", "open", False, have, needed, frozenset({"c0", "c1"}))
    round_ = [SimpleNamespace(world_size=2)] * 4
    monkeypatch.setattr(repeats, "_standing", lambda *a, pace, **k: (repeats.Decided([verdict], 2, 8 * pace), round_))
    return run


def test_a_resume_whose_budget_fits_no_round_says_so_and_writes_nothing(tmp_path, capsys, monkeypatch):
    """Given no --budget, a resume said its stored --budget 1s applied and it went on deciding, then ran nothing
    ('the next round would end past --budget') and recorded a session that ran nothing."""
    run = _stopped_auto_run(tmp_path, monkeypatch, needed=4)
    code, out, err = bench(capsys, tmp_path, "--resume", "r")
    assert code == 0 and err == "", err
    assert out.startswith("ddpbench: run r: its stored --budget 1s (from this session's start) cannot fit a round of "
                          "4 configuration runs, about 8 s at the last session's pace: "), out  # fmt: skip
    assert out.endswith(f" bench --resume r --results {tmp_path} --budget 1m goes on; nothing was written\n"), out
    assert out.count("\n") == 1 and "going on" not in out and "sessions" not in store.read_run_meta(run)


def test_a_resume_whose_open_verdicts_all_need_more_than_max_repeats_sends_them_to_a_new_run(
    tmp_path, capsys, monkeypatch
):
    """The last word had sent the verdict (need 8 > --max-repeats 6) to a new run; a resume then said it went on
    deciding it 'up to its --max-repeats 6'."""
    run = _stopped_auto_run(tmp_path, monkeypatch, needed=8, budget_s=None, have=5)  # a need sized from 5: no guess
    code, out, _ = bench(capsys, tmp_path, "--resume", "r")
    assert code == 0 and out.count("\n") == 1, out
    assert out.startswith("ddpbench: run r: nothing to resume: its 1 open verdict needs more repeats than its "
                          "--max-repeats 6, which --resume keeps: to decide it, a new run: "), out  # fmt: skip
    assert out.endswith(" bench --impls stock --max-repeats 8; nothing was written\n"), out
    assert "sessions" not in store.read_run_meta(run)


def test_a_fault_injected_only_in_a_resumed_session_is_recorded_and_named(tmp_path, monkeypatch):
    """run.json's environment is the first session's: a fault set only for --resume read as a clean run on its pages."""
    from harness.analysis.verdicts.environment import injected_fault
    from harness.commands.resume import record_session
    from harness.results.layout import RunFolder

    store.write_json(RunFolder(tmp_path).run_json, {"started_at": "t0", "command": ["ddpbench", "bench"]})
    monkeypatch.delenv("DDPBENCH_FAULT", raising=False)
    record_session(tmp_path, ("ddpbench", "bench", "--resume", "r"))
    assert injected_fault(store.read_run_meta(tmp_path)) == ""  # a clean resume records no fault
    monkeypatch.setenv("DDPBENCH_FAULT", "slow:rank=1,ms=10")
    record_session(tmp_path, ("ddpbench", "bench", "--resume", "r"))
    assert injected_fault(store.read_run_meta(tmp_path)) == "slow:rank=1,ms=10"


def test_a_failure_that_names_its_fix_gets_the_whole_new_bench_command_with_it():
    """A walkthrough's MoE run failed stock and zero on unused parameters ('--opt find_unused_parameters=true lets DDP
    run such a model'), and its last line offered only `--resume RUN --retry-failed`, which runs them again without
    it: the fix is given in the run's command, made a new run (no --run-id, its old value of the option gone)."""
    import pandas as pd

    from harness.commands.summary import fix_words

    unused = (
        "rank 0: RuntimeError: DDP: the loss did not use some of the model's parameters (blocks.0.w and 97 "
        "more); --opt find_unused_parameters=true lets DDP run such a model [traceback in the run folder: x]"
    )
    configs = pd.DataFrame({"status": ["ok", "failed", "failed", "failed"],
                            "error": [None, unused, unused, "rank 1 killed by SIGABRT (exit code -6)"]})  # fmt: skip
    command = ("/x/ddpbench", "bench", "--workloads", "moe.py:MoE", "--impls", "stock,zero,fsdp", "--run-id", "moe",
               "--opt", "find_unused_parameters=false", "--opt=bucket_cap_mb=1,25", "--retry-failed")  # fmt: skip
    said = fix_words(configs, command)
    assert said.startswith("; 2 of them name their fix, which --retry-failed would not apply: a new run with it: ")
    assert said.endswith(" bench --workloads moe.py:MoE --impls stock,zero,fsdp --opt=bucket_cap_mb=1,25 --opt "
                         "find_unused_parameters=true")  # fmt: skip
    assert fix_words(configs.assign(error="rank 1 killed by SIGABRT (exit code -6)"), command) == ""
    assert fix_words(configs, ("/x/ddpbench",)) == ""  # the run's command not known: the retry's words alone


def test_a_faults_mark_follows_the_rows_measured_with_it_set():
    """`bench --resume flt --retry-failed` without the fault measured its failed rows again, yet the index and compare
    still called every time the fault's: the mark is of the rows whose latest launch came in a session that had it
    set (plan/*.contention.json against run.json's sessions), and goes where none is left."""
    from harness.analysis.verdicts.environment import environment_differences, fault_rows, fault_share, kept_fault

    fault = "kill:impl=stock,world=2,rank=1,step=3"
    meta = {"run_id": "flt", "environment": {"env_vars": {"DDPBENCH_FAULT": fault}},
            "configurations": [{"config_id": c, "world_size": 2} for c in ("local", "stock")],
            "sessions": [{"started_at": "2026-12-07T12:23:12+00:00"},
                         {"started_at": "2026-12-07T12:23:56+00:00"}]}  # fmt: skip
    first, retry = 1796646192.5, 1796646247.4  # a launch of each session, seconds after its start
    launches = [{"configurations": ["local", "stock"], "started_at": first}]
    assert fault_rows(meta, launches) == ["local", "stock"]
    partly = fault_rows(meta, [*launches, {"configurations": ["stock"], "started_at": retry}])
    assert (
        partly == ["local"]
        and fault_share({**meta, "fault_configs": partly}) == "on the 1 of 2 configurations it targeted"
    )
    assert kept_fault({**meta, "fault_configs": partly}) == fault
    redone = fault_rows(meta, [*launches, {"configurations": ["local", "stock"], "started_at": retry}])
    assert redone == [] and kept_fault({**meta, "fault_configs": redone}) == ""
    assert not any("fault" in note for note in environment_differences({**meta, "fault_configs": redone}, meta | {
        "environment": {}, "run_id": "g1"}))  # fmt: skip
    assert fault_rows(meta, None) is None and kept_fault(meta) == fault  # no launch records: the whole run, as before


def test_a_faults_mark_is_of_the_rows_it_targets_not_every_row_run_with_it_set():
    """A run with DDPBENCH_FAULT='slow:impl=stock,world=2,rank=1,ms=3' read 'FAULT INJECTED on purpose (set while 115
    of 115 configurations ran)': every row its session ran, though the fault held stock at 2 ranks alone (21 rows)."""
    from harness.analysis.verdicts.environment import fault_rows, fault_share, targets

    fault = "slow:impl=stock,world=2,rank=1,ms=3"
    configurations = [{"config_id": f"w{world}-{impl}-r{repeat}", "impl": impl, "world_size": world, "repeat": repeat,
                       "impl_options": {}} for world in (1, 2) for impl in ("local", "stock", "zero")
                      for repeat in (0, 1)]  # fmt: skip
    meta = {"environment": {"env_vars": {"DDPBENCH_FAULT": fault}}, "configurations": configurations,
            "sessions": [{"started_at": "2026-12-07T12:23:12+00:00"}]}  # fmt: skip
    launches = [{"configurations": [c["config_id"] for c in configurations], "started_at": 1796646192.5}]
    marked = fault_rows(meta, launches)
    assert marked == ["w2-stock-r0", "w2-stock-r1"]
    assert fault_share({**meta, "fault_configs": marked}) == "on the 2 of 12 configurations it targeted"
    local = {"impl": "local", "world_size": 2, "repeat": 0}
    assert not targets(fault, local) and targets("kill:world=2", local)  # slow never holds the baseline; kill may
    capped = {"impl": "stock", "world_size": 2, "repeat": 1, "impl_options": {"bucket_cap_mb": 25}}
    assert targets("raise:cap=25,repeat=1", capped) and not targets("raise:cap=5", capped)
    assert targets("raise:cap=5;kill:impl=stock", capped)  # one of several
    assert targets(fault, {"config_id": "x"})  # a configuration that records nothing cannot be told apart


def test_a_fault_targets_only_rows_with_its_rank_and_step():
    """'slow:rank=1,ms=30' once marked the world-size-1 rows too (no rank 1 there), and a fault due at step 25
    the rows that ran 3 + 20 steps: the rank and step pick as the ranks' own FaultRule.applies reads them."""
    from harness.analysis.verdicts.environment import fault_rows, targets

    one, two = ({"impl": "stock", "world_size": world, "repeat": 0, "steps": 20, "warmup": 3} for world in (1, 2))
    assert not targets("slow:rank=1,ms=30", one) and targets("slow:rank=1,ms=30", two)
    assert targets("raise:rank=1,step=22", two) and not targets("raise:rank=1,step=23", two)
    assert targets("slow:rank=1,ms=30,step=22", two) and not targets("slow:rank=1,ms=30,step=23", two)
    server = {"impl": "rpc_hybrid", "world_size": 2, "extra_ranks": 1, "steps": 20, "warmup": 3}
    assert targets("raise:rank=2,step=40", server) and not targets("raise:rank=3", server)  # its forward calls
    assert targets("raise:rank=1,step=99", {"impl": "stock"})  # steps and world not recorded: cannot be told apart
    assert targets("melt:rank=1", one)  # a fault this ddpbench cannot read cannot be told apart either
    meta = {"environment": {"env_vars": {"DDPBENCH_FAULT": "slow:rank=1,ms=30"}},
            "configurations": [{**one, "config_id": "w1"}, {**two, "config_id": "w2"}],
            "sessions": [{"started_at": "2026-12-07T12:23:12+00:00"}]}  # fmt: skip
    assert fault_rows(meta, [{"configurations": ["w1", "w2"], "started_at": 1796646192.5}]) == ["w2"]

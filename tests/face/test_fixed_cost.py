"""A real `bench` launch says where its wall time went beyond the timed steps, and keeps the split."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from harness import cli
from harness.commands import console
from harness.commands.console import forecast
from harness.handoff import costs


def test_bench_prints_and_keeps_where_its_wall_time_went(tmp_path, capsys, monkeypatch):
    from harness.commands.console import invoked

    monkeypatch.setattr(invoked, "ddpbench_command", lambda: ".venv/bin/ddpbench")  # as the README's setup calls it
    code = cli.main(["bench", "--results", str(tmp_path), "--run-id", "r", "--impls", "naive", "--no-baseline",
                     "--size", "tiny", "--gpus", "1", "--steps", "3", "--warmup", "1"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"results in {tmp_path / 'r'}/ (its pages: .venv/bin/ddpbench report --results {tmp_path})" in out
    assert "training steps (warm-up included): the wall time " in out and "× overhead" not in out  # a ratio, named
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    split = summary["phases_s"]
    # Every phase one launch of one configuration goes through (no profile; model info may be 0.0x s).
    for phase in ("start", "launch plan", "launch", "imports", "process group", "row writer", "build", "steps",
                  "parity", "gradient profile", "write", "teardown", "verdicts"):  # fmt: skip
        assert split.get(phase, 0.0) > 0.0, (phase, split)
    # what was `other` (47 % of a walkthrough's 124 s) is named: the launcher's plan, rank 0's pandas import and
    # rows read, the verdicts at the end; what is left is the progress lines and the launcher's polling
    assert split["other"] < split["row writer"] + split["launch plan"] + split["verdicts"], split
    assert summary["session"]["launches"] == 1 and summary["session"]["launched"] == 1
    # with `other`, the console's rest, the phases make up the wall time (rank 0's clock and the launcher's agree)
    assert summary["wall_s"] - 1e-6 <= sum(split.values()) <= summary["wall_s"] + 0.5 and split["other"] >= 0
    assert split["steps"] <= summary["training_step_s"] + 1e-6
    line = next(line for line in out.splitlines() if "went (s):" in line)
    # In order, from the command's start (called in-process, as here, it may round away: under 0.05 s).
    wall = re.escape(console.seconds_text(summary["wall_s"]))
    assert re.search(rf"; where the {wall} went \(s\): (start [\d.]+, )?launch ", line)
    # the end of a run in two lines: what finished, then its fixed cost, its steps and where its time went
    lines = out.splitlines()
    finished = next(k for k, said in enumerate(lines) if " finished in " in said)
    assert lines[finished + 1] == line and line.startswith("ddpbench: fixed cost "), lines[finished:]
    # split as the dry run splits it (handoff.fixed_cost): once, a launch's, a configuration's, adding up to it
    session = summary["session"]
    launch = sum(session["phases_s"].get(p, 0.0) for p in costs.PER_LAUNCH)
    each = sum(session["phases_s"].get(p, 0.0) for p in costs.PER_CONFIGURATION)
    once = max(0.0, session["wall_s"] - session["phases_s"]["steps"] - launch - each)
    assert (f"beyond the timed steps: 1 launch at {launch:.2g} s, 1 configuration at {each:.2g} s, {once:.2g} s "
            "once; ") in line  # fmt: skip


def test_the_command_line_reads_its_flags_before_importing_torch():
    """`--help` and a bad flag answer at once: torch's import (2-3 s) waits for a command that computes."""
    probe = "import sys, harness.cli; print(sorted(m for m in ('torch', 'numpy', 'pandas') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_a_dry_run_takes_the_fixed_cost_from_an_earlier_runs_split(small_run, capsys):
    """The shared run (2 launches; dataparallel skipped, the rest launched) planned again: its own fixed cost, split
    into once, a launch's and a configuration's, adds up to what it paid beyond its steps."""
    from harness.handoff import fixed_cost
    from harness.results import store

    summary = json.loads((small_run / "summary.json").read_text())["session"]
    paid = summary["wall_s"] - summary["phases_s"]["steps"]
    measured = fixed_cost.measured(small_run, store.read_run_meta(small_run))
    shape = fixed_cost.Shape(2, summary["launched"], summary["launched"])  # one repeat: each a first
    assert summary["launches"] == 2 and measured.for_plan(shape) == pytest.approx(paid)
    flags = ["--gpus", "2", "--impls", "naive,flat,stock,bucketed,dataparallel", "--workloads", "mlp", "--size", "tiny",
             "--steps", "4", "--warmup", "2", "--repeats", "1", "--results", str(small_run.parent)]  # fmt: skip
    assert cli.main(["bench", "--dry-run", *flags]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if "of fixed cost" in line)
    assert (
        line.startswith("ddpbench: about ")
        and f" + about {forecast.minutes_text(paid)} of fixed cost (2 launches" in line
    )
    assert line.endswith("as 1 earlier run of 2 simulated GPUs here measured it (e2e)")
    # the run's own last line said the same split: a configuration's cost is not the whole fixed cost over their count
    split = line.split("of fixed cost (")[1].split(")")[0]
    said = summarized(small_run)
    assert f"beyond the timed steps: {split}; " in said, (said, split)


def summarized(run) -> str:
    """The fixed cost line bench's end says of `run`, from its summary.json."""
    import io
    from contextlib import redirect_stdout

    summary = json.loads((run / "summary.json").read_text())["session"]
    with redirect_stdout(io.StringIO()) as out:
        console.fixed_cost_split(summary["wall_s"], summary["phases_s"], run=run)
    return next(line for line in out.getvalue().splitlines() if "fixed cost" in line)


def test_the_last_line_leaves_the_pages_to_the_makefile_that_builds_them(tmp_path, monkeypatch):
    """`make bench` builds the pages next (it sets REPORT_NEXT_ENV): its output does not tell the user to."""
    from harness.commands import summary
    from harness.commands.console import invoked

    monkeypatch.setattr(invoked, "ddpbench_command", lambda: ".venv/bin/ddpbench")
    monkeypatch.delenv(summary.REPORT_NEXT_ENV, raising=False)
    assert summary.pages_hint(tmp_path) == f" (its pages: .venv/bin/ddpbench report --results {tmp_path})"
    monkeypatch.setenv(summary.REPORT_NEXT_ENV, "1")
    assert summary.pages_hint(tmp_path) == ""

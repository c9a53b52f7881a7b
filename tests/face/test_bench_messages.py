"""What `bench` says at the start and how it ends when nobody reads: more ranks than cores is a warning,
a rendezvous endpoint is checked, two run folders with one run id are named by `report`, and a closed
pipe stops the printing, never the run."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from types import SimpleNamespace

import pytest
from bad_input import refused
from conftest import PROJECT

from harness import cli
from harness.commands.console import plan as plan_lines
from harness.config import bench as cfgmod
from harness.config import grid, ranks


def _configuration(world: int) -> grid.Configuration:
    return grid.Configuration(config_id=f"w{world}", impl="naive", impl_options={}, workload="mlp", size="tiny",
                                world_size=world, nnodes=1, batch_size=8, steps=2, warmup=2, dtype="fp32",
                                device="cpu", backend="gloo", seed=0, parity=True)  # fmt: skip


def test_more_ranks_than_cores_is_a_warning_naming_both(capsys, monkeypatch):
    import os

    monkeypatch.setattr(ranks, "available_cpus", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.5, 0.5, 0.5))  # a quiet machine: the busy warning is below
    plan = SimpleNamespace(device="cpu", threads_per_rank=1, run_id="r", run="results/r",
                           configurations=[_configuration(w) for w in (1, 2, 4, 8, 16, 32, 64)])  # fmt: skip
    plan_lines.say_plan(plan, requested_dtype="auto")
    err = capsys.readouterr().err
    assert err == ("ddpbench: warning: 64 ranks per node on 2 CPU cores: ranks take turns on the cores, so the "
                   "larger world sizes' steps include waiting (report: 'Cores shared')\n")  # fmt: skip
    plan.configurations = plan.configurations[:2]
    plan_lines.say_plan(plan, requested_dtype="auto")
    assert capsys.readouterr().err == ""  # 2 ranks on 2 cores: nothing to say


def test_an_auto_run_says_its_configurations_are_the_start(capsys):
    first = [dataclasses.replace(_configuration(2), repeat=r, repeated=True) for r in (0, 1)]
    plan = SimpleNamespace(device="cpu", threads_per_rank=1, run_id="r", run="results/r", configurations=first)
    plan_lines.say_plan(plan, requested_dtype="auto", grows=True)
    assert "ddpbench: run r: 2 configurations, to start (--repeats auto adds the repeats its open verdicts need) -> " \
           "results/r/" in capsys.readouterr().out  # fmt: skip
    plan_lines.say_plan(plan, requested_dtype="auto", grows=False)  # a fixed count, or a resumed run
    assert "ddpbench: run r: 2 configurations -> results/r/" in capsys.readouterr().out


def test_a_resume_with_nothing_planned_says_no_plan_of_nothing(capsys, monkeypatch):
    """A resume that goes on deciding opened 'world sizes []', 'precision: nothing left to run', 'run …: 0
    configurations' and then ran 21: its own line says which verdicts it decides, at which world sizes."""
    import os

    monkeypatch.setattr(os, "getloadavg", lambda: (0.5, 0.5, 0.5))
    plan = SimpleNamespace(device="cpu", threads_per_rank=1, run_id="r", run="results/r", configurations=[])
    plan_lines.say_plan(plan, requested_dtype="auto", grows=False)
    assert capsys.readouterr() == ("", "")


def test_a_resume_says_which_stored_budget_applies_when_given_none(capsys):
    """A resume given no --budget said 'more than the 69 s left of --budget' of the 3m the run stored, and no word
    of which: the steering line names it."""
    from harness.commands import resume

    config = cfgmod.BenchConfig(gpus=2, impls=("stock",), budget_s=180.0)
    resume._say_steering(SimpleNamespace(given_flags={}), {}, config)
    assert capsys.readouterr().out == ("ddpbench: --resume: its stored --budget 3m (from this session's start) "
                                       "applies (steering the running only); the grid and every other setting are "
                                       "the run's\n")  # fmt: skip
    given = SimpleNamespace(given_flags={"budget_s": "--budget", "timeout_s": "--timeout"})
    resume._say_steering(given, {"budget_s": 60.0, "timeout_s": 30.0}, config)  # given: the flags, as before
    assert capsys.readouterr().out.startswith("ddpbench: --resume: --budget, --timeout apply (steering")
    resume._say_steering(SimpleNamespace(given_flags={}), {}, dataclasses.replace(config, budget_s=None))
    assert capsys.readouterr().out == ""  # nothing steers it: nothing to say


@pytest.mark.parametrize("endpoint", ["node0:29500", "node0", "10.0.0.1:1", "[fe80::1]:29400", "a-b.c"])
def test_a_rendezvous_endpoint_host_port_is_accepted(endpoint):
    cfgmod.check_endpoint(endpoint)


@pytest.mark.parametrize("endpoint", ["node0:", ":29500", "node0:99999", "node0:0", "node0:port", "http://n:1",
                                      "n 0:1", "node0:29500:1"])  # fmt: skip
def test_a_bad_rendezvous_endpoint_is_bad_input(tmp_path, capsys, endpoint):
    err = refused(capsys, tmp_path, "--nnodes", "2", "--run-id", "j", "--rdzv-endpoint", endpoint)  # exit 2, none kept
    assert err == (f"ddpbench: error: --rdzv-endpoint {endpoint!r} is not valid; give HOST[:PORT] (e.g. node0:29500; "
                   "PORT 1-65535, torchrun's default 29400)\n")  # fmt: skip


def test_report_names_both_folders_that_share_a_run_id(tmp_path, capsys):
    from harness.results import store

    for folder in ("X", "X-base"):
        store.write_json(tmp_path / "r" / folder / "run.json", {"run_id": "X", "started_at": folder})
    assert cli.main(["report", "--results", str(tmp_path / "r"), "--out", str(tmp_path / "site")]) == 0
    err = capsys.readouterr().err
    assert (f"ddpbench: warning: {tmp_path / 'r' / 'X-base'} and {tmp_path / 'r' / 'X'} both have run_id 'X' in "
            "run.json: the site keeps both pages, told apart by folder (runs/X-base.html and runs/X.html)"
            ) in err  # fmt: skip


def test_a_reader_that_goes_away_stops_the_printing_not_the_run(tmp_path):
    command = [sys.executable, "-m", "harness", "bench", "--impls", "naive", "--no-baseline", "--size", "tiny",
               "--gpus", "1", "--steps", "2", "--warmup", "2", "--results", str(tmp_path), "--run-id", "p"]  # fmt: skip
    bench_process = subprocess.Popen(command, cwd=PROJECT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = bench_process.stdout.readline()  # `| head -1`
    bench_process.stdout.close()
    _, err = bench_process.communicate(timeout=240)
    assert first.startswith("ddpbench: no GPU in use")
    assert bench_process.returncode == 0 and "Traceback" not in err and "BrokenPipe" not in err, err
    summary = json.loads((tmp_path / "p" / "summary.json").read_text())
    assert summary["status_counts"] == {"ok": 1} and summary["complete"] is True


def test_a_busy_machine_is_warned_of_before_a_cpu_run(capsys, monkeypatch):
    """Its steps share the cores with whatever else runs: a review's rank of 2 threads ran 50× slower under load."""
    import os

    monkeypatch.setattr(ranks, "available_cpus", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (3.5, 3.0, 2.0))
    plan = SimpleNamespace(device="cpu", threads_per_rank=1, run_id="r", run="results/r",
                           configurations=[_configuration(w) for w in (1, 2)])  # fmt: skip
    plan_lines.say_plan(plan, requested_dtype="auto")
    err = capsys.readouterr().err
    assert err.startswith("ddpbench: warning: this machine is busy (load 3.5 on 2 cores): the ranks share its cores")
    assert err.count("\n") == 1


def test_a_dry_run_lists_every_configuration_and_writes_nothing(capsys, tmp_path, monkeypatch):
    results = tmp_path / "r"
    monkeypatch.chdir(tmp_path)  # where the default results/ holds no run either
    flags = ["--impls", "stock", "--bucket-cap-mb", "1,25", "--workloads", "mlp", "--size", "tiny", "--gpus", "2"]
    assert cli.main(["bench", "--dry-run", *flags, "--results", str(results)]) == 0
    out = capsys.readouterr().out
    listed = [line.strip() for line in out.splitlines() if line.startswith("  [")]
    # local and stock at two caps, at world sizes 1 and 2, twice each (two caps to decide between: auto's start)
    assert len(listed) == 12 and listed[0].startswith("[1/12] w1 mlp/tiny local:")
    # the second repeat's launches run the first's order backwards (the baseline last): every place alike
    assert listed[9].startswith("[10/12] w2 mlp/tiny stock bucket_cap_mb=25 (repeat 2):")
    assert "[12/12] w2 mlp/tiny local (repeat 2):" in listed[-1]
    assert "dry run: 12 configurations in 4 torchrun launches, to start (--repeats auto adds" in out
    assert " to run, " not in out  # nothing skipped: the 12 are the ones to run
    # no earlier run in the folder: the steps' floor by FLOPs, no total: the fixed cost on top is not known yet
    forecast = next(line for line in out.splitlines() if " of steps (all 12 configurations, by their FLOPs" in line)
    assert forecast.startswith(("ddpbench: at least ", "ddpbench: a floor under 0.1 s"))  # a floor, said as one
    assert "in all" not in forecast and " of steps alone (2 repeats each) to " in out  # --repeats auto's range too
    assert forecast.endswith(f"; the fixed cost on top, not known yet (no earlier run of 2 simulated GPUs "
                             f"here in {str(results)!r} nor in 'results' measured it: launches, imports, model "
                             "info, building, parity)")  # fmt: skip
    # what can only be skipped here is said so, with the rank's reason, before anything is booked
    both = ["--impls", "stock,dataparallel,rpc_hybrid", "--workloads", "mlp", "--size", "tiny", "--gpus", "2"]
    assert cli.main(["bench", "--dry-run", *both, "--results", str(results)]) == 0
    out = capsys.readouterr().out
    assert "[3/8] w1 mlp/tiny dataparallel: skipped here: needs CUDA GPUs" in out
    assert "[7/8] w2 mlp/tiny dataparallel: skipped here, as [3]" in out  # a reason in full once: a sweep met one 16×
    assert "w1 mlp/tiny rpc_hybrid: skipped here: workload 'mlp' has no remote part for the parameter server" in out
    assert "w2 mlp/tiny stock: 3 warm-up + 20 timed steps" in out
    # the count the forecast goes on with ('all 4 configurations') is said beside the 8 listed, with why the rest
    assert (
        "dry run: 8 configurations in 2 torchrun launches: 4 to run, 4 skipped here (2 as [3]: needs CUDA GPUs; "
        "2 as [4]: workload 'mlp' has no remote part for the parameter server); nothing launched"
    ) in out
    assert not results.exists()
    assert cli.main(["bench", "--dry-run", "--resume", "x", "--results", str(results)]) == 2
    assert "--dry-run plans a new run" in capsys.readouterr().err and not results.exists()


def test_a_full_size_whose_ranks_would_not_fit_the_host_is_said_before_the_run(capsys, tmp_path, monkeypatch):
    """A walkthrough's --dry-run of hf:llama at its full size listed 8 configurations of ranks that each needed
    about 150 GiB, on a 23 GiB machine, without a word. mlp/full: 1.0 GiB of parameters, as much of gradients,
    of DDP's buckets, and twice that of Adam's moments: about 5 GiB a rank with its activations."""
    from harness.commands.console import plan

    flags = ["--impls", "stock", "--workloads", "mlp", "--size", "full", "--gpus", "2", "--optimizer", "adam",
             "--results", str(tmp_path / "r")]  # fmt: skip
    monkeypatch.setattr(plan, "available_bytes", lambda: 8 * 2**30)
    assert cli.main(["bench", "--dry-run", *flags]) == 0
    err = capsys.readouterr().err
    assert ("warning: mlp/full: a DDP rank holds about 5.02 GiB here (parameters, gradients, DDP's buckets, Adam's "
            "moments and activations, counted on the meta device), 10 GiB for 2 ranks; this machine has 8 GiB "
            "available: its ranks would be killed for memory") in err  # fmt: skip
    monkeypatch.setattr(plan, "available_bytes", lambda: 16 * 2**30)
    assert cli.main(["bench", "--dry-run", *flags]) == 0 and "killed for memory" not in capsys.readouterr().err


def test_a_model_of_your_own_whose_ranks_would_not_fit_is_said_whatever_the_size(capsys, tmp_path, monkeypatch):
    """--size does not scale a file of yours: a walkthrough's 1.3B-parameter file at the default size was not warned
    about and would have been killed. examples/my_workload.py:MyModel at width 4096: 4 × (4096² + 4096) + 40,970
    parameters, 256 MiB of them; with gradients and DDP's buckets, 0.75 GiB a rank."""
    from harness.commands.console import plan

    flags = ["--impls", "stock", "--workloads", "examples/my_workload.py:MyModel", "--wopt", "width=4096", "--gpus",
             "2", "--results", str(tmp_path / "r")]  # fmt: skip
    monkeypatch.setattr(plan, "available_bytes", lambda: 2**30)
    assert cli.main(["bench", "--dry-run", *flags]) == 0
    err = capsys.readouterr().err
    assert "warning: my_workload.py:MyModel[width=4096]: a DDP rank holds about 0.751 GiB here" in err
    assert "smaller --wopt options much less, from which predict --run RUN --train-wopt KEY=VALUE counts" in err


def test_a_small_size_that_its_options_enlarge_is_judged_against_the_hosts_memory(capsys, tmp_path, monkeypatch):
    """A walkthrough's hf:llama at --size tiny with --wopt hidden_size=2048 … planned a 1.3B model on two ranks, about
    72 GiB each on 23 GiB, without a word: only the full size and files of yours were judged. mlp/tiny with a million
    classes: 33M parameters (width 32 into 1,000,000 logits), 126 MiB of them; with gradients, buckets and 8 samples'
    31 MiB of logits, 0.399 GiB."""
    from harness.commands.console import plan

    flags = ["--impls", "stock", "--workloads", "mlp", "--size", "tiny", "--gpus", "2", "--results",
             str(tmp_path / "r")]  # fmt: skip
    monkeypatch.setattr(plan, "available_bytes", lambda: 2**28)
    assert cli.main(["bench", "--dry-run", *flags]) == 0 and "killed for memory" not in capsys.readouterr().err
    assert cli.main(["bench", "--dry-run", *flags, "--wopt", "classes=1000000"]) == 0
    err = capsys.readouterr().err
    assert "warning: mlp[classes=1000000]/tiny: a DDP rank holds about 0.399 GiB here (parameters, gradients" in err
    assert "this machine has 0.25 GiB available: its ranks would be killed for memory" in err
    assert "smaller --wopt options much less, from which predict --run RUN --train-wopt KEY=VALUE counts" in err


def test_strategies_left_untaken_apart_for_one_reason_are_named_once_together():
    """bench said DDP's 330-character reason twice, once for stock and again for zero: one line names both; a
    strategy with a reason of its own keeps its own line."""
    from harness.commands import bench
    from harness.results import store

    configs = store.read_configs(PROJECT / "tests" / "data" / "cpu_run")
    ddp_reason = "not measured: timing DDP's buckets replaces its fused C++ all-reduce with a Python hook"
    untimed = (configs["world_size"] == 2) & ~configs["baseline"].astype(bool)
    same = configs.assign(gap_ms=float("nan"), comm_note=configs["comm_note"].where(~untimed, ddp_reason))
    assert [line for line in bench._why_lines(same, confidence=0.95)[0] if "not taken apart" in line] == [
        f"naive, stock: not taken apart: {ddp_reason}"
    ]
    own = same.assign(comm_note=same["comm_note"].where(same["impl"] != "naive", "its own reason"))
    assert [line for line in bench._why_lines(own, confidence=0.95)[0] if "not taken apart" in line] == [
        "naive: not taken apart: its own reason",
        f"stock: not taken apart: {ddp_reason}",
    ]


def test_a_gap_bucket_timeline_would_take_apart_is_said_with_the_runs_own_command_and_that_flag():
    """'stock, zero: not taken apart: not measured … --bucket-timeline measures it' left the command to rebuild: the
    run's own command with the flag, to paste (a new run: its --run-id is taken)."""
    from harness.commands import bench
    from harness.commands.console import invoked
    from harness.results import store
    from harness.results.values import UNHOOKED

    configs = store.read_configs(PROJECT / "tests" / "data" / "cpu_run")
    reason = f"not measured: timing DDP's buckets costs its step; {UNHOOKED}"
    untimed = (configs["world_size"] == 2) & ~configs["baseline"].astype(bool)
    same = configs.assign(gap_ms=float("nan"), comm_note=configs["comm_note"].where(~untimed, reason))
    command = ("ddpbench", "bench", "--impls", "naive,stock", "--steps", "6", "--run-id", "r1")
    lines = [line for line in bench._why_lines(same, confidence=0.95, command=command)[0] if "taken apart" in line]
    assert lines == [
        f"naive, stock: not taken apart: not measured: timing DDP's buckets costs its step; "
        f"{invoked.ddpbench_command()} bench --impls naive,stock --steps 6 --bucket-timeline measures it"
    ]


def test_a_fault_set_is_said_at_the_start_and_marked_on_the_run_page_and_index(
    capsys, tmp_path, monkeypatch, no_early_ranks
):
    """A DDPBENCH_FAULT left set in CI made B2's 'fsdp leads … 3.44× faster than stock' with stock held back on
    purpose, said only in the page's raw environment JSON: bench warns at its start, before any launch, and the run
    page and the index's answer cell say the run had a fault injected."""
    from harness.commands import bench as bench_command
    from reports.pages import index
    from reports.pages.run import run_page

    monkeypatch.setenv("DDPBENCH_FAULT", "slow:impl=stock,world=2,ms=1500")

    def started(plan, **_):
        raise SystemExit(7)  # stop where the plan would be said: nothing launched

    monkeypatch.setattr(bench_command, "say_plan", started)
    with pytest.raises(SystemExit):
        cli.main(["bench", "--impls", "stock", "--gpus", "2", "--results", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert err.startswith("ddpbench: warning: a fault is injected on purpose, and this run's pages say so: "
                          "DDPBENCH_FAULT='slow:impl=stock,world=2,ms=1500' (docs/faults.md)"), err  # fmt: skip
    meta = {"run_id": "b2", "environment": {"env_vars": {"DDPBENCH_FAULT": "slow:impl=stock,world=2,ms=1500"}}}
    assert run_page.fault_alarm(meta).startswith('<p class="alarm">FAULT INJECTED on purpose: DDPBENCH_FAULT=')
    assert index._fault_mark(meta).startswith('<span class="failed">fault injected (DDPBENCH_FAULT=slow:impl=stock')
    assert index._fault_mark({"run_id": "a", "environment": {"env_vars": {}}}) == run_page.fault_alarm({}) == ""


def test_a_dry_runs_slow_forecast_says_what_it_waits_for(capsys, tmp_path, monkeypatch):
    """A CI user's dry run sat silent 30.8 s: a model's first count on the meta device (its library's import) and the
    CPU's timing come after the plan, before the forecast's line. Off a terminal, a part that lasts says so once."""
    import time

    from harness.commands.console import progress
    from harness.measure import meta_counts

    flops = meta_counts.flops
    monkeypatch.setattr(progress, "QUIET_S", 0.01)
    monkeypatch.setattr(meta_counts, "flops", lambda *a, **k: time.sleep(0.1) or flops(*a, **k))
    flags = ["--impls", "stock", "--workloads", "mlp", "--size", "tiny", "--gpus", "1", "--repeats", "1"]
    assert cli.main(["bench", "--dry-run", *flags, "--results", str(tmp_path / "r")]) == 0
    err = capsys.readouterr().err
    assert err.count("ddpbench bench: timing this CPU and counting mlp/tiny on the meta device…\n") == 1

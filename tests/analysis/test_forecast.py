"""`bench --dry-run`'s time forecast: the planned configurations' steps as the results folder last measured them
here, and a configuration's fixed cost as the newest run on this device paid it."""

from __future__ import annotations

import dataclasses
import json
import shutil
import socket
from pathlib import Path

import pytest

from harness.analysis.forecast import forecast
from harness.commands.console.plan import say_forecast
from harness.config.grid import Configuration

GOLDEN = Path(__file__).resolve().parent.parent / "data" / "cpu_run"  # mlp/tiny local, naive, stock at w1 and w2


def planned(impl: str, world: int, *, device: str = "cpu", steps: int = 10, warmup: int = 2) -> Configuration:
    return Configuration(config_id=f"w{world}-{impl}", impl=impl, impl_options={}, workload="mlp", size="tiny",
                         world_size=world, nnodes=1, batch_size=8, steps=steps, warmup=warmup, dtype="fp32",
                         device=device, backend="gloo", seed=0, parity=False)  # fmt: skip


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """The golden run, with the summary a bench writes at its end: 100 s of wall time, 40 s of it steps, 6
    configurations: 10 s of fixed cost a configuration."""
    shutil.copytree(GOLDEN, tmp_path / "results" / "cpu_run")
    summary = {"wall_s": 100.0, "training_step_s": 40.0, "configurations": 6}
    (tmp_path / "results" / "cpu_run" / "summary.json").write_text(json.dumps(summary))
    meta_path = tmp_path / "results" / "cpu_run" / "run.json"
    meta = json.loads(meta_path.read_text())
    meta["environment"] = {**meta.get("environment", {}), "hostname": socket.gethostname()}  # measured here
    meta_path.write_text(json.dumps(meta))
    return tmp_path / "results"


def test_each_known_configuration_takes_its_steps_at_its_last_median_and_each_pays_the_fixed_cost(results):
    """stock at w2 last measured 12.44 ms a step: 12 steps (10 + 2 warm-up) take 0.149 s; naive at w1 12.2 ms."""
    plan = [planned("stock", 2), planned("naive", 1), planned("stock", 64)]
    found = forecast(plan, results)
    assert (found.known, found.total, found.source) == (2, 3, "cpu_run")
    assert found.fixed_s == pytest.approx(10.0)
    assert found.steps_s == pytest.approx((12.440452 + 12.199266) * 12 / 1e3)
    assert found.wall_s == pytest.approx(found.steps_s + 30.0)


@pytest.fixture
def slow_cpu(monkeypatch):
    """A CPU whose rank computes 10^6 FLOP/s on two cores: mlp/tiny's sample (3 × 2 × (32·32 + 32·32 + 32·10)
    FLOPs forward and backward, less the first layer's input gradient, 2·32·32: 12,160) takes 12.16 ms."""
    from harness.commands.console import plan
    from harness.measure import pace

    monkeypatch.setattr(pace, "cpu_flops_per_s", lambda threads: 1e6)
    monkeypatch.setattr(plan, "available_cpus", lambda: 2)


def test_the_flops_floor_is_each_ranks_batch_at_the_best_pace_with_ranks_taking_turns_on_the_cores():
    import workloads
    from harness.measure import pace

    assert pace.training_flops_per_sample(workloads.create("mlp", size="tiny")) == 12_160
    floor = pace.compute_floor_s(planned("stock", 2), flops_per_sample=12_160, flops_per_s=1e6, threads=1, cores=2)
    assert floor == pytest.approx(12 * 8 * 12_160 / 1e6)  # two ranks, two cores: side by side
    assert pace.compute_floor_s(planned("stock", 8), flops_per_sample=12_160, flops_per_s=1e6, threads=1,
                                cores=2) == pytest.approx(4 * floor)  # fmt: skip
    assert pace.cpu_flops_per_s(1) > 1e8  # a real core's matmul: some hundreds of MFLOP/s at the least


def test_nothing_is_forecast_without_an_earlier_run_on_the_device_and_said_so(results, capsys, slow_cpu):
    assert forecast([planned("stock", 2, device="cuda")], results) is None
    say_forecast([planned("stock", 2, device="cuda")], results)  # no GPU here: no datasheet peak either
    assert "no time forecast: no earlier run on this device in " in capsys.readouterr().out
    say_forecast([planned("stock", 64)], results)  # a run here, but not of these configurations
    said = capsys.readouterr().out  # 12 steps of 8 samples at 12.16 ms, 64 ranks taking turns on 2 cores: 37 s
    assert said.startswith("ddpbench: at least 47 s here: the steps of the configuration at least 37 s by their "
                           "FLOPs at this CPU's best fp32 matmul, 0.001 GFLOP/s")  # fmt: skip
    assert said.endswith("and 10 s of fixed cost a configuration (launch, imports, building, parity, writing), as "
                         "run cpu_run paid it\n")  # fmt: skip
    say_forecast([planned("stock", 64)], results.parent / "none")
    assert capsys.readouterr().out.startswith("ddpbench: the steps of the configuration take at least 37 s by their")


def test_a_configuration_whose_flops_cannot_be_counted_is_said_not_counted(results, capsys, slow_cpu, monkeypatch):
    from harness.measure import pace

    monkeypatch.setattr(pace, "training_flops_per_sample", lambda workload: None)
    say_forecast([planned("stock", 64)], results)
    said = capsys.readouterr().out
    assert "none of these configurations was measured in " in said and "10 s of fixed cost a configuration" in said


def test_the_line_says_at_least_where_some_steps_were_never_measured(results, capsys, slow_cpu):
    say_forecast([planned("stock", 2), planned("naive", 1)], results)
    assert capsys.readouterr().out.startswith("ddpbench: about 20 s here: the steps of 2 of the 2 configurations")
    say_forecast([planned("stock", 2), planned("stock", 64)], results)
    said = capsys.readouterr().out
    assert said.startswith("ddpbench: at least 58 s here: the steps of 1 of the 2 configurations")
    assert "the other 1's steps at least 37 s by their FLOPs at this CPU's best fp32 matmul" in said


def test_a_forecast_is_said_to_ten_seconds_past_ninety():
    from harness.commands.console.plan import _minutes_text

    assert [_minutes_text(s) for s in (42.4, 149.5, 180.0, 7200.0)] == ["42 s", "2 min 30 s", "3 min", "2.0 h"]


def test_another_machines_run_or_an_unreadable_summary_forecasts_nothing(results):
    meta_path = results / "cpu_run" / "run.json"
    meta = json.loads(meta_path.read_text())
    (results / "cpu_run" / "summary.json").write_text(json.dumps({"wall_s": 100.0, "training_step_s": None}))
    assert forecast([planned("stock", 2)], results) is None  # no fixed cost to take: no forecast, no crash
    meta["environment"]["hostname"] = "another-machine"
    meta_path.write_text(json.dumps(meta))
    assert forecast([planned("stock", 2)], results) is None


def test_the_fixed_cost_is_taken_from_the_newest_run_of_the_workloads_planned(results, capsys):
    """A walkthrough's dry run of mlp/small took its fixed cost from a newer mlp/tiny run: building and the parity
    check cost with the model. A newer run of another workload (2 s a configuration) gives way to the older run of
    the planned one (10 s); planning none that ran before, the newest run gives it, and the line says so."""
    newer = results / "other"
    shutil.copytree(results / "cpu_run", newer)
    meta = json.loads((newer / "run.json").read_text())
    meta.update(run_id="other", started_at="2026-12-01T00:00:00+00:00",
                configurations=[{"workload": "gpt2", "size": "small"}])  # fmt: skip
    (newer / "run.json").write_text(json.dumps(meta))
    (newer / "summary.json").write_text(json.dumps({"wall_s": 20.0, "training_step_s": 8.0, "configurations": 6}))
    found = forecast([planned("stock", 2)], results)
    assert (found.source, found.fixed_s, found.alike) == ("cpu_run", pytest.approx(10.0), True)
    resnet = dataclasses.replace(planned("stock", 2), workload="resnet18")
    found = forecast([resnet], results)
    assert (found.source, found.fixed_s, found.alike) == ("other", pytest.approx(2.0), False)
    say_forecast([resnet], results)
    assert "as run other paid it, which ran none of these workloads at these sizes" in capsys.readouterr().out


def test_a_full_size_run_that_takes_hours_by_its_flops_is_warned_about_at_its_start(capsys, slow_cpu, monkeypatch):
    """mlp/full's sample needs some 10^10 FLOPs: at 10^6 FLOP/s its 12 steps take years; at 10^15, no warning."""
    from harness.commands.console import plan
    from harness.measure import pace

    full = [dataclasses.replace(planned("stock", 2), size="full"), planned("stock", 1)]
    plan.warn_long_full_size(full, threads=1)
    said = capsys.readouterr().err
    assert (
        said.startswith("ddpbench: warning: the steps of 1 configuration(s) at their full size or as --wopt sets them ")
        and " h here by their FLOPs" in said
    )
    monkeypatch.setattr(pace, "cpu_flops_per_s", lambda threads: 1e15)
    plan.warn_long_full_size(full, threads=1)
    assert capsys.readouterr().err == ""
    # a small size its --wopt options enlarge is judged too (mlp/tiny with a million classes: 12 steps of 8 samples
    # of some 2·10^8 FLOPs each, at 10^3 FLOP/s)
    monkeypatch.setattr(pace, "cpu_flops_per_s", lambda threads: 1e3)
    plan.warn_long_full_size(
        [dataclasses.replace(planned("stock", 1), workload_options={"classes": 1_000_000})], threads=1
    )
    assert "the steps of 1 configuration(s) at their full size or as --wopt sets them" in capsys.readouterr().err

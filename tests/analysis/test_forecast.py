"""`bench --dry-run`'s time forecast: the planned configurations' steps as the results folder last measured them
here, and the fixed cost a launch and a configuration as the earlier runs here with as many GPUs measured it."""

from __future__ import annotations

import dataclasses
import json
import shutil
import socket
from pathlib import Path

import pytest

from harness.analysis.forecast import forecast
from harness.commands.console.forecast import say_forecast
from harness.config.grid import Configuration
from harness.handoff.fixed_cost import Shape, fixed_cost

GOLDEN = Path(__file__).resolve().parent.parent / "data" / "cpu_run"  # mlp/tiny local, naive, stock at w1 and w2


def planned(impl: str, world: int, *, device: str = "cpu", steps: int = 10, warmup: int = 2) -> Configuration:
    return Configuration(config_id=f"w{world}-{impl}", impl=impl, impl_options={}, workload="mlp", size="tiny",
                         world_size=world, nnodes=1, batch_size=8, steps=steps, warmup=warmup, dtype="fp32",
                         device=device, backend="gloo", seed=0, parity=False)  # fmt: skip


SPLIT = {"start": 10.0, "launch": 2.0, "imports": 0.0, "process group": 4.0, "teardown": 2.0, "build": 12.0,
         "parity": 18.0, "steps": 40.0, "other": 12.0}  # fmt: skip
"""A session's split as bench keeps it: 8 s over its 2 launches (4 s a launch), 30 s over its 6 configurations (5 s
a configuration), and 22 s once (start and other): 100 s of wall time, 40 s of it steps."""


def summary(wall_s: float = 100.0, split: dict | None = None, **session) -> dict:
    split = split or SPLIT
    return {"wall_s": wall_s, "training_step_s": 40.0, "configurations": 6, "sessions": 1,
            "session": {"wall_s": wall_s, "training_step_s": 40.0, "phases_s": split, "launched": 6, "launches": 2,
                        **session}}  # fmt: skip


def earlier_run(results: Path, name: str, *, started: str, workload: str = "mlp", world: int = 2, **kept) -> Path:
    """A copy of the golden run named `name`, as another run of `workload` at world sizes up to `world`, with the
    summary bench wrote at its end (`kept`: the summary's session's fields instead)."""
    run = results / name
    shutil.copytree(results / "cpu_run", run)
    meta = json.loads((run / "run.json").read_text())
    planned = [{"workload": workload, "size": "tiny", "world_size": w} for w in range(1, world + 1)]
    meta.update(run_id=name, started_at=started, configurations=planned)
    (run / "run.json").write_text(json.dumps(meta))
    (run / "summary.json").write_text(json.dumps(summary(**kept)))
    return run


@pytest.fixture(autouse=True)
def no_default_results(tmp_path, monkeypatch):
    """The forecast reads the fixed cost from the default results/ folder where --results has none: a `make bench`
    in this checkout (its results/ then holds a run) once turned these figures into 'at least 52 s here in all'."""
    from harness.config import bench as config_bench

    monkeypatch.setattr(config_bench, "RESULTS", tmp_path / "no-default-results")


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """The golden run (mlp/tiny at world sizes 1 and 2, run here), with the summary a bench writes at its end."""
    shutil.copytree(GOLDEN, tmp_path / "results" / "cpu_run")
    (tmp_path / "results" / "cpu_run" / "summary.json").write_text(json.dumps(summary()))
    meta_path = tmp_path / "results" / "cpu_run" / "run.json"
    meta = json.loads(meta_path.read_text())
    meta["environment"] = {**meta.get("environment", {}), "hostname": socket.gethostname()}  # measured here
    meta_path.write_text(json.dumps(meta))
    return tmp_path / "results"


def test_each_known_configuration_takes_its_steps_at_its_last_median_and_the_run_its_fixed_cost(results):
    """stock at w2 last measured 12.44 ms a step: 12 steps (10 + 2 warm-up) take 0.149 s; naive at w1 12.2 ms. The
    fixed cost of two launches and three configurations, as cpu_run paid them: 22 + 2 × 4 + 3 × 5 s."""
    plan = [planned("stock", 2), planned("naive", 1), dataclasses.replace(planned("stock", 2), batch_size=16)]
    found = forecast(plan, results)
    assert (found.known, found.total, len(found.unmeasured)) == (2, 3, 1)
    assert found.steps_s == pytest.approx((12.440452 + 12.199266) * 12 / 1e3)
    fixed = fixed_cost(plan, results)
    assert [m.run for m in fixed.measured] == ["cpu_run"] and fixed.shape == Shape(2, 3, 3, 1)
    typical = fixed.typical  # its 18 s of parity over its 6 first repeats, its 12 s of building over its 6
    assert (typical.once_s, typical.launch_s, typical.configuration_s, typical.first_s) == (22, 4, 2, 3)
    assert fixed.total_s == pytest.approx(45.0) and fixed.alike


@pytest.fixture
def slow_cpu(monkeypatch):
    """A CPU whose rank computes 10^6 FLOP/s on two cores: mlp/tiny's sample (3 × 2 × (32·32 + 32·32 + 32·10)
    FLOPs forward and backward, less the first layer's input gradient, 2·32·32: 12,160) takes 12.16 ms."""
    from harness.commands.console import forecast
    from harness.measure import pace

    monkeypatch.setattr(pace, "cpu_probe", lambda threads, dtype="fp32", size=None: pace.Probe(1e6, 256, 10))
    monkeypatch.setattr(forecast, "available_cpus", lambda: 2)


def test_the_flops_floor_is_each_ranks_batch_at_the_best_pace_with_ranks_taking_turns_on_the_cores():
    import workloads
    from harness.measure import pace

    assert pace.training_flops_per_sample(workloads.create("mlp", size="tiny")) == 12_160
    floor = pace.compute_floor_s(planned("stock", 2), flops_per_sample=12_160, flops_per_s=1e6, threads=1, cores=2)
    assert floor == pytest.approx(12 * 8 * 12_160 / 1e6)  # two ranks, two cores: side by side
    assert pace.compute_floor_s(planned("stock", 8), flops_per_sample=12_160, flops_per_s=1e6, threads=1,
                                cores=2) == pytest.approx(4 * floor)  # fmt: skip
    assert pace.cpu_flops_per_s(1) > 1e8  # a real core's matmul: some hundreds of MFLOP/s at the least


def test_without_an_earlier_run_of_as_many_gpus_the_fixed_cost_is_said_not_counted(
    results, capsys, slow_cpu, monkeypatch
):
    """A walkthrough's dry run read 'at least 5 s' by FLOPs for a run that took 323 s, 117 s of it fixed cost, and
    did not say the fixed cost was left out."""
    cuda = [planned("stock", 2, device="cuda")]
    assert forecast(cuda, results).known == 0 and fixed_cost(cuda, results) is None
    say_forecast(cuda, results)  # no GPU here: no datasheet peak either
    assert "no time forecast: no earlier run here in " in capsys.readouterr().out
    assert fixed_cost([planned("stock", 64)], results) is None  # the run here had 2 simulated GPUs
    monkeypatch.chdir(results.parent)  # the default results/ is this one: not looked in twice
    say_forecast([planned("stock", 64)], results)
    said = capsys.readouterr().out.splitlines()[
        0
    ]  # 12 steps of 8 samples at 12.16 ms, 64 ranks taking turns on 2 cores: 37 s
    # the steps alone are no total: a run of a small model is nearly all fixed cost
    assert said.startswith("ddpbench: at least 37 s of steps (the configuration, by their FLOPs at this CPU's best "
                           "fp32 matmul, 0.001 GFLOP/s")  # fmt: skip
    assert said.endswith(f"; the fixed cost on top, not known yet (no earlier run of 64 simulated GPUs "
                         f"here in {str(results)!r} measured it: launches, imports, model info, building, "
                         "parity)")  # fmt: skip
    say_forecast([planned("stock", 64)], results.parent / "none")
    assert capsys.readouterr().out.startswith("ddpbench: at least 37 s of steps (the configuration")


def test_a_step_is_floored_by_its_memory_traffic_where_that_takes_longer_than_its_flops(capsys, monkeypatch, tmp_path):
    """A DLRM file's dry run said 'at least 0.8 s of steps' by FLOPs for steps that took 174 s: its 13.6M parameters
    (an embedding table, 1 MFLOP a sample) step Adam over dense gradients. Each step writes every gradient (4 B a
    parameter) and the optimizer moves 12 B (SGD) or 28 B (Adam) a parameter, a sharding strategy's rank its share:
    at a copy of 10^4 B/s, where the FLOPs are free, that is the floor, and said to be."""
    from harness.commands.console import forecast
    from harness.measure import meta_counts, pace

    copied = pace.cpu_copy_bytes_per_s(1, 2**20)  # a real core's copy: some hundreds of MB/s at the least
    monkeypatch.setattr(pace, "cpu_probe", lambda threads, dtype="fp32", size=None: pace.Probe(1e15, 256, 10))
    monkeypatch.setattr(pace, "cpu_copy_bytes_per_s", lambda threads, nbytes: 1e4)
    monkeypatch.setattr(forecast, "available_cpus", lambda: 2)
    trained = meta_counts.parameters("mlp", "tiny").trained
    stock, zero = planned("stock", 2), dataclasses.replace(planned("zero", 2), optimizer="adam")
    assert pace.step_bytes(stock, trained=trained, shards=False) == trained * 16  # its gradient, SGD's pass
    assert pace.step_bytes(zero, trained=trained, shards=True) == trained * (4 + 28 / 2)  # each rank's half of Adam's
    say_forecast([stock], tmp_path / "none")
    said = capsys.readouterr().out
    floor = forecast.minutes_text(12 * trained * 16 / 1e4)
    assert said.startswith(f"ddpbench: at least {floor} of steps (the configuration, by their gradients' and "
                           "optimizer's bytes, more than their FLOPs take, at this CPU's best copy, 1e-05 GB/s a rank, "
                           "timed now)")  # fmt: skip
    monkeypatch.setattr(pace, "cpu_copy_bytes_per_s", lambda threads, nbytes: 1e15)  # the FLOPs' floor, as before
    monkeypatch.setattr(pace, "cpu_probe", lambda threads, dtype="fp32", size=None: pace.Probe(1e6, 256, 10))
    say_forecast([stock], tmp_path / "none")
    assert " of steps (the configuration, by their FLOPs at this CPU's best " in capsys.readouterr().out
    assert copied > 1e8


def test_a_configuration_whose_flops_cannot_be_counted_is_said_not_counted(results, capsys, slow_cpu, monkeypatch):
    from harness.measure import meta_counts

    monkeypatch.setattr(meta_counts, "flops", lambda spec, size, options: None)  # cannot be made or run on meta
    say_forecast([dataclasses.replace(planned("stock", 2), batch_size=16)], results)
    assert capsys.readouterr().out == (
        "ddpbench: at least 31 s here in all = about 31 s of fixed cost (1 launch at 4 s, 1 configuration at 5 s, 22 s "
        "once) as 1 earlier run of 2 simulated GPUs here measured it (cpu_run); the steps of the configuration not "
        "counted (never measured here)\n"
    )


def test_the_line_says_at_least_where_some_steps_were_never_measured(results, capsys, slow_cpu):
    """Each part of the total leads with its own figure: 'about 8 s here: the steps of 6 …; plus about 8 s of fixed
    cost' read as if the total left the fixed cost out, and gave the steps no figure."""
    say_forecast([planned("stock", 2), planned("naive", 1)], results)  # 0.3 s of steps, 22 + 2 × 4 + 2 × 5 s fixed
    assert capsys.readouterr().out.startswith("ddpbench: about 40 s here in all = 0.3 s of steps (2 of the 2 "
                                              "configurations, as last measured in ")  # fmt: skip
    say_forecast([planned("stock", 2), dataclasses.replace(planned("stock", 2), batch_size=16)], results)
    said = capsys.readouterr().out  # 0.15 s measured, 12 × 16 × 12.16 ms = 2.3 s by FLOPs, 22 + 4 + 2 × 5 s fixed
    assert said.startswith("ddpbench: at least 38 s here in all = 0.1 s of steps (1 of the 2 configurations, as last")
    assert " + at least 2 s of steps (the other 1, by their FLOPs at this CPU's best fp32 matmul" in said
    assert " + about 36 s of fixed cost (1 launch at 4 s, 2 configurations at 5 s, 22 s once)" in said
    assert " plus " not in said and "; " not in said  # every part counted, summed


def test_a_plan_whose_configurations_are_all_skipped_here_is_not_timed(results, capsys):
    say_forecast([planned("dataparallel", 2)], results)  # needs CUDA GPUs: the listing says so, nothing to time
    assert capsys.readouterr().out == ""


def test_a_forecast_is_said_to_ten_seconds_past_ninety():
    from harness.commands.console.forecast import minutes_text

    assert [minutes_text(s) for s in (42.4, 149.5, 180.0, 7200.0)] == ["42 s", "2 min 30 s", "3 min", "2.0 h"]
    assert [minutes_text(s) for s in (6e-05, 0.09, 0.3, 0.96)] == ["under 0.1 s", "under 0.1 s", "0.3 s", "1 s"]


def test_a_floor_under_a_second_is_said_so_not_as_a_figure_no_one_times(capsys, monkeypatch, tmp_path):
    """A tiny model's dry run said 'at least 6e-05 s of steps'."""
    from harness.commands.console import forecast
    from harness.measure import pace

    monkeypatch.setattr(pace, "cpu_probe", lambda threads, dtype="fp32", size=None: pace.Probe(1e15, 256, 10))
    monkeypatch.setattr(pace, "cpu_copy_bytes_per_s", lambda threads, nbytes: 1e15)
    monkeypatch.setattr(forecast, "available_cpus", lambda: 2)
    say_forecast([planned("stock", 2)], tmp_path / "none")
    assert capsys.readouterr().out.startswith("ddpbench: a floor under 0.1 s of steps (the configuration, by their ")


def test_another_machines_run_or_a_summary_without_its_split_measures_no_fixed_cost(results):
    meta_path = results / "cpu_run" / "run.json"
    meta = json.loads(meta_path.read_text())
    (results / "cpu_run" / "summary.json").write_text(json.dumps({"wall_s": 100.0, "training_step_s": 40.0,
                                                                  "configurations": 6}))  # fmt: skip
    assert fixed_cost([planned("stock", 2)], results) is None  # no split to take it from, no crash
    (results / "cpu_run" / "summary.json").write_text(json.dumps(summary()))
    assert fixed_cost([planned("stock", 2)], results) is not None
    meta["environment"]["hostname"] = "another-machine"
    meta_path.write_text(json.dumps(meta))
    assert fixed_cost([planned("stock", 2)], results) is None
    assert forecast([planned("stock", 2)], results).known == 0


def test_the_fixed_cost_is_taken_from_the_runs_of_the_workloads_planned_with_its_spread(results, capsys):
    """A walkthrough's dry run of mlp/small took its fixed cost from a newer mlp/tiny run: building and the parity
    check cost with the model. Newer runs of another workload give way to the older run of the planned one; planning
    none that ran before, every run of as many GPUs here gives it, with the spread between them."""
    fast = {**SPLIT, "build": 0.0, "parity": 6.0, "other": 0.0, "start": 4.0}  # once 4 s, a configuration 1 s
    earlier_run(results, "gpt2-a", started="2026-12-01T00:00:00+00:00", workload="gpt2", split=fast, wall_s=58.0)
    earlier_run(results, "gpt2-w4", started="2026-12-02T00:00:00+00:00", workload="gpt2", world=4)
    found = fixed_cost([planned("stock", 2)], results)
    assert ([m.run for m in found.measured], found.alike, found.total_s) == (["cpu_run"], True, pytest.approx(31.0))
    resnet = dataclasses.replace(planned("stock", 2), workload="resnet18")
    found = fixed_cost([resnet], results)  # gpt2-w4 ran 4 simulated GPUs: not counted
    assert ([m.run for m in found.measured], found.alike) == (["gpt2-a", "cpu_run"], False)
    assert found.spread_s == (pytest.approx(4 + 4 + 1), pytest.approx(31.0)) and found.total_s == pytest.approx(20.0)
    say_forecast([resnet], results)
    assert (" + about 20 s of fixed cost (1 launch at 4 s, 1 configuration at 3 s, 13 s once: the median's, gpt2-a "
            "and cpu_run) as 2 earlier runs of "
            "2 simulated GPUs here measured it (gpt2-a, cpu_run: 9 s to 31 s); they ran none of these workloads at "
            "these sizes: building and parity cost with the model") in capsys.readouterr().out  # fmt: skip


def test_only_the_newest_runs_count_and_an_older_summary_gives_its_launches_from_its_plan(results, capsys):
    for day in range(1, 6):  # five newer runs of one launch each (the older summary's run.json: w1 and w2 planned)
        earlier_run(results, f"new-{day}", started=f"2026-12-0{day}T00:00:00+00:00", launches=1)
    found = fixed_cost([planned("stock", 2)], results)
    assert [m.run for m in found.measured] == [f"new-{day}" for day in range(5, 0, -1)] and found.counted == 6
    assert found.typical.launch_s == 8.0  # 8 s in one launch
    say_forecast([planned("stock", 2)], results)
    assert "as the newest 5 of 6 earlier runs of 2 simulated GPUs here measured it (new-5, " in capsys.readouterr().out
    older = summary()
    del older["session"]["launches"]  # a summary from before launches were counted
    (results / "new-5" / "summary.json").write_text(json.dumps(older))
    found = fixed_cost([planned("stock", 2)], results)
    assert found.measured[0].launch_s == 4.0  # its two launches, from its plan
    older["sessions"] = 2  # resumed: its latest session's launches cannot be told from the plan
    (results / "new-5" / "summary.json").write_text(json.dumps(older))
    found = fixed_cost([planned("stock", 2)], results)
    assert "new-5" not in [m.run for m in found.measured]


def test_every_phase_is_paid_once_a_launch_or_a_configuration():
    from harness.handoff import costs

    assert not set(costs.PER_LAUNCH) & set(costs.PER_CONFIGURATION)
    assert set(costs.PER_LAUNCH) | set(costs.PER_CONFIGURATION) < set(costs.PHASES)
    assert set(costs.PHASES) - set(costs.PER_LAUNCH) - set(costs.PER_CONFIGURATION) == {"start", "steps", "verdicts"}


def test_a_full_size_run_that_takes_hours_by_its_flops_is_warned_about_at_its_start(capsys, slow_cpu, monkeypatch):
    """mlp/full's sample needs some 10^10 FLOPs: at 10^6 FLOP/s its 12 steps take years; at 10^15, no warning."""
    from harness.commands.console import plan
    from harness.measure import pace

    full = [dataclasses.replace(planned("stock", 2), size="full"), planned("stock", 1)]
    plan.warn_long_full_size(full, threads=1)
    said = capsys.readouterr().err
    assert (
        said.startswith("ddpbench: warning: the steps of 1 configuration at their full size or as --wopt sets them ")
        and " h here by their FLOPs" in said
    )
    monkeypatch.setattr(pace, "cpu_probe", lambda threads, dtype="fp32", size=None: pace.Probe(1e15, 256, 10))
    plan.warn_long_full_size(full, threads=1)
    assert capsys.readouterr().err == ""
    # a small size its --wopt options enlarge is judged too (mlp/tiny with a million classes: 12 steps of 8 samples
    # of some 2·10^8 FLOPs each, at 10^3 FLOP/s)
    monkeypatch.setattr(pace, "cpu_probe", lambda threads, dtype="fp32", size=None: pace.Probe(1e3, 256, 10))
    plan.warn_long_full_size(
        [dataclasses.replace(planned("stock", 1), workload_options={"classes": 1_000_000})], threads=1
    )
    assert "the steps of 1 configuration at their full size or as --wopt sets them" in capsys.readouterr().err


def test_the_long_run_warning_counts_memory_traffic_as_the_dry_runs_floor_does(capsys, slow_cpu, monkeypatch):
    """The warning weighed the FLOPs floor alone: a model its bytes bound (a DLRM's large embedding) was never warned
    about, though the dry run's floor, the higher of the two, said hours."""
    from harness.commands.console import forecast as fc
    from harness.commands.console import plan
    from harness.measure import pace

    monkeypatch.setattr(
        pace, "cpu_probe", lambda threads, dtype="fp32", size=None: pace.Probe(1e15, 256, 10)
    )  # FLOPs: no time at all
    monkeypatch.setattr(fc, "_memory_floor", lambda cfg, **_: (7200.0, ("this CPU's best copy, {} a rank", 1e9)))
    plan.warn_long_full_size([dataclasses.replace(planned("stock", 2), size="full")], threads=1)
    said = capsys.readouterr().err
    assert "take at least 2.0 h here by their gradients' and optimizer's bytes, more than their FLOPs take, at this " \
           "CPU's best copy, 1 GB/s a rank" in said, said  # fmt: skip


def test_a_bf16_or_fp16_run_on_the_cpu_is_timed_in_its_dtype_and_warned_about_where_it_is_far_slower(
    capsys, monkeypatch
):
    """A walkthrough's bf16 run: a matmul at 0.7 GFLOP/s in bf16 against 57.5 in fp32 (each at the probe's own size),
    its steps 784 s where the dry run said 'at least 4 s of steps' by an fp32 matmul, and no warning."""
    from harness.commands.console import forecast as fc
    from harness.commands.console import plan
    from harness.measure import pace

    bf16 = dataclasses.replace(planned("stock", 2), dtype="bf16")
    assert pace.cpu_flops_per_s(1, "bf16") > 1e7  # timed in bf16, even emulated
    rates, sizes = {"fp32": 57.5e9, "bf16": 0.7e9}, set()

    def timed(threads, dtype="fp32", size=None):
        sizes.add(size)
        return pace.Probe(rates[dtype], size or 1024, 10)

    monkeypatch.setattr(pace, "cpu_probe", timed)
    rate, how = fc._best_pace(bf16, threads=1)
    assert rate == 0.7e9 and how.startswith("this CPU's best bf16 matmul, 0.7 GFLOP/s")
    plan.warn_slow_half([planned("stock", 2)], threads=1)
    assert capsys.readouterr().err == ""  # fp32: nothing timed, nothing said
    sizes.clear()  # the warning's ratio compares the dtypes at one size, and names it (the probe's sizes differ)
    plan.warn_slow_half([bf16], threads=1)
    said = capsys.readouterr().err
    assert sizes == {plan.SLOW_HALF_SIZE} and said.startswith(
        "ddpbench: warning: --dtype bf16: this CPU computes bf16 82× slower than fp32 (a 256² matmul at 0.7 against "
        "57.5 GFLOP/s, timed now)"
    )
    rates["bf16"] = 60e9  # bf16 instructions (AMX): as fast, nothing to say
    plan.warn_slow_half([bf16], threads=1)
    assert capsys.readouterr().err == ""
    rates["fp16"] = 1.5e9  # fp16, emulated like bf16: timed and said the same way, in its own name
    fp16 = dataclasses.replace(bf16, dtype="fp16")
    assert fc._best_pace(fp16, threads=1)[1].startswith("this CPU's best fp16 matmul, 1.5 GFLOP/s")
    plan.warn_slow_half([fp16], threads=1)
    assert capsys.readouterr().err.startswith("ddpbench: warning: --dtype fp16: this CPU computes fp16 38× slower")


def test_the_fixed_cost_said_is_the_sum_of_the_parts_said_beside_it():
    """Each part's own median need not add up to the median run's whole: three runs paying their fixed cost in
    different parts have medians 0 s once, 1 s a launch, 0 s a configuration, 1 s in all, where every run paid 10 s
    or more. The figure is the median run's and its parts are that run's."""
    from harness.handoff.fixed_cost import FixedCost, Measured, Shape

    runs = (Measured("a", 10.0, 1.0, 0.0), Measured("b", 0.0, 10.0, 0.0), Measured("c", 0.0, 0.0, 10.0))
    fixed = FixedCost(runs, Shape(1, 1, 0), alike=True, counted=3)
    typical = fixed.typical
    assert fixed.total_s == typical.once_s + typical.launch_s + typical.configuration_s == 10.0
    assert fixed.spread_s == (10.0, 11.0)
    two = FixedCost(runs[:2], Shape(1, 1, 0), alike=True, counted=2)  # the two middle ones' mean
    assert (two.typical.run, two.total_s, two.typical.once_s) == ("b and a", 10.5, 5.0)


def auto_plan() -> list[Configuration]:
    """`--repeats auto`'s first two repeats of naive against stock (and local) at world sizes 1 and 2."""
    return [dataclasses.replace(planned(impl, world), repeat=repeat, repeated=True)
            for repeat in (0, 1) for world in (1, 2) for impl in ("local", "naive", "stock")]  # fmt: skip


def more_repeats(run: Path, config_id: str, repeats: range) -> None:
    """Rows of `config_id`'s further repeats in `run`, as an auto run's rounds write them."""
    import pyarrow.parquet as pq

    table = pq.read_table(run / "configs" / f"{config_id}.parquet")
    for r in repeats:
        again = table.set_column(table.schema.get_field_index("repeat"), "repeat", [[r] * table.num_rows])
        pq.write_table(again, run / "configs" / f"{config_id}-r{r}.parquet")


def test_repeats_auto_is_forecast_from_its_first_two_repeats_to_max_repeats_and_as_an_earlier_run_took(
    results, capsys, monkeypatch
):
    """Only what a verdict rests on repeats past two: the strategies at two ranks and their baseline, not world size
    1 (one rank communicates nothing). Each further repeat pays its steps, its launch and the configuration (not its
    parity: a first repeat's); each look a round of verdicts."""
    from harness.analysis.forecast import deciding
    from harness.commands.console import forecast as forecast_module
    from harness.commands.console.forecast import Auto, minutes_text

    plan = auto_plan()
    assert deciding(plan) == {forecast_key(c) for c in plan if c.world_size == 2}
    w2 = forecast([c for c in plan if c.world_size == 2 and c.repeat == 0], results).steps_s  # a repeat's steps
    fewest = forecast(plan, results).steps_s + 22 + 4 * 4 + 12 * 2 + 6 * 3  # 4 launches, 12 configurations, 6 firsts
    most = fewest + 2 * w2 + 2 * 4 + 6 * 2  # 2 repeats more of 3 configurations: 2 launches, 6 configurations
    say_forecast(plan, results, auto=Auto(4))
    said = capsys.readouterr().out.splitlines()
    assert said[0].startswith(f"ddpbench: about {minutes_text(fewest)} here in all = ")
    assert "of steps (12 of the 12 configurations, as last measured in " in said[0]
    assert said[1] == (f"ddpbench: with --repeats auto, about {minutes_text(fewest)} (2 repeats each) to "
                       f"{minutes_text(most)} (3 configurations its verdicts rest on to --max-repeats 4); no earlier "
                       "--repeats auto run here measured them (the rounds they took)")  # fmt: skip
    say_forecast(plan, results, auto=Auto(4, budget_s=90.0))  # no round starts that would end past 90 s
    assert f"to 1 min 30 s (--budget's end; {minutes_text(most)} at --max-repeats 4)" in capsys.readouterr().out
    # a budget the first two repeats outlast: said in the dry run, and at a run's start (a walkthrough's --budget 8m
    # took 17.5 min, unsaid); at the start nothing else of the forecast
    say_forecast(plan, results, auto=Auto(4, budget_s=30.0))
    assert (f"(2 repeats each, past --budget's 30 s, which stops none of them; no round after them, "
            f"{minutes_text(most)} at --max-repeats 4); no earlier") in capsys.readouterr().out  # fmt: skip
    say_forecast(plan, results, auto=Auto(4, budget_s=30.0), dry=False)
    said = capsys.readouterr()
    assert said.out == "" and said.err == (
        "ddpbench: warning: --budget 30 s: the first two repeats, which every verdict needs and --budget does not "
        f"stop, take about {minutes_text(fewest)} here (--dry-run says how)\n"
    )
    say_forecast(plan, results, auto=Auto(4, budget_s=90.0), dry=False)
    assert capsys.readouterr() == ("", "")  # within the budget: nothing
    # where no earlier run here measured them, a run's start warns of nothing rather than time a matmul and count
    # every model's FLOPs (seconds before each launch) for a floor
    monkeypatch.setattr(forecast_module, "_best_pace", lambda *a, **k: pytest.fail("a run's start timed a matmul"))
    say_forecast(plan, results.parent / "elsewhere", auto=Auto(4, budget_s=1.0), dry=False)
    assert capsys.readouterr() == ("", "")
    # an earlier auto run here gave stock and local at w2 three repeats (naive two, as it could have no fewer)
    earlier = earlier_run(results, "took", started="2026-12-05T00:00:00+00:00")
    meta = json.loads((earlier / "run.json").read_text())
    (earlier / "run.json").write_text(json.dumps({**meta, "config": {"repeats": "auto"}, "look_sizes": [12],
                                                  "environment": {"hostname": socket.gethostname()}}))  # fmt: skip
    for config_id in ("0003-w2-mlp-tiny-local", "0005-w2-mlp-tiny-stock"):
        more_repeats(earlier, config_id, range(1, 3))
    stock_local = forecast([c for c in plan if c.world_size == 2 and c.impl != "naive" and c.repeat == 0], results)
    took = fewest + stock_local.steps_s + 4 + 2 * 2  # a third repeat of two: a launch, two configurations
    say_forecast(plan, results, auto=Auto(4))
    assert (
        capsys.readouterr()
        .out.splitlines()[1]
        .endswith(f"; {minutes_text(took)} as earlier run took here repeated the same (2 to 3 repeats)")
    )


def forecast_key(cfg):
    from harness.analysis.forecast import _key

    return _key(cfg)


def test_a_runs_fixed_cost_splits_parity_over_its_first_repeats_and_verdicts_over_its_rounds(results):
    """make bench's runs on one machine paid 0.3 s (16 repeats) to 2.4 s (2 repeats) a configuration while parity was
    spread over every repeat, which judges it once (judges_parity)."""
    from harness.handoff.fixed_cost import measured
    from harness.results import store

    split = {**SPLIT, "verdicts": 6.0, "other": 6.0}
    run = earlier_run(results, "rounds", started="2026-12-05T00:00:00+00:00", split=split, launched=9, launches=3)
    more_repeats(run, "0005-w2-mlp-tiny-stock", range(1, 4))  # 3 more repeats: 9 launched, 6 first
    meta = store.read_run_meta(run)
    found = measured(run, {**meta, "look_sizes": [6, 7]})  # judged after 3 rounds
    assert (found.first_s, found.configuration_s, found.round_s) == (3.0, pytest.approx(12 / 9), 2.0)
    assert (found.launch_s, found.once_s) == (pytest.approx(8 / 3), pytest.approx(100 - 40 - 8 - 12 - 18 - 6))


def test_a_sessions_first_repeats_are_its_own_and_the_split_says_runs_of_configurations(results):
    """A resume after a session killed outright (no summary.json: this one counts 1 session) said "1 configuration at
    0.21 s and 0.12 s more for each of their 2 first repeats": its configurations were its own, its first repeats
    every session's rows'."""
    from harness.commands.console import fixed_cost_parts
    from harness.handoff.fixed_cost import Measured, measured, session_split
    from harness.results import store

    run = earlier_run(results, "resumed", started="2026-12-05T00:00:00+00:00", launched=3, launches=1)
    meta = {**store.read_run_meta(run), "sessions": [{"command": ["bench"]}, {"command": ["bench", "--resume"]}]}
    assert measured(run, meta).first_s == 0.0  # its 6 rows' first repeats are not this session's 3
    store.write_json(run / "summary.json", summary(launched=3, launches=1, first_repeats=3))
    assert measured(run, meta).first_s == pytest.approx(18 / 3)  # its own: parity over its 3
    assert session_split(run)[1].firsts == 3
    cost = Measured("r", once_s=5.0, launch_s=1.5, configuration_s=0.09, first_s=0.018)
    assert fixed_cost_parts(cost, Shape(5, 5, 5)) == "5 launches at 1.5 s, 5 configurations at 0.11 s, 5 s once"
    assert fixed_cost_parts(cost, Shape(10, 10, 5)) == (
        "10 launches at 1.5 s, 10 configuration runs at 0.09 s (0.018 s more for the first run of each of 5 "
        "configurations: parity, model info, gradient profile), 5 s once"
    )


def test_each_models_flops_are_counted_once_and_again_only_where_their_key_changes(results, capsys, slow_cpu,
                                                                                   tmp_path, monkeypatch):  # fmt: skip
    """The FLOPs floor's count (5-6 s of a dry run here, torch's compiler imported for it) is kept in the user's cache
    (measure.meta_counts), by the model's spec, size, options and source."""
    from harness.measure import meta_counts, pace

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    counted = []
    real = pace.training_flops_per_sample
    monkeypatch.setattr(pace, "training_flops_per_sample", lambda workload: counted.append(1) or real(workload))
    unmeasured = [dataclasses.replace(planned("stock", 2), batch_size=16)]
    say_forecast(unmeasured, results)
    first = capsys.readouterr().out
    assert "at least 2 s of steps (the configuration, by their FLOPs" in first and len(counted) == 1
    say_forecast(unmeasured, results)  # the second dry run: from the cache, the same line
    assert capsys.readouterr().out == first and len(counted) == 1
    say_forecast([dataclasses.replace(unmeasured[0], workload_options={"classes": 7})], results)
    assert len(counted) == 2  # another model: counted
    monkeypatch.setattr(meta_counts, "_versions", lambda: {"torch": "another"})
    say_forecast(unmeasured, results)
    assert len(counted) == 3  # another torch: counted again


def with_flops(run: Path, flops_per_sample: float) -> None:
    """`run`'s rows as a run that counted its model's FLOPs writes them (the golden run's, from before: none)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for path in (run / "configs").glob("*.parquet"):
        table = pq.read_table(path)
        column = pa.array([flops_per_sample] * table.num_rows, pa.float64())
        pq.write_table(table.set_column(table.schema.get_field_index("flops_per_sample"), "flops_per_sample",
                                        column), path)  # fmt: skip


def test_unmeasured_steps_take_as_long_over_their_floor_as_earlier_steps_like_theirs_ran_here(
    results, capsys, slow_cpu, monkeypatch
):
    """A user's dry run said 'at least 58 s of steps' by FLOPs for steps that took 411 s (7×). The steps cpu_run
    measured at w2 (mlp/tiny, 8 samples of 12,160 FLOPs: 9.728 ms a step at 10^7 FLOP/s) took 10.1, 12.4 and
    15.3 ms, 1.04-1.57× that floor: a planned step of as many ranks and within 10× their FLOPs is given that range."""
    from harness.commands.console.forecast import minutes_text
    from harness.measure import pace

    monkeypatch.setattr(pace, "cpu_probe", lambda threads, dtype="fp32", size=None: pace.Probe(1e7, 256, 10))
    with_flops(results / "cpu_run", 12_160)
    bigger = dataclasses.replace(planned("stock", 2, steps=998), batch_size=16)  # unmeasured: 1000 steps of 16
    floor = 1000 * 16 * 12_160 / 1e7  # 19.5 s
    low, high = floor * 10.105390 / 9.728, floor * 15.265495 / 9.728  # local's and naive's at w2
    say_forecast([bigger], results)
    said = capsys.readouterr().out
    assert said.startswith(f"ddpbench: about {minutes_text(31 + low)} to {minutes_text(31 + high)} here in all = "
                           f"about {minutes_text(low)} to {minutes_text(high)} of steps (the configuration: at least "
                           "19 s by their FLOPs at this CPU's best fp32 matmul, 0.01 GFLOP/s on a rank's 1 thread, "
                           "timed now (the fastest of 10 timings of a 256² matmul); "
                           "steps earlier runs here measured, of as many ranks and within 10× their "
                           "FLOPs, ran 1-1.6× theirs) + about 31 s of fixed cost")  # fmt: skip
    # one rank: the steps cpu_run measured at w1 (8.2, 9.9 and 12.2 ms), not w2's
    say_forecast([dataclasses.replace(bigger, world_size=1)], results)
    w1 = capsys.readouterr().out
    assert f"about {minutes_text(floor * 8.156915 / 9.728)} to {minutes_text(floor * 12.199266 / 9.728)} of steps" in w1
    # 11× their FLOPs a step, or another precision: no earlier step like it, the floor alone as before
    for unlike in (dataclasses.replace(bigger, batch_size=88), dataclasses.replace(bigger, dtype="bf16")):
        say_forecast([unlike], results)
        assert "by their FLOPs at this CPU's best" in (said := capsys.readouterr().out)
        assert said.startswith("ddpbench: at least ") and " to " not in said.split(" + ")[0]
    # one like them and one not: the other at its floor, the whole at least
    say_forecast([bigger, dataclasses.replace(bigger, batch_size=88, config_id="b88")], results)
    said = capsys.readouterr().out
    assert said.startswith("ddpbench: at least ") and "of steps (all 2 configurations: at least " in said
    assert "ran 1-1.6× theirs, 1 of them; the rest at their floor)" in said

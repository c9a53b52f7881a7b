"""What a dry run's forecast adds (harness.commands.console.forecast_notes), on fakes: no launch, no matmul timed."""

from __future__ import annotations

import dataclasses

from harness.commands.console import forecast_notes
from harness.config import bench as cfgmod
from harness.config import grid


def _configuration(impl: str, world: int = 2) -> grid.Configuration:
    return grid.Configuration(config_id=f"{impl}-w{world}", impl=impl, impl_options={}, workload="mlp", size="tiny",
                              world_size=world, nnodes=1, batch_size=8, steps=2, warmup=2, dtype="fp32",
                              device="cpu", backend="gloo", seed=0, parity=True)  # fmt: skip


def test_a_busy_machine_is_said_to_stretch_the_floor_by_its_load_per_core(capsys, monkeypatch):
    """A walkthrough's forecast said 'at least 3 min of steps' at load 20 on 2 cores; they took 12.9 min."""
    monkeypatch.setattr(forecast_notes, "available_cpus", lambda: 2)
    monkeypatch.setattr(forecast_notes.os, "getloadavg", lambda: (20.0, 20.0, 20.0))
    plan = [_configuration("stock", 1), _configuration("stock", 2)]
    assert forecast_notes.load_stretch(plan) == (20.0, 2, 11.0)  # its own 2 ranks beside the 20 runnable
    forecast_notes.say_load(plan)
    said = capsys.readouterr().out
    assert "the floor assumes a quiet machine: at load 20.0 on 2 cores" in said and "up to about 11×" in said
    monkeypatch.setattr(forecast_notes.os, "getloadavg", lambda: (1.5, 1.0, 1.0))
    assert forecast_notes.load_stretch(plan) is None  # quiet: nothing to say
    assert forecast_notes.load_stretch([dataclasses.replace(plan[0], device="cuda")]) is None


def test_a_plan_past_the_budget_is_offered_the_narrower_ones_that_fit(capsys):
    """The reference alone, then each strategy beside it, each planned and timed as the plan was; a strategy
    skipped here (rpc_hybrid without a remote part) is no narrower plan."""
    plan = [_configuration(impl) for impl in ("local", "stock", "zero", "fsdp")]
    planned = []

    def expand(impls):
        planned.append(tuple(impls))
        return [_configuration(impl) for impl in ("local", *impls)]

    def timed(configurations):  # a minute a configuration
        return 60.0 * len(configurations)

    forecast_notes.say_narrower(plan, expand=expand, timed=timed, budget_s=200.0)
    assert planned == [("stock",), ("stock", "zero"), ("stock", "fsdp")]
    said = capsys.readouterr().out
    assert said.strip() == ("ddpbench: within --budget's 3 min 20 s, by the same forecast (make's IMPLS=, or "
                            "--impls): IMPLS=stock: at least 2 min; IMPLS=stock,fsdp: at least 3 min; "
                            "IMPLS=stock,zero: at least 3 min")  # fmt: skip
    forecast_notes.say_narrower(plan, expand=expand, timed=timed, budget_s=60.0)
    assert "no narrower plan of these strategies fits --budget's 60 s: IMPLS=stock" in capsys.readouterr().out


def test_the_fixed_cost_is_looked_for_in_the_default_results_too(tmp_path, monkeypatch):
    """A walkthrough's dry run with --results in a new folder said the fixed cost was 'not known yet' beside a
    results/ whose run had measured it."""
    from harness.handoff import fixed_cost

    monkeypatch.chdir(tmp_path)
    (tmp_path / cfgmod.RESULTS).mkdir()
    (tmp_path / "new").mkdir()
    seen = []

    def measured_in(configurations, folder):
        seen.append(folder)
        return "measured" if folder == cfgmod.RESULTS else None

    monkeypatch.setattr(fixed_cost, "fixed_cost", measured_in)
    assert forecast_notes.fixed_cost_here([_configuration("stock")], tmp_path / "new") == ("measured", cfgmod.RESULTS)
    assert seen == [tmp_path / "new", cfgmod.RESULTS]


def test_the_fixed_cost_of_a_run_across_nodes_is_taken_from_runs_across_as_many_nodes(tmp_path):
    """A dry run of 1 GPU on each of 2 nodes took the fixed cost of a one-node run of 2 GPUs (as many ranks) without a
    word, and the other way round: a launch across nodes waits on a rendezvous of its nodes, one on a node does not."""
    import json

    from harness.handoff import fixed_cost
    from harness.results import store

    for run, nodes, wall in (("one-node", 1, 20.0), ("two-node", 2, 40.0)):
        planned = dataclasses.replace(_configuration("stock"), nnodes=nodes)
        meta = {"device": "cpu", "environment": {}, "configurations": [planned.to_json()]}
        store.write_json(tmp_path / run / "run.json", meta)
        session = {"wall_s": wall, "phases_s": {"launch": wall / 2, "steps": 1.0}, "launched": 1, "launches": 1}
        (tmp_path / run / "summary.json").write_text(json.dumps({**session, "session": session}))
    for nodes, run in ((1, "one-node"), (2, "two-node")):
        found = fixed_cost.fixed_cost([dataclasses.replace(_configuration("stock"), nnodes=nodes)], tmp_path)
        assert [m.run for m in found.measured] == [run], nodes
    assert fixed_cost.fixed_cost([dataclasses.replace(_configuration("stock"), nnodes=4)], tmp_path) is None

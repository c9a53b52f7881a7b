"""harness.handoff.costs: where a launch's time goes, as rank 0 accounts it and the launcher completes it."""

from __future__ import annotations

import json
import time

import pytest

from harness.handoff import costs


def test_laps_give_each_phase_the_time_since_the_previous_lap(monkeypatch):
    host_clock = iter([100.0, 100.02, 100.03, 100.035])  # the clock's start, then each lap's reading
    monkeypatch.setattr(costs, "host_seconds", lambda: next(host_clock))
    clock = costs.CostClock()
    clock.lap("build")
    clock.lap(None)  # nobody's: its 10 ms go to no phase
    clock.lap("write")
    assert clock.seconds == pytest.approx({"build": 0.02, "write": 0.005})


def test_the_training_loop_splits_into_its_timed_steps_and_the_rest():
    clock = costs.CostClock()
    time.sleep(0.05)
    clock.lap_training([{"step_ms": 10.0}, {"step_ms": 20.0}])
    assert clock.seconds["steps"] == pytest.approx(0.030)
    assert 0.02 <= clock.seconds["between steps"] < 0.5


def test_an_unknown_phase_is_refused_with_the_valid_ones():
    with pytest.raises(KeyError, match=r"unknown fixed-cost phase 'lunch'.*build"):
        costs.CostClock().add("lunch", 1.0)


def test_this_process_started_before_now_and_not_long_ago():
    started = costs.process_started_at()
    assert started is not None
    assert 0.0 < time.time() - started < 3600.0


def test_the_launcher_adds_torchrun_start_and_teardown_to_rank_zeros_account(tmp_path):
    plan = tmp_path / "world-2.json"
    clock = costs.CostClock(path=costs.costs_path(plan))
    clock.add("build", 1.5)
    clock.save()
    account = json.loads(costs.costs_path(plan).read_text())
    split = costs.read_launch(plan, launched_at=account["started_at"] - 2.0, ended_at=account["last_at"] + 0.75)
    assert split == {"build": 1.5, "launch": pytest.approx(2.0), "teardown": pytest.approx(0.75)}


def test_a_launch_that_never_reached_the_worker_is_all_launch(tmp_path):
    assert costs.read_launch(tmp_path / "world-1.json", launched_at=100.0, ended_at=103.0) == {"launch": 3.0}


def test_sums_over_launches():
    total: dict[str, float] = {}
    costs.add_into(total, {"launch": 1.0, "build": 2.0})
    costs.add_into(total, {"launch": 0.5})
    assert total == {"launch": 1.5, "build": 2.0}


def test_the_launchers_own_phases_add_their_wall_time_and_only_known_phases():
    total = {"pairing": 1.0}
    with costs.timed(total, "pairing"):
        time.sleep(0.02)
    assert 1.02 <= total["pairing"] < 1.5
    with pytest.raises(KeyError, match="unknown fixed-cost phase 'pairs'"), costs.timed(total, "pairs"):
        pass

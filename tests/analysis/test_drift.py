"""Drift: the steps' level moving within the measured window, flagged where it is beyond the steps' own
noise (drift.step_drift, drift.drift_flagged) and named in the noise note (stats.noise_note)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from harness.analysis import drift, stats
from harness.analysis.verdicts import compare, sweep

# An H200 run's slowest rank per measured step, in step order (ms). The stock ones moved within the
# window (torch DDP syncs the device in its first 11 iterations); their step medians once decided a
# verdict that was an artefact of it.
STOCK_FP32 = [80.6, 80.8, 81.0, 80.7, 80.8, 81.0, 81.1, 81.0, 81.0, 81.1, 78.0, 77.9]
STOCK_RUN2 = [45.9, 45.5, 46.0, 45.8, 45.8, 45.7, 45.3, 46.0, 45.6, 45.9, 43.8, 43.5]
STOCK_BF16 = [33.9, 32.6, 32.5, 33.6, 31.6, 33.3, 36.1, 34.0, 31.3, 31.3,
              29.6, 29.6, 29.5, 29.5, 29.5, 29.5, 29.6, 29.5, 29.5, 29.5]  # fmt: skip
LOCAL_STEADY = [41.9, 42.0, 42.0, 42.1, 41.9, 42.0, 42.1, 42.0, 42.0, 42.1]


def flagged(steps_ms) -> bool:
    found = drift.step_drift(steps_ms)
    return drift.drift_flagged(found["drift"], found["drift_se"])


@pytest.mark.parametrize(
    ("steps_ms", "expected"),
    [(STOCK_FP32, -0.0347), (STOCK_RUN2, -0.0437), (STOCK_BF16, -0.1047)],
    ids=["fp32-last-two-steps", "run2-last-two-steps", "bf16-second-half"],
)
def test_the_stock_series_that_moved_within_the_window_are_flagged_with_their_drift(steps_ms, expected):
    found = drift.step_drift(steps_ms)
    assert found["drift"] == pytest.approx(expected, abs=5e-4)
    assert abs(found["drift"]) > 5 * found["drift_se"] and flagged(steps_ms)


def test_a_shift_in_the_last_two_steps_is_caught_where_thirds_would_miss_it():
    thirds = np.median(STOCK_FP32[-4:]) / np.median(STOCK_FP32[:4]) - 1  # last third vs first third: 4 steps each
    assert abs(thirds) < drift.DRIFT_FLOOR  # what a first-third/last-third rule would have said: nothing
    assert flagged(STOCK_FP32)


def test_steady_steps_are_not_flagged():
    found = drift.step_drift(LOCAL_STEADY)
    assert abs(found["drift"]) < 0.002 and not flagged(LOCAL_STEADY)


def test_the_drift_is_the_last_quarters_median_over_the_first_halfs():
    steps = [10.0] * 10 + [11.0] * 2 + [12.0] * 4  # 16 steps: first half 10 ms, last quarter (4) 12 ms
    assert drift.step_drift(steps)["drift"] == pytest.approx(0.2)
    # Ten steps: the last quarter is three steps (at least DRIFT_TAIL_STEPS), one odd last step moves none.
    assert drift.step_drift([10.0] * 9 + [30.0])["drift"] == 0.0


def test_too_few_steps_have_no_drift_and_are_never_flagged():
    for steps in ([], [1.0], [10.0, 10.0, 10.0, 12.0, 12.0]):
        assert drift.step_drift(steps) == {"drift": None, "drift_se": None}
    assert drift.step_drift([10.0] * 3 + [12.0] * 3)["drift"] == pytest.approx(0.2)  # six: three and three
    assert not drift.drift_flagged(None, None) and not drift.drift_flagged(float("nan"), 0.001)


def test_a_drift_under_the_floor_is_not_flagged_however_steady_the_steps():
    steps = [100.0, 100.01] * 5 + [101.0, 101.01] * 3  # 1 % up, with almost no noise: many standard errors
    found = drift.step_drift(steps)
    assert found["drift"] == pytest.approx(0.01, abs=1e-3) and found["drift"] > 10 * found["drift_se"]
    assert not flagged(steps)


def false_flag_rate(steps: int, cv: float, *, series: int, rng: np.random.Generator) -> float:
    draws = rng.normal(100.0, 100.0 * cv, size=(series, steps))
    return float(np.mean([flagged(row) for row in draws]))


def test_iid_noise_is_rarely_flagged_by_simulation():
    """Steps with no drift at all, iid normal at CV 5 % and 10 %, 10 to 20 of them: at most 5 % of repeats
    flagged (docs/statistics.md gives the rates a larger simulation measured: 1–2 % here)."""
    rng = np.random.default_rng(20260101)
    cases = [(steps, cv) for steps in (10, 15, 20) for cv in (0.05, 0.1)]
    rates = {case: false_flag_rate(*case, series=400, rng=rng) for case in cases}
    assert max(rates.values()) <= 0.05, rates
    assert np.mean(list(rates.values())) < 0.03, rates


def test_a_real_shift_of_that_noise_is_still_seen():
    """The rule is not blind: a 15 % shift (3 σ) in the second half of 20 steps at CV 5 % is flagged in most
    repeats (about 9 in 10)."""
    rng = np.random.default_rng(1)
    draws = rng.normal(100.0, 5.0, size=(200, 20)) * np.r_[np.ones(10), np.full(10, 0.85)]
    assert np.mean([flagged(row) for row in draws]) > 0.8


def drifts_of(*series) -> dict:
    figures = [drift.step_drift(s) for s in series]
    return {"drifts": [f["drift"] for f in figures], "drift_ses": [f["drift_se"] for f in figures]}


def test_the_noise_note_names_a_drift_most_repeats_show_and_keeps_the_old_notes():
    steady, moved = drifts_of(LOCAL_STEADY), drifts_of(STOCK_FP32, STOCK_RUN2)
    assert stats.noise_note([0.01], [42.0], **steady) == ""
    said = stats.noise_note([0.01, 0.02], [80.0, 80.5], **moved)
    assert said == "steps drift -3.9% within the window (more --warmup)"  # the median of −3.5 % and −4.4 %
    assert stats.noise_note([0.15, 0.15], [100.0, 120.0], **moved) == (
        "noisy steps (CV 0.15); repeats disagree (100–120 ms); steps drift -3.9% within the window (more --warmup)"
    )
    assert stats.noise_note([0.02, 0.02], [100.0, 120.0]) == "repeats disagree (100–120 ms)"  # no drift given


def test_a_drift_in_half_the_repeats_or_fewer_is_not_the_configurations():
    half = drifts_of(STOCK_FP32, LOCAL_STEADY)
    assert stats.noise_note([0.01, 0.01], [80.0, 80.0], **half) == ""
    most = drifts_of(STOCK_FP32, STOCK_RUN2, LOCAL_STEADY)
    assert "steps drift" in stats.noise_note([0.01] * 3, [80.0] * 3, **most)


def test_unknown_drifts_make_no_note_and_a_slowdown_asks_for_no_more_warm_up():
    assert stats.noise_note([0.01], [80.0], drifts=[None], drift_ses=[None]) == ""
    assert stats.noise_note([0.01], [80.0], drifts=[float("nan")], drift_ses=[float("nan")]) == ""
    slower = drifts_of([10.0] * 10 + [11.0] * 10)
    assert stats.noise_note([0.01], [10.0], **slower) == "steps drift +10.0% within the window"
    mixed = drift.drift_note([-0.05, 0.04], [0.001, 0.001])
    assert mixed == "steps drift -5.0% to +4.0% within the window"


def test_each_repeats_summary_and_each_configs_row_carry_the_drift_of_its_steps_in_order():
    summary = stats.repeat_summary(STOCK_FP32)
    assert summary["drift"] == drift.step_drift(STOCK_FP32)["drift"] and summary["drift_se"] > 0
    row = stats.summarize(STOCK_FP32)
    assert row["step_ms_drift"] == summary["drift"] and row["step_ms_drift_se"] == summary["drift_se"]
    assert stats.summarize([])["step_ms_drift"] is None


def test_compare_and_the_sweep_name_a_drift_in_their_noise():
    keys = {"config_id": "c0", "impl": "stock", "impl_options": "{}"}
    samples = pd.DataFrame([{**keys, "step": s, "step_ms": ms} for s, ms in enumerate(STOCK_RUN2)])
    figures = compare.repeat_figures(samples)
    judged = compare.judge(figures, figures, threshold=0.05)
    assert "base: steps drift -4.4% within the window" in judged["noise"]
    caps = {25.0: [stats.repeat_summary(STOCK_RUN2)], 5.0: [stats.repeat_summary(LOCAL_STEADY)]}
    assert sweep._noise(caps) == "cap 25: steps drift -4.4% within the window (more --warmup)"


def test_the_bench_console_lists_the_configurations_whose_steps_drift(tmp_path, capsys):
    from harness.commands import bench as bench_command
    from harness.commands import console
    from harness.results import store

    keys = {"impl_options": "{}", "workload": "gpt2", "size": "full", "world_size": 1, "nnodes": 1, "batch_size": 8,
            "dtype": "bf16", "optimizer": "sgd", "device": "cuda", "status": "ok"}  # fmt: skip
    for repeat in range(2):  # the reference drifts in both repeats, the other strategy in neither
        for impl, moved in (("stock", -0.044), ("bucketed", 0.001)):
            row = {**keys, "config_id": f"{impl}-r{repeat}", "impl": impl, "repeat": repeat, "step_ms_median": 45.0,
                   "step_ms_drift": moved, "step_ms_drift_se": 0.002}  # fmt: skip
            store.write_configuration(tmp_path / "run", row["config_id"], row, [])
    lines = bench_command._drift_lines(store.read_configs(tmp_path / "run"))
    assert lines == ["w1 gpt2/full stock: steps drift -4.4% within the window (more --warmup)"]
    console.drifting(lines)
    assert "steps that drift within the measured window" in capsys.readouterr().out

"""Statistics: confidence intervals, significance, verdicts and the bucket-cap recommendation."""

from __future__ import annotations

import numpy as np

from harness.analysis import stats


def normal(mean: float, n: int = 60, seed: int = 0, spread: float = 0.03) -> list[float]:
    return list(np.random.default_rng(seed).normal(mean, mean * spread, n))


def test_summary_reports_median_percentiles_and_noise():
    summary = stats.summarize([10, 10, 10, 10, 20])
    assert summary["step_ms_median"] == 10 and summary["step_ms_p90"] > summary["step_ms_p10"]
    assert stats.is_noisy(summary["step_ms_cv"]) and not stats.is_noisy(stats.summarize([10, 10.1, 9.9])["step_ms_cv"])


def test_bootstrap_interval_contains_the_median_and_narrows_with_more_samples():
    few, many = normal(100, n=10), normal(100, n=400)
    low_few, high_few = stats.bootstrap_median_ci(few)
    low_many, high_many = stats.bootstrap_median_ci(many)
    assert low_few <= np.median(few) <= high_few
    assert high_many - low_many < high_few - low_few


def test_same_distribution_is_no_significant_change():
    result = stats.verdict(normal(100, seed=1), normal(100, seed=2), threshold=0.05)
    assert result["verdict"] == "no significant change"


def test_ten_percent_slower_is_slower_and_ten_percent_faster_is_faster():
    assert stats.verdict(normal(100, seed=1), normal(110, seed=2), threshold=0.05)["verdict"] == "slower"
    assert stats.verdict(normal(100, seed=1), normal(90, seed=2), threshold=0.05)["verdict"] == "faster"


def test_a_difference_below_the_threshold_is_not_flagged_even_when_significant():
    result = stats.verdict(normal(100, seed=1, spread=0.001), normal(103, seed=2, spread=0.001), threshold=0.05)
    assert result["p_value"] < stats.SIGNIFICANCE_P and result["verdict"] == "no significant change"


def test_recommendation_finds_the_known_optimum_and_the_caps_as_good_as_it():
    # A U-shaped response with its optimum at 10 MB; 5 MB is indistinguishable from it.
    curve = {1.0: 130, 5.0: 100.5, 10.0: 100, 25.0: 112, 100.0: 140}
    samples = {cap: normal(ms, seed=i) for i, (cap, ms) in enumerate(curve.items())}
    recommendation = stats.recommend_cap(samples)
    assert recommendation["best_cap_mb"] in (5.0, 10.0)
    assert recommendation["equivalent_caps_mb"] == [5.0, 10.0]
    assert recommendation["best_ci_low_ms"] <= recommendation["best_step_ms"] <= recommendation["best_ci_high_ms"]
    assert 0.08 < recommendation["gain_vs_default"] < 0.16
    assert stats.recommend_cap({1.0: normal(10), 5.0: normal(20)})["gain_vs_default"] is None

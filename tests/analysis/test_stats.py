"""Statistics: the repeat as the unit of evidence, intervals, verdicts, 'too few repeats to tell',
and the bucket-cap recommendation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from harness.analysis import scaling, stats
from harness.analysis.verdicts import sweep


def repeats(mean: float, n: int = 5, seed: int = 0, spread: float = 0.01) -> list[float]:
    """n repeat medians (ms) scattered by `spread` (relative sd) around `mean`."""
    return list(mean * np.exp(np.random.default_rng(seed).normal(0, spread, n)))


def test_summary_reports_median_percentiles_and_noise():
    summary = stats.summarize([10, 10, 10, 10, 20])
    assert summary["step_ms_median"] == 10 and summary["step_ms_p90"] > summary["step_ms_p10"]
    assert stats.is_noisy(summary["step_ms_cv"]) and not stats.is_noisy(stats.summarize([10, 10.1, 9.9])["step_ms_cv"])


def test_batch_means_uncertainty_grows_with_autocorrelation_where_s_over_root_n_does_not():
    rng = np.random.default_rng(0)
    independent = rng.normal(0, 1, 400)
    drifting = np.cumsum(rng.normal(0, 0.2, 400))  # a random walk: neighbours share most of their value
    naive = drifting.std(ddof=1) / np.sqrt(drifting.size)
    assert stats.batch_means_se(drifting) > 3 * naive
    assert stats.batch_means_se(independent) == pytest.approx(1 / 20, rel=0.5)
    assert stats.batch_means_se([1.0, 2.0, 3.0]) is None  # too short for two batches


def test_an_interval_over_repeats_contains_the_center_and_needs_two_repeats():
    center, low, high = stats.center_interval(repeats(100))
    assert low < center < high and high / low < 1.05
    center, low, high = stats.center_interval([100.0])
    assert center == pytest.approx(100.0) and np.isnan(low) and np.isnan(high)


def test_same_code_is_no_significant_change_and_ten_percent_is_slower_or_faster():
    assert stats.verdict(repeats(100, seed=1), repeats(100, seed=2), threshold=0.05)["verdict"] == stats.NO_CHANGE
    assert stats.verdict(repeats(100, seed=1), repeats(110, seed=2), threshold=0.05)["verdict"] == stats.SLOWER
    assert stats.verdict(repeats(100, seed=1), repeats(90, seed=2), threshold=0.05)["verdict"] == stats.FASTER


def test_a_significant_difference_below_the_threshold_is_no_significant_change():
    result = stats.verdict(repeats(100, seed=1, spread=0.001), repeats(103, seed=2, spread=0.001), threshold=0.05)
    assert result["p_value"] < 0.001 and result["verdict"] == stats.NO_CHANGE


def test_one_repeat_a_side_is_too_few_to_tell_even_for_a_twofold_slowdown_and_it_asks_for_what_would_do():
    result = stats.verdict([100.0], [200.0], threshold=0.05)
    assert result["verdict"] == stats.TOO_FEW and result["repeats"] == 1
    # A twofold ratio needs only an interval that keeps 1.05 out: two repeats at a quiet machine's spread;
    # a ratio within the threshold needs one narrower than ±5 %: more.
    assert result["repeats_needed"] == stats.repeats_needed(stats.LAUNCH_SPREAD, threshold=0.05, ratio=2.0) == 2
    assert stats.repeats_needed(stats.LAUNCH_SPREAD, threshold=0.05, ratio=1.02) > 2


def test_repeats_that_scatter_more_than_the_threshold_are_too_few_never_no_change():
    result = stats.verdict(
        repeats(100, n=3, seed=1, spread=0.08), repeats(101, n=3, seed=2, spread=0.08), threshold=0.05
    )
    assert result["verdict"] == stats.TOO_FEW and result["repeats_needed"] > 3
    # A change far beyond the scatter is decided however wide the interval.
    wide = stats.verdict(repeats(100, n=3, seed=1, spread=0.08), repeats(200, n=3, seed=2, spread=0.08), threshold=0.05)
    assert wide["verdict"] == stats.SLOWER


def test_repeats_needed_grows_with_the_spread_and_shrinks_with_the_threshold():
    needed = [stats.repeats_needed(spread, threshold=0.05) for spread in (0.005, 0.02, 0.05)]
    assert needed == sorted(needed) and needed[0] == stats.MIN_REPEATS and needed[-1] > 10
    assert stats.repeats_needed(0.05, threshold=0.10) < needed[-1]
    assert stats.repeats_needed(0.05, threshold=0.0) is None


def test_noise_is_named_when_steps_are_noisy_or_repeats_disagree():
    assert stats.noise_note([0.02, 0.03], [100.0, 101.0]) == ""
    assert "noisy steps (CV 0.15)" in stats.noise_note([0.15, 0.15], [100.0, 101.0])
    assert "repeats disagree (100–120 ms)" in stats.noise_note([0.02, 0.02], [100.0, 120.0])
    # At the threshold, a third decimal keeps 'noisy' and 'steady' from both reading 0.10.
    assert "noisy steps (CV 0.101)" in stats.noise_note([0.1012], [100.0])
    assert stats.cv_text(0.0996) == "0.0996" and stats.cv_text(0.1004) == "0.1004"  # each side reads as its side
    assert stats.cv_text(0.1) == "0.10" and stats.cv_text(0.0349) == "0.03"


def curve_repeats(curve: dict[float, float], n: int = 5, spread: float = 0.01) -> dict[float, list[float]]:
    return {cap: repeats(ms, n=n, seed=i, spread=spread) for i, (cap, ms) in enumerate(curve.items())}


def test_a_cap_that_beats_the_default_significantly_is_recommended_with_the_caps_as_good_as_it():
    recommendation = sweep.recommend_cap(curve_repeats({1.0: 130, 5.0: 100.3, 10.0: 100, 25.0: 112, 100.0: 140}))
    assert recommendation["decision"] == stats.RECOMMEND
    assert recommendation["best_cap_mb"] in (5.0, 10.0) and recommendation["equivalent_caps_mb"] == [5.0, 10.0]
    assert recommendation["best_ci_low_ms"] < recommendation["best_step_ms"] < recommendation["best_ci_high_ms"]
    assert 0.10 < recommendation["gain_vs_default"] < 0.14


def test_the_gain_over_the_default_has_the_interval_its_verdict_judged_at():
    figures = curve_repeats({5.0: 100, 25.0: 112}, spread=0.03)
    for confidence in (0.95, 0.995):
        recommendation = sweep.recommend_cap(figures, confidence=confidence)
        judged = stats.ratio_interval(figures[25.0], figures[5.0], confidence=confidence)  # fastest / 25 MiB
        assert recommendation["gain_low"] == pytest.approx(1 / judged["high"] - 1)
        assert recommendation["gain_high"] == pytest.approx(1 / judged["low"] - 1)
        assert recommendation["gain_low"] < recommendation["gain_vs_default"] < recommendation["gain_high"]
        assert recommendation["confidence"] == confidence
    narrower, wider = (sweep.recommend_cap(figures, confidence=c) for c in (0.95, 0.995))
    assert wider["gain_high"] - wider["gain_low"] > narrower["gain_high"] - narrower["gain_low"]
    # None where nothing bounds it: 25 MiB the fastest, not measured, or one repeat.
    for unbounded in (curve_repeats({5.0: 120, 25.0: 100}), curve_repeats({1.0: 150, 5.0: 100}),
                      {5.0: [100.0], 25.0: [130.0]}):  # fmt: skip
        assert sweep.recommend_cap(unbounded)["gain_high"] is None


def test_a_best_cap_within_noise_of_the_default_is_flat_not_starred():
    recommendation = sweep.recommend_cap(curve_repeats({1.0: 130, 5.0: 100.0, 25.0: 100.5}))
    assert recommendation["decision"] == stats.FLAT and 25.0 in recommendation["equivalent_caps_mb"]


def test_a_sweep_with_one_repeat_per_cap_is_too_few_to_tell():
    recommendation = sweep.recommend_cap({5.0: [100.0], 25.0: [130.0]})
    assert recommendation["decision"] == stats.TOO_FEW and recommendation["repeats"] == 1
    assert recommendation["equivalent_caps_mb"] == [5.0, 25.0]


def test_one_rival_that_is_surely_no_better_makes_it_flat_though_another_has_too_few_repeats():
    figures = {1.0: [10.0, 10.01, 10.02], 5.0: [10.01, 10.02, 10.03], 50.0: [12.0]}
    assert stats.verdict(figures[5.0], figures[1.0], threshold=0.05)["verdict"] == stats.NO_CHANGE
    assert stats.verdict(figures[50.0], figures[1.0], threshold=0.05)["verdict"] == stats.TOO_FEW
    assert sweep.recommend_cap(figures)["decision"] == stats.FLAT
    # Without that rival, the one that cannot tell still decides: too few.
    assert sweep.recommend_cap({1.0: figures[1.0], 50.0: [12.0]})["decision"] == stats.TOO_FEW


def test_without_the_default_the_best_must_beat_every_other_cap():
    assert sweep.recommend_cap(curve_repeats({1.0: 150, 5.0: 100}))["decision"] == stats.RECOMMEND
    assert sweep.recommend_cap(curve_repeats({1.0: 150, 5.0: 100}))["gain_vs_default"] is None
    assert sweep.recommend_cap(curve_repeats({1.0: 100.2, 5.0: 100}))["decision"] == stats.FLAT


def test_the_repeats_needed_are_said_as_a_number_until_no_practical_number_will_do():
    assert stats.needed_text(7) == "need about 7"
    # sized from 3 repeats' spread, a count is as rough as the time it predicts (3 repeats said 5; the 6th, 341)
    assert stats.needed_text(7, 3) == "need about 7, a rough guide from 3 repeats"
    assert stats.rough_guide(1) == ", a rough guide from 1 repeat"  # a walkthrough's "from 1 repeats"
    assert stats.rough_guide(np.float64(2)) == ", a rough guide from 2 repeats"  # as a stored row holds it
    assert stats.needed_text(7, stats.ROUGH_UNDER) == "need about 7"
    assert stats.needed_text(stats.MAX_REPEATS).startswith(f"need more than {stats.MAX_REPEATS}")
    assert stats.needed_text(None) == "need more"


def test_a_need_past_the_cap_is_said_to_rest_on_the_ratio_so_far():
    """Two identical runs, spread alike (0.358 and 0.372 log sd), one at 0.77× (interval 0.52–1.14), one at 0.96×
    (0.52–1.78): 'need about 86' and 'need more than 1000 … more repeats will not decide them'. The need is sized from
    the ratio seen, and the second run's own interval ends would need under 20: 'more than 1000' holds at its ratio."""
    need = {ratio: stats.repeats_needed(0.37, threshold=0.05, confidence=0.9975, ratio=ratio)
            for ratio in (0.52, 0.77, 0.96, 1.78)}  # fmt: skip
    assert need[0.96] == stats.MAX_REPEATS and need[0.77] < 120 and max(need[0.52], need[1.78]) < 20
    assert stats.needed_text(need[0.96]).startswith(f"need more than {stats.MAX_REPEATS} at the ratio so far")


def test_a_significant_gain_below_the_threshold_is_flat_as_compare_would_judge_it():
    # 1 % faster with tight repeats: significant (p < 0.001), but below the 5 % that counts.
    figures = {5.0: repeats(99.0, spread=0.001, seed=1), 25.0: repeats(100.0, spread=0.001, seed=2)}
    recommendation = sweep.recommend_cap(figures)
    assert stats.ratio_interval(figures[25.0], figures[5.0])["high"] < 1  # significant...
    assert stats.verdict(figures[25.0], figures[5.0], threshold=0.05)["verdict"] == stats.NO_CHANGE  # ...not enough
    assert recommendation["decision"] == stats.FLAT and recommendation["best_cap_mb"] == 5.0
    assert recommendation["equivalent_caps_mb"] == [5.0, 25.0]
    assert recommendation["gain_vs_default"] == pytest.approx(0.01, abs=0.002)


def test_a_gain_at_the_threshold_is_recommended_only_when_the_repeats_are_sure_of_it():
    sure = sweep.recommend_cap({5.0: repeats(100.0, spread=0.002, seed=1), 25.0: repeats(108.0, spread=0.002, seed=2)})
    assert sure["decision"] == stats.RECOMMEND and sure["equivalent_caps_mb"] == [5.0]
    unsure = sweep.recommend_cap({5.0: repeats(100.0, spread=0.06, seed=1), 25.0: repeats(108.0, spread=0.06, seed=2)})
    assert unsure["decision"] == stats.TOO_FEW


def test_a_lower_threshold_lets_a_small_sure_gain_be_recommended():
    figures = {5.0: repeats(99.0, spread=0.001, seed=1), 25.0: repeats(100.0, spread=0.001, seed=2)}
    assert sweep.recommend_cap(figures, threshold=0.005)["decision"] == stats.RECOMMEND


def configs_for_scaling(w1_ms: list[float], w2_ms: list[float]) -> pd.DataFrame:
    """Rows of one strategy at world sizes 1 and 2, one per repeat, batch 10 per rank."""
    keys = {"status": "ok", "impl": "stock", "impl_options": "{}", "workload": "mlp", "size": "tiny",
            "batch_size": 10, "dtype": "fp32", "optimizer": "sgd", "device": "cpu", "backend": "gloo",
            "nnodes": 1, "grad_accum": 1}  # fmt: skip
    rows = [{**keys, "world_size": world, "repeat": repeat, "samples_per_s": 10 * world * 1000 / ms}
            for world, times in ((1, w1_ms), (2, w2_ms)) for repeat, ms in enumerate(times)]  # fmt: skip
    return pd.DataFrame(rows)


def test_pooled_scaling_takes_the_one_rank_baseline_over_every_repeat_not_the_same_repeats_alone():
    # Repeat 1's world-size-1 launch ran twice as fast as the others (an outlier): paired per repeat it makes
    # that repeat's scaling half the others'; pooled, the baseline is the centre of the three launches.
    configs = configs_for_scaling([10.0, 5.0, 10.0], [20.0, 20.0, 20.0])
    per_repeat = [
        scaling.scaling_efficiency(w2, world_size=2, single_rank_samples_per_s=w1)
        for w1, w2 in zip(configs["samples_per_s"][:3], configs["samples_per_s"][3:], strict=True)
    ]
    assert per_repeat == pytest.approx([0.5, 0.25, 0.5])
    pooled = scaling.pooled_scaling(configs).set_index("world_size")
    centre = np.exp(np.mean(np.log([1000.0, 2000.0, 1000.0])))  # samples/s at one rank, geometric mean
    assert pooled.loc[2, "scaling_efficiency"] == pytest.approx(1000.0 / (2 * centre))
    assert pooled.loc[1, "scaling_efficiency"] == pytest.approx(1.0)
    assert (pooled.loc[2, "repeats"], pooled.loc[2, "baseline_repeats"]) == (3, 3)


def test_pooled_scaling_without_a_one_rank_row_is_null_not_a_guess():
    configs = configs_for_scaling([], [20.0, 21.0])
    pooled = scaling.pooled_scaling(configs)
    assert pooled["scaling_efficiency"].isna().all() and pooled["baseline_repeats"].tolist() == [0]


def test_paired_repeats_are_judged_launch_by_launch_as_scipy_does():
    from scipy import stats as scipy_stats

    rng = np.random.default_rng(3)
    launch = np.exp(rng.normal(0, 0.08, 6))  # launches 8 % apart, each shared by both configurations
    base, new = 100 * launch * np.exp(rng.normal(0, 0.01, 6)), 110 * launch * np.exp(rng.normal(0, 0.01, 6))
    paired = stats.ratio_interval(base, new, paired=True)
    expected = scipy_stats.ttest_rel(np.log(new), np.log(base))
    low, high = expected.confidence_interval(stats.CONFIDENCE)
    assert paired["p_value"] == pytest.approx(expected.pvalue)
    assert (paired["low"], paired["high"]) == pytest.approx((np.exp(low), np.exp(high)))
    alone, judged = stats.verdict(base, new, threshold=0.05), stats.verdict(base, new, threshold=0.05, paired=True)
    assert alone["verdict"] == stats.TOO_FEW and judged["verdict"] == stats.SLOWER
    assert judged["repeats_needed"] < alone["repeats_needed"]


def test_caps_ran_side_by_side_only_when_each_ran_once_in_each_of_the_same_repeats():
    assert stats.same_launches([0, 1, 2], [2, 1, 0], [1, 0, 2])  # the order rows come in does not matter
    assert not stats.same_launches([0, 1, 2], [0, 1, 3])  # one cap ran in another repeat
    assert not stats.same_launches([0, 0, 1], [0, 0, 1])  # a repeat twice


def test_caps_side_by_side_are_paired_from_enough_repeats_and_asked_for_what_pairing_needs():
    rng = np.random.default_rng(5)
    launch = np.exp(rng.normal(0, 0.15, 12))  # launches 15 % apart, shared by both caps
    figures = {cap: ms * launch * np.exp(rng.normal(0, 0.01, 12)) for cap, ms in ((1.0, 100.0), (25.0, 110.0))}
    early = sweep.recommend_cap({cap: f[: stats.PAIRED_FROM - 1] for cap, f in figures.items()}, aligned=True)
    assert not early["paired"] and early["decision"] == stats.TOO_FEW
    assert early["repeats_needed"] == stats.PAIRED_FROM  # what pairing would need, where it starts
    later = sweep.recommend_cap({cap: f[: stats.PAIRED_FROM] for cap, f in figures.items()}, aligned=True)
    assert later["paired"] and later["decision"] == stats.RECOMMEND and later["best_cap_mb"] == 1.0
    alone = sweep.recommend_cap({cap: f[: stats.PAIRED_FROM] for cap, f in figures.items()})
    assert not alone["paired"] and alone["decision"] == stats.TOO_FEW and alone["repeats_needed"] > 20


def test_an_undecided_verdict_never_asks_for_the_repeats_it_already_has():
    """The pooled spread says two repeats decide, but one side scattered alone (Welch's interval, with about
    one degree of freedom, stays wide): the two at hand did not decide, so it asks for a third."""
    judged = stats.verdict([100.0, 100.01], [100.0, 101.0], threshold=stats.DEFAULT_THRESHOLD)
    assert judged["verdict"] == stats.TOO_FEW and judged["repeats"] == 2 and judged["repeats_needed"] == 3


def test_repeats_pool_by_their_geometric_mean_skipping_unknown_figures():
    assert stats.geometric_mean([1.0, 10.0, 100.0]) == pytest.approx(10.0)
    assert stats.geometric_mean([4.0, float("nan"), 1.0]) == pytest.approx(2.0)  # a repeat without the figure
    assert np.isnan(stats.geometric_mean([])) and np.isnan(stats.geometric_mean([float("nan")]))
    assert stats.geometric_mean([2.0, 8.0]) == pytest.approx(stats.center_interval([2.0, 8.0])[0])


def test_a_sweeps_need_is_its_deciding_verdicts_so_the_cap_table_and_the_verdict_ask_for_one_number():
    figures = {1.0: repeats(150.0, spread=0.25, seed=3, n=3), 25.0: repeats(100.0, spread=0.25, seed=4, n=3)}
    decided = sweep.recommend_cap(figures)
    best, rival = (25.0, 1.0) if decided["best_cap_mb"] == 25.0 else (1.0, 25.0)
    pair = stats.verdict(figures[rival], figures[best], threshold=stats.DEFAULT_THRESHOLD)
    assert decided["decision"] == pair["verdict"] == stats.TOO_FEW
    assert decided["repeats_needed"] == pair["repeats_needed"]
    clear = stats.repeats_needed(0.25, threshold=stats.DEFAULT_THRESHOLD, ratio=pair["ratio"])
    as_if_flat = stats.repeats_needed(0.25, threshold=stats.DEFAULT_THRESHOLD)
    assert clear < as_if_flat  # a 1.5× difference is told in fewer repeats than "no difference" (once always asked)
    noisy_third = {1.0: [100, 104, 98], 25.0: [103, 99, 106], 5.0: [140, 100, 170]}  # 5 MiB's spread is not theirs
    table = sweep.recommend_cap(noisy_third, aligned=True)
    best, reference = noisy_third[table["best_cap_mb"]], noisy_third[25.0]
    alone = sweep.cap_pair_verdict(reference, best, aligned=True, threshold=stats.DEFAULT_THRESHOLD, confidence=0.95)
    assert table["repeats_needed"] == alone["repeats_needed"] == 15  # once 137, from every cap's spread pooled


def _deepest(line: str) -> int:
    depth = deepest = 0
    for ch in line:
        depth += (ch == "(") - (ch == ")")
        deepest = max(deepest, depth)
    return deepest


def test_no_verdict_line_puts_a_bracket_inside_a_bracket():
    """'(99% interval too wide to bound it (more repeats narrow it))', 'need about 4 (a rough guide from 2
    repeats))': the shared words (the rough guide, the need, an interval too wide) said inside the brackets every
    verdict line puts them in. Built from the tests' runs and an open ratio's words, none nests."""
    from pathlib import Path

    from harness.analysis.verdicts import decide
    from harness.commands.console import forecast
    from harness.results import store

    lines = [f"(have {n}, {stats.needed_text(7, n)})" for n in (1, 2, 6)] + [f"(99% interval {sweep.TOO_WIDE})"]
    so_far = decide._ratio_so_far({"low": 0.5, "high": 1.2, "ratio": 0.81}, 0.995, "stock")
    lines.append(decide.Verdict("ratio", "w2 mlp/tiny naive vs stock", "", False, 2, 4, frozenset(),
                                so_far=so_far).line())  # fmt: skip
    data = Path(__file__).resolve().parents[1] / "data"
    for name in ("cpu_run", "bucket_sweep"):
        configs, steps = store.read_configs(data / name), store.read_steps(data / name)
        lines += [v.line() for v in decide.verdicts(configs, steps, confidence=0.995, max_repeats=2)]
        lines += [sweep.describe(row) for _, row in sweep.recommendations(configs, steps, confidence=0.995).iterrows()]
    estimate = forecast.Estimate(60.0, 2, "their FLOPs at X", 90.0, 120.0, alike=1, ratios=(1.5, 2.0))
    lines += [forecast._floor_text(estimate, "all 2", ""), forecast._floor_text(forecast.Estimate(6, 1, "X", 6, 6),
                                                                                  "the configuration", "")]  # fmt: skip
    assert len(lines) > 8 and [line for line in lines if _deepest(line) > 1] == []

"""compare's memory verdicts on small frames: a repeat's peak per rank judged BASE vs NEW (memory_compare)."""

from __future__ import annotations

import pandas as pd

from harness.analysis.verdicts import memory_compare


def repeats(*peaks: float, column: str = "mem_peak_rss_mb") -> pd.DataFrame:
    return pd.DataFrame({"config_id": [f"c{i}" for i in range(len(peaks))], "peak_mb": peaks, "peak_column": column})


def judged(base, new, threshold=0.05):
    return memory_compare.judge(base, new, threshold=threshold, confidence=0.95)


def test_ten_per_cent_more_memory_in_every_repeat_is_higher():
    said = judged(repeats(500.0, 502.0, 499.0, 501.0), repeats(550.0, 551.5, 549.0, 551.0))
    assert said["mem_verdict"] == memory_compare.HIGHER and 1.09 < said["mem_ratio"] < 1.11
    assert said["mem_ci_low"] > 1.05 and said["mem_column"] == "mem_peak_rss_mb"


def test_equal_memory_is_no_change_with_a_zero_width_interval_and_no_division_by_zero():
    said = judged(repeats(512.0, 512.0, 512.0), repeats(512.0, 512.0, 512.0), threshold=0.05)
    assert said["mem_verdict"] == "no significant change"
    assert said["mem_ratio"] == said["mem_ci_low"] == said["mem_ci_high"] == 1.0


def test_exact_repeats_beyond_the_threshold_are_higher_and_within_it_no_change():
    assert judged(repeats(100.0, 100.0), repeats(110.0, 110.0))["mem_verdict"] == memory_compare.HIGHER
    assert judged(repeats(100.0, 100.0), repeats(103.0, 103.0))["mem_verdict"] == "no significant change"


def test_noise_within_the_threshold_does_not_fail_the_gate():
    said = judged(repeats(700.0, 712.0, 695.0, 705.0, 698.0), repeats(706.0, 699.0, 715.0, 702.0, 709.0))
    assert said["mem_verdict"] == "no significant change", said
    frame = pd.DataFrame([said])
    assert memory_compare.higher(frame).empty


def test_a_peak_not_recorded_on_either_side_gets_no_verdict():
    assert judged(repeats(500.0, 500.0), repeats(float("nan"), float("nan")))["mem_verdict"] is None
    # a GPU run's reserved peak against a CPU run's RSS: not the same figure, not judged
    said = judged(repeats(500.0, 500.0), repeats(500.0, 500.0, column="mem_peak_reserved_mb"))
    assert said["mem_verdict"] is None


def test_the_figure_is_the_device_peak_on_a_gpu_and_the_rss_on_the_cpu():
    configs = pd.DataFrame({"device": ["cuda", "cpu"], "mem_peak_reserved_mb": [900.0, None],
                            "mem_peak_rss_mb": [3000.0, 700.0]})  # fmt: skip
    peaks = memory_compare.with_peaks(configs)
    assert peaks["peak_mb"].tolist() == [900.0, 700.0]
    assert peaks["peak_column"].tolist() == ["mem_peak_reserved_mb", "mem_peak_rss_mb"]

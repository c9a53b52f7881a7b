"""`predict --json`'s record (perfmodel.clusters.decision): each booking's figures as the bookings hold them, a range
as [least, most], the strategy DDP's step model books named as the strategies name it, and each ranking decided or
open on the cluster whose step it hangs on; strict JSON (no NaN)."""

from __future__ import annotations

import json
import math

import pytest

from harness.perfmodel.clusters.bookings import Booking
from harness.perfmodel.clusters.decision import answer


def _booking(cluster: str, gpus: int, *steps: float, book: str = "stock at 25 MiB", batch: int = 2) -> Booking:
    return Booking(cluster, max(gpus // 8, 1), gpus, book, (), "", tuple(steps), False,
                   tuple(gpus * batch / (ms / 1e3) for ms in steps), tuple(ms / 100 for ms in steps),
                   batch=batch, exposed_ms=float("nan") if len(steps) > 1 else 3.0)  # fmt: skip


def test_each_bookings_figures_are_its_own_and_a_range_is_least_then_most():
    a100 = _booking("dgx-a100", 8, 300.0, book="DDP at 25 MiB")
    h100 = _booking("dgx-h100", 8, 190.0, 100.0, book="fsdp or stock at 5 MiB")  # a step bounded: its two ends
    record = answer([a100, h100], tokens=False, prices={"dgx-a100": 2.0, "dgx-h100": 4.0}, samples=1.6e6)
    first, second = record["bookings"]
    assert (first["strategies"], first["bucket_cap_mb"], first["step_ms"]) == (["stock"], 25.0, [300.0, 300.0])
    assert first["exposed_comm_ms"] == 3.0 and first["comm_bound"] is False  # 3 ms of 300: compute-bound
    assert second["strategies"] == ["fsdp", "stock"] and second["bucket_cap_mb"] is None  # several: no one cap
    assert second["step_ms"] == [100.0, 190.0] and second["step_bounded"] is True
    assert second["per_s"] == [pytest.approx(8 * 2 / 0.19), pytest.approx(8 * 2 / 0.1)]
    assert second["gpu_hours_per_work"] == [1.0, 1.9] and second["cost_per_work"] == [4.0, pytest.approx(7.6)]
    # 1.6M samples at 16 a step: 100,000 steps of 100 to 190 ms
    assert second["run_hours"] == [pytest.approx(1e5 * 0.1 / 3600), pytest.approx(1e5 * 0.19 / 3600)]
    assert second["run_cost"] == [pytest.approx(4.0 * 8 * h) for h in second["run_hours"]]
    assert second["exposed_comm_ms"] is None and second["comm_bound"] is None  # not known: null, not NaN
    json.dumps(record, allow_nan=False)  # strict JSON: a script's parser need not know NaN


def test_each_ranking_is_decided_or_open_on_the_cluster_whose_step_it_hangs_on():
    a100 = _booking("dgx-a100", 8, 150.0)
    decided = answer([a100, _booking("dgx-h100", 8, 100.0, 120.0)], tokens=False)  # faster at both ends
    assert decided["fastest"]["best"] == [{"cluster": "dgx-h100", "gpus": 8}] and decided["fastest"]["decided"]
    assert decided["decided"] and decided["cheapest"] is None  # no prices: no cheapest to rank
    split = answer([a100, _booking("dgx-h100", 8, 100.0, 200.0)], tokens=True)  # faster at one end only
    assert split["fastest"]["decided"] is False and split["fastest"]["open_on"] == ["dgx-h100"]
    assert split["fastest"]["best_at_short_end"] == [{"cluster": "dgx-h100", "gpus": 8}]
    assert split["fastest"]["best_at_long_end"] == [{"cluster": "dgx-a100", "gpus": 8}]
    assert split["decided"] is False and (split["unit"], split["work"]) == ("tokens", "1B tokens")


def test_without_a_step_nothing_is_booked_and_nothing_decided():
    unfit = Booking("l40s", 1, 8, "", (), "", (), False, (), ())
    record = answer([unfit], tokens=False, why_none="no step")
    assert record["step_known"] is False and record["decided"] is False and record["why_none"] == "no step"
    assert record["fastest"]["best"] == [] and record["fastest"]["decided"] is False  # no best is no decision
    assert record["bookings"][0]["step_ms"] is None
    assert not any(isinstance(v, float) and math.isnan(v) for v in record["bookings"][0].values())

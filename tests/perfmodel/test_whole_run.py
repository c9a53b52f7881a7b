"""A whole training run on each booking (perfmodel.clusters.whole_run): its hours, GPU-hours and cost follow from the
booking's step and samples a step, and the fastest's premium over the cheapest spans every corner of their ends."""

from __future__ import annotations

import pytest

from harness.perfmodel.clusters.bookings import Booking
from harness.perfmodel.clusters.whole_run import of_booking, of_bookings, premium


def _booking(cluster: str, gpus: int, *steps: float, batch: int = 2, at_least: bool = False) -> Booking:
    return Booking(cluster, max(gpus // 8, 1), gpus, "stock", (), "", tuple(steps), at_least,
                   tuple(gpus * batch / (ms / 1e3) for ms in steps), tuple(1.0 for _ in steps),
                   batch=batch)  # fmt: skip


def test_a_run_is_its_steps_times_the_step_on_each_end_and_its_cost_the_price_times_its_gpu_hours():
    # 6.4M samples at 32 GPUs × 2 a GPU: 100,000 steps; at 6 ms and 10 ms a step, 600 s and 1,000 s
    run = of_booking(_booking("dgx-h100", 32, 6.0, 10.0), 6.4e6, price=3.9)
    assert run.steps == pytest.approx(100_000)
    assert run.hours == (pytest.approx(600 / 3600), pytest.approx(1000 / 3600))
    assert run.gpu_hours == (pytest.approx(32 * 600 / 3600), pytest.approx(32 * 1000 / 3600))
    assert run.cost == (pytest.approx(3.9 * 32 * 600 / 3600), pytest.approx(3.9 * 32 * 1000 / 3600))
    assert of_booking(_booking("dgx-h100", 32, 6.0), 6.4e6).cost == ()  # no price: no cost, not a cost of 0


def test_a_booking_that_fits_nothing_or_has_no_batch_has_no_run():
    unfit = Booking("l40s", 1, 8, "", (), "", (), False, (), ())
    assert of_booking(unfit, 1e6) is None
    assert of_booking(_booking("l40s", 8, 40.0, batch=0), 1e6) is None
    assert [r.booking.cluster for r in of_bookings([unfit, _booking("a", 8, 10.0)], 1e6, {"a": 2.0})] == ["a"]


def test_the_premium_pairs_one_clusters_ends_and_spans_every_corner_of_two_clusters():
    fast = of_booking(_booking("dgx-h100", 32, 6.0, 10.0), 6.4e6, price=3.9)
    slow_same = of_booking(_booking("dgx-h100", 8, 5.0, 8.0), 6.4e6, price=3.9)
    same = premium(fast, slow_same)  # one cluster's bookings move together: short with short, long with long
    saved = [s.hours[k] - f.hours[k] for f, s, k in ((fast, slow_same, 0), (fast, slow_same, 1))]
    assert same.hours_saved == (pytest.approx(min(saved)), pytest.approx(max(saved)))
    extra = [fast.cost[k] - slow_same.cost[k] for k in (0, 1)]
    assert same.extra == (pytest.approx(min(extra)), pytest.approx(max(extra))) and same.priced
    other = of_booking(_booking("dgx-a100", 8, 16.0), 6.4e6, price=2.1)
    across = premium(fast, other)  # two clusters: either end of one against the other's one figure
    assert across.hours_saved == (pytest.approx(other.hours[0] - fast.hours[1]),
                                  pytest.approx(other.hours[0] - fast.hours[0]))  # fmt: skip
    assert across.extra_share[0] == pytest.approx(fast.cost[0] / other.cost[0] - 1)
    unpriced = premium(of_booking(fast.booking, 6.4e6), of_booking(other.booking, 6.4e6))
    assert not unpriced.priced and unpriced.extra[0] == pytest.approx(fast.gpu_hours[0] - other.gpu_hours[0])


def test_the_bookings_rate_reads_three_significant_digits():
    """tokens/s read '≤1,690,080–3,126,651', seven digits where the rest of the table gives three."""
    from harness.results.values import rate_text

    assert [rate_text(v) for v in (1_690_080, 3_126_651, 845_000, 17.44, 2_437)] == [
        "1.69M",
        "3.13M",
        "845K",
        "17.4",
        "2.44K",
    ]


def test_a_rate_that_rounds_up_to_the_next_suffix_takes_it():
    """999,950 a second read '1e+03K': the suffix was chosen before the rounding to three figures."""
    from harness.results.values import rate_text

    assert [rate_text(v) for v in (999_950, 999.96, 2.5e12)] == ["1M", "1K", "2,500B"]


def test_the_fastest_within_the_cheapests_tie_pays_no_premium():
    """One cluster at 8, 16 and 32 GPUs, its step the same at each: the run's GPU-hours and cost alike at every count.
    The fastest (32) is then among the cheapest (tied): it read 'cheapest dgx-h100 × 8 GPUs, 3.33 h for 104: the
    fastest saves 2.5 h for 0 more (+0%)', a premium of nothing set against a first of a tie."""
    from harness.perfmodel.clusters.whole_run import premium_words

    def booked(gpus: int, step_ms: float, batch: int = 8) -> Booking:
        return Booking("dgx-h100", gpus // 8, gpus, "DDP at 25 MiB", (), "", (step_ms,), False,
                       (gpus * batch / (step_ms / 1e3),), (step_ms * 1e3 / 3600 / batch,), batch=batch)  # fmt: skip

    alike = [booked(8, 120.0), booked(16, 120.0), booked(32, 120.0)]
    said = premium_words(alike, of_bookings(alike, 6.4e6, {"dgx-h100": 3.9}), 6.4e6, {"dgx-h100": 3.9})
    assert said == "the run of 6.4M samples: fastest dgx-h100 × 32 GPUs, 0.833 h for 104, also the cheapest (tied)"
    dearer = [booked(8, 120.0), booked(32, 150.0)]  # 32 GPUs: 25 % more GPU-hours, past the tie's 4 %
    said = premium_words(dearer, of_bookings(dearer, 6.4e6), 6.4e6, None)
    assert said.endswith("fewest GPU-hours dgx-h100 × 8 GPUs, 3.33 h for 26.7 GPU-h: the fastest saves 2.29 h for "
                         "6.67 GPU-h more (+25%)")  # fmt: skip

"""Several clusters' answers compared per booking (perfmodel.clusters.bookings): the figures each booking is given, and
the fastest, the fewest GPU-hours and the cheapest at the user's prices decided only where every corner of the bounded
steps agrees, and the price ratio the fewest GPU-hours stay cheapest under."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from harness.analysis import agreement
from harness.perfmodel.clusters.bookings import (
    Booking,
    break_even,
    cheapest,
    fastest,
    fewest_gpu_hours,
    of_cluster,
    turns,
)
from harness.perfmodel.pick.choice import Candidate, Choice
from harness.perfmodel.pick.choice_table import gpu_hours_per_step_ms


def _rows(steps: dict[int, list[float]], caps=(1.0, 25.0)) -> pd.DataFrame:
    frames = [agreement.with_answer_marks(pd.DataFrame({"bucket_cap_mb": list(caps), "step_ms": ms}))
              .assign(world_size=world, nodes=world // 8) for world, ms in steps.items()]  # fmt: skip
    return pd.concat(frames, ignore_index=True)


def _booking(cluster: str, gpus: int, *steps: float, batch: int = 128) -> Booking:
    return Booking(cluster, gpus // 8, gpus, "stock", (), "", tuple(steps), False,
                   tuple(gpus * batch / (ms / 1e3) for ms in steps),
                   tuple(ms * gpu_hours_per_step_ms(batch=batch, tokens=None) for ms in steps))  # fmt: skip


def test_a_booking_is_the_choices_fastest_pick_and_its_figures_follow_from_its_step():
    rows = _rows({8: [105.0, 100.0], 16: [110.0, 104.0]})
    zero, stock = (Candidate(s, 1.0, True, ms, cap_mb=25.0) for s, ms in (("zero", 101.0), ("stock", 100.0)))
    tied = Choice(8, picked=[stock, zero], others=[])  # as choose names a tie: the least machinery first
    (w8, w16) = of_cluster("dgx-h100", 8, [rows], [{8: tied, 16: Choice(16, picked=[], others=[])}], batch=128)
    assert (w8.book, w8.tied, w8.step_ms, w8.nodes) == ("stock at 25 MiB", ("zero",), (100.0,), 1)
    # the answer's first is what it books: the roomier before a tight one, even a faster (a walkthrough's answer
    # read 'fsdp or stock', its bookings 'stock (or fsdp, …)')
    roomy = Choice(8, picked=[zero, dataclasses.replace(stock, tight=True)], others=[])
    (booked,) = of_cluster("dgx-h100", 8, [_rows({8: [105.0, 100.0]})], [{8: roomy}], batch=128)
    assert (booked.book, booked.tied, booked.step_ms) == ("zero at 25 MiB", ("stock",), (101.0,))
    assert w8.per_s == (pytest.approx(8 * 128 / 0.1),) and w8.gpu_hours == (pytest.approx(0.1 * 1e6 / 128 / 3600),)
    assert not w16.fits and w16.book == ""  # none modelled fits: nothing to rank
    # no choice (no memory counted): DDP at its answer's cap, its full-size floor where higher
    (w8,) = of_cluster("dgx-a100", 8, [_rows({8: [105.0, 100.0]}).assign(full_size_step_floor_ms=[130.0, 120.0])],
                       [{}], batch=4, tokens=4096.0)  # fmt: skip
    assert (w8.book, w8.step_ms, w8.at_least) == ("DDP at 25 MiB", (120.0,), True)
    assert w8.per_s == (pytest.approx(8 * 4096 / 0.12),)  # tokens a second, where a GPU's tokens a step are known
    # at the cap its answer books, by the floors (ranked_row): 1 MiB's 105 ms, not the small profile's 25 MiB at its
    # 120 ms floor (dgx-h100 read 'DDP at 25 MiB ≥6.92' above an answer of 100 MiB, at least 6.45 ms)
    (w8,) = of_cluster("dgx-a100", 8, [_rows({8: [105.0, 100.0]}).assign(full_size_step_floor_ms=[90.0, 120.0])],
                       [{}], batch=4)  # fmt: skip
    assert (w8.book, w8.step_ms, w8.at_least) == ("DDP at 1 MiB", (105.0,), False)


def test_a_ranking_is_decided_where_every_corner_agrees_and_a_tie_stays_a_tie():
    a100 = [_booking("dgx-a100", n, 420.0) for n in (8, 16, 32)]
    h100 = [_booking("dgx-h100", n, 122.0, 256.0) for n in (8, 16, 32)]  # bounded: both ends
    quick = fastest([*a100, *h100])
    assert quick.decided and [(b.cluster, b.gpus) for b in quick.best] == [("dgx-h100", 32)]  # its bookings move
    cheap = fewest_gpu_hours([*a100, *h100])  # together: w16 is never ahead of w32 at the same H100 step
    assert cheap.decided and [(b.cluster, b.gpus) for b in cheap.best] == [("dgx-h100", n) for n in (8, 16, 32)]


def test_where_the_best_changes_between_the_ends_it_is_open_on_the_bounded_clusters_step():
    """A100 × 4 nodes against H100 × 2 nodes: the H100 step bounded by 122-256 ms from a 420 ms A100 step."""
    a100, h100 = _booking("dgx-a100", 32, 420.0), _booking("dgx-h100", 16, 122.0, 256.0)
    quick = fastest([a100, h100])
    assert not quick.decided and quick.open_on == ["dgx-h100"]
    assert quick.at_ends == ([h100], [a100])  # compute-bound: H100's 16 GPUs ahead; memory-bound: A100's 32
    assert fewest_gpu_hours([a100, h100]).decided  # per sample the H100 is cheaper at either end
    # two bounded clusters: each at either end, independently
    h200 = _booking("dgx-h200", 16, 110.0, 300.0)
    assert fastest([h100, h200]).open_on == ["dgx-h100", "dgx-h200"]


def test_a_tie_at_one_end_of_a_steps_range_is_said_to_be_that_ends_in_the_answers_order():
    """A walkthrough's answer (its compute-bound end) tied 'fsdp or stock', its bookings '(or fsdp, zero, tied)':
    zero tied at the memory-bound end only, and in another order. The booking names those tied at both ends in the
    answer's order, then those of one end with it."""
    from harness.commands.console.predict import bookings as console_bookings

    stock, fsdp, zero = (Candidate(s, 1.0, True, ms, cap_mb=25.0) for s, ms in
                         (("stock", 100.0), ("fsdp", 101.0), ("zero", 103.0)))  # fmt: skip
    short, long = Choice(8, picked=[stock, fsdp], others=[zero]), Choice(8, picked=[stock, fsdp, zero], others=[])
    rows = _rows({8: [105.0, 100.0]})
    (w8,) = of_cluster("dgx-h100", 8, [rows, rows], [{8: short}, {8: long}], batch=128)
    assert w8.tied == ("fsdp", "zero") and w8.tied_at_one_end == ((), ("zero",))
    ends = ("compute-bound", "memory-bound")
    assert console_bookings._cells(w8, None, ends)[3] == (
        "stock at 25 MiB (or fsdp, tied; zero too at the memory-bound end)"
    )
    (one,) = of_cluster("dgx-a100", 8, [rows], [{8: Choice(8, picked=[stock, zero, fsdp], others=[])}], batch=128)
    assert console_bookings._cells(one, None)[3] == "stock at 25 MiB (or zero, fsdp, tied)"  # the answer's order


def test_a_booking_says_its_picks_peak_a_rank_of_its_gpus_memory_as_the_answer_table_does():
    """A user choosing between 80 GB GPUs and 24 GB L4s read the side by side's step and cost, then had to find each
    cluster's answer table 40-100 lines further down for what a GPU holds: stock's 20.1 GiB of an L4's 22."""
    from harness.commands.console.predict import bookings as console_bookings

    stock, fsdp = (Candidate(s, mb, True, ms, cap_mb=25.0) for s, mb, ms in
                   (("stock", 20.1 * 1024, 100.0), ("fsdp", 14.7 * 1024, 101.0)))  # fmt: skip
    rows = _rows({8: [105.0, 100.0]})
    (w8,) = of_cluster("l4", 8, [rows], [{8: Choice(8, picked=[stock, fsdp], others=[])}], batch=8,
                       capacity_gib=22.03)  # fmt: skip
    assert w8.peak_gib == pytest.approx((20.1,))  # the booked pick's, not the one tied with it
    assert console_bookings._cells(w8, None, peaks=True)[5] == "20.1 of 22"
    (no_memory,) = of_cluster("dgx-h100", 8, [rows], [{}], batch=8)  # no choice made: DDP at its cap, no peak
    assert no_memory.peak_gib == () and len(console_bookings._cells(no_memory, None)) == 7
    assert console_bookings._cells(dataclasses.replace(w8, step_ms=()), None, peaks=True)[5] == ""  # none fits


def test_a_booking_says_compute_or_communication_bound_from_its_picks_own_exposed_figures():
    """l4-cloud × 16 read '≥1279' ms beside 447 at 8 GPUs with nothing in its row saying 835 ms of it is all-reduce
    left exposed: the booked pick's own exposed communication over its step, comm-bound over COMM_BOUND."""
    from harness.commands.console.predict import bookings as console_bookings
    from harness.perfmodel.clusters.bookings import COMM_BOUND, exposed_ms
    from harness.perfmodel.pick.compressed import compressed_note

    rows = _rows({16: [1321.0, 1279.0]}).assign(exposed_comm_ms=[9.0, 13.3], full_size_exposed_ms=[877.0, 835.0],
                                                zero_broadcast_ms=4.0, zero_full_size_broadcast_ms=613.0,
                                                fsdp_exposed_ms=2.0, fsdp_full_size_exposed_ms=1133.0)  # fmt: skip
    floored = Candidate("stock", 1.0, True, 1279.0, profiled_ms=457.3, model="DDP", cap_mb=25.0, step_cap_mb=25.0)
    (w16,) = of_cluster("l4-cloud", 8, [rows], [{16: Choice(16, picked=[floored], others=[])}], batch=8)
    assert w16.exposed_ms == 835.0 and w16.comm_share == pytest.approx(835 / 1279) and w16.comm_share > COMM_BOUND
    assert console_bookings.bound_cell(w16) == "comm 65% (835 ms)"
    # each model's own columns at the cap its step is at: ZeRO-1's broadcasts after DDP's exposed all-reduces
    zero = dataclasses.replace(floored, strategy="zero", model="ZeRO-1")
    assert exposed_ms(rows[rows.world_size == 16], zero) == 835.0 + 613.0
    profiled = dataclasses.replace(floored, profiled_ms=None, step_ms=1.0e3, step_cap_mb=1.0)
    assert exposed_ms(rows, profiled) == 9.0  # no floor ranks it: the predicted step's, at 1 MiB
    fsdp = Candidate("fsdp", 1.0, True, 1546.0, profiled_ms=446.9, model="FSDP2")
    assert exposed_ms(rows, fsdp) == 1133.0
    halved = pd.Series(
        {"compressed_share": 0.5, "full_size_exposed_ms": 835.0, "compressed_full_size_exposed_ms": 420.0}
    )
    hooked = dataclasses.replace(
        floored, note=compressed_note(halved, full_size=True)
    )  # fp16's hook, as choose notes it
    assert exposed_ms(rows.assign(compressed_full_size_exposed_ms=420.0), hooked) == 420.0  # the hook's own figure
    assert pd.isna(exposed_ms(rows.drop(columns="full_size_exposed_ms"), floored))  # not in the rows: not said
    # no choice (no model state per rank, as a CPU run at 1 and 2 ranks has): DDP at its answer's cap, its own figure,
    # the floor's where the floor ranks it (the side by side had no bound column at all)
    (ddp,) = of_cluster("l4-cloud", 8, [rows], [{}], batch=8)
    assert (ddp.book, ddp.step_ms, ddp.exposed_ms) == ("DDP at 25 MiB", (1279.0,), 13.3)
    (floor,) = of_cluster("l4-cloud", 8, [rows.assign(full_size_step_floor_ms=[1500.0, 1400.0])], [{}], batch=8)
    assert (floor.step_ms, floor.exposed_ms, console_bookings.bound_cell(floor)) == (
        (1400.0,),
        835.0,
        "comm 60% (835 ms)",
    )
    small = dataclasses.replace(w16, exposed_ms=13.3, step_ms=(457.3,))
    assert console_bookings.bound_cell(small) == "compute 3% (13.3 ms)"
    assert console_bookings.bound_cell(dataclasses.replace(w16, exposed_ms=float("nan"))) == ""


def test_nothing_fits_nothing_is_ranked():
    empty = Booking("dgx-h100", 1, 8, "", (), "", (), False, (), ())
    assert fastest([empty]).best == [] and fastest([empty]).decided


def test_a_choice_open_on_an_own_cost_books_a_range_and_the_ranking_waits_on_that_cost():
    """FSDP2 ahead without its own cost (a CPU's), stock with it: the booking's step spans both picks, and a ranking
    that flips inside it is open until FSDP's own cost is measured on a GPU, not until a step is."""
    from harness.commands.console.predict.bookings import verdict_words

    stock = Candidate("stock", 1.0, True, 100.0, cap_mb=25.0, model="DDP")
    fsdp = Candidate("fsdp", 1.0, True, 90.0, left_out_ms=30.0, model="FSDP2")
    open_choice = Choice(8, picked=[fsdp, stock], others=[], open_on=("FSDP2",), at_ends=([fsdp], [stock]))
    (w8,) = of_cluster("dgx-h100", 8, [_rows({8: [105.0, 100.0]})], [{8: open_choice}], batch=128)
    assert (w8.book, w8.other_end, w8.step_ms, w8.own_cost_of) == (
        "fsdp or stock at 25 MiB",
        "",
        (90.0, 100.0),
        ("FSDP2",),
    )  # open, as the answer leaves it
    assert w8.bounded and not w8.stepped_elsewhere
    decided = Choice(8, picked=[stock], others=[fsdp])  # stock ahead at both ends: one step, no range
    (same,) = of_cluster("dgx-h100", 8, [_rows({8: [105.0, 100.0]})], [{8: decided}], batch=128)
    assert same.step_ms == (100.0,) and not same.bounded and same.own_cost_of == ()
    a100 = _booking("dgx-a100", 8, 95.0)  # between the H100's ends: the fastest flips inside FSDP's range
    words = verdict_words([a100, w8], tokens=False, ends=None)
    assert "open until FSDP's own cost is measured on a GPU" in words and "--local-step-gpu" not in words
    # each end in the user's terms (it read 'at the short end', 'at the long end'), and the command that measures it
    assert "dgx-h100 × 8 GPUs without FSDP's own cost, dgx-a100 × 8 GPUs with it at a CPU's" in words
    assert words.endswith("open until FSDP's own cost is measured on a GPU (bench --gpus 1 --impls local,fsdp there)")
    both = verdict_words([a100, w8], tokens=False, ends=("compute-bound", "memory-bound"))  # a step elsewhere too
    assert (
        "dgx-h100 × 8 GPUs at the compute-bound end without FSDP's own cost, dgx-a100 × 8 GPUs at the "
        "memory-bound end with it at a CPU's"
    ) in both


def test_at_the_users_prices_the_cheapest_is_ranked_by_cost_and_open_where_the_ratio_falls_inside_the_range():
    """The H100's GPU-hours are 122-256 ms' against the A100's 420 ms': 1.64-3.44 times fewer. An H100 hour at 1.5×
    an A100's is cheaper at both ends, at 4× dearer at both, at 2.5× cheaper only where its step is compute-bound."""
    a100 = [_booking("dgx-a100", n, 420.0) for n in (8, 16)]
    h100 = [_booking("dgx-h100", n, 122.0, 256.0) for n in (8, 16)]
    low, high = break_even([*a100, *h100], "dgx-h100", "dgx-a100")
    assert (low, high) == (pytest.approx(420 / 256), pytest.approx(420 / 122))
    for ratio, best in ((1.5, h100), (4.0, a100)):
        ranked = cheapest([*a100, *h100], {"dgx-a100": 2.0, "dgx-h100": 2.0 * ratio})
        assert ranked.decided and ranked.best == best
    ranked = cheapest([*a100, *h100], {"dgx-a100": 2.0, "dgx-h100": 5.0})
    assert ranked.open_on == ["dgx-h100"] and ranked.at_ends == (h100, a100)
    # both steps a cluster's own: one ratio
    assert break_even([_booking("dgx-a100", 8, 420.0), _booking("dgx-h100", 8, 200.0)], "dgx-h100", "dgx-a100") == (
        pytest.approx(2.1),
        pytest.approx(2.1),
    )


def test_the_fewest_gpu_hours_say_the_price_ratio_they_stay_cheapest_under_where_the_gpus_differ():
    from harness.commands.console.predict.bookings import verdict_words

    booked = [_booking("dgx-a100", 8, 420.0), _booking("dgx-h100", 8, 122.0, 256.0)]
    gpus = {"dgx-a100": "DGX A100: 8× A100 SXM4 80GB, …", "dgx-h100": "DGX H100: 8× H100 SXM5, …"}
    words = verdict_words(booked, tokens=False, ends=("compute-bound", "memory-bound"), gpus=gpus)
    assert words.endswith(  # 420/256 = 1.64 rounded down, 420/122 = 3.44 up: under 1.6× cheaper at either end
        "fewest GPU-hours per sample: dgx-h100 × 8 GPUs at both ends (cheaper while an H100 hour costs under "
        "1.6–3.5× an A100's: --gpu-hour-price dgx-a100=P,dgx-h100=Q ranks by cost)"
    )
    same = verdict_words(booked, tokens=False, ends=None, gpus={**gpus, "dgx-a100": gpus["dgx-h100"]})
    assert "cheaper while" not in same  # one GPU: an hour of each may still be priced apart, but no GPU to name
    priced = verdict_words(booked, tokens=True, ends=None, prices={"dgx-a100": 1.0, "dgx-h100": 4.0}, gpus=gpus)
    assert priced.endswith("; cheapest per token (at the prices given): dgx-a100 × 8 GPUs")
    assert "GPU-hours" not in priced


def test_where_one_clusters_step_is_bounded_the_step_its_rankings_turn_at_is_said_decided_or_not():
    """A walkthrough: an A100's 310 ms step, the H200's bounded 97.75-131.7 ms, each H200 booking's step its GPU's
    plus what is exposed (2 ms at w8, 3 at w16). Fastest: its 16 GPUs until their step is the A100 16's 310 ms (a GPU
    step of 307); cheapest at 1.9 and 3.6 a GPU-hour: while 3.6 × (x + 2) is under 1.9 × 310 (x under 161.6). The
    verdict said the rankings decided 'at both ends' but never what step would turn them."""
    from harness.commands.console.predict.bookings import verdict_words

    ends = (97.75, 131.7)
    a100 = [_booking("dgx-a100", n, 310.0) for n in (8, 16)]
    h200 = [dataclasses.replace(_booking("dgx-h200", n, *(x + extra for x in ends)), local_ms=ends)
            for n, extra in ((8, 2.0), (16, 3.0))]  # fmt: skip
    prices = {"dgx-a100": 1.9, "dgx-h200": 3.6}
    quick, cheap = turns([*a100, *h200], prices)
    assert (quick.cluster, quick.bounds) == ("dgx-h200", ends) and quick.step_ms == pytest.approx(307.0)
    assert cheap.step_ms == pytest.approx(1.9 * 310 / 3.6 - 2)  # w8's: the most of its bookings' turns
    assert turns([*a100, *h200])[1].step_ms == pytest.approx(310 - 2)  # fewest GPU-hours: an hour alike
    words = verdict_words([*a100, *h200], tokens=False, ends=("compute-bound", "memory-bound"), prices=prices)
    assert words.startswith("fastest: dgx-h200 × 16 GPUs at both ends; ")
    assert words.endswith("; dgx-h200 is fastest while its GPU's step is under about 307 ms, cheapest under about "
                          "162 ms (bounded 97.75–131.7 ms)")  # fmt: skip
    # a step far below its GPU's peak may scale as neither end: 'at both ends' says what it rests on, and the step
    # that settles it is said
    far = verdict_words([*a100, *h200], tokens=False, ends=("compute-bound", "memory-bound"), prices=prices,
                        far_below_peak=True)  # fmt: skip
    assert far.startswith("fastest: dgx-h200 × 16 GPUs at both ends, if its step scales as memory bandwidth or peak "
                          "(far below the peak, it may not); cheapest")  # fmt: skip
    assert far.endswith("(bounded 97.75–131.7 ms): one step measured on dgx-h200's GPU settles it")
    assert far.count("far below the peak") == 1  # where 'at both ends' is first said, not at each
    # the question booked, 2 A100 nodes or 1 H200 node (--nodes dgx-a100=2,dgx-h200=1): its verdicts and turns are
    # that pair's, the H200's 8 GPUs fastest while 8 / (x + 2) beats 16 / 310 (x under 153), not its 16's 307
    asked = [a100[1], h200[0]]
    assert turns(asked, prices)[0].step_ms == pytest.approx(310 / 2 - 2)
    pair = verdict_words(asked, tokens=False, ends=("compute-bound", "memory-bound"), prices=prices)
    assert pair == ("fastest: dgx-h200 × 8 GPUs at both ends; cheapest per sample (at the prices given): dgx-h200 × 8 "
                    "GPUs at both ends; dgx-h200 is fastest while its GPU's step is under about 153 ms, cheapest "
                    "under about 162 ms (bounded 97.75–131.7 ms)")  # fmt: skip
    # the fastest open (the A100's 32 GPUs ahead at the long end), the cheapest decided: said there
    wide = (97.75, 200.0)
    a100 += [_booking("dgx-a100", 32, 310.0)]
    h200 = [dataclasses.replace(_booking("dgx-h200", n, *(x + 2.0 for x in wide)), local_ms=wide) for n in (8, 16)]
    opened = verdict_words([*a100, *h200], tokens=False, ends=("compute-bound", "memory-bound"),
                           prices={"dgx-a100": 1.9, "dgx-h200": 1.0}, far_below_peak=True)  # fmt: skip
    assert opened.startswith("fastest: dgx-h200 × 16 GPUs at the compute-bound end, dgx-a100 × 32 GPUs at the "
                             "memory-bound end; cheapest per sample (at the prices given): dgx-h200 × 8/16 GPUs at "
                             "both ends, if its step scales as memory bandwidth or peak (far below")  # fmt: skip
    # no one step decides it: two clusters bounded, or an own cost's range besides
    h100 = [dataclasses.replace(b, cluster="dgx-h100") for b in h200]
    assert turns([*h100, *h200]) == (None, None)
    own = [dataclasses.replace(b, own_cost_of=("FSDP2",)) for b in h200]
    assert turns([*a100, *own]) == (None, None) and turns(a100) == (None, None)


def test_a_turn_far_past_the_bounds_is_said_as_what_is_known_not_the_line_carried_on():
    """predict said 'under about 101 ms (bounded 29.1–42.48 ms)': the line through the two ends carried far past the
    long one. A booking whose communication is exposed (the H200's 8 GPUs: 20 ms exposed at the short end, 5 at the
    long) steps less than one for one with its GPU's step, and past the long end hides still more: the line (turning
    at 442 ms) under-reads it. What holds is that the step grows at most one for one: fastest until 131.7 + (310 -
    136.7) = 305 ms at least. Before the short end, the same bound gives an 'at most'."""
    from harness.commands.console.predict.bookings import verdict_words

    ends = (97.75, 131.7)
    a100 = [_booking("dgx-a100", 8, 310.0)]
    h200 = [dataclasses.replace(_booking("dgx-h200", 8, 117.75, 136.7), local_ms=ends)]
    quick, _ = turns([*a100, *h200])
    assert (quick.step_ms, quick.sure) == (pytest.approx(305.0), "at least")
    words = verdict_words([*a100, *h200], tokens=False, ends=("compute-bound", "memory-bound"))
    assert words.endswith("; dgx-h200 is fastest while its GPU's step is under 305 ms at least, fewest GPU-hours "
                          "under 305 ms at least (bounded 97.75–131.7 ms)")  # fmt: skip
    slow = [_booking("dgx-a100", 8, 90.0)]  # faster than the H200's short end: it would take under 97.75 - 27.75
    (before, _) = turns([*slow, *h200])
    assert (before.step_ms, before.sure) == (pytest.approx(70.0), "at most")


def test_caps_that_differ_by_cluster_are_said_beside_each_ones_all_reduces_against_its_backward():
    """A walkthrough's bookings read 25 MiB on dgx-h100 beside 100 MiB on l40s-pcie with no reason, which each
    cluster's 'Why' said ~80 lines apart: l40s's all-reduces 2.7-3× its backward, H100's about as long as its own."""
    from harness.commands.console.predict.bookings import caps_contrast

    def booked(cluster, gpus, cap, comm, backward):
        return dataclasses.replace(_booking(cluster, gpus, 60.0), book=f"stock at {cap} MiB", allreduce_ms=comm,
                                   backward_ms=backward)  # fmt: skip

    l40s = [booked("l40s-pcie", 8, 25, 44.0, 16.4), booked("l40s-pcie", 32, 100, 49.36, 16.4)]
    h100 = [booked("dgx-h100", 8, 25, 2.678, 4.22), booked("dgx-h100", 32, 25, 5.241, 4.22)]
    said = caps_contrast(l40s + h100)
    assert said.startswith("the caps differ by cluster: on l40s-pcie DDP's all-reduces at the cap booked (25 or 100 "
                           "MiB) take 44–49.4 ms a step, 2.7–3× backward's 16.4 ms; on dgx-h100 (25 MiB) 2.68–5.24 "
                           "ms a step, 0.63–1.2× its 4.22 ms: where they outlast backward")  # fmt: skip
    both_long = [dataclasses.replace(b, backward_ms=1.0) for b in h100]  # both outlast: the figures, no reason
    assert "where they" not in caps_contrast(l40s + both_long) and "dgx-h100 (25 MiB)" in caps_contrast(
        l40s + both_long
    )
    assert caps_contrast(l40s[:1] + h100) == ""  # every cluster at 25 MiB: nothing to contrast
    assert caps_contrast(l40s + [dataclasses.replace(b, backward_ms=float("nan")) for b in h100]) == ""


def test_a_booking_carries_its_all_reduces_at_the_cap_booked_the_full_sizes_where_a_floor_ranks_it():
    rows = _rows({8: [105.0, 100.0]}).assign(comm_ms=[3.0, 2.0], full_size_comm_ms=[30.0, 20.0],
                                             full_size_step_floor_ms=[130.0, 120.0])  # fmt: skip
    (w8,) = of_cluster("dgx-h100", 8, [rows], [{}], batch=128, backward_ms=16.4)
    assert (w8.book, w8.allreduce_ms, w8.backward_ms) == ("DDP at 25 MiB", 20.0, 16.4)  # its floor ranks it
    (small,) = of_cluster("dgx-h100", 8, [_rows({8: [105.0, 100.0]}).assign(comm_ms=[3.0, 2.0])], [{}], batch=128)
    assert small.allreduce_ms == 2.0 and small.backward_ms != small.backward_ms  # no backward given: NaN

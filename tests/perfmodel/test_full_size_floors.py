"""Each strategy's floor with the full size's parameters on a smaller profile's compute: DDP's all-reduces, ZeRO-1's
optimizer shard and broadcasts, FSDP2's gathers and reduce-scatters one at a time; and the choice ranks a strategy
by its floor where that is above its prediction."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
from test_fsdp_model import PerMiB, two_blocks

from harness.commands.console import predictions
from harness.perfmodel import sharded
from harness.perfmodel.network import Link
from harness.perfmodel.pick import choice
from harness.perfmodel.pick.words import choice_words
from harness.perfmodel.schedule import Grad, Parameters, Profile, floor_with, predict_caps
from harness.perfmodel.sharded import with_full_size_floors
from harness.perfmodel.sharding import fsdp, zero

MB = 1024 * 1024
MS = 1e-3
ONE_MS_A_MB = Link(alpha_s=0.0, busbw_bytes_per_s=MB / MS)


def parameters(sizes_mb: list[float], blocks: list[int | None] | None = None, frozen: set[int] = frozenset()):
    """Parameters in registration order, `sizes_mb` each, in `blocks` (default: the root's)."""
    blocks = blocks or [None] * len(sizes_mb)
    every = [
        Grad(k, int(mb * MB), "float32", float("nan"), name=f"p{k}", block=b)
        for k, (mb, b) in enumerate(zip(sizes_mb, blocks, strict=True))
    ]
    return Parameters(tuple(g for g in every if g.index not in frozen), tuple(g for g in every if g.index in frozen))


def test_ddps_floor_is_its_all_reduces_in_reverse_registration_order_and_the_last_after_backward():
    """Three gradients (4, 1, 1 MiB, registration order) at a 2 MiB cap: laid out in reverse order, [1, 1] then
    [4] MiB, at 1 ms a MiB: 6 ms of all-reduces, none before backward starts; the last (4 ms) not before the
    profile's last gradient is made (9 of 10 ms): 13 ms after backward began, so 3 ms exposed at least."""
    profile = Profile(3 * MS, 10 * MS, 4 * MS, (Grad(0, MB, "float32", 2 * MS), Grad(1, MB, "float32", 9 * MS)))
    floor = floor_with(profile, parameters([4, 1, 1]), cap_mb=2.0, link=ONE_MS_A_MB, world_size=2)
    assert (floor.buckets, floor.comm_s, floor.last_s) == (2, pytest.approx(6 * MS), pytest.approx(4 * MS))
    assert (floor.step_s, floor.exposed_s) == (pytest.approx(20 * MS), pytest.approx(3 * MS))
    assert floor.compute_s == pytest.approx(17 * MS)  # forward + backward + optimizer: nothing exposed
    many = floor_with(profile, parameters([1] * 12), cap_mb=1.0, link=ONE_MS_A_MB, world_size=2)
    assert many.step_s == pytest.approx(3 * MS + 12 * MS + 4 * MS)  # twelve 1 ms all-reduces outlast backward's 10


def test_fsdps_floor_sends_every_gather_and_reduce_scatter_one_at_a_time():
    """The root (3 MiB) and two 4 MiB blocks at 1 ms a MiB: 11 ms of forward gathers, 8 ms of backward ones, 11 ms
    of reduce-scatters, 30 ms in all, above the root's gather + compute (22 ms) + its reduce-scatter (28 ms); plus
    half the 4 ms optimizer at two ranks. Kept from forward: no backward gathers, so the root's path, 28 ms, rules."""
    profile, link = two_blocks(), PerMiB(1.0)
    params = parameters([2, 4, 4, 1], [None, 0, 1, None])
    floor = fsdp.floor_with(profile, params, gather=link, scatter=link, world_size=2)
    assert (floor.step_s / MS, floor.gather_s / MS, floor.scatter_s / MS, floor.collectives) == pytest.approx(
        (32, 19, 11, 8)
    )
    # what nothing hid, as DDP's and ZeRO-1's floors say theirs: the 30 ms of collectives over forward and backward's
    # 22 (a 1.3B Llama's why gave FSDP2's gathers and reduce-scatters, never what of them was exposed)
    assert floor.exposed_s / MS == pytest.approx(8)
    kept = fsdp.floor_with(profile, params, gather=link, scatter=link, world_size=2, reshard_after_forward=False)
    assert kept.step_s / MS == pytest.approx(30)
    frozen = fsdp.floor_with(profile, parameters([2, 4, 4, 1], [None, 0, 1, None], frozen={1}), gather=link,
                             scatter=link, world_size=2)  # fmt: skip
    assert (frozen.scatter_s / MS, frozen.collectives) == pytest.approx((7, 6))  # block 0 gathered once, never sent


@pytest.mark.parametrize("ms_per_mib", [0.05, 0.5, 2.0, 10.0])
@pytest.mark.parametrize("reshard", [True, False])
def test_with_the_profiles_own_parameters_fsdps_floor_is_never_above_its_prediction(ms_per_mib, reshard):
    profile = two_blocks()
    own = Parameters(tuple(sorted(profile.grads, key=lambda g: g.index)))
    for world in (2, 8, 64):
        link = PerMiB(ms_per_mib)
        step = fsdp.predict_fsdp(profile, gather=link, scatter=link, world_size=world, reshard_after_forward=reshard)
        floor = fsdp.floor_with(profile, own, gather=link, scatter=link, world_size=world,
                                reshard_after_forward=reshard)  # fmt: skip
        assert floor.step_s <= step.step_s + 1e-12


def test_zeros_floor_is_ddps_with_the_full_sizes_largest_shard_and_broadcasts():
    """Four times the parameters: DDP's floor, less the whole optimizer, plus the largest shard's part of it (the
    16 MiB block of 44 MiB at two ranks: 28 MiB owned by one), plus one broadcast a parameter at 1 ms a MiB."""
    profile, link = two_blocks(), PerMiB(1.0)
    link.allreduce_s = ONE_MS_A_MB.allreduce_s
    link.broadcast_s = ONE_MS_A_MB.broadcast_s
    params = parameters([8, 16, 16, 4], [None, 0, 1, None])
    frame = with_full_size_floors(predict_caps(profile, caps_mb=[25.0], link=ONE_MS_A_MB, world_size=2), profile,
                                  params, link=link, world_size=2, fsdp_profile=profile, zero_own_s=1 * MS)  # fmt: skip
    row = frame.iloc[0]
    share = 24 / 44  # largest first: 16 → rank 0, 16 → rank 1, 8 → rank 0, 4 → rank 1: 24 and 20 MiB
    assert row["zero_full_size_optimizer_ms"] == pytest.approx(4 * share)
    assert row["zero_full_size_broadcast_ms"] == pytest.approx(44)
    assert row["zero_bucket_view_full_size_broadcast_ms"] == pytest.approx(44)  # two flat buffers: 24 + 20 MiB
    # what ZeRO-1's and FSDP2's answers say of the model to train (a tester read the benched model's lm_head share
    # and units beside the full size's floors): its shard, broadcasts, largest parameter, units and gathers
    assert (row["zero_full_size_largest_share"], row["zero_full_size_broadcasts"]) == (pytest.approx(share), 4)
    assert row["zero_full_size_largest_parameter_share"] == pytest.approx(16 / 44)
    assert row["zero_full_size_largest_parameter"] == "p1"  # of two alike, the first registered (--out was empty)
    assert (row["fsdp_full_size_units"], row["fsdp_full_size_gathers"]) == (3, 5)  # root, 2 blocks; blocks again
    assert row["fsdp_full_size_gathers"] + 3 == row["fsdp_full_size_collectives"]  # and a reduce-scatter a unit
    expected = row["full_size_step_floor_ms"] - 4 + 4 * share + 44 + 1
    assert row["full_size_step_floor_ms"] > row["step_ms"]  # DDP ranked by its floor: ZeRO's change on that
    assert row["zero_full_size_step_floor_ms"] == pytest.approx(expected)
    # where DDP's prediction is above its floor, ZeRO-1's change goes on the prediction, as the choice ranks DDP
    above = with_full_size_floors(frame[["bucket_cap_mb", "step_ms"]].assign(step_ms=1e3), profile, params,
                                  link=link, world_size=2, fsdp_profile=profile, zero_own_s=1 * MS)  # fmt: skip
    assert above["zero_full_size_step_floor_ms"].iloc[0] == pytest.approx(1e3 - 4 + 4 * share + 44 + 1)
    assert row["fsdp_full_size_step_floor_ms"] == pytest.approx(
        fsdp.floor_with(profile, params, gather=link, scatter=link, world_size=2).step_s / MS
    )
    assert zero.partition(params.trained, 2)[0][0].nbytes == 16 * MB


def _state(rows):
    return pd.DataFrame([{"impl": impl, "impl_options": "{}", "world_size": 64, "total_mb": gib * 1024.0,
                          "activation_mb": 1024.0, "measured": False} for impl, gib in rows])  # fmt: skip


def test_the_choice_ranks_a_strategy_by_its_full_size_floor_where_that_is_above_its_prediction():
    """A walkthrough's 7B model: FSDP2 predicted at 234 ms from the small size's parameters, but its gathers of the
    whole model's take at least 1720 ms; DDP's floor (433.8 ms) is above its own 350 ms too, and ZeRO-1's is
    lower than FSDP2's: ZeRO-1 is picked, each said with its floor and its prediction."""
    frame = pd.DataFrame({"bucket_cap_mb": [25.0], "world_size": [64], "step_ms": [350.0], "zero_step_ms": [300.0],
                          "zero_broadcast_ms": [2.0], "zero_bucket_view_broadcast_ms": [1.0],
                          "fsdp_step_ms": [234.0], "fsdp_kept_step_ms": [230.0],
                          "full_size_step_floor_ms": [433.8], "zero_full_size_step_floor_ms": [500.0],
                          "zero_full_size_broadcast_ms": [90.0], "zero_bucket_view_full_size_broadcast_ms": [80.0],
                          "fsdp_full_size_step_floor_ms": [1720.0],
                          "fsdp_kept_full_size_step_floor_ms": [1200.0]})  # fmt: skip
    state = predictions.labelled(_state([("stock", 90.0), ("zero", 40.0), ("fsdp", 5.0)]))
    w64 = choice.choose(state, [frame], 80.0)[0]
    assert [(c.strategy, c.step_ms, c.profiled_ms) for c in w64.picked] == [("zero", 500.0, 300.0)]
    said = choice_words(state, [frame], 80.0)
    assert "the fastest predicted step (or its floor with the full size's parameters, where higher)" in said
    assert "w64 zero at 25 MiB, at least 500 ms (full-size floor; 300 ms as profiled)" in said
    assert "fsdp at least 1720 ms (full-size floor; 234 ms as profiled), 244.0% slower" in said
    assert "stock does not fit" in said


def test_a_floor_below_the_prediction_leaves_ddps_step_as_predicted_but_zeros_floor_stands_in_for_its_own():
    """DDP's floor is a bound under its prediction: below it, the prediction ranks. ZeRO-1's is DDP's step as ranked
    with ZeRO's change for the whole model, where its prediction shards the smaller model's parameters (a small
    llama's lm_head was 46 % of it, one shard), so the floor ranks it, lower or not."""
    frame = pd.DataFrame({"bucket_cap_mb": [25.0], "world_size": [64], "step_ms": [100.0], "zero_step_ms": [120.0],
                          "zero_broadcast_ms": [2.0], "zero_bucket_view_broadcast_ms": [1.0],
                          "full_size_step_floor_ms": [90.0], "zero_full_size_step_floor_ms": [103.0],
                          "zero_full_size_broadcast_ms": [1.0],
                          "zero_bucket_view_full_size_broadcast_ms": [1.0]})  # fmt: skip
    state = predictions.labelled(_state([("stock", 40.0), ("zero", 30.0)]))
    w64 = choice.choose(state, [frame], 80.0)[0]
    assert [(c.strategy, c.step_ms, c.profiled_ms) for c in w64.picked] == [
        ("stock", 100.0, None),
        ("zero", 103.0, 120.0),
    ]
    said = choice_words(state, [frame], 80.0)
    assert "zero at 25 MiB, at least 103 ms (full-size floor; 120 ms as profiled, the smaller model's shards)" in said
    assert "stock at 25 MiB, 100 ms" in said


def test_the_optimizers_break_even_takes_each_step_as_the_choice_ranks_it():
    """On the small size's parameters ZeRO-1 leads DDP by 50 ms; its full-size floor, 460 ms, is above DDP's 400:
    no lead is left to break even on (without floors: (1 − 50 / 80) × 96 / 350 = 10 %). FSDP2's floor (280 ms, its
    optimizer shard 1 ms) still leads by 120 ms, more than all 95 ms it could save."""
    frame = pd.DataFrame({"bucket_cap_mb": [25.0], "world_size": [64], "step_ms": [350.0], "zero_step_ms": [300.0],
                          "zero_optimizer_ms": [16.0], "fsdp_step_ms": [260.0], "fsdp_optimizer_ms": [1.0],
                          "full_size_step_floor_ms": [400.0], "zero_full_size_step_floor_ms": [460.0],
                          "zero_full_size_optimizer_ms": [16.0], "fsdp_full_size_step_floor_ms": [280.0]})  # fmt: skip
    said = sharded.optimizer_break_even(frame, optimizer_ms=96.0, step_ms=350.0)
    assert said == "at w64, FSDP2's holds with no optimizer time at all"
    unfloored = frame.drop(columns=["full_size_step_floor_ms", "zero_full_size_step_floor_ms",
                                    "fsdp_full_size_step_floor_ms"])  # fmt: skip
    assert "ZeRO-1's lead needs the optimizer at 10% of the step or more" in sharded.optimizer_break_even(
        unfloored, optimizer_ms=96.0, step_ms=350.0
    )


def test_fsdps_floor_is_left_out_where_a_profiled_block_never_ran():
    """FSDP2 gathers nothing for a block forward never runs; the meta device cannot tell which of the full size's
    blocks those are, and counting them would put the floor above the step (a review found +20 % on a slow link)."""
    grads = two_blocks().grads
    idle = Profile(10 * MS, 12 * MS, 4 * MS, grads, frozen=(Grad(4, 8 * MB, "float32", float("nan"), block=2),))
    link = PerMiB(20.0)
    link.allreduce_s = ONE_MS_A_MB.allreduce_s
    link.broadcast_s = ONE_MS_A_MB.broadcast_s
    params = parameters([2, 4, 4, 1, 8], [None, 0, 1, None, 2], frozen={4})
    frame = predict_caps(idle, caps_mb=[25.0], link=ONE_MS_A_MB, world_size=2)
    floored = with_full_size_floors(frame, idle, params, link=link, world_size=2, fsdp_profile=idle).iloc[0]
    assert pd.isna(floored["fsdp_full_size_step_floor_ms"]) and pd.isna(floored["fsdp_kept_full_size_step_floor_ms"])
    assert floored["zero_full_size_step_floor_ms"] > 0  # ZeRO-1 holds every parameter: its floor stands
    ran = dataclasses.replace(idle, frozen=(Grad(4, 8 * MB, "float32", float("nan"), used_s=9 * MS, block=2),))
    assert not pd.isna(with_full_size_floors(frame, ran, params, link=link, world_size=2,
                                             fsdp_profile=ran).iloc[0]["fsdp_full_size_step_floor_ms"])  # fmt: skip


def test_where_the_full_sizes_floors_favour_another_cap_than_the_one_named_the_answer_says_so():
    """A walkthrough's answer named 'any cap' from a small profile's one bucket while the full size's 50 buckets
    lay beside it: where the floors favour another cap (the least of its prediction and floor, the higher, as the
    choice ranks it), DDP's bracket says the cap the choice ranks it at and the small profile's."""
    from harness.commands.predict.full_size import floor_words

    frame = pd.DataFrame({"world_size": [64, 64], "bucket_cap_mb": [1.0, 25.0], "step_ms": [90.0, 100.0],
                          "full_size_step_floor_ms": [120.0, 104.0]})  # fmt: skip
    said = floor_words([frame])
    assert said == ("at the full size DDP's step is at least 104 ms at w64 at 25 MiB, where the choice ranks it, 100 "
                    "ms here (the floors above); at 1 MiB, the small profile's cap, at least 120 ms: predict from a "
                    "run of the full size to choose the cap")  # fmt: skip
    alike = frame.assign(full_size_step_floor_ms=[95.0, 103.0])  # least at the cap named: nothing to add
    assert floor_words([alike]) == ("at the full size DDP's step is at least 95 ms at w64 at 1 MiB, where the choice "
                                    "ranks it, 90 ms here (the floors above)")  # fmt: skip


def test_where_the_floors_tie_at_every_cap_ddps_answer_says_so_and_why_its_cap():
    """A walkthrough read '25 MiB, the cap its floors favour' where the floors were 1101.03 ms at 1, 25 and 100 MiB:
    where every cap ties, the answer says so, and that the cap named is DDP's default."""
    from harness.commands.predict.full_size import full_size_lead

    def frame(world: int, floors: list[float]) -> pd.DataFrame:
        return pd.DataFrame({"world_size": world, "bucket_cap_mb": [1.0, 25.0, 100.0], "step_ms": 100.0,
                             "scaling_efficiency": 1.0, "full_size_step_floor_ms": floors})  # fmt: skip

    tied = [frame(16, [110.0, 110.0, 110.2]), frame(64, [110.0, 110.3, 110.0])]  # within 0.5 %: alike
    said = full_size_lead(tied, "the model you will train", backward_ms=50.0)
    assert said.startswith(
        "for the model you will train, by its floors: bucket_cap_mb 25 MiB: its floors tie "
        "at every cap, and 25 MiB is DDP's default; w16 to w64: step at least 110 → 110.3 ms"
    )
    favoured = [frame(16, [110.0, 110.0, 110.2]), frame(64, [120.0, 110.3, 115.0])]  # at w64 25 MiB leads
    said = full_size_lead(favoured, "the model you will train", backward_ms=50.0)
    assert "bucket_cap_mb 25 MiB, the cap its floors favour; " in said
    # where the cap changes along the GPU counts, each cap carries its unit (a console read '25 from w8; 10 from w32
    # MiB'), and no cluster's algorithm is named where the rows hold none
    moved = [frame(16, [104.0, 112.0, 115.0]), frame(64, [120.0, 110.3, 115.0])]  # 1 MiB more than 4 % ahead
    said = full_size_lead(moved, "the model you will train", backward_ms=50.0)
    assert "bucket_cap_mb 1 MiB from w16; 25 MiB from w64, the cap its floors favour; " in said
    # a cap kept at DDP's default at one count against a lower floor is said so, as one cap alone is (a walkthrough
    # read '25 MiB from w8; 100 MiB from w16, the cap its floors favour' where 100 MiB was 3.7 % below at w8)
    kept = [frame(8, [104.0, 57.63, 55.48]).assign(step_ms=30.0), frame(16, [104.0, 65.06, 60.27]).assign(step_ms=30.0)]
    said = full_size_lead(kept, "the model you will train", backward_ms=16.4)
    assert (
        "bucket_cap_mb 25 MiB from w8; 100 MiB from w16, the cap its floors favour but at w8: within 3.9 % of "
        "100 MiB's, less than the model can tell: 25 MiB is DDP's default; w8 to w16"
    ) in said, said
    assert "mostly as" not in said
    # a what-if page moved DDP to 5 MiB at w64 on a lead of 0.67 %, 'the cap its floors favour', and named 25 MiB at
    # w8 'favoured' behind 1 and 5 MiB's 40.00 ms: the floors keep 25 MiB unless another cap leads by more than the
    # model can tell (4 %, as the pick for bookings does), and say the lead they set aside
    caps = {"bucket_cap_mb": [5.0, 25.0, 100.0], "step_ms": 30.0}
    close = [frame(8, [40.0, 40.17, 40.2]).assign(**caps), frame(64, [40.06, 40.33, 40.5]).assign(**caps)]
    said = full_size_lead(close, "the model you will train", backward_ms=20.0)
    assert said.startswith("for the model you will train, by its floors: bucket_cap_mb 25 MiB, within 0.67 % of 5 "
                           "MiB's, less than the model can tell: 25 MiB is DDP's default; "), said  # fmt: skip


def test_the_why_names_a_gradient_larger_than_the_cap_and_what_the_runner_up_cap_differs_by():
    """A bucket-cap skeptic's gpt2: the why said 'the last (2.41 ms) only after backward's last gradient' at every
    cap without saying that bucket is the 147 MiB tied embedding, which no cap splits, nor what the next-best cap's
    floor differs by. Registration order: wte (147 MiB) first, so made last and in the last bucket at any cap."""
    from harness.perfmodel.pick import ranked

    every = [Grad(0, 147 * MB, "float32", float("nan"), name="transformer.wte.weight")]
    every += [Grad(k, 4 * MB, "float32", float("nan"), name=f"h.{k}.weight") for k in range(1, 13)]
    params = Parameters(tuple(every))
    profile = Profile(3 * MS, 200 * MS, 4 * MS, (Grad(0, MB, "float32", 199 * MS),))
    floors = {cap: floor_with(profile, params, cap_mb=cap, link=ONE_MS_A_MB, world_size=2) for cap in (1.0, 25.0)}
    assert floors[25.0].last_largest == ("transformer.wte.weight", 147 * MB)
    frame = pd.DataFrame([{"world_size": 2, "bucket_cap_mb": cap, "step_ms": 100.0, "full_size_buckets": f.buckets,
                           "full_size_comm_ms": f.comm_s / MS, "full_size_last_ms": f.last_s / MS,
                           "full_size_step_floor_ms": f.step_s / MS, "full_size_exposed_ms": f.exposed_s / MS,
                           "full_size_last_largest": f.last_largest[0],
                           "full_size_last_largest_mb": f.last_largest[1] / MB}
                          for cap, f in floors.items()])  # fmt: skip
    ranked_at = ranked.ddp_ranked_row(frame)  # 1 MiB: its floor is the least
    said = ranked.full_size_why(ranked_at, 200.0, 1.0, terse=True, against=ranked.runner_up_words(frame, 200.0))
    assert "the last (147 ms; 147 MiB of it is transformer.wte.weight, one gradient larger than the cap, which no " \
           "cap splits) only after backward's last gradient" in said, said  # fmt: skip
    # at 1 ms a MiB: 1 MiB sends 13 buckets (12 of 4 MiB, then wte alone), 25 MiB 2 (h.12-h.6's 28 MiB, then h.5-h.1
    # with wte, 167 MiB); 195 ms of all-reduces either way, hidden behind backward's 200; the last, after the last
    # gradient at 199 ms, exposes 146 ms at 1 MiB and 166 at 25 MiB: the margin is the last bucket's, not the count's
    assert said.endswith("; against 25 MiB, its floor 20 ms higher: 2 buckets × 97.5 ms = 195 ms of all-reduces to "
                         "13 buckets × 15 ms = 195 ms, hidden behind backward either way, and 166 ms exposed after "
                         "it to 146 ms"), said  # fmt: skip
    roomy = frame.assign(full_size_last_largest_mb=0.5)  # the last bucket's largest within the cap: nothing said
    assert "no cap splits" not in ranked.full_size_why(roomy.iloc[0], 200.0, 1.0)
    assert ranked.runner_up_words(frame.iloc[:1], 200.0) == ""  # one cap: no runner-up
    # 25 Gb/s between nodes: a second of all-reduces read '1.08e+03 ms' in the Why; times are said whole from 1,000
    slow = frame.assign(**{c: frame[c] * 10 for c in ("full_size_comm_ms", "full_size_exposed_ms")})
    said = ranked.full_size_why(ranked.ddp_ranked_row(slow), 2000.0, 1.0, against=ranked.runner_up_words(slow, 2000.0))
    assert "take at least 1950 ms a step" in said and "overlapping backward (2000 ms)" in said and "e+" not in said
    # the floors' margin too: 200 ms between the caps read '2e+02 ms higher'
    slower = slow.assign(full_size_step_floor_ms=frame["full_size_step_floor_ms"] * 10)
    assert ", its floor 200 ms higher: " in ranked.runner_up_words(slower, 2000.0)
    # on a cluster, the link that bounds them (clusters.bound), said after the backward they overlap
    bounded = ranked.ddp_ranked_row(slow.assign(full_size_bound="the 25 Gb/s between nodes bounds them at w2 (…)"))
    said = ranked.full_size_why(bounded, 2000.0, 1.0)
    assert "overlapping backward (2000 ms); the 25 Gb/s between nodes bounds them at w2 (…); the last" in said, said

"""ZeRO-1's predicted step: torch's partition, the broadcasts after the optimizer, a run's zero rows checked."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch
from torch import nn

from harness.perfmodel import measured
from harness.perfmodel import network as net
from harness.perfmodel.schedule import Grad, Profile, predict_cap
from harness.perfmodel.sharding import own_costs, zero

MB = 1024**2
MS = 1e-3
ONE_MS_PER_MB = net.Link(alpha_s=0.0, busbw_bytes_per_s=MB / MS)  # a broadcast's bus factor is 1: 1 ms a MiB


def _uneven() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(7, 30), nn.ReLU(), nn.Linear(30, 30), nn.Linear(30, 5), nn.LayerNorm(5))


@pytest.mark.parametrize("world", [2, 3, 4])
def test_the_partition_is_the_one_torchs_zero_redundancy_optimizer_makes(single_rank, world):
    from torch.distributed.optim import ZeroRedundancyOptimizer

    model = _uneven()
    optimizer = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.SGD, lr=0.1)
    if not hasattr(optimizer, "_partition_parameters_cache"):
        pytest.skip("this torch's ZeroRedundancyOptimizer partitions otherwise")
    optimizer.world_size, optimizer._partition_parameters_cache = world, []  # its algorithm, at `world` ranks
    index = {id(p): i for i, p in enumerate(model.parameters())}
    torchs = [[index[id(p)] for p in groups[0]["params"]] for groups in optimizer._partition_parameters()]
    ready_order = [Grad(i, p.numel() * 4, "float32", 0.0) for i, p in reversed(list(enumerate(model.parameters())))]
    assert [[g.index for g in shard] for shard in zero.partition(ready_order, world)] == torchs


def _profile(sizes_mb: list[float]) -> Profile:
    grads = tuple(Grad(i, int(s * MB), "float32", 1.0 * MS) for i, s in enumerate(sizes_mb))
    return Profile(forward_s=3 * MS, backward_s=10 * MS, optimizer_s=8 * MS, grads=grads)


def test_the_step_is_ddps_with_the_largest_shards_optimizer_and_the_broadcasts_after_it():
    profile = _profile([4.0, 2.0, 1.0, 1.0])  # at 2 ranks: 4 on one, 2 + 1 + 1 on the other: half each
    step = zero.predict_zero(profile, cap_mb=25.0, link=ONE_MS_PER_MB, world_size=2)
    ddp = predict_cap(profile, cap_mb=25.0, link=ONE_MS_PER_MB, world_size=2)
    assert step.change.largest_share == pytest.approx(0.5) and step.change.optimizer_s == pytest.approx(4 * MS)
    assert step.change.broadcasts == 4 and step.change.broadcast_s == pytest.approx(8 * MS)  # 8 MiB at 1 ms a MiB
    assert step.step_s == pytest.approx(ddp.step_s - 8 * MS + 4 * MS + 8 * MS)
    three = zero.predict_zero(profile, cap_mb=25.0, link=ONE_MS_PER_MB, world_size=3)
    assert three.change.largest_share == pytest.approx(0.5)  # one parameter holds half the elements: no rank owns less


def test_latency_is_paid_per_broadcast_and_a_bucket_view_sends_one_a_rank():
    profile = _profile([1.0] * 6)
    link = net.Link(alpha_s=1 * MS, busbw_bytes_per_s=float("inf"))
    one_each = zero.predict_zero(profile, cap_mb=25.0, link=link, world_size=2)
    bucketed = zero.predict_zero(profile, cap_mb=25.0, link=link, world_size=2, bucket_view=True)
    assert (one_each.change.broadcasts, bucketed.change.broadcasts) == (6, 2)
    assert (one_each.change.broadcast_s, bucketed.change.broadcast_s) == pytest.approx((6 * MS, 2 * MS))
    many = zero.predict_zero(profile, cap_mb=25.0, link=link, world_size=8, bucket_view=True)
    assert many.change.broadcasts == 8  # torch sends a one-element bucket from each rank that owns nothing


def test_one_rank_sends_nothing_and_steps_every_parameter():
    profile = _profile([4.0, 2.0])
    step = zero.predict_zero(profile, cap_mb=25.0, link=ONE_MS_PER_MB, world_size=1)
    assert step.change.broadcasts == 0 and step.change.broadcast_s == 0 and step.change.largest_share == 1.0
    assert step.step_s == pytest.approx(predict_cap(profile, cap_mb=25.0, link=ONE_MS_PER_MB, world_size=1).step_s)


def test_a_fitted_broadcast_prices_the_broadcasts_and_the_all_reduce_stays_the_buckets():
    rows = [
        {"op": op, "world_size": 2, "bytes": size, "time_us": (a + size / MB * per_mb) * 1e3, "correct": True}
        for op, a, per_mb in (("all_reduce", 0.1, 1.0), ("broadcast", 0.5, 2.0))
        for size in (MB, 4 * MB)
    ]
    links = net.links_from_collectives(pd.DataFrame(rows), op="broadcast")
    assert links[2].alpha_s == pytest.approx(0.5 * MS) and links[2].broadcast_s(MB, 2) == pytest.approx(2.5 * MS)
    all_reduce = net.links_from_collectives(pd.DataFrame(rows))[2]
    assert all_reduce.allreduce_s(MB, 2) == pytest.approx(1.1 * MS)  # a bus factor of 1 at two ranks
    assert all_reduce.broadcast_s(MB, 2) == pytest.approx(1.1 * MS)  # no broadcast fitted: the all-reduce's α, busbw


def _row(impl, world, step_ms, options=None):
    return {"config_id": f"{impl}{world}", "status": "ok", "impl": impl, "impl_options": json.dumps(options or {}),
            "bucket_cap_mb": 25.0, "workload": "w", "size": "tiny", "batch_size": 2, "dtype": "fp32",
            "optimizer": "adam", "world_size": world, "step_ms_median": step_ms}  # fmt: skip


PROFILE_ROWS = pd.DataFrame([
    {"workload": "w", "size": "tiny", "batch_size": 2, "dtype": "fp32", "optimizer": "adam", "param_index": i,
     "bytes": MB, "param_dtype": "float32", "requires_grad": True, "ready_ms": 2.0 * (4 - i),
     "forward_ms": 3.0, "backward_ms": 10.0, "optimizer_ms": 4.0} for i in range(4)
])  # fmt: skip


def test_a_runs_zero_rows_are_checked_against_the_model_and_other_options_are_left_out():
    configs = pd.DataFrame([_row("zero", 2, 30.0), _row("zero", 2, 32.0), _row("zero", 1, 17.0),
                            _row("zero", 2, 40.0, {"overlap_with_ddp": True}),
                            _row("zero", 2, 25.0, {"parameters_as_bucket_view": True})])  # fmt: skip
    network = net.given_network(busbw_bytes_per_s=MB / MS, latency_s=0.0)
    checks = {c["impl_options"]: c for c in zero.run_checks(configs, PROFILE_ROWS, network, cores=None)}
    assert set(checks) == {"{}", '{"parameters_as_bucket_view": true}'}  # one rank and overlap_with_ddp: none
    plain = checks["{}"]
    assert plain["measured_ms"] == pytest.approx((30.0 * 32.0) ** 0.5)  # the repeats pooled as the run page does
    # DDP's default layout (no cap given: torch caps the first bucket at 1 MiB): a 1 MiB bucket ready at 2 ms, sent
    # by 3; the other 3 MiB ready at 8 ms, sent by 11; after 3 ms of forward and before 4 ms of optimizer
    assert plain["ddp_ms"] == pytest.approx(3.0 + 11.0 + 4.0)
    assert plain["predicted_ms"] == pytest.approx(18.0 - 4.0 + 2.0 + 4.0)  # half the optimizer, 4 MiB broadcast
    assert plain["broadcast_source"] is None  # a given network has no broadcast: the all-reduce's α and busbw
    assert checks['{"parameters_as_bucket_view": true}']["zero_broadcasts"] == 2


def test_zero_rows_asking_torchs_defaults_by_name_are_checked_as_the_plain_ones():
    """A user's knob sweep (static_graph, gradient_as_bucket_view at false among them) lost ZeRO-1's check on its own
    steps: rows asking the defaults by name were read as another step, though the choice priced them as its own."""
    named = {"static_graph": False, "gradient_as_bucket_view": False}
    configs = pd.DataFrame([_row("zero", 2, 30.0, named), _row("zero", 2, 31.0, {"static_graph": True})])
    network = net.given_network(busbw_bytes_per_s=MB / MS, latency_s=0.0)
    checks = zero.run_checks(configs, PROFILE_ROWS, network, cores=None)
    assert [c["impl_options"] for c in checks] == [json.dumps(named)]  # static_graph=True: another step


def test_zeros_own_cost_at_one_rank_is_added_at_every_world_size_and_a_cpus_left_out_of_a_gpu_step():
    """ZeRO at one rank (no option) over DDP's there is ZeRO's own cost, where three repeats a side tell them apart:
    added to the predicted step. A ZeRO row with an option at one rank is another step and counts for nothing; and
    repeats that do not tell the two apart add nothing (a launch here read 33 ms of noise as ZeRO's own cost)."""
    from harness.perfmodel.schedule import Calibration

    one_rank = [_row("stock", 1, ms) for ms in (15.0, 15.1, 14.9)] + [_row("zero", 1, ms) for ms in (17.0, 17.1, 16.9)]
    configs = pd.DataFrame([*one_rank, _row("zero", 2, 30.0), _row("zero", 2, 32.0),
                            _row("zero", 1, 40.0, {"overlap_with_ddp": True})])  # fmt: skip
    setup = {"workload": "w", "size": "tiny", "batch_size": 2, "dtype": "fp32", "optimizer": "adam"}
    assert measured.zero_own_cost_s(configs, setup) == pytest.approx(
        2.0 * MS, rel=0.01
    )  # the geometric means' difference
    noisy = [_row("stock", 1, ms) for ms in (15.0, 20.0, 12.0)] + [_row("zero", 1, ms) for ms in (17.0, 13.0, 19.0)]
    assert measured.zero_own_cost_s(pd.DataFrame(noisy), setup) is None
    assert (
        measured.zero_own_cost_s(pd.DataFrame([_row("stock", 1, 15.0), _row("zero", 1, 17.0)]), setup) is None
    )  # one each
    # one repeat a side: told as DDP's own cost is told from the baseline's, where every timed step lies above DDP's
    spread = pd.DataFrame([{**_row("stock", 1, 15.0), "step_ms_p10": 14.5, "step_ms_p90": 15.5},
                           {**_row("zero", 1, 17.0), "step_ms_p10": 16.5, "step_ms_p90": 17.5}])  # fmt: skip
    assert measured.zero_own_cost_s(spread, setup) == pytest.approx(2.0 * MS)
    assert measured.zero_own_cost_s(spread.assign(step_ms_p10=[14.5, 15.0]), setup) is None  # overlapping: noise
    assert (
        measured.zero_own_cost_s(configs[configs["impl"] == "zero"], setup) is None
    )  # no DDP step at one rank to subtract
    swept = pd.DataFrame([_row(impl, 1, ms + (2.0 if impl == "zero" else 0.0), {"bucket_cap_mb": cap})
                          for impl in ("stock", "zero") for cap in (1.0, 25.0)
                          for ms in (15.0, 15.1, 14.9)])  # fmt: skip
    assert measured.zero_own_cost_s(swept, setup) == pytest.approx(
        2.0 * MS, rel=0.01
    )  # a cap sweep's rows, caps pooled
    network = net.given_network(busbw_bytes_per_s=MB / MS, latency_s=0.0)
    plain = next(c for c in zero.run_checks(configs, PROFILE_ROWS, network, cores=None) if c["impl_options"] == "{}")
    assert plain["zero_own_ms"] == pytest.approx(2.0, rel=0.01)
    parts = plain["ddp_ms"] - plain["whole_optimizer_ms"] + plain["zero_optimizer_ms"] + plain["zero_broadcast_ms"]
    assert plain["predicted_ms"] == pytest.approx(parts + plain["zero_own_ms"])  # DDP's changed as ZeRO changes it
    # two ranks on one core: their compute slowed ×2 (no baseline at w2 to measure more), as predict --run prices it
    shared = next(c for c in zero.run_checks(configs, PROFILE_ROWS, network, cores=1) if c["impl_options"] == "{}")
    assert shared["ddp_ms"] > plain["ddp_ms"] and shared["predicted_ms"] > plain["predicted_ms"]
    # on a cluster: scaled as the compute is (twice the run's scale here), or a CPU's left out of a GPU's step
    scaled = Calibration(compute_scale=2.0)
    added = own_costs.zero_for_cluster(configs, setup, scaled, run_scale=1.0, carried=True).added_s
    assert added == pytest.approx(4 * MS, rel=0.01)
    left = own_costs.zero_for_cluster(configs, setup, scaled, run_scale=1.0, carried=False)
    assert (left.added_s, left.left_out_s) == (0.0, pytest.approx(4 * MS, rel=0.01))
    assert "2 ms, a CPU's, no GPU's" in left.note  # its step a range: from none of it to this, the choice weighs both
    assert left.note.endswith("4 ms on your step, its step's long end (the choice weighs both)")


def test_zeros_own_cost_not_told_from_noise_bounds_its_step_from_0_and_is_said():
    """Repeats that do not tell ZeRO's step from DDP's added nothing and said nothing (the user could not tell 0 from
    not measured): the difference bounds the step from 0 (no figure added, carried or not), said not told; a step no
    slower than DDP's (a run here: zero 5.90 ms against stock 13.2 at one rank) is said taken as 0."""
    from harness.analysis import stats
    from harness.perfmodel.schedule import Calibration

    setup = {"workload": "w", "size": "tiny", "batch_size": 2, "dtype": "fp32", "optimizer": "adam"}
    noisy = pd.DataFrame([_row("stock", 1, ms) for ms in (15.0, 20.0, 12.0)]
                         + [_row("zero", 1, ms) for ms in (17.0, 23.0, 19.0)])  # fmt: skip
    assert measured.zero_own_cost_s(noisy, setup) is None  # no figure: as before
    apart = stats.geometric_mean([17.0, 23.0, 19.0]) - stats.geometric_mean([15.0, 20.0, 12.0])  # 4.19 ms
    for carried in (True, False):
        side = own_costs.zero_for_cluster(noisy, setup, Calibration(compute_scale=2.0), run_scale=1.0, carried=carried)
        assert side.added_s == 0.0 and side.noise and side.left_out_s == pytest.approx(2 * apart * MS)
        assert side.note.startswith("ZeRO's own cost at one rank beyond DDP's, 4.19 ms, not told from noise")
    faster = pd.DataFrame([_row("stock", 1, 13.2), _row("zero", 1, 5.9)])
    side = own_costs.zero_for_cluster(faster, setup, Calibration(), run_scale=1.0, carried=False)
    assert (side.added_s, side.left_out_s, side.noise) == (0.0, 0.0, False)
    assert side.note == "ZeRO's own cost at one rank taken as 0: its step there is no slower than DDP's"


def test_zero_partitions_and_broadcasts_frozen_parameters_but_steps_only_the_trained():
    """Four trained MiB-sized parameters and a frozen 4 MiB one: torch gives the frozen one to rank 0 and every
    trained one to rank 1, whose optimizer then steps all of them."""
    trained = tuple(Grad(i, MB, "float32", (4 - i) * MS) for i in range(4))
    frozen = (Grad(4, 4 * MB, "float32", float("nan")),)
    profile = Profile(3 * MS, 10 * MS, 4 * MS, trained, frozen)
    change = zero.zero_change(profile, sender=net.Link(alpha_s=0.0, busbw_bytes_per_s=MB / MS), world_size=2)
    assert (change.largest_share, change.broadcasts) == (1.0, 5)
    assert change.broadcast_s / MS == pytest.approx(8.0)  # 1 ms a MiB, the frozen 4 MiB included

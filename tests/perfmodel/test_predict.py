"""The step-time model: DDP's bucket assignment, the schedule simulation, the α-β fit, the gradient-ready
profile, the run's model tables, and `ddpbench predict` end to end."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import workloads
from harness import bucketing, cli
from harness.analysis import agreement
from harness.config import units
from harness.measure import gradprofile
from harness.perfmodel import compression, measured, predict, schedule
from harness.perfmodel import network as net
from harness.perfmodel.network import Contention, Link
from harness.perfmodel.schedule import Grad, Profile
from harness.results import model_tables, store

MB = 1024 * 1024


# ---------------------------------------------------------------- DDP's buckets


class MixedDtypes(nn.Module):
    """Two float32 layers around a float64 one, and a parameter much bigger than the others."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(64, 64)
        self.b = nn.Linear(64, 64).double()
        self.big = nn.Linear(64, 512)
        self.c = nn.Linear(512, 4)

    def forward(self, x):
        return self.c(self.big(self.b(self.a(x).double()).float()))


def _ready_order(model: nn.Module, batch, loss) -> list[int]:
    """Indices of model.parameters() in the order their gradients became ready."""
    order: list[int] = []
    handles = [p.register_post_accumulate_grad_hook(lambda _p, i=i: order.append(i))
               for i, p in enumerate(model.parameters())]  # fmt: skip
    loss(model, batch).backward()
    for handle in handles:
        handle.remove()
    model.zero_grad(set_to_none=True)
    return order


def _grads(model: nn.Module, order: list[int]) -> list[Grad]:
    params = list(model.parameters())
    return [Grad(i, params[i].numel() * params[i].element_size(), str(params[i].dtype), 0.0) for i in order]


def _buckets(model: nn.Module, order: list[int], **caps) -> list[list[Grad]]:
    """harness.bucketing's layout of the model's gradients taken in `order`, as lists of Grads."""
    grads = _grads(model, order)
    layout = bucketing.assign_buckets([g.nbytes for g in grads], [g.dtype for g in grads], **caps)
    return [[grads[i] for i in bucket] for bucket in layout]


CASES = {
    "gpt2-tiny": (lambda: workloads.create("gpt2", size="tiny"), 0.01),
    "mlp-tiny": (lambda: workloads.create("mlp", size="tiny"), 0.0005),
    "bert-tiny": (lambda: workloads.create("bert", size="tiny"), 0.02),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bucket_assignment_reproduces_the_buckets_ddp_rebuilds(single_rank, case):
    make, cap_mb = CASES[case]
    workload = make()
    torch.manual_seed(0)
    model = workload.build_model()
    batch = workload.make_batch(2, device=torch.device("cpu"), generator=torch.Generator().manual_seed(0))
    order = _ready_order(model, batch, workload.loss)
    ddp = DistributedDataParallel(model, bucket_cap_mb=cap_mb)
    for _ in range(3):  # DDP rebuilds its buckets in step 2 (in ready order) and logs them in step 3
        workload.loss(ddp, batch).backward()
    logged = [int(s) for s in str(ddp._get_ddp_logging_data()["rebuilt_bucket_sizes"]).split(",") if s.strip()]
    cap = int(cap_mb * MB)
    buckets = _buckets(model, order, cap_bytes=cap, first_cap_bytes=bucketing.first_bucket_bytes(cap))
    assert len(logged) > 2  # the cap really splits the model
    assert [sum(g.nbytes for g in b) for b in buckets] == logged


@pytest.mark.parametrize("cap_mb", [0.01, 0.05, 1.0])
def test_bucket_assignment_matches_torchs_own_function_with_several_dtypes(cap_mb):
    torch.manual_seed(0)
    model = MixedDtypes()
    order = _ready_order(model, torch.randn(2, 64), lambda m, x: m(x).sum())
    params = list(model.parameters())
    cap, first = int(cap_mb * MB), int(cap_mb * MB) // 4
    expected, _ = dist._compute_bucket_assignment_by_size(
        [params[i] for i in order], [first, cap], [False] * len(order), order
    )
    buckets = _buckets(model, order, cap_bytes=cap, first_cap_bytes=first)
    assert [[g.index for g in b] for b in buckets] == [list(b) for b in expected]  # launch order too


def test_bucket_layout_walks_the_given_order_and_keeps_dtypes_apart():
    sizes, dtypes = [400, 300, 504, 100, 704], ["float32", "float32", "float64", "float32", "float64"]
    # Walked 4, 3, 2, 1, 0: f64 closes {4} at the first cap, f32 closes {3, 1} at the first cap,
    # then {0} and {2} stay open (launched as DDP's hash table of dtypes holds them: on a CPU, the
    # dtype first used last comes first: f32, then f64).
    layout = bucketing.assign_buckets(sizes, dtypes, cap_bytes=1000, first_cap_bytes=350, order=[4, 3, 2, 1, 0])
    assert layout == [[4], [3, 1], [0], [2]]
    assert bucketing.assign_buckets(sizes, dtypes, cap_bytes=10_000, first_cap_bytes=10_000) == [[2, 4], [0, 1, 3]]
    with pytest.raises(ValueError, match="5 sizes but 4 dtypes"):
        bucketing.assign_buckets(sizes, dtypes[:4], cap_bytes=1, first_cap_bytes=1)


def test_first_bucket_follows_the_installed_ddp():
    # An explicit bucket_cap_mb caps the first bucket alike in torch ≥ 2.9; the default keeps 1 MiB.
    assert bucketing.first_bucket_bytes(25 * MB, cap_given=False) == dist._DEFAULT_FIRST_BUCKET_BYTES
    assert bucketing.first_bucket_bytes(25 * MB) in (25 * MB, dist._DEFAULT_FIRST_BUCKET_BYTES)


# ---------------------------------------------------------------- the simulation, on hand-made profiles

MS = 1e-3


def _profile(ready_ms: list[float], *, backward_ms: float, nbytes: int = MB) -> Profile:
    grads = tuple(Grad(i, nbytes, "torch.float32", t * MS) for i, t in enumerate(ready_ms))
    return Profile(forward_s=3 * MS, backward_s=backward_ms * MS, optimizer_s=1 * MS, grads=grads)


ONE_MS_PER_MB = Link(alpha_s=0.0, busbw_bytes_per_s=MB / 1e-3)  # at world size 2 the bus factor is 1


def _each_alone(profile: Profile) -> list[list[Grad]]:
    return [[g] for g in profile.grads]


def test_full_overlap_hides_all_but_the_last_bucket():
    # Buckets ready at 2, 4, 6, 8, 10 ms, each all-reduce 1 ms: only the last one's 1 ms shows.
    profile = _profile([2, 4, 6, 8, 10], backward_ms=10)
    step = schedule.simulate(profile, _each_alone(profile), link=ONE_MS_PER_MB, world_size=2)
    assert step.comm_end_s == pytest.approx(11 * MS)
    assert step.step_s == pytest.approx((3 + 11 + 1) * MS)


def test_one_giant_bucket_overlaps_nothing():
    profile = _profile([2, 4, 6, 8, 10], backward_ms=10)
    step = schedule.simulate(profile, [list(profile.grads)], link=ONE_MS_PER_MB, world_size=2)
    assert step.step_s == pytest.approx((3 + 10 + 5 + 1) * MS)


def test_communication_bound_buckets_queue_behind_each_other():
    # Each all-reduce takes 4 ms but a bucket is ready every 2 ms: they run back to back from 2 ms.
    profile = _profile([2, 4, 6, 8, 10], backward_ms=10, nbytes=4 * MB)
    step = schedule.simulate(profile, _each_alone(profile), link=ONE_MS_PER_MB, world_size=2)
    assert step.comm_end_s == pytest.approx(22 * MS)
    assert step.exposed_comm_s == pytest.approx(12 * MS)


def test_a_compression_hook_sends_each_bucket_in_half_the_bytes_where_the_gradients_are_fp32():
    """fp16/bf16 hooks cast a bucket of fp32 gradients to 2-byte floats: the buckets are DDP's, each all-reduce half."""
    profile = _profile([2, 4, 6, 8, 10], backward_ms=10, nbytes=4 * MB)  # 4 ms each: communication-bound
    assert compression.wire_share(profile.grads, "fp16") == 0.5 and compression.wire_share(profile.grads, "none") == 1.0
    halves = [dataclasses.replace(g, dtype="bfloat16") for g in profile.grads]
    assert compression.wire_share(halves, "bf16") == 1.0  # already 2-byte floats: the hook sends what DDP sends
    frame = schedule.predict_caps(profile, caps_mb=[4], link=ONE_MS_PER_MB, world_size=2)
    hooked = compression.with_compressed(frame, profile, link=ONE_MS_PER_MB, world_size=2)
    # back to back from 2 ms, 2 ms each now: the last ends at 12 ms, 2 ms after backward (22 ms, 12 exposed before)
    assert float(hooked["compressed_exposed_comm_ms"].iloc[0]) == pytest.approx(2.0)
    assert float(hooked["exposed_comm_ms"].iloc[0]) == pytest.approx(12.0)
    assert float(hooked["compressed_step_ms"].iloc[0]) == pytest.approx(3 + 12 + 1)
    # its all-reduces and the last of them, as the network's table sets them beside DDP's (20 ms, 4 the last)
    assert float(hooked["comm_ms"].iloc[0]) == pytest.approx(20.0)
    assert float(hooked["compressed_comm_ms"].iloc[0]) == pytest.approx(10.0)
    assert float(hooked["compressed_last_allreduce_ms"].iloc[0]) == pytest.approx(2.0)


def test_latency_counts_once_per_bucket():
    profile = _profile([10, 10, 10], backward_ms=10)
    link = Link(alpha_s=0.5 * MS, busbw_bytes_per_s=MB / 1e-3)
    assert schedule.simulate(profile, _each_alone(profile), link=link, world_size=2).comm_end_s == pytest.approx(
        (10 + 3 * 1.5) * MS
    )
    assert schedule.simulate(profile, [list(profile.grads)], link=link, world_size=2).comm_end_s == pytest.approx(
        (10 + 3.5) * MS
    )


def test_contention_slows_whichever_work_overlaps():
    # Backward 10 ms; a 2 ms all-reduce launched at 5 ms halves compute while it runs: compute reaches
    # 6 ms of its work at 7 ms, ends at 11 ms; the second bucket runs 11–13 ms alone.
    profile = _profile([5, 10], backward_ms=10, nbytes=2 * MB)
    slow = Contention(compute_slowdown=2.0, comm_slowdown=1.0)
    step = schedule.simulate(profile, _each_alone(profile), link=ONE_MS_PER_MB, world_size=2, contention=slow)
    assert step.backward_end_s == pytest.approx(11 * MS)
    assert step.comm_end_s == pytest.approx(13 * MS)
    # The other way round: the first all-reduce runs at half speed while backward computes (its 2 ms
    # of work take 5 → 9 ms), the second runs alone after backward, 10 → 12 ms.
    slow_comm = Contention(compute_slowdown=1.0, comm_slowdown=2.0)
    step = schedule.simulate(profile, _each_alone(profile), link=ONE_MS_PER_MB, world_size=2, contention=slow_comm)
    assert step.backward_end_s == pytest.approx(10 * MS)
    assert step.comm_end_s == pytest.approx(12 * MS)


def test_a_measured_latency_slowdown_falls_on_each_call_and_keeps_the_probes_own_message_as_measured():
    # α 1 ms, 1 ms per MB: the 8 MB probe costs 9 ms alone and was measured 2× slower while computing;
    # a 4 KiB one 10× (its latency). The probe's bandwidth part then pays (18 − 10) / 8 = 1×.
    link = Link(alpha_s=1 * MS, busbw_bytes_per_s=MB / MS / net.allreduce_bus_factor(2))
    measured = Contention(comm_slowdown=2.0, latency_slowdown=10.0, probe_bytes=8 * MB)
    probe, small, large = (link.allreduce_s(n, 2) for n in (8 * MB, 1, 64 * MB))
    assert schedule.comm_slowdowns([probe], link, 2, measured) == pytest.approx([2.0])  # as measured
    small_slowdown, large_slowdown = schedule.comm_slowdowns([small, large], link, 2, measured)
    assert small_slowdown == pytest.approx(10.0, rel=1e-3)  # nearly all latency
    assert large_slowdown == pytest.approx((10 + 64) / 65)  # 1 ms of latency ×10, 64 ms of bytes ×1
    # Without it (a run made before it was measured), every bucket pays the probe's one slowdown.
    assert schedule.comm_slowdowns([small, large], link, 2, Contention(comm_slowdown=2.0)) == [2.0, 2.0]


def test_a_contention_part_from_before_the_latency_was_measured_is_still_read(tmp_path):
    run = tmp_path / "c"
    old = [{"run_id": "c", "world_size": 2, "bytes": 8 * MB, "compute_alone_ms": 10.0, "compute_overlapped_ms": 12.0,
            "comm_alone_ms": 5.0, "comm_overlapped_ms": 8.0, "compute_slowdown": 1.3, "comm_slowdown": 1.6,
            "device": "cpu", "backend": "gloo", "threads_per_rank": 1, "hostname": "h"}]  # fmt: skip
    model_tables.contention_part(run, 2).parent.mkdir(parents=True)
    pd.DataFrame(old).to_parquet(model_tables.contention_part(run, 2))
    [row] = model_tables.read_contention(run).itertuples()
    assert row.comm_slowdown == 1.6 and pd.isna(row.latency_slowdown)
    assert net._contention(row) == Contention(1.3, 1.6, None, 8 * MB)


def test_one_rank_communicates_nothing():
    profile = _profile([2, 4], backward_ms=4)
    step = schedule.simulate(profile, [list(profile.grads)], link=ONE_MS_PER_MB, world_size=1)
    assert step.step_s == pytest.approx(profile.local_step_s)


def test_predict_caps_gives_efficiency_against_the_one_rank_step():
    profile = _profile([2, 4, 6, 8, 10], backward_ms=10)
    frame = schedule.predict_caps(profile, caps_mb=[1, 100], link=ONE_MS_PER_MB, world_size=2)
    assert frame["buckets"].tolist() == [5, 1]
    assert frame["scaling_efficiency"].tolist() == pytest.approx([14 / 15, 14 / 19])


# ---------------------------------------------------------------- the network


def test_alpha_beta_fit_recovers_latency_and_bandwidth_from_noisy_samples():
    rng = np.random.default_rng(0)
    sizes = 1024 * 2.0 ** np.arange(0, 17)
    alpha, busbw, world = 40e-6, 3e9, 4
    times = (alpha + sizes * 1.5 / busbw) * rng.normal(1.0, 0.01, sizes.size)
    link = net.fit_link(sizes, times, world_size=world)
    assert link.alpha_s == pytest.approx(alpha, rel=0.05)
    assert link.busbw_bytes_per_s == pytest.approx(busbw, rel=0.05)


def test_links_come_from_correct_all_reduce_rows_per_world_size():
    sizes = [1024 * 2**k for k in range(8)]
    rows = [{"op": "all_reduce", "world_size": w, "bytes": s, "time_us": (10e-6 + s * f / 1e9) * 1e6, "correct": True}
            for w, f in ((2, 1.0), (4, 1.5)) for s in sizes]  # fmt: skip
    rows.append({"op": "all_reduce", "world_size": 8, "bytes": 1024, "time_us": 1.0, "correct": False})
    links = net.links_from_collectives(pd.DataFrame(rows))
    assert sorted(links) == [2, 4]
    assert links[4].busbw_bytes_per_s == pytest.approx(1e9, rel=1e-6)
    assert "extrapolated" in net.link_for(links, 64).source


def test_a_network_fitted_on_small_messages_warns_when_the_buckets_reach_far_past_them(capsys, monkeypatch):
    from harness.commands.console import invoked
    from harness.commands.predict import counts as predict_counts

    monkeypatch.setattr(invoked, "ddpbench_command", lambda: ".venv/bin/ddpbench")  # a hint names it as typed

    sizes = [1024 * 2**k for k in range(7)]  # 1 KB … 64 KB, as `collectives --sizes 1KB:64KB` measures
    link = net.fit_link(sizes, [10e-6 + s / 1e9 for s in sizes], world_size=2)
    assert link.largest_bytes == 64 * 1024
    predict_counts.warn_if_extrapolated(link, 128 * 1024, world=2)  # twice the largest: still measured enough
    assert capsys.readouterr().err == ""
    predict_counts.warn_if_extrapolated(link, 28 * 2**20 + 68 * 1024, world=2)
    assert capsys.readouterr().err.strip() == (
        "ddpbench: warning: w2: the network was measured up to 64 KiB and these buckets reach 28.0664 MiB: its "
        "bandwidth there is extrapolated (`.venv/bin/ddpbench collectives --sizes 1KiB:32MiB` measures it)"
    )
    predict_counts.warn_if_extrapolated(net.Link(0.0, 1e9), 2**30, world=2)  # a given network: nothing to say
    assert capsys.readouterr().err == ""


def test_a_world_size_the_network_was_not_measured_at_is_said_to_be_extrapolated(capsys):
    """A walkthrough's `predict --run R --gpus 8` named a best cap at w8 from a gloo network and contention
    measured at 2 ranks, without a word."""
    from harness.commands.predict import counts as predict_counts

    link = net.Link(1e-5, 1e9)
    measured = net.Network({2: link}, {2: net.Contention(1.3, 1.9)}, "collectives run c1")
    predict_counts.warn_unmeasured_world(measured, 2)
    assert capsys.readouterr().err == ""
    predict_counts.warn_unmeasured_world(measured, 8)
    assert capsys.readouterr().err.strip() == (
        "ddpbench: warning: w8: its all-reduce cost is the one measured at 2 ranks, carried over; it is predicted "
        "without contention (measured at 2 only): what its all-reduces and its compute cost each other while they "
        "overlap is left out, so the step is optimistic by that much: its best cap is no measurement"
    )
    predict_counts.warn_unmeasured_world(net.Network({2: link}, {}, "c1"), 2)  # the link measured, no contention
    said = capsys.readouterr().err
    assert "w2: it is predicted without contention: what its all-reduces" in said and "carried over" not in said


def test_the_largest_bucket_is_the_largest_any_cap_lays_out():
    grads = tuple(Grad(i, nbytes, "torch.float32", 0.001 * i) for i, nbytes in enumerate((3 * MB, 3 * MB, 1 * MB)))
    profile = Profile(0.01, 0.01, 0.001, grads)
    assert schedule.largest_bucket_bytes(profile, [1.0]) == 3 * MB  # a parameter is never split
    whole = bucketing.first_bucket_bytes(25 * MB) >= 7 * MB  # torch ≥ 2.9: an explicit cap caps the first bucket too
    assert schedule.largest_bucket_bytes(profile, [1.0, 25.0]) == (7 * MB if whole else 4 * MB)


@pytest.mark.parametrize(
    ("text", "value"), [("90GB/s", 90e9), ("400Gb/s", 50e9), ("800MB/s", 800e6), ("1.5 GB/s", 1.5e9)]
)
def test_bandwidth_parses_in_bytes_or_bits(text, value):
    assert units.parse_bandwidth(text) == pytest.approx(value)


@pytest.mark.parametrize(("text", "value"), [("30us", 30e-6), ("0.2ms", 2e-4), ("5e-6s", 5e-6)])
def test_latency_parses_with_its_unit(text, value):
    assert units.parse_latency(text) == pytest.approx(value)


def test_prediction_error_is_mape_and_grid_steps_between_best_caps():
    error = agreement.prediction_error([1, 5, 10, 25], [110, 100, 105, 120], [100, 110, 100, 130])
    assert error["mape"] == pytest.approx((10 / 110 + 10 / 100 + 5 / 105 + 10 / 120) / 4)
    assert (error["best_measured_cap_mb"], error["best_predicted_cap_mb"], error["best_cap_grid_steps"]) == (5, 1, 1)


# ---------------------------------------------------------------- the profile


def test_gradient_ready_profile_sees_the_last_layer_first():
    model_workload = workloads.create("mlp", size="tiny")
    rows = gradprofile.measure(model_workload, batch_size=4, device=torch.device("cpu"), steps=2, warmup=1)
    params = list(model_workload.build_model().parameters())
    assert [r["numel"] for r in rows] == [p.numel() for p in params]
    ready = [r["ready_ms"] for r in rows]
    assert ready[-1] < ready[0]  # backward reaches the output layer before the input layer
    assert all(0 <= t <= rows[0]["backward_ms"] * 1.5 for t in ready)
    profile = schedule.profile_from_rows(pd.DataFrame(rows))
    times = [g.ready_s for g in profile.grads]
    assert times == sorted(times)  # the simulation walks gradients in the order they became ready
    assert profile.grads[0].index >= len(params) - 2  # the output layer's weight or bias comes first


def test_a_bench_run_stores_the_profile_at_world_size_1(small_run):
    profiles = model_tables.read_gradprofiles(small_run)
    assert set(profiles["workload"]) == {"mlp"}
    params = list(workloads.create("mlp", size="tiny").build_model().parameters())
    assert len(profiles) == len(params)
    assert profiles["ready_ms"].notna().all() and (profiles["backward_ms"] > 0).all()


def test_predict_run_on_this_machine_answers_for_zero_and_fsdp_at_the_gpu_count_asked(small_run, tmp_path, capsys,
                                                                                      monkeypatch):  # fmt: skip
    """Without --cluster, `predict --run RUN --gpus N` prices ZeRO-1's broadcasts and FSDP2's gathers and
    reduce-scatters on the same network as DDP's all-reduces (here a bus bandwidth typed in, latency 0: twice the
    bandwidth, half their time), as `predict --cluster` does on a cluster's."""
    from harness.commands.console import invoked

    monkeypatch.setattr(invoked, "ddpbench_command", lambda: ".venv/bin/ddpbench")  # a hint names it as typed
    rows = {}
    for gbps in (1, 2):
        out = tmp_path / f"{gbps}.csv"
        assert cli.main(["predict", "--run", small_run.name, "--results", str(small_run.parent), "--gpus", "4",
                         "--busbw", f"{gbps}GB/s", "--latency", "0us", "--out", str(out)]) == 0  # fmt: skip
        rows[gbps] = pd.read_csv(out)
    said = capsys.readouterr().out
    assert (
        "ddpbench predict: and ZeRO-1 (DDP + torch's ZeroRedundancyOptimizer, its defaults) at the caps above: w4"
        in said
    )
    assert "[no broadcast measured: at the all-reduce's α and bus bandwidth (given: busbw 1 GB/s" in said
    assert "ddpbench predict: and FSDP2 (fully_shard on each block and the root, its defaults): w4" in said
    assert "no all-gather or reduce-scatter measured: at the all-reduce's α and bus bandwidth (given: busbw 2" in said
    assert "the answer on" not in said and "in a GPU of" not in said  # a CPU run: no GPU to fit in
    # no FSDP step at one rank: FSDP2's step carries no own cost, and says so
    assert "FSDP's own cost not added: the run has no FSDP step at one rank to measure it by" in said
    assert rows[1]["fsdp_own_ms"].isna().all() and rows[1]["fsdp_step_ms"].notna().all()
    on_cluster = tmp_path / "cluster.csv"
    assert cli.main(["predict", "--run", small_run.name, "--results", str(small_run.parent), "--cluster", "dgx-h100",
                     "--nodes", "1", "--out", str(on_cluster)]) == 0  # fmt: skip
    captured = capsys.readouterr()
    said = captured.out
    # a tiny CPU run without --local-step-ms: no step, only the full size's collectives (and its memory, below)
    assert "this profile is mlp's tiny size (" not in captured.err and "step per bucket cap" not in said
    assert "ddpbench predict: what dgx-h100's network costs a step, whatever the GPU computes: ms of each strategy's " \
           "collectives with the full size's 1 GiB of gradients (counted on the meta device)" in said  # fmt: skip
    assert "ddpbench predict: no step, strategy to book or cap on dgx-h100: the profile's compute is a CPU's" in said
    # what fits is the full size's: mlp/full's 1.0 GiB of parameters and as much of gradients, SGD keeping none;
    # judged in bf16, as --dtype auto trains on an H100 (the CPU's fp32 was no choice of the user's): its activations
    # counted so, 480 MiB of them the bf16 copies of 15 weights of 32 MiB autocast keeps for backward
    assert ("\n  at the full size, counted on the meta device at batch 8 a rank; what fits judged in bf16 (autocast), "
            "--dtype auto's on dgx-h100's GPU: activations counted so (in fp32, the run's dtype, at the size and batch "
            "predicted: 2.13 MiB), the state as held (autocast keeps it fp32)\n") in said  # fmt: skip
    assert ("keeps 481 MiB of activations for backward at 8 samples a rank in bf16 (each further sample adds "
            "0.133 MiB; 480 MiB kept once at any batch: the weights' bf16 copies; ") in said  # fmt: skip
    assert "half the bytes" not in said  # bf16 is no fixed share of fp32's: counted (test_state_per_rank)
    assert "\n  naive                  2 GiB = 1+1+0  2.47 GiB           76.6 GiB\n" in said
    assert (
        "\n  flat, stock, bucketed  2 GiB = 1+1+0  3.47 GiB  1 GiB    75.6 GiB\n" in said
    )  # alike: one row; buckets a column; the state's parts: parameters, gradients, optimizer state
    assert "not checked against this run's own steps" not in said  # no step to check
    cluster_rows = pd.read_csv(on_cluster)
    assert cluster_rows["fsdp_own_ms"].isna().all()
    # with a GPU step: FSDP2's step says it has no own cost, beside DDP's own cost, given; and no collectives run
    # beside the run: the model's error on the run's own steps is missing, and said so
    assert cli.main(["predict", "--run", small_run.name, "--results", str(small_run.parent), "--cluster", "dgx-h100",
                     "--nodes", "1", "--local-step-ms", "20", "--local-ddp-ms", "0.5"]) == 0  # fmt: skip
    said_gpu = capsys.readouterr().out
    assert "FSDP's own cost not added: the run has no FSDP step at one rank to measure it by, while DDP's step " \
           "carries DDP's own (0.5 ms)" in said_gpu  # fmt: skip
    assert "ddpbench predict: not checked against this run's own steps: no `ddpbench collectives` run of" in said_gpu
    # the command that measures it, as it would run (a walkthrough met 'run one there' without it)
    assert (f"(run `.venv/bin/ddpbench collectives --gpus 2 --device cpu --backend gloo --results "
            f"{small_run.parent}` to see the model's error)") in said_gpu  # fmt: skip
    # this machine's rows are the cluster's less what only a cluster has, plus the link they rest on (usage.md)
    only_cluster = {
        "nodes",
        "cluster",
        "cluster_source",
        "local_step_ms",
        "local_step_gpu",
        "local_step_end",
        "cluster_step_ms",
        "local_optimizer_ms",
        "local_optimizer_source",
        "local_ddp_ms",
        "ddp_own_source",
        "compute_scale",
        "ddp_own_ms",
        "run_batch_size",
        "own_cost_whose",
        "train_options",
        # how NCCL's tuner runs each collective: a cluster's alone (nccl.ClusterLink.algorithms)
        *(f"{c}_algorithm{s}" for c in ("comm", "zero_broadcast", "fsdp_gather", "fsdp_scatter") for s in ("", "s")),
    }
    floors = {column for column in cluster_rows.columns if "full_size" in column}  # a smaller size's run on a cluster
    assert floors and set(rows[1].columns) == set(cluster_rows.columns) - only_cluster - floors | {"network"}
    assert rows[1]["best"].any() and set(rows[1]["run"]) == {small_run.name} and set(rows[1]["workload"]) == {"mlp"}
    slow, fast = rows[1], rows[2]
    for column in ("zero_broadcast_ms", "fsdp_gather_ms", "fsdp_scatter_ms"):
        assert slow[column].gt(0).all() and np.allclose(fast[column], slow[column] / 2), column
    # ZeRO-1's change to DDP's step is the same at every cap: the optimizer on its shard, then the broadcasts
    change = slow["zero_step_ms"] - slow["step_ms"]
    assert np.allclose(change, change.iloc[0]) and slow["fsdp_step_ms"].nunique() == 1


def test_a_profile_measured_later_is_stored_with_the_run_and_found_again(tmp_path):
    run = tmp_path / "r"
    store.write_json(run / "run.json", {"run_id": "r", "threads_per_rank": 1})
    setup = {"workload": "mlp", "size": "tiny", "batch_size": 4, "dtype": "fp32", "optimizer": "sgd"}
    assert predict.stored_profile(run, setup) is None
    measured = gradprofile.measure(workloads.create("mlp", size="tiny"), batch_size=4, device=torch.device("cpu"),
                                   steps=2, warmup=1)  # fmt: skip
    kept = predict.store_profile(run, setup, pd.DataFrame([{**setup, **r} for r in measured]), device="cpu")
    assert predict.stored_profile(run, setup) == kept
    assert predict.stored_profile(run, {**setup, "batch_size": 8}) is None
    stored = model_tables.read_gradprofiles(run)
    assert set(stored["run_id"]) == {"r"} and set(stored["threads_per_rank"]) == {1}


def test_a_profile_measured_later_keeps_the_roots_parameters_blockless(tmp_path):
    """A transformer's embeddings and head are in no block (`block` None): in a DataFrame that is NaN, which
    Parquet's int32 refused (predict's traceback after `bench --largest-only`, whose run stores no profile)."""
    run = tmp_path / "r"
    store.write_json(run / "run.json", {"run_id": "r", "threads_per_rank": 1})
    setup = {"workload": "mlp", "size": "tiny", "batch_size": 4, "dtype": "fp32", "optimizer": "sgd"}
    measured = gradprofile.measure(workloads.create("mlp", size="tiny"), batch_size=4, device=torch.device("cpu"),
                                   steps=2, warmup=1)  # fmt: skip
    measured[-1]["block"] = None  # as the root's head
    predict.store_profile(run, setup, pd.DataFrame([{**setup, **r} for r in measured]), device="cpu")
    blocks = model_tables.read_gradprofiles(run)["block"]
    assert blocks.iloc[:-1].tolist() == [r["block"] for r in measured[:-1]] and pd.isna(blocks.iloc[-1])


def test_a_profile_stored_before_forward_was_timed_by_block_still_reads(tmp_path):
    """Profiles written before `used_ms` and `block` existed keep their backward timing; only FSDP's step
    (which needs forward block by block) is left out for them."""
    run = tmp_path / "r"
    store.write_json(run / "run.json", {"run_id": "r", "threads_per_rank": 1})
    setup = {"workload": "mlp", "size": "tiny", "batch_size": 4, "dtype": "fp32", "optimizer": "sgd"}
    measured = gradprofile.measure(workloads.create("mlp", size="tiny"), batch_size=4, device=torch.device("cpu"),
                                   steps=2, warmup=1)  # fmt: skip
    predict.store_profile(run, setup, pd.DataFrame([{**setup, **r} for r in measured]), device="cpu")
    (path,) = (run / "gradprofile").glob("*.parquet")
    pq.write_table(pq.read_table(path).drop_columns(["used_ms", "block"]), path)
    stored = model_tables.read_gradprofiles(run)
    assert len(stored) == len(measured) and stored["used_ms"].isna().all() and stored["block"].isna().all()
    old = predict.stored_profile(run, setup)
    assert old is not None and all(g.used_s is None for g in old.grads)


# ---------------------------------------------------------------- a run's model tables


def _config(config_id, impl, cap, step_ms, world=2):
    options = json.dumps({"bucket_cap_mb": cap} if cap else {})
    return {"config_id": config_id, "status": "ok", "impl": impl, "impl_options": options, "bucket_cap_mb": cap,
            "workload": "w", "size": "tiny", "batch_size": 2, "dtype": "fp32", "optimizer": "sgd",
            "world_size": world, "grad_bytes": 5 * MB, "step_ms_median": step_ms}  # fmt: skip


def test_floor_is_the_larger_of_local_step_and_one_all_reduce_of_every_gradient():
    configs = pd.DataFrame([_config("l", "local", None, 10.0), _config("s", "stock", 1.0, 30.0)])
    network = net.given_network(busbw_bytes_per_s=MB / 1e-3, latency_s=1e-3)  # 1 ms + 1 ms per MiB at n = 2
    floor = {r["config_id"]: r for r in predict.floor_rows(configs, network)}
    assert floor["s"]["allreduce_ms"] == pytest.approx(6.0)
    assert floor["s"]["local_ms"] == pytest.approx(10.0) and floor["s"]["floor_ms"] == pytest.approx(10.0)


_PROFILE_ROWS = pd.DataFrame([
    {"workload": "w", "size": "tiny", "batch_size": 2, "dtype": "fp32", "optimizer": "sgd", "param_index": i,
     "bytes": MB, "param_dtype": "float32", "requires_grad": True, "ready_ms": 2.0 * (5 - i),
     "forward_ms": 3.0, "backward_ms": 10.0, "optimizer_ms": 1.0} for i in range(5)
])  # fmt: skip


def test_sweep_predictions_pair_each_measured_cap_with_the_model():
    configs = pd.DataFrame([_config("a", "stock", 1.0, 20.0), _config("b", "stock", 1.0, 22.0),
                            _config("c", "stock", 100.0, 25.0)])  # fmt: skip
    network = net.given_network(busbw_bytes_per_s=MB / 1e-3, latency_s=0.0)
    rows = predict.sweep_predictions(configs, _PROFILE_ROWS, network, cores=None)
    measured = [(r["bucket_cap_mb"], r["measured_ms"]) for r in rows]  # the repeats' geometric mean, as ranked
    assert measured == [(1.0, pytest.approx((20.0 * 22.0) ** 0.5)), (100.0, pytest.approx(25.0))]
    assert [r["predicted_ms"] for r in rows] == pytest.approx([15.0, 19.0])  # nothing to calibrate on
    assert [r["predicted_raw_ms"] for r in rows] == pytest.approx([15.0, 19.0])


def test_a_forecast_is_held_against_a_later_runs_steps_not_its_own():
    """predict --against: the forecast is calibrated on the first run's one-rank rows and checked against the later
    run's DDP rows at world size ≥ 2 alone: the first run's own w2 step (99 ms) and the later run's baseline are not
    read; a later stock as shipped is checked as shipped."""
    from harness.commands.console.predict.own_host import forecast_rows

    old = pd.DataFrame([_config("l1", "local", None, 28.0, world=1), _config("s1", "stock", 100.0, 32.0, world=1),
                        _config("s2", "stock", 100.0, 99.0)])  # fmt: skip
    later = pd.DataFrame([_config("n2", "stock", 100.0, 50.0), _config("nl", "local", None, 45.0),
                          _config("n3", "stock", None, 60.0, world=3)])  # fmt: skip
    network = net.given_network(busbw_bytes_per_s=MB / 1e-3, latency_s=0.0)
    given, shipped = forecast_rows(old, _PROFILE_ROWS, later, network)
    # calibrated as in the test below: 6 + (20 + 4) + 5 + 2 = 37 ms against the later run's 50
    assert (given["world_size"], given["shipped"], shipped["world_size"], shipped["shipped"]) == (2, False, 3, True)
    assert (given["measured_ms"], given["forecast_ms"], given["error"]) == pytest.approx((50.0, 37.0, 37.0 / 50 - 1))
    assert shipped["measured_ms"] == pytest.approx(60.0)
    assert shipped["error"] == pytest.approx(shipped["forecast_ms"] / 60.0 - 1)


# ---------------------------------------------------------------- the command


def test_predict_command_prints_step_time_and_efficiency_per_cap_and_the_best_cap(capsys):
    code = cli.main(["predict", "--workload", "mlp", "--size", "tiny", "--gpus", "64", "--busbw", "90GB/s",
                     "--latency", "30us", "--caps", "1,25"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "w64: all-reduce α 30.0 µs, busbw 90.000 GB/s" in out
    assert "predicted fastest cap at w64:" in out and "scaling efficiency" in out


def test_the_size_auto_chose_is_said_when_it_is_not_the_whole_model(capsys):
    import argparse

    import torch

    from harness.commands.predict import command as predict_command
    from harness.commands.predict import inputs as predict_input

    cpu = torch.device("cpu")
    setup = predict_command._fresh_setup(
        argparse.Namespace(workload="gpt2", size=None, batch_size=None, optimizer=None, cluster=None, nodes=None), cpu
    )
    predict_input.say_auto_size(argparse.Namespace(size=None), setup, cpu)
    said = capsys.readouterr().out
    assert "--size auto profiles gpt2's small size on cpu; --size full profiles the whole model" in said
    predict_input.say_auto_size(argparse.Namespace(size="small"), setup, cpu)  # asked for: nothing to say
    assert capsys.readouterr().out == ""
    # a model of the user's own file, which --size does not scale: no size to recommend (a walkthrough's finding)
    example = str(Path(__file__).resolve().parents[2] / "examples" / "my_workload.py") + ":MyModel"
    own = predict_command._fresh_setup(
        argparse.Namespace(workload=example, size=None, batch_size=None, optimizer=None, cluster=None, nodes=None), cpu
    )
    predict_input.say_auto_size(argparse.Namespace(size=None), own, cpu)
    assert capsys.readouterr().out == ""


def test_predict_cluster_on_the_cpu_profiles_the_small_size_for_size_full(capsys):
    """`predict --workload hf:bert --size full --cluster …` profiled the full size on the CPU for over 400 s, unsaid how
    long: with --cluster (whose floors count the full size on the meta device) the small size is profiled instead,
    said with what the full size would cost; a GPU, a size asked smaller, or predict without a cluster as asked."""
    import argparse

    from harness.commands.predict import command as predict_command
    from harness.commands.predict import inputs as predict_input

    bert, cpu = workloads.resolve("hf:bert"), torch.device("cpu")
    assert predict_input.profiled_size(bert, "full", "cpu", counts_full=True) == "small"
    assert predict_input.profiled_size(bert, "full", "cpu", counts_full=False) == "full"  # --busbw: as asked
    assert predict_input.profiled_size(bert, "full", "cuda", counts_full=True) == "full"
    assert predict_input.profiled_size(bert, "tiny", "cpu", counts_full=True) == "tiny"
    assert predict_input.profiled_size(bert, "auto", "cpu", counts_full=True) == "small"
    mine = workloads.resolve(str(Path(__file__).resolve().parents[2] / "examples" / "my_workload.py") + ":MyModel")
    assert predict_input.profiled_size(mine, "full", "cpu", counts_full=True) == "full"  # --size scales nothing
    asked = argparse.Namespace(workload="mlp", size="full", batch_size=None, optimizer=None, cluster="dgx-a100",
                               nodes=None)  # fmt: skip
    setup = predict_command._fresh_setup(asked, cpu, counts_full=True)
    assert setup["size"] == "small"
    predict_input.say_profiled_size(asked, setup, cpu, trained=None)
    said = capsys.readouterr().out
    assert "profiling mlp's small size (--size full on cpu: the full size takes " in said
    assert "× its FLOPs a sample" in said and "the full size is counted on the meta device" in said
    predict_input.say_profiled_size(asked, setup, cpu, trained={"classes": 100})
    assert "the model you will train (the full size with --train-wopt's options) is counted" in capsys.readouterr().out
    predict_input.say_profiled_size(asked, {**setup, "size": "full"}, cpu, trained=None)  # the whole model: unsaid
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--busbw", "fast"], "fast"),
        (["--busbw", "9GB/s", "--latency", "soon"], "soon"),
        (["--busbw", "9GB/s", "--caps", "0,25"], "0,25"),
        (["--busbw", "9GB/s", "--workload", "nosuch"], "nosuch"),
        (["--results", "no-such-run"], "no-such-run"),
    ],
)
def test_bad_predict_input_is_one_line_exit_2(tmp_path, capsys, flags, named):
    assert cli.main(["predict", *flags, "--results-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert named in err and len(err.strip().splitlines()) == 1


def test_a_bench_run_given_busbw_takes_its_network_from_run_json(tmp_path):
    run = tmp_path / "r"
    store.write_json(run / "run.json", {"run_id": "r", "device": "cpu", "backend": "gloo",
                                        "config": {"busbw": "2GB/s", "latency": "10us"}})  # fmt: skip
    network = net.network_for_run(tmp_path, run)
    link = net.network_link(network, 8)
    assert (link.alpha_s, link.busbw_bytes_per_s) == pytest.approx((10e-6, 2e9))


def test_a_bench_run_without_busbw_or_collectives_has_no_network(tmp_path):
    run = tmp_path / "r"
    store.write_json(run / "run.json", {"run_id": "r", "device": "cpu", "backend": "gloo", "config": {}})
    assert net.network_for_run(tmp_path, run) is None


@pytest.mark.parametrize(("flags", "named"), [(["--busbw", "fast"], "fast"), (["--latency", "30us"], "--busbw")])
def test_bench_rejects_a_bad_network_before_writing_anything(tmp_path, capsys, flags, named, no_early_ranks):
    assert cli.main(["bench", *flags, "--results", str(tmp_path / "r")]) == 2
    assert named in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_calibration_scales_compute_to_the_runs_one_rank_local_step_and_adds_ddps_own_cost():
    configs = pd.DataFrame([_config("l1", "local", None, 28.0, world=1), _config("l2", "local", None, 50.0),
                            _config("s1", "stock", 100.0, 32.0, world=1),
                            _config("s2", "stock", 100.0, 50.0)])  # fmt: skip
    network = net.given_network(busbw_bytes_per_s=MB / 1e-3, latency_s=0.0)
    [row] = predict.sweep_predictions(configs, _PROFILE_ROWS, network, cores=None)
    # Raw: 3 + 10 + 5 (one 5 MiB bucket after backward) + 1. Calibrated on one rank's rows alone (local at
    # world size 2, 50 ms, is not read): compute × 28/14 = 2, DDP's own 32 − 28 = 4 ms added to backward:
    # 6 + (20 + 4) + 5 + 2.
    assert (row["compute_scale"], row["reducer_ms"]) == pytest.approx((2.0, 4.0))
    assert (row["predicted_raw_ms"], row["predicted_ms"]) == pytest.approx((19.0, 37.0))


def test_ddps_own_cost_is_the_reference_as_modelled_not_with_a_compression_hook():
    """A run that also measured stock with a comm hook at one rank: that step is not the DDP the model
    simulates, so it is left out of the reference's step (pooled in, DDP's own cost read 15.8 ms here)."""
    hooked = {**_config("h1", "stock", 25.0, 60.0, world=1), "impl_options": json.dumps({"comm_hook": "fp16"})}
    configs = pd.DataFrame([_config("l1", "local", None, 28.0, world=1), _config("s1", "stock", 25.0, 32.0, world=1),
                            hooked])  # fmt: skip
    setup = {"workload": "w", "size": "tiny", "batch_size": 2, "dtype": "fp32", "optimizer": "sgd"}
    assert measured.ddp_own_cost_s(configs, setup) * 1e3 == pytest.approx(4.0)
    assert measured.pooled_step_s(configs.drop(index=1), setup, world=1, role="reference") is None


def test_the_calibration_pools_repeats_as_the_run_page_does():
    """The one-rank baseline the profile is scaled to is the geometric mean of its repeats (the run page's
    figure), not their median: repeats of 10, 10 and 16 ms are 11.70 ms on both."""
    configs = pd.DataFrame([{**_config(f"l{i}", "local", None, step, world=1), "repeat": i}
                            for i, step in enumerate([10.0, 10.0, 16.0])])  # fmt: skip
    setup = {"workload": "w", "size": "tiny", "batch_size": 2, "dtype": "fp32", "optimizer": "sgd"}
    assert measured.one_rank_baseline_s(configs, setup) * 1e3 == pytest.approx(11.696, abs=1e-3)


def test_scaling_to_a_gpus_step_carries_ddps_own_cost_with_the_compute_or_leaves_a_cpus_out():
    from types import SimpleNamespace

    from harness.perfmodel.schedule import Calibration

    profile = SimpleNamespace(local_step_s=0.010)
    measured = Calibration(compute_scale=2.0, reducer_s=0.004)  # the run: compute ×2 (20 ms), DDP's own 4 ms
    carried = predict.scaled_to_local_step(profile, measured, 0.060)  # a GPU's 60 ms: ×3 more
    assert carried.compute_scale == pytest.approx(6.0) and carried.reducer_s == pytest.approx(0.012)
    left = predict.scaled_to_local_step(profile, measured, 0.060, own_carried=False)
    assert left.compute_scale == pytest.approx(6.0) and left.reducer_s == 0.0
    assert predict.scaled_to_local_step(profile, measured, None) is measured


def test_an_optimizer_step_given_apart_leaves_forward_and_backward_the_rest():
    """A CPU's Adam was 21-40 % of a step in walkthroughs, a GPU's under 1 %: given apart, the optimizer takes what
    the user measured and forward and backward the rest, split as the profile splits them."""
    from harness.perfmodel.schedule import Calibration, Grad, Profile, calibrate

    profile = Profile(0.002, 0.004, 0.004, (Grad(0, 1024, "float32", 0.003),))  # 10 ms, 40 % of it the optimizer
    measured = Calibration(compute_scale=2.0)  # the run: 20 ms
    given = predict.scaled_to_local_step(profile, measured, 0.100, optimizer_s=0.001)  # 100 ms, 1 ms optimizer
    assert given.compute_scale == pytest.approx(2.0 * 99 / 12) and given.optimizer_s == 0.001
    scaled = calibrate(profile, given)
    assert (scaled.forward_s, scaled.backward_s, scaled.optimizer_s) == pytest.approx((0.033, 0.066, 0.001))
    assert scaled.grads[0].ready_s == pytest.approx(0.003 * 2.0 * 99 / 12)  # ready times scale with backward


def test_a_one_gpu_run_says_why_it_has_no_model_state_and_no_choice(tmp_path, capsys):
    """A walkthrough predicted from a --gpus 1 run, as the floors' note advises, and got no memory, no choice and
    no answer table, unsaid: a rank's share of the state is fitted from two world sizes or more."""
    from harness.commands.predict import full_size as predict_full_size

    rows = pd.DataFrame([{"impl": "stock", "impl_options": "{}", "world_size": 1, "workload": "mlp", "size": "full",
                          "batch_size": 4, "dtype": "fp32", "optimizer": "sgd", "status": "ok"}])  # fmt: skip
    setup = {"workload": "mlp", "size": "full", "batch_size": 4, "dtype": "fp32", "optimizer": "sgd"}
    predict_full_size.said_state(tmp_path, rows, setup, [8, 16], None)
    assert "no model state per rank, so no choice of strategy" in capsys.readouterr().err


def test_a_largest_only_run_is_told_to_bench_the_ladder_not_the_gpus_it_ran(tmp_path, capsys):
    """`bench --gpus 2 --largest-only` was told "bench at --gpus 2 too", which it had: the ladder is what it lacks,
    and the command that runs it is its own without --largest-only."""
    from harness.commands.predict import full_size as predict_full_size

    command = ["ddpbench", "bench", "--impls", "zero,fsdp", "--gpus", "2", "--largest-only", "--run-id", "a1"]
    store.write_json(tmp_path / "run.json", {"run_id": "a1", "config": {"ladder": False}, "command": command})
    rows = pd.DataFrame([{"impl": impl, "impl_options": "{}", "world_size": 2, "workload": "mlp", "size": "full",
                          "batch_size": 4, "dtype": "fp32", "optimizer": "sgd", "status": "ok"}
                         for impl in ("zero", "fsdp")])  # fmt: skip
    setup = {"workload": "mlp", "size": "full", "batch_size": 4, "dtype": "fp32", "optimizer": "sgd"}
    predict_full_size.said_state(tmp_path, rows, setup, [8, 16], None)
    said = capsys.readouterr().err
    assert "run a1 measured each strategy at 2 ranks alone" in said and "--gpus 2 too" not in said
    assert said.rstrip().endswith("bench --impls zero,fsdp --gpus 2")


_SETUP = {"workload": "w", "size": "tiny", "batch_size": 2, "dtype": "fp32", "optimizer": "sgd"}


def test_ranks_beyond_the_cores_slow_the_compute_by_the_runs_own_slowdown_else_by_ranks_per_core():
    """A CPU whose cores the ranks outnumber: the run's local at its largest world ≥ 2 over its one-rank step (42 / 28 =
    1.5), times the further ranks per core (4 ranks on 2 cores: 2), and ranks / cores alone as the floor; at a rank to
    a core, or with the cores unknown, nothing is slowed."""
    configs = pd.DataFrame([_config("l1", "local", None, 28.0, world=1), _config("l2", "local", None, 42.0)])
    share = predict.core_share(configs, _SETUP, world=4, cores=2)
    assert (share.floor, share.carried, share.measured_world, *share.bounds) == pytest.approx((2.0, 3.0, 2, 2.0, 3.0))
    assert predict.core_share(configs, _SETUP, world=2, cores=2) is None
    assert predict.core_share(configs, _SETUP, world=4, cores=None) is None
    one_rank_only = predict.core_share(configs.iloc[:1], _SETUP, world=3, cores=2)
    assert one_rank_only.carried is None and one_rank_only.measured_world is None
    assert (one_rank_only.scale, *one_rank_only.bounds) == pytest.approx((1.5, 1.5, 1.5))
    wide_only = predict.core_share(configs.iloc[1:], _SETUP, world=4, cores=2)  # h6's w4: local at 4, none at 1
    assert (wide_only.carried, wide_only.measured_world, wide_only.scale) == (None, 2, 2.0)


def test_a_measured_slowdown_below_ranks_per_core_is_priced_at_that_floor_and_said_so():
    """A baseline at w2 that read faster than at one rank (0.99× on this project's busy CPU; 26 / 28 here) carried to
    3 ranks on 2 cores is ×1.39, below ranks / cores (×1.5), the least sharing the cores costs: the step was priced
    there while the same line called ×1.5 the floor. It is priced at the floor, and the line says why."""
    from harness.commands.console.predict import own_host

    configs = pd.DataFrame([_config("l1", "local", None, 28.0, world=1), _config("l2", "local", None, 26.0)])
    share = predict.core_share(configs, _SETUP, world=3, cores=2)
    assert share.carried == pytest.approx(26 / 28 * 1.5)  # what the run measured, kept as measured
    assert (share.scale, *share.bounds) == pytest.approx((1.5, 1.5, 1.5))
    profile = schedule.profile_from_rows(_PROFILE_ROWS)
    assert predict.with_shared_cores(profile, share).local_step_s == pytest.approx(1.5 * profile.local_step_s)
    words = own_host.share_words(share)
    assert words.startswith("3 ranks share 2 cores: compute slowed ×1.5 (ranks / cores") and "is ×1.39, below" in words


def test_a_floor_says_which_step_the_run_lacks_to_measure_the_sharing():
    """h6's w4 run measured local at 4 ranks and none at one: its floor said "the run measured its baseline at no
    world size ≥ 2" and pointed at bench --gpus 2, which it had run; it lacked the one-rank step."""
    from harness.commands.console.predict import own_host

    configs = pd.DataFrame([_config("l1", "local", None, 28.0, world=1), _config("l4", "local", None, 90.0, world=4)])
    wide_only = own_host.share_words(predict.core_share(configs.iloc[1:], _SETUP, world=4, cores=2))
    assert "the run needs its baseline at one rank and at a world size ≥ 2; it has none at one rank)" in wide_only
    one_rank_only = own_host.share_words(predict.core_share(configs.iloc[:1], _SETUP, world=4, cores=2))
    assert "at a world size ≥ 2; it has none at a world size ≥ 2)" in one_rank_only


def test_a_forecast_where_ranks_share_cores_is_slowed_and_judged_inside_or_outside_its_range():
    """predict --against with the forecast's run on 2 cores: its w4 forecast is priced at the carried slowdown (local
    at w2 over w1: 42 / 28 = 1.5, times 4 ranks on 2 cores beyond 2 = 2: 3×), its range between the 2-ranks-a-core
    floor's step (2×) and that one, the measured step said inside or outside; a rank to a core has no range."""
    from harness.commands.console.predict import own_host
    from harness.commands.console.predict.own_host import forecast_rows

    old = pd.DataFrame([_config("l1", "local", None, 28.0, world=1), _config("s1", "stock", None, 32.0, world=1),
                        _config("l2", "local", None, 42.0)])  # fmt: skip
    later = pd.DataFrame([_config("n4", "stock", None, 100.0, world=4)])
    network = net.given_network(busbw_bytes_per_s=MB / 1e-3, latency_s=0.0)
    (plain,) = forecast_rows(old, _PROFILE_ROWS, later, network)
    (slowed,) = forecast_rows(old, _PROFILE_ROWS, later, network, cores=2)
    assert "core_share" not in plain and own_host.range_words(plain).startswith("no range")
    assert (slowed["core_share"].scale, *slowed["core_share"].bounds) == pytest.approx((3.0, 2.0, 3.0))
    assert slowed["forecast_ms"] > 2 * plain["forecast_ms"]  # compute is most of this step: 3× of it
    assert slowed["high_ms"] == pytest.approx(slowed["forecast_ms"]) and slowed["high_ms"] > slowed["low_ms"] * 1.2
    middle = (slowed["low_ms"] + slowed["high_ms"]) / 2
    assert own_host.range_words({**slowed, "measured_ms": middle}).endswith("measured inside")
    assert own_host.range_words({**slowed, "measured_ms": slowed["high_ms"] * 1.01}).endswith("measured outside")


def test_ranks_left_fewer_threads_than_the_run_gave_its_own_are_said_to_run_slower():
    """A `--gpus 1` run on 2 cores gave its rank both: 2 ranks there get one thread each, which no core share
    prices (2 ranks on 2 cores is a rank to a core), so predict says the steps may be up to twice too fast."""
    from harness.commands.console.predict import own_host

    said = own_host.thread_words(2, 2, world=2, run_world=1)
    assert "had 2 threads each" in said and "would have 1 each" in said and "up to ×2 too fast" in said
    assert own_host.thread_words(1, 2, world=2, run_world=1) is None  # one thread each: nothing lost
    assert own_host.thread_words(2, 2, world=2, run_world=2) is None  # the run measured this world size
    assert own_host.thread_words(2, 8, world=4, run_world=1) is None  # 8 cores keep 2 threads for each of 4
    assert own_host.thread_words(None, 2, world=2, run_world=1) is None  # a run that kept no thread count

"""FSDP2's step model (harness.perfmodel.sharding.fsdp): the units it reads from a gradient profile, and its schedule of
gathers and reduce-scatters against their compute, overlapped on a GPU and serial where each call blocks."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
import torch

import workloads
from harness.measure import gradprofile
from harness.perfmodel import measured
from harness.perfmodel import network as net
from harness.perfmodel.schedule import Grad, Profile, profile_from_rows
from harness.perfmodel.sharding import fsdp, own_costs

MS = 1e-3
MIB = 1024**2


class PerMiB:
    """A link whose every collective takes `ms_per_mib` a MiB of the unit, whatever the op and the world size."""

    def __init__(self, ms_per_mib: float) -> None:
        self.ms_per_mib = ms_per_mib
        self.calls: list[tuple[str, float]] = []

    def collective_s(self, op: str, nbytes: float, world_size: int) -> float:
        self.calls.append((op, nbytes))
        return nbytes / MIB * self.ms_per_mib * MS if world_size > 1 else 0.0


def two_blocks(*, optimizer_ms: float = 4.0) -> Profile:
    """A root (an embedding of 2 MiB used first, a head of 1 MiB used last) around two blocks of 4 MiB each:
    forward 10 ms (root 1, blocks 4 and 5, the head inside the last block's span), backward 12 ms."""
    grads = [
        Grad(3, MIB, "float32", 1 * MS, "head.weight", used_s=9 * MS),  # the head's backward: the first ms
        Grad(2, 4 * MIB, "float32", 5 * MS, "blocks.1.weight", used_s=5 * MS, block=1),
        Grad(1, 4 * MIB, "float32", 10 * MS, "blocks.0.weight", used_s=1 * MS, block=0),
        Grad(0, 2 * MIB, "float32", 12 * MS, "embed.weight", used_s=0.0),
    ]
    return Profile(10 * MS, 12 * MS, optimizer_ms * MS, tuple(grads))


def test_units_split_forward_and_backward_at_each_blocks_first_use_and_last_gradient():
    found = fsdp.units(two_blocks())
    assert [u.name for u in found.blocks] == ["blocks.0", "blocks.1"]
    assert [u.nbytes for u in (found.root, *found.blocks)] == [3 * MIB, 4 * MIB, 4 * MIB]
    assert [u.forward_s / MS for u in (found.root, *found.blocks)] == pytest.approx([1, 4, 5])
    # backward: the head 1 ms, blocks.1 from 1 to 5, blocks.0 from 5 to 10, the root (the embedding) 10 to 12
    assert found.head_backward_s / MS == pytest.approx(1)
    assert [u.backward_s / MS for u in (found.root, *found.blocks)] == pytest.approx([2, 5, 4])
    assert found.compute_s / MS == pytest.approx(22)


def test_a_profile_without_forward_use_or_blocks_has_no_fsdp_step():
    old = Profile(MS, MS, MS, tuple(Grad(i, MIB, "float32", MS, block=0) for i in range(2)))
    assert fsdp.units(old) is None  # stored before per-block forward times
    assert fsdp.predict_fsdp(old, gather=PerMiB(1), scatter=PerMiB(1), world_size=2) is None
    assert fsdp.units(Profile(MS, MS, MS, (Grad(0, MIB, "float32", MS, used_s=0.0),))) is None  # no block


def test_where_each_call_blocks_the_step_is_compute_every_collective_and_a_shard_of_the_optimizer():
    link = PerMiB(1.0)
    step = fsdp.predict_fsdp(two_blocks(), gather=link, scatter=link, world_size=4, blocking=True)
    # gathers: root 3 + blocks 4 + 4 in forward, the blocks again in backward: 19 ms; reduce-scatters 11 ms
    assert (step.gather_s / MS, step.scatter_s / MS, step.gathers, step.units) == pytest.approx((19, 11, 5, 3))
    assert step.step_s / MS == pytest.approx(22 + 19 + 11 + 4 / 4)
    assert step.exposed_s / MS == pytest.approx(30)
    assert [op for op, _ in link.calls].count("reduce_scatter") == 3


def test_on_a_free_network_nothing_is_exposed_and_one_rank_needs_no_collective():
    free = fsdp.predict_fsdp(two_blocks(), gather=PerMiB(0), scatter=PerMiB(0), world_size=8)
    assert free.step_s / MS == pytest.approx(22 + 4 / 8) and free.exposed_s == pytest.approx(0)
    alone = fsdp.predict_fsdp(two_blocks(), gather=PerMiB(5), scatter=PerMiB(5), world_size=1)
    assert alone.step_s / MS == pytest.approx(22 + 4)


def test_overlapped_a_prefetched_gather_hides_behind_the_previous_units_compute():
    """At 0.25 ms a MiB: the root's gather (0.75 ms) is exposed; block 0's (1 ms), queued behind it, ends with
    the root's compute; block 1's, free to start once the root's gather is copied out, hides behind block 0's
    4 ms. In backward the root's pre-backward issues blocks.1's gather (1 ms) at backward's start: it hides
    behind the head's 1 ms; blocks.0's hides behind blocks.1's 4 ms, and so do the blocks' reduce-scatters; the
    root's (0.75 ms) is issued when backward ends, and exposed."""
    link = PerMiB(0.25)
    step = fsdp.predict_fsdp(two_blocks(), gather=link, scatter=link, world_size=2)
    assert step.exposed_s / MS == pytest.approx(0.75 + 0.75)
    assert step.step_s / MS == pytest.approx(22 + 1.5 + 4 / 2)
    blocking = fsdp.predict_fsdp(two_blocks(), gather=link, scatter=link, world_size=2, blocking=True)
    assert step.step_s < blocking.step_s


def kept_step_ms(profile: Profile) -> float:
    """The overlapped step at two ranks, gathers at 1 ms a MiB, kept after forward (no backward gathers) and the
    reduce-scatters free: forward's gathers against its compute, then backward's compute."""
    step = fsdp.predict_fsdp(profile, gather=PerMiB(1.0), scatter=PerMiB(0), world_size=2, reshard_after_forward=False)
    return step.step_s / MS


def test_forward_gathers_run_ahead_until_the_one_two_units_back_is_copied_out():
    """At 1 ms a MiB: the root (1 MiB) computes 4 ms, block 0 (1 MiB) and block 1 (8 MiB) 1 ms each. Block 1's
    gather may start once the root's is copied out (at the root's start), so it runs straight after block 0's:
    2-10, and block 1 computes 10-11, not 13-14 as it would if it waited for block 0 to begin (at 5). Kept after
    forward and scattered for free, backward adds its 3 ms of compute."""
    grads = (Grad(2, 8 * MIB, "float32", 1 * MS, "b.1.w", used_s=5 * MS, block=1),
             Grad(1, MIB, "float32", 2 * MS, "b.0.w", used_s=4 * MS, block=0),
             Grad(0, MIB, "float32", 3 * MS, "embed.weight", used_s=0.0))  # fmt: skip
    assert kept_step_ms(Profile(6 * MS, 3 * MS, 0.0, grads)) == pytest.approx(11 + 3)


def test_a_forward_gather_waits_for_the_unit_two_back_to_begin_not_three():
    """At 1 ms a MiB, the root computing 10 ms and three 1 ms blocks, the last 5 MiB: its gather may start only
    once block 0 begins (at 11, block 0's gather copied out), so it runs 11-16 and block 2 computes 16-17; not
    3-8, as if the root's start let it go. Kept after forward and scattered for free, backward adds its 4 ms."""
    grads = (Grad(3, 5 * MIB, "float32", 1 * MS, "b.2.w", used_s=12 * MS, block=2),
             Grad(2, MIB, "float32", 2 * MS, "b.1.w", used_s=11 * MS, block=1),
             Grad(1, MIB, "float32", 3 * MS, "b.0.w", used_s=10 * MS, block=0),
             Grad(0, MIB, "float32", 4 * MS, "embed.weight", used_s=0.0))  # fmt: skip
    assert kept_step_ms(Profile(13 * MS, 4 * MS, 0.0, grads)) == pytest.approx(17 + 4)


def test_kept_after_forward_each_block_is_gathered_once():
    link = PerMiB(1.0)
    kept = fsdp.predict_fsdp(two_blocks(), gather=link, scatter=link, world_size=2, reshard_after_forward=False,
                             blocking=True)  # fmt: skip
    assert (kept.gathers, kept.gather_s / MS) == pytest.approx((3, 11))


@pytest.fixture(scope="module")
def gpt2_profile() -> Profile:
    rows = gradprofile.measure(workloads.create("gpt2", size="tiny"), batch_size=2, device=torch.device("cpu"),
                               steps=2, warmup=1)  # fmt: skip
    return profile_from_rows(pd.DataFrame(rows))


def test_a_measured_profile_has_a_unit_a_transformer_block_and_the_root_the_rest(gpt2_profile):
    found = fsdp.units(gpt2_profile)
    model = workloads.create("gpt2", size="tiny").build_model()
    assert [u.name for u in found.blocks] == [f"transformer.h.{i}" for i in range(len(model.transformer.h))]
    assert found.root.nbytes + sum(u.nbytes for u in found.blocks) == gpt2_profile.grad_bytes
    assert found.compute_s == pytest.approx(gpt2_profile.forward_s + gpt2_profile.backward_s)


def test_the_meta_devices_parameter_table_has_the_measured_profiles_bytes_blocks_and_frozen_ones(gpt2_profile):
    """The full size's floors rest on parameters counted on the meta device: each one's bytes and block there are
    those the gradient profile measured on a real model (the same size here), index by index."""
    from harness.measure.modelinfo import counts_on_meta
    from harness.perfmodel.schedule import parameters_of

    workload = workloads.create("gpt2", size="tiny")
    counted = counts_on_meta(workload, batch_size=2, dtype="fp32")
    params = parameters_of(counted["parameters"])
    assert counted["tokens_per_batch"] == 2 * workload.tokens_per_sample()  # said beside the activations counted

    def table(grads):
        return sorted((g.index, g.nbytes, g.dtype.removeprefix("torch."), g.block, g.name) for g in grads)

    assert table(params.trained) == table(gpt2_profile.grads)
    assert table(params.frozen) == table(gpt2_profile.frozen)
    assert {g.block for g in params.trained} > {None}  # blocks found, the root too
    # the names too (ZeRO's answer names the largest parameter); a table from before them names none
    assert parameters_of([row[:4] for row in counted["parameters"]]).trained[0].name == ""


# ---------------------------------------------------------------- the links, and a run's fsdp rows


def test_sharded_links_are_each_collectives_own_fit_else_the_all_reduces():
    all_reduce = net.Link(alpha_s=1 * MS, busbw_bytes_per_s=MIB / MS, source="ar")
    gathers = {2: net.Link(alpha_s=0.0, busbw_bytes_per_s=2 * MIB / MS, source="ag", op="all_gather")}
    measured = net.Network({2: all_reduce}, {}, "c", {"all_gather": gathers})
    gather, scatter = net.sharded_links(measured, 2)
    assert (gather.source, scatter.source) == ("ag", "ar")
    # nccl-tests' sizes and bus factors: 4 MiB gathered moves 2 MiB a link; 4 MiB scattered likewise
    assert gather.collective_s("all_gather", 4 * MIB, 2) / MS == pytest.approx(1.0)
    assert scatter.collective_s("reduce_scatter", 4 * MIB, 2) / MS == pytest.approx(1.0 + 2.0)


def _row(impl: str, world: int, step_ms: float, options: dict | None = None) -> dict:
    return {"config_id": f"{impl}{world}{step_ms}", "status": "ok", "impl": impl, "device": "cpu",
            "impl_options": json.dumps(options or {}), "bucket_cap_mb": 25.0, "workload": "w", "size": "tiny",
            "batch_size": 2, "dtype": "fp32", "optimizer": "adam", "world_size": world,
            "step_ms_median": step_ms}  # fmt: skip


def _profile_rows() -> pd.DataFrame:
    setup = {"workload": "w", "size": "tiny", "batch_size": 2, "dtype": "fp32", "optimizer": "adam"}
    return pd.DataFrame([{**setup, "param_index": g.index, "param_name": g.name, "bytes": g.nbytes,
                          "param_dtype": g.dtype, "requires_grad": True, "ready_ms": g.ready_s / MS,
                          "used_ms": g.used_s / MS, "block": g.block, "forward_ms": 10.0, "backward_ms": 12.0,
                          "optimizer_ms": 4.0} for g in two_blocks().grads])  # fmt: skip


def test_a_runs_fsdp_rows_are_checked_serially_on_the_cpu_with_fsdps_own_cost_from_one_rank():
    """The profile's 26 ms step is the baseline's at one rank (no scaling); FSDP at one rank took 3 ms more: its
    own cost. On a given network of 1 ms a MiB of bus traffic, at two ranks, each MiB gathered or scattered moves
    half a MiB: the blocking step adds (19 + 11) / 2 ms to 22 ms of compute, 2 ms of optimizer and 3 own."""
    configs = pd.DataFrame([_row("local", 1, 26.0), _row("fsdp", 1, 29.0), _row("fsdp", 2, 40.0),
                            _row("fsdp", 2, 44.0), _row("fsdp", 2, 50.0, {"param_dtype": "bf16"}),
                            _row("fsdp", 2, 45.0, {"reshard_after_forward": False})])  # fmt: skip
    network = net.given_network(busbw_bytes_per_s=MIB / MS, latency_s=0.0)
    checks = {c["impl_options"]: c for c in fsdp.run_checks(configs, _profile_rows(), network, cores=None)}
    assert set(checks) == {"{}", '{"reshard_after_forward": false}'}  # bf16 gathers: not modelled
    plain = checks["{}"]
    assert plain["measured_ms"] == pytest.approx((40.0 * 44.0) ** 0.5)
    assert plain["fsdp_own_ms"] == pytest.approx(3.0)
    assert plain["predicted_ms"] == pytest.approx(22 + (19 + 11) / 2 + 4 / 2 + 3)
    assert plain["gather_source"] is None and plain["network"].startswith("given")  # the all-reduce's link stood in
    kept = checks['{"reshard_after_forward": false}']
    assert kept["predicted_ms"] == pytest.approx(22 + (11 + 11) / 2 + 4 / 2 + 3) and kept["fsdp_gathers"] == 3
    # two ranks on one core: the compute slowed ×2 (no baseline at w2 to measure more), as predict --run prices it
    shared = {c["impl_options"]: c for c in fsdp.run_checks(configs, _profile_rows(), network, cores=1)}["{}"]
    assert shared["compute_ms"] == pytest.approx(2 * plain["compute_ms"])


def test_fsdps_own_cost_left_out_of_a_gpu_step_is_beyond_ddps_only_where_the_repeats_tell_ddps_apart(capsys):
    """FSDP's 30 ms at one rank over the baseline, DDP's 20 ms: 10 ms beyond DDP's where three repeats a side tell
    DDP's step from the baseline's; where they do not (a busy machine: 804-1470 ms against 804-825), DDP's reading
    is noise, and subtracting it hid all of FSDP's own cost."""
    from harness.perfmodel.schedule import Calibration

    setup = {"workload": "w", "size": "tiny", "batch_size": 2, "dtype": "fp32", "optimizer": "adam"}
    local = [_row("local", 1, ms) for ms in (100.0, 100.5, 99.5)]
    fsdp_rows = [_row("fsdp", 1, ms) for ms in (130.0, 130.5, 129.5)]
    told = pd.DataFrame([*local, *fsdp_rows, *(_row("stock", 1, ms) for ms in (120.0, 120.5, 119.5))])
    kwargs = {"setup": setup, "run_scale": 1.0, "carried": False}
    side = own_costs.fsdp_for_cluster(two_blocks(), Calibration(), configs=told, **kwargs)
    assert side.left_out_s == pytest.approx(10 * MS, rel=0.01)
    assert side.note.endswith("its 10 ms beyond DDP's (20 ms) is 10 ms on your step, its step's long end (the choice "
                              "weighs both)")  # fmt: skip
    noisy = pd.DataFrame([*local, *fsdp_rows, *(_row("stock", 1, ms) for ms in (101.0, 140.0, 128.0))])
    # the compute ×3 on the profile, the run's own step ×1.5 on it: its own cost, the run's, ×2 (a walkthrough read
    # the profile's ×5.938 beside 17.2 → 84.7 ms, ×4.93 unsaid)
    side = own_costs.fsdp_for_cluster(
        two_blocks(), Calibration(compute_scale=3.0), configs=noisy, **{**kwargs, "run_scale": 1.5}
    )
    assert side.left_out_s == pytest.approx(60 * MS, rel=0.01) and side.scale == pytest.approx(2.0)
    untold = "DDP's own cost, 21.9 ms a step at one rank, not told from noise: none of it taken"
    # a user read '33.2 ms beyond DDP's' where nothing of DDP's was taken; the scale's chain, said once apart (a page
    # said it in each note, its ×2 twice in a sentence: '×2 … (… this ×2 times the ×1.5 …)')
    assert side.note.endswith(
        f"all of it ({untold}) is 60 ms on your step, its step's long end (the choice weighs both)"
    )
    from harness.perfmodel.schedule import scaled_words

    assert scaled_words(side.scale, 1.5) == ("scaled ×2 from the run's step to yours (the profile's compute is scaled "
                                             "×3: this ×2 times the ×1.5 that first matched the profile to the run's "
                                             "own step)")  # fmt: skip
    from harness.commands.console.predict import scaling
    from harness.commands.console.predict.full_size import fsdp_own_note

    # the console says DDP's figure and its status once, on DDP's own line (a walkthrough read '28.7 ms ... left out'
    # there and '28.7 ms ..., taken as 0' in FSDP's note); FSDP's note then the figure left out and its scale
    scaling.say_run_calibration(two_blocks(), noisy, setup, scaled=True, carried=False)
    assert capsys.readouterr().out == ("ddpbench predict: DDP's own cost 21.9 ms a step at one rank, not told from "
                                       "noise, a CPU's, left out of the GPU step given (an H200's was 3.3-4.0 % of "
                                       "its step)\n")  # fmt: skip
    assert fsdp_own_note(side) == (
        "without FSDP's own cost, unmeasured on a GPU: a CPU's puts up to 60 ms more on it (none of DDP's own cost, "
        "not told from noise, taken from it), scaled ×2 from the run's step to yours"
    )
    assert "21.9" not in fsdp_own_note(side) and "taken as 0" not in fsdp_own_note(side)
    # DDP's step below the baseline's at one rank: its 0, though left out, says it was taken as 0 and why
    below = pd.DataFrame([*local, *fsdp_rows, *(_row("stock", 1, ms) for ms in (80.0, 80.5, 79.5))])
    scaling.say_run_calibration(two_blocks(), below, setup, scaled=True, carried=False)
    said = capsys.readouterr().out
    assert said.startswith("ddpbench predict: DDP's own cost 0 ms a step at one rank (taken as 0: ") and said.endswith(
        "), a CPU's, left out of the GPU step given (an H200's was 3.3-4.0 % of its step)\n"
    )
    assert fsdp_own_note(side._replace(left_out_s=0.0)) == side.note


def test_one_repeat_a_side_tells_ddps_own_cost_by_its_steps_spread_and_charges_fsdp_only_beyond_it():
    """One repeat a side gives no interval: DDP's own cost was then taken as noise and FSDP charged all of its own
    (a walkthrough: FSDP's 427 ms at one rank, DDP's 433, read as 427 ms more than DDP's). Where every timed step of
    DDP's lies above the baseline's (its p10 above their p90), DDP's is told and subtracted, as ZeRO's own is told
    from DDP's; FSDP's no more than DDP's leaves nothing beyond it. Steps that overlap: DDP's taken as 0, said."""
    from harness.commands.console.predict.full_size import fsdp_own_note
    from harness.perfmodel.schedule import Calibration

    setup = {"workload": "w", "size": "tiny", "batch_size": 2, "dtype": "fp32", "optimizer": "adam"}

    def one(impl: str, ms: float, spread: float) -> dict:
        return {**_row(impl, 1, ms), "step_ms_p10": ms - spread, "step_ms_p90": ms + spread}

    kwargs = {"setup": setup, "run_scale": 1.0, "carried": False}
    walkthrough = pd.DataFrame([one("local", 1000.0, 20.0), one("stock", 1433.0, 20.0), one("fsdp", 1427.0, 20.0)])
    side = own_costs.fsdp_for_cluster(two_blocks(), Calibration(compute_scale=2.0), configs=walkthrough, **kwargs)
    assert side.left_out_s == 0.0 and not side.untold
    assert fsdp_own_note(side) == ("FSDP's own cost at one rank, 427 ms, a CPU's, is no more than DDP's (433 ms): "
                                   "left out of both steps alike")  # fmt: skip
    beyond = walkthrough.assign(step_ms_median=[1000.0, 1433.0, 1533.0], step_ms_p10=[980.0, 1413.0, 1513.0],
                                step_ms_p90=[1020.0, 1453.0, 1553.0])  # fmt: skip
    side = own_costs.fsdp_for_cluster(two_blocks(), Calibration(compute_scale=2.0), configs=beyond, **kwargs)
    assert side.left_out_s == pytest.approx(2 * 100 * MS) and "its 100 ms beyond DDP's (433 ms)" in side.note
    overlapping = beyond.assign(step_ms_p10=[980.0, 900.0, 1513.0])  # DDP's steps reach below the baseline's p90
    side = own_costs.fsdp_for_cluster(two_blocks(), Calibration(compute_scale=2.0), configs=overlapping, **kwargs)
    assert side.left_out_s == pytest.approx(2 * 533 * MS) and "not told from noise, taken" in fsdp_own_note(side)


def test_the_what_if_pages_left_out_fsdp_cost_says_what_of_ddps_was_taken_from_it():
    """The page's steps table put 'FSDP's, X ms more than DDP's' under FSDP2's step where DDP's own cost was taken as 0
    (its repeats not told from noise, or its step no slower than the baseline's: a CPU run read 102 ms 'more than
    DDP's', DDP's own 0): the figure is then all of FSDP's own cost, said with the console's why; where DDP's was
    taken from it, 'more than DDP's' as before."""
    from harness.perfmodel.clusters import cluster
    from reports.pages.whatif import steps_table
    from reports.pages.whatif.page import best_rows, predicted_rows

    local = [_row("local", 1, ms) for ms in (100.0, 100.5, 99.5)]
    fsdp_rows = [_row("fsdp", 1, ms) for ms in (130.0, 130.5, 129.5)]

    def caption(stock_ms: tuple[float, ...]) -> str:
        configs = pd.DataFrame([*local, *fsdp_rows, *(_row("stock", 1, ms) for ms in stock_ms)])
        rows = predicted_rows(_profile_rows(), configs, cluster.load("dgx-h100"), caps=[25.0], local_step_ms=1000.0,
                              worlds=[8])  # fmt: skip
        return steps_table.best_table(best_rows(rows)).split("<p class=caption>")[1]

    told = caption((120.0, 120.5, 119.5))  # DDP's 20 ms told: FSDP's 10 ms beyond it, ×10
    assert "(FSDP's, 100 ms more than DDP's, scaled" in told
    untold = caption((101.0, 140.0, 128.0))  # DDP's 21.9 ms not told from noise: all of FSDP's 30 ms
    assert ("(FSDP's, 300 ms, all of its own cost (DDP's own cost, 21.9 ms a step at one rank, not told from noise: "
            "none of it taken), scaled") in untold  # fmt: skip
    faster = caption((95.0, 95.5, 94.5))  # DDP's step below the baseline's: its own taken as 0, nothing subtracted
    assert "(FSDP's, 300 ms, all of its own cost, scaled" in faster and "more than DDP's" not in faster
    fsdp_rows[:] = [_row("fsdp", 1, ms) for ms in (106.0, 95.0, 115.0)]  # FSDP's own steps overlap the baseline's
    noisy = caption((95.0, 95.5, 94.5))  # its figure the long end of a range from 0: said not told
    assert "all of its own cost, not told from noise at one rank, scaled" in noisy


def test_a_gpu_runs_own_cost_is_in_fsdps_step_a_point_where_a_cpus_bounds_it_and_may_open_the_pick():
    """The same run's rows, FSDP's own cost 10 ms beyond DDP's at one rank: where they are a GPU's (`carried`), that
    cost is in FSDP2's predicted step, a point the choice ranks as before; where a CPU's is scaled to a GPU step given,
    it is no GPU's: FSDP2's step is a range from none of it to all of it, and the choice is decided only where it holds
    at both ends (a walkthrough's table read fsdp +246 % behind while a note said it tied without that cost)."""
    from harness.commands.console import predictions
    from harness.perfmodel.pick import choice, choice_table
    from harness.perfmodel.schedule import Calibration

    setup = {"workload": "w", "size": "tiny", "batch_size": 2, "dtype": "fp32", "optimizer": "adam"}
    configs = pd.DataFrame([*(_row("local", 1, ms) for ms in (100.0, 100.5, 99.5)),
                            *(_row("fsdp", 1, ms) for ms in (130.0, 130.5, 129.5)),
                            *(_row("stock", 1, ms) for ms in (120.0, 120.5, 119.5))])  # fmt: skip
    rows = [{"impl": impl, "impl_options": "{}", "world_size": 8, "total_mb": 1024.0, "activation_mb": 1024.0,
             "measured": False} for impl in ("stock", "fsdp")]  # fmt: skip
    state = predictions.labelled(pd.DataFrame(rows))

    def frame(carried: bool, ddp_ms: float) -> pd.DataFrame:
        side = own_costs.fsdp_for_cluster(two_blocks(), Calibration(), configs=configs, setup=setup, run_scale=1.0,
                                carried=carried)  # fmt: skip
        ddp = pd.DataFrame({"bucket_cap_mb": [25.0], "step_ms": [ddp_ms], "world_size": [8]})
        return fsdp.with_fsdp(ddp, side.profile, gather=PerMiB(1.0), scatter=PerMiB(1.0), world_size=8,
                              own_s=side.own_s, left_out_s=side.left_out_s)  # fmt: skip

    bare = float(frame(False, 0.0)["fsdp_step_ms"].iloc[0])  # FSDP2's scheduled step, no own cost in it
    gpu = frame(True, bare + 5.0)  # a GPU's 30 ms over the baseline is in its step: stock, 5 ms over bare, is faster
    assert float(gpu["fsdp_step_ms"].iloc[0]) == pytest.approx(bare + 30.0, rel=1e-4)
    (point,) = choice.choose(state, [gpu], 80.0)
    assert [c.strategy for c in point.picked] == ["stock"] and not point.open_on and not point.others[0].bounded
    (row,) = choice_table.table_rows(state, [gpu], 80.0)
    assert row[2:5] == (f"{bare + 5:.4g}", "fsdp", f"+{(bare + 30) / (bare + 5) - 1:.1%}") and row[-1] == ""
    # a CPU's: 10 ms beyond DDP's left out of the step, its long end; stock 20 % behind bare FSDP2: open
    cpu = frame(False, bare * 1.2)
    (bounded,) = choice.choose(state, [cpu], 80.0)
    assert [c.strategy for c in bounded.picked] == ["fsdp", "stock"] and bounded.open_on == ("FSDP2",)
    (row,) = choice_table.table_rows(state, [cpu], 80.0)
    # the step booked once FSDP's cost is measured: fsdp's without it to stock's, faster than fsdp's with all of it
    assert row[1:3] == ("fsdp or stock at 25 MiB", f"{bare:.4g}–{bare * 1.2:.4g}")
    assert row[-1] == (
        "open until FSDP's own cost is measured on a GPU (bench --gpus 1 --impls local,fsdp there): "
        "fsdp without it, stock with a CPU's, scaled"
    )
    # stock 20 ms behind bare FSDP2, more than the 10 ms it may add: fsdp at both ends, its step a range
    (decided,) = choice.choose(state, [frame(False, bare + 20.0)], 80.0)
    assert [c.strategy for c in decided.picked] == ["fsdp"] and not decided.open_on
    (row,) = choice_table.table_rows(state, [frame(False, bare + 20.0)], 80.0)
    assert (
        row[2] == f"{bare:.4g}–{bare + 10:.4g}"
        and row[-1] == "fsdp's step from none of its own cost, unmeasured on a GPU, to a CPU's, scaled"
    )


# ---------------------------------------------------------------- frozen parameters


NAN = float("nan")


def test_frozen_parameters_are_gathered_with_their_block_but_never_reduce_scattered():
    profile = two_blocks()
    frozen = (Grad(4, 2 * MIB, "float32", NAN, "blocks.0.frozen", used_s=1 * MS, block=0),)
    with_frozen = Profile(profile.forward_s, profile.backward_s, profile.optimizer_s, profile.grads, frozen)
    link = PerMiB(1.0)
    step = fsdp.predict_fsdp(with_frozen, gather=link, scatter=link, world_size=4, blocking=True)
    # gathers: root 3, blocks 6 and 4, again 6 and 4; reduce-scatters: 3, 4, 4 (the frozen 2 MiB not among them)
    assert (step.gather_s / MS, step.scatter_s / MS) == pytest.approx((23, 11))
    assert step.step_s / MS == pytest.approx(22 + 23 + 11 + 4 / 4)


def test_a_frozen_stem_is_prefetched_for_backward_and_the_first_trained_blocks_scatter_waits_for_the_end():
    """A frozen stem (block 0) before the one trained block: backward never runs through it, yet block 1's
    pre-backward prefetches it (torch gathers the unit before, and discards it). Block 1's inputs need no
    gradient, so autograd never calls its post-backward hook: its reduce-scatter waits for backward's end. A
    frozen block after it (block 2) is on backward's way back, and gathered again."""
    grads = (Grad(1, 4 * MIB, "float32", 5 * MS, "b.1.w", used_s=3 * MS, block=1),)
    frozen = (Grad(0, 2 * MIB, "float32", NAN, "b.0.w", used_s=0.0, block=0),
              Grad(2, MIB, "float32", NAN, "b.2.w", used_s=6 * MS, block=2))  # fmt: skip
    profile = Profile(10 * MS, 7 * MS, 2 * MS, grads, frozen)  # backward: 5 ms through block 1, 2 after it
    found = fsdp.units(profile)
    assert [(u.nbytes, u.scattered, u.in_backward, u.scattered_last) for u in found.blocks] == [
        (2 * MIB, 0, False, True), (4 * MIB, 4 * MIB, True, True), (MIB, 0, True, False)]  # fmt: skip
    blocking = fsdp.predict_fsdp(profile, gather=PerMiB(1), scatter=PerMiB(1), world_size=2, blocking=True)
    # forward: 2 + 4 + 1; backward: blocks 2, 1 and the stem 2 again
    assert (blocking.gathers, blocking.gather_s / MS, blocking.scatter_s / MS) == pytest.approx((6, 14, 4))
    assert blocking.step_s / MS == pytest.approx(17 + 14 + 4 + 2 / 2)
    # overlapped: forward ends at 13 (gathers 0-2, 2-6, 6-7 against compute 2-5, 6-9, 9-13); backward gathers
    # 13-14, 14-18 (block 1 waits), the stem 18-20; block 1 computes 18-23, the rest to 25; its scatter 25-29
    step = fsdp.predict_fsdp(profile, gather=PerMiB(1), scatter=PerMiB(1), world_size=2)
    assert step.step_s / MS == pytest.approx(29 + 2 / 2)


def test_units_count_no_time_twice_and_leave_out_blocks_whose_forward_never_ran():
    """Block 1's last gradient comes before block 2's backward ends (out of order): it is given none of block 2's
    time. Block 3 never ran forward (an unused layer): it is no unit, and the profile still has its step."""
    grads = (Grad(2, MIB, "float32", 2 * MS, "b.2.w", used_s=6 * MS, block=2),
             Grad(1, MIB, "float32", 1 * MS, "b.1.w", used_s=3 * MS, block=1),
             Grad(0, MIB, "float32", 6 * MS, "b.0.w", used_s=1 * MS, block=0),
             Grad(3, MIB, "float32", NAN, "b.3.w", used_s=None, block=3))  # fmt: skip
    found = fsdp.units(Profile(9 * MS, 6 * MS, MS, grads))
    assert [u.name for u in found.blocks] == ["b.0", "b.1", "b.2"]
    assert [u.backward_s / MS for u in found.blocks] == pytest.approx([4, 0, 2])
    assert found.compute_s / MS == pytest.approx(9 + 6)


def test_a_stored_profile_keeps_its_frozen_parameters_apart_from_the_gradients():
    rows = _profile_rows()
    rows = pd.concat([rows, rows.iloc[[0]].assign(param_index=9, requires_grad=False, ready_ms=None)])
    profile = profile_from_rows(rows)
    assert len(profile.grads) == 4 and [g.index for g in profile.frozen] == [9]
    assert math.isnan(profile.frozen[0].ready_s) and profile.frozen[0].used_s == pytest.approx(9 * MS)


def test_an_fsdp_step_faster_than_the_baseline_beyond_noise_is_no_own_cost():
    """The user's vit_l_16 run: local (first in its launch) 6896 ms at one rank, fsdp 2514: no cost, null, and said."""
    from harness.perfmodel import measured
    from harness.perfmodel.schedule import Calibration
    from harness.perfmodel.sharding import own_costs

    setup = {"workload": "w", "size": "tiny", "batch_size": 2, "dtype": "fp32", "optimizer": "adam"}
    spread = {"step_ms_p10": 5300.0, "step_ms_p90": 7500.0}
    one = pd.DataFrame([{**_row("local", 1, 6896.0), **spread}, {**_row("fsdp", 1, 2514.0), "step_ms_p10": 2420.0,
                                                                    "step_ms_p90": 2650.0}])  # fmt: skip
    assert measured.fsdp_own_cost_s(one, setup) is None  # was max(0, -4382 ms): a measured 0
    note = own_costs.fsdp_own_unknown(Calibration(compute_scale=1.0), one, setup)
    assert "2514 ms, beat the baseline's (6896 ms)" in note and "measurement problem" in note
    assert "(the baseline ran first in its launch in 1 of its 1 repeat at one rank)" in note  # older: always first
    later = own_costs.fsdp_own_unknown(Calibration(compute_scale=1.0), one.assign(launch_position=[1, 0]), setup)
    assert "in 0 of its 1 repeat at one rank" in later  # its place, as the row records it
    overlapping = one.assign(step_ms_p10=[2000.0, 2420.0])  # one repeat a side, steps overlapping: noise, taken as 0
    assert measured.fsdp_own_cost_s(overlapping, setup) == 0.0
    repeats = pd.DataFrame([_row("local", 1, ms) for ms in (30.0, 31.0, 30.5)]
                           + [_row("fsdp", 1, ms) for ms in (20.0, 20.5, 21.0)])  # fmt: skip
    assert measured.fsdp_own_cost_s(repeats, setup) is None  # the interval of their ratio lies below 1
    told = pd.DataFrame([_row("local", 1, ms) for ms in (30.0, 31.0)] + [_row("fsdp", 1, ms) for ms in (36.0, 37.0)])
    assert measured.fsdp_own_cost_s(told, setup) == pytest.approx(0.006, rel=0.05)
    assert measured.fsdp_own_cost_told(told, setup) and not measured.fsdp_own_cost_told(overlapping, setup)


def test_fsdps_own_cost_not_told_from_noise_bounds_its_step_from_0_never_a_figure():
    """FSDP's step minus the baseline's was taken as measured whenever FSDP was not faster beyond noise (31 against
    30 ms, their spreads overlapping, added 1 ms to a GPU run's FSDP2 step as a figure), while DDP's own cost had to
    be told from noise: now FSDP's is too. Not told, it bounds the step from 0 (carried or not), said so in the note,
    the console's line and the what-if page's caption; a difference of 0 is said taken as 0, not a measured 0."""
    from harness.commands.console.predict.full_size import fsdp_own_note
    from harness.perfmodel.schedule import Calibration
    from reports.pages.whatif.steps_table import own_over

    setup = {"workload": "w", "size": "tiny", "batch_size": 2, "dtype": "fp32", "optimizer": "adam"}
    noisy = pd.DataFrame([_row("local", 1, ms) for ms in (30.0, 25.0, 35.0)]
                         + [_row("fsdp", 1, ms) for ms in (31.0, 26.0, 36.0)])  # fmt: skip
    own = measured.fsdp_own_cost_s(noisy, setup)
    assert own == pytest.approx(1.0 * MS, rel=0.1) and not measured.fsdp_own_cost_told(noisy, setup)
    kwargs = {"setup": setup, "run_scale": 1.0}
    gpu = own_costs.fsdp_for_cluster(
        two_blocks(), Calibration(compute_scale=2.0), configs=noisy, carried=True, **kwargs
    )
    assert gpu.own_s is None and gpu.left_out_s == pytest.approx(2 * own) and gpu.noise == "the run's"  # was a point
    assert "not told from noise (--repeats 3 may tell it): 0 to 2" in gpu.note
    assert fsdp_own_note(gpu).startswith("without FSDP's own cost, not told from noise at one rank: the run's puts up")
    cpu = own_costs.fsdp_for_cluster(
        two_blocks(), Calibration(compute_scale=2.0), configs=noisy, carried=False, **kwargs
    )
    assert cpu.left_out_s == pytest.approx(2 * own) and cpu.noise == "a CPU's"  # DDP's none here: all of it
    assert "a CPU's, no GPU's, not told from noise: all of it" in cpu.note
    assert "unmeasured on a GPU, and not told from noise at one rank: a CPU's puts up to" in fsdp_own_note(cpu)
    assert own_over(cpu) == ", all of its own cost, not told from noise at one rank"
    level = noisy.assign(step_ms_median=[30.0, 25.0, 35.0, 30.0, 25.0, 35.0])  # no slower: 0, not a measured 0
    zero_side = own_costs.fsdp_for_cluster(two_blocks(), Calibration(), configs=level, carried=True, **kwargs)
    assert (zero_side.own_s, zero_side.left_out_s) == (0.0, 0.0)
    assert zero_side.note == "FSDP's own cost at one rank not told from noise (--repeats 3 may tell it): taken as 0"

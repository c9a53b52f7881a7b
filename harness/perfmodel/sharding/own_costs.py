"""Each strategy's own cost beyond its communication as a cluster prediction takes it: measured at one rank in the
run (`harness.perfmodel.measured`), scaled with the compute where --local-step-ms scales it, carried where the run's
device is the cluster's, left out (and bounded: the step a range from none of it to all of it) where it is a CPU's
and the compute a GPU's, and from 0 where the run's steps do not tell it from noise; each said in words.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from harness.analysis import roles, stats
from harness.perfmodel import measured
from harness.perfmodel.schedule import ON_YOUR_STEP, Profile, calibrate
from harness.results.values import ms_text


class FsdpOwnCost(NamedTuple):
    """FSDP's side of a cluster prediction (`fsdp_for_cluster`)."""

    profile: Profile  # calibrated as DDP's is, less DDP's own cost
    own_s: float | None  # FSDP's own cost added to its step; None: none added (not measured, or a CPU's left out)
    note: str  # what FSDP2's step leaves out, said beside it ('' where nothing)
    left_out_s: float = 0.0  # a CPU's own cost left out, beyond DDP's (also left out), scaled as the compute is
    scale: float = 1.0  # that scale: the compute's from the run's step to the GPU step given (its ×, said)
    untold: str = ""  # where DDP's own cost was not told from noise, said: the left-out figure is all of FSDP's
    beyond_ddp: bool = False  # DDP's own cost (> 0) was taken from the left-out figure; false: it is all of FSDP's
    noise: str = ""  # whose steps at one rank did not tell FSDP's own cost from noise ("a CPU's", "the run's"): from 0


def fsdp_for_cluster(raw: Profile, calibration, *, configs, setup, run_scale: float, carried: bool) -> FsdpOwnCost:
    """The profile (calibrated as DDP's is, less DDP's own cost) and FSDP's own cost measured at one rank in the
    run (`measured.fsdp_own_cost_s`; None without a usable FSDP step there), scaled with the compute where
    --local-step-ms scales it (`run_scale`: the run's own scale), left out where it is a CPU's and the compute a
    GPU's (not `carried`, as DDP's is), with how much more than DDP's it was, scaled: what FSDP2's lead may be wrong
    by (an H200 measured FSDP's own cost at one GPU 3-135 % of gpt2's and resnet50's full step, DDP's 1-11 %)."""
    profile = calibrate(raw, dataclasses.replace(calibration, reducer_s=0.0))
    own_s = measured.fsdp_own_cost_s(configs, setup) if configs is not None else None
    if own_s is None and configs is not None:
        return FsdpOwnCost(profile, None, fsdp_own_unknown(calibration, configs, setup))
    scaled = calibration.compute_scale / run_scale if run_scale else 1.0
    noise = configs is not None and not measured.fsdp_own_cost_told(configs, setup)  # its steps there overlap
    if noise and (carried or not own_s):  # no figure to add: from 0 (a range, the choice weighs both ends), or 0
        said, scaled_s = f", {ms_text(own_s * 1e3)} ms," * bool(own_s), own_s * scaled
        range_ = f"0 to {ms_text(scaled_s * 1e3)} ms {ON_YOUR_STEP}, its step's range" if own_s else "taken as 0"
        return FsdpOwnCost(profile, None if own_s else 0.0, f"FSDP's own cost at one rank{said} not told from noise "
                          f"(--repeats 3 may tell it): {range_}", scaled_s, scaled, noise="the run's")  # fmt: skip
    if carried or not own_s:
        return FsdpOwnCost(profile, (own_s or 0.0) * scaled if carried else 0.0, "")
    ddp_s = measured.ddp_own_cost_s(configs, setup) or 0.0
    told = not ddp_s or measured.ddp_own_cost_told(configs, setup)  # DDP's noise would hide FSDP's own: not taken
    own, ddp = ms_text(own_s * 1e3), ms_text(ddp_s * 1e3)
    if told and own_s <= ddp_s:  # DDP's step leaves out as much or more: alike, nothing beyond it
        return FsdpOwnCost(profile, None, f"FSDP's own cost at one rank, {own} ms, a CPU's, is no more than DDP's "
                                         f"({ddp} ms): left out of both steps alike")  # fmt: skip
    beyond_s = (own_s - (ddp_s if told else 0.0)) * scaled
    untold = "" if told else f"DDP's own cost, {ddp} ms a step at one rank, not told from noise: none of it taken"
    more = f"its {ms_text((own_s - ddp_s) * 1e3)} ms beyond DDP's ({ddp} ms)" if told and ddp_s else "all of it"
    note = (
        f"FSDP's own cost at one rank, {own} ms, a CPU's, no GPU's{', not told from noise' * noise}: {more}"
        f"{f' ({untold})' * bool(untold)} "
        f"is {ms_text(beyond_s * 1e3)} ms {ON_YOUR_STEP}, its step's long end (the choice weighs "
        "both)"
    )
    return FsdpOwnCost(profile, None, note, beyond_s, scaled, untold, told and ddp_s > 0, "a CPU's" * noise)


class ZeroOwnCost(NamedTuple):
    """ZeRO's own cost as a cluster prediction takes it (`zero_for_cluster`)."""

    added_s: float  # added to every predicted step
    left_out_s: float = 0.0  # a CPU's, left out of a GPU's step given, scaled as the compute is
    note: str = ""  # said where it is left out, or not told from noise
    noise: bool = False  # its steps at one rank did not tell it from DDP's: from 0 (`left_out_s` its long end)


def zero_for_cluster(configs, setup: dict, calibration, *, run_scale: float, carried: bool) -> ZeroOwnCost:
    """ZeRO's own cost as a cluster prediction adds it: measured at one rank in the run
    (`measured.zero_own_cost_s`), scaled with the compute where --local-step-ms scales it (`run_scale`: the run's own
    scale); left out where it is a CPU's and the compute a GPU's (not `carried`, as DDP's own cost is), and said."""
    found = measured.zero_own_cost_found(configs, setup) if configs is not None else None
    if not found:
        return ZeroOwnCost(0.0)
    own_s, scale = found[0], calibration.compute_scale / run_scale if run_scale else 1.0
    if own_s <= 0:  # no slower than DDP's (beyond noise or not): no cost to add, and said
        return ZeroOwnCost(0.0, 0.0, "ZeRO's own cost at one rank taken as 0: its step there is no slower than DDP's")
    if not found[1]:  # above DDP's, but not told from noise: no figure to add, a range from 0
        said = (f"ZeRO's own cost at one rank beyond DDP's, {ms_text(own_s * 1e3)} ms, not told from noise "
                f"(--repeats 3 may tell it): 0 to {ms_text(own_s * scale * 1e3)} ms {ON_YOUR_STEP}, "
                "its step's range")  # fmt: skip
        return ZeroOwnCost(0.0, own_s * scale, said, noise=True)
    if carried:
        return ZeroOwnCost(own_s * scale)
    return ZeroOwnCost(
        0.0,
        own_s * scale,
        f"ZeRO's own cost at one rank beyond DDP's, {ms_text(own_s * 1e3)} ms, a CPU's, no GPU's: "
        f"{ms_text(own_s * scale * 1e3)} ms {ON_YOUR_STEP}, its step's long end (the choice weighs "
        "both)",
    )


def fsdp_own_unknown(calibration, configs=None, setup=None) -> str:
    """Said beside FSDP2's step where the run measured no usable FSDP step at one rank (none, or one faster than the
    baseline's beyond noise: `measured.below_baseline`): DDP's step carries DDP's own (`reducer_s`), FSDP2's none."""
    reducer = calibration.reducer_s
    ddp = f", while DDP's step carries DDP's own ({ms_text(reducer * 1e3)} ms)" if reducer else ""
    fast = measured.below_baseline(configs, setup, roles.shards_parameters) if configs is not None else None
    why = (f"its step at one rank, {ms_text(fast[0])} ms, beat the baseline's ({ms_text(fast[1])} ms), which does "
           f"less, beyond noise: a measurement problem ({baseline_first(configs, setup)}), no cost" if fast else
           "the run has no FSDP step at one rank to measure it by")  # fmt: skip
    return (f"FSDP's own cost not added: {why}{ddp}; FSDP2's step reads short by whatever its own cost is: bench it "
            "at one GPU (--impls fsdp) to count it")  # fmt: skip


def baseline_first(configs, setup: dict) -> str:
    """How often the baseline ran first in its launch at one rank, in words: said where a strategy beat it there
    beyond noise (`measured.below_baseline`), since the first configuration after a launch's processes start pays
    what is still cold. A run from before `launch_position` was recorded ran it first in every launch."""
    rows = measured.setup_rows(configs, setup)
    local = rows[roles.flag(rows, "baseline") & (rows["world_size"] == 1)]
    places = local["launch_position"].fillna(0) if "launch_position" in local else [0] * len(local)
    first = sum(int(place) == 0 for place in places)
    return f"the baseline ran first in its launch in {first} of its {stats.repeats_text(len(local))} at one rank"

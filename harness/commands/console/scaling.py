"""What `predict` says of the compute it predicts from: how the run's one-rank rows and --local-step-ms scaled the
profile, DDP's own cost there, and the one-rank step every scaling efficiency is measured against."""

from __future__ import annotations

from harness.commands import console
from harness.results.values import ms_text


def say_run_calibration(profile, configs, setup: dict, *, scaled: bool, carried: bool = True) -> None:
    """What the run's one-rank rows changed: the compute's scale, and DDP's own cost (said even as 0)."""
    from harness.analysis import roles
    from harness.perfmodel import predict

    role, step_s = predict.calibration_target(configs, setup)
    if step_s:
        whose = "baseline" if role == "baseline" else f"{roles.reference_name()}'s (no {roles.baseline_name()} row)"
        console.say(f"ddpbench predict: compute scaled ×{step_s / profile.local_step_s:.4g} to the run's {whose} "
                    f"step at one rank ({step_s * 1e3:.4g} ms over every repeat; the profile's own steps "
                    f"{profile.local_step_s * 1e3:.4g} ms)")  # fmt: skip
    if (difference_s := predict.reference_minus_baseline_s(configs, setup)) is not None:
        with_compute = " and scaled with the compute" if scaled else ""
        pooled = (f"{roles.reference_name()}'s step at one rank, every cap pooled (geometric mean over repeats), "
                  f"minus {roles.baseline_name()}'s")  # fmt: skip
        measured = pooled if difference_s >= 0 else f"taken as 0: {pooled} is {ms_text(difference_s * 1e3)} ms, noise"
        added = f"added to backward{with_compute}" if carried else (
            "a CPU's, left out of the GPU step given: its share of a CPU's step is no GPU's (3.3-4.0 % of the "
            "step on an H200, docs/measured/gpu-check-h200.md), so the steps below lack DDP's own cost and their "
            "efficiencies read about that much high")  # fmt: skip
        console.say(f"ddpbench predict: DDP's own cost {ms_text(max(difference_s, 0) * 1e3)} ms a step at one rank "
                    f"({measured}), {added}")  # fmt: skip


def say_one_rank_step(
    calibrated,
    calibration,
    *,
    device: str,
    local_step_ms: float | None,
    own_measured: bool,
    own_inside: bool,
    optimizer_ms: float | None = None,
) -> None:
    """The one-rank step every efficiency below is measured against, and what it rests on (its parts whenever a
    run measured DDP's own cost, 0 included: a noisy run's reference may be no slower than its baseline)."""
    own_ms = calibration.reducer_s * 1e3
    step_ms = calibrated.local_step_s * 1e3
    if local_step_ms:
        given = ("one rank's step, DDP's own cost inside it (no baseline step to take it apart: the step given is "
                 "taken as one with DDP)") if own_inside else "one rank's step without DDP"  # fmt: skip
        split = (f", its optimizer {optimizer_ms:g} ms of it as given (--local-optimizer-ms) and forward and "
                 "backward the rest") if optimizer_ms is not None else ""  # fmt: skip
        console.say(f"ddpbench predict: compute scaled so that {given} is {local_step_ms:g} ms (--local-step-ms: "
                    f"one GPU's step of the model you will train){split}, ×"
                    f"{calibration.compute_scale:.4g} on the profile as measured: every prediction below rests on "
                    "that scaling")  # fmt: skip
    parts = (
        f" ({step_ms - own_ms:.4g} ms without DDP + {ms_text(own_ms)} ms of DDP's own cost)"
        if own_ms or own_measured
        else ""
    )
    what = "with DDP" if parts else "without DDP's own cost (not measured for this device)"  # the profile's alone
    if own_inside:  # scaled to the reference's step: DDP's own cost is in it, not apart
        what = "with DDP (its own cost inside the compute: no baseline step to separate it)"
    console.say(f"ddpbench predict: one rank's step {what}: {step_ms:.4g} ms{parts}; scaling efficiency below "
                "= that step over each predicted step")  # fmt: skip
    if device == "cpu" and not local_step_ms:
        console.warning("the profile's compute is a CPU's, far slower than a GPU's: communication hides behind it, "
                        "so these are a CPU's steps, and their efficiencies higher than a GPU's would be; "
                        "--local-step-ms MS scales the compute to your GPU's one-GPU step")  # fmt: skip

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
        faster = difference_s < 0 and predict.below_baseline(configs, setup, lambda rows: roles.flag(rows, "reference"),
                                                             but={"bucket_cap_mb"})  # fmt: skip
        why = ("beyond noise: a measurement problem (the baseline runs first in each launch), no cost" if faster
               else "noise")  # fmt: skip
        measured = pooled if difference_s >= 0 else f"taken as 0: {pooled} is {ms_text(difference_s * 1e3)} ms, {why}"
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
        split = (f", its optimizer {optimizer_ms:g} ms of it (--local-optimizer-ms, or its estimate above) and "
                 "forward and backward the rest") if optimizer_ms is not None else ""  # fmt: skip
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


def step_against_peak(configs, setup: dict, *, step_ms: float, batch: int, gpu: str,
                      options: dict | None) -> tuple[str, bool]:  # fmt: skip
    """('--local-step-ms 900 for the model you will train (2 samples a GPU) is 3.6e+13 FLOPs a step (…) at 40 TFLOP/s:
    4% of one GPU's dense peak in bf16 (989.5 TFLOP/s)', whether that is beyond the peak): what the step given claims,
    in the model's FLOPs a training step (forward and backward, FlopCounterMode on the meta device) over the dense
    peak of the cluster's GPU (`gpu`: its profile's description) in the run's dtype (harness.config.precision); above
    100 % no GPU runs that step so fast. ('', False) where the FLOPs or the peak are not known."""
    import workloads
    from harness.commands.predict_full_size import trained_source
    from harness.config.precision import peak_dtype, peak_tflops
    from harness.measure.modelinfo import META, flops_per_sample

    spec, own = trained_source(configs, setup, options)
    tf32 = bool(configs["tf32"].fillna(False).any()) if configs is not None and "tf32" in configs else False
    dtype = setup.get("dtype") or "fp32"
    peak = peak_tflops(gpu, dtype, tf32=tf32)
    if not peak or not step_ms:
        return "", False
    try:  # a model that cannot run on the meta device has no count here
        workload = workloads.create(spec, size="full", **own)
        with META:
            model = workload.build_model()
        flops = flops_per_sample(workload, model, device=META) * batch
    except Exception:
        return "", False
    achieved = flops / (step_ms / 1e3) / 1e12
    share = achieved / peak
    whose = "the model you will train" if options is not None else f"{setup['workload']}'s full size"
    said = (f"--local-step-ms {step_ms:g} for {whose} ({batch} sample{'s' * (batch > 1)} a GPU) is {flops:.2g} "
            f"FLOPs a step (forward and backward, counted on the meta device) at {achieved:,.0f} TFLOP/s: {share:.0%} "
            f"of one GPU's dense peak in {peak_dtype(dtype, tf32=tf32)} ({peak:g} TFLOP/s)")  # fmt: skip
    half = _half_precision_peak(gpu, configs, dtype)  # a CPU run's fp32 is not the dtype the GPU will train in
    if half:
        said += f" as benched; {achieved / half[1]:.0%} of its {half[0]} peak ({half[1]:g} TFLOP/s) if you train in it"
        share = achieved / half[1]
    if share > 1:
        return f"{said}: no GPU runs that step so fast; check the step (and the batch it was measured at)", True
    return said, False


def _half_precision_peak(gpu: str, configs, dtype: str) -> tuple[str, float] | None:
    """(dtype, dense peak) of the cluster GPU's fastest 2-byte autocast (bf16, else fp16) where the run was an fp32
    one on a CPU, which has no such dtype to bench: a step in it is judged against that peak; None otherwise."""
    from harness.config.precision import peak_tflops

    on_cpu = configs is not None and "device" in configs and bool((configs["device"] == "cpu").all())
    if not on_cpu or dtype != "fp32":
        return None
    return next(((d, peak) for d in ("bf16", "fp16") if (peak := peak_tflops(gpu, d, tf32=False))), None)


def say_step_against_peak(args, configs, setup: dict | None, chosen, trained: dict | None) -> None:
    """--local-step-ms in FLOPs against the cluster's GPU (step_against_peak): said, or a warning where no GPU runs
    the step so fast (a typo, a step measured at another batch)."""
    from harness.commands import predict_input

    if not (args.local_step_ms and setup):
        return
    batch = predict_input.memory_batch(args, setup) or int(setup["batch_size"])
    said, beyond = step_against_peak(configs, setup, step_ms=args.local_step_ms, batch=batch, gpu=chosen.description,
                                     options=trained)  # fmt: skip
    if beyond:
        console.warning(said)
    elif said:
        console.say(f"ddpbench predict: {said}")

"""What `predict` says of the compute it predicts from: how the run's one-rank rows and --local-step-ms scaled the
profile, DDP's own cost there (or --local-ddp-ms's), and the one-rank step every scaling efficiency is measured
against; the --local-* flags checked."""

from __future__ import annotations

from harness.commands import console
from harness.results.values import ms_text


def check_local_flags(args) -> None:
    """--local-step-ms, and its parts given apart (--local-optimizer-ms, --local-ddp-ms), refused in one line each."""
    from harness.config.bench import ConfigError

    if args.local_step_ms is not None and not args.local_step_ms > 0:
        raise ConfigError(f"--local-step-ms {args.local_step_ms:g} is not valid; give the one-GPU step in ms, > 0")
    for flag, value, what in (("--local-optimizer-ms", args.local_optimizer_ms, "the optimizer's part of that step"),
                              ("--local-ddp-ms", args.local_ddp_ms, "DDP's own cost beside that step")):  # fmt: skip
        if value is not None and args.local_step_ms is None:
            raise ConfigError(f"{flag} needs --local-step-ms: it is {what}")
    if args.local_optimizer_ms is not None and not 0 <= args.local_optimizer_ms < args.local_step_ms:
        raise ConfigError(f"--local-optimizer-ms {args.local_optimizer_ms:g} is not valid; give the optimizer's "
                          f"part of the {args.local_step_ms:g} ms step in ms, ≥ 0 and below it")  # fmt: skip
    if args.local_ddp_ms is not None and not args.local_ddp_ms >= 0:
        raise ConfigError(f"--local-ddp-ms {args.local_ddp_ms:g} is not valid; give DDP's own cost at one GPU in ms "
                          "(its step with DDP minus without), ≥ 0")  # fmt: skip


def own_source(configs, setup: dict | None, *, carried: bool, given: bool) -> str:
    """Where DDP's own cost in the predicted steps comes from (--out's `ddp_own_source`): 'given' (--local-ddp-ms),
    'measured' (the run's one-rank rows), 'in the compute' (no baseline step at one rank: the compute is scaled to
    DDP's); or not in them: 'left out' (a CPU's, beside a GPU step given), 'not measured'."""
    from harness.perfmodel import predict

    if given or configs is None:
        return "given" if given else "not measured"
    if predict.ddp_own_cost_s(configs, setup) is not None:
        return "measured" if carried else "left out"
    return "in the compute" if predict.calibration_target(configs, setup)[0] == "reference" else "not measured"


def say_run_calibration(profile, configs, setup: dict, *, scaled: bool, carried: bool = True,
                        given_ms: float | None = None) -> None:  # fmt: skip
    """What the run's one-rank rows changed: the compute's scale, and DDP's own cost (said even as 0), or what
    takes its place (`given_ms`: --local-ddp-ms)."""
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
            "a CPU's, left out of the GPU step given (an H200's was 3.3-4.0 % of its step)")  # fmt: skip
        if given_ms is not None:
            whose = "the run's" if carried else "a CPU's"
            added = f"{whose}, not used: --local-ddp-ms's {given_ms:g} ms takes its place"
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
    ddp_ms: float | None = None,
) -> None:
    """The one-rank step every efficiency below is measured against, and what it rests on (its parts whenever a
    run measured DDP's own cost, 0 included: a noisy run's reference may be no slower than its baseline; or
    `ddp_ms`, --local-ddp-ms, gave it). Without either, the step is said to be before DDP's own cost, and the
    efficiencies with it."""
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
    told = ", --local-ddp-ms" if ddp_ms is not None else ""
    parts = (
        f" ({step_ms - own_ms:.4g} ms without DDP + {ms_text(own_ms)} ms of DDP's own cost{told})"
        if own_ms or own_measured or told
        else ""
    )
    hint = "--local-ddp-ms MS adds your GPU's" if local_step_ms else "not measured for this device"
    what = "with DDP" if parts else f"before DDP's own cost ({hint})"  # the profile's alone
    if own_inside:  # scaled to the reference's step: DDP's own cost is in it, not apart
        what = "with DDP (its own cost inside the compute: no baseline step to separate it)"
    both = "" if parts or own_inside else ", both before it"
    console.say(f"ddpbench predict: one rank's step {what}: {step_ms:.4g} ms{parts}; scaling efficiency below "
                f"= that step over each predicted step{both}")  # fmt: skip
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

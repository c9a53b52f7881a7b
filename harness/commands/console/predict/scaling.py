"""What `predict` says of the compute it predicts from: how the run's one-rank rows and --local-step-ms scaled the
profile, DDP's own cost there (or --local-ddp-ms's), and the one-rank step every scaling efficiency is measured
against; the --local-* flags checked."""

from __future__ import annotations

from harness.commands import console
from harness.results.values import ms_text


def check_local_flags(args) -> None:
    """--local-step-ms, its parts given apart (--local-optimizer-ms, --local-ddp-ms) and the GPU it was measured on
    (--local-step-gpu), refused in one line each."""
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
    if getattr(args, "local_step_gpu", None) is not None:
        from harness.config.precision import gpu_name

        if args.local_step_ms is None:
            raise ConfigError("--local-step-gpu needs --local-step-ms: it names the GPU that step was measured on")
        gpu_name(args.local_step_gpu)  # a name not in the datasheet tables: refused with the names there are


def steps_known(args, device: str) -> bool:
    """Whether `predict --cluster` names a step, a strategy to book and a cap: the profile's compute a GPU's, or scaled
    to the one-GPU step given. A CPU's hides communication a GPU's would not (reports.pages.whatif.page.steps_known)."""
    return bool(args.local_step_ms) or device != "cpu"


def own_source(configs, setup: dict | None, *, carried: bool, given: bool) -> str:
    """Where DDP's own cost in the predicted steps comes from (--out's `ddp_own_source`): 'given' (--local-ddp-ms),
    'measured' (the run's one-rank rows), 'in the compute' (no baseline step at one rank: the compute is scaled to
    DDP's); or not in them: 'left out' (a CPU's, beside a GPU step given), 'not measured'."""
    from harness.perfmodel import measured, predict

    if given or configs is None:
        return "given" if given else "not measured"
    if measured.ddp_own_cost_s(configs, setup) is not None:
        return "measured" if carried else "left out"
    return "in the compute" if predict.calibration_target(configs, setup)[0] == "reference" else "not measured"


def say_run_calibration(profile, configs, setup: dict, *, scaled: bool, carried: bool = True,
                        given_ms: float | None = None) -> None:  # fmt: skip
    """What the run's one-rank rows changed: the compute's scale (not where a step given, `scaled`, sets it: its own
    line says that scale), and DDP's own cost (said even as 0), or what takes its place (`given_ms`: --local-ddp-ms);
    a CPU's left out of a GPU step, said without how it was measured."""
    from harness.analysis import roles
    from harness.perfmodel import measured, predict
    from harness.perfmodel.sharding import own_costs

    role, step_s = predict.calibration_target(configs, setup)
    if step_s and not scaled:
        whose = "baseline" if role == "baseline" else f"{roles.reference_name()}'s (no {roles.baseline_name()} row)"
        console.say_once(f"ddpbench predict: compute scaled ×{step_s / profile.local_step_s:.4g} to the run's {whose} "
                    f"step at one rank ({step_s * 1e3:.4g} ms over every repeat; the profile's own steps "
                    f"{profile.local_step_s * 1e3:.4g} ms)")  # fmt: skip
    if (difference_s := measured.reference_minus_baseline_s(configs, setup)) is not None:
        with_compute = " and scaled with the compute" if scaled else ""
        pooled = (f"{roles.reference_name()}'s step at one rank, every cap pooled (geometric mean over repeats), "
                  f"minus {roles.baseline_name()}'s")  # fmt: skip
        faster = difference_s < 0 and measured.below_baseline(configs, setup, roles.is_reference, but={"bucket_cap_mb"})
        why = (f"beyond noise: a measurement problem ({own_costs.baseline_first(configs, setup)}), no cost" if faster
               else "noise")  # fmt: skip
        source = pooled if difference_s >= 0 else f"taken as 0: {pooled} is {ms_text(difference_s * 1e3)} ms, {why}"
        added = f"added to backward{with_compute}" if carried else (
            "a CPU's, left out of the GPU step given (an H200's was 3.3-4.0 % of its step)")  # fmt: skip
        if given_ms is not None:
            whose = "the run's" if carried else "a CPU's"
            added = f"{whose}, not used: --local-ddp-ms's {given_ms:g} ms takes its place"
        # a CPU's figure left out says its why only where it reads 0: a 0 taken for a step below the baseline's (a
        # resnet152 run's stock at 845 ms against local's 1,546) read as a measured 0
        said = carried or given_ms is not None or difference_s < 0
        source = f" ({source})" if said else ""
        # its status said here, once: FSDP's note (own_costs.fsdp_for_cluster) refers to it without the figure
        untold = ", not told from noise" * (difference_s > 0 and not measured.ddp_own_cost_told(configs, setup))
        console.say_once(f"ddpbench predict: DDP's own cost {ms_text(max(difference_s, 0) * 1e3)} ms a step at one "
                         f"rank{source}{untold}, {added}")  # fmt: skip


def say_one_rank_step(
    calibrated,
    calibration,
    *,
    local_step_ms: float | None,
    own_measured: bool,
    own_inside: bool,
    optimizer_ms: float | None = None,
    ddp_ms: float | None = None,
    step_from: str = "",
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
        step_from = step_from or "--local-step-ms: one GPU's step of the model you will train"
        scaled = (f"compute scaled so that {given} is {local_step_ms:g} ms ({step_from}){split}, ×"
                  f"{calibration.compute_scale:.4g} on the profile as measured: every prediction below rests on "
                  "that scaling; ")  # fmt: skip
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
    if local_step_ms and not (parts or own_inside) and f"{step_ms:.4g}" == f"{local_step_ms:.4g}":  # said: the step
        console.say(f"ddpbench predict: {scaled}scaling efficiency below = that step over each predicted step, both "
                    f"before DDP's own cost ({hint})")  # fmt: skip
        return
    console.say(f"ddpbench predict: {scaled if local_step_ms else ''}one rank's step {what}: {step_ms:.4g} ms{parts}; "
                f"scaling efficiency below = that step over each predicted step{both}")  # fmt: skip


LOW_SHARE = 0.02
"""Below this share of the GPU's dense peak, the step given is unlike any training step of the model counted. This
project's own steady steps on an H200 (docs/measured/gpu-check-h200.md), counted as here, read 13 % (gpt2/full bf16,
batch 8, 52.65 ms) and 5.5 % (resnet50/full bf16, batch 64, 28.39 ms); large transformers train at 38-52 % (Megatron-LM,
Narayanan et al. 2021: 52 % of A100 peak; PaLM, Chowdhery et al. 2022: 46 %; Llama 3, 2024: 38-43 % on H100s). A step
at under a third of the lowest of those is more likely a count of another model than a GPU that slow: a shorter
sequence or a smaller batch benched than the one trained (a walkthrough benched seq_len=128, trained at 2048: 1 %).
Not for every model: one of depthwise convolutions (EfficientNet, MobileNet) or of large embedding tables (a
recommender's: DLRM) moves more bytes than it computes and reads low against a dense peak even when its step is right,
so the words name those too."""

FAR_BELOW_ASSUMED = "if its step scales as memory bandwidth or peak (far below the peak, it may not)"
"""What a verdict decided between the two ends of a step measured on another GPU rests on, where that step is far
below its GPU's peak (under LOW_SHARE): the bookings' verdict and the ends' line say it in these words."""


def step_against_peak(configs, setup: dict, *, step_ms: float, batch: int, gpu: str, options: dict | None,
                      gpu_said: str = "one GPU", requested: str | None = None,
                      optimizer_ms: float = 0.0) -> tuple[str, str]:  # fmt: skip
    """('--local-step-ms 900 for the model you will train (2 samples a GPU) is 36.0 TFLOP a step (…) at 40.0 TFLOP/s:
    4% of one GPU's dense peak in bf16 (989.5 TFLOP/s)', why it is warned: 'above', 'below' or ''): what the step
    given claims, in the model's FLOPs a training step (forward and backward, FlopCounterMode on the meta device)
    over the dense peak of the cluster's GPU (`gpu`: its profile's description; or the GPU the step was measured on,
    `gpu_said`, where it is another) in the dtype that GPU trains the model in (precision.gpu_step_dtype: the run's; a
    CPU run of --dtype auto, `requested`, fp32 for want of bf16 there, in the GPU's auto, bf16 on an H100, said so);
    warned above
    100 % (no GPU runs that step so fast) and below LOW_SHARE (the FLOPs are likely not the step's: the input or the
    batch counted is not the one trained). `optimizer_ms`: the optimizer's part of the step (a memory-bound pass, no
    FLOPs counted), left out of the time the FLOPs are set against where it is below the step. ('', '') where the
    FLOPs or the peak are not known."""
    from harness.config.precision import peak_dtype

    known = flops_and_peak(configs, setup, gpu=gpu, options=options, requested=requested)
    if known is None or not step_ms:
        return "", ""
    spec, counted, peak, dtype, tf32, run, assumed = known
    flops = counted["flops_per_sample"] * batch
    optimizer_ms = optimizer_ms if 0 < optimizer_ms < step_ms else 0.0
    achieved = flops / ((step_ms - optimizer_ms) / 1e3) / 1e12
    share = achieved / peak
    file = spec.partition(":")[0].endswith(".py")  # a file of yours has no sizes: the model is as the run built it
    whose = "the model you will train" if options is not None else (
        f"{setup['workload']} as benched" if file else f"{setup['workload']}'s full size")  # fmt: skip
    trains = f", --dtype auto's there (the CPU run benched {run})" if assumed else ""
    said = (f"--local-step-ms {step_ms:g} for {whose} ({batch} sample{'s' * (batch > 1)} a GPU) is {flops_text(flops)} "
            f"a step (forward and backward, counted on the meta device) at {tflops_text(achieved)} TFLOP/s"
            f"{f' in the {ms_text(step_ms - optimizer_ms)} ms beside its optimizer' * bool(optimizer_ms)}: "
            f"{share:.0%} of {gpu_said}'s dense peak in {peak_dtype(dtype, tf32=tf32)} ({peak:g} TFLOP/s)"
            f"{trains}")  # fmt: skip
    if share > 1:
        return f"{said}: no GPU runs that step so fast; check the step (and the batch it was measured at)", "above"
    if share < LOW_SHARE:
        return f"{said}: {_unlike_a_step(counted, spec.partition(':')[0])}", "below"
    return said, ""


def flops_and_peak(configs, setup: dict, *, gpu: str, options: dict | None, requested: str | None):
    """(spec, meta_counts.flops' count, the GPU's dense peak in TFLOP/s, its dtype, tf32, the run's dtype, whether the
    dtype is assumed) of the model trained on `gpu` (step_against_peak); None where the peak or the FLOPs are not
    known."""
    from harness.commands.predict.full_size import trained_source
    from harness.config.precision import gpu_step_dtype, peak_tflops
    from harness.measure import meta_counts

    spec, own = trained_source(configs, setup, options)
    tf32 = bool(configs["tf32"].fillna(False).any()) if configs is not None and "tf32" in configs else False
    on_cpu = configs is not None and "device" in configs and bool((configs["device"] == "cpu").all())
    run = setup.get("dtype") or "fp32"
    dtype, assumed = gpu_step_dtype(run, device="cpu" if on_cpu else "cuda", requested=requested, gpu=gpu)
    peak = peak_tflops(gpu, dtype, tf32=tf32)
    # kept in the user's cache; None: options the workload refuses, or a model that cannot run on the meta device
    counted = meta_counts.flops(spec, "full", own) if peak else None
    return (spec, counted, peak, dtype, tf32, run, assumed) if counted else None


def flops_text(flops: float) -> str:
    """A count of FLOPs for reading, in the largest unit it reaches (PFLOP, TFLOP, GFLOP, else MFLOP), whatever the
    unit of a rate said beside it: '20.4 TFLOP', '512 GFLOP', '1.20 PFLOP' (it read '2e+13 FLOPs')."""
    units = ((1e15, "PFLOP"), (1e12, "TFLOP"), (1e9, "GFLOP"))
    scale, unit = next(((s, u) for s, u in units if flops >= 0.9995 * s), (1e6, "MFLOP"))  # 999.6 GFLOP: '1.00 TFLOP'
    return f"{tflops_text(flops / scale)} {unit}"


def tflops_text(value: float) -> str:
    """TFLOP/s for reading: three significant digits, never an exponent ('0.260', '8.00', '148', '1,234')."""
    return f"{value:,.0f}" if abs(value) >= 99.95 else f"{value:#.3g}"


def _unlike_a_step(counted: dict, kind: str) -> str:
    """Why a step far below the peak (LOW_SHARE) is likely not the model counted: the input it was counted at
    (`counted`: meta_counts.flops'), and the flags that count yours (the option that sets the input, where the
    workload's kind, a zoo's name, has one)."""
    tokens, side = counted["tokens_per_sample"], counted["image_size"]
    counted = f", as counted at {tokens} tokens a sample" if tokens else (
        f", as counted at {side}×{side} images" if isinstance(side, int) else "")  # fmt: skip
    option = {"hf": "seq_len" if tokens else "image_size", "torchvision": "image_size", "timm": "image_size"}.get(kind)
    what = "sequence" if tokens else "image size" if isinstance(side, int) else "size"
    return (f"under {LOW_SHARE:.0%}, far below a training step's: likely not the model you train{counted}, unless "
            "it is memory-bound (depthwise convolutions: EfficientNet, MobileNet; embedding-heavy recommenders: DLRM); "
            f"if you train at another {what} or batch, give yours "
            f"(--train-wopt {option or 'KEY'}={'N' if option else 'VALUE'}, --batch-size B)")  # fmt: skip


def say_step_against_peak(args, configs, setup: dict | None, chosen, trained: dict | None) -> str:
    """--local-step-ms in FLOPs against the cluster's GPU (step_against_peak): said, or a warning where no GPU runs
    the step so fast (a typo, a step measured at another batch) or a training step would be far faster (the input or
    batch counted is not the one trained); what it said ('' where nothing). `args.far_below_peak`: warned so, where a
    step measured on another GPU may not scale as its bounds assume (the bookings' verdict says so)."""
    from harness.commands.predict import inputs as predict_input
    from harness.config.precision import GPUS

    if not (args.local_step_ms and setup):
        return ""
    batch = predict_input.memory_batch(args, setup) or int(setup["batch_size"])
    measured_on = getattr(args, "local_step_gpu", None)  # the step as given, against the GPU it was measured on
    gpu = GPUS[measured_on] if measured_on else chosen.description
    said, beyond = step_against_peak(configs, setup, step_ms=getattr(args, "local_step_given", args.local_step_ms),
                                     batch=batch, gpu=gpu, options=trained, requested=requested_dtype(args),
                                     gpu_said=f"one {measured_on}" if measured_on else "one GPU",
                                     optimizer_ms=0.0 if measured_on else args.local_optimizer_ms or 0.0)  # fmt: skip
    args.far_below_peak = beyond == "below"
    if beyond:
        console.warning(said)
    elif said:  # the step's, no cluster's: said once where several clusters' lines would repeat it word for word
        console.say_once(f"ddpbench predict: {said}")
    return said


def requested_dtype(args) -> str | None:
    """The --dtype the run was benched with (run.json; 'auto' unless chosen); None without a run."""
    from harness.commands.predict import inputs
    from harness.results import store

    if not getattr(args, "run", None):
        return None
    run_dir = inputs.resolve(args.run, args.results_dir)
    return (store.read_run_meta(run_dir).get("config") or {}).get("dtype")


def step_from_words(args) -> str:
    """Where the one-rank step scaled to comes from, at an end of a step measured on another GPU; '' otherwise."""
    end = getattr(args, "local_step_end", None)
    return "" if end is None else (f"the {end} end on the cluster's GPU of --local-step-ms "
                                   f"{args.local_step_given:g} on {args.local_step_gpu}, above")  # fmt: skip

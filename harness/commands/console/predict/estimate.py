"""Without --local-step-ms, a step to start from: the one-GPU step estimated from the model's FLOPs at a share of the
cluster GPU's dense peak, plus its optimizer's pass, said as an estimate with the command that uses it (one command
for several clusters' bookings side by side)."""

from __future__ import annotations

import math

from harness.commands import console
from harness.commands.console.predict import scaling
from harness.results.values import ms_text

ESTIMATE_SHARE = 0.40
"""The share of its GPU's dense peak a step estimated from FLOPs is put at, where no step was given: large
transformers train at 38-52 % (LOW_SHARE's sources); smaller models read lower (this project's gpt2/full, 13 %), so
the step so estimated is a short one: said to be an estimate, and a floor more than a forecast."""


def say_step_estimate(args, configs, setup: dict | None, chosen, trained: dict | None, profile=None) -> None:
    """Without --local-step-ms, a CPU's profile: the predict command with a step estimated from the model's FLOPs
    (step_estimate), said to be an estimate (once it ended with no step at all)."""
    import shlex

    from harness.commands.console.invoked import ddpbench_command
    from harness.commands.predict import inputs as predict_input

    if args.local_step_ms or not setup or not getattr(args, "run", None):
        return
    estimate = step_estimate(args, configs, setup, chosen, trained, profile)
    if estimate is None:
        return
    step_ms, said = estimate
    estimates = getattr(args, "step_estimates", None)
    if isinstance(estimates, dict):  # several clusters: their comparison's command, once each one's step is known
        estimates[chosen.name] = step_ms
    folder = predict_input.resolve(args.run, args.results_dir)  # the run's folder: a command that runs from anywhere
    # one cluster's whole run, as asked (several: their comparison's command says it, say_estimates_compared)
    asked = (("--train-samples", getattr(args, "train_samples", None)),
             ("--gpu-hour-price", getattr(args, "gpu_hour_price", None)))  # fmt: skip
    one = len(getattr(args, "clusters", [])) == 1
    run = "".join(f" {flag} {shlex.quote(given)}" for flag, given in asked if given and one)
    # the profile as given: a .toml's name alone is no built-in, and its command was refused ("neither a built-in…")
    console.say(f"ddpbench predict: {said}: {ddpbench_command()} predict --run {shlex.quote(str(folder))} "
                f"--cluster {shlex.quote(args.cluster or chosen.name)}{_asked_flags(args, trained)} "
                f"--local-step-ms {step_ms:g}{run}")  # fmt: skip


def say_estimates_compared(args, estimates: dict[str, float]) -> None:
    """Several clusters without a step: the one command that compares their bookings at each one's estimated step
    (say_step_estimate's, keyed by profile name), so that the side by side is one run away, not one per cluster."""
    import shlex

    from harness.commands.console.invoked import ddpbench_command
    from harness.commands.predict import inputs as predict_input

    if not getattr(args, "run", None) or len(estimates) < len(args.clusters):
        return  # a cluster without an estimate (its GPU's peak unknown): no step to compare it at
    folder = predict_input.resolve(args.run, args.results_dir)
    steps = ",".join(f"{name}={ms:g}" for name, ms in estimates.items())
    priced = getattr(args, "gpu_hour_price", None)
    flags = _asked_flags(args, getattr(args, "train_options", None), several=True)
    flags += f" --local-step-ms {steps}" + (f" --gpu-hour-price {shlex.quote(priced)}" if priced else "")
    trained = getattr(args, "train_samples", None)
    flags += f" --train-samples {shlex.quote(trained)}" if trained else ""
    console.say(f"ddpbench predict: the bookings compared at each cluster's step estimated from its FLOPs (below; "
                f"a floor more than a forecast): {ddpbench_command()} predict --run {shlex.quote(str(folder))} "
                f"--cluster {shlex.quote(','.join(args.clusters))}{flags}")  # fmt: skip


def _asked_flags(args, trained: dict | None, *, several: bool = False) -> str:
    """The flags of the model and bookings asked, as a command repeats them: --train-wopt, --batch-size, --gpus,
    --nodes (one cluster's: its own batch and nodes; `several`: every cluster's, each one's where given each's)."""
    import shlex

    flags = "".join(f" --train-wopt {key}={value}" for key, value in (trained or {}).items())
    each = getattr(args, "batch_size_each", None)
    if several and isinstance(each, dict):
        flags += " --batch-size " + shlex.quote(",".join(f"{given}={n}" for given, n in each.items()))
    elif getattr(args, "batch_size", None):
        flags += f" --batch-size {args.batch_size}"
    flags += f" --gpus {','.join(map(str, args.gpus))}" if getattr(args, "gpus", None) else ""  # the counts asked
    flags += f" --nodes {shlex.quote(args.nodes)}" if getattr(args, "nodes", None) else ""
    return flags


def step_estimate(args, configs, setup: dict, chosen, trained: dict | None, profile=None) -> tuple[float, str] | None:
    """(the one-GPU step in ms, its words): the step estimated from the model's FLOPs at ESTIMATE_SHARE of the
    cluster's GPU's dense peak, plus its optimizer's memory-bound pass at the GPU's bandwidth
    (optimizer.optimizer_ms, which a step given below it is warned of), said to be an estimate; None where the FLOPs
    or the peak are not known. The console's (say_step_estimate) and a CPU run's what-if page's."""
    from harness.commands.console.predict.optimizer import optimizer_pass
    from harness.commands.predict import inputs as predict_input
    from harness.config.precision import peak_dtype

    batch = predict_input.memory_batch(args, setup) or int(setup["batch_size"])
    known = scaling.flops_and_peak(
        configs, setup, gpu=chosen.description, options=trained, requested=scaling.requested_dtype(args)
    )
    if known is None:
        return None
    _, counted, peak, dtype, tf32, run, assumed = known
    flops = counted["flops_per_sample"] * batch
    compute_ms = flops / (ESTIMATE_SHARE * peak * 1e12) * 1e3
    optimizer_ms, moved = optimizer_pass(args, chosen, setup, configs, profile)
    step_ms = offered_step_ms(compute_ms, optimizer_ms)
    plus = f" for forward and backward ({ms_text(compute_ms)} ms), plus its optimizer's pass ({moved})" * bool(moved)
    return step_ms, (
        f"an estimate to start from, not a measurement: {scaling.flops_text(flops)} a step ({batch} "
        f"sample{'s' * (batch > 1)} a GPU, counted on the meta device) at {ESTIMATE_SHARE:.0%} of "
        f"{chosen.name}'s GPU's dense peak in {peak_dtype(dtype, tf32=tf32)} ({peak:g} TFLOP/s)"
        f"{f', --dtype auto there (the CPU run benched {run})' if assumed else ''}{plus} is a {step_ms:g} ms step, "
        "a floor more than a forecast (a small model's step runs far below the peak, bound by its kernels' "
        "launches; time it on one GPU for a measured one)"
    )


def offered_step_ms(compute_ms: float, optimizer_ms: float) -> float:
    """compute + optimizer rounded UP to 3 significant figures, and above the optimizer's pass: rounded to the
    nearest, a tiny compute (0.0001 ms over a 2.3441 ms pass: 2.34) offered a step its optimizer's floor warns of."""
    total = compute_ms + optimizer_ms
    if total <= 0:
        return 0.0
    unit = 10.0 ** (math.floor(math.log10(total)) - 2)  # the third significant figure's
    step = float(f"{math.ceil(round(total / unit, 6)) * unit:.3g}")
    while step <= optimizer_ms:  # a pass of exactly 3 figures: one unit above it
        step = float(f"{step + unit:.4g}")
    return step

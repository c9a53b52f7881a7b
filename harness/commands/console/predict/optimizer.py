"""The optimizer's part of a GPU step the user gave (`--local-step-ms`) without its split (`--local-optimizer-ms`):
estimated from the bytes the optimizer moves, at the cluster GPU's memory bandwidth.

Scaled with the rest of the profile, a CPU's optimizer share (Adam: 60 % of a step there, where a GPU's matmuls are
fast and its memory faster) would stand for a GPU's, and ZeRO-1's and FSDP2's gains, which shard the optimizer,
with it: a user's ViT-L step of 310 ms on an A100 was booked as FSDP2 at 2.4× DDP's speed. A GPU's optimizer step
is one memory-bound pass: torch's SGD as ddpbench builds it (no momentum) reads each fp32 parameter and its
gradient and writes the parameter (12 B a parameter), Adam and AdamW read the parameter, its gradient and two
moments and write three (28 B). At the datasheet's bandwidth that is the least it takes; a real pass is slower
by its kernel's efficiency, so the estimate leans, if anything, against the sharded strategies' gain.
"""

from __future__ import annotations

from harness.commands import console
from harness.config.precision import BYTES_A_PARAMETER, memory_gbps
from harness.perfmodel.sharded import OPTIMIZER_NAMES


def optimizer_ms(parameters: float, optimizer: str, gbps: float) -> float | None:
    """The least time one step of `optimizer` over `parameters` takes at `gbps` GB/s; None for an optimizer not
    listed."""
    per = BYTES_A_PARAMETER.get(optimizer)
    return None if per is None else parameters * per / (gbps * 1e9) * 1e3


def _trained_parameters(args, setup: dict, configs, profile) -> float:
    """The parameters of the model you will train (the full size's, or --train-wopt's, counted on the meta device;
    else the profile's), as its fp32 gradients count them (4 B each)."""
    from harness.commands.predict.full_size import full_parameters

    full = full_parameters(setup, configs, profile.grad_bytes, options=getattr(args, "train_options", None))
    return (full.grad_bytes if full is not None else profile.grad_bytes) / 4


def estimate_on(args, gpu: str, setup: dict | None, configs, profile) -> float | None:
    """The optimizer's part of --local-step-ms as estimate_local_optimizer would take it on `gpu` (a device name: the
    GPU that timed the step, --local-step-gpu), unsaid; None where given, not known, or not below the step."""
    if not args.local_step_ms or args.local_optimizer_ms is not None or setup is None or profile is None:
        return None
    gbps = memory_gbps(gpu)
    estimate = optimizer_ms(_trained_parameters(args, setup, configs, profile), setup.get("optimizer") or "sgd",
                            gbps) if gbps else None  # fmt: skip
    return estimate if estimate is not None and estimate < args.local_step_ms else None


def optimizer_pass(args, chosen, setup: dict | None, configs, profile) -> tuple[float, str]:
    """(the least ms the optimizer's step over the model you will train takes on `chosen`'s GPU, its words: "SGD
    moves 12 B a parameter, … at the GPU's 3,350 GB/s"); (0, '') where the bandwidth, the optimizer or the profile
    is not known."""
    if setup is None or profile is None or not chosen.memory_gbps:
        return 0.0, ""
    gbps, optimizer = chosen.memory_gbps, setup.get("optimizer") or "sgd"
    parameters = _trained_parameters(args, setup, configs, profile)
    estimate = optimizer_ms(parameters, optimizer, gbps)
    if estimate is None:
        return 0.0, ""
    named, per = OPTIMIZER_NAMES[optimizer], BYTES_A_PARAMETER[optimizer]
    return estimate, (f"{named} moves {per} B a parameter, {parameters * per / 1e9:.3g} GB for {parameters / 1e6:,.1f} "
                      f"M parameters: at least {estimate:.3g} ms at the GPU's {gbps:,.0f} GB/s")  # fmt: skip


def estimate_local_optimizer(args, chosen, setup: dict | None, configs, profile) -> None:
    """Where --local-step-ms is given without --local-optimizer-ms: sets `args.local_optimizer_ms` to the estimate
    (`args.local_optimizer_source`: "estimated"; "given" where it was given; None where there is none)
    for the model you will train (the full size's parameters, or --train-wopt's, counted on the meta device; else the
    profile's) on the cluster's GPU, and says it; nothing where the GPU's bandwidth or the optimizer is not known."""
    args.optimizer_from = "as given (--local-optimizer-ms)"  # the page's words for it; --out's:
    args.local_optimizer_source = None if args.local_optimizer_ms is None else "given"
    if not args.local_step_ms or args.local_optimizer_ms is not None or setup is None:
        return
    estimate, moved = optimizer_pass(args, chosen, setup, configs, profile)
    if not moved:
        return
    if estimate >= args.local_step_ms:
        console.warning(f"--local-step-ms {args.local_step_ms:g} is less than its optimizer's step can take ({moved}): "
                        "the optimizer's share stays the profile's; check the step")  # fmt: skip
        return
    args.local_optimizer_ms = float(f"{estimate:.3g}")
    args.optimizer_from, args.local_optimizer_source = f"estimated from its memory traffic ({moved})", "estimated"
    cpu_share = profile.optimizer_s / (profile.local_step_s or 1.0)
    console.say(f"ddpbench predict: the optimizer's part of the {args.local_step_ms:g} ms step, not given: {moved}, "
                f"{estimate / args.local_step_ms:.1%} of it, taken as its part (the profile's own share is a CPU's, "
                f"{cpu_share:.0%}); --local-optimizer-ms MS gives yours")  # fmt: skip

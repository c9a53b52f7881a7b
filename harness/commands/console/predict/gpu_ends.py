"""What `predict` says of a step measured on another GPU (--local-step-gpu): its two ends on the cluster's GPU, and
whether DDP's cap and the choice of strategy are the same at both (decided) or where they are not."""

from __future__ import annotations

from harness.commands import console
from harness.commands.console.predict import scaling


def _run_tf32(configs) -> bool:
    return bool(configs["tf32"].fillna(False).any()) if configs is not None and "tf32" in configs else False


def local_step_bounds(args, chosen, configs, setup: dict | None, profile=None):
    """--local-step-ms measured on --local-step-gpu, on the cluster's GPU (precision.step_bounds, in the dtype the
    step was trained in: precision.gpu_step_dtype, the run's, or on a CPU run of --dtype auto the GPU's auto, assumed):
    a StepBounds; None where no GPU is named (the step is the cluster GPU's own). Without --local-optimizer-ms, the
    optimizer's part is estimated on the GPU that timed the step (`profile`'s model; optimizer.estimate_on) and kept
    memory-bound at either end, as a part given is (`optimizer_estimated`): a compute-bound end of a GPU with the
    same peak then gives forward and backward back as timed (the optimizer alone re-estimated there had made an
    H200's 4.5 % slower than the H100's that timed them)."""
    import dataclasses

    from harness.commands.console.predict import optimizer
    from harness.config.precision import gpu_name, gpu_step_dtype, step_bounds

    if not (getattr(args, "local_step_gpu", None) and args.local_step_ms):
        return None
    measured_on = gpu_name(args.local_step_gpu)
    device = str(configs["device"].iloc[0]) if configs is not None and "device" in configs else "cuda"
    (dtype, assumed), (there, assumed_there) = (gpu_step_dtype((setup or {}).get("dtype") or "fp32", device=device,
                                                   requested=scaling.requested_dtype(args), gpu=gpu)
                                    for gpu in (measured_on, chosen.description))  # fmt: skip
    estimated = optimizer.estimate_on(args, measured_on, setup, configs, profile)
    bounds = step_bounds(args.local_step_ms, measured_on=measured_on, target=chosen.description, dtype=dtype,
                         tf32=_run_tf32(configs), optimizer_ms=args.local_optimizer_ms if estimated is None
                         else estimated, target_dtype=there, target_gbps=chosen.memory_gbps)  # fmt: skip
    return dataclasses.replace(bounds, assumed=assumed or assumed_there, optimizer_estimated=estimated is not None)


def say_step_bounds(args, chosen, bounds, ends: list[tuple[str | None, float]]) -> None:
    """One line: where the step was measured, and what it is on the cluster's GPU (the same, or its two ends and which
    the lines below are at); the two ends kept in `args.ends_said` for the page."""
    from harness.config.precision import GPUS, memory_gbps, peak_tflops

    gpu, step, texts = args.local_step_gpu, args.local_step_ms, (GPUS[args.local_step_gpu], chosen.description)
    dtypes = (bounds.peak_dtype, bounds.target_peak_dtype or bounds.peak_dtype)  # already tf32's where it is
    peaks = [peak_tflops(text, dtype, tf32=False) for text, dtype in zip(texts, dtypes, strict=True)]
    gbps = [memory_gbps(texts[0]), chosen.memory_gbps]
    if bounds.same:
        said = (f"--local-step-ms {step:g} was measured on {gpu}, whose datasheet figures are {chosen.name}'s "
                "GPU's: taken as its step there")  # fmt: skip
    else:
        named, fp16 = (dtypes[0] if dtypes[0] == dtypes[1] else f"{dtypes[0]} → {dtypes[1]}",
                       peak_tflops(texts[1], "fp16", tf32=False))  # fmt: skip
        no_bf16 = dtypes[1] != dtypes[0] and "bf16" not in dtypes[1:]  # the cluster's GPU has none (a V100)
        if bounds.assumed:
            why = (f" ({chosen.name}'s has no bf16" + f"; in fp16, its autocast with a grad scaler, ×"
                   f"{peaks[0] / fp16:.3g}" * bool(fp16 and dtypes[1] != "fp16") + ")") * no_bf16  # fmt: skip
            assumed = (f", {named} assumed: --dtype auto's on each GPU{why}, not the CPU run's fp32; a run benched "
                       "with --dtype fp32 bounds it in fp32")  # fmt: skip
        else:
            assumed = f", {chosen.name}'s GPU has no bf16: its autocast is fp16, with a grad scaler" * no_bf16
        optimizer = (f"; the optimizer's {bounds.optimizer_ms / bounds.memory_ratio:.3g} ms"
                     f"{' there (estimated as below)' * bounds.optimizer_estimated} memory-bound at either end"
                     if bounds.optimizer_ms is not None else "")  # fmt: skip
        said = (f"--local-step-ms {step:g} was measured on {gpu}, not {chosen.name}'s GPU: there it is not known, "
                f"only bounded, {bounds.compute_ms:.4g} ms if compute-bound (×{bounds.peak_ratio:.3g}: dense "
                f"{dtypes[0]} {peaks[0]:g} → {dtypes[1] + ' ' if dtypes[1] != dtypes[0] else ''}{peaks[1]:g} "
                f"TFLOP/s{assumed}{optimizer}) to "
                f"{bounds.memory_ms:.4g} ms if memory-bound (×{bounds.memory_ratio:.3g}: {gbps[0]:,.0f} → "
                f"{gbps[1]:,.0f} GB/s)")  # fmt: skip
        args.ends_said = said  # the page's words, and the console's with where the lines below stand
        said += (f"; predicted at both, the lines below at {ends[0][1]:.4g} ms ({ends[0][0]}: the shorter step, "
                 "where communication weighs most), the other end last")  # fmt: skip
    console.say(f"ddpbench predict: {said}")


def ends_verdicts(ends_rows: list, state, capacity_gib: float, errors=None) -> list[dict]:
    """Per GPU count, each end's verdicts from its predicted rows (`ends_rows`: a frame per end, every GPU count's rows
    with their answer marks): `caps`, the caps DDP's answer names; `picks`, the strategies the choice picks (None
    without a choice: no model state, or no GPU memory); `step_ms`, DDP's step at its answer's cap (its full-size floor
    where higher, `floored`). `decided`: a cap both ends name, and the same picks."""
    from harness.analysis import agreement
    from harness.commands.console.predictions import labelled
    from harness.perfmodel.pick.choice import choose

    per_end = []
    for rows in ends_rows:
        frames = [frame.reset_index(drop=True) for _, frame in rows.groupby("world_size", sort=True)]
        choices = {c.world_size: c for c in choose(labelled(state), frames, capacity_gib, errors)} \
            if state is not None else {}  # fmt: skip
        said = {}
        for frame in frames:
            row, world = agreement.answer_row(frame), int(frame["world_size"].iloc[0])
            floor = row.get("full_size_step_floor_ms", float("nan"))
            choice = choices.get(world)
            said[world] = {"caps": set(frame.loc[frame["best"], "bucket_cap_mb"]),
                           "picks": tuple(c.named for c in choice.picked) if choice else None,
                           "picked": list(choice.picked) if choice else [], "open": bool(choice and choice.open_on),
                           "step_ms": max(row["step_ms"], floor) if floor == floor else row["step_ms"],
                           "floored": floor == floor and floor > row["step_ms"]}  # fmt: skip
        per_end.append(said)
    verdicts = []
    for world in per_end[0]:
        ends = [said[world] for said in per_end]
        decided = bool(set.intersection(*(end["caps"] for end in ends))) and len({end["picks"] for end in ends}) == 1
        verdicts.append({"world_size": world, "ends": ends, "decided": decided})
    return verdicts


def _caps_words(caps: set, every: set) -> str:
    return "any cap" if caps == every else f"{', '.join(f'{c:g}' for c in sorted(caps))} MiB"


def say_ends_verdict(chosen, ends: list[tuple[str, float]], frames: list, *, state, errors=None, batch=None,
                     far_below_peak: bool = False) -> str:  # fmt: skip
    """The last line of a step predicted at both ends: the other end's DDP steps and, given the `batch` a GPU steps
    at, its pick's GPU-hours (the answer's table gives the printed end's), and whether the cap and the choice are the
    same at both (decided: where the step given is `far_below_peak`, only as the ends assume it scales, as the
    bookings' verdict says) or where not (the two answers, and what settles it); returned for the page."""
    from harness.perfmodel.pick.choice_table import cost_unit, gpu_hours_per_step_ms, step_cell, tokens_a_step

    verdicts = ends_verdicts(frames, state, getattr(chosen, "gpu_memory_gib", 0.0), errors)
    every = set(frames[0]["bucket_cap_mb"])
    steps = ", ".join(f"w{v['world_size']} {'≥' if v['ends'][1]['floored'] else ''}{v['ends'][1]['step_ms']:.4g}"
                      for v in verdicts) + " ms"  # fmt: skip
    tokens = tokens_a_step(state) if state is not None else None
    if batch and any(v["ends"][1]["picked"] for v in verdicts):  # as the table's column: step s × 10⁶ / batch / 3,600
        per = gpu_hours_per_step_ms(batch=batch, tokens=tokens)
        there = [(v["world_size"], v["ends"][1]) for v in verdicts if v["ends"][1]["picked"]]
        cost = ", ".join(f"w{world} {step_cell(end['picked'], per, lambda x: f'{x:.3g}', open_=end['open'])}"
                         for world, end in there)  # fmt: skip
        steps += f"; the pick's GPU-h per {cost_unit(tokens)} {cost}"
    chosen_at = any(end["picks"] is not None for v in verdicts for end in v["ends"])  # a choice made at all
    what = "DDP's cap and the choice of strategy" if chosen_at else "DDP's cap"
    said = f"at the other end ({ends[1][0]}, {ends[1][1]:.4g} ms a GPU step) DDP's step is {steps}; "
    open_ = [v for v in verdicts if not v["decided"]]
    decided = f"decided, {scaling.FAR_BELOW_ASSUMED}" if far_below_peak else "decided"
    if not open_:
        return _said(f"{said}{what}: the same at both ends at every GPU count, {decided}")
    differ, undecided = [], set()  # what differs, said alone: a cap both ends name is not the undecided part
    for v in open_:
        here, there = v["ends"]
        parts = [] if set.intersection(here["caps"], there["caps"]) else \
            [f"{_caps_words(here['caps'], every)} → {_caps_words(there['caps'], every)}"]  # fmt: skip
        undecided |= {"cap"} if parts else set()
        if here["picks"] != there["picks"]:
            parts.append(f"{' / '.join(here['picks']) or 'none fits'} → {' / '.join(there['picks']) or 'none fits'}")
            # the same pick booked first at both ends: only who ties with it differs, no choice to settle
            undecided.add("tie" if here["picks"][:1] == there["picks"][:1] and here["picks"] else "choice")
        differ.append(f"w{v['world_size']} {', '.join(parts)}")
    counts = ", ".join(f"w{v['world_size']}" for v in open_)
    if undecided == {"tie"}:  # a step measured would change no pick: said as the tie's, no advice
        return _said(f"{said}{what}: the same at both ends at every GPU count, {decided}; only the tie differs at "
                     f"{counts} ({ends[0][0]} → {ends[1][0]}: {'; '.join(differ)})")  # fmt: skip
    what = {frozenset({"cap"}): "DDP's cap", frozenset({"choice"}): "the choice of strategy"}.get(
        frozenset(undecided - {"tie"}), "DDP's cap and the choice of strategy"
    )
    settled = "DDP's cap the same at both ends at every GPU count; " if "cap" not in undecided else ""
    return _said(f"{said}{settled}{what} not decided at {counts} ({ends[0][0]} → {ends[1][0]}: "
                 f"{'; '.join(differ)}): one step measured on {chosen.name}'s GPU settles it (--local-step-ms "
                 "without --local-step-gpu)")  # fmt: skip


def _said(words: str) -> str:
    console.say(f"ddpbench predict: {words}")
    return words

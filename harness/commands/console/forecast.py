"""`bench --dry-run`'s time forecast: how long the planned run will take here, from the steps the runs already in its
results folder measured (harness.analysis.forecast), a floor from their FLOPs for the configurations none measured
(measure.pace, each model's count kept in the user's cache: measure.meta_counts) times the least and most that the
steps earlier runs here measured of as many ranks and like FLOPs ran over their own floor (`_estimate`; the floor alone
where none did), and the fixed cost earlier runs with as many GPUs paid (harness.handoff.fixed_cost). Under
`--repeats auto`, a line more: the range its rounds may take, from the first two repeats to `--max-repeats` (or
`--budget`), and as the newest earlier auto run here took the same configurations."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from harness.commands.console import fixed_cost_parts, say, warning
from harness.commands.console.forecast_notes import at_least_text, fixed_cost_here, minutes_text, say_load, say_narrower
from harness.commands.console.progress import Status
from harness.config.bench import RESULTS
from harness.config.ranks import available_cpus
from harness.results.values import counted


@dataclasses.dataclass(frozen=True)
class Auto:
    """`--repeats auto`'s bounds: the most repeats a configuration gets, and the wall time no round may end past."""

    max_repeats: int
    budget_s: float | None = None


def say_forecast(
    configurations, results, *, threads: int = 1, auto: Auto | None = None, dry: bool = True, expand=None
) -> None:
    """How long the planned run will take here: the steps as the runs already in `results` measured them, for the
    configurations none measured at least as long as their FLOPs take at this device's best (said as a floor), plus
    the fixed cost a launch and a configuration as the earlier runs here with as many GPUs measured it, or said not
    counted where none did; with `auto`, the range its rounds may take. At a run's start (not `dry`), only a warning
    where that forecast of its first two repeats ends past `auto`'s --budget (a walkthrough's --budget 8m took
    17.5 min, unsaid). `expand(impls)`: the plan with other strategies, for narrower ones that fit --budget."""
    from harness.analysis.forecast import forecast, medians_here
    from harness.handoff.fixed_cost import largest_world, nodes_of

    if not configurations:
        return
    status = Status("bench")  # a dry run's slow parts, each said off a terminal once it has lasted 2 s
    if dry:
        status.show(f"reading the earlier runs in {str(results)!r}")
    medians = medians_here(configurations, results)
    found = forecast(configurations, results, medians=medians)
    if not found.total:  # every configuration skipped here: nothing to time
        return
    fixed, fixed_in = fixed_cost_here(configurations, results)  # the default results/ where `results` has none
    if auto is not None and not dry:  # a run's start: only where its first two repeats end past --budget
        # by what earlier runs here measured alone: the FLOPs floor's counts and matmul would delay every run's
        # start by seconds (tens of seconds for a zoo model counted the first time), to warn of a floor
        total = found.steps_s + (fixed.total_s if fixed else 0.0)
        if auto.budget_s is not None and total > auto.budget_s:
            word = "about" if found.known == found.total and fixed else "at least"
            warning(f"--budget {minutes_text(auto.budget_s)}: the first two repeats, which every verdict needs "
                    f"and --budget does not stop, take {word} {minutes_text(total)} here (--dry-run says "
                    "how)")  # fmt: skip
        return
    from harness.analysis.forecast import paced_here

    if found.unmeasured:  # a model's first count builds it (and imports its library): seconds
        status.show(f"timing this CPU and counting {_workloads(found.unmeasured)} on the meta device")
    pace = _best_pace(configurations[0], threads=threads) if found.unmeasured else (None, "")
    paced = paced_here(configurations, results) if found.unmeasured else []
    floor = _estimate(found.unmeasured, paced, threads=threads, pace=pace)
    world = largest_world(configurations)
    gpus = f"{world} {'simulated ' if configurations[0].device == 'cpu' else ''}GPU{'s' * (world != 1)}"
    gpus += f" on {nodes} nodes" if (nodes := nodes_of(configurations)) > 1 else ""  # the fixed cost's runs: as many
    if not found.known and not floor and fixed is None:
        say(f"ddpbench: no time forecast: no earlier run here in {str(results)!r} measured these configurations, nor "
            f"the fixed cost of a run of {gpus} (the progress line gives one once the run has a pace)")  # fmt: skip
        return
    unknown = found.total - found.known - (floor.alike if floor else 0)
    known_s = found.steps_s + (fixed.total_s if fixed else 0.0)
    low, high = (known_s + floor.low_s, known_s + floor.high_s) if floor else (known_s, known_s)
    about = "about" if not unknown and fixed else "at least"
    parts = [*_steps_text(found, floor, results), _fixed_text(fixed, gpus, results, fixed_in)]
    summed = [part for part in parts if not _left_out(part)]  # each led by its figure
    left_out = "".join(f"; {part}" for part in parts if _left_out(part))
    # without the fixed cost (on a small model nearly all of a run) the steps are no total: said as the floor they are
    alone = " of steps alone" if fixed is None else ""
    total_text = f"{about} {_span(low, high)}{alone or ' here in all'} = " if len(summed) > 1 or not alone else ""
    say(f"ddpbench: {total_text}{' + '.join(summed)}{left_out}")
    if floor:
        say_load(configurations)
    if auto is not None:

        def timed(planned, rounds: int) -> float:  # where earlier steps like theirs were, by the least they ran
            return _total(planned, results, medians, fixed, threads, (pace, paced), rounds)

        _say_rounds(configurations, results, auto, about=about, alone=alone, fewest_s=low, timed=timed)
        if expand is not None and auto.budget_s is not None and low > auto.budget_s:
            say_narrower(configurations, expand=expand, budget_s=auto.budget_s, about=about,
                         timed=lambda planned: _total(planned, results, medians_here(planned, results), fixed,
                                                      threads, (pace, paced), 1))  # fmt: skip


def _say_rounds(configurations, results, auto: Auto, *, about: str, alone: str = "", fewest_s: float, timed) -> None:
    """`--repeats auto`'s range, in one line: the plan as listed (2 repeats each, judged once) to the configurations
    its verdicts rest on run to --max-repeats (judged at each look), or the budget's end where that comes first (the
    two repeats past it: said so, no round after them); and the same as the newest earlier auto run here repeated
    them, where one measured them (`alone`: ' of steps alone' where the fixed cost is not known)."""
    from harness.analysis.forecast import deciding, grown, repeats_taken
    from harness.analysis.verdicts.decide import looks

    keys = deciding(configurations)
    if not keys:
        return
    most = auto.max_repeats
    most_s = whole_s = timed(grown(configurations, dict.fromkeys(keys, most)), len(looks(most)))
    ends = f"{len(keys)} configurations its verdicts rest on to --max-repeats {most}"
    if auto.budget_s is not None and most_s > max(fewest_s, auto.budget_s):
        most_s, ends = max(fewest_s, auto.budget_s), f"--budget's end; {minutes_text(most_s)} at --max-repeats {most}"
    taken, runs = repeats_taken(configurations, results)
    taken = {key: min(max(n, 2), most) for key, n in taken.items() if key in keys}
    if taken:
        rounds = len([n for n in looks(most) if n <= max(taken.values())])
        earlier_s = timed(grown(configurations, taken), rounds)
        which = f"run {runs[0]}" if len(runs) == 1 else f"runs {', '.join(runs)}"
        some = "the same" if len(taken) == len(keys) else f"{len(taken)} of the {len(keys)}"
        low, high = min(taken.values()), max(taken.values())
        reps = f"{low} to {high} repeats" if low != high else f"{low} repeats"
        history = f"; {minutes_text(earlier_s)} as earlier {which} here repeated {some} ({reps})"
    else:
        history = "; no earlier --repeats auto run here measured them (the rounds they took)"
    lead = at_least_text(fewest_s) if about == "at least" else f"{about} {minutes_text(fewest_s)}"
    fewest = f"{lead}{alone} (2 repeats each"
    if auto.budget_s is not None and fewest_s > auto.budget_s:  # past the budget, which stops none of them
        say(f"ddpbench: with --repeats auto, {fewest}, past --budget's {minutes_text(auto.budget_s)}, which stops "
            f"none of them; no round after them, {minutes_text(whole_s)} at --max-repeats {most})"
            f"{history}")  # fmt: skip
        return
    say(f"ddpbench: with --repeats auto, {fewest}) to {minutes_text(most_s)} ({ends}){history}")


def _total(planned, results, medians, fixed, threads: int, paced, rounds: int) -> float:
    """The forecast of `planned` (the plan grown by rounds): its steps, its floor (`paced`: the pace and the earlier
    steps, by the least those ran over their floor) and its fixed cost."""
    from harness.analysis.forecast import forecast

    found = forecast(planned, results, medians=medians)
    floor = _estimate(found.unmeasured, paced[1], threads=threads, pace=paced[0])
    return (
        found.steps_s + (floor.low_s if floor else 0.0) + (fixed.of(planned, rounds=rounds).total_s if fixed else 0.0)
    )


def _steps_text(found, floor, results) -> list[str]:
    """The steps' parts of the total, each led by its own figure: '2 min of steps (6 of the 6 configurations, as last
    measured in 'results')', 'about 3 min to 9 min of steps (the other 2: at least 37 s by their FLOPs at …; steps
    earlier runs here measured (as many ranks, within 10× their FLOPs) ran 5-15× theirs)', or their steps not
    counted."""
    unknown, parts = found.total - found.known, []
    if found.known:
        parts.append(f"{minutes_text(found.steps_s)} of steps ({found.known} of the {found.total} configurations, as "
                     f"last measured in {str(results)!r})")  # fmt: skip
    if unknown:
        which = f"the other {unknown}" if found.known else _all(found.total)
        if floor:
            counted = (
                f"; the other {unknown - floor.counted} not counted: their FLOPs could not be"
                if floor.counted < unknown
                else ""
            )
            parts.append(_floor_text(floor, which, counted))
        else:
            parts.append(f"the steps of {which} not counted (never measured here)")  # `say_forecast` puts it last
    return parts


def _floor_text(floor: Estimate, which: str, counted: str) -> str:
    """The floored configurations' part: their FLOPs floor, led by the time earlier steps like theirs give."""
    if not floor.alike:
        # 'at least' says it is a floor: a '(a model's step runs slower)' in the bracket read as a slip
        return f"{at_least_text(floor.floor_s)} of steps ({which}, by {floor.how}{counted})"
    low, high = floor.ratios
    like = "" if floor.alike == floor.counted else f", {floor.alike} of them; the rest at their floor"
    word = "about" if floor.alike == floor.counted else "at least"
    return (f"{word} {_span(floor.low_s, floor.high_s)} of steps ({which}: {at_least_text(floor.floor_s)} "
            f"by {floor.how}; steps earlier runs here measured, of as many ranks and within {ALIKE:g}× their "
            f"FLOPs, ran {_times(low, high)} theirs{like}{counted})")  # fmt: skip


def _workloads(configurations) -> str:
    """The models the configurations build, each once, as the plan names them (gpt2/small)."""
    return ", ".join(dict.fromkeys(f"{cfg.workload}/{cfg.size}" for cfg in configurations))


def _span(low: float, high: float) -> str:
    """'3 min to 9 min', or one figure where both read the same."""
    return (
        minutes_text(low) if minutes_text(low) == minutes_text(high) else f"{minutes_text(low)} to {minutes_text(high)}"
    )


def _times(low: float, high: float) -> str:
    """'3-9×', '0.66-3.2×', '4×', '230-1005×'."""
    low_text, high_text = (f"{x:.2g}" if x < 10 else f"{x:.0f}" for x in (low, high))
    return f"{low_text}×" if low_text == high_text else f"{low_text}-{high_text}×"


def _left_out(part: str) -> bool:
    """Whether a part of the forecast says what it could not count (said after the sum, not in it)."""
    return " not counted " in part or " not known yet " in part


def _fixed_text(fixed, gpus: str, results, fixed_in=None) -> str:
    """'about 40 s of fixed cost (4 launches at 3.1 s, …) as 2 earlier runs of 2 simulated GPUs here measured it (A,
    B: 36 s to 44 s)', or that none did."""
    if fixed is None:
        nor = "" if Path(results).resolve() == RESULTS.resolve() else f" nor in {str(RESULTS)!r}"
        return (f"the fixed cost on top, not known yet (no earlier run of {gpus} here in {str(results)!r}{nor} "
                "measured it: launches, imports, model info, building, parity)")  # fmt: skip
    runs, typical = len(fixed.measured), fixed.typical  # the median run: its parts add up
    split = fixed_cost_parts(typical, fixed.shape) + (f": the median's, {typical.run}" if runs > 1 else "")
    low, high = fixed.spread_s
    spread = f": {minutes_text(low)} to {minutes_text(high)}" if runs > 1 else ""
    names = ", ".join(m.run for m in fixed.measured) + (
        f" in {str(fixed_in)!r}" if str(fixed_in) != str(results) else ""
    )
    which = f"the newest {runs} of {fixed.counted}" if fixed.counted > runs else str(runs)
    other = (
        ""
        if fixed.alike
        else "; they ran none of these workloads at these sizes: building and parity cost with the model"
    )
    return (f"about {minutes_text(fixed.total_s)} of fixed cost ({split}) as {which} earlier "
            f"run{'s' * (fixed.counted != 1)} of {gpus} here measured it ({names}{spread}){other}")  # fmt: skip


def steps_floor(configurations, *, threads: int) -> tuple[float, int, str] | None:
    """The least time `configurations`' steps take (each by its FLOPs or its memory traffic, the higher: the dry
    run's floor), as (seconds, how many could be counted, what it rests on in words); None where none could be
    counted or the device's pace is not known."""
    if not configurations:
        return None
    pace = _best_pace(configurations[0], threads=threads)
    floors = _floors(configurations, threads=threads, pace=pace)
    if not floors:
        return None
    return sum(floor for _, floor, *_ in floors), len(floors), _basis(floors, f"{pace[1]} (a model's step runs slower)")


def _floors(configurations, *, threads: int, pace: tuple[float | None, str]) -> list[tuple]:
    """Each configuration's floor at `pace` (_best_pace's), as (the configuration, its steps' floor in seconds, its
    rank's FLOPs a step, its FLOPs' floor alone, its memory traffic's, and that one's pace where it is the higher),
    those whose FLOPs could be counted: each model's FLOPs a sample from the user's cache (measure.meta_counts:
    counted once per model, its options and its source; the count took 5-6 s of a dry run)."""
    rate, _ = pace
    if not configurations or rate is None:
        return []
    from harness.measure import meta_counts
    from harness.measure.pace import compute_floor_s, step_samples

    floors = []
    cores = available_cpus() if configurations[0].device == "cpu" else None
    for cfg in configurations:
        kept = meta_counts.flops(cfg.workload_spec or cfg.workload, cfg.size, cfg.workload_options)
        if kept:
            floor = compute_floor_s(cfg, flops_per_sample=kept["flops_per_sample"], flops_per_s=rate,
                                    threads=threads, cores=cores)  # fmt: skip
            traffic_s, how = _memory_floor(cfg, threads=threads, cores=cores)
            by_bytes = how if traffic_s > floor else None
            floors.append((cfg, max(floor, traffic_s), kept["flops_per_sample"] * step_samples(cfg), floor, traffic_s,
                           by_bytes))  # fmt: skip
    return floors


def _memory_floor(cfg, *, threads: int, cores: int | None) -> tuple[float, tuple[str, float] | None]:
    """`cfg`'s steps' floor by their memory traffic (measure.pace.memory_floor_s), and its pace (words with a place
    for the rate, and the rate in B/s); 0 where the parameters could not be counted, the device's bandwidth is not
    known, or a server rank holds part of the model."""
    import impls
    from harness.measure import meta_counts
    from harness.measure.pace import cpu_copy_bytes_per_s, memory_floor_s, step_bytes

    counted = meta_counts.parameters(cfg.workload_spec or cfg.workload, cfg.size, cfg.workload_options)
    if isinstance(counted, str) or cfg.extra_ranks:
        return 0.0, ""
    shards = bool(impls.roles(cfg.impl)["shards_state"])
    moved = step_bytes(cfg, trained=counted.trained, shards=shards)
    if cfg.device == "cpu":  # a buffer the size of the model's parameters: each model its own
        rate, how = (
            cpu_copy_bytes_per_s(threads, int(4 * counted.trained)),
            "this CPU's best copy, {} a rank, timed now",
        )
    else:
        import torch

        from harness.config.precision import memory_gbps

        name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
        rate, how = (memory_gbps(name) or 0.0) * 1e9, f"the {name}'s datasheet bandwidth, {{}}"
    if not rate:
        return 0.0, None
    return memory_floor_s(cfg, step_bytes=moved, bytes_per_s=rate, threads=threads, cores=cores), (how, rate)


ALIKE = 10.0
"""An earlier step is evidence for a planned configuration's at as many ranks of as many threads, the same precision,
and FLOPs a step within this factor of its own: a smaller step spends more of its time beside its FLOPs (at one rank
mlp/tiny's ran 500-2200× its floor here, gpt2/small's 1.5×: docs/measured/dry-run-forecast-cpu.md)."""


@dataclasses.dataclass(frozen=True)
class Estimate:
    """The floored configurations' steps as the earlier steps like theirs ran here against their own floor."""

    floor_s: float  # the FLOPs floor of those counted
    counted: int
    how: str  # the pace
    low_s: float  # by the least and the most an earlier step like each ran over its own floor (the floor where none)
    high_s: float
    alike: int = 0  # how many of the counted earlier steps were like
    ratios: tuple[float, float] = (1.0, 1.0)  # the least and most those ran over their own floor


def _estimate(configurations, paced, *, threads: int, pace: tuple[float | None, str]) -> Estimate | None:
    """The FLOPs floor of `configurations`, and their steps as the earlier steps like theirs (`paced`,
    analysis.forecast.paced_here's) ran over their own floor at the same pace; None where none could be counted."""
    floors = _floors(configurations, threads=threads, pace=pace)
    if not floors:
        return None
    rate = pace[0]
    cores = available_cpus() if configurations[0].device == "cpu" else None
    low = high = 0.0
    alike, seen = 0, []
    for cfg, _, flops, by_flops, traffic, _ in floors:
        ratios = [p.step_ms / 1e3 / (p.flops_per_step / rate * _turns(p, cores)) for p in paced
                  if (p.world_size, p.nnodes, p.threads, p.dtype) == (cfg.world_size, max(cfg.nnodes, 1), threads,
                                                                      cfg.dtype)
                  and 1 / ALIKE <= p.flops_per_step / flops <= ALIKE]  # fmt: skip
        alike += bool(ratios)
        seen += ratios
        low += max(traffic, by_flops * min(ratios, default=1.0))  # never below the memory traffic's floor
        high += max(traffic, by_flops * max(ratios, default=1.0))
    ratios = (min(seen), max(seen)) if seen else (1.0, 1.0)
    return Estimate(sum(f for _, f, *_ in floors), len(floors), _basis(floors, pace[1]), low, high, alike, ratios)


TRAFFIC = "their gradients' and optimizer's bytes"


def _basis(floors, flops_pace: str) -> str:
    """What the floors rest on, in words: their FLOPs at the pace, or their memory traffic where that is the higher
    (`_floors`' last item), for some of them or all."""
    by_bytes = [how for *_, how in floors if how]
    if not by_bytes:
        return f"their FLOPs at {flops_pace}"
    low, high = (f"{rate / 1e9:.3g}" for rate in (min(r for _, r in by_bytes), max(r for _, r in by_bytes)))
    pace = by_bytes[0][0].format(f"{low} GB/s" if low == high else f"{low}-{high} GB/s")
    if len(by_bytes) == len(floors):
        return f"{TRAFFIC}, more than their FLOPs take, at {pace}"
    return f"their FLOPs at {flops_pace}, {len(by_bytes)} of them by {TRAFFIC} at {pace}"


def _turns(paced, cores: int | None) -> float:
    """How many turns an earlier step's ranks took on the node's cores (compute_floor_s's)."""
    ranks_here = paced.world_size // max(paced.nnodes, 1)
    return max(1.0, ranks_here * paced.threads / cores) if cores else 1.0


def _best_pace(cfg, *, threads: int) -> tuple[float | None, str]:
    """The most FLOP/s a rank of `cfg` computes here, and how that was found: a matmul in its dtype timed now on the
    CPU, the datasheet's dense peak on a GPU (None where its GPU is not listed)."""
    if cfg.device == "cpu":
        from harness.measure.pace import cpu_probe

        dtype = cfg.dtype if cfg.dtype in ("bf16", "fp16") else "fp32"  # autocast's: may be emulated, far slower
        probe = cpu_probe(threads, dtype)
        return (
            probe.flops_per_s,
            f"this CPU's best {dtype} matmul, {probe.flops_per_s / 1e9:.3g} GFLOP/s on a rank's "
            f"{counted(threads, 'thread')}, timed now ({probe.words()})",
        )
    import torch

    from harness.config.precision import peak_tflops

    name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    peak = peak_tflops(name, cfg.dtype, tf32=cfg.tf32)
    return (peak * 1e12, f"the {name}'s datasheet peak, {peak:g} TFLOP/s") if peak else (None, "")


def _all(count: int) -> str:
    return "the configuration" if count == 1 else f"all {count} configurations"

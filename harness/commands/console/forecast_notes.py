"""What a dry run's forecast adds to its figures: the fixed cost the default results folder measured where the one
given holds none, what a busy machine does to the FLOPs floor (which a quiet machine's matmul sets), and, where the
first two repeats end past --budget, narrower plans that fit, forecast by the same figures."""

from __future__ import annotations

import os
from pathlib import Path

from harness.commands.console import say
from harness.config.ranks import available_cpus


def fixed_cost_here(configurations, results):
    """The fixed cost earlier runs with as many GPUs measured (handoff.fixed_cost) in `results`, else in the default
    results folder (a walkthrough's --results in a new folder said 'not known yet' beside a results/ that held it),
    and the folder it came from; (None, None) where neither did."""
    from harness.config.bench import RESULTS
    from harness.handoff.fixed_cost import fixed_cost

    folders = {Path(folder).resolve(): Path(folder) for folder in (RESULTS, results)}  # one where the two are one
    for folder in reversed(folders.values()):  # `results` first
        if folder.is_dir() and (found := fixed_cost(configurations, folder)) is not None:
            return found, folder
    return None, None


def load_stretch(configurations) -> tuple[float, float, float] | None:
    """(the 1-minute load, the cores, how many times longer the steps could take) where the machine is busy now:
    each runnable thread, the run's own ranks added, gets its share of the cores (cores / runnable), so a step may
    take up to runnable / cores its quiet time; None on a GPU or a quiet machine. A bound, not a forecast: a
    walkthrough at load 20 on 2 cores ran 1.9× and 4.3× its floor, where the bound said 11×."""
    if not configurations or configurations[0].device != "cpu":
        return None
    load, cores = os.getloadavg()[0], available_cpus()
    if load <= cores:
        return None
    ranks = max(cfg.world_size // max(cfg.nnodes, 1) + cfg.extra_ranks for cfg in configurations)
    return load, cores, (load + ranks) / cores


def say_load(configurations) -> None:
    """The FLOPs floor assumes a quiet machine: on a busy one, by how much its load could stretch it."""
    from harness.results.values import counted

    if (found := load_stretch(configurations)) is None:
        return
    load, cores, stretch = found
    say(f"ddpbench: the floor assumes a quiet machine: at load {load:.1f} on {counted(int(cores), 'core')}, each "
        f"runnable thread gets about 1/{stretch:.0f} of a core, so the steps could take up to about {stretch:.0f}× "
        "as long (how much they do depends on what else runs)")  # fmt: skip


def say_narrower(configurations, *, expand, timed, budget_s: float, about: str = "at least") -> None:
    """Where the plan's first two repeats end past --budget: the plan with the reference alone, and with each other
    strategy beside it (a verdict holds each against it), each planned as bench plans it (`expand(impls)`) and
    forecast by the same figures (`timed(planned)`, seconds; `about`: the main line's word), those within --budget."""
    from harness.analysis import roles
    from harness.config.grid import skip_reason
    from harness.protocols import ConfigError

    reference, baseline = roles.reference_name(), roles.baseline_name()
    runs = [cfg for cfg in configurations if not skip_reason(cfg)]  # a strategy skipped here narrows nothing
    named = [impl for impl in dict.fromkeys(cfg.impl for cfg in runs) if impl != baseline]
    if len(named) < 2:
        return
    choices = [[reference], *([reference, impl] for impl in named if impl != reference)]
    found = []
    for impls in choices if reference in named else ([impl] for impl in named):
        try:
            planned = expand(impls)
        except ConfigError:  # nothing of it runs here
            continue
        if planned:
            found.append((timed(planned), ",".join(impls)))
    fitting = sorted(pair for pair in found if pair[0] <= budget_s)
    if not fitting:
        fastest = min(found, default=None)
        if fastest is not None:
            say(f"ddpbench: no narrower plan of these strategies fits --budget's {minutes_text(budget_s)}: "
                f"IMPLS={fastest[1]} (--impls {fastest[1]}) takes {about} {minutes_text(fastest[0])}")  # fmt: skip
        return
    said = "; ".join(f"IMPLS={impls}: {about} {minutes_text(seconds)}" for seconds, impls in fitting)
    say(f"ddpbench: within --budget's {minutes_text(budget_s)}, by the same forecast (make's IMPLS=, or --impls): "
        f"{said}")  # fmt: skip


def minutes_text(seconds: float) -> str:
    """'42 s', '2 min 30 s' (to 10 s), '1.5 h', '0.3 s', 'under 0.1 s': a forecast finer than the progress line's whole
    minutes."""
    if seconds < 0.095:  # '6e-05 s' (a tiny model's floor) said nothing a reader times by
        return "under 0.1 s"
    if seconds < 0.95:
        return f"{seconds:.1g} s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        minutes, rest = divmod(round(seconds / 10) * 10, 60)
        return f"{minutes:.0f} min {rest:.0f} s" if rest else f"{minutes:.0f} min"
    return f"{seconds / 3600:.1f} h"


def at_least_text(seconds: float) -> str:
    """'at least 42 s', or 'a floor under 0.1 s' (not 'at least under 0.1 s')."""
    return f"at least {minutes_text(seconds)}" if seconds >= 0.095 else "a floor under 0.1 s"

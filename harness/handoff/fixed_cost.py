"""What a planned run will pay here beyond its steps (`bench --dry-run`), as the earlier runs in its results folder
measured it: each run's summary.json keeps its latest session's wall time, where it went (harness.handoff.costs'
phases) and how many configurations and torchrun launches it made.

A session's fixed cost (its wall time less its `steps`) splits into what it pays per launch (`costs.PER_LAUNCH`:
the launch's plan, torchrun's start, imports, process group, row writer, teardown, pairing), per configuration
launched (`costs.PER_CONFIGURATION`: model info, build, between steps, parity, profile, gradient profile, gather,
write, release) and once (its start, its verdicts, `other`). The planned run's fixed cost by one earlier run is that
run's once + the planned launches × its cost a launch + the planned configurations × its cost a configuration; the
forecast is the median over the newest RECENT runs that count, said with the median run's parts (two middle runs':
their mean) and the range. A run counts where it ran on this machine (its hostname) and device kind, with as many
(simulated) GPUs as planned (a launch of more ranks costs more to start and to tear down); of those, the runs of a
workload and size planned where there are any (building and parity cost with the model).

A summary from before summary.json counted launches (2026-12-06) gives them from its run.json's configurations, one
launch per repeat, world size and parameter-server rank, where the run had one session (no retry counted), and
its launcher's phases named since (launch plan, row writer, pairing, verdicts) within `other`, paid once; one that
kept no split of its time counts no more.
"""

from __future__ import annotations

import dataclasses
import json
import socket
from pathlib import Path

from harness.analysis.forecast import measured_here, setups
from harness.handoff.costs import PER_CONFIGURATION, PER_LAUNCH
from harness.protocols import ConfigError
from harness.results import layout, store

RECENT = 5
"""The newest runs that count: older ones measured an older ddpbench, or a machine as it was then."""


@dataclasses.dataclass(frozen=True)
class Measured:
    """One earlier session's fixed cost, split."""

    run: str
    once_s: float
    launch_s: float  # a launch's
    configuration_s: float  # a configuration's

    def for_plan(self, launches: int, configurations: int) -> float:
        return self.once_s + launches * self.launch_s + configurations * self.configuration_s


@dataclasses.dataclass(frozen=True)
class FixedCost:
    """The planned run's fixed cost by each earlier run that counts (newest first)."""

    measured: tuple[Measured, ...]
    launches: int  # the planned run's torchrun launches
    configurations: int  # and the configurations it launches
    alike: bool  # the runs ran a workload and size planned here
    counted: int  # the runs that count, RECENT of them at most measured

    def _each(self) -> list[float]:
        return [m.for_plan(self.launches, self.configurations) for m in self.measured]

    @property
    def typical(self) -> Measured:
        """The median run for the planned run (by its fixed cost there): the middle one, or the mean of the two
        middle ones' parts, so that its parts add up to the median said, as medians of each part need not."""
        ranked = sorted(self.measured, key=lambda m: m.for_plan(self.launches, self.configurations))
        middle = ranked[(len(ranked) - 1) // 2 : len(ranked) // 2 + 1]
        return Measured(" and ".join(m.run for m in middle),
                        *(sum(getattr(m, part) for m in middle) / len(middle)
                          for part in ("once_s", "launch_s", "configuration_s")))  # fmt: skip

    @property
    def total_s(self) -> float:
        return self.typical.for_plan(self.launches, self.configurations)

    @property
    def spread_s(self) -> tuple[float, float]:
        return min(self._each()), max(self._each())


def largest_world(configurations) -> int:
    """The (simulated) GPUs a plan runs on: its largest world size."""
    return max((c.world_size for c in configurations), default=0)


def fixed_cost(configurations, results: Path, *, launched: int) -> FixedCost | None:
    """The planned `configurations`' fixed cost (`launched` of them launch: the others are skipped here) as the runs
    in `results` measured it on this device kind, on this machine, with as many GPUs; None where none measured it."""
    if not configurations:
        return None
    device, host, world = configurations[0].device, socket.gethostname(), largest_world(configurations)
    planned = {(cfg.workload, cfg.size) for cfg in configurations}
    counted: list[tuple[Measured, bool]] = []
    for run in store.list_runs(results):
        try:
            meta = store.read_run_meta(run)
        except ConfigError:
            continue
        if not measured_here(meta, device, host) or _run_world(run, meta) != world:
            continue
        if (found := measured(run, meta)) is not None:
            counted.append((found, bool(planned & setups(run, meta))))
    alike = [m for m, same in counted if same]
    every = alike or [m for m, _ in counted]
    chosen = every[:RECENT]
    if not chosen:
        return None
    launches = len({(c.repeat, c.world_size, c.extra_ranks) for c in configurations})  # as the dry run counts them
    return FixedCost(tuple(chosen), launches, launched, alike=bool(alike), counted=len(every))


def measured(run: Path, meta: dict) -> Measured | None:
    """The run's latest session's fixed cost, split (once, a launch's, a configuration's); None where its summary
    is missing or kept no split, or its launches cannot be counted."""
    try:
        summary = json.loads((run / layout.SUMMARY_JSON).read_text())
        session = summary.get("session") or summary
        phases = {k: float(v) for k, v in (session.get("phases_s") or {}).items()}
        wall = float(session["wall_s"])
        configurations = int(session.get("launched") or summary["configurations"])
        launches = session.get("launches")
        if launches is None and summary.get("sessions", 1) == 1:
            launches = _launches_planned(meta)
        launches = int(launches or 0)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return split(run.name, phases, wall, launches=launches, configurations=configurations)


def split(run: str, phases: dict[str, float], wall_s: float, *, launches: int, configurations: int) -> Measured | None:
    """A session's fixed cost (its wall time less its `steps`) split: once, a launch's, a configuration's (what bench's
    end says of its own session, and a dry run of another's); None where it kept no split or launched nothing."""
    if not phases or not launches or not configurations or not wall_s:
        return None
    per_launch = sum(phases.get(p, 0.0) for p in PER_LAUNCH)
    per_configuration = sum(phases.get(p, 0.0) for p in PER_CONFIGURATION)
    once = max(0.0, wall_s - phases.get("steps", 0.0) - per_launch - per_configuration)
    return Measured(run, once, per_launch / launches, per_configuration / configurations)


def _launches_planned(meta: dict) -> int | None:
    """The launches a one-session run made, from its run.json's configurations."""
    planned = meta.get("configurations")
    if not isinstance(planned, list):
        return None
    return len({(c.get("repeat", 0), c.get("world_size"), c.get("extra_ranks", 0)) for c in planned}) or None


def _run_world(run: Path, meta: dict) -> int | None:
    """An earlier run's largest world size: its run.json's, or, where that lists no configurations, its rows'."""
    planned = meta.get("configurations")
    if isinstance(planned, list) and planned:
        return max((int(c.get("world_size") or 0) for c in planned if isinstance(c, dict)), default=None)
    try:
        return int(store.read_configs(run)["world_size"].max())
    except (ConfigError, ValueError, OSError, KeyError):
        return None

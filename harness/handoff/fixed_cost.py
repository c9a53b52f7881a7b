"""What a planned run will pay here beyond its steps (`bench --dry-run`), as the earlier runs in its results folder
measured it: each run's summary.json keeps its latest session's wall time, where it went (harness.handoff.costs'
phases) and how many configurations and torchrun launches it made.

A session's fixed cost (its wall time less its `steps`) splits into what it pays per launch (`costs.PER_LAUNCH`:
the launch's plan, torchrun's start, imports, process group, row writer, teardown, pairing), per configuration
launched (`costs.PER_CONFIGURATION`: model info, build, between steps, parity, profile, gradient profile, gather,
write, release), of which `FIRST_REPEAT`'s (parity, the model's info and gradient profile) go to the configurations'
first repeats alone, per round of verdicts (`verdicts`: a round of `--repeats auto`'s each) and once (its start,
`other`). The planned run's fixed cost by one earlier run is that run's cost of each part times the planned run's
count of it (`Shape`); the forecast is the median over the newest RECENT runs that count, said with the median run's
parts (two middle runs': their mean) and the range. A run counts where it ran on this machine (its hostname) and
device kind, with as many (simulated) GPUs as planned (a launch of more ranks costs more to start and to tear down)
on as many nodes (a launch across nodes waits on their rendezvous, one on a node does not); of those, the runs of a
workload and size planned where there are any (building and parity cost with the model).

A summary from before summary.json counted launches (2026-12-06) gives them from its run.json's configurations, one
launch per repeat, world size and parameter-server rank, where the run had one session (no retry counted), and
its launcher's phases named since (launch plan, row writer, pairing, verdicts) within `other`, paid once; one that
kept no split of its time counts no more. A session's first repeats are its summary's (`first_repeats`); a run of
several sessions whose summary predates them (or rounds, always) is split without them: its rows do not say which of
its first repeats the latest session ran.
"""

from __future__ import annotations

import dataclasses
import json
import socket
from pathlib import Path
from typing import NamedTuple

from harness.analysis.forecast import measured_here, setups
from harness.handoff.costs import PER_CONFIGURATION, PER_LAUNCH
from harness.protocols import ConfigError
from harness.results import layout, store

RECENT = 5
"""The newest runs that count: older ones measured an older ddpbench, or a machine as it was then."""
FIRST_REPEAT = ("model info", "parity", "gradient profile")
"""The phases of PER_CONFIGURATION that a configuration's first repeat alone pays: its parity (`judges_parity`), and
its setup's model info and gradient profile, counted once and kept."""


@dataclasses.dataclass(frozen=True)
class Shape:
    """What of a run its fixed cost scales with."""

    launches: int  # torchrun launches
    configurations: int  # configurations launched
    firsts: int  # of them, first repeats
    rounds: int = 1  # rounds of verdicts: --repeats auto's looks, else the one at the end


@dataclasses.dataclass(frozen=True)
class Measured:
    """One earlier session's fixed cost, split."""

    run: str
    once_s: float
    launch_s: float  # a launch's
    configuration_s: float  # a configuration's
    first_s: float = 0.0  # what a first repeat pays more
    round_s: float = 0.0  # a round of verdicts'

    def for_plan(self, shape: Shape) -> float:
        return (self.once_s + shape.launches * self.launch_s + shape.configurations * self.configuration_s
                + shape.firsts * self.first_s + shape.rounds * self.round_s)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class FixedCost:
    """The planned run's fixed cost by each earlier run that counts (newest first)."""

    measured: tuple[Measured, ...]
    shape: Shape  # the planned run's
    alike: bool  # the runs ran a workload and size planned here
    counted: int  # the runs that count, RECENT of them at most measured

    def _each(self) -> list[float]:
        return [m.for_plan(self.shape) for m in self.measured]

    def of(self, configurations, *, rounds: int = 1) -> FixedCost:
        """The same runs' fixed cost for other planned `configurations` (more repeats, more rounds)."""
        return dataclasses.replace(self, shape=shape_of(configurations, rounds=rounds))

    @property
    def typical(self) -> Measured:
        """The median run for the planned run (by its fixed cost there): the middle one, or the mean of the two
        middle ones' parts, so that its parts add up to the median said, as medians of each part need not."""
        ranked = sorted(self.measured, key=lambda m: m.for_plan(self.shape))
        middle = ranked[(len(ranked) - 1) // 2 : len(ranked) // 2 + 1]
        parts = ("once_s", "launch_s", "configuration_s", "first_s", "round_s")
        return Measured(" and ".join(m.run for m in middle),
                        *(sum(getattr(m, part) for m in middle) / len(middle) for part in parts))  # fmt: skip

    @property
    def total_s(self) -> float:
        return self.typical.for_plan(self.shape)

    @property
    def spread_s(self) -> tuple[float, float]:
        return min(self._each()), max(self._each())


def largest_world(configurations) -> int:
    """The (simulated) GPUs a plan runs on: its largest world size."""
    return max((c.world_size for c in configurations), default=0)


def nodes_of(configurations) -> int:
    """The nodes a plan runs on (1 for a plan from before configurations said so)."""
    return max((max(c.nnodes, 1) for c in configurations), default=1)


def shape_of(configurations, *, rounds: int = 1) -> Shape:
    """The planned `configurations`' launches (as the dry run counts them), the configurations that launch (those
    skipped here launch nothing) and their first repeats."""
    from harness.config.grid import skip_reason

    launched = [c for c in configurations if not skip_reason(c)]
    launches = len({(c.repeat, c.world_size, c.extra_ranks) for c in configurations})
    return Shape(launches, len(launched), sum(1 for c in launched if c.repeat == 0), rounds)


def fixed_cost(configurations, results: Path) -> FixedCost | None:
    """The planned `configurations`' fixed cost as the runs in `results` measured it on this device kind, on this
    machine, with as many GPUs on as many nodes; None where none measured it."""
    if not configurations:
        return None
    device, host = configurations[0].device, socket.gethostname()
    shape = (largest_world(configurations), nodes_of(configurations))
    planned = {(cfg.workload, cfg.size) for cfg in configurations}
    counted: list[tuple[Measured, bool]] = []
    for run in store.list_runs(results):
        try:
            meta = store.read_run_meta(run)
        except ConfigError:
            continue
        if not measured_here(meta, device, host) or _run_shape(run, meta) != shape:
            continue
        if (found := measured(run, meta)) is not None:
            counted.append((found, bool(planned & setups(run, meta))))
    alike = [m for m, same in counted if same]
    every = alike or [m for m, _ in counted]
    chosen = every[:RECENT]
    if not chosen:
        return None
    return FixedCost(tuple(chosen), shape_of(configurations), alike=bool(alike), counted=len(every))


def session_split(run: Path) -> tuple[Measured, Shape] | None:
    """The run's latest session's fixed cost split (`measured`), and what of it the parts are paid for: its launches,
    configurations launched, first repeats and rounds of verdicts (what bench's end says of its own run, in the
    words a dry run of it planned again says)."""
    try:
        session = _latest_session(run, store.read_run_meta(run))
    except ConfigError:
        return None
    found = session.split(run.name) if session else None
    if found is None:
        return None
    return found, Shape(session.launches, session.configurations, session.firsts or 0, session.rounds or 1)


def measured(run: Path, meta: dict) -> Measured | None:
    """The run's latest session's fixed cost, split (once, a launch's, a configuration's, a first repeat's more, a
    round of verdicts'); None where its summary is missing or kept no split, or its launches cannot be counted."""
    session = _latest_session(run, meta)
    return session.split(run.name) if session else None


class _Session(NamedTuple):
    """A run's latest session as summary.json and its rows keep it: its phases, its wall time and what its fixed cost
    is paid for (first repeats and rounds None where several sessions leave them unknown)."""

    phases: dict[str, float]
    wall_s: float
    launches: int
    configurations: int
    firsts: int | None
    rounds: int | None

    def split(self, run: str) -> Measured | None:
        return split(run, self.phases, self.wall_s, launches=self.launches, configurations=self.configurations,
                     firsts=self.firsts, rounds=self.rounds)  # fmt: skip


def _latest_session(run: Path, meta: dict) -> _Session | None:
    """The run's latest session; None where its summary is missing or unreadable."""
    try:
        summary = json.loads((run / layout.SUMMARY_JSON).read_text())
        session = summary.get("session") or summary
        phases = {k: float(v) for k, v in (session.get("phases_s") or {}).items()}
        wall = float(session["wall_s"])
        configurations = int(session.get("launched") or summary["configurations"])
        launches = session.get("launches")
        # a resume after a session that wrote no summary (killed outright) counts 1 there: run.json lists both
        one_session = summary.get("sessions", 1) == 1 and len(meta.get("sessions") or []) <= 1
        if launches is None and one_session:
            launches = _launches_planned(meta)
        launches = int(launches or 0)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    # the session's own first repeats, as `launched` counts its configurations: the run's rows counted every
    # session's ("1 configuration at 0.21 s and 0.12 s more for each of their 2 first repeats"); a summary from
    # before it recorded them leaves the rows to say, where it was the run's only session
    firsts = session.get("first_repeats", _first_repeats(run) if one_session else None)
    rounds = 1 + len(meta.get("look_sizes") or []) if one_session else None  # a look at each round's end
    return _Session(phases, wall, launches, configurations, firsts, rounds)


def split(run: str, phases: dict[str, float], wall_s: float, *, launches: int, configurations: int,
          firsts: int | None = None, rounds: int | None = None) -> Measured | None:  # fmt: skip
    """A session's fixed cost (its wall time less its `steps`) split: once, a launch's, a configuration's, and where
    `firsts` (its first repeats) and `rounds` (of verdicts) are known, a first repeat's more and a round's (what
    bench's end says of its own session, and a dry run of another's); None where it kept no split or launched
    nothing."""
    if not phases or not launches or not configurations or not wall_s:
        return None
    per_launch = sum(phases.get(p, 0.0) for p in PER_LAUNCH)
    first = sum(phases.get(p, 0.0) for p in FIRST_REPEAT) if firsts else 0.0
    per_configuration = sum(phases.get(p, 0.0) for p in PER_CONFIGURATION) - first
    verdicts = phases.get("verdicts", 0.0) if rounds else 0.0
    once = max(0.0, wall_s - phases.get("steps", 0.0) - per_launch - per_configuration - first - verdicts)
    return Measured(run, once, per_launch / launches, per_configuration / configurations,
                    first / firsts if firsts else 0.0, verdicts / rounds if rounds else 0.0)  # fmt: skip


def _first_repeats(run: Path) -> int | None:
    """How many first repeats the run launched (its rows': not skipped, repeat 0); None where its rows cannot say."""
    try:
        rows = store.read_configs(run)
        return int(((rows["status"] != "skipped") & (rows["repeat"].fillna(0) == 0)).sum()) or None
    except (ConfigError, ValueError, OSError, KeyError):
        return None


def _launches_planned(meta: dict) -> int | None:
    """The launches a one-session run made, from its run.json's configurations."""
    planned = meta.get("configurations")
    if not isinstance(planned, list):
        return None
    return len({(c.get("repeat", 0), c.get("world_size"), c.get("extra_ranks", 0)) for c in planned}) or None


def _run_shape(run: Path, meta: dict) -> tuple[int, int] | None:
    """An earlier run's largest world size and its nodes: its run.json's, or, where that lists no configurations, its
    rows' (1 node where they predate the column)."""
    planned = [c for c in meta.get("configurations") or [] if isinstance(c, dict)]
    if planned:
        return max(int(c.get("world_size") or 0) for c in planned), max(int(c.get("nnodes") or 1) for c in planned)
    try:
        rows = store.read_configs(run)
        return int(rows["world_size"].max()), int(rows["nnodes"].max()) if "nnodes" in rows else 1
    except (ConfigError, ValueError, OSError, KeyError):
        return None

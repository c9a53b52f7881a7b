"""Where a `bench` launch's time goes beyond its training steps: the fixed cost per configuration.

Rank 0 times each phase of its launch (interpreter and imports, process group, its row writer, and
per configuration: model info, build, the training loop, parity, profile, gradient profile, gather,
write, memory release) and keeps the sums in `plan/<launch>.costs.json`, next to the launch's
plan, rewritten after every configuration so that a launch that dies still tells where its time
went. The launcher reads it when the launch ends and adds what only it sees (torchrun's start,
the ranks' teardown), and times its own work around the launches (`timed`: each launch's plan,
the pairing after it, the verdicts). Every figure is wall-clock seconds on rank 0; the training loop is split
into its timed steps (`steps`, warm-up included: what `bench` calls training) and what runs
between them (`between steps`: batches, zeroing gradients, the window's barrier).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path

from harness.clock import host_seconds
from harness.results.layout import costs_path

PHASES = (
    "start",  # the ddpbench command itself until its first launch: interpreter, imports, flags checked, run planned
    "launch plan",  # the launcher before each launch: the rows written so far read, the launch's plan and their
    # snapshot written (harness.launch.launcher)
    "launch",  # the launcher's torchrun call until rank 0's process starts (on the CPU, in the run's first launch:
    # what is left of the zygote's imports, which began during `start`)
    "imports",  # rank 0's interpreter start and the worker module's imports (torch and its compiler, the
    # plug-ins); none where the run's zygote imported them once and every rank is forked (the CPU; a GPU's too)
    "process group",  # init_process_group, the imports' objects frozen (housekeeping)
    "row writer",  # rank 0 made ready to write rows: pandas imported (each launch: the ranks start without it),
    # the rows written before read, Parquet's warm-up
    "model info",  # FLOP counting and sizes, once per workload setup
    "build",  # strategy, model, wrap, optimizer, memory sampler
    "steps",  # the timed training steps, warm-up included
    "between steps",  # the training loop's time outside its timed steps
    "parity",  # full state gathered, reference (once per setup), verdict; GPU replay
    "profile",  # --profile's extra steps
    "gradient profile",  # once per setup at world size 1 (input of `predict`)
    "gather",  # every rank's results to rank 0
    "write",  # records assembled, Parquet parts written
    "release",  # garbage collection, the allocator's cache, the heap trimmed
    "teardown",  # the ranks' exit until torchrun returns
    "pairing",  # the launcher after a launch: the paired columns of its rows derived again (harness.handoff.pairing)
    "verdicts",  # the launcher reading the rows and judging them: after each round of --repeats auto, and at the
    # run's end (the cap recommendations written, the verdicts and sentences said)
)
"""The split `bench` prints, in a run's order; anything else in a run's wall time is `other`."""
PER_LAUNCH = ("launch plan", "launch", "imports", "process group", "row writer", "teardown", "pairing")
"""The phases a session pays again with each launch."""
PER_CONFIGURATION = ("model info", "build", "between steps", "parity", "profile", "gradient profile", "gather", "write",
                     "release")  # fmt: skip
"""The phases a session pays with each configuration it launches (model info and the parity reference: once per
workload setup, spread over its configurations)."""
# The rest beyond `steps` a session pays once: its `start`, its `verdicts` (a round of --repeats auto's each), `other`.


class CostClock:
    """Seconds per phase, summed over a launch's configurations; one per worker process. `lap`
    gives a phase the time since the previous lap, so the worker marks only where a phase ends."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path  # where `save` writes (rank 0's); None: kept in memory only
        self.seconds: dict[str, float] = {}
        self.started_at = self.last_at = time.time()  # epoch seconds: the launcher's clock is another process's
        self._mark = host_seconds()

    def since_process_start(self, phase: str) -> CostClock:
        """The time from this process's start (or this clock's) until now, as `phase`."""
        self.started_at = process_started_at() or self.started_at
        self.add(phase, time.time() - self.started_at)
        self._mark = host_seconds()
        return self

    def add(self, phase: str, seconds: float) -> None:
        if phase not in PHASES:
            raise KeyError(f"unknown fixed-cost phase {phase!r}; phases: {', '.join(PHASES)}")
        self.seconds[phase] = self.seconds.get(phase, 0.0) + max(seconds, 0.0)

    def lap(self, phase: str | None) -> None:
        """The time since the last lap is `phase`'s (None: nobody's)."""
        now = host_seconds()
        if phase is not None:
            self.add(phase, now - self._mark)
        self._mark = now

    def lap_training(self, steps: list[dict[str, float]]) -> None:
        """The training loop since the last lap: its timed steps (`step_ms`, warm-up included), and
        the rest of the loop as `between steps`."""
        now = host_seconds()
        loop_s = now - self._mark
        stepped_s = min(sum(step["step_ms"] for step in steps) / 1e3, loop_s)
        self.add("steps", stepped_s)
        self.add("between steps", loop_s - stepped_s)
        self._mark = now

    def save(self) -> None:
        """The sums so far, for the launcher (a plain rename, no fsync: an account, not a result)."""
        if self.path is None:
            return
        self.last_at = time.time()
        account = {"started_at": self.started_at, "last_at": self.last_at, "seconds": self.seconds}
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        with contextlib.suppress(OSError):  # never costs a measurement
            tmp.write_text(json.dumps(account))
            os.replace(tmp, self.path)


def process_started_at() -> float | None:
    """When this process began, in epoch seconds (Linux: /proc's start time, 10 ms ticks since
    boot, against the boot-time clock); None where that cannot be read."""
    try:
        after_name = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        start_ticks = int(after_name[19])  # field 22 of proc(5), counted after "pid (comm)"
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return time.time() - age


def read_launch(plan_path: Path, *, launched_at: float, ended_at: float) -> dict[str, float]:
    """One launch's split, seconds per phase: rank 0's own account plus torchrun's start (until
    rank 0's worker module began) and the teardown (after rank 0's last account). Without an
    account (the launch never reached the worker), the whole launch is `launch`."""
    path = costs_path(plan_path)
    try:
        account = json.loads(path.read_text())
    except (OSError, ValueError):
        return {"launch": max(ended_at - launched_at, 0.0)}
    seconds = {k: float(v) for k, v in account["seconds"].items() if k in PHASES}
    seconds["launch"] = max(account["started_at"] - launched_at, 0.0)
    seconds["teardown"] = max(ended_at - account["last_at"], 0.0)
    return seconds


def add_into(total: dict[str, float], seconds: dict[str, float]) -> None:
    for phase, value in seconds.items():
        total[phase] = total.get(phase, 0.0) + value


@contextlib.contextmanager
def timed(total: dict[str, float], phase: str):
    """The launcher's own phases (`launch plan`, `pairing`, `verdicts`): the block's wall time added to `total`."""
    if phase not in PHASES:
        raise KeyError(f"unknown fixed-cost phase {phase!r}; phases: {', '.join(PHASES)}")
    began = time.monotonic()
    try:
        yield
    finally:
        add_into(total, {phase: time.monotonic() - began})

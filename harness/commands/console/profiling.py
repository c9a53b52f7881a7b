"""What a profile measured now (`predict` without a stored one) says while it is measured: each slow step's
progress, a machine too busy to measure on (said before a CPU bench run too), steps too uneven to trust."""

from __future__ import annotations

from harness.commands.console import say, warning
from harness.results.values import counted

PROFILE_ON_A_BUSY_MACHINE = (
    "the profile measured now shares its cores, and every step predicted from it is as "
    "slow; profile when it is quiet, or use a run's stored profile (--run)"
)


def warn_if_busy(consequence: str = PROFILE_ON_A_BUSY_MACHINE) -> None:
    """A measurement made now shares the cores with whatever else runs: a busy machine's profile (or run) is slow,
    and so is every step predicted from it (a review measured 29 ms forward under load, 0.16 ms quiet)."""
    import os

    from harness.config.ranks import available_cpus

    load, cores = os.getloadavg()[0], available_cpus()
    if load > cores:
        warning(f"this machine is busy (load {load:.1f} on {counted(cores, 'core')}): {consequence}")


def warn_if_noisy(seconds: list[float]) -> None:
    """Steps that differ by more than stats.NOISY_CV: the medians the profile keeps are as unsure."""
    from harness.analysis import stats

    cv = stats.summarize(seconds)["step_ms_cv"]  # a CV has no unit: seconds serve as well as ms
    if stats.is_noisy(cv):
        low, high = (f"{s * 1e3:.0f}" if s >= 0.1 else f"{s * 1e3:.3g}" for s in (min(seconds), max(seconds)))
        warning(f"the profile's {len(seconds)} steps took {low}–{high} ms "
                        f"(CV {cv:.2f}): the prediction is as unsure; --profile-steps 20 measures more")  # fmt: skip


class SlowStepProgress:
    """`on_step(done, total)` for a profile measured now: each step said once steps take long (2 s or
    more each), nothing for quick ones. A CPU profile of a full model takes minutes."""

    SLOW_S = 2.0

    def __init__(self) -> None:
        import time

        self.clock = time.perf_counter
        self.began = self.clock()
        self.ends: list[float] = []

    def step_seconds(self) -> list[float]:
        """Each step's time, from one call to the next (the first from the start, building included)."""
        import itertools

        return [b - a for a, b in itertools.pairwise([self.began, *self.ends])]

    def __call__(self, done: int, total: int) -> None:
        import statistics

        self.ends.append(self.clock())
        elapsed = self.clock() - self.began
        steps = self.step_seconds()
        pace = statistics.median(steps[1:]) if len(steps) > 1 else steps[0]  # the first holds the model's build
        if pace >= self.SLOW_S:
            left = pace * (total - done)
            say(f"ddpbench predict: profiled step {done}/{total} ({elapsed:.0f} s; about {left:.0f} s to go)")

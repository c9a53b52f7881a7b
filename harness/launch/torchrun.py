"""One supervised torchrun launch of a rank module: the path every launch takes, `bench`'s
worker (`harness.rank.worker`) and `collectives`' measurement (`harness.rank.collectives`) alike.

`launch_ranks` starts torchrun with its output in the run's `logs/`, follows the ranks' progress
(rank 0's hint in the run folder, and whatever parts the caller counts as finished work), ends
a launch that goes quiet for too long after asking every rank where it is (the hang's
description names the rank the others wait for), and never leaves a rank behind: not when the
launch ends, not on Ctrl-C. Why a launch failed is read from what it leaves (`diagnose`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from harness.config.bench import ConfigError
from harness.config.ranks import (
    FORK_RANKS,
    available_cpus,
    check_gpu_zygote_switch,
    child_environment,
    forks_ranks,
    threads_per_rank,
)
from harness.handoff import liveness
from harness.handoff.progress import read_step_progress
from harness.launch import supervise, zygote
from harness.launch.rendezvous import Rendezvous
from harness.launch.zygote import AGENT
from harness.results.layout import RunFolder

WORKER = "harness.rank.worker"  # the rank side of `bench`
ONE_NODE_LAUNCH = Rendezvous()
POLL_S = 0.1  # how often the supervisor looks at a launch: an ended launch is seen within it


def check_switches() -> None:
    """DDPBENCH_FAULT and DDPBENCH_GPU_ZYGOTE, read before any run folder is made: a typo is bad input (exit 2),
    not a run whose every configuration fails in its ranks, or one that quietly measures the other launch."""
    from harness.handoff import faults

    try:
        faults.check_fault_environment()
        check_gpu_zygote_switch()
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def torchrun_command(
    module: str,
    plan_path: Path,
    *,
    local_ranks: int,
    rendezvous: Rendezvous,
    log_dir: Path | None = None,
    fork_ranks: bool = False,
) -> list[str]:
    # torchrun notices a dead rank within the monitor interval; its @record error files
    # (a rank's uncaught exception, with its traceback) go into the run folder. harness.launch.agent is
    # torchrun's own main, without the half second of finalisation after a launch that went well, and
    # with `fork_ranks` the module imported once and every rank forked from it.
    logging = [f"--log-dir={log_dir}"] if log_dir is not None else []
    forking = [FORK_RANKS] if fork_ranks else []
    return [
        sys.executable, "-m", AGENT, *forking, *rendezvous.flags(),
        f"--nproc-per-node={local_ranks}", "--max-restarts=0", "--monitor-interval=0.1", *logging,
        "-m", module, str(plan_path),
    ]  # fmt: skip


def start_early(module: str, *, threads: int, cuda: bool = False) -> None:
    """Start the zygote for `module` (the ranks' imports: 2.5-3 s here) now, before the command's own imports and
    checks (on a GPU, `cuda`: once the device is known), rather than at its first launch, in the environment
    `launch_ranks` gives a launch with `threads` a rank. Bad input ends it unused; a first launch in another
    environment replaces it."""
    zygote.for_launch(module, child_environment(threads), cuda=cuda)


def start_worker_early(*, local_ranks: int, device: str = "cpu") -> None:
    """`bench`'s zygote (`start_early` for its worker), for `local_ranks` ranks a node; where a strategy's extra rank
    changes each rank's share of the cores, the first launch replaces it. Light: the command line calls it before it
    imports the command (`harness.cli.start_ranks_early`)."""
    threads = threads_per_rank(device=device, max_local_ranks=local_ranks, cpu_count=available_cpus())
    start_early(WORKER, threads=threads, cuda=device == "cuda")


def end_early() -> None:
    """A GPU after all (`start_early` went by a guess, for the CPU), or nothing to launch: the zygote would only
    hold a core and 300 MiB until the command exits."""
    zygote.close_all()


def _start(
    command: list[str], module: str, *, log: IO, env: dict[str, str], fork: bool, cuda: bool = False
) -> supervise.Agent:
    """The launch's agent: where it forks its ranks (`fork`), forked from the run's zygote for `module` (its
    imports done once a run, `harness.launch.zygote`), else (or if the zygote is gone) a fresh `python -m`
    process, which on a GPU (`cuda`) starts its ranks as fresh interpreters too. A command that is not the
    agent's (a wrapper, a test's stand-in) runs as it is given."""
    if fork and command[:3] == [sys.executable, "-m", AGENT]:
        parent = zygote.for_launch(module, env, cuda=cuda)
        forked = parent.start(command[3:], log=Path(log.name), env=env) if parent is not None else None
        if forked is not None:
            return forked
        if cuda:  # the module's import may be what initialised CUDA: not in the agent either
            command = [arg for arg in command if arg != FORK_RANKS]
    return supervise.start(command, log=log, env=env)


@dataclasses.dataclass
class LaunchEnd:
    """How one torchrun launch ended."""

    returncode: int
    log: Path
    hint: dict[str, Any] | None  # rank 0's last progress hint: the unit of work and step it was in
    came_alive: bool  # whether any rank showed progress: if not, the launch itself failed
    hang: str | None = None  # set when the supervisor ended a launch that made no progress


# Called on every poll: (units of work newly finished, whether all of the launch's work is done).
Collect = Callable[[], tuple[int, bool]]


def _nothing_collected() -> tuple[int, bool]:
    return 0, False


@dataclasses.dataclass
class _Follow:
    """What the supervisor has seen of one launch so far."""

    watch: supervise.ProgressWatch
    before: dict[str, Any] | None  # the hint an earlier launch left in the run folder
    hint: dict[str, Any] | None = None
    came_alive: bool = False

    def finished_units(self, count: int) -> None:
        for _ in range(count):
            self.came_alive = True
            self.watch.progressed(new_configuration=True)

    def read_hint(self, run: Path) -> None:
        latest = read_step_progress(run)
        if latest != self.hint and latest != self.before:
            self.came_alive = True
            new = (latest or {}).get("config_id") != (self.hint or {}).get("config_id")
            self.watch.progressed(new_configuration=new, stepping=bool((latest or {}).get("total")))
            self.hint = latest


def launch_ranks(
    module: str,
    plan_path: Path,
    world: int,
    *,
    run: Path,
    name: str,
    threads: int,
    timeout_s: float | None,
    rendezvous: Rendezvous = ONE_NODE_LAUNCH,
    extra_ranks: int = 0,
    collect: Collect = _nothing_collected,
    on_tick: Callable[[], None] | None = None,
    device: str,
) -> LaunchEnd:
    """Run `python -m module plan_path` in `world` ranks (plus `extra_ranks`, e.g. a parameter
    server) under torchrun, watched until it ends or goes quiet for too long; the agent is forked from the
    run's zygote, which imported the module once, and every rank from the agent (`harness.launch.zygote`,
    `harness.launch.agent`; on a GPU while the zygote has not initialised CUDA, with DDPBENCH_GPU_ZYGOTE=1).

    The log is `run/logs/<name>.log`, torchrun's error files go to `run/logs/<name>.torchrun/`.
    `collect` says what finished (each finished unit is progress, and once all is done only the
    ranks' teardown is left); `timeout_s` is the silence allowed (None: judged from the pace seen,
    see `supervise.ProgressWatch`). Every process of the launch is gone when this returns or raises.
    """
    log_path = RunFolder(run).log(name)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    fork = forks_ranks(device)
    command = torchrun_command(
        module,
        plan_path,
        local_ranks=world // rendezvous.nnodes + extra_ranks,
        rendezvous=rendezvous,
        log_dir=RunFolder(run).log(name).with_suffix(".torchrun"),
        fork_ranks=fork,
    )
    follow = _Follow(supervise.ProgressWatch(timeout_s), before=read_step_progress(run))
    hang = None
    with open(log_path, "w") as log:
        process = _start(command, module, log=log, env=child_environment(threads), fork=fork, cuda=device == "cuda")
        try:
            hang = _supervise(process, follow, run=run, ranks=world + extra_ranks, collect=collect, on_tick=on_tick)
            if hang is None:
                follow.read_hint(run)  # the ranks' last word, given between the last poll and the end
        finally:
            supervise.stop(process)  # no-op for a launch that ended; no orphans for one that did not
    return LaunchEnd(process.returncode, log_path, follow.hint if follow.came_alive else None, follow.came_alive, hang)


def _supervise(
    process: supervise.Agent,
    follow: _Follow,
    *,
    run: Path,
    ranks: int,
    collect: Collect,
    on_tick: Callable[[], None] | None,
) -> str | None:
    """Poll until the launch exits, its work is all done, or it hangs (returns the hang's description)."""
    while True:
        exited = process.poll() is not None
        newly, done = collect()
        follow.finished_units(newly)
        if exited or done:
            break
        follow.read_hint(run)
        if follow.watch.expired():
            return describe_hang(run, ranks, follow.watch, follow.hint)
        if on_tick is not None:
            on_tick()
        time.sleep(POLL_S)
    # After the last unit is written the ranks only tear down: give them time.
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=follow.watch.limit_s())
    return None


def describe_hang(run: Path, ranks: int, watch: supervise.ProgressWatch, hint: dict | None) -> str:
    answers = liveness.ask(run, list(range(ranks)))
    return (
        f"timeout: no progress for {watch.silent_s():.0f} s (limit {watch.limit_s():.0f} s){where(hint)}; "
        f"{liveness.describe_hang(answers)}"
    )


# What a hint's step counts, by its phase; a phase not named here is its own name
# (collectives: "all_reduce message size").
STEP_NAMES = {"train": "step", "parity": "parity reference step"}


def where(hint: dict | None) -> str:
    """' after rank 0 had reported step 3/10' (', a warm-up step' where the hint says it was one), ' before its first
    step completed', or nothing without a hint. Rank 0 notes a configuration when it starts and each step once done,
    so a note without a step total says only that no step had completed (its build, its wrapping or its first step:
    which, the note does not know). The note is written at most twice a second: on fast steps it lags the step the
    launch ended in."""
    if not hint or not hint.get("total"):
        return " before its first step completed" if hint else ""
    what = STEP_NAMES.get(hint.get("phase"), hint.get("phase") or "step")
    warm_up = hint.get("phase") == "train" and hint["step"] <= (hint.get("warmup") or 0)
    return f" after rank 0 had reported {what} {hint['step']}/{hint['total']}" + ", a warm-up step" * warm_up

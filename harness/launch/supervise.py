"""Keeping a torchrun launch on a leash: start it, watch its progress, end it without orphans,
and read why it died.

torchrun starts every rank in a session of its own, so a signal to torchrun's process group
does not reach them; `stop` therefore signals torchrun and every descendant by pid.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import IO, Protocol

TERM_GRACE_S = 3.0
# Before a launch's first sign of life: interpreter start, imports, rendezvous.
STARTUP_S = 300.0
# Without --timeout: this many times the slowest interval between two signs of progress
# seen in the configuration, and at least MIN_AUTO_TIMEOUT_S.
AUTO_TIMEOUT_FACTOR = 10.0
MIN_AUTO_TIMEOUT_S = 60.0
# From a configuration's start to its first step (model build, wrap, the first collectives, and
# in a fresh launch the imports): without --timeout this long, with it at least FIRST_STEP_MIN_S.
FIRST_STEP_S = 600.0
FIRST_STEP_MIN_S = 30.0
# torchrun's c10d rendezvous gives up on the nodes that have not joined after this (its default join_timeout).
RENDEZVOUS_JOIN_S = 600.0


def startup_limit_s(timeout_s: float | None) -> float:
    """How long a launch waits for its first sign of life (across nodes: for every node to join) before it is
    ended: the supervisor's limit, or torchrun's own where that comes first."""
    return min(max(timeout_s or 0.0, STARTUP_S), RENDEZVOUS_JOIN_S)


def die_with_parent() -> None:
    """torchrun gets SIGTERM if ddpbench itself is killed (Linux): no launch outlives it."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Agent(Protocol):
    """What the supervisor uses of a launch's torchrun agent: a Popen, or one the zygote forked."""

    pid: int
    returncode: int | None

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


def start(command: list[str], *, log: IO, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True, preexec_fn=die_with_parent
    )


def descendants(pid: int) -> list[int]:
    """Every process below `pid`, from /proc (children before grandchildren)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found, frontier = [], [pid]
    while frontier:
        below = [child for p in frontier for child in children.get(p, [])]
        found.extend(below)
        frontier = below
    return found


def _signal_all(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _state(pid: int) -> str | None:
    """The kernel's one-letter state (R, S, T for stopped, Z for zombie), None when gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def _alive(pid: int) -> bool:
    return _state(pid) not in (None, "Z")


def stop(process: Agent, *, grace_s: float = TERM_GRACE_S) -> None:
    """SIGTERM to torchrun and all its ranks, SIGKILL to whatever is left after `grace_s`, and back only once
    those are gone (a process killed with a large heap takes a moment to release it, more on a busy machine)."""
    if process.poll() is not None:
        ranks = [pid for pid in descendants(process.pid) if _alive(pid)]
        _signal_all(ranks, signal.SIGKILL)  # ranks torchrun left behind (it normally reaps them)
        _wait_gone(ranks, grace_s)
        return
    everyone = [process.pid, *descendants(process.pid)]
    _signal_all([pid for pid in everyone if _state(pid) == "T"], signal.SIGKILL)  # a stopped rank ignores SIGTERM
    _signal_all(everyone, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(_alive(pid) for pid in everyone):
        time.sleep(0.05)
        process.poll()  # reap torchrun, so that it stops counting as alive
    _signal_all([pid for pid in everyone if _alive(pid)], signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=grace_s)
    _wait_gone(everyone, grace_s)


def _wait_gone(pids: list[int], limit_s: float) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.02)


@dataclasses.dataclass(frozen=True)
class RankExit:
    """One failed rank in torchrun's failure summary."""

    rank: int
    exitcode: int
    error_file: str | None  # torchrun's @record file: the exception that ended the rank, if any

    @property
    def by_signal(self) -> bool:
        return self.exitcode < 0

    def exception_line(self) -> str | None:
        """The last line of the exception that ended the rank (from its error file), if one did."""
        try:
            message = json.loads(Path(self.error_file).read_text())["message"]
        except (TypeError, OSError, ValueError, KeyError):
            return None
        text = message.get("message") if isinstance(message, dict) else message
        lines = [line.strip() for line in str(text).splitlines() if line.strip()]
        return lines[-1] if lines else None

    def describe(self) -> str:
        if self.by_signal:
            try:
                name = signal.Signals(-self.exitcode).name
            except ValueError:
                name = f"signal {-self.exitcode}"
            return f"rank {self.rank} killed by {name} (exit code {self.exitcode})"
        return f"rank {self.rank} exited with code {self.exitcode}"


_RANK_EXIT = re.compile(
    r"rank\s*:\s*(\d+) \(local_rank.*?exitcode\s*:\s*(-?\d+).*?error_file\s*:\s*([^\n]*)", re.DOTALL
)


def rank_exits(log_text: str) -> list[RankExit]:
    """Every failed rank torchrun reports at the end of a launch that failed, each once."""
    summary = log_text[log_text.rfind("Failures:") :] if "Failures:" in log_text else ""
    found: dict[int, RankExit] = {}
    for rank, exitcode, error_file in _RANK_EXIT.findall(summary):
        error_file = error_file.strip()
        found.setdefault(int(rank), RankExit(int(rank), int(exitcode), None if error_file == "<N/A>" else error_file))
    return sorted(found.values(), key=lambda e: e.rank)


class ProgressWatch:
    """Has the running configuration gone quiet for too long?

    `progressed()` is called on every sign of progress (a step, a reference step, a written
    configuration). With --timeout the limit is that many seconds of silence; without it, ten
    times the slowest interval seen so far in the configuration (at least a minute). Before a
    configuration's first step, and before a launch's first sign of life (interpreters,
    imports, rendezvous), the limits are more generous either way.
    """

    def __init__(self, timeout_s: float | None, *, now: float | None = None) -> None:
        self._timeout_s = timeout_s
        self._last = time.monotonic() if now is None else now
        self._started = False  # any sign of life from this launch yet
        self._slowest = 0.0
        self._steps_seen = 0

    def progressed(self, *, new_configuration: bool = False, stepping: bool = False, now: float | None = None) -> None:
        """A sign of progress; `stepping`: the configuration has finished a step (the hint is
        throttled, so its first sign may already be a step)."""
        now = time.monotonic() if now is None else now
        if new_configuration:
            self._slowest, self._steps_seen = 0.0, int(stepping)
        elif self._started:
            self._slowest = max(self._slowest, now - self._last)
            self._steps_seen += 1
        self._started = True
        self._last = now

    def limit_s(self) -> float:
        if not self._started:
            return max(self._timeout_s or 0.0, STARTUP_S)
        if self._steps_seen == 0:
            return FIRST_STEP_S if self._timeout_s is None else max(self._timeout_s, FIRST_STEP_MIN_S)
        if self._timeout_s is not None:
            return self._timeout_s
        return max(MIN_AUTO_TIMEOUT_S, AUTO_TIMEOUT_FACTOR * self._slowest)

    def silent_s(self, now: float | None = None) -> float:
        return (time.monotonic() if now is None else now) - self._last

    def expired(self, now: float | None = None) -> bool:
        return self.silent_s(now) > self.limit_s()

"""A run's progress on the console (`Progress`, the launcher's callbacks): a line per finished configuration, always;
on a terminal also a bar with the current configuration, its steps and an ETA (tqdm); off a terminal a line a minute
while a configuration runs long, with what the bar would show. `Status`: what another command's long, silent part
is doing, on a transient line the next line replaces.
"""

from __future__ import annotations

import atexit
import contextlib
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from harness.commands import console
from harness.commands.console import _print, duration_text

if TYPE_CHECKING:
    from harness.config.grid import Configuration


GROWING_BAR = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}, {rate_fmt}{postfix}]"
"""tqdm's bar without its ETA, for `--repeats auto` (`grows`), whose total grows by rounds: tqdm's '<00:20' was the
time to the round's end, beside the standing's own time to decide the verdicts (console.rounds)."""
HEARTBEAT_S = 60.0
"""Off a terminal, a configuration still running this long after the last line said gets a line (`Progress.tick`)."""


class Progress:
    """The launcher's callbacks: `written` when a configuration is on disk, `tick` while one runs."""

    def __init__(self, run: Path, pending: list[Configuration], *, done: int = 0, stream: TextIO | None = None,
                 budget_ends: float | None = None, grows: bool = False):  # fmt: skip
        self._run = run
        self._budget_ends = budget_ends  # --budget's end on the monotonic clock: the heartbeat says an ETA past it
        self._pending = list(pending)
        self._done = done
        self._total = done + len(pending)
        self._stream = stream if stream is not None else sys.stdout
        self._bar = None
        self._above = False  # inside `above`: the bar is wiped until it ends
        self.decided: set[str] = set()  # under --repeats auto, the verdicts the last round found decided
        self.given_up: dict[str, int] = {}  # and given up as out of reach: at how many repeats (console.rounds)
        self._standing = ""  # and where they stand, shown in the bar (console.rounds)
        self.said: set[str] = set()  # the verdicts' words said so far: each why once (console.rounds)
        self._began = self._said = self._current_began = time.monotonic()  # off a terminal: the heartbeat's clocks
        self._done_here = 0  # configurations finished in this session: the pace its ETA takes, as tqdm's does
        self._announced: set[str] = set()  # the configurations whose line was printed
        self._current: Configuration | None = None  # the pending one rank 0's hint names (launches take their order)
        if self._stream.isatty() and pending:
            from tqdm import tqdm

            self._bar = tqdm(total=self._total, initial=done, unit="config", file=self._stream, dynamic_ncols=True,
                             bar_format=GROWING_BAR if grows else None)  # fmt: skip
            self._show_current()

    @property
    def on_terminal(self) -> bool:
        return self._bar is not None

    def show_standing(self, text: str) -> None:
        """Where `--repeats auto`'s verdicts stand, in the bar's description, until the next round's."""
        self._standing = f"{text} · "
        self._show_current()

    @contextlib.contextmanager
    def above(self):
        """Inside, lines said on the console go above the bar, which is wiped first and drawn again after: said
        while it stood, a round's line was printed onto the bar's own line."""
        if self._bar is None:
            yield
            return
        self._bar.clear()
        self._above = True  # what changes inside is drawn on leaving
        try:
            yield
        finally:
            self._above = False
            if self._bar is not None:
                self._bar.refresh()

    def _show_current(self) -> None:
        if self._bar is not None and self._pending:
            running = f"running {self._current.label()}" if self._current else "launching the next configuration"
            self._bar.set_description_str(f"{self._standing}{running}", refresh=not self._above)

    def written(self, cfg: Configuration) -> None:
        """Its line, once. Counted as said only once printed: a signal while its row is read or its line printed
        (pyarrow's read, interrupted, raised) leaves it pending, for `catch_up` to say before the stop's count."""
        from harness.results import store

        if cfg.config_id in self._announced:
            return  # said already (catch_up, then the launcher's own call)
        row = store.read_config_row(self._run, cfg.config_id)
        line = f"[{self._done + 1}/{self._total}] {console.describe_row(row)}"
        if self._bar is None:
            _print(line, file=self._stream)
        else:
            self._bar.write(line, file=self._stream)
        self._announced.add(cfg.config_id)
        self._done += 1
        self._done_here += 1
        self._said = self._current_began = time.monotonic()
        self._pending = [c for c in self._pending if c.config_id != cfg.config_id]
        self._current = None
        if self._bar is not None:
            self._bar.update(1)
            self._show_current()

    def catch_up(self) -> None:
        """Announce the configurations that reached the disk unannounced (a stop can come between a write and
        its line, or in the line itself), so that the lines printed add up to the count the stop line gives."""
        from harness.results import store

        on_disk = store.written_config_ids(self._run)
        for cfg in [c for c in self._pending if c.config_id in on_disk]:
            self.written(cfg)

    def extend(self, more: list[Configuration]) -> None:
        """More configurations to come (a round of `--repeats auto`)."""
        self._pending += list(more)
        self._total += len(more)
        if self._bar is not None:
            self._bar.total = self._total
            self._bar.refresh()
            self._show_current()

    def tick(self) -> None:
        """Show how far the current configuration is (steps done): in the bar on a terminal; elsewhere a line when
        nothing was said for HEARTBEAT_S, with the bar's words and its ETA (a slow configuration left logs silent
        for 12 minutes). The current one is the pending configuration rank 0's hint names, not the first planned:
        a launch runs its configurations in an order of its own (harness.launch.earlier.first_to_judge); before
        the hint names one, the next is launching, unnamed."""
        from harness.handoff.progress import read_step_progress

        if not self._pending:
            return
        state = read_step_progress(self._run)
        named = (state or {}).get("config_id")
        current = next((c for c in self._pending if c.config_id == named), None)
        if self._bar is not None:
            if current is not self._current:
                self._current = current
                self._show_current()
            self._bar.set_postfix_str(_step_words(state, current) if current else "")
            return
        now = time.monotonic()
        if now - self._said < HEARTBEAT_S:
            return
        self._said = now
        left = self._total - self._done
        what = f"{current.label()}: {_step_words(state, current)}" if current else "the next configuration: launching"
        if not current and self._pending[0].nnodes > 1:  # the ranks start once every node has joined
            what += f" (its {self._pending[0].nnodes} nodes' ranks start once every node has joined)"
        pace = (now - self._began) / self._done_here if self._done_here else None  # tqdm's ETA: this session's pace
        eta = f"about {duration_text(pace * left)} left for the {left} to go at this session's pace" if pace else (
            "no ETA before the first finishes")  # fmt: skip
        if pace and self._budget_ends is not None and now + pace * left > self._budget_ends:
            eta += f", {duration_text(now + pace * left - self._budget_ends)} past --budget's end"
        _print(f"ddpbench: running [{self._done + 1}/{self._total}] {what}, "
               f"{duration_text(now - self._current_began)} in; {eta}", file=self._stream)  # fmt: skip

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def _step_words(state: dict | None, cfg: Configuration) -> str:
    """Where the running configuration is: launching (its rank 0 has not said), building, a warm-up step, a
    timed step (counted apart, as --steps counts them) or a step of the parity reference."""
    if not state or state.get("config_id") != cfg.config_id:
        return "launching"  # the hint still names the configuration before: never its steps
    step, total = state.get("step"), state.get("total")
    if not total:
        return "building the model"
    if state.get("phase") == "parity":
        return f"parity reference step {step}/{total}"
    if total != cfg.warmup + cfg.steps:  # a count of its own (not this configuration's warm-up and steps)
        return f"step {step}/{total}"
    return f"warm-up step {step}/{cfg.warmup}" if step <= cfg.warmup else f"step {step - cfg.warmup}/{cfg.steps}"


QUIET_S: float | None = 2.0
"""Off a terminal, a `Status` line is said once its part has lasted this long: a quick part says nothing in a log."""
_STANDING: list[Status] = []  # the Status whose line stands or is pending: one at a time, on one stderr


class Status:
    """A command's transient line on stderr, 'ddpbench CMD: WHAT…', while a long, silent part runs (`report`'s
    pages, `list`'s and `predict --train-wopt`'s counting on the meta device, `predict --run`'s reading of the run and
    `--cluster`'s each cluster, `bench --dry-run`'s torch import and forecast),
    ended by the next line ddpbench prints (console.BEFORE_NEXT_LINE), whoever prints it, or by its exit. On a
    terminal at once, in place, cut to one row with '…' (a wrapped line outlives the wipe), and wiped then. Off a
    terminal a plain line once a part has lasted QUIET_S, one a silence for each part `within` one thing (a run's
    pages: one line a run), and nothing said before the input is checked (`checked=False`): a refusal stays its
    one line."""

    def __init__(self, command: str, *, stream: TextIO | None = None):
        self._prefix = f"ddpbench {command}: "
        self._stream = stream if stream is not None else sys.stderr
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._timer_count = 0
        self._pending: tuple[object, str] | None = None  # off a terminal: (what it is within, its line) to say
        self._said: set = set()  # off a terminal: what the lines said since the last real one were within
        self._shown = False  # on a terminal: a line stands
        self._hooked = False
        atexit.register(self.end)  # a line standing at the exit is wiped too

    def show(self, what: str, *, checked: bool = True, within: object = None) -> None:
        """`what` from now until the next line; `checked=False`: said before the command's input is checked, on a
        terminal only. Off a terminal, a part `within` what a line was said of since the last real line says none."""
        if self._stream.isatty():
            width = shutil.get_terminal_size().columns - 1
            line = f"{self._prefix}{what}…"
            self._standing()
            with self._lock:
                self._write(f"\r\x1b[K{line if len(line) <= width else line[: max(width - 1, 0)] + '…'}")
                self._shown = True
            return
        key = what if within is None else within
        with self._lock:
            if not checked or QUIET_S is None or key in self._said:
                self._cancel()
                return
            if self._pending is not None and self._pending[0] == key:  # the same part's clock goes on
                self._pending = (key, f"{self._prefix}{what}…")
                return
        self._standing()
        with self._lock:
            self._cancel()
            self._pending = (key, f"{self._prefix}{what}…")
            self._timer = threading.Timer(QUIET_S, self._say_pending, args=(self._timer_count,))
            self._timer.daemon = True
            self._timer.start()

    def end(self) -> None:
        """Wipe the line (on a terminal) or forget the one to come (elsewhere): a real line follows."""
        with self._lock:
            self._cancel()
            self._said.clear()
            self._hooked = False
            if self._shown:
                self._write("\r\x1b[K")
                self._shown = False

    def _standing(self) -> None:
        """This Status's line now stands: another's ends, and the next real line or the exit ends this one."""
        for other in [s for s in _STANDING if s is not self]:
            other.end()
        _STANDING[:] = [self]
        if not self._hooked:
            self._hooked = True
            console.BEFORE_NEXT_LINE.append(self.end)

    def _say_pending(self, count: int) -> None:
        with self._lock:
            if count == self._timer_count and self._pending is not None:  # not ended nor replaced since
                self._write(f"{self._pending[1]}\n")
                self._said.add(self._pending[0])
                self._timer, self._pending = None, None

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._pending = None, None
        self._timer_count += 1  # a timer already firing says nothing

    def _write(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):  # a reader gone: the line is not worth an error
            self._stream.write(text)
            self._stream.flush()

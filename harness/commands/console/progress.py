"""A run's progress on the console (`Progress`, the launcher's callbacks): a line per finished configuration, always;
on a terminal also a bar with the current configuration, its steps and an ETA (tqdm); off a terminal a line a minute
while a configuration runs long, with what the bar would show. `Status`: what another command's long part is doing.
A long silence before a command's first line (a model counted on the meta device) says what it waits for
(`meanwhile`).
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from harness.commands import console
from harness.commands.console import _print, duration_text

if TYPE_CHECKING:
    from harness.config.grid import Configuration


QUIET_S: float | None = 2.0
"""Off a terminal, `meanwhile`'s line is said once the silence has lasted this long: a quick command, or bad input
refused at once, says its own lines alone (None: never, as in the tests, whose output must not hang on the pace)."""


def meanwhile(text: str, *, stream: TextIO | None = None) -> None:
    """`text` on stderr while a long, silent stretch runs, until the next line ddpbench prints or its exit: on a
    terminal at once, in place, and wiped then; elsewhere a plain line once QUIET_S have passed. `list hf:llama`
    with a 1.3B Llama's options was silent 22 to 27 s (importing torch and transformers, counting on the meta
    device), `predict --train-wopt` 24 s."""
    import atexit
    import shutil
    import threading

    stream = stream if stream is not None else sys.stderr
    lock, state = threading.Lock(), {"over": False, "shown": False}
    on_terminal = stream.isatty()
    if on_terminal:  # one row, or the wipe leaves the rows above it
        width = shutil.get_terminal_size().columns - 1
        text = text if len(text) <= width else f"{text[: max(width - 1, 0)]}…"

    def show() -> None:
        with lock:
            if not state["over"]:
                state["shown"] = True
                with contextlib.suppress(OSError, ValueError):
                    stream.write(text if on_terminal else f"{text}\n")
                    stream.flush()

    def end() -> None:
        timer.cancel()
        with lock:
            if state["shown"] and on_terminal and not state["over"]:
                with contextlib.suppress(OSError, ValueError):
                    stream.write("\r\033[K")
                    stream.flush()
            state["over"] = True

    timer = threading.Timer(QUIET_S or 0.0, show)
    timer.daemon = True
    console.BEFORE_NEXT_LINE.append(end)
    atexit.register(end)
    if on_terminal:
        show()
    elif QUIET_S is not None:
        timer.start()


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
        self._began = self._said = self._current_began = time.monotonic()  # off a terminal: the heartbeat's clocks
        self._done_here = 0  # configurations finished in this session: the pace its ETA takes, as tqdm's does
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
        from harness.results import store

        self._done += 1
        self._done_here += 1
        self._said = self._current_began = time.monotonic()
        self._pending = [c for c in self._pending if c.config_id != cfg.config_id]
        self._current = None
        line = f"[{self._done}/{self._total}] {console.describe_row(store.read_config_row(self._run, cfg.config_id))}"
        if self._bar is None:
            _print(line, file=self._stream)
            return
        self._bar.write(line, file=self._stream)
        self._bar.update(1)
        self._show_current()

    def catch_up(self) -> None:
        """Announce the configurations that reached the disk unannounced (a stop can come between a write and
        its line), so that the lines printed add up to the count the stop line gives."""
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


class Status:
    """What a command without a run's bar is doing now, on stderr (`report`'s long parts): on a terminal one line
    updated in place and wiped before the next line the command says (`clear`), elsewhere a plain line each."""

    def __init__(self, prefix: str, *, stream: TextIO | None = None):
        self._prefix = prefix
        self._stream = stream if stream is not None else sys.stderr
        self._shown = False

    def show(self, what: str, *, terminal_only: bool = False) -> None:
        """`terminal_only`: before the command's input is checked, where a refusal must stay its one line."""
        line = f"{self._prefix}{what}…"
        if not self._stream.isatty():
            if not terminal_only:
                _print(line, file=self._stream)
            return
        width = shutil.get_terminal_size().columns - 1  # a wrapped line is not wiped by a carriage return
        self._stream.write(f"\r\x1b[K{line[:width]}")
        self._stream.flush()
        self._shown = True

    def clear(self) -> None:
        if self._shown:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
            self._shown = False

"""Who is alive, and where, when a configuration stops making progress.

Every rank runs a `Responder`: a daemon thread that registers the rank's pid in the run folder
and answers the launcher's questions there. When a configuration has made no progress for
--timeout seconds, the launcher `ask`s; every rank whose interpreter still runs answers with
the configuration and step it is in and where its main thread is. A rank blocked inside a
collective answers (the collective releases the interpreter); a rank that is stopped, dead or
spinning while holding the interpreter does not: that is the rank the others wait for.

The files are hidden (harness.results.layout.LIVENESS): readers of the run folder never see them.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from harness.results.layout import RunFolder

POLL_S = 0.2


def _write(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(OSError):  # a hint: failing to give it must never cost a measurement
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)


def _read(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def main_thread_position(depth: int = 2) -> str:
    """The innermost frames of the main thread, e.g. 'graph.py:829 _engine_run_backward'."""
    frame = sys._current_frames().get(threading.main_thread().ident)
    if frame is None:
        return "unknown"
    stack = traceback.extract_stack(frame)[-depth:]
    return " < ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in reversed(stack))


class Responder:
    """A rank's side: `note` where it is (free: a tuple assignment), answer when asked."""

    def __init__(self, run: Path, rank: int) -> None:
        self._folder = RunFolder(run).liveness
        self._rank = rank
        self._where: tuple[str | None, int | None] = (None, None)
        self._answered = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="ddpbench-liveness", daemon=True)

    def start(self) -> Responder:
        self._folder.mkdir(parents=True, exist_ok=True)
        _write(
            self._folder / f"rank{self._rank}.json",
            {"rank": self._rank, "pid": os.getpid(), "host": socket.gethostname()},
        )
        self._answered = latest_question(self._folder.parent)  # old questions are not for us
        self._thread.start()
        return self

    def note(self, config_id: str | None, step: int | None) -> None:
        self._where = (config_id, step)

    def stop(self) -> None:
        self._stop.set()

    def _serve(self) -> None:
        while not self._stop.wait(POLL_S):
            question = latest_question(self._folder.parent)
            if question > self._answered:
                self._answered = question
                config_id, step = self._where
                answer = {"rank": self._rank, "pid": os.getpid(), "config_id": config_id, "step": step,
                          "position": main_thread_position()}  # fmt: skip
                _write(self._folder / f"answer{question}-rank{self._rank}.json", answer)


def latest_question(run: Path) -> int:
    folder = RunFolder(run).liveness
    numbers = [int(p.stem.removeprefix("ask")) for p in folder.glob("ask*.json")] if folder.is_dir() else []
    return max(numbers, default=0)


def registered_ranks(run: Path) -> dict[int, dict[str, Any]]:
    """rank -> {pid, host} of every rank that started in this run folder (latest launch wins)."""
    folder = RunFolder(run).liveness
    found = (_read(p) for p in folder.glob("rank*.json")) if folder.is_dir() else ()
    return {r["rank"]: r for r in found if r}


def ask(run: Path, ranks: list[int], *, wait_s: float = 2.0) -> dict[int, dict[str, Any] | None]:
    """Ask every rank where it is; rank -> its answer, or None when it did not answer in time."""
    folder = RunFolder(run).liveness
    folder.mkdir(parents=True, exist_ok=True)
    question = latest_question(run) + 1
    _write(folder / f"ask{question}.json", {"asked_at": time.time()})
    deadline = time.monotonic() + wait_s
    answers: dict[int, dict[str, Any] | None] = dict.fromkeys(ranks)
    while time.monotonic() < deadline and any(a is None for a in answers.values()):
        time.sleep(POLL_S / 2)
        for rank in ranks:
            if answers[rank] is None:
                answers[rank] = _read(folder / f"answer{question}-rank{rank}.json")
    return answers


def describe_hang(answers: dict[int, dict[str, Any] | None]) -> str:
    """Name the ranks the others wait for: those that did not answer, else those behind."""
    silent = [rank for rank, answer in answers.items() if answer is None]
    alive = {rank: answer for rank, answer in answers.items() if answer is not None}
    parts = []
    if silent:
        parts.append(f"rank {', '.join(map(str, silent))} did not respond (stopped, dead, or holding the interpreter)")
    steps = {rank: a["step"] for rank, a in alive.items() if a.get("step") is not None}
    if not silent and len(set(steps.values())) > 1:
        behind = min(steps.values())
        parts.append(f"rank {', '.join(str(r) for r, s in steps.items() if s == behind)} is behind (step {behind})")
    for rank, answer in sorted(alive.items()):
        parts.append(f"rank {rank} at step {answer.get('step')} in {answer.get('position')}")
    return "; ".join(parts) if parts else "no rank registered"

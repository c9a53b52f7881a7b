"""Why a launch failed, root cause first, from what it left behind: the hang the supervisor
ended; a rank that died (torchrun's failure summary: its signal, or the exception in its error
file); the record a failing rank wrote (`harness.handoff.faults`, bench's worker); the launch's log.

`diagnose` judges one `bench` configuration; `diagnose_launch` any launch (`collectives`).
Each returns {error_kind, error, and where known rank, error_file, memory}.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path
from typing import Any

from harness.config.grid import Configuration
from harness.handoff import faults
from harness.launch import supervise
from harness.launch.torchrun import LaunchEnd, where
from harness.results.invocation import on_every_node, retry_words

RANK_PREFIX = re.compile(r"^\[(?:default)?rank\d+\]:\s*")  # torch's prefix on a rank's lines, where it adds one
LAUNCHER_ERRORS = ("ChildFailedError", "torch.distributed.elastic.")
"""torchrun's own report that a child failed: the wrapper, never the cause."""


ABORT = re.compile(r"terminate called after throwing an instance of '([^']*)'\s*\n\s*what\(\):\s*(.+)")
"""A C++ exception no one caught, as the C++ runtime prints it before it aborts the process (SIGABRT): gloo's or
NCCL's error where a backend's thread threw it."""
SOURCE_PREFIX = re.compile(r"^\[(?:enforce fail at )?[^\]\s]+:\d+\]\s*")  # '[enforce fail at …/pair.cc:464] '


def abort_message(log_text: str) -> str | None:
    """The one-line error of the first uncaught C++ exception in a launch's log, its type first ("gloo::EnforceNotMet:
    … Received data size doesn't match expected size. Is there a distributed collective mismatch in your code?", NCCL's
    watchdog timeout), without the source file it names; None where no rank aborted so."""
    lines = "\n".join(RANK_PREFIX.sub("", line.strip()) for line in log_text.splitlines())
    found = ABORT.search(lines)
    return f"{found.group(1)}: {SOURCE_PREFIX.sub('', found.group(2).strip())}"[:500] if found else None


def _is_exception_line(line: str) -> bool:
    head = line.split(":", 1)[0]
    return head.endswith(("Error", "Exception", "Interrupt")) or "Signal" in head


def error_in_log(log: Path) -> str:
    """The most telling line of a launch's log: the first exception line a rank wrote (the root cause;
    torchrun's ChildFailedError that follows it is only the wrapper), else the last line."""
    try:
        lines = [RANK_PREFIX.sub("", line.strip()) for line in log.read_text(errors="replace").splitlines()]
    except OSError:
        return "(no log)"
    lines = [line for line in lines if line]
    for line in lines:
        if _is_exception_line(line) and not any(marker in line.split(":", 1)[0] for marker in LAUNCHER_ERRORS):
            return line[:500]
    return lines[-1][:500] if lines else "(empty log)"


def diagnose_launch(run: Path, end: LaunchEnd) -> dict[str, Any]:
    """Why a launch did not finish its work: the hang, else the rank that died, else the log."""
    if end.hang is not None:
        return {"error_kind": "timeout", "error": end.hang}
    return _rank_that_died(run, end, end.hint, spoke=set()) or _from_log(run, end, end.hint)


def diagnose(run: Path, cfg: Configuration, end: LaunchEnd) -> dict[str, Any]:
    """Why `cfg` did not finish, root cause first: the hang the launcher ended; else a rank that
    died without a word (a signal other than torchrun's own SIGTERM, a hard exit) — its peers'
    "connection reset" errors are echoes; else the earliest record a failing rank wrote; else
    the launch's log. A rank beyond the trainers is named for what it is (a parameter server)."""
    failure = _diagnose(run, cfg, end)
    if cfg.nnodes > 1 and PEER_LOST.search(failure["error"]):
        failure["error"] += (f" (across {cfg.nnodes} nodes a lost peer is most likely a rank or launcher of another "
                             f"node that died: its log is logs/world-{cfg.world_size}.node<K>.log, in the run "
                             "folder, where that node shares it)")  # fmt: skip
    rank = failure.get("rank")
    if rank is not None and rank >= cfg.world_size and failure["error"].startswith(f"rank {rank}"):
        failure["error"] = f"rank {rank} (the parameter server){failure['error'][len(f'rank {rank}') :]}"
    return failure


PEER_LOST = re.compile(r"(closed|reset) by peer|Connection refused|Broken pipe", re.IGNORECASE)
"""gloo's (and the OS's) words where the other end of a connection went away."""


def _diagnose(run: Path, cfg: Configuration, end: LaunchEnd) -> dict[str, Any]:
    hint = end.hint if end.hint and end.hint.get("config_id") == cfg.config_id else None
    if end.hang is not None:
        return {"error_kind": "timeout", "error": nodes_never_met(cfg, end) or end.hang}
    rank_failures = faults.read_rank_failures(run, cfg.config_id)
    memory = {r["rank"]: r.get("memory") or {} for r in rank_failures}
    died = _rank_that_died(run, end, hint, spoke={r["rank"] for r in rank_failures})
    if died is not None:
        return {**died, **_echo_file(run, cfg.config_id, died, rank_failures), "memory": memory}
    if rank_failures:
        first = rank_failures[0]
        return {
            "error_kind": first["error_kind"],
            "error": f"rank {first['rank']}: {first['error']}",
            "error_file": first["error_file"],
            "rank": first["rank"],
            "memory": memory,
        }
    return _from_log(run, end, hint)


def nodes_never_met(cfg: Configuration, end: LaunchEnd) -> str | None:
    """A launch across nodes that never started a configuration: its ranks wait for every node (torchrun's
    rendezvous, then the process group), so the ranks that "did not respond" never ran; a node that never came is
    the likely cause, and what to do is said. None for one node, or a launch that came alive."""
    if cfg.nnodes <= 1 or end.came_alive or end.hang is None:
        return None
    waited = end.hang.split(";")[0]  # 'timeout: no progress for 302 s (limit 300 s)'
    return (f"{waited}, and no rank started a configuration: across {cfg.nnodes} nodes they start once every node "
            "has joined (torchrun's rendezvous, then the process group); a node that never came (its launcher not "
            "started, given another --run-id or --rdzv-endpoint, or unable to reach the endpoint) holds the rest: "
            f"{retry_words(2, '`bench --resume RUN_ID --retry-failed`')}{on_every_node(cfg.nnodes)}")  # fmt: skip


def _echo_file(run: Path, config_id: str, died: dict[str, Any], rank_failures: list[dict]) -> dict[str, Any]:
    """A rank killed without a word (SIGKILL) wrote no traceback, and its row's error_file was empty while the first
    peer its death reached wrote one (gloo's "connection reset by peer"): error_file is that one (its record's, else
    a traceback whose rank was stopped before its record), and the error says whose it is; {} where the dead rank's
    own is known, or no peer wrote one."""
    written = [(r["rank"], r["error_file"]) for r in rank_failures if r.get("error_file")]
    written += faults.traceback_files(run, config_id)
    if died.get("error_file") or not written:
        return {}
    rank, path = written[0]
    return {
        "error_file": path,
        "error": f"{died['error']} (its traceback file is rank {rank}'s, whose collective it broke)",
    }


def _rank_that_died(run: Path, end: LaunchEnd, hint: dict | None, *, spoke: set[int]) -> dict[str, Any] | None:
    """The rank torchrun saw die, leaving out torchrun's own SIGTERMs and the ranks in `spoke`
    (they wrote their own record). One that died without an exception comes first: the others'
    exceptions ("connection reset by peer") are the echoes of its death."""
    if not end.came_alive:
        return None
    text = end.log.read_text(errors="replace") if end.log.is_file() else ""
    exits = supervise.rank_exits(text)
    died = [e for e in exits if e.rank not in spoke and e.exitcode != -signal.SIGTERM]
    if not died:
        return None
    first = min(died, key=lambda e: (e.exception_line() is not None, e.rank))
    exception = first.exception_line()  # raised outside a measurement (writing results, say)
    if exception is not None:
        return {"error_kind": faults.kind_from_text(exception), "error": f"rank {first.rank}: {exception}",
                "error_file": _relative(first.error_file, run), "rank": first.rank}  # fmt: skip
    aborted = f": {said}" if first.by_signal and (said := abort_message(text)) else ""  # the backend's own words
    return {"error_kind": "killed", "error": f"{first.describe()}{where(hint)}{aborted}", "rank": first.rank}


def _from_log(run: Path, end: LaunchEnd, hint: dict | None) -> dict[str, Any]:
    """The log's telling line, and where the log is: relative to the run folder (as `error_file` is), so
    that the row stays true wherever bench ran from and wherever the results move; absolute, and not
    said to be in the run folder, when it is elsewhere."""
    kind = "killed" if end.came_alive else "launch"
    log = _relative(str(end.log), run)
    where_log = log if Path(log).is_absolute() else f"{log}, in the run folder"
    said = f"{error_in_log(end.log)} (log: {where_log})"
    return {"error_kind": kind, "error": f"launch exited with code {end.returncode}{where(hint)}: {said}"}


def _relative(path: str | None, run: Path) -> str | None:
    if path is None:
        return None
    try:
        return str(Path(path).resolve().relative_to(run.resolve()))
    except ValueError:
        return path  # outside the run folder (torchrun's default temporary folder): absolute

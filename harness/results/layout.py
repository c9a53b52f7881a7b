"""The run folder's map: what each file and folder of `results/<run_id>/` is, and who writes it.

Every writer and reader finds a place here (`RunFolder`), and results/README.md's map is rendered
from `ENTRIES` (`python -m harness.results.docs`). Also here: a run's id (given or new) and the checks
made on the results folder before anything is written.

Names beginning with '.' are the rank's hints to the launcher and temporary files: readers of the
run (pandas, pyarrow, duckdb) never see them as results.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import os
import re
import secrets
import tempfile
import time
from pathlib import Path

from harness.protocols import ConfigError

RUN_JSON = "run.json"
COMPARISONS = "comparisons"
"""`<results>/comparisons/BASE_vs_NEW.json`: each `ddpbench compare`, kept beside the runs, so that `ddpbench report`
renders its page into whichever site it builds (a site is made from results, never the other way)."""
SUMMARY_JSON = "summary.json"
TABLES = ("configs", "steps", "ranks", "timeline")
"""The per-configuration tables: one Parquet part per configuration in a folder of its own."""
RECOMMENDATIONS = "recommendations.parquet"
PREDICTIONS = "predictions.parquet"
FLOOR = "floor.parquet"
GRADPROFILE = "gradprofile"
COLLECTIVES = "collectives"
CONTENTION = "contention"
PLANS = "plan"
LOGS = "logs"
TRACES = "traces"
FAILURES = "failures"
RETRIED = "retried"
CACHE = "cache"
PARITY_CACHE = f"{CACHE}/parity"
WRITTEN_BEFORE = f"{CACHE}/rows/configs.parquet"
"""Each setup's parity reference, kept while the run lasts: every launch of the run (one per world size
and repeat) reuses it instead of computing it again; `bench` removes it when the run has ended (an
interrupted run keeps it for --resume)."""
PROGRESS = ".progress.json"
ROUNDS = f"{PLANS}/rounds.json"
SESSION_LOCK = ".session.lock"
LIVENESS = ".liveness"


@dataclasses.dataclass(frozen=True)
class Entry:
    """One place in the run folder: its path (a folder ends in '/'), what it holds, who writes it."""

    path: str
    holds: str
    writer: str


ENTRIES = (
    Entry(RUN_JSON, "the environment, the command line and the planned grid (written first; under --repeats "
          "auto each round adds its configurations, and `look_sizes` how many the look that asked for it saw; "
          "`sessions`, once --resume goes on with it: each session's start, command line and any DDPBENCH_FAULT)",
          "bench, collectives"),
    Entry("configs/<config_id>.parquet", "one row per configuration: status, step time, memory, parity, options",
          "rank 0; the launcher for a failed one"),
    Entry("steps/<config_id>.parquet", "one row per configuration × rank × step: the phase times", "rank 0"),
    Entry("ranks/<config_id>.parquet", "one row per configuration × rank: that rank's memory and role", "rank 0"),
    Entry("timeline/<config_id>.parquet", "the bucket timeline: one row per collective × rank × step", "rank 0"),
    Entry(RECOMMENDATIONS, "a bucket-cap sweep's recommended cap per strategy and world size", "bench, at its end"),
    Entry(SUMMARY_JSON, "each session's wall time, training steps and where the wall time went (`phases_s`), added up; the latest session's own (`session`: with the configurations it launched and its torchrun `launches`); a finished run's `answer`: per workload, the leader to deploy at the largest world size, its step and whether its lead is decided, as the console's last line says it (docs/output.md)", "bench, at its end"),
    Entry(f"{GRADPROFILE}/", "the gradient-ready profile per workload setup (input of `predict`)",
          "rank 0 at world size 1; predict"),
    Entry(PREDICTIONS, "predicted step time per bucket cap against the measured sweep, where a network is known "
          "(bench's `--busbw`, or a `ddpbench collectives` run of the machine in the same results folder)",
          "report, predict"),
    Entry(FLOOR, "each configuration's communication floor (where a network is known, as `predictions.parquet`)",
          "report, predict"),
    Entry(f"{COLLECTIVES}/w<N>.parquet", "`ddpbench collectives`: one row per op × message size at world size N",
          "rank 0 of collectives"),
    Entry(f"{CONTENTION}/w<N>.parquet", "how overlapped compute and communication slow each other at world size N",
          "rank 0 of collectives"),
    Entry(f"{PLANS}/<launch>.json", "what each launch was asked to run", "the launcher"),
    Entry(ROUNDS, "across nodes under --repeats auto: the round node 0 decided last (its session, how many "
          "configurations it judged, those it added), which the other nodes run", "node 0's launcher"),
    Entry(f"{PLANS}/<launch>.costs.json", "where that launch's time went beyond its steps", "rank 0"),
    Entry(f"{PLANS}/<launch>.contention.json", "what else ran beside that launch (a retry's name ends .retryN; a "
          "resumed session's ends .session-<its start>, kept beside the earlier session's): the "
          "machine's 1-minute load average at its start and end, the CPUs, the threads the run's own processes "
          "may keep runnable; on CUDA each GPU's other processes (NVML) and their peak memory. A run from before "
          "has none: not recorded", "the launcher"),
    Entry(f"{PLANS}/.<launch>.gpus.rank<N>.json", "the processes a rank's sampler saw on its GPU (hidden; removed "
          "once folded into the launch's record)", "every rank, on CUDA"),

    Entry(f"{LOGS}/<launch>.log", "torchrun's output of each launch (and its .torchrun/ folder)", "the launcher"),
    Entry(f"{TRACES}/<config_id>/rank<N>.json", "`--profile`: one Chrome trace per rank", "every rank"),
    Entry(f"{FAILURES}/<config_id>/rank<N>.json", "a failed rank's error, kind and memory (and .traceback.txt)",
          "the failing rank"),
    Entry(f"{RETRIED}/<config_id>/", "a failed configuration's rows and records, set aside by --retry-failed",
          "bench --resume"),
    Entry(f"{CACHE}/", "what later launches of the run reuse: model information, parity references "
          "(removed when the run ends)", "rank 0"),
    Entry(WRITTEN_BEFORE, "the configuration rows written before the current launch, as the launcher read "
          "them: rank 0's derived metrics look up world size 1 and the baseline there", "the launcher"),
    Entry(PROGRESS, "rank 0's hint of how far the current configuration is (hidden)", "rank 0"),
    Entry(f"{LIVENESS}/", "each rank's pid and its answers when the launcher asks who is alive (hidden)",
          "every rank"),
    Entry(SESSION_LOCK, "locked (flock) by the session writing the run, which it names (pid, host, start): a "
          "--resume while it runs is refused, and a collectives run's launch in flight is said to run, not to have failed "
          "(hidden)", "bench, collectives"),
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class RunFolder:
    """Where each thing of one run lives (see ENTRIES)."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    @property
    def run_json(self) -> Path:
        return self.root / RUN_JSON

    def part(self, table: str, config_id: str) -> Path:
        """One configuration's part of a per-configuration table (TABLES)."""
        if table not in TABLES:
            raise KeyError(f"no per-configuration table {table!r}; tables: {', '.join(TABLES)}")
        return self.root / table / f"{config_id}.parquet"

    def launch_plan(self, launch: str) -> Path:
        return self.root / PLANS / f"{launch}.json"

    def log(self, launch: str) -> Path:
        return self.root / LOGS / f"{launch}.log"

    def traces(self, config_id: str) -> Path:
        return self.root / TRACES / config_id

    def failures(self, config_id: str) -> Path:
        return self.root / FAILURES / config_id

    def retried(self, config_id: str) -> Path:
        return self.root / RETRIED / config_id

    @property
    def written_before(self) -> Path:
        return self.root / WRITTEN_BEFORE

    def cached(self, name: str) -> Path:
        return self.root / CACHE / name

    @property
    def parity_cache(self) -> Path:
        return self.root / PARITY_CACHE

    @property
    def rounds(self) -> Path:
        return self.root / ROUNDS

    @property
    def progress(self) -> Path:
        return self.root / PROGRESS

    @property
    def liveness(self) -> Path:
        return self.root / LIVENESS


NAME_LIMIT = 60
"""The longest name (a workload's, a part of a config id) that goes into a file name; longer ones end in a hash."""


def bounded(name: str, limit: int = 2 * NAME_LIMIT) -> str:
    """`name` if short enough, else its start and a hash of the whole: still unique, and short."""
    if len(name) <= limit:
        return name
    return f"{name[: limit - 9]}~{hashlib.sha1(name.encode()).hexdigest()[:8]}"


def safe_name(text: str, *, limit: int = NAME_LIMIT) -> str:
    """`text` as (part of) a file name in a run folder: letters, digits, '.', '_', '-' (anything else '_')."""
    return bounded(re.sub(r"[^A-Za-z0-9._-]", "_", text), limit)


def costs_path(plan_path: Path) -> Path:
    """A launch's cost account, next to its plan."""
    return plan_path.with_name(plan_path.stem + ".costs.json")


def map_lines() -> list[str]:
    """The map as results/README.md shows it: a Markdown table, one row per entry."""
    rows = [f"| `{entry.path}` | {entry.holds} | {entry.writer} |" for entry in ENTRIES]
    return ["| in `results/<run_id>/` | holds | written by |", "| --- | --- | --- |", *rows]


# ---------------------------------------------------------------- run ids and the checks before writing

RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def validate_run_id(run_id: str, *, flag: str = "--run-id") -> None:
    """A run id names a folder directly inside --results: never a path (`--resume ../R/x` included)."""
    if run_id and (not RUN_ID_PATTERN.match(run_id) or ".." in run_id):
        raise ConfigError(
            f"{flag} {run_id!r} is not valid; use letters, digits, '.', '_' and '-' "
            "(no '/' or '..', at most 100 characters)"
        )


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


def can_write_in(folder: Path) -> bool:
    """Whether a folder can be made in `folder`, by trying (then removing it): the permission bits do not say so
    for root, nor for /proc or a read-only mount."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".ddpbench-probe-", dir=folder))
    except OSError:
        return False
    return True


def check_results_folder(results: Path, run_id: str) -> None:
    """The run folder must be new and its parent writable; checked before anything is written."""
    if (results / run_id).exists():
        raise ConfigError(f"--run-id {run_id!r} already exists in {results}; choose another run id")
    existing = results
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir() or not can_write_in(existing):
        raise ConfigError(f"--results {str(results)!r} cannot be written (checked {str(existing)!r})")


def check_runs_folder(results: Path) -> None:
    """--results for a command that reads runs: a missing folder or a file is a typo (not an empty site saying
    "No runs yet"), and one run's folder is the folder below the one meant."""
    if not results.exists():
        raise ConfigError(f"--results {str(results)!r} does not exist; give the folder `ddpbench bench` wrote into "
                          "(default: results)")  # fmt: skip
    if not results.is_dir():
        raise ConfigError(f"--results {str(results)!r} is a file, not a results folder")
    if RunFolder(results).run_json.is_file():
        raise ConfigError(f"--results {str(results)!r} is one run; give the folder that holds it: "
                          f"--results {str(results.parent)!r}")  # fmt: skip


def check_output_folder(flag: str, folder: Path) -> None:
    """An output folder (a site) must be a folder or not exist yet, under a writable one; checked
    before anything is written, so that a file given by mistake is one line, not a traceback."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{flag} {str(folder)!r} is a file, not a folder; give a folder (it is made if missing)")
    existing = folder
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"{flag} {str(folder)!r} cannot be made: {str(existing)!r} is a file")
    if not can_write_in(existing):
        raise ConfigError(f"{flag} {str(folder)!r} cannot be written (checked {str(existing)!r})")


def session_running(run: Path) -> bool:
    """Whether a session holds `run`'s lock now (SESSION_LOCK, flock's): a run still being written, whose launch in
    flight has kept nothing yet though it did not fail. False where no lock was ever taken or none can be taken."""
    try:
        fd = os.open(Path(run) / SESSION_LOCK, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:  # no flock on this file system: nothing says it runs
        return False
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)  # closing drops the shared lock just taken, if it was
    return False

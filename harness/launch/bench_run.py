"""`bench`'s run (`BenchRun`): its folder made before any launch, with run.json and the run's provenance (on a
multi-node job node 0's, which the other nodes wait for), or an interrupted run taken up again with what it did not
write (`--resume`, `--retry-failed`'s failed configurations set aside first); the threads each rank gets.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import fcntl
import json
import logging
import os
import re
import shutil
import socket
import time
from pathlib import Path
from typing import Any

from harness.config.bench import BenchConfig, ConfigError
from harness.config.flags import AUTO
from harness.config.grid import Configuration
from harness.config.ranks import available_cpus, threads_per_rank
from harness.results import layout, store
from harness.results.invocation import resume_command
from harness.results.layout import RunFolder

POLL_S = 0.5
_held: dict[Path, int | None] = {}
"""The run folders this session holds, by path: their lock's file descriptor (None where the file system could
not lock it), open until `release_runs` at the session's end."""


@dataclasses.dataclass(frozen=True)
class BenchRun:
    """The run a `bench` session makes or finishes: its folder, the configurations left for this
    session, and where this session's launches spend their time."""

    run_id: str
    run: Path
    device: str
    threads_per_rank: int
    configurations: list[Configuration]
    context: dict[str, Any]
    phases_s: dict[str, float] = dataclasses.field(default_factory=dict, compare=False)  # where its wall time went
    """Where this session's launches spent their time, seconds per phase (`harness.handoff.costs`)."""
    launches: list[str] = dataclasses.field(default_factory=list, compare=False)
    """The torchrun launches this session made, by name (a retry too): summary.json counts them."""
    session: str = ""
    """A resumed session's mark in its launches' records (`contention.session_mark`): it reuses their names."""
    node_rank: int = 0
    """This launcher's node: node 0 holds the run (its rows' verdicts, summary.json); another node only launches."""


class RunIdTaken(ConfigError):
    """The run folder exists already (another run made it since the check): a drawn id is drawn again."""


def run_threads(config: BenchConfig, configurations: list[Configuration], *, device: str) -> int:
    """The threads each rank of the run gets: the cores shared by the most processes a node runs at once, extra
    ranks (rpc_hybrid's parameter server) counted too."""
    most_ranks = config.gpus + max((c.extra_ranks for c in configurations), default=0)
    return threads_per_rank(device=device, max_local_ranks=most_ranks, cpu_count=available_cpus())


def create_run(
    config: BenchConfig, configurations: list[Configuration], *, run_id: str, device: str, environment: dict[str, Any]
) -> BenchRun:
    """Make the run folder and write run.json, the run's provenance, before any launch.

    The folder is made exclusively: two runs started at once into one results folder never
    share one. On a multi-node job, node 0 writes run.json; the other nodes' launchers find
    (or make) the same folder on a shared file system and keep their plans and logs in it.
    """
    run = store.run_dir(config.results, run_id)
    if config.node_rank != 0:
        wait_for_node_zero(run)
        if config.repeats == AUTO and not RunFolder(run).run_json.is_file():  # node 0 decides each round there
            raise ConfigError(f"--repeats auto across nodes needs --results on a file system every node shares, "
                              f"where node 0 decides each round: its run.json did not appear in {str(run)!r} within "
                              f"{NODE_ZERO_WAIT_S:.0f} s; share the folder (start node 0 first), or give "
                              "--repeats N")  # fmt: skip
    try:
        run.mkdir(parents=True, exist_ok=config.node_rank != 0)
    except FileExistsError:
        raise RunIdTaken(f"--run-id {run_id!r} already exists in {config.results}; choose another run id") from None
    except OSError as error:  # what the up-front check cannot see (/proc, a read-only mount): one line, no traceback
        raise ConfigError(f"--results {str(config.results)!r} cannot be written: {error.strerror or error}") from None
    if config.node_rank == 0:  # the other nodes share node 0's folder and session
        hold_run(run, run_id)
    started_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    threads = run_threads(config, configurations, device=device)
    context = {"run_id": run_id, "started_at": started_at, "threads_per_rank": threads,
               **host_context(environment, device)}  # fmt: skip
    if config.node_rank != 0:
        return BenchRun(run_id, run, device, threads, configurations, context, node_rank=config.node_rank)
    store.write_json(
        RunFolder(run).run_json,
        {
            "schema_version": store.SCHEMA_VERSION,
            "run_id": run_id,
            "started_at": started_at,
            "device": device,
            "backend": configurations[0].backend if configurations else None,
            "threads_per_rank": threads,
            "config": {k: v for k, v in dataclasses.asdict(config).items() if k != "command"},
            "command": list(config.command),
            "environment": environment,
            "configurations": [c.to_json() for c in configurations],
            "workloads": workload_provenance(configurations),
            "context": context,
        },
    )
    return BenchRun(run_id, run, device, threads, configurations, context)


def workload_provenance(configurations: list[Configuration]) -> dict[str, dict[str, Any]]:
    """Which code each workload ran, by its name: its spec, kind, file and the file's hash."""
    import workloads

    found: dict[str, dict[str, Any]] = {}
    for cfg in configurations:
        if cfg.workload not in found:
            source = workloads.resolve(cfg.workload_spec or cfg.workload)
            found[cfg.workload] = {**source.provenance(), "options": cfg.workload_options}
    return found


NODE_ZERO_WAIT_S = 60.0


def wait_for_node_zero(run: Path) -> None:
    """On a shared file system node 0 makes the run folder; wait for it so as not to race it.
    Without one (node-local disks) it never appears here, and this node makes its own."""
    deadline = time.monotonic() + NODE_ZERO_WAIT_S
    while not RunFolder(run).run_json.is_file() and time.monotonic() < deadline:
        time.sleep(POLL_S)


def host_context(environment: dict[str, Any], device: str) -> dict[str, Any]:
    """The facts of the host a node's launcher runs on, as its launch plans' context carries them (`record_nodes`
    reads each node's there into run.json's `nodes`)."""
    return {
        "torch_version": environment.get("torch_version"),
        "gpu_name": environment.get("gpu_name") if device == "cuda" else None,
        "gpu_count": environment.get("gpu_count") if device == "cuda" else None,  # GPUs per node, for `mfu`
        "hostname": environment.get("hostname"),
        "git_sha": environment.get("git_sha"),
    }


NODE_ZERO_CHECK_S = 1.0
"""How often another node's launcher looks whether node 0's session still holds the run."""
UNLOCKED = "(the run's folder cannot be locked)"
"""node_zero_session's word where the file system has no flock: nothing tells node 0's session, or its end."""


class NodeZeroGone(Exception):
    """Node 0's session let go of the run (Ctrl-C, a failure or a kill there) while this node waited on it."""

    def __init__(self, why: str = "node 0's end (its session let go of the run while this node waited on it)"):
        super().__init__(why)
        self.why = why  # what stopped this node, as bench's stop line says it


def node_zero_session(run: Path) -> str | None:
    """The session that holds the run (node 0's, which names itself in the lock: pid, host, start); None while none
    does (not started yet, or ended); UNLOCKED where the file system cannot lock."""
    try:
        fd = os.open(Path(run) / layout.SESSION_LOCK, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return os.pread(fd, 4096, 0).decode(errors="replace")
    except OSError:
        return UNLOCKED
    finally:
        os.close(fd)  # drops the shared lock just taken, if it was
    return None


def own_session(run: Path) -> str:
    """This session's name in the run's lock, as node_zero_session reads it on another node (UNLOCKED where the file
    system could not lock). Read, not probed: on NFS flock is a POSIX lock, which never conflicts within a process."""
    fd = _held.get(Path(run).resolve())
    return UNLOCKED if fd is None else os.pread(fd, 4096, 0).decode(errors="replace")


class NodeZeroWatch:
    """Another node's view of node 0's session: `check` (at most once a NODE_ZERO_CHECK_S) returns it, and raises
    NodeZeroGone once a session seen holding the run has let go of it (or another holds it: node 0 started again).
    Its ranks may not notice: a rank waiting on a store this node hosts waited up to the 10-minute first-step limit."""

    def __init__(self, run: Path) -> None:
        self.run, self.seen, self.looked = run, None, -NODE_ZERO_CHECK_S

    def check(self) -> str | None:
        if time.monotonic() - self.looked >= NODE_ZERO_CHECK_S:
            self.looked, now = time.monotonic(), node_zero_session(self.run)
            if self.seen not in (None, UNLOCKED) and now != self.seen:
                raise NodeZeroGone()
            self.seen = now
        return self.seen


_watches: dict[Path, NodeZeroWatch] = {}


def node_zero_watch(run: Path) -> NodeZeroWatch:
    """This session's one watch of node 0 on `run`: a launch and the wait between rounds share what it has seen."""
    return _watches.setdefault(Path(run).resolve(), NodeZeroWatch(run))


def resume_run(
    results: Path, run_id: str, *, retry_failed: bool = False, node_rank: int = 0, environment: dict | None = None
) -> tuple[BenchConfig, BenchRun, int]:
    """The configuration and plan of an interrupted run, left with what it did not write.

    Returns (config, plan, number already written). Nothing is overwritten: a configuration
    whose part exists is skipped; with `retry_failed` a failed one is run again, its failed row
    and records set aside in retried/<config_id>/ first (a failed row holds no measured step).
    Node 0 holds the run (`hold_run`) before it decides what is left: a session still writing it is refused.
    Another node's plans carry its own host (`environment`, its `host_facts`), not run.json's, which is node 0's.
    """
    run = store.run_dir(results, run_id)
    if not RunFolder(run).run_json.is_file():
        known = store.newest_runs(results)
        raise ConfigError(f"--resume {run_id!r}: no such run in {str(results)!r} (newest runs: {known})")
    meta = store.read_run_meta(run)
    if meta.get("kind") == store.COLLECTIVES_KIND:
        raise ConfigError(f"--resume {run_id!r} is a `ddpbench collectives` run; run the measurement again instead")
    if not isinstance(meta.get("config"), dict) or not isinstance(meta.get("configurations"), list):
        # a run.json written by hand or by a tool other than bench (tests/data's): nothing says what is left to run
        raise ConfigError(f"--resume {run_id!r}: its run.json records no plan (config, configurations) to go on "
                          "with; bench it again as a new run")  # fmt: skip
    if node_rank == 0:
        hold_run(run, run_id)
    config = BenchConfig.from_json({**meta["config"], "results": str(results), "command": meta.get("command", ())})
    configurations = [Configuration.from_json(c) for c in meta["configurations"]]
    if retry_failed:
        configs = store.read_configs(run)
        for config_id in configs.loc[configs["status"] == "failed", "config_id"]:
            _set_aside(run, config_id)
    written = store.written_config_ids(run)
    pending = [c for c in configurations if c.config_id not in written]
    context = meta["context"]  # the run's: node 0's rows carry it
    if node_rank:  # another node's plans name its own host (record_nodes)
        context = {**context, **host_context(environment or {}, meta["device"])}
    plan = BenchRun(run_id, run, meta["device"], meta["threads_per_rank"], pending, context, node_rank=node_rank)
    return config, plan, len(configurations) - len(pending)


def _set_aside(run: Path, config_id: str) -> None:
    """Move a failed configuration's parts and failure records to retried/<config_id>/ (readers of the
    run never look there); its config part last, since a visible config part means the rest is there.

    On several nodes every node's launcher does it at once (node 1 may plan before node 0 moved anything, so
    none may skip it): a part another node moved first is already where it goes."""
    folder = RunFolder(run)
    aside = folder.retried(config_id)
    aside.mkdir(parents=True, exist_ok=True)
    for table in ("steps", "ranks", "timeline", "configs"):
        with contextlib.suppress(FileNotFoundError):  # not there, or another node's launcher moved it first
            os.replace(folder.part(table, config_id), aside / f"{table}.parquet")
    # The records are claimed by one rename (one node wins) before an earlier retry's are replaced: the retry's
    # own records must not be read as this failure's, nor the node that lost delete what the winner moved.
    claimed = aside / f".{layout.FAILURES}.{socket.gethostname()}.{os.getpid()}"
    try:
        os.replace(folder.failures(config_id), claimed)
    except FileNotFoundError:
        return
    shutil.rmtree(aside / layout.FAILURES, ignore_errors=True)
    os.replace(claimed, aside / layout.FAILURES)


NODE_FACTS = ("hostname", "torch_version", "gpu_name", "gpu_count", "git_sha", "threads_per_rank")
"""What each node's launcher records of its host (its plans' context): run.json's own environment is node 0's."""
NODE_PLAN = re.compile(r"^world-.*\.node(\d+)\.json$")


NOT_PLANNED = "its launcher left no plan in the run folder (never started, or its --results not this folder)"
"""Why a node of the run is named without its host: what node 0 could not learn of it."""


def record_nodes(run: Path) -> None:
    """On a run across nodes, node 0 writes every node into run.json (`nodes`: its node_rank and NODE_FACTS), from the
    launch plans each node's launcher kept in the run folder, at the run's end and where it stopped alike (a stopped
    run named node 0's host alone); a node of --nnodes that left no plan is named with `unknown`: why its host is
    not known. Nothing on one node."""
    meta = store.read_json(RunFolder(run).run_json)
    nnodes = int((meta.get("config") or {}).get("nnodes") or 1)
    nodes = {rank: {"node_rank": rank, **dict.fromkeys(NODE_FACTS), "unknown": NOT_PLANNED} for rank in range(nnodes)}
    for path in sorted((run / layout.PLANS).glob("world-*.node*.json")):
        if (named := NODE_PLAN.match(path.name)) and isinstance(plan := store.read_json(path), dict):
            context, rank = plan.get("context") or {}, int(named.group(1))
            nodes[rank] = {"node_rank": rank, **{fact: context.get(fact) for fact in NODE_FACTS}}
    if len(nodes) > 1:
        store.write_json(RunFolder(run).run_json, {**meta, "nodes": [nodes[rank] for rank in sorted(nodes)]})


UNLOCKED = (
    "another session resuming it at the same time would not be refused, and the two would run its "
    "configurations over each other's rows"
)
"""What running a bench run unlocked risks (hold_run's warning); `collectives` says its own."""


def hold_run(run: Path, run_id: str, *, unlocked: str = UNLOCKED) -> None:
    """Lock the run folder for this process, or refuse (exit 2) while another session holds it.

    Two sessions in one run folder (a `--resume` while the run, or another resume, still runs) would both
    run what is left and overwrite each other's rows: one session's measurements lost unsaid. The lock is
    flock's, so the kernel drops it when the holder exits however it ends (kill -9 included): on a local disk a
    stale lock never blocks a resume (on NFS a crashed node's lock lasts until the server's lease on it ends).
    Where the file system cannot flock at all, a one-line warning says so and the session runs unlocked. The file
    keeps the holder's pid, host and start, for the refusal to name them; `release_runs` lets go at the session's end.
    """
    key = Path(run).resolve()
    if key in _held:
        return
    fd = os.open(Path(run) / layout.SESSION_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        _lock(fd)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise ConfigError(
            f"run {run_id!r} in {str(Path(run).parent)!r} is being run by another ddpbench session ({holder}): "
            "a second one would run its configurations again over its rows; wait for it to end (or stop it), then "
            f"{resume_command(run_id, Path(run).parent)} runs what it left"
        ) from None
    except OSError as error:  # no flock on this file system (some NFS, Lustre mounted without it): run unlocked
        os.close(fd)
        logging.getLogger("ddpbench").warning(
            f"run {run_id!r}'s folder cannot be locked ({error.strerror or error}): {unlocked}"
        )
        _held[key] = None
        return
    since = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    os.ftruncate(fd, 0)
    os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": since}).encode())
    _held[key] = fd


def _lock(fd: int, tries: int = 5) -> None:
    """flock's exclusive lock, tried again for a moment: another node's launcher that looks whether node 0 still
    runs (node_zero_session) holds a shared one for a few microseconds."""
    for _ in range(tries - 1):
        try:
            return fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            time.sleep(0.02)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def release_runs() -> None:
    """Let go of every run folder this session holds, at its end: a process that goes on (a script, a test calling
    the command again) must not keep refusing another session's --resume of a run it finished."""
    while _held:
        fd = _held.popitem()[1]
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)  # closing the file drops its flock


def _holder(fd: int) -> str:
    """Who holds the lock, as its file says: 'pid 123 on host, since …' ('its holder unknown' if unreadable)."""
    try:
        held = json.loads(os.pread(fd, 4096, 0).decode())
        return f"pid {held['pid']} on {held['host']}, since {held['since']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "its holder unknown"

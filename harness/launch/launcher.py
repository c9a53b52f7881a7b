"""The launcher: one torchrun launch per world size, each running `harness.rank.worker` in every rank.

torchrun starts and tears down the ranks; this module writes each launch's plan, watches the
run folder for finished configurations (the progress report) and for progress within one
(the hang detector), and when a launch dies or hangs, records the configuration it was in as
`failed` with the rank and the cause, then runs the rest in a fresh launch.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.launch import supervise
from harness.plan.config import BenchConfig, ConfigError, Configuration
from harness.rank import faults, liveness, records
from harness.rank.progress import read_step_progress
from harness.results import store

POLL_S = 0.5


@dataclasses.dataclass(frozen=True)
class RunPlan:
    run_id: str
    run: Path
    device: str
    threads_per_rank: int
    configurations: list[Configuration]
    context: dict[str, Any]


def threads_per_rank(*, device: str, max_local_ranks: int, cpu_count: int | None) -> int:
    """On the CPU every simulated GPU gets the same share of cores at every world size,
    so that weak scaling compares like with like (1 rank must not get all the cores)."""
    if device != "cpu":
        return 1
    return max(1, (cpu_count or 1) // max_local_ranks)


def create_run(
    config: BenchConfig, configurations: list[Configuration], *, run_id: str, device: str, environment: dict[str, Any]
) -> RunPlan:
    """Make the run folder and write run.json, the run's provenance, before any launch.

    The folder is made exclusively: two runs started at once into one results folder never
    share one. On a multi-node job, node 0 writes run.json; the other nodes' launchers find
    (or make) the same folder on a shared file system and keep their plans and logs in it.
    """
    run = store.run_dir(config.results, run_id)
    if config.node_rank != 0:
        _wait_for_node_zero(run)
    try:
        run.mkdir(parents=True, exist_ok=config.node_rank != 0)
    except FileExistsError:
        raise ConfigError(f"--run-id {run_id!r} already exists in {config.results}; choose another run id") from None
    started_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    # Extra ranks (rpc_hybrid's parameter server) are processes too: they get their share.
    most_ranks = config.gpus + max((c.extra_ranks for c in configurations), default=0)
    threads = threads_per_rank(device=device, max_local_ranks=most_ranks, cpu_count=len(os.sched_getaffinity(0)))
    context = {
        "run_id": run_id,
        "started_at": started_at,
        "threads_per_rank": threads,
        "torch_version": environment.get("torch_version"),
        "gpu_name": environment.get("gpu_name") if device == "cuda" else None,
        "hostname": environment.get("hostname"),
        "git_sha": environment.get("git_sha"),
    }
    if config.node_rank != 0:
        return RunPlan(run_id, run, device, threads, configurations, context)
    store.write_json(
        run / "run.json",
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
            "context": context,
        },
    )
    return RunPlan(run_id, run, device, threads, configurations, context)


NODE_ZERO_WAIT_S = 60.0


def _wait_for_node_zero(run: Path) -> None:
    """On a shared file system node 0 makes the run folder; wait for it so as not to race it.
    Without one (node-local disks) it never appears here, and this node makes its own."""
    deadline = time.monotonic() + NODE_ZERO_WAIT_S
    while not (run / "run.json").is_file() and time.monotonic() < deadline:
        time.sleep(POLL_S)


def resume_run(results: Path, run_id: str) -> tuple[BenchConfig, RunPlan, int]:
    """The configuration and plan of an interrupted run, left with what it did not write.

    Returns (config, plan, number already written). Nothing is overwritten: a configuration
    whose part exists is skipped.
    """
    run = store.run_dir(results, run_id)
    if not (run / "run.json").is_file():
        known = ", ".join(p.name for p in store.list_runs(results)[:5]) or "none"
        raise ConfigError(f"--resume {run_id!r}: no such run in {str(results)!r} (newest runs: {known})")
    meta = store.read_json(run / "run.json")
    config = BenchConfig.from_json({**meta["config"], "results": str(results), "command": meta.get("command", ())})
    configurations = [Configuration.from_json(c) for c in meta["configurations"]]
    written = store.written_config_ids(run)
    pending = [c for c in configurations if c.config_id not in written]
    plan = RunPlan(run_id, run, meta["device"], meta["threads_per_rank"], pending, meta["context"])
    return config, plan, len(configurations) - len(pending)


def torchrun_command(
    config: BenchConfig, *, local_ranks: int, plan_path: Path, run_id: str, log_dir: Path | None = None
) -> list[str]:
    if config.nnodes == 1:
        rendezvous = ["--standalone"]
    else:
        rendezvous = [
            f"--nnodes={config.nnodes}",
            f"--node-rank={config.node_rank}",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint={config.rdzv_endpoint}",
            f"--rdzv-id={run_id}",
        ]
    # torchrun notices a dead rank within the monitor interval; its @record error files
    # (a rank's uncaught exception, with its traceback) go into the run folder.
    logging = [f"--log-dir={log_dir}"] if log_dir is not None else []
    return [
        sys.executable, "-m", "torch.distributed.run", *rendezvous,
        f"--nproc-per-node={local_ranks}", "--max-restarts=0", "--monitor-interval=0.5", *logging,
        "-m", "harness.rank.worker", str(plan_path),
    ]  # fmt: skip


def child_environment(threads: int) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(threads))  # a user's own setting wins (and is recorded)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def last_error_in_log(log: Path) -> str:
    """The most telling line of a launch's log: the last exception line, else the last line."""
    try:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "(no log)"
    for line in reversed(lines):
        head = line.split(":", 1)[0]
        if head.endswith(("Error", "Exception", "Interrupt")) or "Signal" in head:
            return line[:500]
    return lines[-1][:500] if lines else "(empty log)"


class FailFast(Exception):
    """--fail-fast: a configuration failed, and the run stops there."""


@dataclasses.dataclass
class LaunchEnd:
    """How one torchrun launch ended."""

    returncode: int
    log: Path
    hint: dict[str, Any] | None  # rank 0's last progress hint: the configuration and step it was in
    came_alive: bool  # whether any rank showed progress: if not, the launch itself failed
    hang: str | None = None  # set when the launcher ended a launch that made no progress


def launch_group(
    config: BenchConfig,
    plan: RunPlan,
    group: list[Configuration],
    *,
    on_written: Callable[[Configuration], None],
    on_tick: Callable[[], None] | None = None,
) -> int:
    """Run one world size's configurations; return the exit code of the last launch.

    A launch that dies (a rank killed, an exception, an out-of-memory) or hangs costs the
    configuration it was in: that one is recorded `failed` with the rank and the cause, and
    the rest run in a fresh launch (--fail-fast: FailFast is raised instead).
    """
    written = store.written_config_ids(plan.run)
    pending = [c for c in group if c.config_id not in written]
    returncode, attempt = 0, 0
    while pending:
        end = _run_launch(config, plan, pending, attempt=attempt, on_written=on_written, on_tick=on_tick)
        returncode = end.returncode
        written = store.written_config_ids(plan.run)
        pending = [c for c in pending if c.config_id not in written]
        if not pending or config.node_rank != 0:
            break  # node 0's launcher records failures; the others only launch
        current, rest = pending[0], pending[1:]
        failure = diagnose(plan.run, current, end)
        _record_failure(plan, current, failure)
        on_written(current)
        if failure["error_kind"] == "launch":  # nothing ran: every further launch would fail alike
            for cfg in rest:
                _record_failure(plan, cfg, failure)
                on_written(cfg)
            break
        if config.fail_fast:
            raise FailFast(f"{current.label()}: {failure['error']}")
        if config.nnodes > 1:
            # The other nodes' launchers cannot follow a relaunch; the rest are left for --resume.
            break
        pending, attempt = rest, attempt + 1
    return returncode


def launch_name(config: BenchConfig, cfg: Configuration) -> str:
    """world-N, -plusK for extra ranks (rpc_hybrid's server), .nodeK on a multi-node job (each
    node's launcher writes its own plan and log)."""
    name = f"world-{cfg.world_size}" + (f"-plus{cfg.extra_ranks}" if cfg.extra_ranks else "")
    return name + (f".node{config.node_rank}" if config.nnodes > 1 else "")


def _write_launch_plan(config: BenchConfig, plan: RunPlan, pending: list[Configuration]) -> Path:
    plan_path = plan.run / "plan" / f"{launch_name(config, pending[0])}.json"
    store.write_json(
        plan_path,
        {
            "run_dir": str(plan.run.resolve()),
            "device": plan.device,
            "backend": pending[0].backend,
            "timeout_s": config.timeout_s,
            "context": plan.context,
            "configurations": [c.to_json() for c in pending],
        },
    )
    return plan_path


def _run_launch(
    config: BenchConfig,
    plan: RunPlan,
    pending: list[Configuration],
    *,
    attempt: int,
    on_written: Callable[[Configuration], None],
    on_tick: Callable[[], None] | None,
) -> LaunchEnd:
    """One torchrun launch over `pending`, watched until it ends or goes quiet for too long."""
    world, extra = pending[0].world_size, pending[0].extra_ranks
    plan_path = _write_launch_plan(config, plan, pending)
    name = launch_name(config, pending[0]) + (f".retry{attempt}" if attempt else "")
    log_path = plan.run / "logs" / f"{name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    command = torchrun_command(
        config,
        local_ranks=world // config.nnodes + extra,
        plan_path=plan_path,
        run_id=plan.run_id,
        log_dir=plan.run / "logs" / f"{name}.torchrun",
    )
    remaining = list(pending)
    watch = supervise.ProgressWatch(config.timeout_s)
    before = hint = read_step_progress(plan.run)
    came_alive, hang = False, None
    with open(log_path, "w") as log:
        process = supervise.start(command, log=log, env=child_environment(plan.threads_per_rank))
        try:
            while remaining:
                finished = process.poll() is not None
                written = store.written_config_ids(plan.run)
                while remaining and remaining[0].config_id in written:
                    on_written(remaining.pop(0))
                    came_alive = True
                    watch.progressed(new_configuration=True)
                if finished or not remaining:
                    break
                latest = read_step_progress(plan.run)
                if latest != hint and latest != before:
                    came_alive = True
                    new = (latest or {}).get("config_id") != (hint or {}).get("config_id")
                    watch.progressed(new_configuration=new, stepping=bool((latest or {}).get("total")))
                    hint = latest
                if watch.expired():
                    hang = _describe_hang(plan.run, world + extra, watch, hint)
                    break
                if on_tick is not None:
                    on_tick()
                time.sleep(POLL_S)
            if hang is None:
                _wait_for_exit(process, watch)
        finally:
            supervise.stop(process)  # no-op for a launch that ended; no orphans for one that did not
    return LaunchEnd(process.returncode, log_path, hint if came_alive else None, came_alive, hang)


def _wait_for_exit(process: subprocess.Popen, watch: supervise.ProgressWatch) -> None:
    """After the last configuration is written, the ranks only tear down: give them time."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=watch.limit_s())


def _describe_hang(run: Path, world: int, watch: supervise.ProgressWatch, hint: dict | None) -> str:
    answers = liveness.ask(run, list(range(world)))
    where = _where(hint)
    return (
        f"timeout: no progress for {watch.silent_s():.0f} s (limit {watch.limit_s():.0f} s){where}; "
        f"{liveness.describe_hang(answers)}"
    )


def _where(hint: dict | None) -> str:
    if not hint or not hint.get("total"):
        return " while building" if hint else ""
    what = "parity reference step" if hint.get("phase") == "parity" else "step"
    return f" after {what} {hint['step']}/{hint['total']}"


def diagnose(run: Path, cfg: Configuration, end: LaunchEnd) -> dict[str, Any]:
    """Why `cfg` did not finish, root cause first: the hang the launcher ended; else a rank that
    died without a word (a signal other than torchrun's own SIGTERM, a hard exit) — its peers'
    "connection reset" errors are echoes; else the earliest record a failing rank wrote; else
    the launch's log. A rank beyond the trainers is named for what it is (a parameter server)."""
    failure = _diagnose(run, cfg, end)
    rank = failure.get("rank")
    if rank is not None and rank >= cfg.world_size and failure["error"].startswith(f"rank {rank}"):
        failure["error"] = f"rank {rank} (the parameter server){failure['error'][len(f'rank {rank}') :]}"
    return failure


def _diagnose(run: Path, cfg: Configuration, end: LaunchEnd) -> dict[str, Any]:
    hint = end.hint if end.hint and end.hint.get("config_id") == cfg.config_id else None
    where = _where(hint)
    if end.hang is not None:
        return {"error_kind": "timeout", "error": end.hang}
    rank_failures = faults.read_rank_failures(run, cfg.config_id)
    wrote = {r["rank"] for r in rank_failures}
    exits = supervise.rank_exits(end.log.read_text(errors="replace")) if end.log.is_file() else []
    silent = [e for e in exits if e.rank not in wrote and e.exitcode != -signal.SIGTERM]
    memory = {r["rank"]: r.get("memory") or {} for r in rank_failures}
    if silent and end.came_alive:
        first = silent[0]
        exception = first.exception_line()  # raised outside a measurement (writing results, say)
        if exception is not None:
            return {"error_kind": faults.kind_from_text(exception), "error": f"rank {first.rank}: {exception}",
                    "error_file": _relative(first.error_file, run), "rank": first.rank, "memory": memory}  # fmt: skip
        return {"error_kind": "killed", "error": f"{first.describe()}{where}", "rank": first.rank, "memory": memory}
    if rank_failures:
        first = rank_failures[0]
        return {
            "error_kind": first["error_kind"],
            "error": f"rank {first['rank']}: {first['error']}",
            "error_file": first["error_file"],
            "rank": first["rank"],
            "memory": memory,
        }
    kind = "killed" if end.came_alive else "launch"
    return {
        "error_kind": kind,
        "error": f"launch exited with code {end.returncode}{where}: {last_error_in_log(end.log)} (log: {end.log})",
    }


def _relative(path: str | None, run: Path) -> str | None:
    if path is None:
        return None
    try:
        return str(Path(path).resolve().relative_to(run.resolve()))
    except ValueError:
        return path  # outside the run folder (torchrun's default temporary folder): absolute


def _record_failure(plan: RunPlan, cfg: Configuration, failure: dict[str, Any]) -> None:
    """The failed row, with the failing rank's memory figures where it wrote them."""
    results: list[dict[str, Any]] = [{"status": "failed", "error": failure["error"]}]
    if failure.get("rank") is not None:  # the failing rank, and the peers its failure stopped
        memory = failure.get("memory") or {}
        results = [{"status": "stopped", "error": None, "memory": memory.get(r)} for r in range(cfg.processes)]
        results[failure["rank"]].update(status="failed", error=failure["error"])
    row, steps, ranks = records.assemble(
        cfg, results, run_context=plan.context, parity_exact=True, written=store.read_configs(plan.run)
    )
    row.update(error=failure["error"], error_kind=failure["error_kind"], error_file=failure.get("error_file"))
    store.write_configuration(plan.run, cfg.config_id, row, steps, ranks)


def run_groups(
    config: BenchConfig,
    plan: RunPlan,
    *,
    on_written: Callable[[Configuration], None],
    on_tick: Callable[[], None] | None = None,
) -> list[int]:
    """Every world size in ascending order (world size 1 first: scaling needs it)."""
    codes = []

    def launch_key(cfg: Configuration) -> tuple[int, int]:
        return cfg.world_size, cfg.extra_ranks  # extra ranks (a parameter server) need a launch of their own

    by_world = itertools.groupby(sorted(plan.configurations, key=launch_key), key=launch_key)
    for _, group in by_world:
        codes.append(launch_group(config, plan, list(group), on_written=on_written, on_tick=on_tick))
    return codes

"""The launcher: one torchrun launch per world size, each running `harness.worker` in every rank.

torchrun starts and tears down the ranks; this module only writes each launch's plan,
watches the run folder for finished configurations (that is the progress report), and
records as `failed` whatever a launch that died did not write.
"""

from __future__ import annotations

import dataclasses
import datetime
import itertools
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import records, store
from harness.config import BenchConfig, ConfigError, Configuration

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
    """Make the run folder and write run.json, the run's provenance, before any launch."""
    run = store.run_dir(config.results, run_id)
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


def torchrun_command(config: BenchConfig, *, local_ranks: int, plan_path: Path, run_id: str) -> list[str]:
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
    return [
        sys.executable, "-m", "torch.distributed.run", *rendezvous,
        f"--nproc-per-node={local_ranks}", "--max-restarts=0",
        "-m", "harness.worker", str(plan_path),
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


def extra_rank_note(log: Path, world: int) -> str:
    """Names the failed rank when torchrun's root cause is an extra rank (rpc_hybrid's parameter server)."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return ""
    cause = re.search(r"Root Cause.*?rank\s*:\s*(\d+).*?exitcode\s*:\s*(-?\d+)", text, re.DOTALL)
    if not cause or int(cause.group(1)) < world:
        return ""
    return f"; root cause: rank {cause.group(1)}, the parameter server, exited with code {cause.group(2)}"


def launch_group(
    config: BenchConfig,
    plan: RunPlan,
    group: list[Configuration],
    *,
    on_written: Callable[[Configuration], None],
    on_tick: Callable[[], None] | None = None,
) -> int:
    """Run one world size's configurations in one torchrun launch; return its exit code."""
    world, extra = group[0].world_size, group[0].extra_ranks
    name = f"world-{world}" + (f"-plus{extra}" if extra else "")  # e.g. rpc_hybrid's server rank
    plan_path = plan.run / "plan" / f"{name}.json"
    store.write_json(
        plan_path,
        {
            "run_dir": str(plan.run.resolve()),
            "device": plan.device,
            "backend": group[0].backend,
            "timeout_s": config.timeout_s,
            "context": plan.context,
            "configurations": [c.to_json() for c in group],
        },
    )
    log_path = plan.run / "logs" / f"{name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    command = torchrun_command(
        config, local_ranks=world // config.nnodes + extra, plan_path=plan_path, run_id=plan.run_id
    )
    pending = list(group)
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=child_environment(plan.threads_per_rank)
        )
        while pending:
            finished = process.poll() is not None
            written = store.written_config_ids(plan.run)
            while pending and pending[0].config_id in written:
                on_written(pending.pop(0))
            if finished:
                break
            if on_tick is not None:
                on_tick()
            time.sleep(POLL_S)
        returncode = process.wait()
    for cfg in pending:  # the launch died before writing these
        _record_launch_failure(
            plan,
            cfg,
            f"launch for world size {world} exited with code {returncode} "
            f"before this configuration finished: {last_error_in_log(log_path)}{extra_rank_note(log_path, world)} "
            f"(log: {log_path})",
        )
        on_written(cfg)
    return returncode


def _record_launch_failure(plan: RunPlan, cfg: Configuration, error: str) -> None:
    row, steps, ranks = records.assemble(
        cfg,
        [{"status": "failed", "error": error}],
        run_context=plan.context,
        parity_exact=True,
        written=store.read_configs(plan.run),
    )
    row["error"] = error
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

"""The launcher of `collectives`: the run folder and its run.json, then one launch per world size
of `harness.rank.collectives` through `harness.launch.torchrun.launch_ranks`, the supervised
launch `bench` takes (hang detection, the failing rank and its cause, no rank left behind).

    results/<run_id>/run.json                 "kind": "collectives", environment, command line
    results/<run_id>/collectives/w<N>.parquet one row per op × message size
    results/<run_id>/contention/w<N>.parquet  how overlapped compute and communication slow each other
    results/<run_id>/plan/ logs/              each launch's plan, torchrun's output
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.config.bench import ConfigError
from harness.config.collectives import CollectivesConfig
from harness.config.ranks import available_cpus, threads_per_rank
from harness.launch.bench_run import hold_run, release_runs, wait_for_node_zero
from harness.launch.diagnose import diagnose_launch
from harness.launch.rendezvous import Rendezvous
from harness.launch.torchrun import launch_ranks
from harness.results import model_tables, store
from harness.results.layout import RunFolder
from harness.results.values import counted

RANK_MODULE = "harness.rank.collectives"
UNLOCKED = (
    "while it runs, `predict` reads its world size in flight, which has kept nothing yet, as a launch that failed"
)
"""What a collectives run unlocked costs: the lock is only what tells a reader it still runs."""


class LaunchFailed(RuntimeError):
    """A launch of the measurement did not finish: which world size, which rank, why."""

    def __init__(self, world_size: int, failure: dict[str, Any], log: Path, *, kept: int = 0) -> None:
        self.world_size, self.failure, self.log, self.kept = world_size, failure, log, kept
        said = f"; kept: the {counted(kept, 'op × size row')} measured before it" if kept else ""
        super().__init__(f"collectives at world size {world_size} failed ({failure['error_kind']}): "
                         f"{failure['error']} (log: {log}){said}")  # fmt: skip


@dataclasses.dataclass(frozen=True)
class CollectivesRun:
    run_id: str
    run: Path
    threads_per_rank: int
    context: dict[str, Any]  # the columns every row repeats (run_id, device, backend, …)


def create_collectives_run(config: CollectivesConfig, *, run_id: str, environment: dict[str, Any]) -> CollectivesRun:
    """Make the run folder (exclusively: two runs never share one) and write its run.json. On several nodes, as
    `bench` does, node 0 makes the folder and writes run.json; the other nodes keep their plans and logs in it."""
    run = store.run_dir(config.results, run_id)
    if config.node_rank != 0:
        wait_for_node_zero(run)
    try:
        run.mkdir(parents=True, exist_ok=config.node_rank != 0)
    except FileExistsError:
        raise ConfigError(f"--run-id {run_id!r} already exists in {config.results}; choose another run id") from None
    threads = threads_per_rank(device=config.device, max_local_ranks=config.gpus, cpu_count=available_cpus())
    context = {
        "run_id": run_id,
        "device": config.device,
        "backend": config.backend,
        "threads_per_rank": threads,
        "hostname": environment.get("hostname"),
        "nnodes": config.nnodes,
        "started_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    if config.node_rank != 0:
        return CollectivesRun(run_id, run, threads, context)
    store.write_json(
        RunFolder(run).run_json,
        {
            "kind": store.COLLECTIVES_KIND,
            "schema_version": store.SCHEMA_VERSION,
            **context,
            "config": {k: v for k, v in dataclasses.asdict(config).items() if k != "command"},
            "command": list(config.command),
            "environment": environment,
        },
    )
    return CollectivesRun(run_id, run, threads, context)


def run_collectives(
    config: CollectivesConfig,
    *,
    run_id: str,
    environment: dict[str, Any],
    on_world_done: Callable[[int, float], None] | None = None,
    on_tick: Callable[[], None] | None = None,
) -> Path:
    """Every world size of the ladder in turn; return the run folder.

    `on_world_done(world_size, seconds)` after each launch. A launch that fails raises
    `LaunchFailed` (the world sizes before it stay written); Ctrl-C ends the launch in flight,
    ranks included, and propagates.
    """
    plan = create_collectives_run(config, run_id=run_id, environment=environment)
    if config.node_rank == 0:  # the other nodes share node 0's folder and session, as bench's do
        hold_run(plan.run, run_id, unlocked=UNLOCKED)  # while held, a launch with nothing kept yet reads as running
    try:
        for world in config.world_sizes:
            began = time.monotonic()
            launch_world(config, plan, world, on_tick=on_tick)
            if on_world_done is not None:
                on_world_done(world, time.monotonic() - began)
    finally:
        release_runs()  # the collectives command holds no other run
    return plan.run


def launch_world(
    config: CollectivesConfig, plan: CollectivesRun, world: int, *, on_tick: Callable[[], None] | None = None
) -> None:
    """One launch at one world size; its parts are on disk when this returns (on node 0, whose rank 0 writes them:
    the other nodes' launches end with their ranks)."""
    name = f"world-{world}" + (f".node{config.node_rank}" if config.nnodes > 1 else "")  # each node's plan and log
    plan_path = RunFolder(plan.run).launch_plan(name)
    store.write_json(
        plan_path,
        {
            "ops": list(config.ops),
            "sizes": list(config.sizes),
            "iters": config.iters,
            "warmup": config.warmup,
            "timeout_s": config.timeout_s,
            "contention": config.contention,
            "run_dir": str(plan.run.resolve()),
            "context": plan.context,
        },
    )
    # Rank 0 writes the collectives part last: once it is there only the teardown is left.
    part = model_tables.collectives_part(plan.run, world)
    try:
        end = launch_ranks(
            RANK_MODULE,
            plan_path,
            world,
            run=plan.run,
            name=name,
            threads=plan.threads_per_rank,
            timeout_s=config.timeout_s,
            rendezvous=Rendezvous(config.nnodes, config.node_rank, config.rdzv_endpoint, plan.run_id),
            collect=_PartsWritten(part, model_tables.collectives_partial(plan.run, world)),
            device=plan.context["device"],
        )
    except BaseException:  # stopped (Ctrl-C, a signal): the sizes measured so far stay, as the world sizes before
        if config.node_rank == 0:
            keep_measured_so_far(plan.run, world)
        raise
    if config.node_rank != 0:  # rank 0, on node 0, writes the part (on node-local disks it never shows here)
        if end.returncode != 0:
            raise LaunchFailed(world, diagnose_launch(plan.run, end), end.log)
        return
    if end.returncode != 0 or not part.is_file():
        kept = keep_measured_so_far(plan.run, world)
        raise LaunchFailed(world, diagnose_launch(plan.run, end), end.log, kept=kept)


class _PartsWritten:
    """The launch's `collect`: rank 0's first partial (the sizes measured so far) is the ranks' first
    progress, so that a rank dying after it is a rank that died, not a launch that never started,
    even when it dies before rank 0's progress hint; the part, written last, is the launch's end."""

    def __init__(self, part: Path, partial: Path) -> None:
        self.part, self.partial, self.seen = part, partial, False

    def __call__(self) -> tuple[int, bool]:
        newly = not self.seen and (self.partial.is_file() or self.part.is_file())
        self.seen = self.seen or newly
        return int(newly), self.part.is_file()


def keep_measured_so_far(run: Path, world: int) -> int:
    """Where a launch ended before its part was written, the sizes rank 0 had combined so far become the world
    size's part (model_tables.collectives_partial); how many rows were kept."""
    partial, part = model_tables.collectives_partial(run, world), model_tables.collectives_part(run, world)
    if part.is_file() or not partial.is_file():
        partial.unlink(missing_ok=True)
        return 0
    import pyarrow.parquet as pq

    rows = pq.read_metadata(partial).num_rows
    os.replace(partial, part)
    return rows

"""The launcher of `bench`: one torchrun launch per world size, each running `harness.rank.worker`
in every rank.

This module makes the run folder, writes each launch's plan, and hands the launch to
`harness.launch.torchrun.launch_ranks` (the supervised launch `collectives` takes too), counting
each configuration written as progress. When a launch dies or hangs, it records the
configuration it was in as `failed` with the rank and the cause (`harness.launch.diagnose`),
then runs the rest in a fresh launch.
"""

from __future__ import annotations

import dataclasses
import datetime
import itertools
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.config.bench import BenchConfig, ConfigError
from harness.config.flags import AUTO
from harness.config.grid import Configuration
from harness.config.ranks import available_cpus, threads_per_rank
from harness.handoff import costs, neighbours, pairing, records
from harness.handoff.rank_result import RankResult
from harness.launch import earlier
from harness.launch.diagnose import diagnose
from harness.launch.rendezvous import Rendezvous
from harness.launch.torchrun import WORKER, LaunchEnd, launch_ranks
from harness.results import layout, store
from harness.results.layout import RunFolder

POLL_S = 0.5


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
        _wait_for_node_zero(run)
    try:
        run.mkdir(parents=True, exist_ok=config.node_rank != 0)
    except FileExistsError:
        raise RunIdTaken(f"--run-id {run_id!r} already exists in {config.results}; choose another run id") from None
    except OSError as error:  # what the up-front check cannot see (/proc, a read-only mount): one line, no traceback
        raise ConfigError(f"--results {str(config.results)!r} cannot be written: {error.strerror or error}") from None
    started_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    threads = run_threads(config, configurations, device=device)
    context = {
        "run_id": run_id,
        "started_at": started_at,
        "threads_per_rank": threads,
        "torch_version": environment.get("torch_version"),
        "gpu_name": environment.get("gpu_name") if device == "cuda" else None,
        "gpu_count": environment.get("gpu_count") if device == "cuda" else None,  # GPUs per node, for `mfu`
        "hostname": environment.get("hostname"),
        "git_sha": environment.get("git_sha"),
    }
    if config.node_rank != 0:
        return BenchRun(run_id, run, device, threads, configurations, context)
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


def _wait_for_node_zero(run: Path) -> None:
    """On a shared file system node 0 makes the run folder; wait for it so as not to race it.
    Without one (node-local disks) it never appears here, and this node makes its own."""
    deadline = time.monotonic() + NODE_ZERO_WAIT_S
    while not RunFolder(run).run_json.is_file() and time.monotonic() < deadline:
        time.sleep(POLL_S)


def resume_run(results: Path, run_id: str, *, retry_failed: bool = False) -> tuple[BenchConfig, BenchRun, int]:
    """The configuration and plan of an interrupted run, left with what it did not write.

    Returns (config, plan, number already written). Nothing is overwritten: a configuration
    whose part exists is skipped; with `retry_failed` a failed one is run again, its failed row
    and records set aside in retried/<config_id>/ first (a failed row holds no measured step).
    """
    run = store.run_dir(results, run_id)
    if not RunFolder(run).run_json.is_file():
        known = store.newest_runs(results)
        raise ConfigError(f"--resume {run_id!r}: no such run in {str(results)!r} (newest runs: {known})")
    meta = store.read_run_meta(run)
    if meta.get("kind") == store.COLLECTIVES_KIND:
        raise ConfigError(f"--resume {run_id!r} is a `ddpbench collectives` run; run the measurement again instead")
    config = BenchConfig.from_json({**meta["config"], "results": str(results), "command": meta.get("command", ())})
    configurations = [Configuration.from_json(c) for c in meta["configurations"]]
    if retry_failed:
        configs = store.read_configs(run)
        for config_id in configs.loc[configs["status"] == "failed", "config_id"]:
            _set_aside(run, config_id)
    written = store.written_config_ids(run)
    pending = [c for c in configurations if c.config_id not in written]
    plan = BenchRun(run_id, run, meta["device"], meta["threads_per_rank"], pending, meta["context"])
    return config, plan, len(configurations) - len(pending)


def _set_aside(run: Path, config_id: str) -> None:
    """Move a failed configuration's parts and failure records to retried/<config_id>/ (readers of the
    run never look there); its config part last, since a visible config part means the rest is there."""
    folder = RunFolder(run)
    aside = folder.retried(config_id)
    aside.mkdir(parents=True, exist_ok=True)
    for table in ("steps", "ranks", "timeline", "configs"):
        part = folder.part(table, config_id)
        if part.is_file():
            os.replace(part, aside / f"{table}.parquet")
    failures = folder.failures(config_id)
    if failures.is_dir():  # the retry's own records must not be read as this failure's
        shutil.rmtree(aside / layout.FAILURES, ignore_errors=True)
        os.replace(failures, aside / layout.FAILURES)


class FailFast(Exception):
    """--fail-fast: a configuration failed, and the run stops there."""


def launch_group(
    config: BenchConfig,
    plan: BenchRun,
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
    with costs.timed(plan.phases_s, "launch plan"):  # which of the group are left, and in what order
        written = before = store.written_config_ids(plan.run)
        pending = earlier.first_to_judge(config, plan.run, [c for c in group if c.config_id not in written])
    not_run = set()
    for cfg, failure in earlier.failing_again(config, plan.run, pending):  # recorded, not launched
        _record_failure(plan, cfg, failure)
        on_written(cfg)
        not_run.add(cfg.config_id)
    pending = [c for c in pending if c.config_id not in not_run]
    returncode, attempt = 0, 0
    while pending:
        launched = pending
        end = _run_launch(config, plan, launched, attempt=attempt, on_written=on_written, on_tick=on_tick)
        returncode = end.returncode
        written = store.written_config_ids(plan.run)
        pending = [c for c in launched if c.config_id not in written]
        if not pending or config.node_rank != 0:
            break  # node 0's launcher records failures; the others only launch
        current, rest = pending[0], pending[1:]
        failure = diagnose(plan.run, current, end)
        ran = failure["error_kind"] != "launch"  # where its launch started at all, its place in it
        _record_failure(plan, current, failure, position=launched.index(current) if ran else None)
        on_written(current)
        if failure["error_kind"] == "launch":  # nothing ran: every further launch would fail alike
            for cfg in rest:
                _record_failure(plan, cfg, failure)
                on_written(cfg)
            break
        if config.fail_fast:
            with costs.timed(plan.phases_s, "pairing"):
                pairing.refresh(plan.run, repeat=current.repeat, world_size=current.world_size)
            raise FailFast(f"{current.label()}: {failure['error']}")
        if config.nnodes > 1:
            # The other nodes' launchers cannot follow a relaunch; the rest are left for --resume.
            break
        pending, attempt = rest, attempt + 1
    if config.node_rank == 0 and _paired_before_baseline(group, before):
        with costs.timed(plan.phases_s, "pairing"):
            pairing.refresh(plan.run, repeat=group[0].repeat, world_size=group[0].world_size)
    return returncode


def _paired_before_baseline(group: list[Configuration], before: set[str]) -> bool:
    """Whether a row of the group may have been written before its baseline's, which it pairs with: the baseline
    runs in the group, after its first place or after rows an earlier session wrote. Only then is the group's
    pairing derived again (each refresh reads the run's rows: 1-3 s a launch on this 2-core machine, loaded)."""
    import impls

    baseline = impls.baseline_name()
    at = next((k for k, c in enumerate(group) if c.impl == baseline), None)
    return at is not None and (at > 0 or any(c.config_id in before for c in group))


def pair_written(plan: BenchRun) -> None:
    """The paired columns (`harness.handoff.pairing`) of every launch the session planned, derived again: for a
    session stopped between a launch's rows and its own refresh."""
    for repeat, world_size in dict.fromkeys((c.repeat, c.world_size) for c in plan.configurations):
        pairing.refresh(plan.run, repeat=repeat, world_size=world_size)


def launch_name(config: BenchConfig, cfg: Configuration) -> str:
    """world-N, -plusK for extra ranks (rpc_hybrid's server), .rR for repeat R of several, .nodeK on a
    multi-node job (each node's launcher writes its own plan and log)."""
    name = f"world-{cfg.world_size}" + (f"-plus{cfg.extra_ranks}" if cfg.extra_ranks else "")
    older = config.repeats != AUTO and config.repeats > 1  # a run.json from before configurations said so
    name += f".r{cfg.repeat}" if cfg.repeated or older else ""
    return name + (f".node{config.node_rank}" if config.nnodes > 1 else "")


def _write_launch_plan(config: BenchConfig, plan: BenchRun, pending: list[Configuration]) -> Path:
    folder = RunFolder(plan.run)
    plan_path = folder.launch_plan(launch_name(config, pending[0]))
    written_before = folder.written_before
    store.write_configs_snapshot(plan.run, written_before)
    store.write_json(
        plan_path,
        {
            "run_dir": str(plan.run.resolve()),
            "device": plan.device,
            "backend": pending[0].backend,
            "timeout_s": config.timeout_s,
            "context": plan.context,
            "written_before": str(written_before.resolve()),
            "configurations": [c.to_json() for c in pending],
        },
    )
    return plan_path


def _run_launch(
    config: BenchConfig,
    plan: BenchRun,
    pending: list[Configuration],
    *,
    attempt: int,
    on_written: Callable[[Configuration], None],
    on_tick: Callable[[], None] | None,
) -> LaunchEnd:
    """One torchrun launch of the worker over `pending`; each configuration written is progress.
    Its split of the time (rank 0's account, torchrun's start and teardown) adds to the plan's."""
    remaining = list(pending)

    def collect() -> tuple[int, bool]:
        written, before = store.written_config_ids(plan.run), len(remaining)
        while remaining and remaining[0].config_id in written:
            on_written(remaining.pop(0))
        return before - len(remaining), not remaining

    with costs.timed(plan.phases_s, "launch plan"):
        plan_path = _write_launch_plan(config, plan, pending)
        layout.costs_path(plan_path).unlink(missing_ok=True)  # an earlier launch's account is not this one's
    launched_at = time.time()
    plan.launches.append(launch_name(config, pending[0]) + (f".retry{attempt}" if attempt else ""))
    local = -(-pending[0].world_size // config.nnodes) + pending[0].extra_ranks  # this node's ranks
    # what the run itself may keep runnable here: its ranks' threads (on GPUs, a rank's one feeding thread), and us
    watch = neighbours.LaunchWatch(run_threads=local * (plan.threads_per_rank if plan.device == "cpu" else 1) + 1,
                                   device=plan.device)  # fmt: skip
    end = launch_ranks(
        WORKER,
        plan_path,
        pending[0].world_size,
        run=plan.run,
        name=plan.launches[-1],
        threads=plan.threads_per_rank,
        timeout_s=config.timeout_s,
        rendezvous=rendezvous(config, plan.run_id),
        extra_ranks=pending[0].extra_ranks,
        collect=collect,
        on_tick=on_tick,
        device=plan.device,
    )
    costs.add_into(plan.phases_s, costs.read_launch(plan_path, launched_at=launched_at, ended_at=time.time()))
    watch.end(plan_path, plan.launches[-1], [c.config_id for c in pending], ranks=pending[0].processes,
              session=plan.session)  # fmt: skip
    return end


def rendezvous(config: BenchConfig, run_id: str) -> Rendezvous:
    return Rendezvous(config.nnodes, config.node_rank, config.rdzv_endpoint, run_id)


def _record_failure(
    plan: BenchRun, cfg: Configuration, failure: dict[str, Any], *, position: int | None = None
) -> None:
    """The failed row, with the failing rank's memory figures where it wrote them; `position`: its place in the
    launch it failed in."""
    results = [RankResult("failed", failure["error"])]
    if failure.get("rank") is not None:  # the failing rank, and the peers its failure stopped
        memory = failure.get("memory") or {}
        results = [RankResult("stopped", memory=memory.get(r) or {}) for r in range(cfg.processes)]
        results[failure["rank"]] = RankResult("failed", failure["error"], memory=memory.get(failure["rank"]) or {})
    rows = records.assemble(cfg, results, run_context=plan.context, written=store.read_configs(plan.run),
                            position=position)  # fmt: skip
    row = {**rows.config, "error": failure["error"], "error_kind": failure["error_kind"],
           "error_file": failure.get("error_file")}  # fmt: skip
    store.write_configuration(plan.run, cfg.config_id, row, rows.steps, rows.ranks)


def launch_key(cfg: Configuration) -> tuple[int, int, int]:
    """The launch a configuration runs in: its repeat, world size and extra ranks (a parameter server: a launch
    of its own)."""
    return cfg.repeat, cfg.world_size, cfg.extra_ranks


def launch_order(configurations: list[Configuration]) -> list[Configuration]:
    """The configurations in the order they run (and their progress lines count them): launch by launch."""
    return sorted(configurations, key=launch_key)


def run_groups(
    config: BenchConfig,
    plan: BenchRun,
    *,
    on_written: Callable[[Configuration], None],
    on_tick: Callable[[], None] | None = None,
) -> list[int]:
    """One launch per repeat and world size: repeat by repeat (A B C, then B C A: `grid.rotated`, each time in
    fresh processes, so that a repeat is an independent piece of evidence: placement, caches, clocks
    and neighbours differ from launch to launch as they will between runs), and within a repeat every
    world size in ascending order (world size 1 first: scaling needs it)."""
    codes = []

    by_world = itertools.groupby(launch_order(plan.configurations), key=launch_key)
    for _, group in by_world:
        codes.append(launch_group(config, plan, list(group), on_written=on_written, on_tick=on_tick))
    return codes

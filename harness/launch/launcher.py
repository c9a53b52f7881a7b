"""The launcher of `bench`: one torchrun launch per world size, each running `harness.rank.worker`
in every rank.

This module writes each launch's plan (the run folder is `harness.launch.bench_run`'s), and hands the launch to
`harness.launch.torchrun.launch_ranks` (the supervised launch `collectives` takes too), counting
each configuration written as progress. When a launch dies or hangs, it records the
configuration it was in as `failed` with the rank and the cause (`harness.launch.diagnose`),
then runs the rest in a fresh launch.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.config.bench import BenchConfig
from harness.config.flags import AUTO
from harness.config.grid import Configuration
from harness.handoff import costs, neighbours, pairing, records
from harness.handoff.rank_result import RankResult
from harness.launch import earlier
from harness.launch.bench_run import BenchRun, NodeZeroGone, node_zero_watch  # noqa: F401 (bench catches it here)
from harness.launch.diagnose import diagnose
from harness.launch.rendezvous import Rendezvous
from harness.launch.torchrun import WORKER, LaunchEnd, launch_ranks
from harness.results import layout, store
from harness.results.layout import RunFolder


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
            "node_rank": config.node_rank,  # named where the nodes' plans disagree (harness.rank.same_plan)
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
        on_tick=on_tick if config.node_rank == 0 else _watching_node_zero(plan, on_tick),
        device=plan.device,
    )
    costs.add_into(plan.phases_s, costs.read_launch(plan_path, launched_at=launched_at, ended_at=time.time()))
    watch.end(plan_path, plan.launches[-1], [c.config_id for c in pending], ranks=pending[0].processes,
              session=plan.session)  # fmt: skip
    return end


def _watching_node_zero(plan: BenchRun, on_tick: Callable[[], None] | None) -> Callable[[], None]:
    """Another node's tick: `on_tick`, and NodeZeroGone once node 0's session has let go of the run (the launch is
    stopped as the exception leaves it): its ranks may wait on node 0's for minutes, and a rendezvous for 5."""
    watch = node_zero_watch(plan.run)

    def tick() -> None:
        watch.check()
        if on_tick is not None:
            on_tick()

    return tick


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
    """One launch per repeat and world size: repeat by repeat (A B C, then C B A: `grid.rotated`, each time in
    fresh processes, so that a repeat is an independent piece of evidence: placement, caches, clocks
    and neighbours differ from launch to launch as they will between runs), and within a repeat every
    world size in ascending order (world size 1 first: scaling needs it)."""
    codes = []

    by_world = itertools.groupby(launch_order(plan.configurations), key=launch_key)
    for _, group in by_world:
        codes.append(launch_group(config, plan, list(group), on_written=on_written, on_tick=on_tick))
    return codes

"""The per-rank worker that torchrun starts: runs every configuration of one world size.

    torchrun --standalone --nproc-per-node N -m harness.rank.worker PLAN.json

For each configuration: build, wrap, warm up, measure, check parity, gather every rank's
records on rank 0, which writes them. A rank whose configuration raises writes down why
(`harness.rank.faults`) and leaves: its peers may be blocked in a collective it will never join,
and only the end of the launch frees them. The launcher records the configuration `failed`
and runs the rest in a fresh launch.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch.distributed.elastic.multiprocessing.errors import record

import impls
import workloads
from harness.comm_timeline import CommTimeline
from harness.plan.config import Configuration
from harness.rank import costs, faults, gradprofile, modelinfo, parity, parity_check, profiling, records, rpc_flow
from harness.rank.dist import Session, distributed_session, leave_on_failure
from harness.rank.housekeeping import exit_now, freeze_survivors, release_memory
from harness.rank.liveness import Responder
from harness.rank.memory import MemorySampler, held_as_row, held_bytes, peaks_as_row
from harness.rank.progress import StepProgress, announce_configuration
from harness.rank.timing import make_step_timer
from harness.rank.training import (
    OPTIMIZERS,
    build_model,
    concat_batches,
    forward_precision,
    make_batch,
    set_tf32,
    train_step,
)
from harness.results import store


@dataclasses.dataclass
class RankWatch:
    """What watches this rank's steps: the launcher's liveness questions, rank 0's progress
    hint, and an injected fault (DDPBENCH_FAULT) when the tests ask for one."""

    responder: Responder | None = None
    injected: list[faults.Fault] = dataclasses.field(default_factory=list)
    clock: costs.CostClock = dataclasses.field(default_factory=costs.CostClock)  # where the time goes

    def before_step(self, cfg: Configuration, session: Session, step: int) -> None:
        if self.responder is not None:
            self.responder.note(cfg.config_id, step)
        for fault in self.injected:
            if fault.applies(impl=cfg.impl, world=cfg.world_size, repeat=cfg.repeat, rank=session.rank, step=step):
                fault.fire(session.device)


def measure(cfg: Configuration, session: Session, *, run: Path, watch: RankWatch | None = None) -> dict[str, Any]:
    """This rank's measurement of one configuration. A failure is written down for the
    launcher (with the memory reached and the traceback) and raised again.

    The configuration's strategy is created here, once; what the records need of it after it is
    gone (`parity_exact`) comes back in the result."""
    began = time.perf_counter()
    memory: dict[str, Any] = {}
    watch = watch or RankWatch()
    try:
        result = _measure(cfg, session, run=run, watch=watch, memory=memory)
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        faults.write_rank_failure(run, cfg.config_id, session.rank, exc, memory)
        raise
    watch.clock.lap(None)  # what _measure does not split (a skip, a parameter server's flow) stays `other`
    result["wall_s"] = time.perf_counter() - began
    return result


def _measure(
    cfg: Configuration, session: Session, *, run: Path, watch: RankWatch, memory: dict[str, Any]
) -> dict[str, Any]:
    set_tf32(cfg.tf32)  # before the model is built; run.json records the flags this sets (env.capture)
    strategy = impls.create(cfg.impl, **cfg.impl_options)
    workload = workloads.create(cfg.workload, size=cfg.size)
    judged = {"parity_exact": strategy.parity_exact}  # for records.assemble, read while the strategy exists
    if strategy.extra_ranks:  # a parameter server: trainers and server run a flow of their own
        return {**rpc_flow.measure(cfg, session, strategy, workload, run=run, injected=watch.injected), **judged}
    reason = strategy.unavailable_reason(device=cfg.device, world_size=cfg.world_size) or (
        workload.unavailable_reason(device=cfg.device)
    )
    if reason:
        return {"status": "skipped", "error": reason, **judged}
    if strategy.single_process and not session.is_main:
        # Rank 0 drives every device of this launch. This rank waits for it in the gather of records,
        # over a gloo group on GPUs (Session.records_group): a CPU wait, never a kernel on its GPU.
        return {"status": "idle", "error": None, **judged}

    sampler = MemorySampler(session.device, period_s=cfg.mem_period_s).start()
    try:
        # Each rank builds from its own seed: `wrap` must make rank 0's weights win.
        model = build_model(workload, seed=cfg.seed + session.rank, device=session.device)
        timeline = CommTimeline(session.device)
        comm_note = _attach_timeline(strategy, timeline, asked=cfg.bucket_timeline)  # before wrap: DDP's hook
        model = strategy.wrap(model)
        optimizer_cls, learning_rate = OPTIMIZERS[cfg.optimizer]
        optimizer = strategy.make_optimizer(model.parameters(), optimizer_cls, lr=learning_rate)
        parts = {"model": model, "workload": workload, "strategy": strategy, "optimizer": optimizer}
        progress = StepProgress(run, cfg.config_id, cfg.warmup + cfg.steps) if session.is_main else None
        watch.clock.lap("build")
        trained = _train(
            cfg,
            session,
            before_step=lambda step: watch.before_step(cfg, session, step),
            progress=progress,
            timeline=timeline,
            sampler=sampler,
            **parts,
        )
        watch.clock.lap_training(trained.steps)
        timeline.end()
        memory.update(held_as_row(trained.held))
    finally:
        memory.update(peaks_as_row(sampler.stop()))  # kept for the failure record, too
    result = {
        "status": "ok",
        "error": None,
        "steps": trained.steps,
        "window_ms": trained.window_ms,
        "memory": dict(memory),
        "layout": strategy.layout(),
        "comm": timeline.rows() if comm_note is None else None,
        "comm_note": comm_note or _timeline_caveat(session.device),
        **judged,
    }
    watch.clock.lap("build")  # the sampler's stop, the strategy's layout
    # Parity is judged on the state after the measured steps (on a GPU: on a deterministic replay,
    # see parity_check), before any profiled step. Every rank calls full_state_dict (sharded
    # strategies gather with collectives); rank 0 keeps it.
    replay = parity_check.replays(cfg, session.device)
    full_state = strategy.full_state_dict(model) if cfg.parity and not replay else None
    final_state = parity.state_on_cpu(full_state) if full_state is not None and session.is_main else None
    del full_state
    watch.clock.lap("parity")
    if cfg.profile:
        traced = timeline if comm_note is None else None
        result["trace_dir"] = profiling.profile(
            cfg, session, trace_dir=run / "traces" / cfg.config_id, timeline=traced, **parts
        )
        watch.clock.lap("profile")
    del model, optimizer, strategy, parts
    release_memory(session.device)
    watch.clock.lap("release")
    judged_cfg = cfg
    if replay:
        final_state, judged_cfg = parity_check.replay_state(cfg, session, _train)
        release_memory(session.device)
    if final_state is not None:
        total = judged_cfg.warmup + judged_cfg.steps
        progress = StepProgress(run, cfg.config_id, total, phase="parity") if session.is_main else None
        result["parity"] = parity_check.verdict(
            judged_cfg,
            final_state,
            session.device,
            replayed=replay,
            folder=run / parity_check.PARITY_CACHE,
            progress=progress,
        )
    watch.clock.lap("parity")
    return result


GLOO_ON_CUDA = (
    "measured, completions late: gloo completes its CUDA work on the compute stream, so a "
    "collective counts as done when compute could use its result (an upper bound on communication)"
)


def _timeline_caveat(device: torch.device) -> str | None:
    """Why measured communication may read high: gloo, on CUDA tensors, marks its work done on the
    device's current (compute) stream after the copy back, so the timeline's completion waits for
    the compute queued before it (docs/measured/gpu-overlap-h200.md)."""
    gloo_on_cuda = device.type == "cuda" and torch.distributed.get_backend() == "gloo"
    return GLOO_ON_CUDA if gloo_on_cuda else None


def _attach_timeline(strategy, timeline: CommTimeline, *, asked: bool) -> str | None:
    """Attach the bucket timeline where it costs nothing or was asked for; otherwise why not."""
    cost = strategy.timeline_cost()
    if cost is not None and not asked:
        return f"not measured: {cost}; --bucket-timeline measures it"
    if not strategy.attach_timeline(timeline):
        return "not measured: the strategy's collectives run inside a library that offers no hook to time them"
    return None


def _train(
    cfg: Configuration,
    session: Session,
    *,
    before_step: Callable[[int], None] | None = None,
    progress: Callable[[int], None] | None = None,
    timeline: CommTimeline | None = None,
    sampler: MemorySampler | None = None,
    **step_parts,
) -> Trained:
    """Warm-up then measured steps, each timed per phase (warm-up kept apart), with the strategy's
    collectives stamped in `timeline` and the sampler's window around the measured steps."""
    single_process = step_parts["strategy"].single_process
    # A single-process strategy sees the whole job's batch: every rank's batch, concatenated.
    ranks = range(cfg.world_size) if single_process else [session.rank]
    precision = forward_precision(cfg.dtype, session.device)
    warmup_timer, timer = make_step_timer(session.device), make_step_timer(session.device)
    held: dict[str, int] = {}
    for step in range(cfg.warmup + cfg.steps):
        if before_step is not None:
            before_step(step)
        if step == cfg.warmup:
            if not single_process:
                session.barrier()  # every rank starts the measured window together
            _open_window(sampler, session.device)
        batch = concat_batches(
            [
                make_batch(
                    step_parts["workload"],
                    batch_size=cfg.batch_size,
                    seed=cfg.seed,
                    rank=rank,
                    step=step,
                    device=session.device,
                )
                for rank in ranks
            ]
        )
        timing = warmup_timer if step < cfg.warmup else timer
        last = step == cfg.warmup + cfg.steps - 1
        inspect = (lambda: held.update(held_bytes(step_parts["model"], step_parts["optimizer"]))) if last else None
        train_step(
            batch=batch,
            timer=timing,
            precision=precision,
            after_optimizer_step=inspect,
            timeline=timeline,
            step=step,
            **step_parts,
        )
        if progress is not None:
            progress(step)
    steps = warmup_timer.collect() + timer.collect()
    if sampler is not None:
        sampler.close_window()  # after collect(), which waited for the GPU to finish the last step
    return Trained(steps, held, timer.window_ms())


@dataclasses.dataclass
class Trained:
    steps: list[dict[str, float]]
    """Per step (warm-up first): step_ms and each phase's ms."""
    held: dict[str, int]
    """What this rank held (parameters, gradients, optimizer state) after the last optimizer step."""
    window_ms: float | None
    """From the first measured step's start to the last one's end."""


def _open_window(sampler: MemorySampler | None, device: torch.device) -> None:
    if sampler is None:
        return
    if device.type == "cuda":
        torch.cuda.synchronize(device)  # the warm-up's kernels are done: the window is the measured steps'
    sampler.open_window()


def model_info(cfg: Configuration, session: Session, cache: dict[tuple, dict | None], run: Path) -> dict | None:
    """Sizes and FLOPs of the configuration's model, once per workload setup in the run (rank 0
    only), before the configuration starts and with its memory released, so that it counts
    neither in the configuration's time nor in its memory peaks."""
    key = (cfg.workload, cfg.size, cfg.batch_size)
    if key in cache:
        return cache[key]
    workload = workloads.create(cfg.workload, size=cfg.size)
    info = modelinfo.describe_once(workload, key=key, batch_size=cfg.batch_size, device=session.device, run=run,
                                   cache=cache)  # fmt: skip
    release_memory(session.device)
    return info


def run_plan(plan: dict[str, Any], session: Session, *, watch: RankWatch | None = None) -> None:
    run = Path(plan["run_dir"])
    watch = watch or RankWatch()
    configurations = [Configuration.from_json(c) for c in plan["configurations"]]
    infos: dict[tuple, dict | None] = {}
    profiled: set[tuple] = set()
    # Rows already written (derived metrics look up world size 1 and `local`): read once per launch,
    # then grown by each row this launch writes; re-reading every part per configuration grew as n².
    written = store.read_configs(run) if session.is_main else None
    for cfg in configurations:
        if cfg.processes != session.world_size:
            raise RuntimeError(f"{cfg.config_id} needs {cfg.processes} ranks, this launch has {session.world_size}")
        if session.is_main:
            announce_configuration(run, cfg.config_id)  # the launcher's clock for this configuration starts
        watch.clock.lap(None)  # the launcher's bookkeeping between configurations is not timed
        info = model_info(cfg, session, infos, run) if session.is_main else None
        watch.clock.lap("model info")
        result = measure(cfg, session, run=run, watch=watch)
        parity_exact = result.pop("parity_exact")  # every rank made the same strategy; rank 0's counts
        release_memory(session.device)
        watch.clock.lap("release")
        gathered = session.gather_to_main(result)
        watch.clock.lap("gather")
        if session.is_main:
            config_row, step_rows, rank_rows, timeline_rows = records.assemble(
                cfg,
                gathered,
                run_context=plan["context"],
                parity_exact=parity_exact,
                written=written,
                model_info=info,
            )
            store.write_configuration(run, cfg.config_id, config_row, step_rows, rank_rows, timeline_rows)
            written = _with_row(written, store.read_config_row(run, cfg.config_id))
            watch.clock.lap("write")
            # At world size 1, when gradients become ready in backward (input of `ddpbench predict`).
            gradprofile.record_once(cfg, run=run, device=session.device, context=plan["context"], done=profiled)
            watch.clock.lap("gradient profile")
            release_memory(session.device)
            watch.clock.lap("release")
            watch.clock.save()


def _with_row(frame: pd.DataFrame, row: dict[str, Any]) -> pd.DataFrame:
    """`frame` and one more row, as the store reads it back."""
    added = pd.DataFrame([row])
    return added if frame.empty else pd.concat([frame, added], ignore_index=True)


# No NCCL or gloo timeout should fire before the launcher's own (--timeout), which names
# the rank the others wait for; this is the last resort if the launcher itself is gone.
COLLECTIVE_TIMEOUT_S = 1800.0


def _leaves_ranks_idle(plan: dict[str, Any]) -> bool:
    """Whether a configuration of this plan runs rank 0 alone while the other ranks wait (dataparallel)."""
    return any(impls.entry(c["impl"]).cls.single_process for c in plan["configurations"])


def main(argv: list[str] | None = None) -> int:
    """Run the plan; a rank that fails leaves at once (`dist.leave_on_failure`)."""
    return leave_on_failure(lambda: _run_recorded(argv))


@record  # an exception that ends this rank lands, with its traceback, in torchrun's error file
def _run_recorded(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="harness.rank.worker", description=__doc__.splitlines()[0])
    parser.add_argument("plan", type=Path, help="JSON plan written by the launcher")
    args = parser.parse_args(argv)
    clock = costs.CostClock(path=costs.costs_path(args.plan)).since_process_start("imports")
    plan = json.loads(args.plan.read_text())
    if plan["device"] == "cpu":
        torch.set_num_threads(plan["context"]["threads_per_rank"])
    timeout_s = max(COLLECTIVE_TIMEOUT_S, 2 * (plan.get("timeout_s") or 0))
    with distributed_session(
        device_kind=plan["device"],
        timeout_s=timeout_s,
        backend=plan.get("backend"),
        idle_ranks_wait=_leaves_ranks_idle(plan),
    ) as session:
        watch = RankWatch(Responder(Path(plan["run_dir"]), session.rank).start(), faults.faults_from_environment(),
                          clock if session.is_main else costs.CostClock())  # fmt: skip
        if session.is_main:
            store.warm_up()  # rank 0 writes Parquet: pay pyarrow's one-time memory before measuring
        freeze_survivors()  # before the first configuration: garbage collections skip what imports made
        clock.lap("process group")
        run_plan(plan, session, watch=watch)
    return 0


if __name__ == "__main__":
    exit_now(main())  # everything is written: the interpreter's finalisation would only cost time

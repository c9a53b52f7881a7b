"""One configuration on one rank, in the steps a reader can name: build, train, judge parity, profile.

`measure` runs them in turn and returns this rank's `RankResult`, which rank 0 gathers and turns into
rows (harness.handoff.records). A step that raises is written down for the launcher (with the memory
reached and the traceback) and raised again: the worker then leaves its launch.
"""

from __future__ import annotations

import dataclasses
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

import impls
from harness.clock import Clock, host_seconds
from harness.comm_timeline import CommTimeline
from harness.config import accumulation
from harness.config.grid import Configuration
from harness.handoff import costs, faults
from harness.handoff.progress import StepProgress
from harness.handoff.rank_result import RankResult, name_unused
from harness.measure.held import batch_bytes, held_as_row, held_bytes
from harness.measure.memory import MemorySampler, driven_devices, peaks_as_row
from harness.measure.timing import make_step_timer
from harness.measure.training import (
    OPTIMIZERS,
    build_model,
    forward_precision,
    grad_scaler,
    set_tf32,
    step_batches,
    train_step,
)
from harness.parity import reference, verdict
from harness.protocols import StrategyDefaults
from harness.rank import profiling, rpc_flow
from harness.rank.dist import Session
from harness.rank.housekeeping import release_memory
from harness.results.layout import RunFolder
from harness.results.values import HOOK_TIMED, UNHOOKED


@dataclasses.dataclass
class RankWatch:
    """What watches this rank's steps: the launcher's liveness questions, rank 0's progress
    hint, and an injected fault (DDPBENCH_FAULT) when the tests ask for one."""

    responder: Any = None  # a harness.handoff.liveness.Responder
    injected: list[faults.Fault] = dataclasses.field(default_factory=list)
    clock: costs.CostClock = dataclasses.field(default_factory=costs.CostClock)  # where the time goes

    def before_step(self, cfg: Configuration, session: Session, step: int) -> None:
        if self.responder is not None:
            self.responder.note(cfg.config_id, step)
        for fault in self._due(cfg, session, step):
            fault.fire(session.device)

    def before_backward(self, cfg: Configuration, session: Session, step: int) -> None:
        for fault in self._due(cfg, session, step):
            if fault.kind == "slow":
                fault.delay_backward()

    def _due(self, cfg: Configuration, session: Session, step: int) -> list[faults.Fault]:
        where = faults.fault_site(cfg, rank=session.rank)
        return [fault for fault in self.injected if fault.applies(step=step, **where)]


@dataclasses.dataclass
class Built:
    """A configuration's parts, built and wrapped, ready to train."""

    model: torch.nn.Module
    workload: Any
    strategy: Any
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler | None = None  # fp16's
    trained_names: list[str] = dataclasses.field(default_factory=list)
    """The unwrapped model's parameters that train, by name, in DDP's order (its errors give their indices)."""

    def parts(self) -> dict[str, Any]:
        return {"model": self.model, "workload": self.workload, "strategy": self.strategy, "optimizer": self.optimizer,
                "scaler": self.scaler}  # fmt: skip


def measure(cfg: Configuration, session: Session, *, run: Path, watch: RankWatch | None = None) -> RankResult:
    """This rank's measurement of one configuration. A failure is written down for the
    launcher (with the memory reached and the traceback) and raised again."""
    began = host_seconds()
    memory: dict[str, Any] = {}
    watch = watch or RankWatch()
    try:
        result = _measure(cfg, session, run=run, watch=watch, memory=memory)
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        faults.write_rank_failure(run, cfg.config_id, session.rank, exc, memory)
        raise
    watch.clock.lap(None)  # what _measure does not split (a skip, a parameter server's flow) stays `other`
    result.wall_s = host_seconds() - began
    return result


def _measure(cfg: Configuration, session: Session, *, run: Path, watch: RankWatch, memory: dict) -> RankResult:
    set_tf32(cfg.tf32)  # before the model is built; run.json records the flags this sets (env.capture)
    strategy = impls.create(cfg.impl, **cfg.impl_options)
    workload = cfg.make_workload()
    exact = strategy.parity_exact  # read while the strategy exists
    # StrategyDefaults says why where a strategy does not; a plug-in of its own without the base may say nothing
    why = None if exact else getattr(strategy, "parity_inexact_why", None)
    judged = {"parity_exact": exact, "parity_inexact_why": why}
    if refusal := accumulation.refused(cfg.impl, cfg.grad_accum):
        return RankResult("skipped", refusal, **judged)
    if strategy.extra_ranks:  # a parameter server: trainers and server run a flow of their own
        result = rpc_flow.measure(cfg, session, strategy, workload, run=run, injected=watch.injected)
        return dataclasses.replace(result, **judged)
    reason = strategy.unavailable_reason(device=cfg.device, world_size=cfg.world_size) or (
        workload.unavailable_reason(device=cfg.device)
    )
    if reason:
        return RankResult("skipped", reason, **judged)
    if strategy.single_process and not session.is_main:
        # Rank 0 drives every device of this launch. This rank waits for it in the gather of records,
        # over a gloo group on GPUs (Session.records_group): a CPU wait, never a kernel on its GPU.
        return RankResult("idle", **judged)
    devices = driven_devices(session.device, cfg.world_size if strategy.single_process else 1)
    result, built, timeline = _build_and_train(cfg, session, strategy, workload, run=run, watch=watch, memory=memory,
                                               devices=devices)  # fmt: skip
    result.parity_exact, result.parity_inexact_why = exact, judged["parity_inexact_why"]
    final_state = _measured_state(cfg, session, built)  # before any profiled step
    watch.clock.lap("parity")
    if cfg.profile:
        traced = timeline if result.comm is not None else None  # where the collectives are timed
        traces = RunFolder(run).traces(cfg.config_id)
        result.trace_dir = profiling.profile(cfg, session, trace_dir=traces, timeline=traced, **built.parts())
        watch.clock.lap("profile")
    del built, strategy
    release_memory(*devices)
    watch.clock.lap("release")
    result.parity = _judge_parity(cfg, session, final_state, run=run, exact=exact)
    watch.clock.lap("parity")
    return result


def _build_and_train(cfg, session, strategy, workload, *, run: Path, watch: RankWatch, memory: dict, devices):
    """Build and wrap (the strategy's timeline attached first), then warm up and measure on `devices`: this rank's
    result so far, the built parts and the timeline."""
    sampler = MemorySampler(session.device, period_s=cfg.mem_period_s, devices=devices).start()
    try:
        built, timeline, comm_note = _build(cfg, session, strategy, workload)
        progress = (
            StepProgress(run, cfg.config_id, cfg.warmup + cfg.steps, warmup=cfg.warmup) if session.is_main else None
        )
        watch.clock.lap("build")
        # The baseline is never held: the gap is measured against it, so a straggler's cost shows as the
        # others' wait rather than cancelling out against a baseline slowed the same way.
        slowed = any(fault.kind == "slow" for fault in watch.injected) and not impls.roles(cfg.impl)["baseline"]
        snapshot = _snapshot_in_warmup(cfg, session, built, run=run) if _judged_early(cfg, session) else None
        try:
            trained = train(cfg, session, watch=watch, slowed=slowed, progress=progress, timeline=timeline,
                            sampler=sampler, after_step=snapshot, **built.parts())  # fmt: skip
        except RuntimeError as exc:  # DDP's unused parameters, by index: named
            name_unused(exc, built.trained_names)
            raise
        watch.clock.lap_training(trained.steps)
        timeline.end()
        memory.update(held_as_row(trained.held))
    finally:
        memory.update(peaks_as_row(sampler.stop()))  # kept for the failure record, too
    caveats = _caveats(strategy, session.device, asked=cfg.bucket_timeline)
    result = RankResult("ok", steps=trained.steps, window_ms=trained.window_ms, memory=dict(memory),
                        layout=strategy.layout(), comm=timeline.rows() if comm_note is None else None,
                        comm_note=comm_note or caveats, scaler_skipped=trained.scaler_skipped)  # fmt: skip
    watch.clock.lap("build")  # the sampler's stop, the strategy's layout
    return result, built, timeline


def _build(cfg: Configuration, session: Session, strategy, workload) -> tuple[Built, CommTimeline, str | None]:
    """The model (from this rank's own seed: `wrap` must make rank 0's weights win), wrapped, and its
    optimizer; the timeline attached before `wrap` (DDP's hook), or why it is not."""
    model = build_model(workload, seed=cfg.seed + session.rank, device=session.device)
    names = [name for name, parameter in model.named_parameters() if parameter.requires_grad]
    timeline = CommTimeline(session.device)
    comm_note = attach_timeline(strategy, timeline, asked=cfg.bucket_timeline)
    model = strategy.wrap(model)
    optimizer_cls, learning_rate = OPTIMIZERS[cfg.optimizer]
    optimizer = strategy.make_optimizer(model.parameters(), optimizer_cls, lr=learning_rate)
    scaler = grad_scaler(cfg.dtype, session.device)
    return Built(model, workload, strategy, optimizer, scaler, trained_names=names), timeline, comm_note


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


def _caveats(strategy, device: torch.device, *, asked: bool) -> str | None:
    """What a measured timeline's figures carry: the hook's cost, which the step paid (a setting `compare`
    keeps apart, values.timed_by_hook), and why they may read high (gloo on CUDA, the strategy's own caveat)."""
    cost = strategy.timeline_cost()
    paid = f"{HOOK_TIMED}: {cost}" if cost is not None and asked else None
    notes = (paid, _timeline_caveat(device), strategy.timeline_caveat(device.type))
    return "; ".join(note for note in notes if note) or None


def attach_timeline(strategy, timeline: CommTimeline, *, asked: bool) -> str | None:
    """Attach the bucket timeline where it costs nothing or was asked for; otherwise why not."""
    cost = strategy.timeline_cost()
    if cost is not None and not asked:
        return f"not measured: {cost}; {UNHOOKED}"
    if not strategy.attach_timeline(timeline):
        return NO_HOOK if _declares_attach_timeline(strategy) else STAMPS_NONE
    return None


NO_HOOK = "not measured: the strategy's collectives run inside a library that offers no hook to time them"
STAMPS_NONE = (
    "not measured: the strategy stamps none of its collectives in the bucket timeline (it declares no "
    "attach_timeline: impls/flat.py shows how to stamp a collective; docs/architecture.md, adding a strategy)"
)


def _declares_attach_timeline(strategy) -> bool:
    """Whether the strategy's class says itself whether it can be timed: the default (False) is a strategy of
    someone's own that never stamps its collectives, not a library's that cannot be hooked."""
    return type(strategy).attach_timeline is not StrategyDefaults.attach_timeline


# ---- judging parity ---------------------------------------------------------------------------------


def _judged_early(cfg: Configuration, session: Session) -> bool:
    return verdict.judged_after_warmup(cfg, session.device, shards_state=bool(impls.roles(cfg.impl)["shards_state"]))


def _snapshot_path(cfg: Configuration, run: Path) -> Path:
    return RunFolder(run).parity_cache / f"{cfg.config_id}.judged-state.pt"


def _snapshot_in_warmup(cfg: Configuration, session: Session, built: Built, *, run: Path) -> Callable[[int], None]:
    """After the warm-up's REPLAY_STEPS-th step, rank 0 writes the full state as it stands (the live tensors,
    no copy: nothing more is held in memory) for parity to judge once the configuration is measured."""

    def after_step(step: int) -> None:
        if step != verdict.REPLAY_STEPS - 1:
            return
        state = built.strategy.full_state_dict(built.model)  # every rank, as the protocol asks
        if session.is_main:
            path = _snapshot_path(cfg, run)
            path.parent.mkdir(parents=True, exist_ok=True)
            torch.save(state, path)
        del state

    return after_step


def _measured_state(cfg: Configuration, session: Session, built: Built) -> dict | None:
    """The state after the measured steps, where it is what parity judges, on rank 0; every rank calls
    full_state_dict (sharded strategies gather with collectives). Copied only where profiled steps will
    train the model on before the verdict; else its tensors, kept where they are while the rest is released."""
    if not cfg.judges_parity or verdict.replays(cfg, session.device) or _judged_early(cfg, session):
        return None
    full_state = built.strategy.full_state_dict(built.model)
    if not session.is_main:
        return None
    return reference.state_on_cpu(full_state) if cfg.profile else reference.detached(full_state)


def _judge_parity(cfg: Configuration, session: Session, final_state: dict | None, *, run: Path, exact: bool):
    """Rank 0's verdict on the measured state, on the state written after the warm-up's first steps, or
    (on GPUs) on a deterministic replay of its own."""
    judged_cfg, how, failed = cfg, "", None
    early = _judged_early(cfg, session)
    folder = RunFolder(run).parity_cache
    if verdict.replays(cfg, session.device):
        if session.is_main:  # the reference trains before the replay's state is held on the device beside it
            failed = verdict.reference_ready(verdict.replayed(cfg), session.device, folder=folder,
                                             progress=_parity_progress(verdict.replayed(cfg), run))  # fmt: skip
        final_state, judged_cfg = replay_state(cfg, session)
        how = f", on a deterministic replay of {judged_cfg.steps} steps"
        release_memory(session.device)
    elif early and session.is_main:
        final_state = torch.load(_snapshot_path(cfg, run), mmap=True, weights_only=True)
        judged_cfg = verdict.replayed(cfg)
        how = f", after the first {verdict.REPLAY_STEPS} warm-up steps"
    if final_state is None:
        return None
    progress = _parity_progress(judged_cfg, run) if session.is_main else None
    judged = verdict.verdict(judged_cfg, final_state, session.device, how=how, folder=folder, progress=progress,
                             failed=failed, exact=exact)  # fmt: skip
    if early:
        _snapshot_path(cfg, run).unlink(missing_ok=True)  # mapped until the verdict is dropped: Linux keeps it
    return judged


def _parity_progress(judged_cfg: Configuration, run: Path) -> StepProgress:
    return StepProgress(run, judged_cfg.config_id, judged_cfg.warmup + judged_cfg.steps, phase="parity")


def replay_state(cfg: Configuration, session: Session) -> tuple[dict | None, Configuration]:
    """The full state after a deterministic replay (rank 0's, where it lives: on a GPU, judged there without a copy
    to the host; None elsewhere), and the configuration it ran (its steps are what the reference must run): a
    fresh strategy and model."""
    replayed = verdict.replayed(cfg)
    with reference.deterministic_algorithms():
        strategy = impls.create(cfg.impl, **cfg.impl_options)  # a fresh one: the measured one holds its model
        workload = cfg.make_workload()
        built, _, _ = _build(replayed, session, strategy, workload)
        train(replayed, session, **built.parts())
        state = strategy.full_state_dict(built.model)  # every rank: sharded strategies gather with collectives
    return (reference.detached(state) if session.is_main else None), replayed


# ---- the training loop ------------------------------------------------------------------------------


@dataclasses.dataclass
class Trained:
    steps: list[dict[str, float]]
    """Per step (warm-up first): step_ms and each phase's ms."""
    held: dict[str, int]
    """What this rank held (parameters, gradients, optimizer state) after the last optimizer step."""
    window_ms: float | None
    """From the first measured step's start to the last one's end."""
    scaler_skipped: int | None = None
    """fp16: the measured steps the grad scaler skipped; None without one."""


def train(
    cfg: Configuration,
    session: Session,
    *,
    watch: RankWatch | None = None,
    slowed: bool = False,
    progress: Callable[[int], None] | None = None,
    timeline: CommTimeline | None = None,
    sampler: MemorySampler | None = None,
    after_step: Callable[[int], None] | None = None,
    **step_parts,
) -> Trained:
    """Warm-up then measured steps, each timed per phase (warm-up kept apart), with the strategy's
    collectives stamped in `timeline` and the sampler's window around the measured steps. `watch`
    hears of every step (liveness, injected faults); `slowed`: a straggler fault may delay backward;
    `after_step(step)` runs after each step (parity's snapshot in the warm-up)."""
    single_process = step_parts["strategy"].single_process
    # A single-process strategy sees the whole job's batch: every rank's batch, concatenated.
    ranks = range(cfg.world_size) if single_process else [session.rank]
    precision = forward_precision(cfg.dtype, session.device)
    warmup_timer, timer = make_step_timer(session.device), make_step_timer(session.device)
    held: dict[str, int] = {}
    skipped = 0
    for step in range(cfg.warmup + cfg.steps):
        if watch is not None:
            watch.before_step(cfg, session, step)
        if step == cfg.warmup:
            if not single_process:
                session.barrier()  # every rank starts the measured window together
            _open_window(sampler, session.device)
        *accumulated, batch = step_batches(step_parts["workload"], batch_size=cfg.batch_size, seed=cfg.seed,
                                           ranks=ranks, step=step, device=session.device,
                                           grad_accum=cfg.grad_accum)  # fmt: skip
        last = step == cfg.warmup + cfg.steps - 1
        held["ahead_batch_bytes"] = batch_bytes(accumulated)  # made before the step, held through it: not timed
        inspect = (lambda: held.update(held_bytes(step_parts["model"], step_parts["optimizer"]))) if last else None
        delay = (lambda step=step: watch.before_backward(cfg, session, step)) if slowed else None
        skipped += train_step(batch=batch, timer=warmup_timer if step < cfg.warmup else timer, precision=precision,
                              after_optimizer_step=inspect, timeline=timeline, step=step, before_backward=delay,
                              accumulated=accumulated, **step_parts) and step >= cfg.warmup  # fmt: skip
        if progress is not None:
            progress(step)
        if after_step is not None:
            after_step(step)
    steps = warmup_timer.collect() + timer.collect()
    if sampler is not None:
        sampler.close_window()  # after collect(), which waited for the GPU to finish the last step
    return Trained(steps, held, timer.window_ms(), skipped if step_parts.get("scaler") is not None else None)


def _open_window(sampler: MemorySampler | None, device: torch.device) -> None:
    if sampler is None:
        return
    Clock(device).settle()  # the warm-up's kernels are done: the window is the measured steps'
    sampler.open_window()

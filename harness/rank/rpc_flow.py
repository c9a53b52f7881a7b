"""The worker flow of a strategy with a parameter server (rpc_hybrid): N trainers plus one server rank.

The launch has N + 1 ranks; the last is the server. Every rank joins RPC (TensorPipe, through
torchrun's rendezvous store: no second port to pick) at its first configuration and stays joined.
For each configuration the trainers form a process group of their own for DDP, the server builds
the model from the reference seed and serves the workload's remote part, and the trainers train
against it. Every rank goes through
the same collectives in the same order whatever fails (a failed trainer still reaches the final
barrier, the server always does), so that a failure becomes a `failed` row, not a hang.

A trainer's step, timed per phase:
    forward     the loss; the remote part's forward is an RPC to the server
    backward    dist_autograd.backward: DDP all-reduces the dense gradients over the trainers, and
                the remote output's gradient goes back to the server, which computes the rest
    optimizer   DistributedOptimizer.step: the dense part here, the remote part on the server
    sync        a barrier among the trainers: the next forward sees every trainer's update
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import json
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc

import workloads
from harness.config.grid import Configuration
from harness.config.skips import no_remote_part
from harness.handoff import faults
from harness.handoff.progress import StepProgress
from harness.handoff.rank_result import ParityVerdict, RankResult, error_line
from harness.measure.held import held_as_row
from harness.measure.memory import MemorySampler, peaks_as_row
from harness.measure.timing import make_step_timer
from harness.measure.training import OPTIMIZERS, build_model, forward_precision, make_batch
from harness.parity import parameter_server, reference
from harness.protocols import ParameterServer, missing_members
from harness.rank.dist import Session
from harness.results.values import counted

SERVER_NAME = "parameter_server"
RPC_TIMEOUT_S = 120.0
"""An RPC that takes longer fails the configuration (the server died or hangs)."""


def trainer_name(rank: int) -> str:
    return f"trainer{rank}"


def unavailable_reason(cfg: Configuration, session: Session, strategy: ParameterServer, workload) -> str | None:
    """Why this configuration cannot run here (its rows are then `skipped`), or None."""
    if workload.remote_part is None:
        return no_remote_part(cfg.workload)
    if cfg.nnodes > 1:
        return "runs on one node: the parameter server is an extra rank of a single-node launch"
    if cfg.device == "cuda" and cfg.backend == "nccl" and session.world_size > torch.cuda.device_count():
        return (
            f"needs {session.world_size} GPUs with NCCL (one more for the parameter server), "
            f"{torch.cuda.device_count()} visible; use --backend gloo to let the server share one"
        )
    return strategy.unavailable_reason(device=cfg.device, world_size=cfg.world_size) or (
        workload.unavailable_reason(device=cfg.device)
    )


def measure(
    cfg: Configuration,
    session: Session,
    strategy: ParameterServer,
    workload,
    *,
    run: Path,
    injected: Sequence[faults.Fault] = (),
) -> RankResult:
    """This rank's record of one configuration, as harness.rank.configuration.measure returns it.

    The strategy is used only through the `ParameterServer` protocol; `injected` are the faults
    (DDPBENCH_FAULT) of this launch, which fire on the server inside its answer to a trainer."""
    missing = missing_members(type(strategy), ParameterServer)
    if missing:
        raise TypeError(f"strategy {cfg.impl!r} has extra ranks but does not define {', '.join(missing)}")
    reason = unavailable_reason(cfg, session, strategy, workload)
    if reason:
        return RankResult("skipped", reason)
    server_rank = session.world_size - 1
    # Every rank, the server included, must take part in making the trainers' group.
    trainers = dist.new_group(list(range(server_rank)), backend=session.backend)
    is_server = session.rank == server_rank
    _join_rpc(session, name=SERVER_NAME if is_server else trainer_name(session.rank))
    try:
        if is_server:
            return _serve(cfg, session, strategy, workload, injected=list(injected))
        return _train(cfg, session, strategy, workload, trainers=trainers, run=run)
    finally:
        dist.destroy_process_group(trainers)


_rpc_joined = False


def _join_rpc(session: Session, *, name: str) -> None:
    """Join RPC once per worker process, for every configuration of the launch after it.

    Once per process because torch's RPC does not survive a shutdown and a second init_rpc in one
    process (RRefs sent after it reach a stopped agent). The default init_method (env://) reuses
    torchrun's rendezvous store under a prefix of its own: no second port to choose or to clash.
    """
    global _rpc_joined
    if _rpc_joined:
        return
    rpc.init_rpc(
        name,
        rank=session.rank,
        world_size=session.world_size,
        rpc_backend_options=rpc.TensorPipeRpcBackendOptions(rpc_timeout=RPC_TIMEOUT_S),
    )
    _rpc_joined = True
    # Graceful: every rank waits for the others' outstanding RPCs when the worker exits.
    atexit.register(rpc.shutdown)


# ---- the parameter server ------------------------------------------------------------------------


def _serve(
    cfg: Configuration, session: Session, strategy: ParameterServer, workload, *, injected: list[faults.Fault]
) -> RankResult:
    sampler = MemorySampler(session.device, period_s=cfg.mem_period_s).start()
    held, failure = None, None
    try:
        # Rank 0's seed: the trainers' DDP starts from rank 0's dense part, so the model as a whole
        # starts as the single-process reference does.
        model = build_model(workload, seed=cfg.seed, device=session.device)
        served = model.get_submodule(workload.remote_part)
        where = faults.fault_site(cfg, rank=session.rank)
        faults.arm_served_module(served, injected, device=session.device, **where)
        strategy.serve(served, device=session.device)
        del model, served
        held = {"param_bytes": strategy.served_parameter_bytes()}
    except Exception as exc:  # the trainers' first RPC then fails, naming the server
        traceback.print_exc(file=sys.stderr)
        failure = error_line(exc)
    # The server reaches both barriers whatever happened, or the trainers would wait for it.
    dist.barrier()  # served: the trainers may reach for it
    dist.barrier()  # the trainers are done (training and parity)
    failure = failure or strategy.served_failure()
    strategy.stop_serving()
    peaks = sampler.stop()
    memory = {**peaks_as_row(peaks), **held_as_row(held)}
    error = f"parameter server (rank {session.rank}): {failure}" if failure else None
    return RankResult("failed" if failure else "ok", error, memory=memory, role="parameter_server")


# ---- a trainer -------------------------------------------------------------------------------------


def _train(
    cfg: Configuration, session: Session, strategy: ParameterServer, workload, *, trainers, run: Path
) -> RankResult:
    sampler = MemorySampler(session.device, period_s=cfg.mem_period_s).start()
    final_state = None
    dist.barrier()  # the server serves
    try:
        result, final_state = _train_steps(
            cfg, session, strategy, workload, trainers=trainers, run=run, sampler=sampler
        )
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        result = RankResult("failed", _failure_line(exc, session))
    finally:
        dist.barrier()  # every trainer is done with the server
        peaks = sampler.stop()
    result.memory = {**peaks_as_row(peaks), **result.memory}  # the peaks, and what it held
    if final_state is not None:
        result.parity = _check_parity(cfg, final_state, trainers=session.world_size - 1, device=session.device)
    return result


def _failure_line(exc: Exception, session: Session) -> str:
    """One line for a trainer's failure; an error the server sent back is named as the server's."""
    server = f"the parameter server (rank {session.world_size - 1})"
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for header, remote in itertools.pairwise(lines):
        if f"On WorkerInfo(id={session.world_size - 1}, name={SERVER_NAME})" in header:
            return f"{server} raised {remote}"  # torch puts the remote exception's repr after this header
    if isinstance(exc, RuntimeError) and any(word in str(exc) for word in ("RPC", "rpc", "pipe", "WorkerInfo")):
        return f"RPC to {server} failed: {error_line(exc)}"
    return error_line(exc)


def _train_steps(
    cfg: Configuration, session: Session, strategy: ParameterServer, workload, *, trainers, run: Path, sampler
):
    strategy.connect(server=SERVER_NAME, remote_part=workload.remote_part, process_group=trainers)
    # Each trainer builds from its own seed: DDP makes rank 0's dense part win.
    model = strategy.wrap(build_model(workload, seed=cfg.seed + session.rank, device=session.device))
    optimizer_cls, learning_rate = OPTIMIZERS[cfg.optimizer]
    optimizer = strategy.make_optimizer(model.parameters(), optimizer_cls, lr=learning_rate)
    progress = StepProgress(run, cfg.config_id, cfg.warmup + cfg.steps) if session.is_main else None
    parts = {"model": model, "workload": workload, "strategy": strategy, "optimizer": optimizer}
    steps, traffic, held, window_ms = _steps(
        cfg, session, trainers=trainers, progress=progress, sampler=sampler, **parts
    )
    measured = traffic[cfg.warmup :]
    rpc_figures = {
        "round_trips_per_step": sum(t["round_trips"] for t in measured) / len(measured),
        "bytes_per_step": sum(t["bytes"] for t in measured) / len(measured),
    }
    # DDP's caps and buckets over the dense part, as an ordinary configuration records them (predict counts them)
    result = RankResult("ok", steps=steps, window_ms=window_ms, memory=held_as_row(held), rpc=rpc_figures,
                        layout=strategy.layout())  # fmt: skip
    state = strategy.full_state_dict(model) if cfg.judges_parity else None
    return result, (reference.state_on_cpu(state) if state is not None and session.is_main else None)


def _steps(cfg: Configuration, session: Session, *, trainers, progress, sampler=None, **parts):
    """Warm-up then measured steps; per step its phase times and RPC traffic; what the last step held;
    the measured window's length (the sampler's utilisation window around it)."""
    precision = forward_precision(cfg.dtype, session.device)
    warmup_timer, timer = make_step_timer(session.device), make_step_timer(session.device)
    traffic, held = [], {}
    for step in range(cfg.warmup + cfg.steps):
        if step == cfg.warmup:
            dist.barrier(group=trainers)  # every trainer starts the measured window together
            if sampler is not None:
                sampler.open_window()
        batch = make_batch(
            parts["workload"], batch_size=cfg.batch_size, seed=cfg.seed, rank=session.rank, step=step,
            device=session.device,
        )  # fmt: skip
        timing = warmup_timer if step < cfg.warmup else timer
        last = step == cfg.warmup + cfg.steps - 1
        traffic.append(
            rpc_step(
                batch=batch, timer=timing, precision=precision, trainers=trainers, held=held if last else None, **parts
            )
        )
        if progress is not None:
            progress(step)
    steps = warmup_timer.collect() + timer.collect()
    if sampler is not None:
        sampler.close_window()
    return steps, traffic, held, timer.window_ms()


def rpc_step(
    *, model, workload, strategy, optimizer, batch, timer, trainers, precision=None, held=None
) -> dict[str, int]:
    """One step in a distributed-autograd context; returns its RPC round trips and bytes."""
    with dist_autograd.context() as context_id:
        timer.start()
        with precision or contextlib.nullcontext():
            loss = workload.loss(model, batch)
        timer.lap("forward")
        dist_autograd.backward(context_id, [loss])
        timer.lap("backward")
        optimizer.step(context_id)
        timer.lap("optimizer")
        dist.barrier(group=trainers)  # the server has every trainer's update before anyone's next forward
        timer.lap("sync")
        if held is not None:  # gradients live in the context, not in .grad
            gradients = dist_autograd.get_gradients(context_id).values()
            held["param_bytes"] = sum(p.numel() * p.element_size() for p in model.parameters())
            held["grad_bytes"] = sum(g.numel() * g.element_size() for g in gradients)
        return strategy.step_traffic(context_id, optimizer)


@functools.lru_cache(maxsize=2)
def _reference(
    spec: str, size: str, options_json: str, **setup
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Computed once per setup: the repeats of a configuration share it."""
    workload = workloads.create(spec, size=size, options=json.loads(options_json))
    return parameter_server.parameter_server_reference(workload, **setup)


def _check_parity(cfg: Configuration, final_state, *, trainers: int, device: torch.device) -> ParityVerdict:
    semantics = (
        f"against the parameter-server reference (dense part: mean over {counted(trainers, 'trainer')}; "
        f"remote part: one {cfg.optimizer} update per trainer), updates compared"
    )
    try:
        expected = _reference(
            cfg.workload_spec or cfg.workload, cfg.size, cfg.workload_options_json, trainers=trainers,
            batch_size=cfg.batch_size, steps=cfg.warmup + cfg.steps,
            seed=cfg.seed, device=device, dtype=cfg.dtype, optimizer=cfg.optimizer,
        )  # fmt: skip
        outcome = parameter_server.compare_updates(final_state, *expected)
    except Exception as exc:  # a broken reference must not hide the timing
        traceback.print_exc(file=sys.stderr)
        return ParityVerdict(None, None, f"parity check failed: {error_line(exc)}")
    return ParityVerdict(outcome.max_abs_diff, outcome.within_tolerance, f"{semantics}; {outcome.where()}")

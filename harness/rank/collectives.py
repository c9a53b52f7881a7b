"""The rank side of `ddpbench collectives`: nccl-tests-style microbenchmarks of the collectives
DDP is made of. `harness.launch.collectives` starts it in every rank, one launch per world size
of the ladder (2, 4, … up to --gpus: one rank has nothing to communicate), through the same
supervised torchrun launch as `bench`'s worker:

    torchrun --standalone --nproc-per-node N -m harness.rank.collectives PLAN.json

Per operation and doubling message size: warm-up, then timed batches as nccl-tests times them
(each batch's iterations queued back to back between two CUDA events, the wall clock on the CPU,
with one synchronize; a rank's figure is the batch's mean, the slowest rank's counts), a
correctness check of the result, then algorithm bandwidth (bytes / time) and bus bandwidth
(algbw × the factor nccl-tests uses, so that one number compares across world sizes). Rank 0
writes `results/<run_id>/collectives/w<N>.parquet`.

It also measures how communication and computation slow each other down when they overlap
(`harness.rank.contention`), which the step-time model (`harness.perfmodel.network`) uses:
`results/<run_id>/contention/w<N>.parquet`.

As the worker does, every rank answers the launcher's liveness questions, rank 0 gives a
progress hint after each message size, and DDPBENCH_FAULT (with impl=collectives, and step
counting the (operation, size) cases from 0) injects a fault for the tests.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.clock import Clock
from harness.config.bench import ConfigError
from harness.config.collectives import BATCHES, ELEMENT_BYTES, OPS, message_sizes
from harness.rank.contention import contention_row, measure_contention
from harness.rank.dist import leave_on_failure
from harness.results import model_tables, store


def bus_factor(op: str, world_size: int) -> float:
    """nccl-tests' factor from algorithm to bus bandwidth: what each link carries per byte of message."""
    n = world_size
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter"):
        return (n - 1) / n
    if op == "broadcast":
        return 1.0
    raise ConfigError(f"collective {op!r} is not valid; choose from {', '.join(OPS)}")


@dataclasses.dataclass(frozen=True)
class Case:
    """One op at one size on this rank: how to run it, and how to check a fresh result."""

    run: Callable[[], None]
    prepare: Callable[[], Any]  # sets the inputs of the check (the timed runs leave them changed)
    output: Any
    expected: Any
    bytes: int

    def check(self, device) -> bool:
        self.prepare()
        self.run()
        Clock(device).settle()
        return bool((self.output == self.expected).all())


def make_case(op: str, size: int, *, world: int, rank: int, device) -> Case:
    """Values are small integers, exact in float32, and depend on the rank (and for the chunked
    ops on the chunk), so a result that mixes up ranks or chunks fails the check."""
    import torch
    import torch.distributed as dist

    numel = max(1, size // ELEMENT_BYTES)
    chunk = max(1, size // (ELEMENT_BYTES * world))
    if op == "all_reduce":
        buf = torch.zeros(numel, device=device)
        return Case(lambda: dist.all_reduce(buf), lambda: buf.fill_(rank + 1), buf, world * (world + 1) / 2,
                    numel * ELEMENT_BYTES)  # fmt: skip
    if op == "all_gather":
        src = torch.full((chunk,), float(rank + 1), device=device)
        out = torch.zeros(chunk * world, device=device)
        expected = torch.arange(1, world + 1, device=device, dtype=out.dtype).repeat_interleave(chunk)
        return Case(
            lambda: dist.all_gather_into_tensor(out, src), out.zero_, out, expected, chunk * world * ELEMENT_BYTES
        )
    if op == "reduce_scatter":
        reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        positions = torch.arange(1, world + 1, device=device, dtype=torch.float32).repeat_interleave(chunk)
        src = positions * (rank + 1)  # chunk j on rank r holds (j + 1)(r + 1)
        out = torch.zeros(chunk, device=device)
        expected = (rank + 1) * world * (world + 1) / 2
        return Case(lambda: reduce_scatter(out, src), out.zero_, out, expected, chunk * world * ELEMENT_BYTES)
    if op == "broadcast":
        buf = torch.zeros(numel, device=device)
        return Case(lambda: dist.broadcast(buf, src=0), lambda: buf.fill_(1.0 if rank == 0 else 0.0), buf, 1.0,
                    numel * ELEMENT_BYTES)  # fmt: skip
    raise ConfigError(f"collective {op!r} is not valid; choose from {', '.join(OPS)}")


def time_op(run_once: Callable[[], None], *, iters: int, warmup: int, device, batches: int = BATCHES) -> list[float]:
    """Seconds per iteration on this rank, one figure per batch, as nccl-tests times them: after
    `warmup` iterations, each batch starts after a barrier, queues `iters` iterations back to back
    between two marks of the rank's clock and waits once, for the last; its figure is its time / `iters`.
    A synchronize after every iteration would add the host's launch and sync latency to each, and
    the network fit's α would absorb it."""
    import torch.distributed as dist

    for _ in range(warmup):
        run_once()
    clock, per_batch = Clock(device), []
    for _ in range(batches):
        clock.settle()
        dist.barrier()  # every rank starts the batch together
        start = clock.mark()
        for _ in range(iters):
            run_once()
        per_batch.append(clock.ms_after(start, clock.mark()) / 1e3 / iters)
    clock.settle()
    return per_batch


@dataclasses.dataclass
class CaseWatch:
    """What watches this rank's cases, as `harness.rank.configuration.RankWatch` watches its steps: the
    launcher's liveness questions, rank 0's progress hint, and an injected fault."""

    run: Path
    session: Any
    responder: Any = None  # a liveness.Responder (None in a test that calls the body directly)
    injected: list = dataclasses.field(default_factory=list)  # faults.Fault
    _hints: dict[str, Any] = dataclasses.field(default_factory=dict)

    def before(self, unit: str, step: int, case: int) -> None:
        """`unit` (an op at this world size) starts its `step`-th item; `case` counts every item so far."""
        if self.responder is not None:
            self.responder.note(unit, step)
        for fault in self.injected:
            if fault.applies(impl="collectives", world=self.session.world_size, rank=self.session.rank, step=case):
                fault.fire(self.session.device)

    def after(self, unit: str, step: int, total: int, *, phase: str) -> None:
        """Rank 0 tells the launcher that `unit` finished its `step`-th of `total` items."""
        if not self.session.is_main:
            return
        from harness.handoff.progress import StepProgress

        if unit not in self._hints:
            self._hints[unit] = StepProgress(self.run, unit, total, phase=phase)
        self._hints[unit](step)


def measure_rank(plan: dict[str, Any], session, watch: CaseWatch | None = None,
                 on_case: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """This rank's timings and checks for every op and size; `on_case(cell)` after each (KeptSoFar: rank 0 combines),
    on every rank (a collective may follow: it is called between cases, never inside the timing)."""
    watch = watch or CaseWatch(Path(plan["run_dir"]), session)
    sizes = message_sizes(*plan["sizes"])
    out = []
    for op in plan["ops"]:
        unit = f"w{session.world_size}-{op}"
        for index, size in enumerate(sizes):
            watch.before(unit, index, len(out))
            case = make_case(op, size, world=session.world_size, rank=session.rank, device=session.device)
            times = time_op(case.run, iters=plan["iters"], warmup=plan["warmup"], device=session.device,
                            batches=plan.get("batches", BATCHES))  # fmt: skip
            out.append({"op": op, "bytes": case.bytes, "times_s": times, "correct": case.check(session.device)})
            if on_case is not None:
                on_case(out[-1])
            watch.after(unit, index, len(sizes), phase=f"{op} message size")
    return out


class KeptSoFar:
    """`measure_rank`'s on_case: after each case rank 0 gathers every rank's cell and rewrites the sizes measured
    so far (model_tables.collectives_partial), which the launcher keeps if the launch dies before its end (one
    rank out of memory at a large size once lost the 22 sizes before it). Rewritten at most once per EVERY_S:
    a rewrite after each of a run's ~70 quick cases added 7 % to it; at most a second of measuring is lost,
    and the first case is written at once, before any rank starts the second (a rank that dies there, the
    launcher's sign that the ranks came alive, always finds the first kept)."""

    EVERY_S = 1.0

    def __init__(self, plan: dict[str, Any], session) -> None:
        import time

        self.plan, self.session, self.cells, self.clock = plan, session, [], time.monotonic
        self.cases = 0
        self.path = model_tables.collectives_partial(Path(plan["run_dir"]), session.world_size)
        self.written_at = self.clock()

    def __call__(self, cell: dict[str, Any]) -> None:
        import torch.distributed as dist

        gathered: list[Any] = [None] * self.session.world_size if self.session.is_main else None
        dist.gather_object(cell, gathered, dst=0)
        self.cases += 1
        if self.session.is_main:
            self.cells.append(gathered)
            if self.cases == 1 or self.clock() - self.written_at >= self.EVERY_S:
                self.written_at = self.clock()
                store.write_parquet(self.path, self.rows(), model_tables.COLLECTIVE_SCHEMA)
        if self.cases == 1:
            dist.barrier()  # the first case is on disk before any rank starts the second

    def rows(self) -> list[dict[str, Any]]:
        """On rank 0: every case gathered so far, combined (`combine`); at the end, the world size's part."""
        per_rank = [list(cells) for cells in zip(*self.cells, strict=True)]
        return combine(self.plan, per_rank, world_size=self.session.world_size) if per_rank else []


def combine(plan: dict[str, Any], per_rank: list[list[dict[str, Any]]], *, world_size: int) -> list[dict[str, Any]]:
    """One row per op and size: per batch the slowest rank's mean time per iteration (nccl-tests
    reports the slowest rank's), its median over batches, the bandwidths."""
    import numpy as np

    rows = []
    for cells in zip(*per_rank, strict=True):
        first = cells[0]
        slowest = np.max([c["times_s"] for c in cells], axis=0)
        median = float(np.median(slowest))
        algbw = first["bytes"] / median / 1e9
        rows.append(
            {
                **plan["context"],
                "op": first["op"],
                "world_size": world_size,
                "bytes": first["bytes"],
                "dtype": "float32",
                "iters": plan["iters"],
                "batches": len(slowest),
                "warmup": plan["warmup"],
                "time_us": median * 1e6,
                "time_us_p10": float(np.percentile(slowest, 10)) * 1e6,
                "time_us_p90": float(np.percentile(slowest, 90)) * 1e6,
                "algbw_gbps": algbw,
                "busbw_gbps": algbw * bus_factor(first["op"], world_size),
                "correct": all(c["correct"] for c in cells),
            }
        )
    return rows


def run_measurements(plan: dict[str, Any], session, watch: CaseWatch | None = None) -> None:
    import torch.distributed as dist

    watch = watch or CaseWatch(Path(plan["run_dir"]), session)
    kept = KeptSoFar(plan, session)  # rank 0 gathers each case's timings as it finishes
    measure_rank(plan, session, watch, on_case=kept)
    contention = measure_contention(session, watch) if plan.get("contention", True) else None
    gathered: list[Any] = [None] * session.world_size if session.is_main else None
    dist.gather_object(contention, gathered, dst=0)
    if not session.is_main:
        return
    run, world = Path(plan["run_dir"]), session.world_size
    if contention is not None:  # first: the collectives part is the last word of a launch
        row = contention_row(plan, gathered, world_size=world)
        store.write_parquet(model_tables.contention_part(run, world), [row], model_tables.CONTENTION_SCHEMA)
    store.write_parquet(model_tables.collectives_part(run, world), kept.rows(), model_tables.COLLECTIVE_SCHEMA)
    kept.path.unlink(missing_ok=True)  # the whole part is written


# No gloo or NCCL timeout should fire before the launcher's own, which names the rank the
# others wait for; this is the last resort if the launcher itself is gone.
COLLECTIVE_TIMEOUT_FACTOR = 2


def main(argv: list[str] | None = None) -> int:
    """Run the plan; a rank that fails leaves at once (`dist.leave_on_failure`)."""
    return leave_on_failure(lambda: _run_recorded(argv))


def _run_recorded(argv: list[str] | None) -> int:
    from torch.distributed.elastic.multiprocessing.errors import record

    # An exception that ends this rank lands, with its traceback, in torchrun's error file.
    return record(_run)(argv)


def _run(argv: list[str] | None) -> int:
    import torch

    from harness.handoff import faults
    from harness.handoff.liveness import Responder
    from harness.rank.dist import distributed_session

    parser = argparse.ArgumentParser(prog="harness.rank.collectives", description=__doc__.splitlines()[0])
    parser.add_argument("plan", type=Path, help="JSON plan written by `harness.launch.collectives`")
    plan = json.loads(parser.parse_args(argv).plan.read_text())
    context = plan["context"]
    if context["device"] == "cpu":
        torch.set_num_threads(context["threads_per_rank"])
    timeout_s = COLLECTIVE_TIMEOUT_FACTOR * plan["timeout_s"]
    with distributed_session(device_kind=context["device"], timeout_s=timeout_s, backend=context["backend"]) as session:
        run = Path(plan["run_dir"])
        responder = Responder(run, session.rank).start()
        run_measurements(plan, session, CaseWatch(run, session, responder, faults.faults_from_environment()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

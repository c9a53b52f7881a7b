"""`ddpbench collectives`: nccl-tests-style microbenchmarks of the collectives DDP is made of.

For each world size of the ladder (2, 4, … up to --gpus: one rank has nothing to communicate)
one torchrun launch runs this module in every rank:

    torchrun --standalone --nproc-per-node N -m harness.rank.collectives PLAN.json

Per operation and doubling message size: warm-up, timed iterations (each ended by a device
sync, the slowest rank's time counts), a correctness check of the result, then algorithm
bandwidth (bytes / time) and bus bandwidth (algbw × the factor nccl-tests uses, so that one
number compares across world sizes). Rank 0 writes `results/<run_id>/collectives/w<N>.parquet`.

It also measures how communication and computation slow each other down when they overlap
(on the CPU gloo's threads compete with the training thread for the same cores), which the
step-time model of `harness.model.predict` uses.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.plan.config import BACKENDS, DEVICES, ConfigError, rank_ladder, validate_run_id
from harness.results import store

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")
UNITS = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3, "KIB": 1024, "MIB": 1024**2, "GIB": 1024**3}
ELEMENT_BYTES = 4  # float32 messages
# Defaults per device: the CPU (gloo over loopback, cores shared with the ranks) gets a smaller
# largest message and fewer iterations, so `ddpbench collectives --gpus 2` takes seconds.
DEFAULT_SIZES = {"cpu": "1KB:32MB", "cuda": "1KB:256MB"}
DEFAULT_ITERS = {"cpu": 10, "cuda": 20}
DEFAULT_WARMUP = {"cpu": 2, "cuda": 5}


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


def parse_size(text: str, *, flag: str = "--sizes") -> int:
    """'1KB', '256MB', '4096' → bytes (KB, MB, GB are powers of 1024, as in nccl-tests)."""
    match = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", text)
    unit = match.group(2).upper() if match else ""
    if not match or unit not in {"", *UNITS}:
        raise ConfigError(f"{flag} {text!r} is not a size; give e.g. 1KB, 64MB or 1GB (units: B, KB, MB, GB)")
    return int(match.group(1)) * UNITS.get(unit, 1)


def parse_size_range(text: str) -> tuple[int, int]:
    low, sep, high = text.partition(":")
    if not sep:
        raise ConfigError(f"--sizes {text!r} is not a range; give MIN:MAX, e.g. 1KB:64MB")
    low_bytes, high_bytes = parse_size(low), parse_size(high)
    if low_bytes < ELEMENT_BYTES or high_bytes < low_bytes:
        raise ConfigError(f"--sizes {text!r} is not valid; give {ELEMENT_BYTES} B ≤ MIN ≤ MAX, e.g. 1KB:64MB")
    return low_bytes, high_bytes


def message_sizes(low: int, high: int) -> list[int]:
    """Doubling from `low` while ≤ `high` (nccl-tests' -f 2)."""
    sizes = [low]
    while sizes[-1] * 2 <= high:
        sizes.append(sizes[-1] * 2)
    return sizes


def parse_ops(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
    bad = [name for name in names if name not in OPS]
    if bad or not names:
        raise ConfigError(f"--ops {bad[0] if bad else text!r} is not a collective; choose from {', '.join(OPS)}")
    return names


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class CollectivesConfig:
    """Everything `ddpbench collectives` was asked to do."""

    gpus: int
    """Ranks on this node (one node); world sizes run as the ladder 2, 4, … up to it."""
    ops: tuple[str, ...] = OPS
    """Collectives to measure."""
    sizes: tuple[int, int]
    """Smallest and largest message in bytes; sizes double in between."""
    iters: int
    """Timed iterations per size."""
    warmup: int
    """Untimed iterations before them."""
    device: str
    """cpu or cuda (resolved)."""
    backend: str
    """gloo or nccl (resolved)."""
    results: Path = Path("results")
    run_id: str = ""
    timeout_s: float = 600.0
    command: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.gpus < 2:
            raise ConfigError(f"--gpus {self.gpus} is not valid for collectives; give 2 or more ranks")
        if self.iters < 1:
            raise ConfigError(f"--iters {self.iters} is not valid; give a whole number ≥ 1")
        if self.warmup < 0:
            raise ConfigError(f"--warmup {self.warmup} is not valid; give a whole number ≥ 0")
        if self.device not in DEVICES[1:] or self.backend not in BACKENDS[1:]:
            raise ConfigError(f"device {self.device!r} / backend {self.backend!r} must be resolved before this point")
        validate_run_id(self.run_id)

    @property
    def world_sizes(self) -> list[int]:
        return [n for n in rank_ladder(self.gpus) if n > 1]


# ---------------------------------------------------------------- in each rank


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


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
        _sync(device)
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


def time_op(run_once: Callable[[], None], *, iters: int, warmup: int, device) -> list[float]:
    """Seconds per iteration on this rank, each iteration ended by a device sync."""
    import torch.distributed as dist

    for _ in range(warmup):
        run_once()
    _sync(device)
    dist.barrier()
    times = []
    for _ in range(iters):
        began = time.perf_counter()
        run_once()
        _sync(device)
        times.append(time.perf_counter() - began)
    return times


def measure_rank(plan: dict[str, Any], session) -> list[dict[str, Any]]:
    """This rank's timings and checks for every op and size (rank 0 combines them)."""
    out = []
    for op in plan["ops"]:
        for size in message_sizes(*plan["sizes"]):
            case = make_case(op, size, world=session.world_size, rank=session.rank, device=session.device)
            times = time_op(case.run, iters=plan["iters"], warmup=plan["warmup"], device=session.device)
            out.append({"op": op, "bytes": case.bytes, "times_s": times, "correct": case.check(session.device)})
    return out


def combine(plan: dict[str, Any], per_rank: list[list[dict[str, Any]]], *, world_size: int) -> list[dict[str, Any]]:
    """One row per op and size: the slowest rank's time per iteration, its median, the bandwidths."""
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


CONTENTION_BYTES = 8 * 1024**2
CONTENTION_REPEATS = 5
BURST_PIECES = 60


def _compute_piece(device) -> Callable[[], None]:
    """A slice of training-like compute (a matrix product, a pointwise op), about a millisecond on a core."""
    import torch

    a = torch.randn(192, 192, device=device)

    def piece() -> None:
        torch.tanh(a @ a)

    return piece


def measure_contention(session) -> dict[str, float]:
    """How much an all-reduce in flight slows compute on the same rank, and the other way round.

    Each is timed alone, then together: the all-reduce launched asynchronously and compute run
    while it is in flight (as DDP overlaps them), the compute polling the all-reduce between
    pieces to see when it finished. The compute burst is sized to outlast the all-reduce, so
    both overlapped times are measured while the other one runs. Medians over a few repeats.
    """
    import torch
    import torch.distributed as dist

    buf = torch.ones(CONTENTION_BYTES // ELEMENT_BYTES, device=session.device)
    piece = _compute_piece(session.device)

    def comm() -> None:
        dist.all_reduce(buf)
        _sync(session.device)

    def burst(pieces: int, work=None) -> tuple[float, float | None]:
        began, finished_comm = time.perf_counter(), None
        for _ in range(pieces):
            piece()
            if work is not None and finished_comm is None and work.is_completed():
                finished_comm = time.perf_counter() - began
        _sync(session.device)
        return time.perf_counter() - began, finished_comm

    piece(), comm()  # warm-up
    comm_alone = statistics.median(_timed(comm, barrier=True) for _ in range(CONTENTION_REPEATS))
    piece_s = statistics.median(_timed(piece) for _ in range(20))
    pieces = max(BURST_PIECES, int(3 * comm_alone / piece_s))  # comfortably longer than the all-reduce
    compute_alone, overlapped_compute, overlapped_comm = [], [], []
    for _ in range(CONTENTION_REPEATS):
        compute_alone.append(burst(pieces)[0])
        dist.barrier()
        work = dist.all_reduce(buf, async_op=True)
        compute_s, comm_s = burst(pieces, work)
        work.wait()
        overlapped_compute.append(compute_s)
        overlapped_comm.append(comm_s if comm_s is not None else compute_s)  # finished only after: a lower bound
    return {
        "bytes": CONTENTION_BYTES,
        "compute_alone_ms": statistics.median(compute_alone) * 1e3,
        "compute_overlapped_ms": statistics.median(overlapped_compute) * 1e3,
        "comm_alone_ms": comm_alone * 1e3,
        "comm_overlapped_ms": statistics.median(overlapped_comm) * 1e3,
    }


def _timed(function: Callable[[], None], *, barrier: bool = False) -> float:
    if barrier:
        import torch.distributed as dist

        dist.barrier()
    began = time.perf_counter()
    function()
    return time.perf_counter() - began


def contention_row(plan: dict[str, Any], per_rank: list[dict[str, float]], *, world_size: int) -> dict[str, Any]:
    """The ranks' medians combined (mean over ranks); slowdowns as ratios to the solo times.

    The compute burst outlasts the all-reduce, so the all-reduce's overlapped time is its own;
    the compute's slowdown is spread over the whole burst, so it is scaled to the part of the
    burst the all-reduce overlapped (what slows compute is the communication in flight).
    """
    mean = {key: statistics.fmean(r[key] for r in per_rank) for key in per_rank[0] if key != "bytes"}
    context = {k: v for k, v in plan["context"].items() if k in store.CONTENTION_SCHEMA.names}
    extra = mean["compute_overlapped_ms"] - mean["compute_alone_ms"]
    compute_during_comm = max(mean["comm_overlapped_ms"] - extra, 1e-9)  # solo compute done while comm ran
    return {
        **context,
        "world_size": world_size,
        "bytes": per_rank[0]["bytes"],
        **mean,
        # Below 1.0 is noise (overlap cannot speed anything up).
        "compute_slowdown": max(1.0, mean["comm_overlapped_ms"] / compute_during_comm),
        "comm_slowdown": max(1.0, mean["comm_overlapped_ms"] / mean["comm_alone_ms"]),
    }


def run_plan(plan: dict[str, Any], session) -> None:
    import torch.distributed as dist

    results = measure_rank(plan, session)
    contention = measure_contention(session) if plan.get("contention", True) else None
    gathered: list[Any] = [None] * session.world_size if session.is_main else None
    dist.gather_object((results, contention), gathered, dst=0)
    if not session.is_main:
        return
    folder = Path(plan["out_dir"])
    rows = combine(plan, [g[0] for g in gathered], world_size=session.world_size)
    store.write_parquet(folder / f"w{session.world_size}.parquet", rows, store.COLLECTIVE_SCHEMA)
    if contention is not None:
        row = contention_row(plan, [g[1] for g in gathered], world_size=session.world_size)
        store.write_parquet(folder / f"contention-w{session.world_size}.parquet", [row], store.CONTENTION_SCHEMA)


def main(argv: list[str] | None = None) -> int:
    import torch

    from harness.rank.dist import distributed_session

    parser = argparse.ArgumentParser(prog="harness.rank.collectives", description=__doc__.splitlines()[0])
    parser.add_argument("plan", type=Path, help="JSON plan written by `ddpbench collectives`")
    args = parser.parse_args(argv)
    plan = json.loads(args.plan.read_text())
    if plan["context"]["device"] == "cpu":
        torch.set_num_threads(plan["context"]["threads_per_rank"])
    with distributed_session(
        device_kind=plan["context"]["device"], timeout_s=plan["timeout_s"], backend=plan["context"]["backend"]
    ) as session:
        run_plan(plan, session)
    return 0


# ---------------------------------------------------------------- the launcher side


class LaunchFailed(RuntimeError):
    """A torchrun launch of the measurement exited non-zero (its log says why)."""


def launch(config: CollectivesConfig, *, run_id: str, environment: dict[str, Any], say=print) -> Path:
    """Write run.json, then one torchrun launch per world size; return the collectives folder."""
    from harness.launch.launcher import child_environment, threads_per_rank

    folder = store.run_dir(config.results, run_id) / "collectives"
    started_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    threads = threads_per_rank(
        device=config.device, max_local_ranks=config.gpus, cpu_count=len(os.sched_getaffinity(0))
    )
    context = {
        "run_id": run_id,
        "device": config.device,
        "backend": config.backend,
        "threads_per_rank": threads,
        "hostname": environment.get("hostname"),
        "started_at": started_at,
    }
    store.write_json(
        folder / "run.json",
        {
            "kind": "collectives",
            "schema_version": store.SCHEMA_VERSION,
            **context,
            "config": {k: v for k, v in dataclasses.asdict(config).items() if k != "command"},
            "command": list(config.command),
            "environment": environment,
        },
    )
    for world in config.world_sizes:
        plan = {
            "ops": list(config.ops),
            "sizes": list(config.sizes),
            "iters": config.iters,
            "warmup": config.warmup,
            "timeout_s": config.timeout_s,
            "out_dir": str(folder.resolve()),
            "context": context,
        }
        plan_path = folder / "plan" / f"world-{world}.json"
        store.write_json(plan_path, plan)
        log = folder / "logs" / f"world-{world}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        began = time.monotonic()
        code = _torchrun(plan_path, ranks=world, log=log, env=child_environment(threads))
        if code != 0:
            raise LaunchFailed(f"collectives at world size {world} exited with code {code}; see {log}")
        say(f"ddpbench: collectives at world size {world} done in {time.monotonic() - began:.0f} s")
    return folder


def _torchrun(plan_path: Path, *, ranks: int, log: Path, env: dict[str, str]) -> int:
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone",
        f"--nproc-per-node={ranks}", "--max-restarts=0", "-m", "harness.rank.collectives", str(plan_path),
    ]  # fmt: skip
    with open(log, "w") as out:
        return subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())

"""Which strategy of the ladder is fastest here? local, naive, flat, stock and bucketed, head to head.

Runs in one process group of 2 CPU ranks (gloo), the strategies' steps interleaved
(A B C D E A B C D E …) so that machine drift hits all of them alike, on `mlp` small and, when
registered, `gpt2` small. Every strategy with buckets runs at DDP's default layout (25 MiB, first
bucket 1 MiB) unless --bucket-cap-mb is given. Prints per workload the median step time of each
strategy (the slowest rank's, per step), its ratio to stock, and local / impl (what data
parallelism costs). A spec ending in `+timeline` runs that strategy with the bucket timeline
attached, as `ddpbench bench` does: `stock+timeline` next to `stock` is what timing DDP's buckets
through a communication hook costs.

    python benchmarks/strategies.py [--workloads mlp:small,gpt2:small --steps 10 --repeats 5]
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import statistics
import time
from typing import Any

import _torchrun

IMPLS = ("local", "naive", "flat", "stock", "stock+timeline", "bucketed", "bucketed+timeline")
TIMELINE = "+timeline"
SEED = 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="mlp:small,gpt2:small", help="comma-separated name:size")
    parser.add_argument(
        "--impls", default=",".join(IMPLS), help="comma-separated strategies in run order; options as name/key=value"
    )
    parser.add_argument("--steps", type=int, default=10, help="measured steps per strategy and repeat")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds over all strategies")
    parser.add_argument("--warmup", type=int, default=3, help="steps per strategy before measuring (DDP rebuilds in 2)")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument(
        "--bucket-cap-mb", type=float, default=None, help="for the strategies that have buckets (default: DDP's)"
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


@dataclasses.dataclass
class Arm:
    """One strategy, ready to train: its own model copy and optimizer."""

    name: str
    strategy: Any
    model: Any
    optimizer: Any
    timeline: Any = None
    """The bucket timeline the strategy stamps its collectives in (`+timeline` arms), recording every step."""
    steps_run: int = 0


def prepare_arms(specs: list[str], workload, *, device, bucket_cap_mb: float | None) -> list[Arm]:
    from harness.comm_timeline import CommTimeline
    from harness.measure.training import LEARNING_RATE, OPTIMIZER, build_model

    arms = []
    for spec in specs:
        strategy = create_strategy(spec.removesuffix(TIMELINE), bucket_cap_mb=bucket_cap_mb)
        timeline = CommTimeline(device) if spec.endswith(TIMELINE) else None
        if timeline is not None and not strategy.attach_timeline(timeline):
            raise SystemExit(f"{spec}: this strategy cannot record a bucket timeline")
        model = strategy.wrap(build_model(workload, seed=SEED, device=device))
        optimizer = strategy.make_optimizer(model.parameters(), OPTIMIZER, lr=LEARNING_RATE)
        arms.append(Arm(spec, strategy, model, optimizer, timeline))
    return arms


def create_strategy(spec: str, *, bucket_cap_mb: float | None):
    """`name` or `name/key=value/…` (e.g. bucketed/first_bucket_mb=25), with the common bucket cap."""
    import impls

    name, *pairs = spec.split("/")
    texts = dict(pair.split("=", 1) for pair in pairs)
    has_cap = bucket_cap_mb is not None and "bucket_cap_mb" in impls.entry(name).options()
    options = {"bucket_cap_mb": bucket_cap_mb} if has_cap else {}
    options.update(impls.REGISTRY.parse_options(name, texts))
    return impls.create(name, **options)


def run_steps(arm: Arm, workload, batches: list[Any]) -> list[dict[str, float]]:
    """This rank's step and phase times in ms: the harness's own training step and timer."""
    from harness.measure.timing import StepTimer
    from harness.measure.training import train_step

    timer = StepTimer()
    for batch in batches:
        train_step(
            model=arm.model,
            workload=workload,
            strategy=arm.strategy,
            optimizer=arm.optimizer,
            batch=batch,
            timer=timer,
            timeline=arm.timeline,
            step=arm.steps_run,
        )
        arm.steps_run += 1
    return timer.collect()


def slowest_rank(steps: list[dict[str, float]]) -> list[dict[str, float]]:
    """A data-parallel step lasts as long as its slowest rank; phases are kept from that same rank's view (max)."""
    import torch
    import torch.distributed as dist

    columns = sorted(steps[0])
    per_step = torch.tensor([[step[c] for c in columns] for step in steps], dtype=torch.float64)
    dist.all_reduce(per_step, op=dist.ReduceOp.MAX)
    return [dict(zip(columns, row, strict=True)) for row in per_step.tolist()]


def measure_interleaved(arms: list[Arm], workload, batches: list[Any], *, repeats: int, warmup: int, session):
    for arm in arms:
        run_steps(arm, workload, batches[:warmup])
    samples: dict[str, list[dict[str, float]]] = {arm.name: [] for arm in arms}
    for _ in range(repeats):
        for arm in arms:
            session.barrier()  # every rank starts each arm's window together
            samples[arm.name] += slowest_rank(run_steps(arm, workload, batches))
    return samples


def benchmark_workload(args, session, name: str, size: str) -> None:
    import workloads
    from harness.measure.training import make_batch

    if name not in workloads.names():
        say(session, f"\n{name}/{size}: skipped, the workload is not registered")
        return
    workload = workloads.create(name, size=size)
    reason = workload.unavailable_reason(device="cpu")
    if reason:
        say(session, f"\n{name}/{size}: skipped, {reason}")
        return
    batch_size = workload.default_batch_size()
    batches = [
        make_batch(workload, batch_size=batch_size, seed=SEED, rank=session.rank, step=s, device=session.device)
        for s in range(args.steps)
    ]
    arms = prepare_arms(args.impls.split(","), workload, device=session.device, bucket_cap_mb=args.bucket_cap_mb)
    began = time.perf_counter()
    samples = measure_interleaved(arms, workload, batches, repeats=args.repeats, warmup=args.warmup, session=session)
    if session.is_main:
        report(args, f"{name}/{size}", batch_size, samples, arms, time.perf_counter() - began)
    del arms
    gc.collect()


def say(session, text: str) -> None:
    if session.is_main:
        print(text, flush=True)


def report(args, label: str, batch_size: int, samples, arms: list[Arm], wall_s: float) -> None:
    medians = {name: median(steps, "step_ms") for name, steps in samples.items()}
    print(
        f"\n{label}: {args.ranks} CPU ranks (gloo), batch {batch_size} per rank, bucket cap "
        f"{args.bucket_cap_mb or 'DDP default'} MiB, "
        f"{args.repeats} interleaved repeats × {args.steps} steps ({wall_s:.0f} s)"
    )
    phases = ("forward_ms", "backward_ms", "sync_ms", "optimizer_ms")
    width = max(10, *(len(name) for name in samples))
    print(
        f"{'impl':<{width}} {'median ms':>10} {'p10 ms':>9} {'p90 ms':>9} {'÷ stock':>8} {'local ÷ impl':>13}"
        f"  {'fwd':>6} {'bwd':>6} {'sync':>6} {'opt':>6}  buckets (MiB)"
    )
    for name, steps in samples.items():
        deciles = statistics.quantiles([step["step_ms"] for step in steps], n=10)
        print(
            f"{name:<{width}} {medians[name]:>10.2f} {deciles[0]:>9.2f} {deciles[-1]:>9.2f} "
            f"{ratio(medians, name, 'stock'):>8} {ratio(medians, 'local', name):>13}  "
            + " ".join(f"{median(steps, phase):>6.1f}" for phase in phases)
            + f"  {buckets(arms, name)}"
        )
    for name in ("bucketed", "naive", "flat", "bucketed+timeline"):
        print(f"{name}/stock = {ratio(medians, name, 'stock')}", end="   ")
    print(f"\nhook cost: stock+timeline/stock = {ratio(medians, 'stock+timeline', 'stock')}, "
          f"bucketed+timeline/bucketed = {ratio(medians, 'bucketed+timeline', 'bucketed')}", flush=True)  # fmt: skip


def median(steps: list[dict[str, float]], column: str) -> float:
    return statistics.median(step[column] for step in steps)


def ratio(medians: dict[str, float], top: str, bottom: str) -> str:
    return f"{medians[top] / medians[bottom]:.3f}" if top in medians and bottom in medians else "-"


def buckets(arms: list[Arm], name: str) -> str:
    layout = next((arm.strategy.layout() for arm in arms if arm.name == name), None)
    sizes = (layout or {}).get("bucket_sizes_mb")
    return f"{len(sizes)}: " + " ".join(f"{s:.2f}" for s in sizes) if sizes else ""


def run_worker(args) -> None:
    import torch

    from harness.rank.dist import distributed_session

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    with distributed_session(device_kind="cpu", timeout_s=600) as session:
        for spec in args.workloads.split(","):
            name, _, size = spec.partition(":")
            benchmark_workload(args, session, name, size or "small")


if __name__ == "__main__":
    _torchrun.main(__file__, parse_args(), run_worker)

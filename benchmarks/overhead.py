"""What does the harness cost the program it measures?

Runs, in one process group of 2 CPU ranks (gloo) or, with `--device cuda`, of `--ranks` GPUs
(NCCL), interleaved so that machine drift hits all arms alike:

- bare:      a plain DDP training loop written without the harness, timed per step;
- harness:   the worker's own measurement loop (per-phase timer, seeded batches) with the
             memory sampler running, as `ddpbench bench` runs it;
- no-sampler: the same without the memory sampler.

and prints the median step time of each arm and the ratios harness/bare (target ≤ 1.01)
and harness/no-sampler (the sampler's cost, target ≤ 1.01); `--json PATH` writes them too.
On GPUs the bare loop synchronises at each step's end (what a user's timing must do); the
harness times with CUDA events, as `bench` does.

    python benchmarks/overhead.py [--workload mlp --size small --steps 30 --repeats 5]
    python benchmarks/overhead.py --device cuda --ranks 1 --workload gpt2 --size full --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import _torchrun

ARMS = ("bare", "harness", "no-sampler")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="mlp")
    parser.add_argument("--size", default="small")
    parser.add_argument("--steps", type=int, default=30, help="measured steps per arm and repeat")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--dtype", default="fp32", choices=("fp32", "bf16"), help="autocast dtype (bf16: CUDA)")
    parser.add_argument("--json", help="also write the medians and ratios to this file")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def bare_loop(model, workload, batches, *, precision) -> list[float]:
    """What a user writes without any harness: DDP, forward, backward, step; a clock per step
    (synchronised on a GPU, or it would time the launches)."""
    import torch

    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    cuda = next(model.parameters()).is_cuda
    times = []
    for batch in batches:
        if cuda:
            torch.cuda.synchronize()
        began = time.perf_counter()
        with precision():
            loss = workload.loss(model, batch)
        loss.backward()
        optimizer.step()
        if cuda:
            torch.cuda.synchronize()
        times.append((time.perf_counter() - began) * 1e3)
        optimizer.zero_grad(set_to_none=True)
    return times


def harness_loop(cfg, session, model, workload, *, sampler_period_s: float) -> list[float]:
    """The worker's measurement loop, exactly as `ddpbench bench` runs it."""
    import impls
    from harness.measure.memory import MemorySampler
    from harness.measure.training import LEARNING_RATE, OPTIMIZER
    from harness.rank import configuration

    strategy = impls.create("stock")
    strategy._ddp = model  # already wrapped once: the same DDP object serves every arm
    optimizer = strategy.make_optimizer(model.parameters(), OPTIMIZER, lr=LEARNING_RATE)
    sampler = MemorySampler(session.device, period_s=sampler_period_s).start()
    trained = configuration.train(cfg, session, model=model, workload=workload, strategy=strategy, optimizer=optimizer,
                                    sampler=sampler)  # fmt: skip
    sampler.stop()
    return [t["step_ms"] for t in trained.steps[cfg.warmup :]]


def run_worker(args) -> None:
    import dataclasses

    import torch
    from torch.nn.parallel import DistributedDataParallel

    import workloads
    from harness.config.bench import BenchConfig
    from harness.config.grid import expand
    from harness.measure.training import build_model, forward_precision, make_batch
    from harness.rank.dist import distributed_session

    with distributed_session(device_kind=args.device, timeout_s=600) as session:
        workload = workloads.create(args.workload, size=args.size)
        config = BenchConfig(gpus=args.ranks, impls=("stock",), workloads=(args.workload,), size=args.size,
                             steps=args.steps, warmup=2, baseline=False, parity=False, dtype=args.dtype,
                             device=args.device)  # fmt: skip
        expanded = expand(config, device=args.device, bf16_supported=args.dtype == "bf16")
        cfg = dataclasses.replace(expanded[-1], world_size=session.world_size)
        precision = lambda: forward_precision(cfg.dtype, session.device)  # noqa: E731 (a fresh context per step)
        model = DistributedDataParallel(build_model(workload, seed=0, device=session.device))
        batches = [
            make_batch(workload, batch_size=cfg.batch_size, seed=0, rank=session.rank, step=s, device=session.device)
            for s in range(args.steps)
        ]
        bare_loop(model, workload, batches[:2], precision=precision)  # warm-up, as the harness does
        samples: dict[str, list[float]] = {arm: [] for arm in ARMS}
        for _ in range(args.repeats):
            for arm in ARMS:
                session.barrier()
                if arm == "bare":
                    times = bare_loop(model, workload, batches, precision=precision)
                else:
                    period = 0.02 if arm == "harness" else 0.0
                    times = harness_loop(cfg, session, model, workload, sampler_period_s=period)
                # the job's step time: the slowest rank, per step
                slowest = torch.tensor(times, dtype=torch.float64, device=session.device)
                torch.distributed.all_reduce(slowest, op=torch.distributed.ReduceOp.MAX)
                samples[arm] += slowest.tolist()
        if session.is_main:
            report(args, samples)


def report(args, samples: dict[str, list[float]]) -> None:
    medians = {arm: statistics.median(values) for arm, values in samples.items()}
    where = (
        f"{args.ranks} CPU ranks (gloo)" if args.device == "cpu" else f"{args.ranks} GPU rank(s) (NCCL, {args.dtype})"
    )
    print(f"\n{args.workload}/{args.size}, stock DDP, {where}, "
          f"{args.repeats} interleaved repeats × {args.steps} steps per arm")  # fmt: skip
    print(f"{'arm':<12} {'median step ms':>15} {'steps':>6}")
    for arm in ARMS:
        print(f"{arm:<12} {medians[arm]:>15.3f} {len(samples[arm]):>6}")
    print(f"harness / bare        = {medians['harness'] / medians['bare']:.4f}   (target ≤ 1.01)")
    print(f"harness / no-sampler  = {medians['harness'] / medians['no-sampler']:.4f}   (the memory sampler's cost)")
    if args.json:
        ratios = {"harness_over_bare": medians["harness"] / medians["bare"],
                  "harness_over_no_sampler": medians["harness"] / medians["no-sampler"]}  # fmt: skip
        setup = {"workload": args.workload, "size": args.size, "device": args.device, "dtype": args.dtype,
                 "ranks": args.ranks, "repeats": args.repeats, "steps": args.steps}  # fmt: skip
        with open(args.json, "w") as out:
            json.dump({**setup, "median_step_ms": medians, **ratios}, out, indent=2)


if __name__ == "__main__":
    _torchrun.main(__file__, parse_args(), run_worker)

"""How heavy is each workload? Median step time on the CPU, parameters and FLOPs, as a table.

Used to size `small` so that a CPU benchmark step takes roughly 50–500 ms on one core:

    .venv/bin/python benchmarks/workload_sizes.py                  # every workload, small, 1 thread
    .venv/bin/python benchmarks/workload_sizes.py --size tiny --workloads gpt2,bert

A step is forward + backward + SGD step at the workload's default batch size, as in a run
without communication (the `local` strategy); 2 warm-up steps, then the median of 5.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import workloads
from harness.measure.modelinfo import describe
from harness.measure.training import LEARNING_RATE, OPTIMIZER, build_model, make_batch

CPU = torch.device("cpu")
WARMUP_STEPS = 2
MEASURED_STEPS = 5


def step_times_ms(workload, *, batch_size: int) -> list[float]:
    model = build_model(workload, seed=0, device=CPU)
    optimizer = OPTIMIZER(model.parameters(), lr=LEARNING_RATE)
    times = []
    for step in range(WARMUP_STEPS + MEASURED_STEPS):
        batch = make_batch(workload, batch_size=batch_size, seed=0, rank=0, step=step, device=CPU)
        began = time.perf_counter()
        workload.loss(model, batch).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        times.append((time.perf_counter() - began) * 1000)
    return times[WARMUP_STEPS:]


def row(name: str, size: str) -> dict[str, object]:
    workload = workloads.create(name, size=size)
    batch_size = workload.default_batch_size()
    info = describe(workload, batch_size=batch_size, device=CPU)
    step_ms = statistics.median(step_times_ms(workload, batch_size=batch_size))
    achieved = info["flops_per_sample"] * batch_size / (step_ms / 1000)
    return {
        "workload": name,
        "params": f"{info['param_count'] / 1e6:.2f}M",
        "grad_MB": f"{info['grad_bytes'] / 2**20:.1f}",
        "tensors": info["param_tensors"],
        "batch": batch_size,
        "tokens/sample": workload.tokens_per_sample() or "-",
        "GFLOP/sample": f"{info['flops_per_sample'] / 1e9:.3f}",
        "step_ms": f"{step_ms:.0f}",
        "GFLOP/s": f"{achieved / 1e9:.1f}",
    }


def print_table(rows: list[dict[str, object]]) -> None:
    columns = list(rows[0])
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in columns}
    print(" | ".join(c.ljust(widths[c]) for c in columns))
    print("-|-".join("-" * widths[c] for c in columns))
    for r in rows:
        print(" | ".join(str(r[c]).ljust(widths[c]) for c in columns))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="small", choices=("tiny", "small", "full"))
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (one core by default)")
    parser.add_argument("--workloads", default=",".join(workloads.names()), help="comma-separated names")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"size={args.size} threads={args.threads} torch={torch.__version__}")
    print_table([row(name, args.size) for name in args.workloads.split(",")])


if __name__ == "__main__":
    main()

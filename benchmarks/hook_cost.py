"""What timing DDP's buckets costs the step: stock and zero with and without `--bucket-timeline`, run after
run at one rank (hooked, plain, then plain, hooked, …: the order alternates so that a drifting machine
favours neither), where the collectives have nothing to move and the hook's own work is the difference.

stock and zero are timed only when asked (`--bucket-timeline`), because the hook costs their step on the CPU
(stock 1–6 % in benchmarks/strategies.py over two runs; 6–12 % on gpt2/small in this script's pairs, 2026-12-04); so the
answer's "why" has no cost split for DDP itself by default. On a GPU the hook records two
CUDA events a bucket; if that is within the launches' noise there, timing could be on by default on GPUs.

    PYTHONPATH=. python3 benchmarks/hook_cost.py OUT_DIR                 # on a CUDA GPU (gpu_check runs it)
    .venv/bin/python benchmarks/hook_cost.py OUT_DIR --device cpu        # the same on this CPU
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

IMPLS = ("stock", "zero")
PAIRS = 2
"""Launches a side: two pairs fit the GPU check's minutes; the ratio of each pair is kept, not only their mean."""


def bench(out: Path, run_id: str, device: str, *, hooked: bool, quick: bool) -> int:
    # gpt2/full in bf16 as the GPU check's other lines; on the CPU gpt2/small (full takes minutes a launch there)
    workload, size, dtype = "gpt2", "full", "bf16"
    if device == "cpu":
        workload, size, dtype = ("mlp", "tiny", "fp32") if quick else ("gpt2", "small", "fp32")
    command = [sys.executable, "-m", "harness", "bench", "--device", device, "--gpus", "1",
               "--backend", "nccl" if device == "cuda" else "gloo", "--workloads", workload, "--size", size,
               "--dtype", dtype, "--impls", ",".join(IMPLS), "--steps", "20", "--repeats", "1", "--no-parity",
               "--no-baseline", "--results", str(out / "results"), "--run-id", run_id,
               *(["--bucket-timeline"] if hooked else [])]  # fmt: skip
    print("$", " ".join(command), flush=True)
    return subprocess.call(command)


def measure(out: Path, device: str, *, quick: bool = False, pairs: int = PAIRS) -> dict[str, list[float]]:
    """Per strategy, each pair's hooked / plain median step."""
    from harness.results import store

    ratios: dict[str, list[float]] = {impl: [] for impl in IMPLS}
    for pair in range(pairs):
        order = (True, False) if pair % 2 == 0 else (False, True)
        steps = {}
        for hooked in order:
            run_id = f"{'hooked' if hooked else 'plain'}-{pair}"
            if bench(out, run_id, device, hooked=hooked, quick=quick) != 0:
                continue
            rows = store.read_configs(out / "results" / run_id).query("status == 'ok'")
            steps[hooked] = dict(zip(rows["impl"], rows["step_ms_median"], strict=True))
        for impl in IMPLS:
            if impl in steps.get(True, {}) and impl in steps.get(False, {}):
                ratios[impl].append(steps[True][impl] / steps[False][impl])
    return ratios


def check(out: Path, device: str, *, quick: bool = False) -> tuple[str, dict[str, float]]:
    """('stock 1.004× (1.002, 1.006), zero …', the geometric mean of each strategy's pairs)."""
    ratios = measure(out, device, quick=quick)
    centre = {impl: math.exp(sum(map(math.log, r)) / len(r)) for impl, r in ratios.items() if r}
    said = [f"{impl} {centre[impl]:.3f}× ({', '.join(f'{r:.3f}' for r in ratios[impl])})" for impl in centre]
    return "hooked / plain median step: " + ("; ".join(said) or "no pair ran"), centre


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python benchmarks/hook_cost.py")
    parser.add_argument("out", type=Path)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    parser.add_argument("--quick", action="store_true", help="mlp/tiny on the CPU: the code path, not a figure")
    args = parser.parse_args(argv)  # bad usage: one line, exit 2
    print(check(args.out, args.device, quick=args.quick)[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""GPU parity: every strategy at world size 1 with NCCL trains like one process, in fp32 and bf16.

    PYTHONPATH=. python3 benchmarks/gpu_parity.py OUT_DIR [--budget SECONDS] [--steps N]

Runs `ddpbench bench --device cuda --gpus 1` over every strategy for each (workload, size, dtype)
below, in that order (the cases that failed before first), one launch each, and stops starting new
launches once `--budget` seconds have passed (what did not run is listed as not run). Needs no
venv and no network: the machine's own torch, from a plain checkout. Prints one table; exits 1
if any configuration failed or failed parity.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

CASES = [
    ("resnet50", "small", "fp32"),  # failed parity at world size 1 before (cuDNN's free algorithms)
    ("resnet50", "small", "bf16"),
    ("gpt2", "full", "bf16"),  # failed by fp32's tolerance before
    ("resnet50", "full", "bf16"),
    ("gpt2", "full", "fp32"),
    ("resnet50", "full", "fp32"),
]


def run_case(results: Path, workload: str, size: str, dtype: str, *, steps: int, timeout_s: float) -> int:
    import impls

    command = [sys.executable, "-m", "harness", "bench", "--device", "cuda", "--gpus", "1",
               "--impls", ",".join(impls.names()), "--workloads", workload, "--size", size, "--dtype", dtype,
               "--steps", str(steps), "--no-baseline", "--results", str(results),
               "--run-id", f"{workload}-{size}-{dtype}"]  # fmt: skip
    print("$", " ".join(command), flush=True)
    try:
        return subprocess.call(command, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        print(f"gpu_parity: {workload}/{size} {dtype} stopped after {timeout_s:.0f} s", flush=True)
        return 124


def table(results: Path) -> tuple[list[str], bool]:
    import pandas as pd

    lines, ok = [], True
    header = f"{'workload':<14} {'dtype':<5} {'strategy':<13} {'status':<8} {'step ms':>8} {'parity':<7} {'max |Δ|':>9}"
    for run in sorted(p for p in results.iterdir() if (p / "configs").is_dir()):
        configs = pd.read_parquet(run / "configs").sort_values("impl")
        for row in configs.itertuples():
            judged = row.parity_ok if not pd.isna(row.parity_ok) else None
            verdict = {True: "ok", False: "FAIL", None: "-"}[judged]
            ok = ok and row.status in ("ok", "skipped") and judged is not False
            step = f"{row.step_ms_median:8.2f}" if not pd.isna(row.step_ms_median) else f"{'':>8}"
            diff = f"{row.parity_max_abs_diff:9.2e}" if not pd.isna(row.parity_max_abs_diff) else f"{'':>9}"
            lines.append(f"{row.workload + '/' + row.size:<14} {row.dtype:<5} {row.impl:<13} {row.status:<8} "
                         f"{step} {verdict:<7} {diff}")  # fmt: skip
    return [header, *lines], ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--budget", type=float, default=300.0, help="seconds after which no new launch starts")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--cases", help="only these, e.g. gpt2/full/fp32,resnet50/full/fp32 (default: all, in order)")
    args = parser.parse_args()
    cases = [tuple(c.split("/")) for c in args.cases.split(",")] if args.cases else CASES
    results = args.out / "results"
    began, codes, not_run = time.monotonic(), [], []
    for workload, size, dtype in cases:
        left = args.budget - (time.monotonic() - began)
        if left < 20:
            not_run.append(f"{workload}/{size} {dtype}")
            continue
        codes.append(run_case(results, workload, size, dtype, steps=args.steps, timeout_s=left))
    lines, ok = table(results) if results.is_dir() else (["no results"], False)
    print("\n" + "\n".join(lines))
    if not_run:
        print(f"not run (budget of {args.budget:.0f} s spent): {', '.join(not_run)}")
    ok = ok and all(code in (0, 1) for code in codes)
    print(f"gpu_parity: {'PASS' if ok else 'FAIL'} in {time.monotonic() - began:.0f} s; exit codes {codes}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""The GPU check: on a machine with at least one CUDA GPU, verify that the numbers are real.

    python benchmarks/gpu_check.py OUT_DIR        (or: make gpu-check OUT=OUT_DIR)

1. `ddpbench bench` at world size 1 with NCCL, and 2 ranks sharing the GPU with gloo, over
   mlp and resnet50 at size small (results under OUT_DIR/results).
2. CUDA-event step times against a synchronised wall clock, on the same steps: within 5 %.
3. Per configuration: NVML peak ≥ torch reserved peak, and every NVML field non-null.
4. The run's provenance: driver, CUDA driver, NCCL versions and the GPU topology filled.

Prints a table, writes OUT_DIR/gpu_check.json, exits 1 if any check fails. Under 5 minutes.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

NVML_FIELDS = ("mem_peak_nvml_mb", "mem_nvml_struct", "gpu_util_mean_pct", "sm_clock_mean_mhz", "power_mean_w")
TIMING_TOLERANCE = 0.05


def bench(results: Path, run_id: str, *extra: str) -> int:
    command = [sys.executable, "-m", "harness", "bench", "--device", "cuda", "--impls", "stock",
               "--workloads", "mlp,resnet50", "--size", "small", "--steps", "10", "--warmup", "3",
               "--no-baseline", "--results", str(results), "--run-id", run_id, *extra]  # fmt: skip
    print("$", " ".join(command), flush=True)
    return subprocess.call(command)


def event_vs_wall_clock(steps: int = 20) -> dict:
    """The same steps timed by CudaEventTimer and by a wall clock synchronised at each step."""
    import torch

    import workloads
    from harness.rank.timing import CudaEventTimer
    from harness.rank.training import build_model, make_batch

    device = torch.device("cuda", 0)
    workload = workloads.create("mlp", size="small")
    model = build_model(workload, seed=0, device=device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    timer, wall = CudaEventTimer(device), []
    for step in range(steps + 3):
        batch = make_batch(workload, batch_size=workload.default_batch_size(), seed=0, rank=0, step=step, device=device)
        torch.cuda.synchronize(device)
        began = time.perf_counter()
        timer.start()
        workload.loss(model, batch).backward()
        timer.lap("forward")
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        timer.lap("optimizer")
        torch.cuda.synchronize(device)
        wall.append((time.perf_counter() - began) * 1e3)
    events = [row["step_ms"] for row in timer.collect()][3:]
    wall = wall[3:]
    ratio = statistics.median(events) / statistics.median(wall)
    return {"event_ms": statistics.median(events), "wall_ms": statistics.median(wall), "ratio": ratio,
            "ok": abs(ratio - 1) <= TIMING_TOLERANCE}  # fmt: skip


def check_rows(results: Path) -> list[dict]:
    import pandas as pd

    checks = []
    for run in sorted(results.iterdir()):
        configs = pd.read_parquet(run / "configs")
        for row in configs.itertuples():
            missing = [f for f in NVML_FIELDS if pd.isna(getattr(row, f))]
            nvml_ge_reserved = (
                not pd.isna(row.mem_peak_nvml_mb)
                and not pd.isna(row.mem_peak_reserved_mb)
                and row.mem_peak_nvml_mb >= row.mem_peak_reserved_mb
            )
            checks.append({
                "run": run.name, "config": row.config_id, "status": row.status, "step_ms": row.step_ms_median,
                "nvml_mb": row.mem_peak_nvml_mb, "reserved_mb": row.mem_peak_reserved_mb,
                "nvml_ge_reserved": nvml_ge_reserved, "nvml_missing": missing,
                "ok": row.status == "ok" and nvml_ge_reserved and not missing,
            })  # fmt: skip
    return checks


def check_provenance(results: Path) -> dict:
    meta = json.loads(next(results.glob("*/run.json")).read_text())
    env = meta["environment"]
    gpus = env.get("gpu_count") or 0
    filled = {key: env.get(key) for key in ("driver_version", "cuda_driver_version", "nccl_version", "gpu_name")}
    topology_ok = isinstance(env.get("topology"), list) and len(env["topology"]) == gpus * (gpus - 1) // 2
    return {**filled, "topology_pairs": len(env.get("topology") or []), "ok": all(filled.values()) and topology_ok}


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: python benchmarks/gpu_check.py OUT_DIR", file=sys.stderr)
        return 2
    import torch

    if not torch.cuda.is_available():
        print("gpu_check: error: no CUDA GPU is visible; this check needs one", file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    results = out / "results"
    began = time.monotonic()
    codes = [
        bench(results, "nccl-w1", "--gpus", "1"),
        bench(results, "gloo-shared", "--gpus", "2", "--backend", "gloo"),
    ]
    timing = event_vs_wall_clock()
    rows = check_rows(results)
    provenance = check_provenance(results)
    summary = {"bench_exit_codes": codes, "timing": timing, "rows": rows, "provenance": provenance,
               "wall_s": time.monotonic() - began}  # fmt: skip
    summary["ok"] = codes == [0, 0] and timing["ok"] and provenance["ok"] and all(r["ok"] for r in rows)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_check.json").write_text(json.dumps(summary, indent=2, default=str))
    print(f"\n{'run':<12} {'configuration':<40} {'status':<7} {'step ms':>8} {'NVML MB':>8} {'reserved':>8}  checks")
    for r in rows:
        print(f"{r['run']:<12} {r['config']:<40} {r['status']:<7} {r['step_ms'] or float('nan'):>8.2f} "
              f"{r['nvml_mb'] or float('nan'):>8.0f} {r['reserved_mb'] or float('nan'):>8.0f}  "
              f"{'ok' if r['ok'] else 'FAIL ' + str(r['nvml_missing'] or 'nvml<reserved')}")  # fmt: skip
    print(f"CUDA events {timing['event_ms']:.3f} ms vs synchronised wall clock {timing['wall_ms']:.3f} ms: "
          f"ratio {timing['ratio']:.4f} ({'ok' if timing['ok'] else 'FAIL'}, tolerance 5 %)")  # fmt: skip
    print(f"provenance: {provenance}")
    verdict = "PASS" if summary["ok"] else "FAIL"
    print(f"gpu_check: {verdict} in {summary['wall_s']:.0f} s; details in {out / 'gpu_check.json'}")
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

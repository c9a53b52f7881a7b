"""The step-time model against CPU bucket sweeps it was not tuned on: each variant's error and best cap.

    .venv/bin/python benchmarks/cpu_model.py                       # mlp, resnet18, gpt2 (small), ~4 min
    .venv/bin/python benchmarks/cpu_model.py --workloads gpt2 --caps 1,5,25 --repeats 3 --results R

One `ddpbench collectives` run of this machine (the network and its contention), then per workload
one sweep through the real command line (`bench --impls stock` with its `local` baseline, at world
sizes 1 and 2, the caps interleaved in every launch), then the model's four variants against each
sweep at world size 2: the profile as measured (raw), with the collectives run's contention, and
calibrated on the run's rows that communicate nothing (`local` at 2 ranks, DDP's own cost at one).
No variant reads a row of the sweep it predicts. A best cap agrees when the prediction's best (any
of its tied caps) is a cap the sweep's repeats call as good as the measured best
(`equivalent_caps_mb`), or the measured best itself.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pandas as pd

from harness.analysis import agreement, sweep
from harness.perfmodel import predict
from harness.results import store

VARIANTS = dict(predict.VARIANTS)


def ddpbench(*args: str) -> None:
    """One ddpbench command, as a user types it; its output goes to ours, a failure stops the benchmark."""
    subprocess.run([sys.executable, "-m", "harness", *args], check=True)


def sweep_rows(results: Path, run_id: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The model's rows against the sweep (predictions.parquet, rewritten here) and its recommendations."""
    run = results / run_id
    rows, _ = predict.update_model_tables(results, run)
    return pd.DataFrame(rows), store.read_recommendations(run)


def judged(rows: pd.DataFrame, recommendations: pd.DataFrame) -> list[dict]:
    """Per (workload, world size) and variant: MAPE and whether the best cap agrees."""
    out = []
    for (workload, size, world), group in rows.groupby(["workload", "size", "world_size"]):
        as_good = sweep.as_good_caps(recommendations, workload=workload, size=size, world=int(world)) or []
        for column, label in VARIANTS.items():
            if not group[column].notna().all():
                continue
            error = agreement.prediction_error(group["bucket_cap_mb"], group["measured_ms"], group[column])
            out.append({"workload": f"{workload}/{size}", "world": int(world), "variant": label,
                        "mape": error["mape"], "predicted_best": error["best_predicted_caps_mb"],
                        "measured_best": error["best_measured_caps_mb"], "as_good": as_good,
                        "agrees": agreement.agrees(error, as_good)})  # fmt: skip
    return out


def markdown(results: list[dict], measured: dict[str, pd.DataFrame]) -> str:
    lines = ["| workload | variant | MAPE | best cap predicted | measured best (as good) | agrees |",
             "|---|---|---:|---|---|---|"]  # fmt: skip
    for r in results:
        caps = ", ".join(f"{c:g}" for c in r["predicted_best"])
        best = ", ".join(f"{c:g}" for c in r["measured_best"])
        good = ", ".join(f"{c:g}" for c in r["as_good"]) or "—"
        lines.append(f"| {r['workload']} w{r['world']} | {r['variant']} | {r['mape']:.1%} | {caps} | {best} ({good}) "
                     f"| {'yes' if r['agrees'] else 'no'} |")  # fmt: skip
    lines.append("")
    for workload, rows in measured.items():
        cells = "; ".join(
            f"{r.bucket_cap_mb:g} MiB: measured {r.measured_ms:.1f}, predicted "
            + " / ".join(f"{getattr(r, c):.1f}" for c in VARIANTS if pd.notna(getattr(r, c)))
            for r in rows.sort_values("bucket_cap_mb").itertuples()
        )
        lines.append(f"- {workload} (ms, variants in the table's order): {cells}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="mlp,resnet18,gpt2", help="comma-separated, each at --size")
    parser.add_argument("--size", default="small")
    parser.add_argument("--caps", default="1,5,25", help="bucket caps in MiB (default: 1,5,25)")
    parser.add_argument("--repeats", default="3", help="bench's --repeats (default: 3)")
    parser.add_argument("--results", type=Path, help="results folder (default: a new temporary one)")
    args = parser.parse_args()
    results = args.results or Path(tempfile.mkdtemp(prefix="ddpbench-cpu-model-"))
    began = time.monotonic()
    ddpbench("collectives", "--gpus", "2", "--results", str(results), "--run-id", "collectives")
    all_results, measured = [], {}
    for workload in args.workloads.split(","):
        run_id = f"sweep-{workload}"
        ddpbench("bench", "--impls", "stock", "--workloads", workload, "--size", args.size,
                 "--bucket-cap-mb", args.caps, "--gpus", "2", "--repeats", args.repeats,
                 "--results", str(results), "--run-id", run_id)  # fmt: skip
        rows, recommendations = sweep_rows(results, run_id)
        measured[f"{workload}/{args.size}"] = rows
        all_results += judged(rows, recommendations)
    print(f"\ncpu_model: {len(measured)} sweep(s) in {time.monotonic() - began:.0f} s; results in {results}\n")
    print(markdown(all_results, measured))


if __name__ == "__main__":
    main()

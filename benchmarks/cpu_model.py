"""The step-time model against CPU bucket sweeps it was not tuned on: each variant's error and best cap.

    .venv/bin/python benchmarks/cpu_model.py                       # mlp, resnet18, gpt2 (small), ~4 min
    .venv/bin/python benchmarks/cpu_model.py --workloads gpt2 --caps 1,5,25 --repeats 3 --results R
    .venv/bin/python benchmarks/cpu_model.py --results R --judge-only  # the model as it now is, on R's runs

One `ddpbench collectives` run of this machine (the network and its contention), then per workload
one sweep through the real command line (`bench --impls stock` with its `local` baseline, at world
sizes 1 and 2, the caps interleaved in every launch), then the model's four variants against each
sweep at world size 2: the profile as measured (raw), with the collectives run's contention, and
calibrated on the run's rows at one rank (the `local` step, DDP's own cost: stock − local).
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

import numpy as np
import pandas as pd

from harness.analysis import agreement, stats
from harness.analysis.verdicts import sweep
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


def noise_floor(run: Path, *, world: int) -> float:
    """The MAPE a perfect model would show against this sweep: each cap's measured figure is the median of
    its repeats' medians, off the truth by E|median of n draws| at the launches' spread (the sd of a
    repeat's log median, pooled over the caps), averaged over the caps. Below it, a lower MAPE is luck."""
    configs = store.read_configs(run)
    stock = configs[(configs["impl"] == "stock") & (configs["world_size"] == world) & (configs["status"] == "ok")]
    figures = [g.tolist() for _, g in stock.assign(cap=sweep.swept_cap(stock)).groupby("cap")["step_ms_median"]]
    spread = stats.repeat_spread(*figures)
    draws = np.random.default_rng(0).standard_normal((20_000, max(len(f) for f in figures)))
    return float(np.mean([np.mean(np.abs(np.median(draws[:, : len(f)], axis=1))) * spread for f in figures]))


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
                        "agrees": agreement.agrees(error, as_good),
                        "no_check": agreement.tells_no_cap_apart(group["bucket_cap_mb"], as_good)})  # fmt: skip
    return out


def _agrees_word(result: dict) -> str:
    """'yes' or 'no', or where the sweep called every cap as good, that the agreement checks nothing."""
    return "no check: every cap as good" if result["no_check"] else "yes" if result["agrees"] else "no"


def markdown(results: list[dict], measured: dict[str, pd.DataFrame], floors: dict[str, float]) -> str:
    lines = ["| workload | variant | MAPE | best cap predicted | measured best (as good) | agrees |",
             "|---|---|---:|---|---|---|"]  # fmt: skip
    for r in results:
        caps = ", ".join(f"{c:g}" for c in r["predicted_best"])
        best = ", ".join(f"{c:g}" for c in r["measured_best"])
        good = ", ".join(f"{c:g}" for c in r["as_good"]) or "—"
        lines.append(f"| {r['workload']} w{r['world']} | {r['variant']} | {r['mape']:.1%} | {caps} | {best} ({good}) "
                     f"| {_agrees_word(r)} |")  # fmt: skip
    lines.append("")
    for workload, rows in measured.items():
        cells = "; ".join(
            f"{r.bucket_cap_mb:g} MiB: measured {r.measured_ms:.1f}, predicted "
            + " / ".join(f"{getattr(r, c):.1f}" for c in VARIANTS if pd.notna(getattr(r, c)))
            for r in rows.sort_values("bucket_cap_mb").itertuples()
        )
        lines.append(f"- {workload} (ms, variants in the table's order; noise floor {floors[workload]:.1%}): {cells}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="mlp,resnet18,gpt2", help="comma-separated, each at --size")
    parser.add_argument("--size", default="small")
    parser.add_argument("--caps", default="1,5,25", help="bucket caps in MiB (default: 1,5,25)")
    parser.add_argument("--repeats", default="3", help="bench's --repeats (default: 3)")
    parser.add_argument("--results", type=Path, help="results folder (default: a new temporary one)")
    parser.add_argument("--judge-only", action="store_true",
                        help="measure nothing: judge the model (as the code now is) against the runs an earlier "
                             "run of this benchmark left in --results")  # fmt: skip
    args = parser.parse_args()
    if args.judge_only and not args.results:
        parser.error("--judge-only needs --results, the folder an earlier run left")
    results = args.results or Path(tempfile.mkdtemp(prefix="ddpbench-cpu-model-"))
    began = time.monotonic()
    if not args.judge_only:
        ddpbench("collectives", "--gpus", "2", "--results", str(results), "--run-id", "collectives")
    all_results, measured, floors = [], {}, {}
    for workload in args.workloads.split(","):
        run_id = f"sweep-{workload}"
        if not args.judge_only:
            ddpbench("bench", "--impls", "stock", "--workloads", workload, "--size", args.size,
                     "--bucket-cap-mb", args.caps, "--gpus", "2", "--repeats", args.repeats,
                     "--results", str(results), "--run-id", run_id)  # fmt: skip
        rows, recommendations = sweep_rows(results, run_id)
        measured[f"{workload}/{args.size}"] = rows
        floors[f"{workload}/{args.size}"] = noise_floor(results / run_id, world=2)
        all_results += judged(rows, recommendations)
    print(f"\ncpu_model: {len(measured)} sweep(s) in {time.monotonic() - began:.0f} s; results in {results}\n")
    print(markdown(all_results, measured, floors))


if __name__ == "__main__":
    main()

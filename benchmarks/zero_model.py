"""ZeRO-1's predicted step against the CPU's measured one, beside DDP's on the same runs.

    .venv/bin/python benchmarks/zero_model.py                      # 3 launches, mlp and gpt2 (small), ~9 min
    .venv/bin/python benchmarks/zero_model.py --launches 1 --workloads mlp --results R

Each launch: one `ddpbench collectives` run of this machine (all-reduce, broadcast, contention), then
`bench --impls local,stock,zero --optimizer adam --profile` at world sizes 1 and 2 (Adam: the optimizer
state ZeRO shards). The model predicts, from each run's profile calibrated on its one-rank rows and the
collectives run's fits, stock's step (DDP's default layout) and zero's step at world size 2, neither
reading a row at world size 2. Launches of the same thing differ by 15-30 % on this shared machine: read
the per-launch errors side by side (DDP's and ZeRO-1's on one run share its noise), not one figure.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pandas as pd
from _launches import ddpbench, over_launches

from harness.analysis import stats
from harness.perfmodel import measured, predict
from harness.perfmodel.network import NO_CONTENTION, network_for_run, network_link
from harness.perfmodel.schedule import calibrate, predict_cap
from harness.perfmodel.sharding import zero
from harness.results import model_tables, store


def launch(results: Path, run_id: str, workloads: str) -> Path:
    ddpbench("collectives", "--gpus", "2", "--results", str(results), "--run-id", f"{run_id}-net")
    ddpbench("bench", "--gpus", "2", "--impls", "local,stock,zero", "--workloads", workloads, "--size", "small",
             "--optimizer", "adam", "--profile", "--repeats", "3", "--results", str(results),
             "--run-id", run_id)  # fmt: skip
    return results / run_id


def optimizer_phase_ms(run: Path, configs: pd.DataFrame, *, workload: str, impl: str) -> float:
    """The measured optimizer phase at world size 2 (ZeRO-1's holds its broadcasts): per step the slowest rank,
    the median over the measured steps of every repeat."""
    ids = configs[(configs["workload"] == workload) & (configs["impl"] == impl) & (configs["world_size"] == 2)]
    steps = store.read_steps(run)
    steps = steps[steps["config_id"].isin(ids["config_id"]) & ~steps["warmup"]]
    return float(steps.groupby(["config_id", "step"])["optimizer_ms"].max().median())


def errors(run: Path) -> list[dict]:
    """Per setup: DDP's and ZeRO-1's step at world size 2, measured and predicted, with ZeRO-1's parts."""
    network = network_for_run(run.parent, run)
    configs, profiles = store.read_configs(run), model_tables.read_gradprofiles(run)
    checked = zero.run_checks(configs, profiles, network, cores=predict.run_cores(run))
    checks = {c["workload"]: c for c in checked if c["impl_options"] == "{}"}
    rows = []
    for setup in predict.run_setups(run):
        profile = calibrate(
            p := predict.profile_for(profiles, setup), predict.run_calibration(configs, setup, profile=p)
        )
        ddp = predict_cap(profile, cap_mb=25.0, link=network_link(network, 2), world_size=2,
                          contention=network.contention.get(2, NO_CONTENTION), cap_given=False)  # fmt: skip
        ok = measured.setup_rows(configs, setup)
        stock = stats.geometric_mean(ok[(ok["impl"] == "stock") & (ok["world_size"] == 2)]["step_ms_median"])
        z = checks[setup["workload"]]
        rows.append({"run": run.name, "workload": setup["workload"], "stock_ms": stock,
                     "stock_pred_ms": ddp.step_s * 1e3, "stock_err": ddp.step_s * 1e3 / stock - 1,
                     "zero_ms": z["measured_ms"],
                     "zero_pred_ms": z["predicted_ms"], "zero_err": z["predicted_ms"] / z["measured_ms"] - 1,
                     "zero_minus_stock_ms": z["measured_ms"] - stock,
                     "zero_minus_stock_pred_ms": z["predicted_ms"] - ddp.step_s * 1e3,
                     "optimizer_ms": z["zero_optimizer_ms"], "broadcast_ms": z["zero_broadcast_ms"],
                     "broadcasts": z["zero_broadcasts"],
                     "stock_opt_phase_ms": optimizer_phase_ms(run, configs, workload=setup["workload"], impl="stock"),
                     "stock_opt_pred_ms": z["whole_optimizer_ms"],
                     "zero_opt_phase_ms": optimizer_phase_ms(run, configs, workload=setup["workload"], impl="zero"),
                     "zero_opt_pred_ms": z["zero_optimizer_ms"] + z["zero_broadcast_ms"]})  # fmt: skip
    return rows


def main() -> None:
    frame = over_launches(
        __doc__, "zero", lambda results, run_id, workloads: errors(launch(results, run_id, workloads))
    )
    for workload, group in frame.groupby("workload"):
        print(
            f"{workload}: ZeRO-1 error {group['zero_err'].median():+.1%} median "
            f"({group['zero_err'].min():+.1%} to {group['zero_err'].max():+.1%}); DDP's on the same runs "
            f"{group['stock_err'].median():+.1%} ({group['stock_err'].min():+.1%} to "
            f"{group['stock_err'].max():+.1%})"
        )


if __name__ == "__main__":
    main()

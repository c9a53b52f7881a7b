"""FSDP2's predicted step against the CPU's measured one, and where the difference comes from.

    .venv/bin/python benchmarks/fsdp_model.py                      # 3 launches, mlp and gpt2 (small), ~9 min
    .venv/bin/python benchmarks/fsdp_model.py --launches 1 --workloads mlp --results R

Each launch: one `ddpbench collectives` run of this machine (all-gather, reduce-scatter), then
`bench --impls local,fsdp --optimizer adam --profile --bucket-timeline` at world sizes 1 and 2. The model
predicts fsdp's step at world size 2 from the profile scaled to the run's one-rank baseline, FSDP's own cost
at one rank, and the collectives run's fits (`fsdp.run_checks`), reading no row at world size 2.

Two more figures say where a miss comes from, each reading the world-size-2 rows, so neither is a prediction:
- `calls_ms` against `calls_pred_ms`: the gathers and reduce-scatters a step, as the bucket timeline timed them
  inside FSDP, against the fits;
- `with_calls_ms`: the model's schedule given those timed calls instead of the fits. What it still misses is
  the rest: the two ranks' compute slowing each other on two cores (`baseline_w2_over_w1`: the baseline's
  step at two ranks over one), and FSDP's own work that one rank does not do (at one rank torch skips the
  collectives, and copies each parameter once where two ranks copy it into and out of a gather's buffer).
Launches of the same thing differ by 15-30 % on this shared machine: read the launches side by side.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pandas as pd
from _launches import ddpbench, over_launches

from harness.analysis import stats
from harness.perfmodel import measured, predict
from harness.perfmodel.network import network_for_run
from harness.perfmodel.sharding import fsdp
from harness.results import model_tables, store


def launch(results: Path, run_id: str, workloads: str) -> Path:
    ddpbench("collectives", "--gpus", "2", "--ops", "all_reduce,all_gather,reduce_scatter", "--results",
             str(results), "--run-id", f"{run_id}-net")  # fmt: skip
    ddpbench("bench", "--gpus", "2", "--impls", "local,fsdp", "--workloads", workloads, "--size", "small",
             "--optimizer", "adam", "--profile", "--bucket-timeline", "--repeats", "3", "--results", str(results),
             "--run-id", run_id)  # fmt: skip
    return results / run_id


class TimedCalls:
    """Each collective at the median duration the run's timeline measured for its op and size (the nearest)."""

    def __init__(self, timeline: pd.DataFrame) -> None:
        self.median_s = (timeline["done_ms"] - timeline["launched_ms"]).groupby(
            [timeline["collective"], timeline["bytes"]]).median() / 1e3  # fmt: skip

    def collective_s(self, op: str, nbytes: float, world_size: int) -> float:
        if nbytes <= 0 or world_size <= 1:
            return 0.0
        sizes = self.median_s[op]
        return float(sizes.iloc[(sizes.index.to_series() - nbytes).abs().argmin()])


def fsdp_timeline(run: Path, configs: pd.DataFrame, workload: str) -> pd.DataFrame:
    ids = configs[(configs["workload"] == workload) & (configs["impl"] == "fsdp") & (configs["world_size"] == 2)]
    timeline = store.read_timeline(run)
    return timeline[timeline["config_id"].isin(ids["config_id"]) & ~timeline["warmup"]]


def baseline_ratio(configs: pd.DataFrame, setup: dict) -> float:
    """The baseline's step at two ranks over one: how much the two ranks' compute slowed each other."""
    ok = measured.setup_rows(configs, setup)
    local = ok[ok["impl"] == "local"].groupby("world_size")["step_ms_median"].agg(stats.geometric_mean)
    return float(local[2] / local[1])


def errors(run: Path) -> list[dict]:
    network = network_for_run(run.parent, run)
    configs, profiles = store.read_configs(run), model_tables.read_gradprofiles(run)
    rows = []
    for check in fsdp.run_checks(configs, profiles, network, cores=predict.run_cores(run)):
        if check["impl_options"] != "{}":
            continue
        setup = {key: check[key] for key in measured.SETUP_KEYS}
        timeline = fsdp_timeline(run, configs, check["workload"])
        calls = timeline.assign(took=timeline["done_ms"] - timeline["launched_ms"])
        per_step = calls.groupby(["config_id", "rank", "step"])["took"].sum().median()
        timed = TimedCalls(timeline)
        scaled = fsdp.compute_only(predict.profile_for(profiles, setup), configs, setup)
        with_calls = fsdp.predict_fsdp(scaled, gather=timed, scatter=timed, world_size=2, blocking=True,
                                       own_s=check["fsdp_own_ms"] / 1e3)  # fmt: skip
        rows.append({"run": run.name, "workload": check["workload"], "measured_ms": check["measured_ms"],
                     "predicted_ms": check["predicted_ms"], "error": check["predicted_ms"] / check["measured_ms"] - 1,
                     "compute_ms": check["compute_ms"], "optimizer_ms": check["fsdp_optimizer_ms"],
                     "own_ms": check["fsdp_own_ms"],
                     "calls_pred_ms": check["fsdp_gather_ms"] + check["fsdp_scatter_ms"],
                     "calls_ms": per_step, "with_calls_ms": with_calls.step_s * 1e3,
                     "with_calls_error": with_calls.step_s * 1e3 / check["measured_ms"] - 1,
                     "baseline_w2_over_w1": baseline_ratio(configs, setup)})  # fmt: skip
    return rows


def main() -> None:
    frame = over_launches(
        __doc__, "fsdp", lambda results, run_id, workloads: errors(launch(results, run_id, workloads))
    )
    for workload, group in frame.groupby("workload"):
        print(f"{workload}: FSDP error {group['error'].median():+.1%} median ({group['error'].min():+.1%} to "
              f"{group['error'].max():+.1%}); with the calls as timed inside FSDP "
              f"{group['with_calls_error'].median():+.1%}; calls {group['calls_ms'].median():.1f} ms a step "
              f"timed, {group['calls_pred_ms'].median():.1f} fitted")  # fmt: skip


if __name__ == "__main__":
    main()

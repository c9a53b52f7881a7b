"""How long a planned run will take on this machine, said before it runs (`bench --dry-run`), from what the runs
already in its results folder measured here: each configuration measured before (the same strategy and options,
workload, size, batch, precision, optimizer, world size and device) takes its warm-up and timed steps at the median
step of its newest measurement; every configuration, measured before or not, pays the fixed cost a configuration
paid in the newest run on this device (its wall time less its training steps, over its configurations: launches,
imports, building, the parity check, writing). Repeats that `--repeats auto` adds are not counted.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pandas as pd

from harness.results import layout, store

KEYS = ("impl", "impl_options", "workload", "size", "world_size", "batch_size", "dtype", "optimizer", "device")
"""What makes an earlier row the same configuration's, as rows hold it."""
OLDER_ROWS = {"optimizer": "sgd", "dtype": "fp32"}  # what a run from before these columns trained with


@dataclasses.dataclass(frozen=True)
class Forecast:
    steps_s: float  # the warm-up and timed steps of the configurations measured before
    known: int  # how many of the planned configurations were
    total: int
    fixed_s: float | None  # a configuration's fixed cost in the newest run on this device; None: no run
    source: str  # that run's folder name

    @property
    def wall_s(self) -> float:
        """The run's wall time here: the steps known and every configuration's fixed cost."""
        return self.steps_s + (self.fixed_s or 0.0) * self.total


def forecast(configurations, results: Path) -> Forecast | None:
    """The forecast for `configurations` (harness.config.grid.Configuration) from the bench runs in `results`; None
    where none of them ran on this device."""
    if not configurations:
        return None
    device = configurations[0].device
    runs = [run for run in store.list_runs(results) if store.read_run_meta(run).get("device") == device]
    fixed = next(((per, run.name) for run in runs if (per := fixed_cost_per_configuration_s(run)) is not None), None)
    if fixed is None:
        return None
    medians = newest_medians(runs)
    known = [medians.get(_key(cfg)) for cfg in configurations]
    steps_s = sum(m * (cfg.warmup + cfg.steps) / 1e3 for m, cfg in zip(known, configurations, strict=True) if m)
    return Forecast(steps_s, sum(1 for m in known if m), len(configurations), fixed[0], fixed[1])


def fixed_cost_per_configuration_s(run: Path) -> float | None:
    """The run's wall time less its training steps, over its configurations (its summary's); None without one."""
    try:
        summary = json.loads((run / layout.SUMMARY_JSON).read_text())
        wall, steps, count = summary["wall_s"], summary["training_step_s"], int(summary["configurations"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return max(0.0, wall - steps) / count if count and wall else None


def newest_medians(runs: list[Path]) -> dict[tuple, float]:
    """Each configuration's median step (ms) as the newest of `runs` (newest first) that measured it ok measured it
    (its repeats there pooled by their median)."""
    found: dict[tuple, float] = {}
    for run in runs:
        rows = store.read_configs(run)
        if rows.empty or not set(KEYS) <= set(rows.columns):
            continue
        rows = rows[(rows["status"] == "ok") & rows["step_ms_median"].notna()].fillna(OLDER_ROWS)
        for key, group in rows.groupby(list(KEYS), dropna=False):
            found.setdefault(tuple(_plain(v) for v in key), float(group["step_ms_median"].median()))
    return found


def _key(cfg) -> tuple:
    return tuple(_plain(v) for v in (cfg.impl, cfg.options_json, cfg.workload, cfg.size, cfg.world_size,
                                     cfg.batch_size, cfg.dtype, cfg.optimizer, cfg.device))  # fmt: skip


def _plain(value):
    """A key's part as rows and configurations both give it: numbers as floats, a missing one as None."""
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else str(value)

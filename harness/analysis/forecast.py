"""How long a planned run's steps will take on this machine, said before it runs (`bench --dry-run`), from what the
runs already in its results folder measured on this machine (its hostname, where the run kept one) and device kind:
each configuration measured before (the same strategy and options, workload, size, batch, precision and TF32,
optimizer, world size, nodes, device and backend) takes its warm-up and timed steps at the median step of its
newest measurement. Repeats that `--repeats auto` adds are not counted. The configurations none measured are listed
(`unmeasured`): the console puts a floor under them from their FLOPs (harness/measure/pace.py). What the run pays
beyond its steps (launches, imports, building, parity) is harness/handoff/fixed_cost.py's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
from pathlib import Path

import pandas as pd

from harness.config import grid
from harness.protocols import ConfigError
from harness.results import store

KEYS = ("impl", "impl_options", "workload", "size", "world_size", "batch_size", "dtype", "optimizer", "device", "tf32",
        "backend", "nnodes")  # fmt: skip
"""What makes an earlier row the same configuration's, as rows hold it."""
OLDER_ROWS = {"optimizer": "sgd", "dtype": "fp32", "tf32": False}  # what a run from before these columns trained with


@dataclasses.dataclass(frozen=True)
class Forecast:
    steps_s: float  # the warm-up and timed steps of the configurations measured before
    known: int  # how many of the planned configurations (that launch) were
    total: int
    unmeasured: tuple = ()  # the planned configurations (that launch) no earlier run measured


def forecast(configurations, results: Path) -> Forecast | None:
    """The steps of `configurations` (harness.config.grid.Configuration) as the bench runs in `results` measured them
    on this device; None where nothing is planned."""
    if not configurations:
        return None
    device, host = configurations[0].device, socket.gethostname()
    runs = [run for run in store.list_runs(results) if measured_here(store.read_run_meta(run), device, host)]
    medians = newest_medians(runs)
    launched = [cfg for cfg in configurations if not grid.skip_reason(cfg)]  # a skipped one launches nothing
    known = [medians.get(_key(cfg)) for cfg in launched]
    steps_s = sum(m * (cfg.warmup + cfg.steps) / 1e3 for m, cfg in zip(known, launched, strict=True) if m)
    unmeasured = tuple(cfg for m, cfg in zip(known, launched, strict=True) if not m)
    return Forecast(steps_s, sum(1 for m in known if m), len(launched), unmeasured=unmeasured)


def setups(run: Path, meta: dict) -> set[tuple]:
    """The (workload, size) pairs a run planned (its run.json), or, where that holds none, measured (its rows)."""
    planned = meta.get("configurations") if isinstance(meta.get("configurations"), list) else []
    found = {(c.get("workload"), c.get("size")) for c in planned if isinstance(c, dict) and c.get("workload")}
    if not found:
        with contextlib.suppress(ConfigError, ValueError, OSError, KeyError):
            rows = store.read_configs(run)
            found = set(zip(rows["workload"], rows["size"], strict=True))
    return found


def measured_here(meta: dict, device: str, host: str) -> bool:
    """A run of this device kind on this machine (a run that kept no hostname: taken as this machine's)."""
    recorded = (meta.get("environment") or {}).get("hostname") if isinstance(meta.get("environment"), dict) else None
    return meta.get("device") == device and recorded in (None, host)


def newest_medians(runs: list[Path]) -> dict[tuple, float]:
    """Each configuration's median step (ms) as the newest of `runs` (newest first) that measured it ok measured it
    (its repeats there pooled by their median)."""
    found: dict[tuple, float] = {}
    for run in runs:
        try:
            rows = store.read_configs(run)
        except (ConfigError, ValueError, OSError):  # a run of a newer ddpbench, or unreadable: it forecasts nothing
            continue
        if rows.empty or not set(KEYS) <= set(rows.columns):
            continue
        rows = rows[(rows["status"] == "ok") & rows["step_ms_median"].notna()].fillna(OLDER_ROWS)
        for key, group in rows.groupby(list(KEYS), dropna=False):
            found.setdefault(tuple(_plain(v) for v in key), float(group["step_ms_median"].median()))
    return found


def _key(cfg) -> tuple:
    return tuple(_plain(v) for v in (cfg.impl, cfg.options_json, cfg.workload, cfg.size, cfg.world_size,
                                     cfg.batch_size, cfg.dtype, cfg.optimizer, cfg.device, cfg.tf32, cfg.backend,
                                     cfg.nnodes))  # fmt: skip


def _plain(value):
    """A key's part as rows and configurations both give it: numbers as floats, a missing one as None."""
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else str(value)

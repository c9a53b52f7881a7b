"""How long a planned run's steps will take on this machine, said before it runs (`bench --dry-run`), from what the
runs already in its results folder measured on this machine (its hostname, where the run kept one) and device kind:
each configuration measured before (the same strategy and options, workload, size, batch, precision and TF32,
optimizer, world size, nodes, device and backend) takes its warm-up and timed steps at the median step of its
newest measurement. The configurations none measured are listed (`unmeasured`): the console puts a floor under them
from their FLOPs (harness/measure/pace.py), and gives them the time the steps earlier runs here measured (`paced_here`:
those whose FLOPs their rows hold) took against their own floor. What the run pays beyond its steps (launches,
imports, building, parity) is harness/handoff/fixed_cost.py's.

Under `--repeats auto` the plan is its first two repeats; the rounds after them repeat only what an open verdict
rests on (`deciding`: a communicating strategy at two ranks or more, in a cap sweep or against the reference, and the
baseline of its setup and world size) up to `--max-repeats`. `grown` is the plan with those run to a number of
repeats: the most, or as many as the newest earlier auto run here gave each (`repeats_taken`, from its rows).
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
from pathlib import Path

import pandas as pd

from harness.analysis import roles
from harness.config import grid
from harness.protocols import ConfigError
from harness.results import store

KEYS = ("impl", "impl_options", "workload", "size", "world_size", "batch_size", "grad_accum", "dtype", "optimizer",
        "device", "tf32", "backend", "nnodes")  # fmt: skip
"""What makes an earlier row the same configuration's, as rows hold it."""
OLDER_ROWS = {"optimizer": "sgd", "dtype": "fp32", "tf32": False}  # what a run from before these columns trained with


@dataclasses.dataclass(frozen=True)
class Forecast:
    steps_s: float  # the warm-up and timed steps of the configurations measured before
    known: int  # how many of the planned configurations (that launch) were
    total: int
    unmeasured: tuple = ()  # the planned configurations (that launch) no earlier run measured


def forecast(configurations, results: Path, *, medians: dict | None = None) -> Forecast | None:
    """The steps of `configurations` (harness.config.grid.Configuration) as the bench runs in `results` measured them
    on this device (`medians`: medians_here's, read once for several forecasts); None where nothing is planned."""
    if not configurations:
        return None
    medians = medians_here(configurations, results) if medians is None else medians
    launched = [cfg for cfg in configurations if not grid.skip_reason(cfg)]  # a skipped one launches nothing
    known = [medians.get(_key(cfg)) for cfg in launched]
    steps_s = sum(m * (cfg.warmup + cfg.steps) / 1e3 for m, cfg in zip(known, launched, strict=True) if m)
    unmeasured = tuple(cfg for m, cfg in zip(known, launched, strict=True) if not m)
    return Forecast(steps_s, sum(1 for m in known if m), len(launched), unmeasured=unmeasured)


@dataclasses.dataclass(frozen=True)
class Paced:
    """A step an earlier run here measured whose FLOPs its rows hold: how far above its FLOPs floor a step ran here."""

    world_size: int
    nnodes: int
    threads: int  # a rank's
    dtype: str
    flops_per_step: float  # a rank's batch's, forward and backward
    step_ms: float  # its newest median


def paced_here(configurations, results: Path) -> list[Paced]:
    """Each configuration's newest measured step in `results` (runs on this machine and the plan's device) whose
    FLOPs a sample its row holds, with what sets its floor's pace: its ranks, their threads and its precision."""
    device, host = configurations[0].device, socket.gethostname()
    found: dict[tuple, Paced] = {}
    for run in store.list_runs(results):
        try:
            if not measured_here(store.read_run_meta(run), device, host):
                continue
            rows = store.read_configs(run)
        except (ConfigError, ValueError, OSError):
            continue
        wanted = {*KEYS, "flops_per_sample", "threads_per_rank", "step_ms_median"}
        if rows.empty or not wanted <= set(rows.columns):
            continue
        rows = rows[(rows["status"] == "ok") & rows["step_ms_median"].notna() & (rows["flops_per_sample"] > 0)]
        for key, group in rows.fillna(OLDER_ROWS).groupby(list(KEYS), dropna=False):
            row = group.iloc[0]
            found.setdefault(
                tuple(_plain(v) for v in key),
                Paced(
                    int(row["world_size"]),
                    _count(row["nnodes"]),
                    _count(row["threads_per_rank"]),
                    str(row["dtype"]),
                    float(row["flops_per_sample"]) * float(row["batch_size"]) * float(row["grad_accum"]),  # K batches
                    float(group["step_ms_median"].median()),
                ),
            )
    return list(found.values())


def _count(value) -> int:
    return int(value) if pd.notna(value) and value else 1


def medians_here(configurations, results: Path) -> dict[tuple, float]:
    """Each configuration's newest median step (ms) in `results`, of the runs on this machine and the plan's device."""
    device, host = configurations[0].device, socket.gethostname()
    return newest_medians([run for run in store.list_runs(results) if measured_here(store.read_run_meta(run), device,
                                                                                     host)])  # fmt: skip


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
                                     cfg.batch_size, cfg.grad_accum, cfg.dtype, cfg.optimizer, cfg.device, cfg.tf32,
                                     cfg.backend, cfg.nnodes))  # fmt: skip


def _plain(value):
    """A key's part as rows and configurations both give it: numbers as floats, a missing one as None."""
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else str(value)


def deciding(configurations) -> set[tuple]:
    """The keys of the planned configurations that rounds of `--repeats auto` may repeat: those planned to decide
    (`repeated`) that communicate (two ranks or more; not the baseline), and their setup's baseline at that size."""
    baseline = roles.baseline_name()
    rivals = [c for c in configurations if c.repeated and c.world_size >= 2 and c.impl != baseline]
    setups = {_key(c)[2:] for c in rivals}  # all but the strategy and its options
    return {_key(c) for c in rivals} | {_key(c) for c in configurations if c.impl == baseline and _key(c)[2:] in setups}


def grown(configurations, repeats: dict[tuple, int]) -> list:
    """The plan with each configuration whose key `repeats` names run that many times (no fewer than planned)."""
    planned: dict[tuple, list] = {}
    for cfg in configurations:
        planned.setdefault(_key(cfg), []).append(cfg)
    more = [grid.again(members[-1], index=0, repeat=r) for key, members in planned.items()
            for r in range(len(members), repeats.get(key, 0))]  # fmt: skip
    return [*configurations, *more]


def repeats_taken(configurations, results: Path) -> tuple[dict[tuple, int], list[str]]:
    """The repeats the newest earlier `--repeats auto` run here (this machine, this device kind) gave each planned
    configuration that one measured, from its rows, and the runs they come from (newest first)."""
    wanted = {_key(cfg) for cfg in configurations}
    device, host = configurations[0].device, socket.gethostname()
    found: dict[tuple, int] = {}
    runs: list[str] = []
    for run in store.list_runs(results):
        try:
            meta = store.read_run_meta(run)
            if not measured_here(meta, device, host) or (meta.get("config") or {}).get("repeats") != "auto":
                continue
            rows = store.read_configs(run)
        except (ConfigError, ValueError, OSError):
            continue
        if rows.empty or not set(KEYS) <= set(rows.columns) or "repeat" not in rows:
            continue
        rows = rows[rows["status"] != "skipped"].fillna(OLDER_ROWS)
        took = False
        for key, group in rows.groupby(list(KEYS), dropna=False):
            key = tuple(_plain(v) for v in key)
            if key in wanted and key not in found:
                found[key], took = int(group["repeat"].nunique()), True
        runs += [run.name] * took
    return found, runs

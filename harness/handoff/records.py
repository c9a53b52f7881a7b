"""How rank 0 turns every rank's result of one configuration (`harness.handoff.rank_result`) into the
rows the store writes (`assemble`).

Pure functions: rank 0 calls `assemble` with what it gathered, the launcher with the failed ranks it
diagnosed, and the tests with hand-made results.
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

import pandas as pd

import impls
from harness.analysis import scaling, stats
from harness.analysis.verdicts import environment
from harness.config import precision
from harness.config.grid import Configuration
from harness.handoff.rank_result import RankResult
from harness.handoff.steps import (
    baseline_means,
    communication_columns,
    message_bytes,
    part_columns,
    step_rows,
    timeline_rows,
)
from harness.protocols import roles_of
from harness.results.dictionary import columns, kinds
from harness.results.values import NOT_JUDGED, judged_on


class Rows(NamedTuple):
    """One configuration's rows, as the store writes them."""

    config: dict[str, Any]
    steps: list[dict[str, Any]]
    ranks: list[dict[str, Any]]
    timeline: list[dict[str, Any]]


# Per-rank sampled figures (the dictionary's memory columns), and how a configuration's row
# combines its ranks: the largest rank's peak, the ranks' mean, rank 0's note.
PEAK_COLUMNS = columns.PEAK_MEMORY
MEAN_COLUMNS = columns.MEAN_MEMORY
RANK_COLUMNS = kinds.names(columns.MEMORY)


def combined_status(results: list[RankResult]) -> tuple[str, str | None]:
    """Failed if any rank failed (naming each); skipped if all skipped; idle ranks don't count."""
    failed = [(rank, r) for rank, r in enumerate(results) if r.status == "failed"]
    if failed:
        return "failed", "; ".join(f"rank {rank}: {r.error}" for rank, r in failed)
    working = [r for r in results if r.status != "idle"]
    if all(r.status == "skipped" for r in working):
        return "skipped", working[0].error
    return "ok", None


def window_columns(cfg: Configuration, results: list[RankResult]) -> dict[str, Any]:
    """The measured window as the slowest rank saw it: its mean step period (end of one step to
    the end of the next: the step plus zeroing gradients, making the batch, gaps) and the
    throughput over the whole window."""
    windows = [r.window_ms for r in results if r.window_ms]
    if not windows or not cfg.steps:
        return {"step_period_ms": None, "window_samples_per_s": None}
    window_ms = max(windows)
    return {
        "step_period_ms": window_ms / cfg.steps,
        "window_samples_per_s": cfg.batch_size * cfg.grad_accum * cfg.world_size * cfg.steps / (window_ms / 1e3),
    }


def rank_rows(cfg: Configuration, run_id: str, results: list[RankResult]) -> list[dict[str, Any]]:
    """One row per rank: its memory peaks (so a rank-0 skew is visible) and its wall time."""
    rows = []
    for rank, result in enumerate(results):
        row = {"run_id": run_id, "config_id": cfg.config_id, "rank": rank, "status": result.status}
        row.update({column: result.memory.get(column) for column in RANK_COLUMNS})
        row["wall_s"] = result.wall_s
        row["role"] = result.role  # rpc_hybrid's last rank: "parameter_server"
        rows.append(row)
    return rows


def _over_ranks(results: list[RankResult], column: str, combine) -> float | None:
    values = [r.memory.get(column) for r in results]
    values = [v for v in values if v is not None]
    return combine(values) if values else None


def memory_columns(results: list[RankResult]) -> dict[str, Any]:
    """Peaks: the largest rank (the one that runs out first). Means: the mean of the ranks. The sampler's
    setting and note: rank 0's (as the column dictionary's `OVER_RANKS` says each in configs/)."""
    main = results[0].memory
    return {
        **{column: _over_ranks(results, column, max) for column in PEAK_COLUMNS},
        **{column: _over_ranks(results, column, lambda v: sum(v) / len(v)) for column in MEAN_COLUMNS},
        **{column: main.get(column) for column in columns.RANK_ZERO_MEMORY},
    }


def same_setup(written: pd.DataFrame, cfg: Configuration) -> pd.Series:
    """The `ok` rows of `written` that share `cfg`'s workload setup (all but the strategy and the world size)."""
    if written.empty:
        return pd.Series(dtype=bool)
    return (
        (written["status"] == "ok")
        & (written["workload"] == cfg.workload)
        & (written["size"] == cfg.size)
        & (written["batch_size"] == cfg.batch_size)
        & (written.get("grad_accum", 1) == cfg.grad_accum)
        & (written["dtype"] == cfg.dtype)
        & (written["optimizer"] == cfg.optimizer)
        & (written["device"] == cfg.device)
        & (written["backend"] == cfg.backend)
    )


def _lookup(written: pd.DataFrame, mask: pd.Series, column: str, *, repeat: int = 0) -> float | None:
    """The matching row's value from the same repeat; where that repeat ran none (`--repeats auto` runs world
    size 1 twice, then only what is open), the repeats that did pooled (stats.geometric_mean), never one
    other repeat's launch standing in for it."""
    if written.empty or not mask.any():
        return None
    if "repeat" in written and (mask & (written["repeat"] == repeat)).any():
        value = written.loc[mask & (written["repeat"] == repeat), column].iloc[-1]
    else:
        value = stats.geometric_mean(written.loc[mask, column])
    return None if pd.isna(value) else float(value)


def derived_metrics(
    cfg: Configuration, step_ms: float | None, samples_per_s: float | None, written: pd.DataFrame
) -> dict[str, Any]:
    """Scaling against world size 1 (the same strategy's, and the baseline strategy's: one process that
    communicates nothing) and the speed-up over the baseline at the same world size, from rows already written
    (those written after it put in by `harness.handoff.pairing.refresh`)."""
    same = same_setup(written, cfg)
    if written.empty:
        single = local = local_single = None
    else:
        single = _lookup(
            written,
            same
            & (written["impl"] == cfg.impl)
            & (written["impl_options"] == cfg.options_json)
            & (written["world_size"] == 1),
            "samples_per_s",
            repeat=cfg.repeat,
        )
        local = _lookup(
            written,
            same
            & written["baseline"].fillna(False).astype(bool)
            & (written["world_size"] == cfg.world_size)
            & (written["nnodes"] == cfg.nnodes),
            "step_ms_median",
            repeat=cfg.repeat,
        )
        local_single = _lookup(
            written, same & written["baseline"].fillna(False).astype(bool) & (written["world_size"] == 1),
            "samples_per_s", repeat=cfg.repeat,
        )  # fmt: skip
    if cfg.world_size == 1 and samples_per_s:
        single = samples_per_s
    if role_columns(cfg.impl)["baseline"]:
        local = step_ms
        local_single = samples_per_s if cfg.world_size == 1 else local_single
    return {
        "scaling_efficiency": scaling.scaling_efficiency(
            samples_per_s, world_size=cfg.world_size, single_rank_samples_per_s=single
        ),
        "scaling_efficiency_vs_local": scaling.scaling_efficiency(
            samples_per_s, world_size=cfg.world_size, single_rank_samples_per_s=local_single
        ),
        "speedup_vs_local": scaling.speedup_vs_local(step_ms, local),
    }


MODEL_COLUMNS = kinds.names(columns.MODEL)


def model_columns(
    info: dict[str, Any] | None,
    *,
    samples_per_s: float | None,
    cfg: Configuration,
    gpu_name: str | None,
    gpu_count: int | None = None,
) -> dict[str, Any]:
    """What the model is, the throughput in tokens/s and TFLOP/s that follows from it, and `mfu`:
    that TFLOP/s over the dense peak of the `gpu_name` GPUs the trainers used, in the row's
    precision (null where the peak is not known, the CPU included: harness.config.precision)."""
    info = info or {}
    row = {column: info.get(column) for column in MODEL_COLUMNS}
    samples = info.get("samples_per_batch")
    tokens, flops = row["tokens_per_batch"], row["flops_per_sample"]
    row["tokens_per_s"] = tokens / samples * samples_per_s if tokens and samples and samples_per_s else None
    row["achieved_tflops"] = flops * samples_per_s / 1e12 if flops and samples_per_s else None
    row["mfu"] = precision.mfu(
        row["achieved_tflops"], gpu_name=gpu_name, dtype=cfg.dtype, tf32=cfg.tf32, gpus=gpus_in_use(cfg, gpu_count)
    )
    return row


def gpus_in_use(cfg: Configuration, gpu_count: int | None) -> int:
    """The GPUs a configuration's trainers ran on: one each, unless gloo let ranks share the
    `gpu_count` GPUs each node has (then the peak is theirs, not one per rank)."""
    per_node = cfg.world_size // cfg.nnodes
    return cfg.nnodes * min(per_node, gpu_count) if gpu_count else cfg.world_size


def rpc_columns(results: list[RankResult]) -> dict[str, Any]:
    """RPC round trips and tensor bytes per step and trainer (rpc_hybrid), the mean over trainers;
    null for strategies without RPC."""
    figures = [r.rpc for r in results if r.rpc]
    if not figures:
        return {"rpc_round_trips_per_step": None, "rpc_bytes_per_step": None}
    return {
        "rpc_round_trips_per_step": sum(f["round_trips_per_step"] for f in figures) / len(figures),
        "rpc_bytes_per_step": sum(f["bytes_per_step"] for f in figures) / len(figures),
    }


def parity_columns(main_result: RankResult, cfg: Configuration) -> dict[str, Any]:
    checked = main_result.parity
    why = main_result.parity_inexact_why or "this strategy is not expected to match exactly"
    if checked is None:
        # A later repeat that ran: its judging repeat's row has the verdict, or, for a strategy never judged (the
        # baseline, a lossy hook), the same reason as that row's (not "not checked": it was, on that repeat).
        later = cfg.parity and not cfg.judges_parity and main_result.status == "ok"
        note = "not checked"
        if later:
            note = judged_on(cfg.judging_repeat) if main_result.parity_exact else NOT_JUDGED + why
        return {"parity_max_abs_diff": None, "parity_tolerance": None, "parity_ok": None, "parity_note": note}
    note, ok = checked.note, checked.within_tolerance
    if not main_result.parity_exact and ok is not None:
        # Lossy or non-synchronising strategies: the difference is recorded, never judged a pass; why, in the
        # strategy's own words (stock is judged everywhere else: with comm_hook=bf16 it is the hook that differs).
        note = f"{NOT_JUDGED}{why}; {note}"
        ok = None
    return {
        "parity_max_abs_diff": checked.max_abs_diff,
        "parity_tolerance": checked.allowed,
        "parity_ok": ok,
        "parity_note": note,
    }


def fault_aimed_at(cfg: Configuration) -> str | None:
    """The DDPBENCH_FAULT this process runs under where it could fire in `cfg` (as the pages mark a row:
    environment.targets), kept on the row so that a reader of the Parquet alone can leave the fault's figures out."""
    fault = os.environ.get(environment.FAULT_VARIABLE, "").strip()
    return fault if fault and environment.targets(fault, cfg.to_json()) else None


def role_columns(impl: str) -> dict[str, Any]:
    """The strategy's roles as its class declares them (harness.protocols.ROLES), recorded on its row."""
    return roles_of(impls.entry(impl).cls)


def assemble(
    cfg: Configuration,
    results: list[RankResult],
    *,
    run_context: dict[str, Any],
    written: pd.DataFrame,
    model_info: dict[str, Any] | None = None,
    position: int | None = None,
) -> Rows:
    """The config row, step rows, rank rows and timeline rows of one configuration; `model_info` from
    harness.measure.modelinfo, `position` its place in the launch that ran it (0: the first)."""
    run_id = run_context["run_id"]
    status, error = combined_status(results)
    steps = step_rows(cfg, run_id, results)
    summary = (
        stats.summarize(stats.slowest_rank_per_step(pd.DataFrame(steps)))
        if steps and status == "ok"
        else stats.summarize([])
    )
    step_ms = summary["step_ms_median"]
    step_batch = cfg.batch_size * cfg.grad_accum  # a rank's samples per step: its micro-batches'
    throughput = scaling.samples_per_second(step_ms=step_ms, batch_size=step_batch, world_size=cfg.world_size)
    main = results[0]
    layout = main.layout or {}
    row: dict[str, Any] = {
        "run_id": run_id,
        "config_id": cfg.config_id,
        "repeat": cfg.repeat,
        "launch_position": position,
        "status": status,
        "error": error,
        "fault": fault_aimed_at(cfg),
        "impl": cfg.impl,
        "impl_options": cfg.options_json,  # as the reader returns it; the store writes it as a map
        **role_columns(cfg.impl),
        "workload": cfg.workload,
        "workload_spec": cfg.workload_spec or cfg.workload,
        "workload_options": cfg.workload_options_json,
        "size": cfg.size,
        "world_size": cfg.world_size,
        "nnodes": cfg.nnodes,
        "batch_size": cfg.batch_size,
        "grad_accum": cfg.grad_accum,
        "dtype": cfg.dtype,
        "tf32": cfg.tf32,
        "optimizer": cfg.optimizer,
        "device": cfg.device,
        "backend": cfg.backend,
        "steps": cfg.steps,
        "warmup": cfg.warmup,
        "scaler_skipped_steps": max((r.scaler_skipped for r in results if r.scaler_skipped is not None), default=None),
        **summary,
        "samples_per_s": throughput,
        **derived_metrics(cfg, step_ms, throughput, written),
        **communication_columns(steps),
        **part_columns(
            cfg,
            steps,
            None
            if roles_of(impls.entry(cfg.impl).cls)["baseline"]
            else baseline_means(written, same_setup(written, cfg), cfg),
        ),
        "comm_bytes": message_bytes(timeline := timeline_rows(cfg, run_id, results)),
        "comm_note": main.comm_note,
        **window_columns(cfg, results),
        **memory_columns(results),
        **parity_columns(main, cfg),
        **model_columns(
            model_info,
            samples_per_s=throughput,
            cfg=cfg,
            gpu_name=run_context.get("gpu_name"),
            gpu_count=run_context.get("gpu_count"),
        ),
        "bucket_cap_mb": layout.get("bucket_cap_mb", cfg.bucket_cap_mb),
        "first_bucket_cap_mb": layout.get("first_bucket_cap_mb"),
        "bucket_sizes_mb": layout.get("bucket_sizes_mb"),
        "trace_dir": main.trace_dir,
        "wall_s": max((r.wall_s or 0.0) for r in results),
        **rpc_columns(results),
        **{
            k: run_context.get(k)
            for k in ("threads_per_rank", "torch_version", "gpu_name", "hostname", "git_sha", "started_at")
        },
    }
    return Rows(row, steps, rank_rows(cfg, run_id, results), timeline)

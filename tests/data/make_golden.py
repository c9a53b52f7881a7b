"""Writes the golden results under tests/data/<scenario>/ through `harness.results.store` (the real schema).

    python tests/data/make_golden.py          # rewrites the four scenarios (deterministic)

The committed scenarios were written with schema version 1 and are kept so on purpose: every
report test then reads them through every migration of harness/results/migrate.py, schema 1 to the
current one (tests/test_store.py checks it). `synthetic_run` hands the store options, bucket sizes and
the start as text, which the store parses into the map, list and timestamp columns.

Scenarios (each a run folder; tests/data itself is a results folder):
    cpu_run        CPU, gloo: local, naive, stock at world sizes 1 and 2
    bucket_sweep   CPU: stock at bucket_cap_mb 1, 5, 25 (best cap 25 at 1 rank, 5 at 2 ranks)
    failures       CPU: a parity failure, a failed row with its error, a skipped row with its reason
    gpu_memory     CUDA, NCCL: every memory column filled, a rank-0 skew for dataparallel

`synthetic_run` is also what benchmarks/report_build.py uses to make a large results folder.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from harness.analysis import scaling, stats
from harness.analysis.verdicts import sweep
from harness.results import store

HERE = Path(__file__).resolve().parent
SCENARIOS = ("cpu_run", "bucket_sweep", "failures", "gpu_memory")
PHASE_SHARES = {"forward_ms": 0.25, "backward_ms": 0.5, "optimizer_ms": 0.1}  # the rest of a step is sync


@dataclasses.dataclass(frozen=True, kw_only=True)
class Spec:
    """One configuration to synthesise."""

    impl: str
    world_size: int
    step_ms: float = 10.0  # typical step time; ranks and steps scatter around it
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    status: str = "ok"
    error: str | None = None
    parity_ok: bool | None = True
    memory_mb: float = 1000.0
    rank0_extra_mb: float = 0.0  # a rank-0 skew (DataParallel gathers on rank 0)
    ranks: int | None = None  # processes; DataParallel has one whatever its world size


def environment(device: str) -> dict[str, Any]:
    if device == "cpu":
        return {
            "hostname": "golden",
            "cpu_model": "AMD EPYC",
            "cpu_count": 2,
            "gpus": [],
            "gpu_count": 0,
            "gpu_name": None,
            "topology": [],
            "torch_version": "2.4.0",
            "python": "3.11.7",
        }
    gpus = [{"index": i, "name": "NVIDIA H100 80GB HBM3", "memory_mb": 81559.0, "capability": "9.0"} for i in range(2)]
    topology = [{"gpu_a": 0, "gpu_b": 1, "common_ancestor": "same board", "nvlink_p2p": True}]
    return {
        "hostname": "golden-gpu",
        "cpu_model": "Intel Xeon",
        "cpu_count": 32,
        "gpus": gpus,
        "gpu_count": 2,
        "gpu_name": gpus[0]["name"],
        "topology": topology,
        "torch_version": "2.4.0",
        "python": "3.11.7",
        "driver_version": "550.54.15",
        "cuda_driver_version": 12040,
        "torch_cuda": "12.4",
        "nccl_version": "2.20.5",
    }


def config_id(index: int, spec: Spec) -> str:
    options = "".join(f"-{k}{v:g}" if isinstance(v, float) else f"-{k}{v}" for k, v in sorted(spec.options.items()))
    return f"{index:04d}-w{spec.world_size}-mlp-tiny-{spec.impl}{options}"


def step_rows(run_id: str, cid: str, spec: Spec, *, steps: int, warmup: int, rng: np.random.Generator) -> dict:
    """Columns of the steps table: every rank × step, the first `warmup` steps slower and flagged."""
    ranks = spec.ranks or spec.world_size
    step = np.tile(np.arange(steps + warmup, dtype=np.int32), ranks)
    rank = np.repeat(np.arange(ranks, dtype=np.int32), steps + warmup)
    warm = step < warmup
    step_ms = spec.step_ms * rng.lognormal(0.0, 0.05, step.size) * np.where(warm, 2.0, 1.0)
    phases = {name: step_ms * share for name, share in PHASE_SHARES.items()}
    sync_share = 1.0 - sum(PHASE_SHARES.values())
    n = step.size
    return {
        "run_id": [run_id] * n,
        "config_id": [cid] * n,
        "rank": rank,
        "step": step,
        "warmup": warm,
        "step_ms": step_ms,
        **phases,
        "sync_ms": step_ms * sync_share,
    }


def memory(spec: Spec, device: str, rank: int) -> dict[str, Any]:
    peak = spec.memory_mb + (spec.rank0_extra_mb if rank == 0 else 0.0)
    if device == "cpu":
        return {"mem_peak_rss_mb": peak, "mem_note": "NVML not sampled: the run is on the CPU"}
    return {
        "mem_peak_nvml_mb": peak + 600,
        "mem_peak_nvml_process_mb": peak + 500,
        "mem_peak_allocated_mb": peak * 0.8,
        "mem_peak_reserved_mb": peak,
        "mem_peak_rss_mb": 3000.0,
        "mem_nvml_struct": "v2",
    }


def summary(step_table: dict, spec: Spec, batch_size: int) -> dict[str, Any]:
    measured = ~step_table["warmup"]
    slowest = {}
    for s, ms in zip(step_table["step"][measured], step_table["step_ms"][measured], strict=True):
        slowest[s] = max(slowest.get(s, 0.0), ms)
    row = stats.summarize(list(slowest.values()))
    row["samples_per_s"] = scaling.samples_per_second(
        step_ms=row["step_ms_median"], batch_size=batch_size, world_size=spec.world_size
    )
    return row


def add_relative_columns(rows: list[dict[str, Any]]) -> None:
    """scaling_efficiency against world size 1 and exposed communication against `local`, as the runner does."""
    ok = [r for r in rows if r["status"] == "ok"]
    for row in ok:
        single = next(
            (
                r
                for r in ok
                if r["impl_options"] == row["impl_options"] and r["impl"] == row["impl"] and r["world_size"] == 1
            ),
            None,
        )
        local = next((r for r in ok if r["impl"] == "local" and r["world_size"] == row["world_size"]), None)
        row["scaling_efficiency"] = scaling.scaling_efficiency(
            row["samples_per_s"],
            world_size=row["world_size"],
            single_rank_samples_per_s=single and single["samples_per_s"],
        )
        # The golden runs are an old schema, whose communication columns were inferred from `local`
        # (schema 4 reads them as speedup_vs_local and "not measured").
        local_ms = local and local["step_ms_median"]
        row["exposed_comm_ms"] = row["step_ms_median"] - local_ms if local_ms else None
        row["overlap_efficiency"] = scaling.speedup_vs_local(row["step_ms_median"], local_ms)


def synthetic_run(
    results: Path,
    run_id: str,
    specs: list[Spec],
    *,
    device: str = "cpu",
    steps: int = 4,
    warmup: int = 2,
    started_at: str = "2026-01-01T00:00:00+00:00",
    seed: int = 0,
) -> Path:
    """A complete run folder (run.json, configs, steps, ranks) written through harness.results.store."""
    run = store.run_dir(results, run_id)
    rng = np.random.default_rng(seed)
    backend = "gloo" if device == "cpu" else "nccl"
    command = ["ddpbench", "bench", "--gpus", str(max(s.world_size for s in specs)), "--run-id", run_id]
    meta = {
        "run_id": run_id,
        "started_at": started_at,
        "device": device,
        "backend": backend,
        "threads_per_rank": 1,
        "command": command,
        "environment": {**environment(device), "command": command},
        "schema_version": 1,
    }
    store.write_json(run / "run.json", meta)
    rows, parts = [], []
    for index, spec in enumerate(specs):
        cid = config_id(index, spec)
        row = {
            "run_id": run_id,
            "config_id": cid,
            "repeat": 0,  # measured once, as a run without --repeats records it
            "status": spec.status,
            "error": spec.error,
            "impl": spec.impl,
            "impl_options": json.dumps(spec.options, sort_keys=True),
            "workload": "mlp",
            "size": "tiny",
            "world_size": spec.world_size,
            "nnodes": 1,
            "bucket_cap_mb": spec.options.get("bucket_cap_mb"),
            "batch_size": 8,
            "dtype": "fp32",
            "device": device,
            "backend": backend,
            "threads_per_rank": 1,
            "steps": steps,
            "warmup": warmup,
            "started_at": started_at,
            "hostname": meta["environment"]["hostname"],
            "gpu_name": meta["environment"]["gpu_name"],
            "torch_version": "2.4.0",
        }
        table, ranks = {}, []
        if spec.status == "ok":
            table = step_rows(run_id, cid, spec, steps=steps, warmup=warmup, rng=rng)
            row.update(summary(table, spec, batch_size=8))
            row["parity_ok"] = None if spec.impl == "local" else spec.parity_ok
            row["parity_max_abs_diff"] = 0.0 if spec.parity_ok is not False else 0.25
            row["parity_note"] = (
                "not judged: no communication" if spec.impl == "local" else "largest difference in 0.weight"
            )
            ranks = [
                {"run_id": run_id, "config_id": cid, "rank": r, "status": "ok", **memory(spec, device, r)}
                for r in range(spec.ranks or spec.world_size)
            ]
            row.update({k: max(m.get(k) or 0 for m in ranks) or None for k in ranks[0] if k.startswith("mem_peak")})
        rows.append(row)
        parts.append((cid, table, ranks))
    add_relative_columns(rows)
    for row, (cid, table, ranks) in zip(rows, parts, strict=True):
        step_list = [dict(zip(table, values, strict=True)) for values in zip(*table.values(), strict=True)]
        store.write_configuration(run, cid, row, step_list, ranks)
    recommended = sweep.recommendations(store.read_configs(run), store.read_steps(run))
    if not recommended.empty:  # as `ddpbench bench` does after a bucket-cap sweep
        store.write_recommendations(run, recommended)
    return run


def scenario_specs() -> dict[str, tuple[str, list[Spec]]]:
    both = (1, 2)
    cpu_run = [
        Spec(impl=i, world_size=w, step_ms=ms * w**0.3)
        for w in both
        for i, ms in (("local", 8.0), ("naive", 12.0), ("stock", 10.0))
    ]
    caps = {1: {1.0: 11.0, 5.0: 10.0, 25.0: 9.0}, 2: {1.0: 14.0, 5.0: 11.0, 25.0: 12.5}}
    sweep = [Spec(impl="local", world_size=w, step_ms=8.0) for w in both] + [
        Spec(impl="stock", world_size=w, step_ms=ms, options={"bucket_cap_mb": cap})
        for w in both
        for cap, ms in caps[w].items()
    ]
    failures = [
        Spec(impl="local", world_size=2, step_ms=8.0),
        Spec(impl="naive", world_size=2, step_ms=12.0, parity_ok=False),
        Spec(impl="stock", world_size=2, status="failed", error="rank 1: RuntimeError: <gloo> connection reset"),
        Spec(
            impl="dataparallel",
            world_size=2,
            status="skipped",
            error="needs CUDA GPUs: nn.DataParallel runs one process over several GPUs",
        ),
    ]
    gpu = [
        Spec(impl=i, world_size=w, step_ms=ms, memory_mb=mem)
        for w in both
        for i, ms, mem in (("local", 5.0, 2000.0), ("stock", 6.0, 2600.0))
    ]
    gpu.append(Spec(impl="dataparallel", world_size=2, step_ms=9.0, memory_mb=2000.0, rank0_extra_mb=1500.0, ranks=1))
    return {
        "cpu_run": ("cpu", cpu_run),
        "bucket_sweep": ("cpu", sweep),
        "failures": ("cpu", failures),
        "gpu_memory": ("cuda", gpu),
    }


def main() -> None:
    for day, (name, (device, specs)) in enumerate(scenario_specs().items(), start=1):
        shutil.rmtree(HERE / name, ignore_errors=True)
        synthetic_run(HERE, name, specs, device=device, started_at=f"2026-01-0{day}T00:00:00+00:00", seed=day)
        print(f"wrote {HERE / name}")


if __name__ == "__main__":
    main()

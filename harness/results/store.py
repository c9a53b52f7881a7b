"""The results store: `results/<run_id>/` with Parquet part files and the run's metadata.

    results/<run_id>/run.json          environment, command line, grid (written first)
    results/<run_id>/configs/<id>.parquet   one row per configuration
    results/<run_id>/steps/<id>.parquet     one row per configuration × rank × step
    results/<run_id>/ranks/<id>.parquet     one row per configuration × rank (memory peaks)
    results/<run_id>/logs/             torchrun's output per launch

Every file is written atomically: to a temporary name beginning with '.', fsync, rename.
Readers (pyarrow, pandas) ignore names beginning with '.', so an interrupted write leaves
nothing visible and loses nothing that was finished.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from harness.protocols import ConfigError

log = logging.getLogger("ddpbench")

# 2: `error_kind` and `error_file` (why and where a configuration failed); see MIGRATIONS.
SCHEMA_VERSION = 2

# What the memory sampler measures, per rank (ranks/) and over the ranks (configs/).
MEMORY_FIELDS = [
    ("mem_peak_nvml_mb", pa.float64()),
    ("mem_peak_nvml_process_mb", pa.float64()),
    ("mem_peak_allocated_mb", pa.float64()),
    ("mem_peak_reserved_mb", pa.float64()),
    ("mem_peak_rss_mb", pa.float64()),
    ("mem_nvml_struct", pa.string()),  # v2 or v1: which NVML memory struct was read
    ("gpu_util_mean_pct", pa.float64()),
    ("gpu_util_peak_pct", pa.float64()),
    ("sm_clock_mean_mhz", pa.float64()),
    ("power_mean_w", pa.float64()),
    ("power_peak_w", pa.float64()),
    ("mem_samples", pa.int32()),
    ("mem_note", pa.string()),
    ("held_param_mb", pa.float64()),  # tensors this rank holds after the last step (its shard, if sharded)
    ("held_grad_mb", pa.float64()),
    ("held_optimizer_state_mb", pa.float64()),
]

CONFIG_SCHEMA = pa.schema(
    [
        ("schema_version", pa.int32()),
        ("run_id", pa.string()),
        ("config_id", pa.string()),
        ("repeat", pa.int32()),  # 0 … --repeats-1: the same configuration measured again, interleaved
        ("status", pa.string()),  # ok | failed | skipped
        ("error", pa.string()),
        ("error_kind", pa.string()),  # failed rows: exception | oom | killed | timeout | launch
        ("error_file", pa.string()),  # the failing rank's full traceback, relative to the run folder
        ("impl", pa.string()),
        ("impl_options", pa.string()),  # JSON of the strategy's options
        ("workload", pa.string()),
        ("size", pa.string()),
        ("world_size", pa.int32()),
        ("nnodes", pa.int32()),
        ("bucket_cap_mb", pa.float64()),
        ("batch_size", pa.int32()),  # per rank
        ("dtype", pa.string()),  # fp32, or the autocast dtype of the forward
        ("optimizer", pa.string()),  # sgd or adam
        ("device", pa.string()),
        ("backend", pa.string()),
        ("threads_per_rank", pa.int32()),
        ("steps", pa.int32()),
        ("warmup", pa.int32()),
        ("step_ms_median", pa.float64()),
        ("step_ms_p10", pa.float64()),
        ("step_ms_p90", pa.float64()),
        ("step_ms_cv", pa.float64()),
        ("samples_per_s", pa.float64()),
        ("scaling_efficiency", pa.float64()),
        ("exposed_comm_ms", pa.float64()),
        ("overlap_efficiency", pa.float64()),
        *MEMORY_FIELDS,
        ("parity_max_abs_diff", pa.float64()),
        ("parity_ok", pa.bool_()),
        ("parity_note", pa.string()),
        ("param_count", pa.int64()),  # each shared (tied) parameter once
        ("trainable_param_count", pa.int64()),
        ("param_tensors", pa.int32()),
        ("grad_bytes", pa.int64()),  # gradient volume one all-reduce moves
        ("largest_param_name", pa.string()),
        ("largest_param_bytes", pa.int64()),
        ("tokens_per_batch", pa.int64()),  # per rank, for language models
        ("flops_per_sample", pa.float64()),  # forward+backward, counted by FlopCounterMode
        ("tokens_per_s", pa.float64()),
        ("achieved_tflops", pa.float64()),  # flops_per_sample × samples_per_s
        ("bucket_sizes_mb", pa.string()),  # JSON list, where the strategy has buckets
        ("trace_dir", pa.string()),  # with --profile: traces/<config_id>/rank<N>.json, relative to the run
        ("wall_s", pa.float64()),  # the whole configuration: build, warm-up, steps, parity
        ("torch_version", pa.string()),
        ("gpu_name", pa.string()),
        ("hostname", pa.string()),
        ("git_sha", pa.string()),
        ("started_at", pa.string()),  # the run's start, ISO 8601 UTC
        ("rpc_round_trips_per_step", pa.float64()),  # rpc_hybrid: per trainer and step; null without RPC
        ("rpc_bytes_per_step", pa.float64()),  # rpc_hybrid: tensor bytes both ways, per trainer and step
    ]
)

STEP_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("config_id", pa.string()),
        ("rank", pa.int32()),
        ("step", pa.int32()),
        ("warmup", pa.bool_()),  # warm-up steps are kept (to show warm-up effects), not counted
        ("step_ms", pa.float64()),
        ("forward_ms", pa.float64()),
        ("backward_ms", pa.float64()),
        ("sync_ms", pa.float64()),
        ("optimizer_ms", pa.float64()),
    ]
)


RANK_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("config_id", pa.string()),
        ("rank", pa.int32()),
        ("status", pa.string()),
        *MEMORY_FIELDS,
        ("wall_s", pa.float64()),
        ("role", pa.string()),  # trainer, or parameter_server (rpc_hybrid's last rank)
    ]
)


def run_dir(results: Path, run_id: str) -> Path:
    return Path(results) / run_id


def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """Write through `write(tmp_path)` to a hidden temporary, fsync it, rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # make the rename itself durable
    finally:
        os.close(dir_fd)


def _table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    unknown = {key for row in rows for key in row} - set(schema.names)
    if unknown:
        raise KeyError(f"columns not in the schema: {sorted(unknown)}")
    return pa.Table.from_pylist(rows, schema=schema)


def write_parquet(path: Path, rows: list[dict[str, Any]], schema: pa.Schema) -> None:
    table = _table(rows, schema)
    atomic_write(path, lambda tmp: pq.write_table(table, tmp))


def write_configuration(
    run: Path,
    config_id: str,
    config_row: dict[str, Any],
    step_rows: list[dict[str, Any]] = (),
    rank_rows: list[dict[str, Any]] = (),
) -> None:
    """Steps and ranks first, then the config row: a visible config part means the rest is there."""
    row = {"schema_version": SCHEMA_VERSION, **config_row}
    write_parquet(run / "steps" / f"{config_id}.parquet", list(step_rows), STEP_SCHEMA)
    write_parquet(run / "ranks" / f"{config_id}.parquet", list(rank_rows), RANK_SCHEMA)
    write_parquet(run / "configs" / f"{config_id}.parquet", [row], CONFIG_SCHEMA)


def write_json(path: Path, data: dict[str, Any]) -> None:
    text = json.dumps(data, indent=2, sort_keys=True, default=str)
    atomic_write(path, lambda tmp: tmp.write_text(text))


def read_json(path: Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


def written_config_ids(run: Path) -> set[str]:
    folder = run / "configs"
    if not folder.is_dir():
        return set()
    return {p.stem for p in folder.glob("*.parquet") if not p.name.startswith(".")}


class UnsupportedSchema(ConfigError):
    """Results written by a newer ddpbench, whose columns this one cannot vouch for."""


# What a part file must have to be ours; a Parquet file without them is foreign and skipped.
REQUIRED_COLUMNS = {
    "configs": {"config_id", "status", "impl", "workload", "world_size"},
    "steps": {"config_id", "rank", "step", "step_ms"},
    "ranks": {"config_id", "rank"},
}


def migrate_v1_to_v2(table: pa.Table) -> pa.Table:
    """Schema 1 had no `error_kind`/`error_file`: classify each failed row from its error text
    (as the launcher of schema 1 wrote it); the traceback file did not exist."""
    errors = table.column("error").to_pylist() if "error" in table.column_names else [None] * len(table)
    statuses = table.column("status").to_pylist()
    kinds = [_kind_from_error_text(e) if s == "failed" else None for s, e in zip(statuses, errors, strict=True)]
    if "error_kind" not in table.column_names:
        table = table.append_column("error_kind", pa.array(kinds, pa.string()))
    if "error_file" not in table.column_names:
        table = table.append_column("error_file", pa.nulls(len(table), pa.string()))
    return table.set_column(
        table.schema.get_field_index("schema_version"), "schema_version", pa.array([2] * len(table), pa.int32())
    )


def _kind_from_error_text(error: str | None) -> str:
    text = error or ""
    if text.startswith("launch for world size"):  # schema 1's record of a launch that died
        return "killed"
    return "oom" if looks_like_oom(text) else "exception"


def looks_like_oom(text: str) -> bool:
    """CUDA's "out of memory", the CPU allocator's "can't allocate memory", Python's MemoryError."""
    lowered = text.lower()
    return "out of memory" in lowered or "can't allocate memory" in lowered or text.startswith("MemoryError")


# version -> the function that lifts a configs part of that version to the next one.
MIGRATIONS: dict[int, Callable[[pa.Table], pa.Table]] = {1: migrate_v1_to_v2}


def migrate(table: pa.Table, *, source: Path) -> pa.Table:
    """A configs part, lifted to SCHEMA_VERSION through MIGRATIONS, one version at a time."""
    versions = set(table.column("schema_version").to_pylist()) if "schema_version" in table.column_names else {1}
    version = max(v for v in versions if v is not None) if versions - {None} else 1
    if version > SCHEMA_VERSION:
        raise UnsupportedSchema(
            f"{source} has schema version {version}, newer than the {SCHEMA_VERSION} this ddpbench reads; "
            "upgrade ddpbench to read it"
        )
    while version < SCHEMA_VERSION:
        table, version = MIGRATIONS[version](table), version + 1
    return table


def _read_part(path: Path, kind: str) -> pa.Table | None:
    """One part file, or None (named in a warning) when it is unreadable or not ours."""
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        _skip(path, f"unreadable Parquet ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})")
        return None
    missing = REQUIRED_COLUMNS[kind] - set(table.column_names)
    if missing:
        _skip(path, f"not a ddpbench {kind} part (no column {', '.join(sorted(missing))})")
        return None
    return migrate(table, source=path) if kind == "configs" else table


def _skip(path: Path, reason: str) -> None:
    if path not in _SKIPPED:  # each file is named once per process, however often it is read
        _SKIPPED.add(path)
        log.warning("skipping %s: %s", path, reason)


_SKIPPED: set[Path] = set()


def _read_folder(folder: Path, schema: pa.Schema) -> pd.DataFrame:
    """Every readable part of one table. Parts that differ in columns (a newer part with an
    extra column, an older one without) are unified: nothing is dropped, gaps are null."""
    kind = folder.name
    parts = sorted(p for p in folder.glob("*.parquet") if not p.name.startswith(".")) if folder.is_dir() else []
    tables = [t for t in (_read_part(p, kind) for p in parts) if t is not None]
    if not tables:
        return schema.empty_table().to_pandas()
    # Every declared column, with its declared type (an old part lacks new ones; a part whose
    # column is all null says "null"); columns the schema does not know are kept as they are.
    known = list(schema)
    table = pa.concat_tables([_conform(t, known) for t in tables], promote_options="permissive")
    extra = [name for name in table.column_names if name not in schema.names]
    return table.select([*schema.names, *extra]).to_pandas()  # the declared order, then the unknown


def _conform(table: pa.Table, known: list[pa.Field]) -> pa.Table:
    for field in known:
        if field.name not in table.column_names:
            table = table.append_column(field, pa.nulls(len(table), field.type))
        elif table.schema.field(field.name).type != field.type:
            index = table.schema.get_field_index(field.name)
            table = table.set_column(index, field, table.column(field.name).cast(field.type))
    return table


def read_configs(run: Path) -> pd.DataFrame:
    return _read_folder(Path(run) / "configs", CONFIG_SCHEMA)


def read_steps(run: Path) -> pd.DataFrame:
    return _read_folder(Path(run) / "steps", STEP_SCHEMA)


def read_ranks(run: Path) -> pd.DataFrame:
    return _read_folder(Path(run) / "ranks", RANK_SCHEMA)


def read_config_row(run: Path, config_id: str) -> dict[str, Any]:
    return pq.read_table(Path(run) / "configs" / f"{config_id}.parquet").to_pylist()[0]


def warm_up() -> None:
    """Load the Parquet reader and writer and their memory pool once, before anything is measured.

    The worker calls this first, so that the first configuration's memory peaks do not carry
    the one-time cost of pyarrow (about 15 MB of RSS) that every later configuration is spared.
    """
    table = CONFIG_SCHEMA.empty_table()
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    pq.read_table(pa.BufferReader(sink.getvalue())).to_pandas()


def write_recommendations(run: Path, frame: pd.DataFrame) -> None:
    """The bucket-cap recommendations of a sweep, next to its parts (rewritten after a resume)."""
    table = pa.Table.from_pandas(frame, preserve_index=False)
    atomic_write(Path(run) / "recommendations.parquet", lambda tmp: pq.write_table(table, tmp))


def read_recommendations(run: Path) -> pd.DataFrame:
    path = Path(run) / "recommendations.parquet"
    return pd.read_parquet(path) if path.is_file() else pd.DataFrame()


def list_runs(results: Path) -> list[Path]:
    """Run folders (those with a run.json), newest first."""
    results = Path(results)
    if not results.is_dir():
        return []
    started = {}
    for folder in results.iterdir():
        if not (folder / "run.json").is_file():
            continue
        try:
            started[folder] = str(read_json(folder / "run.json").get("started_at", ""))
        except (OSError, ValueError, AttributeError) as exc:
            _skip(folder / "run.json", f"unreadable run metadata ({type(exc).__name__})")
    return sorted(started, key=started.get, reverse=True)


# ---------------------------------------------------------------- `ddpbench collectives`, `ddpbench predict`
# results/<run_id>/collectives/run.json                  environment, command line, what was asked
# results/<run_id>/collectives/w<N>.parquet              one row per op × message size at world size N
# results/<run_id>/collectives/contention-w<N>.parquet   how overlapped compute and communication slow each other
# results/<run_id>/gradprofile/<workload>.parquet         when each gradient is ready in backward (world size 1)
# results/<run_id>/predictions.parquet                   the step-time model against a measured bucket sweep
# results/<run_id>/floor.parquet                         the communication floor of each configuration

COLLECTIVE_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("op", pa.string()),
        ("world_size", pa.int32()),
        ("bytes", pa.int64()),  # the whole message: all_gather's output, reduce_scatter's input
        ("dtype", pa.string()),
        ("iters", pa.int32()),
        ("warmup", pa.int32()),
        ("time_us", pa.float64()),  # median over iterations of the slowest rank
        ("time_us_p10", pa.float64()),
        ("time_us_p90", pa.float64()),
        ("algbw_gbps", pa.float64()),  # bytes / time, GB/s (1e9)
        ("busbw_gbps", pa.float64()),  # algbw × bus_factor(op, world_size)
        ("correct", pa.bool_()),  # the result matched the expected values on every rank
        ("device", pa.string()),
        ("backend", pa.string()),
        ("threads_per_rank", pa.int32()),
        ("hostname", pa.string()),
        ("started_at", pa.string()),
    ]
)

CONTENTION_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("world_size", pa.int32()),
        ("bytes", pa.int64()),  # all-reduce message used
        ("compute_alone_ms", pa.float64()),
        ("compute_overlapped_ms", pa.float64()),
        ("comm_alone_ms", pa.float64()),
        ("comm_overlapped_ms", pa.float64()),
        ("compute_slowdown", pa.float64()),  # overlapped / alone (1.0: no contention)
        ("comm_slowdown", pa.float64()),
        ("device", pa.string()),
        ("backend", pa.string()),
        ("threads_per_rank", pa.int32()),
        ("hostname", pa.string()),
    ]
)


def collectives_dir(run: Path) -> Path:
    return Path(run) / "collectives"


def list_collectives_runs(results: Path) -> list[Path]:
    """Run folders holding a collectives measurement, newest first."""
    results = Path(results)
    if not results.is_dir():
        return []
    runs = [p for p in results.iterdir() if (collectives_dir(p) / "run.json").is_file()]
    return sorted(runs, key=lambda p: read_json(collectives_dir(p) / "run.json").get("started_at", ""), reverse=True)


def _read_parts(folder: Path, pattern: str, schema: pa.Schema) -> pd.DataFrame:
    parts = sorted(p for p in Path(folder).glob(pattern) if not p.name.startswith(".")) if Path(folder).is_dir() else []
    frames = []
    for path in parts:  # an unreadable or foreign part is named and skipped, as for configs/steps/ranks
        try:
            table = pq.read_table(path)
        except (OSError, pa.ArrowException) as exc:
            _skip(path, f"unreadable Parquet ({type(exc).__name__})")
            continue
        missing = set(schema.names) - set(table.column_names)
        if missing:
            _skip(path, f"not a ddpbench {pattern} part (no column {', '.join(sorted(missing))})")
            continue
        frames.append(table.to_pandas())
    if not frames:
        return schema.empty_table().to_pandas()
    return pd.concat(frames, ignore_index=True)


def read_collectives(run: Path) -> pd.DataFrame:
    return _read_parts(collectives_dir(run), "w*.parquet", COLLECTIVE_SCHEMA)


def read_contention(run: Path) -> pd.DataFrame:
    return _read_parts(collectives_dir(run), "contention-w*.parquet", CONTENTION_SCHEMA)


GRADPROFILE_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("workload", pa.string()),
        ("size", pa.string()),
        ("batch_size", pa.int32()),  # per rank
        ("dtype", pa.string()),
        ("optimizer", pa.string()),
        ("device", pa.string()),
        ("threads_per_rank", pa.int32()),
        ("param_index", pa.int32()),  # registration order (model.parameters(), shared parameters once)
        ("param_name", pa.string()),
        ("numel", pa.int64()),
        ("bytes", pa.int64()),  # the gradient's size
        ("param_dtype", pa.string()),
        ("requires_grad", pa.bool_()),
        ("ready_ms", pa.float64()),  # median time after backward began at which the gradient was accumulated
        ("forward_ms", pa.float64()),  # medians of the profiled steps, repeated on every row
        ("backward_ms", pa.float64()),
        ("optimizer_ms", pa.float64()),
        ("steps", pa.int32()),
    ]
)


def gradprofile_path(run: Path, *, workload: str, size: str, batch_size: int, dtype: str, optimizer: str) -> Path:
    return Path(run) / "gradprofile" / f"{workload}-{size}-b{batch_size}-{dtype}-{optimizer}.parquet"


def write_gradprofile(path: Path, rows: list[dict[str, Any]]) -> None:
    write_parquet(path, rows, GRADPROFILE_SCHEMA)


def read_gradprofiles(run: Path) -> pd.DataFrame:
    return _read_parts(Path(run) / "gradprofile", "*.parquet", GRADPROFILE_SCHEMA)


PREDICTION_SCHEMA = pa.schema(
    [
        ("workload", pa.string()),
        ("size", pa.string()),
        ("impl", pa.string()),
        ("world_size", pa.int32()),
        ("bucket_cap_mb", pa.float64()),
        ("measured_ms", pa.float64()),  # median over repeats of the configurations' step_ms_median
        ("predicted_raw_ms", pa.float64()),  # the model on the world-size-1 profile as measured
        ("predicted_ms", pa.float64()),  # calibrated on the run's own local (and world-size-1 stock) steps
        ("predicted_contention_ms", pa.float64()),  # calibrated, with the measured contention (null: not measured)
        ("compute_scale", pa.float64()),  # local step at this world size / the profile's step
        ("reducer_ms", pa.float64()),  # DDP's own cost: stock − local at world size 1, over all caps (scaled alike)
        ("buckets", pa.int32()),  # how many buckets the simulated assignment made
        ("network", pa.string()),  # where α and β came from
    ]
)

FLOOR_SCHEMA = pa.schema(
    [
        ("config_id", pa.string()),
        ("world_size", pa.int32()),
        ("grad_bytes", pa.int64()),
        ("allreduce_ms", pa.float64()),  # all gradient bytes all-reduced once at the measured bandwidth
        ("local_ms", pa.float64()),  # `local` (no communication) step time at the same world size and setup
        ("floor_ms", pa.float64()),  # max(local_ms, allreduce_ms)
        ("step_ms", pa.float64()),
        ("network", pa.string()),
    ]
)


def write_model_tables(run: Path, *, predictions: list[dict[str, Any]], floor: list[dict[str, Any]]) -> None:
    """The step-time model's tables for one run (rewritten whenever the model is rerun)."""
    write_parquet(Path(run) / "predictions.parquet", predictions, PREDICTION_SCHEMA)
    write_parquet(Path(run) / "floor.parquet", floor, FLOOR_SCHEMA)


def read_predictions(run: Path) -> pd.DataFrame:
    path = Path(run) / "predictions.parquet"
    return pd.read_parquet(path) if path.is_file() else PREDICTION_SCHEMA.empty_table().to_pandas()


def read_floor(run: Path) -> pd.DataFrame:
    path = Path(run) / "floor.parquet"
    return pd.read_parquet(path) if path.is_file() else FLOOR_SCHEMA.empty_table().to_pandas()

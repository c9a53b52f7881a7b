"""The tables the performance model reads and writes, beside a run's configurations: `ddpbench
collectives`' measurements (collectives/, contention/), the gradient-ready profiles (gradprofile/),
and the model's own tables (predictions.parquet, floor.parquet). Where each lives: harness.results.layout.

Runs before the one launcher kept run.json and contention-w<N>.parquet inside collectives/: still read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from harness.results import layout
from harness.results.dictionary import columns, kinds, model_columns
from harness.results.store import (
    COLLECTIVES_KIND,
    conformed,
    first_line,
    read_json,
    read_table_file,
    unified,
    warn_skipped,
    write_parquet,
)

COLLECTIVE_SCHEMA = model_columns.COLLECTIVES.schema
CONTENTION_SCHEMA = model_columns.CONTENTION.schema
GRADPROFILE_SCHEMA = model_columns.GRADPROFILE.schema
PREDICTION_SCHEMA = model_columns.PREDICTIONS.schema
FLOOR_SCHEMA = model_columns.FLOOR.schema


def collectives_dir(run: Path) -> Path:
    return Path(run) / layout.COLLECTIVES


def contention_dir(run: Path) -> Path:
    return Path(run) / layout.CONTENTION


def collectives_part(run: Path, world_size: int) -> Path:
    return collectives_dir(run) / f"w{world_size}.parquet"


def collectives_partial(run: Path, world_size: int) -> Path:
    """The sizes a launch has measured so far, rewritten after each (no reader globs it): kept as the world size's
    part where the launch fails or is stopped, so nothing measured is lost."""
    return collectives_dir(run) / f"w{world_size}.parquet.partial"


def contention_part(run: Path, world_size: int) -> Path:
    return contention_dir(run) / f"w{world_size}.parquet"


def collectives_meta_path(run: Path) -> Path | None:
    """The run.json of a collectives run (older runs kept it in collectives/), None for another run."""
    path = Path(run) / layout.RUN_JSON
    try:
        if path.is_file() and read_json(path).get("kind") == COLLECTIVES_KIND:
            return path
    except (OSError, ValueError, AttributeError):
        return None
    older = collectives_dir(run) / layout.RUN_JSON
    return older if older.is_file() else None


def read_collectives_meta(run: Path) -> dict[str, Any]:
    path = collectives_meta_path(run)
    if path is None:
        raise FileNotFoundError(f"{run} holds no `ddpbench collectives` run")
    return read_json(path)


def list_collectives_runs(results: Path) -> list[Path]:
    """Run folders holding a collectives measurement, newest first."""
    results = Path(results)
    if not results.is_dir():
        return []
    runs = [p for p in results.iterdir() if collectives_meta_path(p) is not None]
    oldest = pd.Timestamp.min.tz_localize("UTC")  # a run whose start is unknown sorts last
    return sorted(runs, key=lambda p: started(read_collectives_meta(p)) or oldest, reverse=True)


def started(meta: dict) -> pd.Timestamp | None:
    """A run's start as an aware time (older files without a zone: UTC); None where it is missing or unreadable."""
    try:
        stamp = pd.Timestamp(meta.get("started_at"))
    except (ValueError, TypeError):
        return None
    if pd.isna(stamp):
        return None
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp


def _read_parts(folder: Path, pattern: str, spec: kinds.Table) -> pd.DataFrame:
    parts = sorted(p for p in Path(folder).glob(pattern) if not p.name.startswith(".")) if Path(folder).is_dir() else []
    tables = []
    for path in parts:  # an unreadable or foreign part is named and skipped, as for configs/steps/ranks
        try:
            table = pq.read_table(path)
        except (OSError, pa.ArrowException) as exc:
            warn_skipped(path, f"unreadable Parquet ({first_line(exc)})")
            continue
        missing = set(spec.names) - set(table.column_names) - spec.later
        if missing:
            warn_skipped(path, f"not a ddpbench {pattern} part (no column {', '.join(sorted(missing))})")
            continue
        if (table := conformed(path, table, spec)) is not None:
            tables.append(table)
    return unified(tables, spec)


def read_collectives(run: Path) -> pd.DataFrame:
    return _read_parts(collectives_dir(run), "w*.parquet", model_columns.COLLECTIVES)


def read_contention(run: Path) -> pd.DataFrame:
    frames = [_read_parts(contention_dir(run), "w*.parquet", model_columns.CONTENTION),
              _read_parts(collectives_dir(run), "contention-w*.parquet", model_columns.CONTENTION)]  # fmt: skip
    found = [frame for frame in frames if not frame.empty]
    return pd.concat(found, ignore_index=True) if found else frames[0]


def gradprofile_path(run: Path, *, workload: str, size: str, batch_size: int, dtype: str, optimizer: str) -> Path:
    return Path(run) / layout.GRADPROFILE / f"{layout.safe_name(workload)}-{size}-b{batch_size}-{dtype}-{optimizer}.parquet"


def write_gradprofile(path: Path, rows: list[dict[str, Any]]) -> None:
    write_parquet(path, rows, GRADPROFILE_SCHEMA)


def read_gradprofiles(run: Path) -> pd.DataFrame:
    return _read_parts(Path(run) / layout.GRADPROFILE, "*.parquet", model_columns.GRADPROFILE)


def write_model_tables(run: Path, *, predictions: list[dict[str, Any]], floor: list[dict[str, Any]]) -> None:
    """The step-time model's tables for one run (rewritten whenever the model is rerun), each row naming its run
    (the folder's name), so that several runs' files concatenated still say whose."""
    run_id = Path(run).name
    write_parquet(Path(run) / layout.PREDICTIONS, [{**r, "run_id": run_id} for r in predictions], PREDICTION_SCHEMA)
    write_parquet(Path(run) / layout.FLOOR, [{**r, "run_id": run_id} for r in floor], FLOOR_SCHEMA)


def read_predictions(run: Path) -> pd.DataFrame:
    return _with_run_id(read_table_file(Path(run) / layout.PREDICTIONS, model_columns.PREDICTIONS), run)


def read_floor(run: Path) -> pd.DataFrame:
    return _with_run_id(read_table_file(Path(run) / layout.FLOOR, model_columns.FLOOR), run)


def _with_run_id(frame: pd.DataFrame, run: Path) -> pd.DataFrame:
    """A file from before its `run_id` column: the run is its folder."""
    frame["run_id"] = frame["run_id"].fillna(Path(run).name)
    return frame

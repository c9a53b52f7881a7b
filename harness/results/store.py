"""The results store: the per-configuration Parquet tables of `results/<run_id>/`, the run's
metadata, and the run listing (where each lives: harness.results.layout; the tables the performance
model reads and writes: harness.results.model_tables).

The columns of every table, their types, units and meanings, come from the column dictionary
(harness/results/dictionary/columns.py); older parts are lifted by harness/results/migrate.py.

Every file is written atomically: to a temporary name beginning with '.', fsync, rename.
Readers (pyarrow, pandas) ignore names beginning with '.', so an interrupted write leaves
nothing visible and loses nothing that was finished.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from harness.protocols import ConfigError
from harness.results import layout, values
from harness.results.dictionary import columns, kinds, model_columns
from harness.results.files import atomic_write, read_json, write_json  # noqa: F401 (the store writes through these)
from harness.results.layout import RunFolder
from harness.results.migrate import (  # noqa: F401 (the store's readers and writers answer for these)
    MIGRATIONS,
    SCHEMA_VERSION,
    UnsupportedSchema,
    conform,
    looks_like_oom,
    migrate,
    migrate_v1_to_v2,
    migrate_v2_to_v3,
    migrate_v3_to_v4,
)

log = logging.getLogger("ddpbench")

# The tables' Arrow schemas, from the column dictionary (each field carries its unit and meaning).
CONFIG_SCHEMA = columns.CONFIGS.schema
STEP_SCHEMA = columns.STEPS.schema
RANK_SCHEMA = columns.RANKS.schema
TIMELINE_SCHEMA = columns.TIMELINE.schema
RECOMMENDATION_SCHEMA = model_columns.RECOMMENDATIONS.schema
COLLECTIVES_KIND = "collectives"  # run.json's "kind" of a `ddpbench collectives` run


def run_dir(results: Path, run_id: str) -> Path:
    return Path(results) / run_id


def find_run(text: str, results: Path) -> Path | None:
    """A run folder given as a path, or as a run id inside `results`; None when it is neither."""
    return next((path for path in (Path(text), run_dir(results, text)) if is_run_folder(path)), None)


def _table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    unknown = {key for row in rows for key in row} - set(schema.names)
    if unknown:
        raise KeyError(f"columns not in the schema: {sorted(unknown)}")
    # Maps, lists and timestamps may come as their text form (what the readers return).
    typed = [f for f in schema if values.is_text_typed(f.type)]
    if typed:  # (steps/ has none: its many rows are passed as they are)
        rows = [
            {**row, **{f.name: values.to_arrow(row[f.name], f.type) for f in typed if f.name in row}} for row in rows
        ]
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
    timeline_rows: list[dict[str, Any]] = (),
) -> None:
    """Steps, ranks and the bucket timeline first, then the config row: a visible config part means
    the rest is there (a configuration without timed collectives has no timeline part)."""
    row = {"schema_version": SCHEMA_VERSION, **config_row}
    folder = RunFolder(run)
    write_parquet(folder.part("steps", config_id), list(step_rows), STEP_SCHEMA)
    write_parquet(folder.part("ranks", config_id), list(rank_rows), RANK_SCHEMA)
    if timeline_rows:
        write_parquet(folder.part("timeline", config_id), list(timeline_rows), TIMELINE_SCHEMA)
    write_parquet(folder.part("configs", config_id), [row], CONFIG_SCHEMA)


def read_run_meta(run: Path) -> dict[str, Any]:
    """The run's run.json: its environment, command line, settings and planned grid. One that is not JSON (a
    write cut short, a hand edit) is a bad run to be given: ConfigError, naming it."""
    path = RunFolder(run).run_json
    try:
        meta = read_json(path)
    except json.JSONDecodeError as error:
        raise ConfigError(f"run {Path(run).name!r}: {path} is not valid JSON ({error}); give another run") from None
    if not isinstance(meta, dict):
        raise ConfigError(f"run {Path(run).name!r}: {path} holds no run's settings; give another run")
    return meta


def is_run_folder(folder: Path) -> bool:
    """Whether `folder` holds a run (of `bench` or `collectives`): it has a run.json."""
    return RunFolder(folder).run_json.is_file()


def written_config_ids(run: Path) -> set[str]:
    folder = Path(run) / "configs"
    if not folder.is_dir():
        return set()
    return {p.stem for p in folder.glob("*.parquet") if not p.name.startswith(".")}


# What a part file must have to be ours; a Parquet file without them is foreign and skipped.
REQUIRED_COLUMNS = {
    "configs": {"config_id", "status", "impl", "workload", "world_size"},
    "steps": {"config_id", "rank", "step", "step_ms"},
    "ranks": {"config_id", "rank"},
    "timeline": {"config_id", "rank", "step", "bucket"},
}


_PARTS_READ: dict[tuple[Path, str], tuple[tuple[int, int, int], pa.Table | None]] = {}
"""Each part this process read, by its file's identity (inode, mtime, size): `bench` reads a run's
rows again every launch and every round of `--repeats auto`, and parts are written once (atomically,
a new file each time), so only the new ones are read."""


def _read_part(path: Path, kind: str, spec: kinds.Table) -> pa.Table | None:
    """One part file conformed to the dictionary, or None (named in a warning) when it is
    unreadable, not ours, or holds a value its column cannot take (a timestamp that is no date)."""
    try:
        stat = path.stat()
    except OSError:
        return _read_part_file(path, kind, spec)
    identity = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
    known = _PARTS_READ.get((path, kind))
    if known is not None and known[0] == identity:
        return known[1]
    table = _read_part_file(path, kind, spec)
    _PARTS_READ[(path, kind)] = (identity, table)
    return table


def _read_part_file(path: Path, kind: str, spec: kinds.Table) -> pa.Table | None:
    try:  # one file, read as one: half the CPU of pq.read_table's dataset and threads (0.26 s, not 0.52, for 90 parts)
        with pq.ParquetFile(path) as part:
            table = part.read(use_threads=False)
    except (OSError, pa.ArrowException) as exc:
        warn_skipped(path, f"unreadable Parquet ({first_line(exc)})")
        return None
    missing = REQUIRED_COLUMNS[kind] - set(table.column_names)
    if missing:
        warn_skipped(path, f"not a ddpbench {kind} part (no column {', '.join(sorted(missing))})")
        return None
    return conformed(path, migrate(table, source=path) if kind == "configs" else table, spec)


def conformed(path: Path, table: pa.Table, spec: kinds.Table) -> pa.Table | None:
    """The table in the dictionary's types; None (named) when a value does not parse or cast."""
    try:
        return conform(table, spec)
    except UnsupportedSchema:
        raise  # a newer ddpbench's results: refused with its message, never skipped
    except (ValueError, TypeError, pa.ArrowException) as exc:
        warn_skipped(path, f"a value its column cannot hold ({first_line(exc)})")
        return None


def first_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"


def _present(table: pa.Table) -> pa.Table:
    """The table as the harness reads it: options as one canonical JSON text per row (pandas
    groups and compares text, not dicts), everything else as Arrow converts it."""
    for index, field in enumerate(table.schema):
        if pa.types.is_map(field.type):
            texts = [values.options_json(pairs) for pairs in table.column(index).to_pylist()]
            table = table.set_column(index, field.with_type(pa.string()), pa.array(texts, pa.string()))
    return table


def warn_skipped(path: Path, reason: str) -> None:
    if path not in _SKIPPED:  # each file is named once per process, however often it is read
        _SKIPPED.add(path)
        log.warning("skipping %s: %s", path, reason)


_SKIPPED: set[Path] = set()


def _read_folder(folder: Path, spec: kinds.Table) -> pd.DataFrame:
    """Every readable part of one table. Parts that differ in columns (a newer part with an
    extra column, an older one without) are unified: nothing is dropped, gaps are null."""
    return unified(_readable_parts(folder, spec), spec, conformed=True)


def _readable_parts(folder: Path, spec: kinds.Table) -> list[pa.Table]:
    """Every readable part of one table folder, conformed; the others named and skipped (`_read_part`)."""
    parts = sorted(p for p in folder.glob("*.parquet") if not p.name.startswith(".")) if folder.is_dir() else []
    return [t for t in (_read_part(p, folder.name, spec) for p in parts) if t is not None]


def unified(tables: list[pa.Table], spec: kinds.Table, *, conformed: bool = False) -> pd.DataFrame:
    """Parts conformed to the dictionary and concatenated: the declared columns in their order,
    then any the dictionary does not know. `conformed`: the parts are already (`_read_part`'s: conforming
    each again cost a run of 50 configurations 0.4 s a read, and bench reads its rows after every launch)."""
    if not tables:
        return _present(spec.schema.empty_table()).to_pandas()
    tables = tables if conformed else [conform(t, spec) for t in tables]
    table = pa.concat_tables(tables, promote_options="permissive")
    extra = [name for name in table.column_names if name not in spec.names]
    return _present(table.select([*spec.names, *extra])).to_pandas()


def written_statuses(run: Path) -> dict[str, str]:
    """Each written configuration's status by config_id, from the parts (read once a process: `_PARTS_READ`)."""
    return {
        config_id: status
        for table in _readable_parts(Path(run) / "configs", columns.CONFIGS)
        for config_id, status in zip(table["config_id"].to_pylist(), table["status"].to_pylist(), strict=True)
    }


def read_configs(run: Path) -> pd.DataFrame:
    return _read_folder(Path(run) / "configs", columns.CONFIGS)


def write_configs_snapshot(run: Path, path: Path) -> None:
    """Every configuration row of the run so far, in one file (`RunFolder.written_before`): what a
    launch's rank 0 reads instead of every part (a fresh process would read them all again)."""
    tables = _readable_parts(Path(run) / "configs", columns.CONFIGS)
    table = pa.concat_tables(tables, promote_options="permissive") if tables else CONFIG_SCHEMA.empty_table()
    atomic_write(path, lambda tmp: pq.write_table(table, tmp))


def read_configs_snapshot(path: Path) -> pd.DataFrame:
    """The rows `write_configs_snapshot` kept, as `read_configs` returned them then."""
    table = _read_part(path, "configs", columns.CONFIGS)
    return unified([table] if table is not None and table.num_rows else [], columns.CONFIGS, conformed=True)


def read_steps(run: Path) -> pd.DataFrame:
    return _read_folder(Path(run) / "steps", columns.STEPS)


def read_ranks(run: Path) -> pd.DataFrame:
    return _read_folder(Path(run) / "ranks", columns.RANKS)


def read_timeline(run: Path) -> pd.DataFrame:
    """The bucket timeline of every configuration that timed its collectives (empty for older runs)."""
    return _read_folder(Path(run) / "timeline", columns.TIMELINE)


def read_config_row(run: Path, config_id: str) -> dict[str, Any]:
    """One configuration's row, as read_configs gives it (migrated; options as JSON text); read once while its
    file is unchanged (`_read_part`), and read again to raise why where it cannot be."""
    path = RunFolder(run).part("configs", config_id)
    table = _read_part(path, "configs", columns.CONFIGS)
    table = table if table is not None else conform(migrate(pq.read_table(path), source=path), columns.CONFIGS)
    return _present(table).to_pylist()[0]


def rewrite_config_row(run: Path, config_id: str, row: dict[str, Any]) -> None:
    """A written configuration's row again, as `read_config_row` gave it with some figures changed (atomically:
    its steps, ranks and timeline stay as they are)."""
    kept = {key: value for key, value in row.items() if key in CONFIG_SCHEMA.names}
    write_parquet(RunFolder(run).part("configs", config_id), [kept], CONFIG_SCHEMA)


def read_step_rows(run: Path, config_id: str) -> list[dict[str, Any]]:
    """One configuration's step rows as written (nulls as None), or none where its part is missing or unreadable."""
    path = RunFolder(run).part("steps", config_id)
    table = _read_part(path, "steps", columns.STEPS) if path.is_file() else None
    return table.to_pylist() if table is not None else []


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
    spec = model_columns.RECOMMENDATIONS
    unknown = set(frame.columns) - set(spec.names)
    if unknown:
        raise KeyError(f"columns not in the schema: {sorted(unknown)}")
    frame = frame.assign(run_id=Path(run).name)  # so that the runs' files concatenated still say whose
    frame = frame.reindex(columns=spec.names)  # NaN in a float column is null here, as pandas means it
    table = pa.Table.from_pandas(frame, schema=spec.schema, preserve_index=False)
    atomic_write(Path(run) / layout.RECOMMENDATIONS, lambda tmp: pq.write_table(table, tmp))


def read_recommendations(run: Path) -> pd.DataFrame:
    frame = read_table_file(Path(run) / layout.RECOMMENDATIONS, model_columns.RECOMMENDATIONS, empty=pd.DataFrame())
    if "run_id" in frame:  # a file from before the column: the run is its folder
        frame["run_id"] = frame["run_id"].fillna(Path(run).name)
    return frame


def read_table_file(path: Path, spec: kinds.Table, *, empty: pd.DataFrame | None = None) -> pd.DataFrame:
    """A table kept in one file, conformed to the dictionary; `empty` (default: no rows, the
    declared columns) when the file is not there."""
    if not path.is_file():
        return unified([], spec) if empty is None else empty
    return unified([pq.read_table(path)], spec)


def newest_runs(results: Path, count: int = 5) -> str:
    """'A, B, C' (the newest bench runs' ids) or 'none': what an error about an unknown run offers instead."""
    return ", ".join(p.name for p in list_runs(results)[:count]) or "none"


def list_runs(results: Path) -> list[Path]:
    """Run folders of `bench` (those with a run.json, not a collectives run's), newest first."""
    results = Path(results)
    if not results.is_dir():
        return []
    started = {}
    for folder in results.iterdir():
        if not (folder / layout.RUN_JSON).is_file():
            continue
        try:
            meta = read_json(folder / layout.RUN_JSON)
            if meta.get("kind") == COLLECTIVES_KIND:
                continue
            started[folder] = str(meta.get("started_at", ""))
        except (OSError, ValueError, AttributeError) as exc:
            warn_skipped(folder / layout.RUN_JSON, f"unreadable run metadata ({type(exc).__name__})")
    return sorted(started, key=started.get, reverse=True)


def size_scales(meta: dict, setup: dict) -> bool:
    """Whether --size scaled the workload of `setup` in the run whose run.json is `meta`: not a file or module of
    the user's, built as written (run.json's `workloads` provenance; a run from before it kept one: scaled)."""
    return meta.get("workloads", {}).get(setup.get("workload"), {}).get("kind") not in ("file", "module")

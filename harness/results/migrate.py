"""Older parts, read as the current format: named migrations, one schema version at a time.

`schema_version` (configs only) says which format wrote a part. The reader lifts it through
MIGRATIONS to SCHEMA_VERSION and refuses a part from a newer ddpbench. Every table is also
conformed to the column dictionary: a column an older part lacks is null, a column it holds as
text where the dictionary now has a map, a list or a timestamp is parsed (so tables without a
version, such as collectives/, read alike).
"""

from __future__ import annotations

import functools

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from harness.protocols import ConfigError, roles_of
from harness.results import values
from harness.results.dictionary import columns, kinds

# 2: `error_kind` and `error_file` (why and where a configuration failed).
# 3: `impl_options` a map, `bucket_sizes_mb` a list, `started_at` a timestamp (text before).
# 4: communication measured (`comm_ms`; `exposed_comm_ms` and `overlap_efficiency` from the bucket
#    timeline); the old inferred ratio is `speedup_vs_local`.
# 5: the strategy's roles (`baseline`, `reference`, `gradient_traffic`, `shards_state`,
#    `comm_after_backward`), which readers decide by instead of its name.
SCHEMA_VERSION = 5


class UnsupportedSchema(ConfigError):
    """Results written by a newer ddpbench, whose columns this one cannot vouch for."""


def looks_like_oom(text: str) -> bool:
    """CUDA's "out of memory", the CPU allocator's "can't allocate memory", Python's MemoryError."""
    lowered = text.lower()
    return "out of memory" in lowered or "can't allocate memory" in lowered or text.startswith("MemoryError")


def _kind_from_error_text(error: str | None) -> str:
    text = error or ""
    if text.startswith("launch for world size"):  # schema 1's record of a launch that died
        return "killed"
    return "oom" if looks_like_oom(text) else "exception"


def _with_version(table: pa.Table, version: int) -> pa.Table:
    index = table.schema.get_field_index("schema_version")
    return table.set_column(index, "schema_version", pa.array([version] * len(table), pa.int32()))


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
    return _with_version(table, 2)


def migrate_v2_to_v3(table: pa.Table) -> pa.Table:
    """Schema 2 stored `impl_options` and `bucket_sizes_mb` as JSON text and `started_at` as ISO
    8601 text: parse them into the map, the list and the UTC timestamp the dictionary declares."""
    return _with_version(lift_text_columns(table, columns.CONFIGS), 3)


def migrate_v3_to_v4(table: pa.Table) -> pa.Table:
    """Schema 3 inferred communication from `local`'s step time: its `overlap_efficiency` (local /
    step) is `speedup_vs_local` now, and its `exposed_comm_ms` (step − local) was no measurement of
    exposed communication, so both read as null (not measured) rather than as something they were not."""
    names = table.column_names
    if "overlap_efficiency" in names:
        ratio = table.column("overlap_efficiency").cast(pa.float64())
        if "speedup_vs_local" not in names:
            table = table.append_column("speedup_vs_local", ratio)
        elif table.column("speedup_vs_local").null_count == len(table):
            table = table.set_column(table.schema.get_field_index("speedup_vs_local"), "speedup_vs_local", ratio)
    for name in ("exposed_comm_ms", "overlap_efficiency"):
        if name in table.column_names:
            index = table.schema.get_field_index(name)
            table = table.set_column(index, name, pa.nulls(len(table), pa.float64()))
    return _with_version(table, 4)


def migrate_v4_to_v5(table: pa.Table) -> pa.Table:
    """Schema 4 did not record the strategy's roles: take them from the class registered under the row's
    `impl` (a name no longer registered gets the defaults a new strategy has: no role, traffic `other`)."""
    import impls  # the plug-ins' registry, below this layer: read only for rows that predate their roles

    known = set(impls.names())
    per_row = [roles_of(impls.entry(name).cls) if name in known else roles_of(object)
               for name in table.column("impl").to_pylist()]  # fmt: skip
    for column in columns.ROLES:
        declared = pa.array([r[column.name] for r in per_row], column.type)
        if column.name not in table.column_names:
            table = table.append_column(column.field(), declared)
        else:  # present only as nulls (a part conformed to a newer dictionary): filled where null
            index = table.schema.get_field_index(column.name)
            kept = table.column(column.name).cast(column.type)
            table = table.set_column(index, column.field(), pc.if_else(pc.is_null(kept), declared, kept))
    return _with_version(table, 5)


# version -> the function that lifts a configs part of that version to the next one.
MIGRATIONS: dict[int, Callable[[pa.Table], pa.Table]] = {
    1: migrate_v1_to_v2,
    2: migrate_v2_to_v3,
    3: migrate_v3_to_v4,
    4: migrate_v4_to_v5,
}


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
    return _phase_not_known(table)


OLD_PHASE = r"(\(exit code -?\d+\)| s\)) while building"
"""The launcher's words, until a rank 0's note without a step total was read as 'before its first step completed',
for a rank killed, or a launch that hung, after such a note: its build, its wrapping or its first step, which the note
does not know (a walkthrough's 'killed by SIGABRT (exit code -6) while building' died in the first backward)."""


def _phase_not_known(table: pa.Table) -> pa.Table:
    """An older run's failures read as the launcher says them now: OLD_PHASE's 'while building' (a phase the note
    did not know) as 'before its first step completed'. Any version: the words changed without one."""
    if "error" not in table.column_names or not pa.types.is_string(table.schema.field("error").type):
        return table
    index = table.schema.get_field_index("error")
    said = pc.replace_substring_regex(table.column("error"), OLD_PHASE, r"\1 before its first step completed")
    return table.set_column(index, table.schema.field("error"), said)


@functools.cache
def _declared(spec: kinds.Table) -> tuple[pa.Schema, tuple[kinds.Column, ...]]:
    """`spec`'s schema and its text-typed columns, built once per table (a field per column costs)."""
    return spec.schema, tuple(c for c in spec.columns if values.is_text_typed(c.type))


def lift_text_columns(table: pa.Table, spec: kinds.Table) -> pa.Table:
    """Columns held as text where `spec` declares a map, a list or a timestamp, parsed."""
    for column in _declared(spec)[1]:
        if column.name not in table.column_names:
            continue
        stored = table.schema.field(column.name).type
        if pa.types.is_string(stored) or pa.types.is_large_string(stored):
            lifted = [values.to_arrow(v, column.type) for v in table.column(column.name).to_pylist()]
            index = table.schema.get_field_index(column.name)
            table = table.set_column(index, column.field(), pa.array(lifted, column.type))
    return table


KNOWN_BEFORE = {"grad_accum": 1}
"""Columns added since whose value in the rows from before them is known, not null: every step before `--grad-accum`
was one micro-batch."""


def conform(table: pa.Table, spec: kinds.Table) -> pa.Table:
    """Every declared column, with its declared type and field metadata (an old part lacks new
    ones; a part whose column is all null says "null"), in the declared order; columns `spec` does
    not know are kept, after them."""
    table = lift_text_columns(table, spec)
    schema = _declared(spec)[0]
    present = set(table.column_names)
    for field in schema:
        if field.name not in present:
            known = KNOWN_BEFORE.get(field.name)
            table = table.append_column(field, pa.nulls(len(table), field.type) if known is None
                                        else pa.array([known] * len(table), field.type))  # fmt: skip
    declared = schema.names
    known = set(declared)
    extra = [name for name in table.column_names if name not in known]
    table = table.select([*declared, *extra])
    return table.cast(pa.schema([*schema, *(table.schema.field(name) for name in extra)]))

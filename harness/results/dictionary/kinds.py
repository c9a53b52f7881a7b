"""What the column dictionary is made of: the Arrow types and the units, named once, and what a column (name, Arrow
type, unit, meaning) and a table (where its files are, what a row is, its columns) are."""

from __future__ import annotations

import dataclasses

import pyarrow as pa

# Arrow types, named once.
I32, I64, F64, BOOL, STR = pa.int32(), pa.int64(), pa.float64(), pa.bool_(), pa.string()
UTC_TIME = pa.timestamp("us", tz="UTC")
# Options are a map because a strategy's options are open-ended (a struct would need one type per
# strategy, and Parquet cannot store the empty struct of an option-less one). Each value is the
# option's JSON literal (25.0, true, "fp16"), so a number and a string never read back as each other.
OPTIONS = pa.map_(pa.string(), pa.string())
F64_LIST = pa.list_(pa.float64())

# Units. "" for identifiers, text and flags.
MIB_UNIT = "MiB (2^20 bytes)"
BYTES, MS, US, SECONDS, COUNT = "bytes", "ms", "µs", "s", "count"
RATIO, PCT, MHZ, WATTS = "ratio", "%", "MHz", "W"


@dataclasses.dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: pa.DataType
    unit: str
    meaning: str

    def field(self) -> pa.Field:
        return pa.field(self.name, self.type, metadata={"unit": self.unit, "meaning": self.meaning})


@dataclasses.dataclass(frozen=True, slots=True)
class Table:
    """One table of a run folder: where its files are, what a row is, and its columns."""

    name: str
    files: str  # where, relative to the run folder
    about: str  # a paragraph for docs/results.md
    columns: tuple[Column, ...]
    later: frozenset[str] = frozenset()  # columns added since its first parts: a part without them reads as null

    @property
    def schema(self) -> pa.Schema:
        return pa.schema([column.field() for column in self.columns])

    @property
    def names(self) -> list[str]:
        return [column.name for column in self.columns]

    def column(self, name: str) -> Column:
        return next(column for column in self.columns if column.name == name)


def names(columns: tuple[Column, ...]) -> tuple[str, ...]:
    return tuple(column.name for column in columns)


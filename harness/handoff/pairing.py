"""The columns that pair a configuration's row with other rows (its strategy's at world size 1, the baseline's at its
world size and at one rank), derived again once a launch has written every row it pairs them with.

Rank 0 derives them as it writes each row (`records.derived_metrics`), from the rows written before it. A launch's
configurations run in another order each repeat (`grid.rotated`), so the baseline's row may come after the rows
it divides: later in the same launch, in a launch retried after a failure, or in a later session (`--resume`). Until
then a row holds the pooled figure of the repeats that had one, or null; `refresh` puts the same repeat's in.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from harness.analysis.gap import GAP_PARTS
from harness.handoff import records
from harness.handoff.steps import baseline_means, part_columns
from harness.results import store

GAPS = ("gap_ms", *GAP_PARTS)
"""The columns of the gap over the baseline (`part_columns`' that need the baseline)."""


class RowSetup(NamedTuple):
    """What `records.derived_metrics` and `part_columns` read of a configuration, as its written row holds it."""

    impl: str
    options_json: str
    workload: str
    size: str
    world_size: int
    nnodes: int
    batch_size: int
    dtype: str
    optimizer: str
    device: str
    backend: str
    repeat: int
    grad_accum: int = 1  # a row from before --grad-accum was one micro-batch a step

    @classmethod
    def of(cls, row: dict[str, Any]) -> RowSetup:
        given = {name: row[name if name != "options_json" else "impl_options"] for name in cls._fields[:-1]}
        return cls(**given, grad_accum=row.get("grad_accum", 1))


READ = ("status", *(name if name != "options_json" else "impl_options" for name in RowSetup._fields), "baseline",
        "samples_per_s", "step_ms_median", "step_ms_mean", "compute_ms")  # fmt: skip
"""What `records.derived_metrics` and `baseline_means` read of the rows a row pairs with."""


def paired_columns(row: dict[str, Any], steps: list[dict[str, Any]], written: pd.DataFrame) -> dict[str, Any]:
    """A written row's paired columns from the rows `written` now holds (the row itself among them) and its step
    rows (needed for the gap's parts; none: the gap is left as the row has it)."""
    setup = RowSetup.of(row)
    found = records.derived_metrics(setup, row["step_ms_median"], row["samples_per_s"], written)
    if steps and not row.get("baseline"):
        baseline = baseline_means(written, records.same_setup(written, setup), setup)
        parts = part_columns(setup, steps, baseline)
        found.update({column: parts[column] for column in GAPS})
    return found


def refresh(run: Path, *, repeat: int, world_size: int) -> list[str]:
    """The paired columns of every `ok` row of one repeat at one world size derived again from the run's rows now,
    and each row whose figures changed written again; returns their config ids."""
    written = store.read_configs(run)
    if written.empty:
        return []
    ok = written["status"] == "ok"
    chosen = written[ok & (written["repeat"] == repeat) & (written["world_size"] == world_size)]
    # What a row pairs with is an `ok` row at world size 1 or its own, in the run's order, and what of it is read:
    # the same figures from a frame a tenth the size (each lookup copies the rows it picks, 150 columns of them).
    partners = written.loc[ok & written["world_size"].isin([1, world_size]), [c for c in READ if c in written]]
    changed = []
    for config_id in chosen["config_id"]:
        row = store.read_config_row(run, config_id)  # read once while its part is unchanged (store._read_part)
        steps = store.read_step_rows(run, config_id) if world_size > 1 and not row.get("baseline") else []
        found = paired_columns(row, steps, partners)
        if any(not _same(row.get(column), value) for column, value in found.items()):
            store.rewrite_config_row(run, config_id, {**row, **found})
            changed.append(config_id)
    return changed


def _same(old: Any, new: Any) -> bool:
    missing = [value is None or (isinstance(value, float) and math.isnan(value)) for value in (old, new)]
    return all(missing) if any(missing) else old == new

"""The column dictionary is the one source: docs/results.md, the store's schemas and each part's
Parquet field metadata all say what it says."""

from __future__ import annotations

import datetime
import json
import math
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.results import docs, model_tables, store, values
from harness.results.dictionary import columns, kinds, model_columns


def test_docs_results_md_holds_the_tables_the_dictionary_renders():
    committed = docs.DOCS.read_text()
    assert committed == docs.render(committed), "docs/results.md is stale: run `python -m harness.results.docs`"
    for table in model_columns.TABLES.values():
        for name in table.names:
            assert f"| `{name}` |" in committed


def test_results_readme_holds_the_map_the_layout_renders():
    committed = docs.README.read_text()
    assert committed == docs.render_readme(committed), (
        "results/README.md is stale: run `python -m harness.results.docs`"
    )
    for table in model_columns.TABLES.values():  # every table's files are on the map
        assert f"`{table.files.split('/')[0]}" in committed, table.files


def test_every_column_has_a_unit_field_and_a_meaning_and_appears_once_per_table():
    for table in model_columns.TABLES.values():
        assert len(set(table.names)) == len(table.names), table.name
        for column in table.columns:
            assert column.meaning.strip() and "\n" not in column.meaning, (table.name, column.name)
            if column.name.endswith("_mb"):
                assert column.unit == kinds.MIB_UNIT, column.name
            if column.name.endswith("_ms"):
                assert column.unit == kinds.MS, column.name


def test_the_store_schemas_are_the_dictionarys():
    assert store.CONFIG_SCHEMA.equals(columns.CONFIGS.schema, check_metadata=True)
    assert store.STEP_SCHEMA.names == ["run_id", "config_id", "rank", "step", "warmup", "step_ms",
                                       *columns.PHASE_COLUMNS, "comm_ms", "exposed_comm_ms",
                                       "exposed_backward_ms", "exposed_forward_ms", "exposed_optimizer_ms",
                                       "compute_ms", "waiting_ms", "rest_ms",
                                       "late_by_ms"]  # fmt: skip
    assert store.TIMELINE_SCHEMA.equals(columns.TIMELINE.schema, check_metadata=True)
    assert columns.CONFIGS.column("achieved_tflops").unit == "TFLOP/s"


def part_metadata(path) -> dict[str, dict[str, str]]:
    schema = pq.read_schema(path)
    return {field.name: {k.decode(): v.decode() for k, v in (field.metadata or {}).items()} for field in schema}


def expected_metadata(table: kinds.Table) -> dict[str, dict[str, str]]:
    return {c.name: {"unit": c.unit, "meaning": c.meaning} for c in table.columns}


def test_a_freshly_written_part_carries_each_columns_unit_and_meaning(tmp_path):
    row = {"run_id": "r", "config_id": "c", "status": "ok", "impl": "stock", "workload": "mlp", "world_size": 2,
           "impl_options": {"bucket_cap_mb": 25.0}, "bucket_sizes_mb": [0.5, 1.25],
           "started_at": "2026-03-01T12:00:00+00:00"}  # fmt: skip
    step = {"run_id": "r", "config_id": "c", "rank": 0, "step": 0, "warmup": False, "step_ms": 2.0}
    rank = {"run_id": "r", "config_id": "c", "rank": 0, "status": "ok", "mem_peak_rss_mb": 100.0}
    collective = {"run_id": "r", "config_id": "c", "rank": 0, "step": 0, "warmup": False, "bucket": 0,
                  "collective": "all_reduce", "bytes": 8, "ready_ms": 1.0, "launched_ms": 1.0, "done_ms": 2.0}  # fmt: skip
    store.write_configuration(tmp_path, "c", row, [step], [rank], [collective])
    for table in (columns.CONFIGS, columns.STEPS, columns.RANKS, columns.TIMELINE):
        path = tmp_path / table.name / "c.parquet"
        assert part_metadata(path) == expected_metadata(table)
        assert pq.read_schema(path).remove_metadata().equals(table.schema.remove_metadata())
    model_tables.write_model_tables(tmp_path, predictions=[], floor=[])
    assert part_metadata(tmp_path / "floor.parquet") == expected_metadata(model_columns.FLOOR)


def test_options_lists_and_timestamps_are_stored_typed_and_read_back(tmp_path):
    row = {"run_id": "r", "config_id": "c", "status": "ok", "impl": "stock", "workload": "mlp", "world_size": 2,
           "impl_options": {"comm_hook": "fp16", "bucket_cap_mb": 25.0, "static_graph": True},
           "bucket_sizes_mb": [0.5, 1.25], "started_at": "2026-03-01T12:00:00+00:00"}  # fmt: skip
    store.write_configuration(tmp_path, "c", row)
    raw = pq.read_table(tmp_path / "configs" / "c.parquet")
    assert raw.column("impl_options").to_pylist() == [
        [("bucket_cap_mb", "25.0"), ("comm_hook", '"fp16"'), ("static_graph", "true")]
    ]
    assert raw.column("bucket_sizes_mb").to_pylist() == [[0.5, 1.25]]
    assert raw.column("started_at").to_pylist() == [datetime.datetime(2026, 3, 1, 12, tzinfo=datetime.timezone.utc)]
    read = store.read_config_row(tmp_path, "c")
    assert read["impl_options"] == '{"bucket_cap_mb": 25.0, "comm_hook": "fp16", "static_graph": true}'
    assert store.read_configs(tmp_path).loc[0, "impl_options"] == read["impl_options"]
    assert read["bucket_sizes_mb"] == [0.5, 1.25]
    assert read["started_at"] == datetime.datetime(2026, 3, 1, 12, tzinfo=datetime.timezone.utc)


def test_a_row_read_back_writes_again_unchanged(tmp_path):
    """What the reader returns (options as JSON text) is what the writer takes."""
    row = {"run_id": "r", "config_id": "c", "status": "ok", "impl": "stock", "workload": "mlp", "world_size": 2,
           "impl_options": {"bucket_cap_mb": 5.0}, "started_at": "2026-03-01T12:00:00"}  # fmt: skip
    store.write_configuration(tmp_path, "c", row)
    first = pq.read_table(tmp_path / "configs" / "c.parquet")
    store.write_parquet(tmp_path / "configs" / "c.parquet", [store.read_config_row(tmp_path, "c")], store.CONFIG_SCHEMA)
    assert pq.read_table(tmp_path / "configs" / "c.parquet").equals(first)


def test_options_text_and_the_map_convert_both_ways_without_losing_types():
    options = {"b": 25.0, "a": "fp16", "c": False, "d": 3}
    pairs = values.options_map(options)
    assert [key for key, _ in pairs] == ["a", "b", "c", "d"]
    assert values.options_json(pairs) == '{"a": "fp16", "b": 25.0, "c": false, "d": 3}'
    assert values.options_map(values.options_json(pairs)) == pairs


def test_an_unparseable_timestamp_is_an_error_not_a_silent_null(tmp_path):
    with pytest.raises(ValueError):
        store.write_parquet(
            tmp_path / "x.parquet", [{"run_id": "r", "started_at": "yesterday"}], model_tables.COLLECTIVE_SCHEMA
        )


def test_phase_names_and_mib_are_defined_once():
    from harness.bucketing import MIB
    from harness.measure import memory, timing
    from reports import step_series

    assert timing.PHASES is columns.PHASES
    assert step_series.PHASES is columns.PHASE_COLUMNS
    assert memory.MB == MIB == 2**20
    assert pa.types.is_timestamp(columns.CONFIGS.column("started_at").type)


def test_the_slowest_rank_column_states_the_thresholds_the_analysis_uses():
    """The dictionary writes gap.py's thresholds out (results sits below analysis); once they said 75 % and 5 %."""
    from harness.analysis import gap

    text = next(c.meaning for c in columns.CONFIGS.columns if c.name == "slowest_rank")
    assert (f"from at least {gap.LATE_MIN_STEPS} measured steps, last to launch in at least "
            f"{gap.LATE_STEPS_SHARE * 100:g} % of them, late by at least {gap.LATE_MARGIN * 100:g} % of the step "
            f"(and {gap.LATE_FLOOR_MS:g} ms)") in text  # fmt: skip


def _reading_section() -> str:
    text = docs.DOCS.read_text()
    return text.split("## Reading a run with pandas", 1)[1].split("<!-- columns:begin", 1)[0]


def _with_a_second_repeat(run, tmp_path):
    """bucket_sweep's rows, each run twice: repeat 1 a new row of the run (its own index) 21 % slower; the
    last configuration's repeat 1 failed. Written as a run made before the `fault` column (every run until it)."""
    import pandas as pd

    rows = store.read_configs(run).to_dict("records")
    shutil.copytree(run / "steps", tmp_path / "run" / "steps")
    folder = tmp_path / "run" / "configs"
    before_fault = pa.schema([field for field in columns.CONFIGS.schema if field.name != "fault"])
    for index, row in enumerate(rows):
        again = {**row, "config_id": f"{len(rows) + index:04d}{row['config_id'][4:]}-r1", "repeat": 1}
        again["step_ms_median"] = row["step_ms_median"] * 1.21
        if index == len(rows) - 1:
            again.update(status="failed", step_ms_median=None, error="rank 1: RuntimeError: x")
        for written in (row, again):
            clean = {k: (None if not isinstance(v, (list, dict)) and pd.isna(v) else v) for k, v in written.items()}
            del clean["fault"]
            store.write_parquet(folder / f"{written['config_id']}.parquet", [clean], before_fault)
    return tmp_path / "run", rows


def test_the_reading_recipe_groups_each_configurations_repeats_and_pools_them_as_the_pages_do(tmp_path):
    """docs/results.md's recipe, run as written on a run with two repeats: one group per configuration (its
    config_id's index differs per repeat), the failed repeat left out, the step the repeats' geometric mean."""
    from harness.analysis.verdicts.compare import MATCH_KEYS

    run, rows = _with_a_second_repeat(docs.ROOT / "tests" / "data" / "bucket_sweep", tmp_path)
    code = _reading_section().split("```python\n", 1)[1].split("```", 1)[0].replace("results/<run_id>", str(run))
    scope: dict = {}
    exec(code, scope)
    keys = [("impl_options" if k == "options" else k) for k in scope["keys"]]
    assert sorted(keys) == sorted(MATCH_KEYS), "the recipe groups by what `compare` matches a configuration on"
    weekly = scope["weekly"].reset_index()
    assert len(weekly) == len(rows)
    assert sorted(weekly["repeats"]) == [1] + [2] * (len(rows) - 1)

    def cap(value) -> float:  # local has none
        return -1.0 if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)

    first = {(r["impl"], r["world_size"], cap(r["bucket_cap_mb"])): r["step_ms_median"] for r in rows}
    for row in weekly.itertuples():
        measured = first[(row.impl, row.world_size, cap(json.loads(row.options).get("bucket_cap_mb")))]
        assert row.step_ms == pytest.approx(measured * (1.1 if row.repeats == 2 else 1.0))
    assert len(scope["steps"]) == len(store.read_steps(run))  # every step row finds its configuration


def test_the_model_tables_name_their_run_written_and_read_from_before_the_column(tmp_path):
    """Several runs' predictions.parquet and floor.parquet concatenated must still say whose each row is."""
    run = tmp_path / "week-12"
    floor = {"config_id": "c", "world_size": 2, "grad_bytes": 8, "allreduce_ms": 1.0, "floor_ms": 1.0, "step_ms": 2.0}
    predicted = {"workload": "mlp", "size": "tiny", "impl": "stock", "world_size": 2, "measured_ms": 2.0}
    model_tables.write_model_tables(run, predictions=[predicted], floor=[floor])
    for name in ("predictions.parquet", "floor.parquet"):
        assert pq.read_table(run / name).column("run_id").to_pylist() == ["week-12"]
        older = pq.read_table(run / name).drop_columns(["run_id"])  # as written before the column
        pq.write_table(older, run / name)
    assert list(model_tables.read_predictions(run)["run_id"]) == ["week-12"]
    assert list(model_tables.read_floor(run)["run_id"]) == ["week-12"]

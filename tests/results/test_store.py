"""The Parquet store: round trip, schema, and atomic writes that never show half a file."""

from __future__ import annotations

import errno
import logging
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.results import model_tables, store


def config_row(config_id: str, **overrides) -> dict:
    row = {"run_id": "r", "config_id": config_id, "status": "ok", "impl": "naive", "workload": "mlp", "world_size": 2}
    row.update(overrides)
    return row


def step_row(config_id: str, rank: int, step: int) -> dict:
    return {"run_id": "r", "config_id": config_id, "rank": rank, "step": step, "warmup": False, "step_ms": 1.5}


def test_configuration_round_trips_with_every_schema_column(tmp_path):
    store.write_configuration(tmp_path, "c1", config_row("c1", mem_peak_nvml_mb=None), [step_row("c1", 0, 0)])
    configs = store.read_configs(tmp_path)
    assert list(configs.columns) == store.CONFIG_SCHEMA.names
    assert configs.loc[0, "schema_version"] == store.SCHEMA_VERSION
    assert configs.loc[0, "impl"] == "naive"
    assert pd.isna(configs.loc[0, "mem_peak_nvml_mb"])  # unmeasured memory is null, not 0
    assert store.read_steps(tmp_path)["step_ms"].tolist() == [1.5]


def test_pandas_reads_every_part_of_a_folder(tmp_path):
    for i in range(3):
        store.write_configuration(tmp_path, f"c{i}", config_row(f"c{i}"), [step_row(f"c{i}", 0, s) for s in range(4)])
    assert len(pd.read_parquet(tmp_path / "configs")) == 3
    assert len(pd.read_parquet(tmp_path / "steps")) == 12
    assert store.written_config_ids(tmp_path) == {"c0", "c1", "c2"}


def test_a_write_interrupted_midway_leaves_no_visible_file(tmp_path):
    target = tmp_path / "configs" / "c1.parquet"

    def write_half_then_die(tmp):
        tmp.write_bytes(b"PAR1 half a file")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        store.atomic_write(target, write_half_then_die)
    assert not target.exists()
    assert list((tmp_path / "configs").iterdir()) == []


def test_readers_ignore_a_temporary_left_by_a_killed_writer(tmp_path):
    store.write_configuration(tmp_path, "c1", config_row("c1"), [step_row("c1", 0, 0)])
    (tmp_path / "configs" / ".c2.parquet.123.tmp").write_bytes(b"garbage from a SIGKILL")
    assert store.read_configs(tmp_path)["config_id"].tolist() == ["c1"]
    assert store.written_config_ids(tmp_path) == {"c1"}


def test_a_config_part_is_visible_only_after_its_steps(tmp_path, monkeypatch):
    written = []
    real = store.write_parquet
    monkeypatch.setattr(
        store, "write_parquet", lambda path, rows, schema: (written.append(path.parent.name), real(path, rows, schema))
    )
    store.write_configuration(tmp_path, "c1", config_row("c1"), [step_row("c1", 0, 0)])
    assert written[-1] == "configs"


def test_unknown_columns_are_an_error_not_a_silent_drop(tmp_path):
    with pytest.raises(KeyError, match="not_a_column"):
        store.write_configuration(tmp_path, "c1", config_row("c1", not_a_column=1))


def test_empty_run_reads_as_empty_frames_with_the_schema_columns(tmp_path):
    assert list(store.read_configs(tmp_path).columns) == store.CONFIG_SCHEMA.names
    assert store.read_steps(tmp_path).empty


def test_runs_are_listed_newest_first(tmp_path):
    store.write_json(tmp_path / "old" / "run.json", {"run_id": "old", "started_at": "2026-01-01T00:00:00"})
    store.write_json(tmp_path / "new" / "run.json", {"run_id": "new", "started_at": "2026-06-01T00:00:00"})
    (tmp_path / "not-a-run").mkdir()
    assert [p.name for p in store.list_runs(tmp_path)] == ["new", "old"]


def write_raw_part(path, table) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)


def test_a_truncated_empty_or_foreign_part_is_skipped_and_named(tmp_path, caplog):
    store.write_configuration(tmp_path, "good", config_row("good"), [step_row("good", 0, 0)])
    whole = (tmp_path / "configs" / "good.parquet").read_bytes()
    (tmp_path / "configs" / "truncated.parquet").write_bytes(whole[: len(whole) // 2])
    (tmp_path / "configs" / "empty.parquet").write_bytes(b"")
    write_raw_part(tmp_path / "configs" / "foreign.parquet", pa.table({"x": [1, 2]}))
    write_raw_part(tmp_path / "steps" / "foreign.parquet", pa.table({"config_id": ["good"]}))

    with caplog.at_level(logging.WARNING, logger="ddpbench"):
        configs, steps = store.read_configs(tmp_path), store.read_steps(tmp_path)

    assert configs["config_id"].tolist() == ["good"] and len(steps) == 1
    named = {record.getMessage().split(":")[0] for record in caplog.records}
    for name in ("configs/truncated", "configs/empty", "configs/foreign", "steps/foreign"):
        assert f"skipping {tmp_path / name}.parquet" in named
    assert "not a ddpbench configs part (no column config_id" in caplog.text


# Schema 2 held these as text: options and buckets as JSON, the start as ISO 8601.
TEXT_BEFORE_3 = ("impl_options", "bucket_sizes_mb", "started_at")


def schema_2_fields(*, without=()) -> list[pa.Field]:
    return [
        pa.field(f.name, pa.string()) if f.name in TEXT_BEFORE_3 else f.remove_metadata()
        for f in store.CONFIG_SCHEMA
        if f.name not in without
    ]


def schema_1_part(path, **row) -> None:
    """A configs part as ddpbench wrote it before error_kind and error_file existed."""
    version_1 = pa.schema(schema_2_fields(without=("error_kind", "error_file")))
    write_raw_part(path, pa.Table.from_pylist([{"schema_version": 1, **config_row("old"), **row}], schema=version_1))


def schema_2_part(path, **row) -> None:
    write_raw_part(path, pa.Table.from_pylist([{"schema_version": 2, **row}], schema=pa.schema(schema_2_fields())))


def test_an_older_schema_is_read_through_its_named_migration(tmp_path):
    died = "launch for world size 2 exited with code 1 before this configuration finished: x"
    schema_1_part(tmp_path / "configs" / "a.parquet", config_id="a", status="failed", error=died)
    schema_1_part(
        tmp_path / "configs" / "b.parquet", config_id="b", status="failed", error="rank 0: CUDA out of memory."
    )
    schema_1_part(tmp_path / "configs" / "c.parquet", config_id="c", status="ok")
    store.write_configuration(tmp_path, "d", config_row("d", status="failed", error="e", error_kind="timeout"))

    rows = store.read_configs(tmp_path).set_index("config_id")
    assert store.MIGRATIONS[1] is store.migrate_v1_to_v2 and store.MIGRATIONS[2] is store.migrate_v2_to_v3
    assert rows["error_kind"].fillna("-").to_dict() == {"a": "killed", "b": "oom", "c": "-", "d": "timeout"}
    assert set(rows["schema_version"]) == {store.SCHEMA_VERSION}
    assert rows["error_file"].isna().all()


def test_an_older_runs_while_building_reads_as_the_phase_its_note_knew(tmp_path):
    """A walkthrough's run kept 'rank 1 killed by SIGABRT (exit code -6) while building', rank 0 having died in the
    first backward: a note without a step total says only that no step had completed, as the launcher says now."""
    said = {"k": "rank 1 killed by SIGABRT (exit code -6) while building: gloo::EnforceNotMet: …",
            "t": "timeout: no progress for 600 s (limit 600 s) while building; rank 1 waits in all_reduce",
            "own": "rank 1: RuntimeError: while building the tokenizer"}  # fmt: skip
    for config_id, error in said.items():
        store.write_configuration(tmp_path, config_id, config_row(config_id, status="failed", error=error))
    rows = store.read_configs(tmp_path).set_index("config_id")["error"]
    assert rows["k"] == ("rank 1 killed by SIGABRT (exit code -6) before its first step completed: gloo::"
                         "EnforceNotMet: …")  # fmt: skip
    assert rows["t"].startswith("timeout: no progress for 600 s (limit 600 s) before its first step completed; ")
    assert rows["own"] == said["own"]  # an exception's own words are kept


def test_schema_4_rows_get_their_strategys_roles_from_the_registry(tmp_path):
    """Readers decide by roles, never by names: a row written before roles were recorded gets the ones its
    strategy's class declares; a strategy no longer registered, the defaults of a new one."""
    for name in ("local", "stock", "fsdp", "retired_strategy"):
        schema_2_part(tmp_path / "configs" / f"{name}.parquet", **config_row(name, impl=name), error_kind=None)
    rows = store.read_configs(tmp_path).set_index("impl")
    roles = ["baseline", "reference", "gradient_traffic", "shards_state", "comm_after_backward"]
    assert rows.loc["local", roles].tolist() == [True, False, "none", False, False]
    assert rows.loc["stock", roles].tolist() == [False, True, "allreduce", False, False]
    assert rows.loc["fsdp", roles].tolist() == [False, False, "sharded", True, False]
    assert rows.loc["retired_strategy", roles].tolist() == [False, False, "other", False, False]


def test_schema_2_text_columns_are_lifted_to_the_map_list_and_timestamp(tmp_path):
    schema_2_part(
        tmp_path / "configs" / "old.parquet", **config_row("old", impl="stock"),
        impl_options='{"bucket_cap_mb": 25.0, "comm_hook": "fp16"}', bucket_sizes_mb="[0.5, 24.75]",
        started_at="2026-02-01T10:00:00+00:00", error_kind=None,
    )  # fmt: skip
    store.write_configuration(tmp_path, "new", config_row("new", impl_options={"bucket_cap_mb": 25.0}))

    rows = store.read_configs(tmp_path).set_index("config_id")
    assert set(rows["schema_version"]) == {store.SCHEMA_VERSION} == {5}
    assert rows.loc["old", "impl_options"] == '{"bucket_cap_mb": 25.0, "comm_hook": "fp16"}'
    assert rows.loc["new", "impl_options"] == '{"bucket_cap_mb": 25.0}'
    assert list(rows.loc["old", "bucket_sizes_mb"]) == [0.5, 24.75]
    assert rows.loc["old", "started_at"] == pd.Timestamp("2026-02-01T10:00:00", tz="UTC")
    lifted = store.migrate_v2_to_v3(pq.read_table(tmp_path / "configs" / "old.parquet"))
    assert lifted.schema.field("impl_options").type == pa.map_(pa.string(), pa.string())
    assert lifted.column("impl_options").to_pylist() == [[("bucket_cap_mb", "25.0"), ("comm_hook", '"fp16"')]]


def test_collectives_parts_with_a_text_start_read_as_timestamps(tmp_path):
    old = pa.schema([pa.field(f.name, pa.string()) if f.name == "started_at" else f for f in model_tables.COLLECTIVE_SCHEMA])
    row = {"run_id": "c", "op": "all_reduce", "world_size": 2, "bytes": 1024, "time_us": 5.0,
           "started_at": "2026-02-01T10:00:00+00:00"}  # fmt: skip
    write_raw_part(model_tables.collectives_part(tmp_path, 2), pa.Table.from_pylist([row], schema=old))
    frame = model_tables.read_collectives(tmp_path)
    assert frame.loc[0, "started_at"] == pd.Timestamp("2026-02-01T10:00:00", tz="UTC")


def test_a_newer_schema_is_refused_with_a_message_naming_the_file(tmp_path):
    path = tmp_path / "configs" / "future.parquet"
    write_raw_part(path, pa.Table.from_pylist([{"schema_version": store.SCHEMA_VERSION + 1, **config_row("f")}]))
    with pytest.raises(store.UnsupportedSchema, match=f"{path} has schema version {store.SCHEMA_VERSION + 1}.*upgrade"):
        store.read_configs(tmp_path)


def test_a_new_column_in_a_newer_part_is_kept_not_dropped(tmp_path):
    store.write_configuration(tmp_path, "old", config_row("old"))
    newer = {"schema_version": store.SCHEMA_VERSION, **config_row("new"), "future_metric": 4.5}
    write_raw_part(tmp_path / "configs" / "new.parquet", pa.Table.from_pylist([newer]))
    rows = store.read_configs(tmp_path).set_index("config_id")
    assert rows.loc["new", "future_metric"] == 4.5 and pd.isna(rows.loc["old", "future_metric"])
    assert set(store.CONFIG_SCHEMA.names) <= set(rows.reset_index().columns)


def test_a_full_disk_fails_the_write_cleanly_and_keeps_earlier_files(tmp_path, monkeypatch):
    store.write_configuration(tmp_path, "before", config_row("before"), [step_row("before", 0, 0)])

    def disk_full(table, where, **kwargs):
        Path(where).write_bytes(b"PAR1 the first blocks")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pq, "write_table", disk_full)
    with pytest.raises(OSError, match="No space left"):
        store.write_configuration(tmp_path, "during", config_row("during"), [step_row("during", 0, 0)])
    monkeypatch.undo()

    leftovers = [p.name for p in tmp_path.rglob("*") if p.is_file() and "during" in p.name]
    assert leftovers == []  # not even a hidden temporary
    assert store.written_config_ids(tmp_path) == {"before"}
    assert store.read_steps(tmp_path)["config_id"].tolist() == ["before"]


def test_an_unreadable_run_json_is_skipped_when_listing_runs(tmp_path, caplog):
    store.write_json(tmp_path / "good" / "run.json", {"run_id": "good", "started_at": "2026"})
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "run.json").write_text("{ not json")
    with caplog.at_level(logging.WARNING, logger="ddpbench"):
        assert [p.name for p in store.list_runs(tmp_path)] == ["good"]
    assert f"skipping {tmp_path / 'bad' / 'run.json'}" in caplog.text


def test_the_golden_runs_of_schema_1_read_through_every_migration_with_their_failures_classified():
    """tests/data was written by schema 1 and is kept so: every report test reads it through the migrations."""
    failures = Path(__file__).resolve().parents[1] / "data" / "failures"
    raw = pd.concat(pd.read_parquet(p) for p in sorted((failures / "configs").glob("*.parquet")))
    assert set(raw["schema_version"]) == {1} and "error_kind" not in raw
    rows = store.read_configs(failures)
    assert set(rows["schema_version"]) == {store.SCHEMA_VERSION}
    assert rows.loc[rows["status"] == "failed", "error_kind"].tolist() == ["exception"]
    assert set(rows["impl_options"]) == {"{}"} and rows["bucket_sizes_mb"].isna().all()
    assert set(rows["started_at"]) == {pd.Timestamp("2026-01-03", tz="UTC")}
    assert rows.loc[rows["status"] != "failed", "error_kind"].isna().all()


def test_schema_3s_inferred_overlap_becomes_speedup_vs_local_and_exposed_reads_as_not_measured(tmp_path):
    old = {**config_row("old", impl="stock"), "schema_version": 3, "exposed_comm_ms": -28.0, "overlap_efficiency": 1.6}
    store.write_parquet(tmp_path / "configs" / "old.parquet", [old], store.CONFIG_SCHEMA)
    row = store.read_configs(tmp_path).iloc[0]
    assert row["speedup_vs_local"] == 1.6
    assert pd.isna(row["exposed_comm_ms"]) and pd.isna(row["overlap_efficiency"]) and pd.isna(row["comm_ms"])
    assert store.MIGRATIONS[3] is store.migrate_v3_to_v4


@pytest.mark.parametrize("golden", ["cpu_run", "failures", "bucket_sweep"])
def test_a_launchs_snapshot_of_the_rows_reads_back_as_every_part_reads(tmp_path, golden):
    """Rank 0 reads the rows written before its launch from one file; they must be the rows, not a copy
    that differs in a type (the golden runs are schema 1: every migration is in the way)."""
    run = Path(__file__).resolve().parents[1] / "data" / golden
    snapshot = tmp_path / "configs.parquet"
    store.write_configs_snapshot(run, snapshot)
    pd.testing.assert_frame_equal(store.read_configs_snapshot(snapshot), store.read_configs(run))
    store.write_configs_snapshot(tmp_path / "empty", snapshot)  # a run with no row yet
    pd.testing.assert_frame_equal(store.read_configs_snapshot(snapshot), store.read_configs(tmp_path / "empty"))


def test_a_part_read_before_is_read_again_only_when_its_file_changed(tmp_path):
    store.write_configuration(tmp_path, "c1", config_row("c1"))
    assert store.read_configs(tmp_path)["status"].tolist() == ["ok"]
    store.write_configuration(tmp_path, "c1", config_row("c1", status="failed"))  # rewritten: a new file
    assert store.read_configs(tmp_path)["status"].tolist() == ["failed"]


def test_a_time_in_ms_reads_without_an_exponent():
    """A walkthrough read 'FSDP's own cost at one rank, 1.72e+03 ms' and 'repeats disagree (1.3e+03–2.65e+03 ms)'."""
    from harness.results.values import ms_text

    assert [ms_text(v) for v in (0.0012, 45.42, 999.4, 999.6, 1720.4, 26500.0)] == [
        "0.0012", "45.4", "999", "1000", "1720", "26500"
    ]  # fmt: skip

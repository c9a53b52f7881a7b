"""The Parquet store: round trip, schema, and atomic writes that never show half a file."""

from __future__ import annotations

import pandas as pd
import pytest

from harness import store


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


def test_every_column_is_documented_in_docs_results_md():
    from pathlib import Path

    documented = (Path(__file__).resolve().parent.parent / "docs" / "results.md").read_text()
    for schema in (store.CONFIG_SCHEMA, store.STEP_SCHEMA, store.RANK_SCHEMA):
        missing = [name for name in schema.names if f"`{name}`" not in documented]
        assert not missing, f"undocumented columns: {missing}"

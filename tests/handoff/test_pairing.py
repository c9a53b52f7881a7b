"""The launcher's pairing after a launch (`harness.handoff.pairing.refresh`) writes the Parquet files it wrote when it
derived every row from the whole run's rows, each read from its file and conformed once more: the same columns,
types, field metadata and values, byte for byte as Arrow reads them."""

from __future__ import annotations

import dataclasses
import shutil

import pyarrow.parquet as pq
import pytest

from harness.handoff import pairing, records
from harness.handoff.rank_result import RankResult
from harness.results import store
from harness.results.dictionary import columns
from harness.results.layout import RunFolder
from tests.handoff.test_records import CONTEXT, collective, configuration, rank_result


def _results(impl, world, repeat, ms, *, status="ok", workload="mlp"):
    comm = [] if impl == "local" else [collective(s, 12, 14) for s in range(3)]
    steps = rank_result([ms, ms * 1.1, ms * 0.9], comm=comm if world > 1 else None)
    steps = steps if status == "ok" else RankResult("failed", "boom")
    cfg = configuration(config_id=f"{workload}-{impl}-w{world}-r{repeat}", impl=impl, world_size=world, repeat=repeat,
                        workload=workload)  # fmt: skip
    return cfg, [steps] * world


def _write(run, launch):
    """A launch's rows as rank 0 writes them, each from the rows written before it."""
    for position, (cfg, results) in enumerate(launch):
        rows = records.assemble(cfg, results, run_context=CONTEXT, written=store.read_configs(run), position=position)
        store.write_configuration(run, cfg.config_id, *rows)


def _refresh_from_every_row(run, *, repeat, world_size):
    """The pairing as it was: every part read again and conformed twice, each row read from its file, and its
    figures derived from the whole run's rows (every status, world size and column)."""
    parts = sorted(RunFolder(run).part("configs", "x").parent.glob("*.parquet"))
    written = store.unified([pq.read_table(part) for part in parts], columns.CONFIGS)
    chosen = written[
        (written["status"] == "ok") & (written["repeat"] == repeat) & (written["world_size"] == world_size)
    ]
    for config_id in chosen["config_id"]:
        path = RunFolder(run).part("configs", config_id)
        row = store._present(store.conform(store.migrate(pq.read_table(path), source=path), columns.CONFIGS))
        row = row.to_pylist()[0]
        steps = store.read_step_rows(run, config_id) if world_size > 1 and not row.get("baseline") else []
        found = pairing.paired_columns(row, steps, written)
        if any(not pairing._same(row.get(column), value) for column, value in found.items()):
            store.rewrite_config_row(run, config_id, {**row, **found})


def test_the_pairing_writes_what_deriving_from_every_row_wrote(tmp_path):
    """Repeat 1's launches run their baseline last (`grid.rotated`), so its rows are paired again; a second
    workload whose world-size-1 naive row failed pools its scaling over the repeats that have one."""
    launches = [
        [_results("local", 1, 0, 8), _results("naive", 1, 0, 9), _results("local", 1, 0, 5, workload="big"),
         _results("naive", 1, 0, 6, workload="big")],
        [_results("local", 2, 0, 10), _results("naive", 2, 0, 16), _results("local", 2, 0, 7, workload="big"),
         _results("naive", 2, 0, 11, workload="big")],
        [_results("naive", 1, 1, 9.5), _results("naive", 1, 1, 6, status="failed", workload="big"),
         _results("local", 1, 1, 8.5), _results("local", 1, 1, 5.5, workload="big")],
        [_results("naive", 2, 1, 16), _results("naive", 2, 1, 12, workload="big"), _results("local", 2, 1, 12),
         _results("local", 2, 1, 7.5, workload="big")],
    ]  # fmt: skip
    now, before = tmp_path / "now", tmp_path / "before"
    for launch in launches:
        _write(now, launch)
        shutil.rmtree(before, ignore_errors=True)
        shutil.copytree(now, before)
        key = {"repeat": launch[0][0].repeat, "world_size": launch[0][0].world_size}
        changed = pairing.refresh(now, **key)
        _refresh_from_every_row(before, **key)
        for table in ("configs", "steps", "ranks", "timeline"):
            ours, theirs = sorted((now / table).glob("*.parquet")), sorted((before / table).glob("*.parquet"))
            assert [p.name for p in ours] == [p.name for p in theirs]
            for mine, reference in zip(ours, theirs, strict=True):
                assert pq.read_table(mine).equals(pq.read_table(reference), check_metadata=True), mine
        assert bool(changed) == (launch[0][0].repeat == 1)  # repeat 1's rows came before their baseline
    # Reading the run's parts (conformed once, as read) gives what conforming them again gave.
    for table, spec in (("configs", columns.CONFIGS), ("steps", columns.STEPS)):
        again = store.unified([pq.read_table(p) for p in sorted((now / table).glob("*.parquet"))], spec)
        assert store._read_folder(now / table, spec).equals(again)


def test_a_k4_row_pairs_with_the_k4_rows_of_its_setup(tmp_path):
    """`bench --grad-accum 1,4`'s second repeat re-pairs rows that carry K: a K=4 row scales against world size 1's
    K=4 row, not its K=1 one (a run at --repeats 2 stopped here with an AttributeError before RowSetup had K)."""
    launch = []
    for accum, world, ms in ((1, 1, 5.0), (4, 1, 40.0), (1, 2, 8.0), (4, 2, 50.0)):
        cfg, results = _results("naive", world, 0, ms)
        launch.append((dataclasses.replace(cfg, config_id=f"{cfg.config_id}-k{accum}", grad_accum=accum), results))
    _write(tmp_path, launch)
    written = store.read_configs(tmp_path)
    row = store.read_config_row(tmp_path, "mlp-naive-w2-r0-k4")
    found = pairing.paired_columns(row, [], written)
    # K=4: 640 samples/s at world size 2 over 2 × 400 at world size 1; against K=1's 800 at world size 1 it read 0.4
    assert found["scaling_efficiency"] == pytest.approx(0.8)

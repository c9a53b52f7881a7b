"""`ddpbench collectives`: bus-bandwidth factors, input parsing, and the command end to end on 2 CPU ranks."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import run_ddpbench

from harness import cli
from harness.plan.config import ConfigError
from harness.rank import collectives
from harness.results import store


@pytest.mark.parametrize(
    ("op", "world", "factor"),
    [
        ("all_reduce", 2, 1.0),
        ("all_reduce", 8, 1.75),
        ("all_gather", 4, 0.75),
        ("reduce_scatter", 8, 0.875),
        ("broadcast", 8, 1.0),
    ],
)
def test_bus_factor_is_the_nccl_tests_one(op, world, factor):
    assert collectives.bus_factor(op, world) == pytest.approx(factor)


def test_sizes_parse_in_powers_of_1024_and_double_from_min_to_max():
    assert collectives.parse_size("1KB") == 1024
    assert collectives.parse_size("256MB") == 256 * 1024**2
    assert collectives.parse_size_range("1KB:8KB") == (1024, 8192)
    assert collectives.message_sizes(1024, 8192) == [1024, 2048, 4096, 8192]
    assert collectives.message_sizes(1024, 5000) == [1024, 2048, 4096]


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda: collectives.parse_ops("all_reduce,alltoall"), "alltoall"),
        (lambda: collectives.parse_size_range("1MB:1KB"), "1MB:1KB"),
        (lambda: collectives.parse_size_range("1KB"), "1KB"),
        (lambda: collectives.parse_size("12XB"), "12XB"),
    ],
)
def test_bad_input_names_the_value(call, named):
    with pytest.raises(ConfigError, match=named):
        call()


def test_collectives_command_measures_checks_and_writes_parquet(tmp_path):
    done = run_ddpbench(
        "collectives", "--gpus", "2", "--sizes", "1KB:8KB", "--iters", "3", "--warmup", "1",
        "--results", str(tmp_path), "--run-id", "c",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    frame = store.read_collectives(tmp_path / "c")
    assert sorted(frame["op"].unique()) == sorted(collectives.OPS)
    assert sorted(frame["bytes"].unique()) == [1024, 2048, 4096, 8192]
    assert frame["correct"].all()
    assert (frame["world_size"] == 2).all()
    factors = frame["op"].map(lambda op: collectives.bus_factor(op, 2))
    pd.testing.assert_series_equal(frame["busbw_gbps"], frame["algbw_gbps"] * factors, check_names=False)
    assert (frame["algbw_gbps"] - frame["bytes"] / frame["time_us"] / 1e3).abs().max() < 1e-9
    meta = store.read_json(tmp_path / "c" / "collectives" / "run.json")
    assert meta["kind"] == "collectives" and meta["environment"]["hostname"]
    contention = store.read_contention(tmp_path / "c")
    assert len(contention) == 1 and contention["compute_slowdown"].iloc[0] >= 1.0


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--ops", "all_reduce,bogus"], "bogus"),
        (["--sizes", "64MB:1KB"], "64MB:1KB"),
        (["--gpus", "1"], "--gpus 1"),
        (["--backend", "mpi"], "mpi"),
    ],
)
def test_bad_collectives_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, flags, named):
    assert cli.main(["collectives", *flags, "--results", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert named in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_every_new_column_is_documented_in_docs_results_md():
    from pathlib import Path

    documented = (Path(__file__).resolve().parent.parent / "docs" / "results.md").read_text()
    schemas = (store.COLLECTIVE_SCHEMA, store.CONTENTION_SCHEMA, store.GRADPROFILE_SCHEMA, store.PREDICTION_SCHEMA,
               store.FLOOR_SCHEMA)  # fmt: skip
    for schema in schemas:
        missing = [name for name in schema.names if f"`{name}`" not in documented]
        assert not missing, f"undocumented columns: {missing}"

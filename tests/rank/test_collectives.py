"""`ddpbench collectives`: bus-bandwidth factors, input parsing, the command end to end on 2 CPU
ranks, and a rank killed in the middle, diagnosed by the same supervised launch as `bench`'s."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from conftest import run_ddpbench
from dist_helpers import processes_of

from harness import cli
from harness.config import collectives as plan
from harness.config import units
from harness.config.bench import ConfigError
from harness.launch import collectives as launch_collectives
from harness.rank import collectives
from harness.results import model_tables, store


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
    assert units.parse_bytes("1KB") == 1024
    assert units.parse_bytes("256MB") == 256 * 1024**2
    assert plan.parse_size_range("1KB:8KB") == (1024, 8192)
    assert plan.message_sizes(1024, 8192) == [1024, 2048, 4096, 8192]
    assert plan.message_sizes(1024, 5000) == [1024, 2048, 4096]


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda: plan.parse_ops("all_reduce,alltoall"), "alltoall"),
        (lambda: plan.parse_size_range("1MB:1KB"), "1MB:1KB"),
        (lambda: plan.parse_size_range("1KB"), "1KB"),
        (lambda: units.parse_bytes("12XB"), "12XB"),
    ],
)
def test_bad_input_names_the_value(call, named):
    with pytest.raises(ConfigError, match=named):
        call()


@pytest.fixture(scope="module")
def collectives_run(tmp_path_factory) -> Path:
    """`ddpbench collectives --gpus 2` on small messages, once for the tests that read it."""
    results = tmp_path_factory.mktemp("collectives")
    done = run_ddpbench(
        "collectives", "--gpus", "2", "--sizes", "1KB:8KB", "--iters", "3", "--warmup", "1",
        "--results", str(results), "--run-id", "c",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "world size 2 done" in done.stdout
    assert f" -m harness report --results {results}`)" in done.stdout  # its page's command as this one was typed
    return results / "c"


def test_collectives_command_measures_checks_and_writes_parquet(collectives_run):
    frame = model_tables.read_collectives(collectives_run)
    assert sorted(frame["op"].unique()) == sorted(plan.OPS)
    assert sorted(frame["bytes"].unique()) == [1024, 2048, 4096, 8192]
    assert frame["correct"].all()
    assert (frame["world_size"] == 2).all()
    factors = frame["op"].map(lambda op: collectives.bus_factor(op, 2))
    pd.testing.assert_series_equal(frame["busbw_gbps"], frame["algbw_gbps"] * factors, check_names=False)
    assert (frame["algbw_gbps"] - frame["bytes"] / frame["time_us"] / 1e3).abs().max() < 1e-9
    meta = store.read_json(collectives_run / "run.json")
    assert meta["kind"] == "collectives" and meta["environment"]["hostname"]
    assert model_tables.list_collectives_runs(collectives_run.parent) == [collectives_run]
    assert store.list_runs(collectives_run.parent) == []  # not a bench run
    contention = model_tables.read_contention(collectives_run)
    assert len(contention) == 1 and contention["compute_slowdown"].iloc[0] >= 1.0


def assert_every_table_folder_reads_with_pandas(run: Path) -> list[str]:
    """A folder holding a Parquet part holds Parquet parts only (names beginning with '.' are
    hidden from readers), and pandas reads it whole. Returns the table folders found."""
    tables = []
    for folder in sorted(p for p in run.rglob("*") if p.is_dir() and not p.name.startswith(".")):
        visible = [p for p in folder.iterdir() if not p.name.startswith(".")]
        if not any(p.suffix == ".parquet" for p in visible):
            continue
        others = sorted(p.name for p in visible if not (p.is_file() and p.suffix == ".parquet"))
        assert not others, f"{folder} holds more than Parquet parts: {others}"
        assert len(pd.read_parquet(folder)) > 0, folder
        tables.append(str(folder.relative_to(run)))
    return tables


def test_every_table_folder_of_a_collectives_run_reads_with_pandas(collectives_run):
    assert assert_every_table_folder_reads_with_pandas(collectives_run) == ["collectives", "contention"]
    assert (collectives_run / "logs" / "world-2.log").is_file()  # the logs are the run's, beside the tables
    columns = set(pd.read_parquet(collectives_run / "collectives").columns)
    assert set(model_tables.COLLECTIVE_SCHEMA.names) <= columns


def test_every_table_folder_of_a_bench_run_reads_with_pandas(small_run):
    assert {"configs", "steps", "ranks"} <= set(assert_every_table_folder_reads_with_pandas(small_run))


def test_a_killed_rank_is_named_with_its_signal_and_no_rank_is_left(tmp_path, monkeypatch):
    """The supervised launch, not a bare subprocess: rank 1 killed at its second case is the cause
    reported, the launch is down, and what it measured before (its first case) is kept, said so."""
    monkeypatch.setenv("DDPBENCH_FAULT", "kill:impl=collectives,world=2,rank=1,step=1")
    config = plan.CollectivesConfig(gpus=2, ops=("all_reduce",), sizes=(1024, 4096), iters=2, warmup=0,
                                    device="cpu", backend="gloo", results=tmp_path, contention=False)  # fmt: skip
    with pytest.raises(launch_collectives.LaunchFailed) as failed:
        launch_collectives.run_collectives(config, run_id="killed", environment={})
    assert failed.value.failure["error_kind"] == "killed"
    assert failed.value.failure["error"].startswith("rank 1 killed by SIGKILL"), failed.value.failure
    assert "all_reduce message size" in failed.value.failure["error"]  # where it was, from rank 0's hint
    run = tmp_path / "killed"
    kept = model_tables.read_collectives(run)  # a rank out of memory at size 23 once lost the 22 before it
    assert (
        kept["bytes"].tolist() == [1024]
        and failed.value.kept == 1
        and "kept: the 1 op × size row measured" in str(failed.value)
    )
    assert not model_tables.collectives_partial(run, 2).exists()
    assert failed.value.log == run / "logs" / "world-2.log"
    assert not processes_of(run)


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--ops", "all_reduce,bogus"], "bogus"),
        (["--sizes", "64MB:1KB"], "64MB:1KB"),
        (["--sizes", "1KB:"], "--sizes '1KB:' is not valid: '' is not a size; give MIN:MAX"),
        (["--sizes", "6:64"], "MIN a multiple of 4 (whole floats)"),
        (["--sizes", "1KB:2KB:3"], "--sizes '1KB:2KB:3' is not a range; give MIN:MAX"),
        (["--gpus", "1"], "--gpus 1"),
        (["--backend", "mpi"], "mpi"),
        (["--nnodes", "2"], "--nnodes above 1 needs --rdzv-endpoint HOST:PORT"),
        (["--nnodes", "2", "--rdzv-endpoint", "localhost:29400"], "--nnodes above 1 needs --run-id"),
        (["--node-rank", "1"], "--node-rank 1 is not valid with --nnodes 1; give 0 (one node)"),
        (["--rdzv-endpoint", "node0:http"], "--rdzv-endpoint 'node0:http' is not valid"),
    ],
)
def test_bad_collectives_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, flags, named, no_early_ranks):
    assert cli.main(["collectives", *flags, "--results", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert named in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_every_new_column_is_documented_in_docs_results_md():
    from pathlib import Path

    documented = (Path(__file__).resolve().parents[2] / "docs" / "results.md").read_text()
    schemas = (model_tables.COLLECTIVE_SCHEMA, model_tables.CONTENTION_SCHEMA, model_tables.GRADPROFILE_SCHEMA,
               model_tables.PREDICTION_SCHEMA, model_tables.FLOOR_SCHEMA)  # fmt: skip
    for schema in schemas:
        missing = [name for name in schema.names if f"`{name}`" not in documented]
        assert not missing, f"undocumented columns: {missing}"


def test_across_nodes_every_world_size_spans_them():
    """The ladder is each node's ranks, times the nodes: one rank a node still measures the network between them."""
    across = {"device": "cpu", "backend": "gloo", "sizes": (1024, 4096), "iters": 1, "warmup": 0, "run_id": "job",
              "rdzv_endpoint": "localhost:29400"}  # fmt: skip
    assert plan.CollectivesConfig(gpus=1, nnodes=2, **across).world_sizes == [2]
    assert plan.CollectivesConfig(gpus=4, nnodes=2, **across).world_sizes == [2, 4, 8]
    assert plan.CollectivesConfig(gpus=4, device="cpu", backend="gloo", sizes=(1024, 4096), iters=1,
                                  warmup=0).world_sizes == [2, 4]  # fmt: skip


def test_another_node_launches_through_the_rendezvous_into_node_0s_folder_and_writes_no_run_json(tmp_path, monkeypatch):
    """Node 1 joins the folder node 0 makes, keeps its own plan and log, and ends with its ranks: rank 0, on node 0,
    writes the rows (on node-local disks never seen here), so no part is no failure of node 1's."""
    from harness.launch.torchrun import LaunchEnd

    launched = {}

    def fake_launch(module, plan_path, world, *, run, name, rendezvous, **_):
        launched.update(world=world, name=name, flags=rendezvous.flags(), plan=plan_path)
        return LaunchEnd(0, run / "logs" / f"{name}.log", None, True)

    monkeypatch.setattr(launch_collectives, "launch_ranks", fake_launch)
    monkeypatch.setattr(launch_collectives, "wait_for_node_zero", lambda run: None)  # no node 0 to wait for
    config = plan.CollectivesConfig(gpus=1, ops=("all_reduce",), sizes=(1024, 4096), iters=2, warmup=0, device="cpu",
                                    backend="gloo", results=tmp_path, run_id="job", nnodes=2, node_rank=1,
                                    rdzv_endpoint="localhost:29400")  # fmt: skip
    assert launch_collectives.run_collectives(config, run_id="job", environment={}) == tmp_path / "job"
    assert (launched["world"], launched["name"]) == (2, "world-2.node1")
    assert {"--nnodes=2", "--node-rank=1", "--rdzv-endpoint=localhost:29400", "--rdzv-id=job"} <= set(launched["flags"])
    assert store.read_json(launched["plan"])["context"]["nnodes"] == 2  # every row says how many nodes it spanned
    assert not (tmp_path / "job" / "run.json").exists()  # node 0's to write

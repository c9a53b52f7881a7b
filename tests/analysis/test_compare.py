"""`ddpbench compare`: verdicts on synthetic runs, the exit code that gates CI, environment warnings."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import run_ddpbench

from harness import cli
from harness.results import store

KEYS = {"impl": "stock", "impl_options": "{}", "workload": "mlp", "size": "tiny", "world_size": 2, "nnodes": 1}
KEYS |= {"batch_size": 8, "dtype": "fp32", "optimizer": "sgd", "device": "cpu", "status": "ok"}


def synthetic_run(
    results, run_id: str, *, mean_ms: float, seed: int, torch_version: str = "2.x", impl: str = "stock"
) -> None:
    """A run with one configuration whose 2 ranks took normally distributed step times."""
    meta = {"run_id": run_id, "started_at": run_id, "device": "cpu", "configurations": [{"world_size": 2}]}
    meta["environment"] = {"torch_version": torch_version, "hostname": "h"}
    store.write_json(results / run_id / "run.json", meta)
    times = np.random.default_rng(seed).normal(mean_ms, mean_ms * 0.03, size=(2, 40))
    steps = [
        {"run_id": run_id, "config_id": "c0", "rank": r, "step": s, "warmup": False, "step_ms": float(times[r, s])}
        for r in range(2)
        for s in range(40)
    ]
    row = {"run_id": run_id, "config_id": "c0", **KEYS, "impl": impl}
    store.write_configuration(results / run_id, "c0", row, steps)


def run_compare(capsys, results, base, new, *extra):
    code = cli.main(["compare", base, new, "--results", str(results), "--out", str(results.parent / "site"), *extra])
    return code, capsys.readouterr()


def test_two_runs_of_the_same_distribution_show_no_significant_change_and_exit_0(tmp_path, capsys):
    synthetic_run(tmp_path / "r", "a", mean_ms=100, seed=1)
    synthetic_run(tmp_path / "r", "b", mean_ms=100, seed=2)
    code, out = run_compare(capsys, tmp_path / "r", "a", "b")
    assert code == 0 and "no significant change" in out.out
    page = (tmp_path / "site" / "compare" / "a_vs_b.html").read_text()
    assert "no significant change" in page


def test_a_run_ten_percent_slower_is_flagged_and_exits_1(tmp_path, capsys):
    synthetic_run(tmp_path / "r", "a", mean_ms=100, seed=1)
    synthetic_run(tmp_path / "r", "b", mean_ms=110, seed=2)
    code, out = run_compare(capsys, tmp_path / "r", "a", "b")
    assert code == 1 and ": slower" in out.out and "1 significantly slower" in out.out


def test_a_higher_threshold_lets_a_ten_percent_change_pass(tmp_path, capsys):
    synthetic_run(tmp_path / "r", "a", mean_ms=100, seed=1)
    synthetic_run(tmp_path / "r", "b", mean_ms=110, seed=2)
    code, _ = run_compare(capsys, tmp_path / "r", "a", "b", "--threshold", "15%")
    assert code == 0


def test_different_environments_are_warned_about(tmp_path, capsys):
    synthetic_run(tmp_path / "r", "a", mean_ms=100, seed=1, torch_version="2.4")
    synthetic_run(tmp_path / "r", "b", mean_ms=100, seed=2, torch_version="2.14")
    _, out = run_compare(capsys, tmp_path / "r", "a", "b")
    assert "warning: torch_version differs: '2.4' vs '2.14'" in out.err


@pytest.mark.parametrize(("args", "named"), [(["nope", "a"], "'nope'"), (["a", "a", "--threshold", "x"], "'x'")])
def test_bad_compare_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, args, named):
    synthetic_run(tmp_path / "r", "a", mean_ms=100, seed=1)
    code, out = run_compare(capsys, tmp_path / "r", *args)
    assert code == 2 and named in out.err and out.err.count("\n") == 1
    assert not (tmp_path / "site").exists()


def test_runs_of_two_strategies_compare_only_when_asked_to_match_across_strategies(tmp_path, capsys):
    synthetic_run(tmp_path / "r", "naive", mean_ms=100, seed=1, impl="naive")
    synthetic_run(tmp_path / "r", "bucketed", mean_ms=60, seed=2, impl="bucketed")
    code, out = run_compare(capsys, tmp_path / "r", "naive", "bucketed")
    assert code == 0 and "0 configuration(s) matched" in out.out
    code, out = run_compare(capsys, tmp_path / "r", "naive", "bucketed", "--across-strategies")
    assert code == 0 and "naive -> bucketed" in out.out and ": faster" in out.out
    code, out = run_compare(capsys, tmp_path / "r", "bucketed", "naive", "--across-strategies")
    assert code == 1 and ": slower" in out.out


def test_compare_names_and_skips_a_corrupt_part_and_refuses_a_newer_schema(tmp_path):
    results = tmp_path / "r"
    synthetic_run(results, "a", mean_ms=100, seed=1)
    synthetic_run(results, "b", mean_ms=100, seed=2)
    (results / "b" / "steps" / "torn.parquet").write_bytes(b"PAR1")
    done = run_ddpbench("compare", "a", "b", "--results", str(results), "--out", str(tmp_path / "site"))
    assert done.returncode == 0, done.stderr
    assert f"ddpbench: warning: skipping {results / 'b' / 'steps' / 'torn.parquet'}: unreadable Parquet" in done.stderr

    newer = {"run_id": "b", "config_id": "c9", **KEYS, "schema_version": store.SCHEMA_VERSION + 1}
    pq.write_table(pa.Table.from_pylist([newer]), results / "b" / "configs" / "c9.parquet")
    done = run_ddpbench("compare", "a", "b", "--results", str(results), "--out", str(tmp_path / "site"))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"ddpbench: error: {results / 'b' / 'configs' / 'c9.parquet'} has schema version {store.SCHEMA_VERSION + 1}, "
        f"newer than the {store.SCHEMA_VERSION} this ddpbench reads; upgrade ddpbench to read it"
    ]

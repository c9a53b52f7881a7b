"""Shared fixtures. The end-to-end run is made once per session: each torchrun launch costs
seconds of interpreter start-up, so several tests read the same small run."""

from __future__ import annotations

import gc
import pickle
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from filelock import FileLock

from harness.rank.dist import distributed_session

# The order files run in is pytest-xdist's: `--dist loadfile` hands out the files with the most tests first
# (its --loadscope-reorder, on by default since 3.7), so the few-test files whose fixtures launch whole bench
# runs come last, while the other worker runs many short ones beside them. Handing out the heaviest files
# first instead (an earlier HEAVY_FIRST list, with the reorder off) put two launching files side by side on
# two cores: 410 s against 362 s for the same suite on a quiet machine, 2026-12-01.


PROJECT = Path(__file__).resolve().parent.parent


def run_ddpbench(*args: str, cwd: Path | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    """The real command line, in a fresh interpreter, as a user types it."""
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd or PROJECT,
    )


def shared_folder(request, tmp_path_factory, name: str) -> Path:
    """A folder every test worker of this session sees (pytest-xdist's workers share the base temp's parent)."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if hasattr(request.config, "workerinput") else base) / name


@pytest.fixture(scope="session")
def small_run(request, tmp_path_factory) -> Path:
    """`ddpbench bench --gpus 2` over the whole strategy ladder on mlp/tiny: 6 strategies × 2 world sizes.
    Made once per test session, whichever worker asks first (the others wait on the lock); read only."""
    results = shared_folder(request, tmp_path_factory, "small-run-results")
    with FileLock(str(results) + ".lock"):
        if not (results / "e2e" / "summary.json").is_file():
            shutil.rmtree(results, ignore_errors=True)
            _make_small_run(results)
    return results / "e2e"


def _make_small_run(results: Path) -> None:
    done = run_ddpbench(
        "bench", "--gpus", "2", "--impls", "naive,flat,stock,bucketed,dataparallel", "--workloads", "mlp",
        "--size", "tiny", "--steps", "4", "--warmup", "2", "--results", str(results), "--run-id", "e2e", "--profile",
        "--bucket-timeline", "--repeats", "1",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="session")
def network_site(request, tmp_path_factory):
    """The golden bucket sweep beside a collectives run (test_netreport.network_results) and their site on dgx-h100,
    as (results, BuiltSite): made once per test session, whichever worker asks first (test_netreport and
    test_browser each made their own, seconds of measuring and building). Read only (a `predict --run` of them
    rewrites their model tables as they were): a test that changes the runs or writes into the site copies it first."""
    from test_netreport import network_results

    from harness.perfmodel.clusters import cluster
    from reports import site

    root = shared_folder(request, tmp_path_factory, "network-site")
    made = root / "built.pickle"
    with FileLock(str(root) + ".lock"):
        if not made.is_file():
            shutil.rmtree(root, ignore_errors=True)
            built = site.build_site(results=network_results(root), out=root / "site", cluster=cluster.load("dgx-h100"))
            made.write_bytes(pickle.dumps(built))
    return root / "results", pickle.loads(made.read_bytes())


@pytest.fixture(scope="session")
def golden_site(tmp_path_factory):
    """`report` over the golden runs in tests/data/: built once per test worker (test_report, test_answer and
    test_browser once built it three times, seconds each) for the tests that only read it."""
    from reports import site

    return site.build_site(results=PROJECT / "tests" / "data", out=tmp_path_factory.mktemp("golden-site"))


@pytest.fixture(autouse=True)
def no_zygote_outlives_its_test():
    """A command run in this process (`cli.main`) may start its ranks' zygote early and then refuse its input:
    the zygote, still importing torch, would hold one of the two cores until the next one replaced it (each
    test's environment differs by PYTEST_CURRENT_TEST, so none is reused across tests)."""
    yield
    if "harness.launch.zygote" in sys.modules:
        sys.modules["harness.launch.zygote"].close_all()


@pytest.fixture
def no_early_ranks():
    """For a test whose command launches nothing (it refuses its input, or the test stops it before its launch):
    `bench` and `collectives` begin their ranks' imports before their checks (tests/bad_input.py: no_early_ranks)."""
    from bad_input import no_early_ranks

    with no_early_ranks():
        yield


@pytest.fixture
def single_rank(monkeypatch):
    """A one-rank gloo process group in this process, as torchrun would set it up."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for key, value in {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("MASTER_PORT", str(port))
    with distributed_session(device_kind="cpu", timeout_s=60) as session:
        yield session


# The files that take longest (pytest --durations=0 on this 2-core machine: 20-75 s each). xdist's reorder (above)
# sorts the files by their count of tests after this sort, so this order only breaks its ties: among files of as
# many tests, the longest is handed out first and leaves the other worker idle for less at the end.
LONGEST_FIRST = (
    "launch/test_faults.py", "reporter/test_browser.py", "test_end_to_end_your_model.py", "launch/test_multinode.py",
    "plugins/test_impls_contract.py", "measure/test_memory.py", "plugins/test_ddp_layout.py",
    "test_end_to_end_workloads.py", "test_end_to_end_repeats_auto.py", "plugins/test_sharded.py",
)  # fmt: skip


def pytest_collection_modifyitems(config, items):
    tests = Path(__file__).resolve().parent

    def rank(item) -> int:
        name = item.path.relative_to(tests).as_posix() if item.path.is_relative_to(tests) else ""
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: each file's own order is kept


def pytest_configure(config):
    """The suite's own cache folder (`list`, `predict` and `report` keep the meta device's counts in
    XDG_CACHE_HOME: harness.measure.meta_counts): a test writes nothing into the user's, and the suite starts from
    nothing, as on a fresh machine."""
    import atexit
    import os
    import tempfile

    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="ddpbench-test-cache-")
    atexit.register(shutil.rmtree, os.environ["XDG_CACHE_HOME"], ignore_errors=True)


def pytest_collection_finish(session):
    """What collection imported (torch, pandas, every test module) lives for the whole session: later garbage
    collections skip it, as a rank's do after harness.rank.housekeeping.freeze_survivors. Each configuration
    measured in this process runs a full collection (its housekeeping); over this heap each cost 0.4 s."""
    gc.collect()
    gc.freeze()

"""`--repeats auto` on real CPU ranks, at world size 2 (through the launcher's API, as
tests/test_end_to_end_slow_rank.py does): naive against stock, and stock's cap swept (1 and 25 MiB),
naive held 100 ms a step on rank 1 (DDPBENCH_FAULT slow) so that its verdict is plain, mlp/tiny so that
the cap's is not. Each round must run exactly the configurations an open verdict rested on, up to the next
look; run.json and the summary must hold every round; `bench --resume` must go on deciding.
"""

from __future__ import annotations

import contextlib
import io
import shutil
import time

import pytest

from harness import cli
from harness.analysis import decide
from harness.config.bench import BenchConfig
from harness.config.grid import Configuration, expand
from harness.launch import launcher as launch
from harness.launch import repeats
from harness.results import store

MAX_REPEATS = 4


@pytest.fixture(scope="module")
def auto_run(tmp_path_factory):
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("DDPBENCH_FAULT", "slow:impl=naive,rank=1,ms=100")
    results = tmp_path_factory.mktemp("auto")
    config = BenchConfig(gpus=2, impls=("stock", "naive"), baseline=False, options=(("bucket_cap_mb", ("1", "25")),),
                         size="tiny", steps=3, warmup=1, parity=False, mem_period_ms=0.0, max_repeats=MAX_REPEATS,
                         results=results)  # fmt: skip
    configurations = [c for c in expand(config, device="cpu") if c.world_size == 2]
    plan = launch.create_run(config, configurations, run_id="auto", device="cpu", environment={})
    began = time.monotonic()
    launch.run_groups(config, plan, on_written=lambda cfg: None)
    rounds: list[tuple[repeats.Decided, list[Configuration]]] = []
    repeats.until_decided(config, plan, began=began, on_round=lambda s, more: rounds.append((s, more)),
                          on_written=lambda cfg: None)  # fmt: skip
    monkeypatch.undo()
    return results, plan, rounds


def test_each_round_runs_exactly_what_an_open_verdict_rests_on(auto_run):
    _, plan, rounds = auto_run
    every = {c["config_id"]: Configuration.from_json(c) for c in store.read_run_meta(plan.run)["configurations"]}
    assert (store.read_configs(plan.run)["status"] == "ok").all()
    for standing, more in rounds:
        if standing.stopped_by:
            continue  # the last look: nothing more may run
        wanted = {repeats.identity(every[i]) for i in decide.open_config_ids(standing.verdicts)}
        assert {repeats.identity(c) for c in more} == wanted
    first, _ = rounds[0]
    naive = next(v for v in first.verdicts if v.kind == decide.STRATEGY)
    assert naive.subject == "w2 mlp/tiny naive vs stock bucket_cap_mb=25.0"
    last, more = rounds[-1]
    assert not more
    decided_naive = next(v for v in last.verdicts if v.kind == decide.STRATEGY)
    assert decided_naive.decided and decided_naive.word.startswith("slower"), decided_naive
    counts = store.read_configs(plan.run).groupby("impl")["config_id"].count()
    assert counts["naive"] < MAX_REPEATS  # decided before the last look: not run to the end
    if last.open:  # the cap's verdict, on tiny steps, may stay open: then only by the last look
        assert last.stopped_by == "max-repeats" and counts["stock"] == 2 * MAX_REPEATS


def test_run_json_and_the_summary_hold_every_round(auto_run):
    _, plan, _ = auto_run
    meta = store.read_run_meta(plan.run)
    assert {c["config_id"] for c in meta["configurations"]} == store.written_config_ids(plan.run)
    assert {c.config_id for c in plan.configurations} == store.written_config_ids(plan.run)  # the session's own
    assert meta["config"]["repeats"] == "auto"


def test_resume_of_an_auto_run_runs_what_is_left_then_goes_on_deciding(auto_run, tmp_path):
    _, plan, _ = auto_run
    copy = tmp_path / "results"
    shutil.copytree(plan.run, copy / "auto")
    last = store.read_run_meta(copy / "auto")["configurations"][-1]["config_id"]
    (copy / "auto" / "configs" / f"{last}.parquet").unlink()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["bench", "--resume", "auto", "--results", str(copy)])
    assert code == 0, out.getvalue()
    assert last in store.written_config_ids(copy / "auto")
    said = [line for line in out.getvalue().splitlines() if line.startswith("ddpbench: repeats auto:")]
    assert said and "verdicts decided after" in said[-1], out.getvalue()

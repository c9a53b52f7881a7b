"""`--repeats auto` on real CPU ranks, at world size 2: naive against stock, and stock's cap swept (0.005 and
25 MiB: two buckets of mlp/tiny's 0.009 MiB of gradients against one; at 1 and 25 every cap makes the same one
bucket, decided flat at once), naive held 500 ms a step on rank 1 (DDPBENCH_FAULT slow) so that its verdict is
plain, mlp/tiny so that the cap's is not. The first round runs through the launcher's API (as
tests/test_end_to_end_slow_rank.py does), as if the run had stopped there; `bench --resume` must then go on
deciding, round by round, each round running exactly the configurations an open verdict rested on, up to the
next look.
"""

from __future__ import annotations

import collections
import contextlib
import io
import itertools
import re

import pytest

from harness import cli
from harness.analysis.verdicts import decide
from harness.analysis.verdicts import history as answer_history
from harness.config import grid
from harness.config.bench import BenchConfig
from harness.config.grid import Configuration, expand
from harness.launch import bench_run
from harness.launch import launcher as launch
from harness.results import store
from reports import site
from reports.pages import evidence
from reports.pages.run import run_page

MAX_REPEATS = 5  # a look (at 4) before the last, to spare a loaded machine's noisy reference


def bench(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["bench", *args])
    return code, out.getvalue()


@pytest.fixture(scope="module")
def auto_run(tmp_path_factory):
    monkeypatch = pytest.MonkeyPatch()
    # The naive verdict rests on stock's few-ms medians, which swing most under load (the interval is on the
    # ratio's log, so a longer hold buys little): at 3 steps a repeat it once stayed open to the last look in
    # CI's `make test`; a median of 5 steps needs 3 stalled ones to move.
    # And the cap's verdict must be open after the first round whatever the machine's noise: on a quiet one
    # mlp/tiny's second bucket alone once decided it at two repeats (nothing left to resume); 25 MiB's second
    # repeat at 0.005 MiB held 20 ms a step keeps its two repeats apart (25 MiB, naive's reference, is left alone).
    monkeypatch.setenv(
        "DDPBENCH_FAULT", "slow:impl=naive,rank=1,ms=500;slow:impl=stock,cap=0.005,repeat=1,rank=1,ms=20"
    )
    results = tmp_path_factory.mktemp("auto")
    caps = (("bucket_cap_mb", ("0.005", "25")),)
    config = BenchConfig(gpus=2, impls=("stock", "naive"), baseline=False, options=caps, size="tiny", steps=5,
                         warmup=1, parity=False, mem_period_ms=0.0, max_repeats=MAX_REPEATS,
                         results=results)  # fmt: skip
    configurations = [c for c in expand(config, device="cpu") if c.world_size == 2]
    plan = bench_run.create_run(config, configurations, run_id="auto", device="cpu", environment={})
    launch.run_groups(config, plan, on_written=lambda cfg: None)  # the first round (two repeats), then a stop
    code, out = bench("--resume", "auto", "--results", str(results))
    monkeypatch.undo()
    return results, plan.run, code, out


def rounds(run) -> list[tuple[int, set[str], set[str]]]:
    """Per look that asked for a round: (the most repeats a configuration had at it, the configurations open at
    it and short of --max-repeats, those its round ran), configurations as grid.identity keys, judged again
    from the rows that look saw (run.json's look_sizes). A round is read from the run's own record, not from
    repeat numbers: a verdict decided at one look may reopen at the next when the repeats another verdict
    asked for move its reference, and then runs its next repeat a round later than its number suggests."""
    meta = store.read_run_meta(run)
    every = [Configuration.from_json(c) for c in meta["configurations"]]
    configs, steps = store.read_configs(run), store.read_steps(run)
    by_id = {c.config_id: grid.identity(c) for c in every}
    sizes = [*meta["look_sizes"], len(every)]
    found = []
    for (size, following), seen in zip(
        itertools.pairwise(sizes), answer_history.live_looks(meta, configs), strict=False
    ):
        verdicts = decide.verdicts(seen, steps, confidence=decide.look_confidence(MAX_REPEATS),
                                   max_repeats=MAX_REPEATS)  # fmt: skip
        had = collections.Counter(by_id[i] for i in seen["config_id"])
        opened = {by_id[i] for i in decide.open_config_ids(verdicts) if had[by_id[i]] < MAX_REPEATS}
        ran = {grid.identity(c) for c in every[size:following]}
        found.append((max(had.values()), opened, ran))
    return found


def test_the_resume_goes_on_deciding_and_each_round_runs_exactly_what_was_open(auto_run):
    _, run, code, out = auto_run
    assert code == 0, out
    said = r"are written; --repeats auto goes on deciding its (1 open verdict|2 open verdicts) up to its --max-repeats"
    assert re.search(rf"{said} {MAX_REPEATS}, at world size 2\n", out), out
    assert "world sizes []" not in out and "0 configurations" not in out  # no plan of nothing
    assert len(store.read_run_meta(run)["sessions"]) == 2  # the run's first session, then this resume
    assert (store.read_configs(run)["status"] == "ok").all()
    found = rounds(run)
    assert found, "the resume ran no round"
    for look, opened, ran in found:
        assert ran == opened, f"at the look after {look} repeats"
    # and the last look, which asked for no round: whatever is open there has run to --max-repeats
    configs = store.read_configs(run)
    final = decide.verdicts(configs, store.read_steps(run), confidence=decide.look_confidence(MAX_REPEATS),
                            max_repeats=MAX_REPEATS)  # fmt: skip
    short = configs[configs["config_id"].isin(decide.open_config_ids(final))].groupby(["impl", "impl_options"]).size()
    assert (short >= MAX_REPEATS).all(), short
    naive = store.read_configs(run).query("impl == 'naive'")
    stock = store.read_configs(run).query("impl == 'stock'")[["impl_options", "repeat", "step_ms_median"]]
    # its verdict was decided before the last look: not run to the end
    assert len(naive) < MAX_REPEATS, (list(naive["step_ms_median"]), stock.to_string())
    said = [line for line in out.splitlines() if line.startswith("ddpbench: repeats auto:")]
    assert "every verdict decided" in said[-1] or "left open (--max-repeats reached)" in said[-1], out
    (naive_line,) = [line for line in out.splitlines() if line.startswith("  w2 mlp/tiny naive vs stock")]
    assert ": slower, at " in naive_line  # listed with its word, among the decided ones


def test_run_json_and_the_summary_hold_every_round(auto_run):
    _, run, _, _ = auto_run
    meta = store.read_run_meta(run)
    assert {c["config_id"] for c in meta["configurations"]} == store.written_config_ids(run)
    assert meta["config"]["repeats"] == "auto"
    summary = store.read_json(run / "summary.json")
    rounds_ran = {c["config_id"] for c in meta["configurations"] if c["repeat"] >= 2}
    steps = store.read_steps(run)
    assert summary["session"]["training_step_s"] == pytest.approx(
        steps[steps["config_id"].isin(rounds_ran)].groupby(["config_id", "step"])["step_ms"].max().sum() / 1000.0
    )  # the resumed session ran the later rounds, and counts every one of their steps


def test_a_decided_auto_run_has_nothing_to_resume(auto_run):
    results, run, _, _ = auto_run
    before = sorted(p.name for p in (run / "configs").iterdir())
    code, out = bench("--resume", "auto", "--results", str(results))
    assert code == 0 and "nothing to resume" in out, out
    assert sorted(p.name for p in (run / "configs").iterdir()) == before


def test_the_run_page_says_when_each_verdict_was_decided(auto_run):
    _, run, _, _ = auto_run
    meta, configs = store.read_run_meta(run), store.read_configs(run)
    history = answer_history.run_history(meta, configs, store.read_steps(run))
    subject = "w2 mlp/tiny naive vs stock bucket_cap_mb=25"
    naive = history.set_index("subject").loc[subject]
    assert naive["decided"] and 2 <= naive["decided_after"] < MAX_REPEATS  # it stopped once decided
    assert meta["look_sizes"]  # each look that asked for a round recorded what it saw
    ran = configs[(configs["impl"] == "naive") & (configs["world_size"] == 2)]
    assert naive["decided_after"] == len(ran)  # named at the look that stopped it, as the run decided it
    assert len(history) == len(decide.verdicts(store.read_configs(run), store.read_steps(run),
                                               confidence=decide.look_confidence(MAX_REPEATS)))  # fmt: skip
    page = run_page.run_page(site.read_run(run))
    assert "When each verdict was decided" in page
    decided = f"<td>{subject}</td><td>against the reference</td><td>after {int(naive['decided_after'])} repeats</td>"
    assert decided in page
    for row in history.itertuples():  # open ones too, with how many repeats they had
        assert f"<td>{row.subject}</td><td>{row.kind}</td><td>{evidence.decided_text(row)}</td>" in page

"""The gap over `local` and the slow rank, on real CPU ranks: one launch at world size 2 (through the
launcher's API, as tests/launch/test_faults.py does), two repeats, rank 1 held 100 ms before each
backward in repeat 1 only (DDPBENCH_FAULT slow). Every strategy that synchronises must name rank 1
there and no rank in the quiet repeat, and each configuration's parts must add up to its gap. 20 measured
steps of mlp/tiny: mlp/small's longer steps made the naming flaky (another worker's ranks descheduling
rank 0 now and then). The 95 % rule lets one step of 20 go to a rank the host stalled longer than the
hold; a 30 ms hold was not enough on a loaded machine (flat's rank 0 stalled 81 ms between two steps under
8 busy loops on the 2 cores, and a full suite beside other work once named no rank for bucketed), so the
hold is longer than such stalls and the steps fewer (the file takes 20 s here, 12 s before).
"""

from __future__ import annotations

import pytest

from harness.analysis import gap
from harness.commands import bench
from harness.config.bench import BenchConfig
from harness.config.grid import expand
from harness.launch import bench_run
from harness.launch import launcher as launch
from harness.results import store

SYNCHRONISING = ("stock", "bucketed", "naive", "flat")
HELD_MS = 100


@pytest.fixture(scope="module")
def slow_run(tmp_path_factory, request):
    monkeypatch = pytest.MonkeyPatch()
    request.addfinalizer(monkeypatch.undo)
    monkeypatch.setenv("DDPBENCH_FAULT", f"slow:rank=1,ms={HELD_MS},repeat=1")
    results = tmp_path_factory.mktemp("slow")
    config = BenchConfig(gpus=2, impls=SYNCHRONISING, size="tiny", steps=20, warmup=2, repeats=2, parity=False,
                         bucket_timeline=True, results=results)  # fmt: skip
    configurations = [c for c in expand(config, device="cpu") if c.world_size == 2]
    plan = bench_run.create_run(config, configurations, run_id="slow", device="cpu", environment={})
    launch.run_groups(config, plan, on_written=lambda cfg: None)
    return plan.run


@pytest.fixture(scope="module")
def rows(slow_run):
    configs = store.read_configs(slow_run)
    assert (configs["status"] == "ok").all(), configs[["config_id", "status", "error"]]
    return configs


def test_the_held_rank_is_named_in_the_slow_repeat_and_none_in_the_quiet_one(rows):
    synced = rows[rows["impl"].isin(SYNCHRONISING)].set_index(["impl", "repeat"])
    for impl in SYNCHRONISING:
        slow, quiet = synced.loc[(impl, 1)], synced.loc[(impl, 0)]
        assert slow["slowest_rank"] == 1, (impl, slow["slowest_rank_late_ms"], slow["slowest_rank_share"])
        assert slow["slowest_rank_late_ms"] >= 0.8 * HELD_MS and slow["slowest_rank_share"] >= gap.LATE_STEPS_SHARE, (
            impl
        )
        assert quiet["slowest_rank"] is None or quiet["slowest_rank"] != quiet["slowest_rank"], impl  # null
    assert rows.loc[rows["baseline"].astype(bool), "slowest_rank"].isna().all()  # local waits for no one


def test_the_parts_of_each_gap_add_up_to_it(rows, slow_run):
    """gap = exposed + waiting + slower compute + rest + residual exactly, and the residual is what
    docs/output.md says, recomputed from the steps table: the slowest rank's step (the step time) beyond
    the step of the rank that waited most (whose parts these are), less local's own time beyond its
    compute. Not a bound on the residual's share of the step: a rank the host's scheduler held after the
    last transfer ends its step late by that hold, in no other rank's step (8 busy loops on 2 cores: in one
    step bucketed's rank 0 ran 21.8 ms against rank 1's 10.9, and its quiet residual came to 2.0 ms, 15 % of
    its 12.9 ms step); the residual names it, less local's ranks' own spread."""
    parts = ["gap_exposed_comm_ms", "gap_waiting_ms", "gap_slower_compute_ms", "gap_rest_ms", "gap_residual_ms"]
    measured = rows[rows["gap_ms"].notna()]
    assert set(measured["impl"]) == set(SYNCHRONISING)
    steps = store.read_steps(slow_run)
    steps = steps[~steps["warmup"].astype(bool)]
    for _, row in measured.iterrows():
        assert abs(row[parts].sum() - row["gap_ms"]) < 1e-6, row["config_id"]
        own = steps[steps["config_id"] == row["config_id"]]
        slowest = own.groupby("step")["step_ms"].max().mean()
        ranked = own.sort_values(["waiting_ms", "step_ms"], ascending=[True, False])  # a tie: the fastest
        waited_most = ranked.groupby("step").tail(1)["step_ms"].mean()
        local = rows[rows["baseline"].astype(bool) & (rows["repeat"] == row["repeat"])].iloc[-1]
        local_own = local["step_ms_mean"] - local["compute_ms"]
        # local's ranks never wait: its compute is its fastest rank's (gap.waiting_view), so its own time beyond
        # it is its slowest rank's step beyond that: the two ranks' spread, plus its empty sync and timing
        theirs = steps[steps["config_id"] == local["config_id"]]
        fastest = theirs.sort_values("step_ms").groupby("step").head(1)["compute_ms"].mean()
        assert local_own == pytest.approx(theirs.groupby("step")["step_ms"].max().mean() - fastest, abs=1e-6)
        assert local_own >= 0, (row["config_id"], local_own)
        expected = slowest - waited_most - local_own
        assert row["gap_residual_ms"] == pytest.approx(expected, abs=1e-6), (row["config_id"], row[parts])
    slow = measured[measured["repeat"] == 1]
    assert (slow["gap_waiting_ms"] >= 0.5 * HELD_MS).all(), slow[["impl", "gap_waiting_ms"]]  # the wait is seen


def test_each_step_of_each_rank_is_its_compute_exposed_communication_and_rest(slow_run):
    steps = store.read_steps(slow_run)
    timed = steps[steps["compute_ms"].notna()]
    assert not timed.empty
    total = timed["compute_ms"] + timed["exposed_comm_ms"] + timed["rest_ms"]
    assert ((total - timed["step_ms"]).abs() <= 0.05 * timed["step_ms"]).all()
    assert (timed["waiting_ms"] <= timed["exposed_comm_ms"] + 1e-6).all()


def test_the_console_says_why_and_names_the_slow_rank(slow_run):
    lines, _ = bench._why_lines(store.read_configs(slow_run), confidence=0.95)
    assert any("rank 1" in line for line in lines), lines
    for impl in SYNCHRONISING:
        assert any(line.startswith(impl) or f" {impl}" in line for line in lines), (impl, lines)


def test_the_sentence_leads_with_the_largest_measured_part_on_real_rows(rows):
    from harness.analysis import why

    for _, row in rows[rows["gap_ms"].notna()].iterrows():
        parts = {column: row[column] for column in why.PART_WORDS}
        largest = max(parts, key=parts.get)
        text = why.sentence(row, rows, cores=2)
        local = row["step_ms_mean"] - row["gap_ms"]
        if row["gap_ms"] < why.NEGLIGIBLE * local:  # a quiet repeat's tiny gap: nothing to take apart
            assert "nothing measurable here" in text or "cannot tell what data parallelism costs" in text, (text, parts)
            continue
        first = text.split("made up of ", 1)[1]  # '2.6 ms (62%) exposed …', or without the share where one is negative
        assert first.startswith(f"{parts[largest]:.1f} ms"), (text, parts)
        assert first.split(" ms", 1)[1].lstrip(" (0123456789%)").startswith(why.PART_WORDS[largest]), (text, parts)

"""When a launch's contention record says the run was not alone: the rule that decides "busy", and a run from
before the records read as not recorded, never as quiet."""

from __future__ import annotations

import json

from harness.results import contention
from reports.pages import alerts
from reports.pages.run import run_page


def launch(load: tuple[float | None, float | None], *, cpus: int = 2, threads: int = 3, **more) -> dict:
    return {"load_1m": list(load), "cpus": cpus, "run_threads": threads, "device": "cpu", "gpus": None, **more}


def test_busy_is_others_load_above_the_cpus_the_run_left_free():
    # 2 ranks × 1 thread + the launcher on 2 CPUs leave none free: any load beyond the run's own is others'
    assert contention.cpu_busy(launch((4.2, 3.9)))
    assert not contention.cpu_busy(launch((2.9, 3.0)))  # the run's own three threads explain it
    # 16 CPUs, 5 threads of the run: others may run on the 11 left before they take the run's
    assert not contention.cpu_busy(launch((3.0, 16.0), cpus=16, threads=5))
    assert contention.cpu_busy(launch((3.0, 16.5), cpus=16, threads=5))


def test_the_launch_before_is_credited_while_its_threads_linger_in_the_average():
    """A 1-minute average at a launch's start still carries the launch before: its threads are the run's own."""
    after_a_wider_launch = launch((5.0, 2.5), cpus=4, threads=2)
    assert contention.cpu_busy(after_a_wider_launch)  # alone, 5.0 − 2 is above the 2 CPUs left
    assert not contention.cpu_busy(after_a_wider_launch, launch((1.0, 5.0), cpus=4, threads=5))
    records = [launch((1.0, 5.0), cpus=4, threads=5, started_at=1), {**after_a_wider_launch, "started_at": 2}]
    assert contention.findings(records) == []


def test_an_unreadable_load_is_not_busy_and_says_what_was_read():
    assert not contention.cpu_busy(launch((None, None)))
    assert contention.in_words([launch((None, None))]) == "not recorded"


def test_one_sentence_names_the_figure_and_what_it_may_distort():
    records = [launch((1.0, 2.5), started_at=1), launch((4.2, 6.1), started_at=2)]
    (said,) = contention.findings(records)
    assert said.startswith("the 1-minute load average reached 6.1 on 2 CPUs in 1 of 2 launches")
    assert "step times may read slow and noisy" in said
    # the average counts the run's own threads: said beside it, lest it read as others' alone
    assert contention.in_words(records) == "1-minute load average 1.0–6.1 on 2 CPUs (the run's own threads: up to 3)"
    assert "Not alone on the machine" in alerts.not_alone(records)[0]


def test_a_run_from_before_the_records_reads_not_recorded(tmp_path):
    (tmp_path / "plan").mkdir()
    (tmp_path / "plan" / "world-1.json").write_text(json.dumps({"configurations": []}))  # a plan, no record
    assert contention.read(tmp_path) is None
    assert contention.findings(None) == [] and alerts.not_alone(None) == []
    page = run_page.environment_section({"command": ["ddpbench", "bench"]}, launches=None)
    assert "not recorded (a run from before ddpbench recorded it)" in page
    assert "quiet" not in page and "no other process" not in page


def test_a_gpu_whose_nvml_list_was_always_empty_is_not_watched_not_quiet():
    """A rank holds its GPU: NVML listing no process at all (WSL, some containers) cannot say no other did."""
    empty = {"GPU-0": {"others": {}, "run_ranks": [0], "pids_comparable": False, "listed": 0}}
    record = launch((0.5, 0.6), cpus=16, threads=2, device="cuda", gpus=empty)
    said = contention.in_words([record])
    assert said.endswith("; the GPUs' other processes not watched (NVML listed none, or was not read)")
    assert not contention.watched(record) and contention.findings([record]) == []
    listed = {"GPU-0": {**empty["GPU-0"], "listed": 1}}  # the rank's own, by another namespace's pid
    assert contention.in_words([{**record, "gpus": listed}]).endswith("; no other process on the run's GPUs")


def test_a_launch_long_before_is_not_credited_with_a_load_it_no_longer_carries():
    """A resumed session's first launch follows the last one of a session a day before: the 1-minute average
    forgot that one's threads, so others' load is not hidden behind them."""
    wide_before = launch((1.0, 5.0), cpus=4, threads=5, started_at=0.0, ended_at=100.0)
    just_after = launch((5.0, 2.5), cpus=4, threads=2, started_at=101.0)
    a_day_after = {**just_after, "started_at": 100.0 + 86_400}
    assert not contention.cpu_busy(just_after, wide_before)  # a second later: the average still carries it
    assert contention.cpu_busy(a_day_after, wide_before)
    assert contention.findings([wide_before, a_day_after]) != []

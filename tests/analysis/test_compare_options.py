"""`ddpbench compare` of the commonest change a gate judges, one DDP option: a strategy paired with itself at the
other run's one option setting, its memory gated, the flag named where it is still needed; and what the last line
says of a failure, of runs that matched nothing, and of a loaded machine."""

from __future__ import annotations

import json

import pandas as pd
from test_compare import run_compare, synthetic_run

from harness.analysis import roles
from harness.analysis.verdicts import compare
from harness.commands import compare as compare_command

VIEW = json.dumps({"gradient_as_bucket_view": True})
KEYS = ["impl", "impl_options", "workload", "world_size"]


def test_a_strategy_at_one_setting_a_run_pairs_with_itself_at_the_others_and_several_do_not():
    base = {("stock", "{}", "mlp", 2), ("local", "{}", "mlp", 2)}
    new = {("stock", VIEW, "mlp", 2), ("local", "{}", "mlp", 2)}
    assert roles.option_pairs(base, new, KEYS) == {("stock", "{}", "mlp", 2): ("stock", VIEW, "mlp", 2)}
    several = new | {("stock", '{"bucket_cap_mb": 5}', "mlp", 2)}  # which one BASE's stands against is a guess
    assert roles.option_pairs(base, several, KEYS) == {}
    assert roles.option_pairs(base, {("stock", VIEW, "mlp", 1)}, KEYS) == {}  # another world size: another setup


def test_one_ddp_option_is_judged_without_a_flag_and_its_memory_gates(tmp_path, capsys):
    """A walkthrough's `compare base new` (new: --opt gradient_as_bucket_view=True) matched only the local rows."""
    synthetic_run(tmp_path / "r", "base", mean_ms=100, seed=1, settings={"mem_peak_rss_mb": 500.0})
    synthetic_run(tmp_path / "r", "new", mean_ms=100, seed=2, settings={"impl_options": VIEW, "mem_peak_rss_mb": 600.0})
    code, out = run_compare(capsys, tmp_path / "r", "base", "new")
    assert "w2 mlp/tiny stock -> stock gradient_as_bucket_view=True: " in out.out, out.out
    assert "1 configuration matched" in out.out and "no ok result in NEW (" not in out.err
    assert code == 1 and "peak memory significantly higher" in out.out.splitlines()[-1], out.out
    assert "not gated" not in out.out  # one strategy's memory: a regression, whatever its options


def test_where_no_pair_is_made_the_warning_says_why_and_names_the_flag_for_another_strategy(tmp_path, capsys):
    synthetic_run(tmp_path / "r", "base", mean_ms=100, seed=1)
    synthetic_run(tmp_path / "r", "naive", mean_ms=100, seed=2, impl="naive")
    code, out = run_compare(capsys, tmp_path / "r", "base", "naive")
    assert code == 3 and "NEW ran it only as naive; compare --across-strategies judges" in out.err, out.err
    synthetic_run(tmp_path / "r", "view", mean_ms=100, seed=3, settings={"impl_options": VIEW})
    synthetic_run(tmp_path / "r", "view", mean_ms=100, seed=4, settings={"impl_options": '{"bucket_cap_mb": 5}'},
                  worlds=(2,), repeats=1)  # fmt: skip
    code, out = run_compare(capsys, tmp_path / "r", "base", "view")
    assert code == 3 and "NEW has stock only at bucket_cap_mb=5; gradient_as_bucket_view=True" in out.err, out.err


def test_a_failure_in_new_is_named_on_the_last_line(tmp_path, capsys):
    synthetic_run(tmp_path / "r", "base", mean_ms=100, seed=1)
    synthetic_run(tmp_path / "r", "new", mean_ms=100, seed=2, settings={"status": "failed", "error": "boom"})
    code, out = run_compare(capsys, tmp_path / "r", "base", "new")
    assert code == 1 and out.out.splitlines()[-1].startswith("compare: failed in NEW: 1 failed in NEW (w2 mlp/tiny")
    many = compare.outcome(pd.DataFrame(), failed=[f"w{n} mlp/tiny stock: failed in NEW (1 of 1 repeat): x"
                                                   for n in range(5)], missing=[], not_compared=[])  # fmt: skip
    assert many["sentence"] == "failed in NEW: 5 failed in NEW (w0 mlp/tiny stock, w1 mlp/tiny stock, w2 mlp/tiny " \
                               "stock and 2 more)"  # fmt: skip


def test_runs_apart_only_in_threads_per_rank_name_it_and_the_command_that_would_match(tmp_path, capsys):
    """'Nothing matched' named two identical descriptions; the runs' --gpus 1 and 2 gave their ranks 2 and 1 threads."""
    for run, gpus, threads in (("g1", "1", 2), ("g2", "2", 1)):
        command = {"command": ["ddpbench", "bench", "--gpus", gpus, "--run-id", run, "--steps", "10"]}
        synthetic_run(tmp_path / "r", run, mean_ms=100, seed=int(gpus), worlds=(1,), environment=command,
                      settings={"threads_per_rank": threads})  # fmt: skip
    code, out = run_compare(capsys, tmp_path / "r", "g1", "g2")
    last = out.out.splitlines()[-1]
    assert code == 3 and "differ in threads_per_rank (2 in BASE, 1 in NEW)" in last, last
    assert "would match: ddpbench bench --steps 10 --gpus 1 (exit 3)" in last
    page = (tmp_path / "site" / "compare" / "g1_vs_g2.html").read_text()
    assert "Compared by <code>ddpbench compare g1 g2 --results" in page  # the flags that made this page


def test_more_repeats_on_a_loaded_machine_wait_on_its_noise():
    assert "noise must fall before more repeats" in compare_command._noise_first(2, ["BASE", "NEW"])
    assert compare_command._noise_first(0, ["NEW"]) == "" and compare_command._noise_first(2, []) == ""


def test_the_warning_says_why_no_pair_was_made_and_names_the_flag_only_where_it_would_pair():
    names = ["impl", "impl_options", "workload", "world_size"]
    caps = [("stock", '{"bucket_cap_mb": 1.0}', "mlp", 1), ("stock", '{"bucket_cap_mb": 5.0}', "mlp", 1)]
    said = compare._nearest_in_new(caps[0], [("stock", VIEW, "mlp", 1)], names, caps)
    assert (
        said == "NEW has stock only at gradient_as_bucket_view=True; with 2 settings of it in BASE, this one is paired "
        "with none"
    )
    naive = [("naive", "{}", "mlp", 1), ("local", "{}", "mlp", 1)]  # the baseline aside: one strategy a side
    said = compare._nearest_in_new(caps[0], naive, names, caps[:1])
    assert said == "NEW ran it only as naive; compare --across-strategies judges one strategy against another"
    two = [*naive, ("fsdp", "{}", "mlp", 1)]  # --across-strategies would refuse NEW's two: not named
    assert compare._nearest_in_new(caps[0], two, names, caps[:1]) == "not in NEW"

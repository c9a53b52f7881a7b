"""`ddpbench compare`: verdicts on synthetic runs, the exit code that gates CI, environment warnings."""

from __future__ import annotations

import html
import itertools

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import run_ddpbench

from harness import cli
from harness.analysis import stats
from harness.analysis.verdicts import compare, memory_compare
from harness.commands import compare as compare_command
from harness.results import store, values

KEYS = {"impl": "stock", "impl_options": "{}", "workload": "mlp", "size": "tiny", "world_size": 2, "nnodes": 1}
KEYS |= {"batch_size": 8, "dtype": "fp32", "optimizer": "sgd", "device": "cpu", "status": "ok"}


def synthetic_run(
    results,
    run_id: str,
    *,
    mean_ms: float,
    seed: int,
    torch_version: str = "2.x",
    impl: str = "stock",
    repeats: int = 5,
    environment: dict | None = None,
    settings: dict | None = None,
    worlds: tuple[int, ...] = (2,),
) -> None:
    """A run with one configuration (one a world size of `worlds`) measured `repeats` times (1 % launch-to-launch
    offsets), each with 2 ranks whose 40 steps scatter by 3 %."""
    meta = {"run_id": run_id, "started_at": run_id, "device": "cpu", "configurations": [{"world_size": 2}]}
    meta["environment"] = {"torch_version": torch_version, "hostname": "h", **(environment or {})}
    store.write_json(results / run_id / "run.json", meta)
    rng = np.random.default_rng(seed)
    for repeat, world in itertools.product(range(repeats), worlds):
        times = mean_ms * (1 + rng.normal(0, 0.01)) * (1 + rng.normal(0, 0.03, size=(2, 40)))
        config_id = f"c{repeat}" if world == 2 else f"c{repeat}w{world}"
        steps = [
            {"run_id": run_id, "config_id": config_id, "rank": r, "step": s, "warmup": False,
             "step_ms": float(times[r, s])}
            for r in range(2)
            for s in range(40)
        ]  # fmt: skip
        row = {"run_id": run_id, "config_id": config_id, **KEYS, "impl": impl, "repeat": repeat, **(settings or {}),
               "world_size": world}  # fmt: skip
        store.write_configuration(results / run_id, config_id, row, steps)


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


def test_a_gate_over_several_configurations_judges_each_at_bonferronis_level_and_says_it(tmp_path, capsys):
    """It fails on any one, so each of 3 intervals is at 1 − 5 %/3 (docs/statistics.md): wider than one's at 95 %."""
    for run_id, seed in (("a", 1), ("b", 2)):
        synthetic_run(tmp_path / "r", run_id, mean_ms=100, seed=seed, worlds=(2, 4, 8))
    frame, _, _ = compare.compare(tmp_path / "r" / "a", tmp_path / "r" / "b", threshold=0.05)
    assert list(frame["confidence"]) == [pytest.approx(1 - 0.05 / 3)] * 3
    level = [compare.interval_level(pd.DataFrame({"confidence": [compare.family_confidence(n)]})) for n in (1, 1000)]
    assert level == ["95%", "99.995%"]  # never a rounded '100%' (a review's 100 configurations read so)
    alone = compare.judge(*(compare.repeat_figures(compare.load_samples(tmp_path / "r" / run)[1]).query(
        "world_size == 2") for run in ("a", "b")), threshold=0.05)  # fmt: skip
    row = frame[frame["world_size"] == 2].iloc[0]
    assert row["ratio_ci_low"] < alone["ratio_ci_low"] and row["ratio_ci_high"] > alone["ratio_ci_high"]
    code, out = run_compare(capsys, tmp_path / "r", "a", "b")
    assert code == 0  # three unchanged: nothing slower, every one judged
    assert out.out.startswith("compare: each interval at 98.3% (95% over the 3 configurations judged, Bonferroni")
    assert out.out.count("(98.3% CI ") == 3
    page = (tmp_path / "site" / "compare" / "a_vs_b.html").read_text()
    assert "98.3% interval" in page and "95% over the 3 configurations judged" in page


def test_too_few_to_tell_says_which_way_the_interval_already_leans():
    """A walkthrough read 'ratio 1.303 (95% CI 1.042-1.629): too few repeats to tell' as a contradiction: an
    interval above 1 but reaching under 1 + threshold is slower so far, not yet beyond the threshold."""

    def figures(ms: list[float]) -> pd.DataFrame:
        return pd.DataFrame({"median_ms": ms, "rel_se": 0.001, "cv": 0.01, "drift": 0.0, "drift_se": 0.01,
                             "impl": "stock", "impl_options": "{}",
                             "repeat": range(len(ms))})  # fmt: skip

    leaning = compare.judge(figures([100, 101, 100.5, 100.2]), figures([103, 112, 107, 105]), threshold=0.05)
    assert leaning["verdict"] == stats.TOO_FEW and 1 < leaning["ratio_ci_low"] < 1.05
    assert leaning["leaning"] == "slower"
    faster = compare.judge(figures([103, 112, 107, 105]), figures([100, 101, 100.5, 100.2]), threshold=0.05)
    assert faster["leaning"] == "faster"
    either = compare.judge(figures([100, 102]), figures([106, 109]), threshold=0.05)  # 0.98–1.16: could be either
    assert either["verdict"] == stats.TOO_FEW and either["leaning"] == ""


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


def test_settings_that_change_gpu_numbers_are_warned_about_and_an_old_run_says_not_recorded(tmp_path, capsys):
    clocks = [{"sm_app_mhz": 1980, "sm_current_mhz": 345}]
    base = {"tf32_matmul": False, "gpu_clocks": clocks, "env_vars": {"NCCL_ALGO": "Ring", "MASTER_PORT": "1"}}
    new = {"tf32_matmul": True, "allocator_conf": "expandable_segments:True",
           "gpu_clocks": [{"sm_app_mhz": 1980, "sm_current_mhz": 1980}], "env_vars": {"MASTER_PORT": "2"}}  # fmt: skip
    synthetic_run(tmp_path / "r", "a", mean_ms=100, seed=1, environment=base)
    synthetic_run(tmp_path / "r", "b", mean_ms=100, seed=2, environment=new)
    _, out = run_compare(capsys, tmp_path / "r", "a", "b")
    assert "warning: tf32_matmul differs: False vs True" in out.err
    assert "warning: allocator_conf differs: not recorded vs 'expandable_segments:True'" in out.err
    assert "warning: environment variable NCCL_ALGO differs: 'Ring' vs None" in out.err
    assert "gpu_clocks" not in out.err and "MASTER_PORT" not in out.err  # current clocks and ports always differ


def test_one_repeat_a_run_is_too_few_to_tell_even_for_a_large_slowdown_and_exits_3(tmp_path, capsys):
    synthetic_run(tmp_path / "r", "a", mean_ms=100, seed=1, repeats=1)
    synthetic_run(tmp_path / "r", "b", mean_ms=150, seed=2, repeats=1)
    code, out = run_compare(capsys, tmp_path / "r", "a", "b")
    assert code == 3 and ": too few repeats to tell (have 1; at 5%, need about " in out.out
    assert "0 with no significant change, 1 with too few repeats to tell" in out.out
    assert ": no significant change" not in out.out  # no verdict line says it
    page = (tmp_path / "site" / "compare" / "a_vs_b.html").read_text()
    assert "too few repeats to tell" in page


def test_a_noisy_configuration_is_flagged_on_its_line(tmp_path, capsys):
    synthetic_run(tmp_path / "r", "a", mean_ms=100, seed=1)
    results = tmp_path / "r"
    store.write_json(results / "b" / "run.json", store.read_json(results / "a" / "run.json") | {"run_id": "b"})
    for repeat, level in enumerate((100, 125, 100, 125, 100)):  # repeats 25 % apart
        steps = [{"run_id": "b", "config_id": f"c{repeat}", "rank": 0, "step": s, "warmup": False,
                  "step_ms": level + s % 2} for s in range(40)]  # fmt: skip
        row = {"run_id": "b", "config_id": f"c{repeat}", **KEYS, "repeat": repeat}
        store.write_configuration(results / "b", f"c{repeat}", row, steps)
    _, out = run_compare(capsys, results, "a", "b")
    assert "[new: repeats disagree (100–126 ms)]" in out.out


@pytest.mark.parametrize(
    ("args", "named"),
    [(["nope", "a"], "'nope'"), (["a", "a", "--threshold", "x"], "'x'"),
     (["a", "a", "--threshold", "5"], "--threshold '5' would be 500%; give 5% for 5 per cent (or a fraction, 0.05)"),
     (["a", "a", "--threshold", "500%"], "--threshold '500%' is not valid; give a percentage above 0% and below 100%"),
     (["a", "a", "--threshold", "0"], "--threshold '0' is not valid"),
     (["a", "coll"], "run 'coll' is a `ddpbench collectives` run; compare judges two bench runs"),
     (["a", "a"], "BASE and NEW are the same run 'a'; compare judges two separate runs")],
)  # fmt: skip
def test_bad_compare_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, args, named):
    synthetic_run(tmp_path / "r", "a", mean_ms=100, seed=1)
    store.write_json(tmp_path / "r" / "coll" / "run.json", {"run_id": "coll", "kind": store.COLLECTIVES_KIND})
    code, out = run_compare(capsys, tmp_path / "r", *args)
    assert code == 2 and named in out.err and out.err.count("\n") == 1
    assert not (tmp_path / "site").exists()


def test_runs_of_two_strategies_compare_only_when_asked_to_match_across_strategies(tmp_path, capsys):
    synthetic_run(tmp_path / "r", "naive", mean_ms=100, seed=1, impl="naive")
    synthetic_run(tmp_path / "r", "bucketed", mean_ms=60, seed=2, impl="bucketed")
    code, out = run_compare(capsys, tmp_path / "r", "naive", "bucketed")
    assert code == 3 and "0 configurations matched" in out.out  # no evidence: never a pass
    code, out = run_compare(capsys, tmp_path / "r", "naive", "bucketed", "--across-strategies")
    assert code == 0 and "naive -> bucketed" in out.out and ": faster" in out.out
    code, out = run_compare(capsys, tmp_path / "r", "bucketed", "naive", "--across-strategies")
    assert code == 1 and ": slower" in out.out


def test_across_strategies_each_side_is_named_by_the_one_rule_and_its_memory_fails_nothing(tmp_path, capsys):
    """A line once read 'stock -> fsdp comm_hook=fp16', BASE's options on NEW's strategy, and the peak memory of
    another strategy failed the gate as a regression. Each side is named by values.configuration_label; a memory
    difference between different strategies is said, exit 0; between one strategy's two runs it still gates."""
    fp16 = {"impl_options": '{"comm_hook": "fp16"}', "mem_peak_rss_mb": 500.0}
    synthetic_run(tmp_path / "r", "stock", mean_ms=100, seed=1, settings=fp16)
    synthetic_run(tmp_path / "r", "fsdp", mean_ms=100, seed=2, impl="fsdp", settings={"mem_peak_rss_mb": 600.0})
    code, out = run_compare(capsys, tmp_path / "r", "stock", "fsdp", "--across-strategies")
    assert "w2 mlp/tiny stock comm_hook=fp16 -> fsdp: " in out.out and "fsdp comm_hook" not in out.out, out.out
    page = (tmp_path / "site" / "compare" / "stock_vs_fsdp.html").read_text()
    assert "w2 mlp/tiny stock comm_hook=fp16 -&gt; fsdp" in page and "fsdp comm_hook" not in page  # as the console
    assert f"higher, beyond 5%, {memory_compare.NOT_GATED}" in out.out and code == 0, out.out
    assert "nothing slower" in out.out.splitlines()[-1] and f"higher ({memory_compare.NOT_GATED})" in html.unescape(
        page
    )
    synthetic_run(tmp_path / "r", "stock2", mean_ms=100, seed=3, settings={**fp16, "mem_peak_rss_mb": 600.0})
    code, out = run_compare(capsys, tmp_path / "r", "stock", "stock2", "--across-strategies")
    assert code == 1 and "peak memory significantly higher" in out.out.splitlines()[-1], out.out


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


def test_runs_with_different_threads_per_rank_are_not_judged_as_one_configuration_and_exit_3(tmp_path, capsys):
    # A --gpus 2 run gives a world-size-1 rank 1 thread, a --gpus 1 run 2: a tenfold "slowdown" that is no regression.
    synthetic_run(tmp_path / "r", "a", mean_ms=0.71, seed=1, settings={"threads_per_rank": 1})
    synthetic_run(tmp_path / "r", "b", mean_ms=7.48, seed=2, settings={"threads_per_rank": 2})
    code, out = run_compare(capsys, tmp_path / "r", "a", "b")
    assert code == 3 and ", ratio " not in out.out and ": slower" not in out.out
    assert "warning: w2 mlp/tiny stock: not compared, a different measurement: threads_per_rank 1 vs 2" in out.err
    assert (
        "0 configurations matched (0 significantly slower, 0 faster, 0 with no significant change, 0 with too few "
        "repeats to tell); 1 not compared" in out.out
    )
    assert "threads_per_rank 1 vs 2" in (tmp_path / "site" / "compare" / "a_vs_b.html").read_text()


@pytest.mark.parametrize(
    ("base", "new", "named"),
    [
        ({"backend": "gloo"}, {"backend": "nccl"}, "backend 'gloo' vs 'nccl'"),
        ({"tf32": False}, {"tf32": True}, "tf32 False vs True"),
        ({"first_bucket_cap_mb": 1.0}, {"first_bucket_cap_mb": 25.0}, "first_bucket_cap_mb 1.0 vs 25.0"),
        # DDP's buckets timed through a hook in NEW only (--bucket-timeline): its steps paid for the timing
        (
            {"comm_note": f"not measured: a hook costs 3-6 %; {values.UNHOOKED}"},
            {"comm_note": f"{values.HOOK_TIMED}: 3-6 %"},
            "DDP's buckets timed (--bucket-timeline) False vs True",
        ),
    ],
)
def test_each_setting_outside_the_options_keeps_two_configurations_apart(tmp_path, capsys, base, new, named):
    synthetic_run(tmp_path / "r", "a", mean_ms=100, seed=1, settings=base)
    synthetic_run(tmp_path / "r", "b", mean_ms=150, seed=2, settings=new)
    code, out = run_compare(capsys, tmp_path / "r", "a", "b")
    assert code == 3 and f"not compared, a different measurement: {named}" in out.err and ", ratio " not in out.out


def test_a_setting_an_older_run_did_not_record_still_matches_and_equal_settings_are_judged(tmp_path, capsys):
    synthetic_run(tmp_path / "r", "old", mean_ms=100, seed=1)  # no threads_per_rank column at all
    synthetic_run(tmp_path / "r", "a", mean_ms=100, seed=2, settings={"threads_per_rank": 2, "backend": "gloo"})
    synthetic_run(tmp_path / "r", "b", mean_ms=110, seed=3, settings={"threads_per_rank": 2, "backend": "gloo"})
    code, out = run_compare(capsys, tmp_path / "r", "old", "a")
    assert code == 0 and "1 configuration matched" in out.out and "not compared" not in out.err
    code, out = run_compare(capsys, tmp_path / "r", "a", "b")
    assert code == 1 and ": slower" in out.out and "0 not compared" in out.out


def test_the_outcome_is_the_exit_codes_answer_in_words():
    """One sentence for the console, the page and the index: slower (exit 1), cannot tell (3), nothing slower (0)."""
    judged = pd.DataFrame({"verdict": [stats.SLOWER, stats.FASTER, stats.TOO_FEW]})
    failed = ["w2 mlp/tiny stock: failed in NEW (1 of 2 repeats): rank 1: RuntimeError: boom"]
    slower = compare.outcome(judged, failed=failed, missing=[], not_compared=[])
    assert slower["sentence"] == ("slower: 1 of 3 matched configurations significantly slower, 1 failed in NEW (w2 "
                                  "mlp/tiny stock)")  # which failed, as the warning above it names it  # fmt: skip
    assert slower["outcome"] == "slower, failed in NEW" and compare.regressed(slower["outcome"])  # each failure named
    short = compare.outcome(judged.iloc[1:], failed=[], missing=["y"], not_compared=["z"])
    assert short["outcome"] == compare.UNDECIDED and short["sentence"] == (
        "cannot tell: 1 of 2 matched configurations with too few repeats to tell, 1 not compared (a setting "
        "differs), 1 with no ok result in NEW"
    )
    passed = compare.outcome(pd.DataFrame({"verdict": [stats.FASTER, stats.NO_CHANGE]}), failed=[], missing=[],
                             not_compared=[])  # fmt: skip
    assert passed["sentence"] == ("nothing slower: all 2 matched configurations judged, none significantly slower "
                                  "(1 faster, 1 with no significant change)")  # fmt: skip
    one = compare.outcome(pd.DataFrame({"verdict": [stats.FASTER]}), failed=[], missing=[], not_compared=[])
    assert one["sentence"].startswith("nothing slower: 1 matched configuration judged, none")  # counted, not '(s)'
    assert compare.outcome(pd.DataFrame(), failed=[], missing=[], not_compared=[])["outcome"] == compare.UNDECIDED


def test_a_long_list_of_configurations_new_lacks_is_shortened_on_the_console_not_on_the_page():
    lines = [f"w2 mlp/tiny c{i}: not compared, no ok result in NEW (not in NEW)" for i in range(10)]
    shown = compare_command._shortened(lines)
    assert shown[:3] == lines[:3] and shown[3] == "… and 7 more with no ok result in NEW (the page lists all)"
    assert compare_command._shortened(lines[:4]) == lines[:4]


def test_one_runs_folder_given_as_results_is_named_with_the_folder_meant(tmp_path, capsys):
    """As `report` says it: the folder below the one meant, not 'unknown run' in it."""
    synthetic_run(tmp_path / "r", "a", mean_ms=100, seed=1)
    code = cli.main(["compare", "x", "y", "--results", str(tmp_path / "r" / "a"), "--out", str(tmp_path / "site")])
    err = capsys.readouterr().err
    assert code == 2 and f"is one run; give the folder that holds it: --results {str(tmp_path / 'r')!r}" in err
    assert err.count("\n") == 1 and not (tmp_path / "site").exists()


def test_runs_measured_over_different_step_counts_are_warned_about(tmp_path, capsys):
    for run_id, steps in (("a", 5), ("b", 30)):
        synthetic_run(tmp_path / "r", run_id, mean_ms=100, seed=len(run_id))
        meta = store.read_json(tmp_path / "r" / run_id / "run.json")
        store.write_json(tmp_path / "r" / run_id / "run.json", {**meta, "config": {"steps": steps, "warmup": 3}})
    _, out = run_compare(capsys, tmp_path / "r", "a", "b")
    assert "warning: --steps differs: 5 vs 30 (each repeat's median is over its steps)" in out.err
    assert "--warmup" not in out.err


def test_a_strategys_own_warm_up_is_compared_where_the_runs_flag_is_left_out(tmp_path, capsys):
    """Since strategies declare their warm-up, a run without --warmup records none: its configurations do
    (DDP on CUDA: 11, where an older run had 3)."""
    for run_id, warmup in (("a", 3), ("b", 11)):
        synthetic_run(tmp_path / "r", run_id, mean_ms=100, seed=len(run_id))
        meta = store.read_json(tmp_path / "r" / run_id / "run.json")
        planned = [{"world_size": 2, "impl": "stock", "warmup": warmup, "steps": 20},
                   {"world_size": 2, "impl": "bucketed", "warmup": 3, "steps": 20}]  # fmt: skip
        config = {"steps": 20, "warmup": None if run_id == "b" else 3}
        store.write_json(tmp_path / "r" / run_id / "run.json", {**meta, "config": config, "configurations": planned})
    _, out = run_compare(capsys, tmp_path / "r", "a", "b")
    assert "warning: --warmup differs: stock 3 vs 11 (each repeat's median is over its steps)" in out.err
    assert "bucketed" not in out.err and "--steps" not in out.err


def test_a_configuration_with_a_null_number_among_its_keys_is_still_judged(tmp_path, capsys):
    """An older row without nnodes (null): NaN never equals NaN, so it once matched nothing and passed unsaid."""
    synthetic_run(tmp_path / "r", "a", mean_ms=100, seed=1, settings={"nnodes": None})
    synthetic_run(tmp_path / "r", "b", mean_ms=130, seed=2, settings={"nnodes": None})
    code, out = run_compare(capsys, tmp_path / "r", "a", "b")
    assert code == 1 and "1 configuration matched (1 significantly slower" in out.out


def test_across_strategies_refuses_a_run_of_several_option_settings_rather_than_pool_them(tmp_path, capsys):
    """A walkthrough compared a run of four DDP option settings against another across strategies: the four were
    pooled as one base ('base_repeats: 8'), and the verdict was theirs together."""
    synthetic_run(tmp_path / "r", "knobs", mean_ms=100, seed=1, repeats=2)
    steps = [{"run_id": "knobs", "config_id": "s0", "rank": r, "step": s, "warmup": False, "step_ms": 90.0 + s % 3}
             for r in range(2) for s in range(40)]  # fmt: skip
    row = {"run_id": "knobs", "config_id": "s0", **KEYS, "impl": "stock", "impl_options": '{"static_graph": true}',
           "repeat": 0, "world_size": 2}  # fmt: skip
    store.write_configuration(tmp_path / "r" / "knobs", "s0", row, steps)
    synthetic_run(tmp_path / "r", "naive", mean_ms=100, seed=2, impl="naive")
    code, out = run_compare(capsys, tmp_path / "r", "knobs", "naive", "--across-strategies")
    assert code == 2 and "run 'knobs' has several strategies or option settings per setup" in out.err

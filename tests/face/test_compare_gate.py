"""`compare` as a CI gate: it never passes on no evidence, a configuration that failed in NEW is a
regression, a bad --out is one line (exit 2), and a crash has an exit code of its own (4, never 1)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness import cli
from harness.commands.console import invoked
from harness.results import store

KEYS = {"impl": "stock", "impl_options": "{}", "workload": "mlp", "size": "tiny", "world_size": 2, "nnodes": 1}
KEYS |= {"batch_size": 8, "optimizer": "sgd", "device": "cpu"}


def fake_run(
    results, run_id: str, *, statuses=("ok",) * 3, dtype: str = "fp32", mean_ms: float = 100.0, rss_mb=None
) -> None:
    """One configuration measured once per status (a failed repeat has no steps), each repeat's peak RSS
    `rss_mb` (a list, one per repeat) where given."""
    meta = {"run_id": run_id, "started_at": run_id, "device": "cpu", "configurations": [{"world_size": 2}]}
    store.write_json(results / run_id / "run.json", {**meta, "environment": {"hostname": "h"}})
    rng = np.random.default_rng(len(run_id))
    for repeat, status in enumerate(statuses):
        steps = [] if status != "ok" else [
            {"run_id": run_id, "config_id": f"c{repeat}", "rank": r, "step": s, "warmup": False,
             "step_ms": float(mean_ms * (1 + rng.normal(0, 0.01)))}
            for r in range(2) for s in range(10)
        ]  # fmt: skip
        row = {"run_id": run_id, "config_id": f"c{repeat}", **KEYS, "dtype": dtype, "status": status,
               "repeat": repeat, "error": "rank 1: RuntimeError: boom" if status == "failed" else None}  # fmt: skip
        row |= {"mem_peak_rss_mb": rss_mb[repeat]} if rss_mb else {}
        store.write_configuration(results / run_id, f"c{repeat}", row, steps)
    store.write_json(results / run_id / "summary.json", {"complete": True})  # a run at its end


def compare(capsys, results, *extra):
    code = cli.main(
        ["compare", "base", "new", "--results", str(results), "--out", str(results.parent / "site"), *extra]
    )
    return code, capsys.readouterr()


def test_nothing_matched_because_new_failed_everywhere_is_exit_1_naming_the_failure(tmp_path, capsys):
    fake_run(tmp_path / "r", "base")
    fake_run(tmp_path / "r", "new", statuses=("failed",) * 3)
    code, out = compare(capsys, tmp_path / "r")
    assert code == 1, out
    assert "w2 mlp/tiny stock: failed in NEW (3 of 3 repeats): rank 1: RuntimeError: boom" in out.err
    assert "0 configurations matched" in out.out
    assert "compare: failed in NEW: 1 failed in NEW (w2 mlp/tiny stock); base measured mlp/tiny fp32 sgd batch 8 " \
           "(stock), new no ok configuration (exit 1)" in out.out  # fmt: skip


def test_nothing_matched_because_the_dtype_differs_is_exit_3_saying_why(tmp_path, capsys):
    fake_run(tmp_path / "r", "base")
    fake_run(tmp_path / "r", "new", dtype="bf16")
    code, out = compare(capsys, tmp_path / "r")
    assert code == 3, out
    assert "w2 mlp/tiny stock: not compared, no ok result in NEW (NEW ran it with dtype bf16, not fp32)" in out.err
    # why nothing matched, in one line: the setting that keeps them apart, what each run measured
    assert (
        "compare: cannot tell: no configuration was judged: 1 with no ok result in NEW; the runs differ in dtype "
        "(fp32 in BASE, bf16 in NEW); base measured mlp/tiny fp32 sgd batch 8 (stock), new mlp/tiny bf16 sgd "
        "batch 8 (stock) (exit 3)"
    ) in out.out


def test_one_failed_repeat_in_new_fails_the_gate_even_when_the_rest_match(tmp_path, capsys):
    fake_run(tmp_path / "r", "base")
    fake_run(tmp_path / "r", "new", statuses=("ok", "ok", "failed"))
    code, out = compare(capsys, tmp_path / "r")
    assert code == 1, out
    assert "1 configuration matched (0 significantly slower" in out.out and "1 failed in NEW" in out.out


def test_a_base_without_any_ok_configuration_is_no_evidence(tmp_path, capsys):
    fake_run(tmp_path / "r", "base", statuses=("failed",))
    fake_run(tmp_path / "r", "new")
    code, out = compare(capsys, tmp_path / "r")
    assert code == 3 and "no configuration was judged; base measured no ok configuration, new mlp/tiny" in out.out


def test_out_given_as_a_file_is_one_line_exit_2_and_nothing_written(tmp_path, capsys):
    fake_run(tmp_path / "r", "base")
    fake_run(tmp_path / "r", "new")
    plain = tmp_path / "site.txt"
    plain.write_text("x")
    for command in (["compare", "base", "new"], ["report"]):
        code = cli.main([*command, "--results", str(tmp_path / "r"), "--out", str(plain)])
        captured = capsys.readouterr()
        assert code == 2 and captured.out == "", captured
        assert (
            captured.err
            == f"ddpbench: error: --out {str(plain)!r} is a file, not a folder; give a folder (it is made if missing)\n"
        )
    assert plain.read_text() == "x" and not (tmp_path / "r" / "new" / "predictions.parquet").exists()
    assert cli.main(["report", "--results", str(tmp_path / "r"), "--out", str(plain / "site")]) == 2
    assert "cannot be made" in capsys.readouterr().err


def test_an_unparsable_timestamp_skips_that_part_by_name_and_compares_the_rest(tmp_path, capsys, caplog):
    fake_run(tmp_path / "r", "base")
    fake_run(tmp_path / "r", "new")
    part = tmp_path / "r" / "new" / "configs" / "c0.parquet"
    table = pq.read_table(part)
    index = table.schema.get_field_index("started_at")
    pq.write_table(table.set_column(index, pa.field("started_at", pa.string()), pa.array(["yesterday"])), part)
    code, out = compare(capsys, tmp_path / "r")
    said = f"skipping {part}: a value its column cannot hold (ValueError: Invalid isoformat string: 'yesterday')"
    assert said in caplog.messages  # on stderr through the library's logger (cli.main sets it up)
    assert code == 0 and "1 configuration matched" in out.out and "no significant change" in out.out


def with_fsdp_whose_steps_are_cut(results, side: str, cut: str) -> None:
    """base and new, each with stock (3 repeats) and fsdp (one); `side`'s fsdp steps part cut short (or overwritten
    by another tool's Parquet)."""
    for run_id in ("base", "new"):
        fake_run(results, run_id)
        steps = [{"run_id": run_id, "config_id": "f", "rank": r, "step": s, "warmup": False, "step_ms": 90.0 + s}
                 for r in range(2) for s in range(10)]  # fmt: skip
        store.write_configuration(results / run_id, "f", {"run_id": run_id, "config_id": "f", **KEYS, "impl": "fsdp",
                                  "dtype": "fp32", "status": "ok", "repeat": 0, "error": None}, steps)  # fmt: skip
    part = results / side / "steps" / "f.parquet"
    if cut == "truncated":
        part.write_bytes(part.read_bytes()[:300])
    else:
        pq.write_table(pa.table({"a": [1, 2]}), part)


@pytest.mark.parametrize("cut", ["truncated", "another tool's"])
def test_a_configuration_whose_steps_cannot_be_read_keeps_the_gate_from_passing(tmp_path, capsys, cut):
    """A NEW (or BASE) whose fsdp steps were cut short in a copy passed the gate, exit 0 on stock's verdict alone:
    fsdp was never judged, and '0 with no ok result in NEW' said it was. NEW's is no evidence (exit 3); BASE's,
    the evidence every verdict is held against, is bad input (exit 2, nothing written)."""
    with_fsdp_whose_steps_are_cut(tmp_path / "r", "new", cut)
    code, out = compare(capsys, tmp_path / "r")
    assert code == 3, out
    said = f"w2 mlp/tiny fsdp: not compared, no ok result in NEW (its steps unreadable: {tmp_path / 'r' / 'new'}/steps)"
    assert said in out.err and "1 with no ok result in NEW" in out.out, out
    with_fsdp_whose_steps_are_cut(tmp_path / "b" / "r", "base", cut)
    code, out = compare(capsys, tmp_path / "b" / "r")
    assert code == 2, out
    base = tmp_path / "b" / "r" / "base"
    assert out.err.endswith(f"ddpbench: error: BASE 'base': no steps of w2 mlp/tiny fsdp can be read ({base}/steps); "
                            "give a whole copy of BASE, or another BASE run\n")  # fmt: skip
    assert "Traceback" not in out.err and not (tmp_path / "b" / "site").exists()
    assert not (tmp_path / "b" / "r" / "comparisons").exists()


def test_an_unexpected_error_is_one_line_and_exit_4_not_the_slower_code(tmp_path, capsys, monkeypatch):
    from harness.analysis.verdicts import compare as analysis

    fake_run(tmp_path / "r", "base")
    fake_run(tmp_path / "r", "new")

    def crash(*args, **kwargs):
        raise KeyError("impl_options")

    monkeypatch.setattr(analysis, "compare", crash)
    code, out = compare(capsys, tmp_path / "r")
    assert code == 4 and out.out == ""
    assert out.err == "ddpbench: error: compare could not finish (KeyError: 'impl_options'); exit 4, no verdict\n"


def test_runs_given_as_folders_from_two_places_are_compared_and_the_page_is_named_by_their_ids(tmp_path, capsys):
    fake_run(tmp_path / "one", "base")
    fake_run(tmp_path / "two", "new")
    site = tmp_path / "site"
    code = cli.main(["compare", str(tmp_path / "one" / "base"), str(tmp_path / "two" / "new"), "--out", str(site)])
    out = capsys.readouterr()
    assert code == 0 and "1 configuration matched" in out.out, out
    assert [p.relative_to(site).as_posix() for p in site.rglob("*.html")] == ["compare/base_vs_new.html"]
    assert not (tmp_path / "one" / "base_vs_").exists()  # once a folder named after the first path


def test_an_unknown_run_is_one_line_exit_2_naming_it_and_nothing_written(tmp_path, capsys):
    fake_run(tmp_path / "r", "base")
    code, out = compare(capsys, tmp_path / "r")  # no run 'new'
    assert code == 2 and out.out == "" and not (tmp_path / "site").exists()
    assert out.err == (f"ddpbench: error: unknown run 'new': not a run folder, nor a run id in "
                       f"'{tmp_path / 'r'}' (newest runs: base)\n")  # fmt: skip


def test_a_comparison_written_into_a_built_site_is_listed_in_its_index_at_once(tmp_path, capsys):
    from reports import site

    fake_run(tmp_path / "r", "base")
    fake_run(tmp_path / "r", "new", mean_ms=150.0)
    index = site.build_site(results=tmp_path / "r", out=tmp_path / "site").index
    assert "compare/base_vs_new.html" not in index.read_text()
    code, out = compare(capsys, tmp_path / "r")
    assert code == 1, out  # 1.5× slower
    assert f"(listed in {index})" in out.out
    listed = index.read_text()
    assert '<a href="compare/base_vs_new.html">base → new</a>' in listed  # both runs' lines, and the comparisons
    assert '<a href="runs/new.html">new</a>' in listed  # the runs stay listed as the build left them
    page = (tmp_path / "site" / "compare" / "base_vs_new.html").read_text()  # the site holds both runs' pages
    assert '<a href="../runs/base.html">BASE base</a><a href="../runs/new.html">NEW new</a></nav>' in page


def test_runs_given_as_folders_keep_their_comparison_beside_them_not_where_compare_ran(tmp_path, capsys, monkeypatch):
    """A fresh clone's `make bench` listed a comparison no one made there: a test had compared two run folders from
    the repository, and the comparison was kept in its results/ (--results' default), not beside the runs."""
    fake_run(tmp_path / "r", "base")
    fake_run(tmp_path / "r", "new")
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    cli.main(["compare", str(tmp_path / "r" / "base"), str(tmp_path / "r" / "new"), "--out", str(tmp_path / "site")])
    capsys.readouterr()
    assert (tmp_path / "r" / "comparisons" / "base_vs_new.json").is_file()
    assert not (tmp_path / "cwd" / "results").exists()


def test_a_comparison_is_kept_with_the_runs_and_any_site_built_later_has_its_page(tmp_path, capsys):
    """A walkthrough compared into the default site (compare's --out) and built its own elsewhere (report --out):
    the comparison was in neither. It is kept beside the runs, and every site built from them has it."""
    fake_run(tmp_path / "r", "base")
    fake_run(tmp_path / "r", "new", mean_ms=150.0)
    meta = store.read_run_meta(tmp_path / "r" / "base")
    meta["environment"]["command"] = ["/opt/venv/bin/ddpbench", "bench", "--impls", "stock", "--gpus", "2"]
    store.write_json(tmp_path / "r" / "base" / "run.json", meta)
    code, out = compare(capsys, tmp_path / "r")
    kept = tmp_path / "r" / "comparisons" / "base_vs_new.json"
    assert code == 1 and kept.is_file() and f"kept in {kept}" in out.out
    assert f"(no site built in {tmp_path / 'site'} lists it)" in out.out  # compare's --out: no index there
    assert store.list_runs(tmp_path / "r") == [tmp_path / "r" / "new", tmp_path / "r" / "base"]  # not a run
    assert cli.main(["report", "--results", str(tmp_path / "r"), "--out", str(tmp_path / "other")]) == 0
    assert "1 comparison:" in capsys.readouterr().out
    page = (tmp_path / "other" / "compare" / "base_vs_new.html").read_text()
    said = "Slower: 1 of 1 matched configuration significantly slower: w2 mlp/tiny stock 1.50× (95% CI 1.49–1.51)"
    assert f"{said} (exit 1)." in page  # what the gate read
    assert "base ran <code>ddpbench bench --impls stock --gpus 2</code>" in page  # and what each run ran
    assert '<a href="compare/base_vs_new.html">base → new</a>' in (tmp_path / "other" / "index.html").read_text()
    # cross-linked on the first build of a site: the comparison to both runs' pages, each run's page to it
    assert '<a href="../runs/base.html">BASE base</a><a href="../runs/new.html">NEW new</a></nav>' in page
    for run in ("base", "new"):
        run_page = (tmp_path / "other" / "runs" / f"{run}.html").read_text()
        assert 'Compared (BASE → NEW): <a href="../compare/base_vs_new.html">base → new</a> (slower).' in run_page
    assert "../runs/" not in (tmp_path / "site" / "compare" / "base_vs_new.html").read_text()  # no runs there


def test_another_strategy_in_new_is_not_this_configuration_run_otherwise():
    """A review's NEW had no fsdp: 'NEW ran it with impl local, not fsdp' read as if fsdp had become local."""
    from harness.analysis.verdicts.compare import _nearest_in_new

    names = ["impl", "impl_options", "workload", "world_size", "dtype"]
    base = ("fsdp", "{}", "mlp", 1, "fp32")
    assert _nearest_in_new(base, [("local", "{}", "mlp", 1, "fp32")], names) == "not in NEW"
    assert _nearest_in_new(base, [("fsdp", "{}", "mlp", 4, "fp32")], names) == "not in NEW"
    assert _nearest_in_new(base, [("fsdp", "{}", "mlp", 1, "bf16")], names) == "NEW ran it with dtype bf16, not fp32"
    # a walkthrough's NEW swept caps 1 and 25 of BASE's 1, 5 and 25: cap 5 is not in NEW, not run at cap 1; what
    # NEW did run of the strategy is named as such
    capped = ("stock", '{"bucket_cap_mb": 5.0}', "mlp", 1, "fp32")
    said = _nearest_in_new(capped, [("stock", '{"bucket_cap_mb": 1.0}', "mlp", 1, "fp32")], names)
    assert said == "NEW has stock only at bucket_cap_mb=1"


def test_a_run_that_shared_its_cores_is_said_where_the_verdict_is_read(tmp_path, capsys):
    """A walkthrough on a busy 2-core machine (load 7.6–8.3): `bench` warned 'not alone on this machine' at its
    end, but `compare` of the two runs said nothing of it, so a CI reader had no way to tell a slowdown (or 12
    'too few repeats') made by the neighbours from one made by the code."""
    fake_run(tmp_path / "r", "base")
    fake_run(tmp_path / "r", "new")
    record = {"launch": "world-2.r0", "cpus": 2, "run_threads": 3, "load_1m": [4.0, 7.6], "device": "cpu",
              "started_at": 10.0, "ended_at": 20.0, "gpus": None}  # fmt: skip
    store.write_json(tmp_path / "r" / "new" / "plan" / "world-2.r0.contention.json", record)
    code, out = compare(capsys, tmp_path / "r")
    assert code == 0, out  # a warning, not a verdict: the figures stand as measured
    said = "NEW (new) was not alone on its machine: the 1-minute load average reached 7.6 on 2 CPUs in 1 of 1 launches"
    assert f"ddpbench: warning: {said}" in out.err and "BASE (base)" not in out.err
    assert said in (tmp_path / "site" / "compare" / "base_vs_new.html").read_text()


def test_the_outcome_line_names_what_got_slower_by_how_much_and_how_sure_before_a_failure(tmp_path, capsys):
    """A CI log is read from its last line: 'slower: 1 of 4 matched configurations significantly slower (exit 1)'
    sent a walkthrough up through every configuration's line to find which (w2 mlp/tiny stock, 3.65×)."""
    fake_run(tmp_path / "r", "base")
    fake_run(tmp_path / "r", "new", statuses=("ok", "ok", "ok", "failed"), mean_ms=150.0)
    code, out = compare(capsys, tmp_path / "r")
    assert code == 1, out
    last = out.out.splitlines()[-1]
    assert last.startswith("compare: slower: 1 of 1 matched configuration significantly slower: w2 mlp/tiny stock "
                           "1.50× (95% CI 1.4"), last  # fmt: skip
    assert last.endswith("), 1 failed in NEW (w2 mlp/tiny stock) (exit 1)"), (
        last
    )  # the failure said after, not named as the slower


def test_a_gate_that_cannot_tell_says_what_would_decide_it_and_what_leans_slower_already(tmp_path, capsys):
    """Twelve lines of 'too few repeats to tell' ended in 'cannot tell: 12 of 12 matched configurations with too
    few repeats to tell (exit 3)': nothing a CI owner could act on without reading each line for its 'need about M'
    (8 to over 1000 on a busy 2-core machine), nor whether any leaned slower."""
    import pandas as pd

    from harness.commands.console import compare as compared

    fake_run(tmp_path / "r", "base", statuses=("ok",))  # one repeat a side: no verdict, however close
    fake_run(tmp_path / "r", "new", statuses=("ok",))
    code, out = compare(capsys, tmp_path / "r")
    need = out.out.split("need about ")[1].split(" ")[0].rstrip(",")  # the configuration's own line
    ratio = float(out.out.split("ratio ")[1].split(" ")[0])
    largest = f"; largest so far: w2 mlp/tiny stock {ratio:.2f}×" if ratio > 1 else ""  # its need just said
    assert code == 3 and out.out.splitlines()[-1] == (
        "compare: cannot tell: 1 of 1 matched configuration with too few repeats to tell (have 1, need up to "
        f"{need} a run at the spread seen, for w2 mlp/tiny stock{largest}) (exit 3)"
    ), out.out
    row = {"world_size": 2, "workload": "mlp", "size": "tiny", "impl": "stock", "impl_options": "{}", "ratio": 1.04,
           "verdict": "too few repeats to tell", "base_repeats": 5, "new_repeats": 4, "leaning": "slower"}  # fmt: skip
    frame = pd.DataFrame([{**row, "repeats_needed": 30}, {**row, "world_size": 1, "repeats_needed": 1000,
                                                          "leaning": ""}])  # fmt: skip
    assert compared.open_named(frame) == (" (have 4, need up to 30 a run at the spread seen, for w2 mlp/tiny stock, "
                                          "1 more than 1000: the repeats differ far beyond the threshold; largest so "
                                          "far: w2 mlp/tiny stock 1.04×)")  # fmt: skip
    # nightC → nightB2: a 3.7× regression short of one repeat hid behind another configuration's need of 372
    frame = pd.DataFrame([{**row, "impl": "fsdp", "ratio": 0.83, "repeats_needed": 372, "leaning": ""},
                          {**row, "ratio": 3.71, "repeats_needed": 4, "leaning": ""},
                          {**row, "impl": "local", "ratio": 1.2, "repeats_needed": 9}])  # fmt: skip
    assert compared.open_named(frame) == (" (have 4, need up to 372 a run at the spread seen, for w2 mlp/tiny fsdp; "
                                          "largest so far: w2 mlp/tiny stock 3.71×, need about 4; slower so far: w2 "
                                          "mlp/tiny local 1.20×)")  # fmt: skip


def test_an_interval_that_bounds_nothing_reads_too_wide_as_the_page_says(capsys):
    """'(99.6% CI <0.01->1000)' read like an arrow on the console, where the page and the sweep say 'too wide to
    bound it' of an interval past what a figure can say."""
    import pandas as pd

    from harness.analysis.verdicts.sweep import TOO_WIDE
    from harness.commands.console import compare as compared

    row = {"world_size": 2, "workload": "mlp", "size": "tiny", "impl": "stock", "impl_options": "{}", "ratio": 2.2,
           "verdict": "too few repeats to tell", "base_repeats": 2, "new_repeats": 2, "repeats_needed": 800,
           "ratio_ci_low": 0.004, "ratio_ci_high": 1200.0, "noise": "", "base_ms": 4.0, "new_ms": 8.8}  # fmt: skip
    compared.comparison(pd.DataFrame([row]), threshold=0.05)
    said = capsys.readouterr().out
    assert f"CI {TOO_WIDE}" in said and "<0.01" not in said and ">1000" not in said, said


def test_a_need_sized_from_under_five_repeats_is_marked_a_rough_guide_on_the_console_and_the_page(capsys):
    """bench's console marked 'need about 14, a rough guide from 2 repeats'; compare's line and its page's table
    said the same kind of need unmarked. Both mark it where the fewer side had under stats.ROUGH_UNDER repeats."""
    import pandas as pd

    from harness.commands.console import compare as compared
    from reports.pages import compare as page

    row = {"world_size": 2, "workload": "mlp", "size": "tiny", "impl": "stock", "impl_options": "{}", "ratio": 1.04,
           "verdict": "too few repeats to tell", "base_repeats": 2, "new_repeats": 3, "repeats_needed": 9,
           "ratio_ci_low": 0.9, "ratio_ci_high": 1.2, "noise": "", "base_ms": 4.0, "new_ms": 4.16}  # fmt: skip
    for have, mark in ((2, ", a rough guide from 2 repeats"), (5, "")):
        frame = pd.DataFrame([{**row, "base_repeats": have, "new_repeats": have + 1}])
        compared.comparison(frame, threshold=0.05)
        said = capsys.readouterr().out
        assert f"(have {have}; at 5%, need about 9{mark})" in said, said
        assert f"(have {have}, need about 9{mark})" in page.comparison_table(frame)


def test_a_run_compared_before_its_end_is_said_so(tmp_path, capsys):
    """A CI job that compared against a run still going read its first configurations as the whole run: a run with
    no summary.json (still running, or killed) and one stopped before its end are named, the gate's verdict kept."""
    fake_run(tmp_path / "r", "base")
    fake_run(tmp_path / "r", "new")
    (tmp_path / "r" / "new" / "summary.json").unlink()
    _, out = compare(capsys, tmp_path / "r")
    assert "NEW (new) has no summary.json: still running, or stopped before its end" in out.err, out.err
    store.write_json(tmp_path / "r" / "new" / "summary.json", {"complete": False})
    _, out = compare(capsys, tmp_path / "r")
    resume = invoked.resume_hint("new", tmp_path / "r")  # its --results too: from elsewhere it finds the run
    assert f"NEW (new) was stopped before its end ({resume} finishes it)" in out.err, out.err
    assert f"--results {tmp_path / 'r'}" in resume
    assert "BASE (base)" not in out.err  # a run at its end is not named


def test_a_peak_memory_regression_fails_the_gate_naming_it_and_equal_memory_passes(tmp_path, capsys):
    fake_run(tmp_path / "r", "base", rss_mb=[500.0, 501.0, 500.5])
    fake_run(tmp_path / "r", "new", rss_mb=[550.0, 551.0, 550.5])  # 10 % more, step times alike
    code, out = compare(capsys, tmp_path / "r", "--threshold", "10%")
    assert code == 1, out
    assert "w2 mlp/tiny stock: peak RSS (process) 500.5 -> 550.5 MiB, ratio 1.100 (95% CI " in out.out
    assert "compare: more memory: 1 of 1 matched configuration with peak memory significantly higher" in out.out
    kept = store.read_json(tmp_path / "r" / "comparisons" / "base_vs_new.json")
    assert kept["rows"][0]["mem_verdict"] == "higher" and kept["judged"]["memory_higher"] == 1
    assert kept["judged"]["outcome"] == "more memory"  # named for what failed the gate, not 'slower'
    assert "Peak memory per rank" in (tmp_path / "site" / "compare" / "base_vs_new.html").read_text()
    # the same growth under a --memory-threshold it does not reach, or equal memory: the step verdict decides
    assert compare(capsys, tmp_path / "r", "--threshold", "10%", "--memory-threshold", "20%")[0] == 0
    fake_run(tmp_path / "r", "new", rss_mb=[500.0, 501.0, 500.5])
    code, out = compare(capsys, tmp_path / "r", "--threshold", "10%")
    assert code == 0 and "peak RSS" not in out.out, out


def test_a_kept_comparison_without_a_memory_interval_still_gets_its_page_in_a_site_built_later(tmp_path, capsys):
    """One repeat a side: peak memory judged without an interval, which the kept JSON holds as null, not NaN. A
    later `report` skipped the page ('unsupported format string passed to NoneType.__format__'), and each run's
    page lost its link to the comparison compare had said it would have."""
    fake_run(tmp_path / "r", "base", statuses=("ok",), rss_mb=[500.0])
    fake_run(tmp_path / "r", "new", statuses=("ok",), rss_mb=[500.0])
    compare(capsys, tmp_path / "r")
    assert store.read_json(tmp_path / "r" / "comparisons" / "base_vs_new.json")["rows"][0]["mem_ci_low"] is None
    assert cli.main(["report", "--results", str(tmp_path / "r"), "--out", str(tmp_path / "other")]) == 0
    assert "skipping comparison" not in capsys.readouterr().err
    page = (tmp_path / "other" / "compare" / "base_vs_new.html").read_text()
    assert "Peak memory per rank" in page and "<td>—</td>" in page


def test_a_bad_memory_threshold_is_one_line_naming_the_flag(tmp_path, capsys):
    fake_run(tmp_path / "r", "base")
    fake_run(tmp_path / "r", "new")
    code, out = compare(capsys, tmp_path / "r", "--memory-threshold", "0%")
    assert code == 2 and "--memory-threshold '0%' is not valid; give a percentage above 0%" in out.err


def test_a_run_with_a_fault_injected_is_named_whichever_side_and_both(tmp_path, capsys):
    """nightC → nightB2 said only 'environment variable DDPBENCH_FAULT differs: None vs …'; two runs with the same
    fault said nothing at all, and a gate read the fault's 3.7× as the code's."""
    fake_run(tmp_path / "r", "base")
    fake_run(tmp_path / "r", "new")
    for run_id in ("new", "base"):
        path = tmp_path / "r" / run_id / "run.json"
        meta = store.read_run_meta(path.parent)
        meta["environment"]["env_vars"] = {"DDPBENCH_FAULT": "slow:impl=stock,world=2,ms=1500"}
        store.write_json(path, meta)
        _, out = compare(capsys, tmp_path / "r")
        said = [line for line in out.err.splitlines() if "DDPBENCH_FAULT" in line]
        assert said[-1] == ("ddpbench: warning: NEW (new) ran with a fault injected on purpose: DDPBENCH_FAULT='slow:"
                            "impl=stock,world=2,ms=1500' (docs/faults.md): its times and verdicts are the fault's, "
                            "not the code's"), out.err  # fmt: skip
        assert len(said) == (1 if run_id == "new" else 2) and "differs" not in out.err, out.err


def test_a_configuration_only_in_new_is_named_in_one_line(tmp_path, capsys):
    """compare nightD nightA: fsdp ran in NEW only and nothing said so (without_counterpart walks BASE only)."""
    fake_run(tmp_path / "r", "base")
    fake_run(tmp_path / "r", "new")
    steps = [{"run_id": "new", "config_id": "f", "rank": r, "step": s, "warmup": False, "step_ms": 90.0 + s}
             for r in range(2) for s in range(10)]  # fmt: skip
    store.write_configuration(tmp_path / "r" / "new", "f", {"run_id": "new", "config_id": "f", **KEYS, "impl": "fsdp",
                              "dtype": "fp32", "status": "ok", "repeat": 0, "error": None}, steps)  # fmt: skip
    _, out = compare(capsys, tmp_path / "r")
    assert ("ddpbench: warning: NEW adds 1 configuration BASE has no ok result for, not judged: w2 mlp/tiny fsdp\n"
            in out.err), out.err  # fmt: skip
    fake_run(tmp_path / "s", "base")
    fake_run(tmp_path / "s", "new")
    assert "NEW adds" not in compare(capsys, tmp_path / "s")[1].err


def test_the_count_line_adds_up_to_the_configurations_matched(tmp_path, capsys):
    """'6 configuration(s) matched, 0 significantly slower, 4 with too few repeats to tell, …' left the 2 faster
    out: the matched counts now add up."""
    fake_run(tmp_path / "r", "base")
    fake_run(tmp_path / "r", "new", mean_ms=50.0)
    code, out = compare(capsys, tmp_path / "r")
    assert code == 0 and ("1 configuration matched (0 significantly slower, 1 faster, 0 with no significant change, "
                          "0 with too few repeats to tell); 0 not compared") in out.out, out.out  # fmt: skip


def test_the_page_names_base_s_command_first_and_labels_both():
    """Rebuilt from the kept JSON (keys sorted), nightC → nightB2's page gave nightB2's command first, unlabelled."""
    import pandas as pd

    from reports.pages.compare import comparison_page

    judged = {"outcome": "cannot tell", "sentence": "cannot tell: no configuration was judged"}
    text = comparison_page("nightC", "nightB2", pd.DataFrame(), judged, environment=[], not_judged=[], threshold=0.05,
                           commands={"nightB2": "ddpbench bench --run-id B2", "nightC": "ddpbench bench"})  # fmt: skip
    base, new = text.index("<p>BASE nightC ran <code>ddpbench bench</code>"), text.index("<p>NEW nightB2 ran <code>")
    assert base < new


def test_a_configuration_a_run_still_going_has_not_reached_is_not_yet_run(tmp_path, capsys):
    """Against a run still going, fsdp planned but not yet launched read 'no ok result in NEW (not in NEW)'."""
    fake_run(tmp_path / "r", "base")
    fake_run(tmp_path / "r", "new")
    steps = [{"run_id": "base", "config_id": "f", "rank": r, "step": s, "warmup": False, "step_ms": 90.0 + s}
             for r in range(2) for s in range(10)]  # fmt: skip
    store.write_configuration(tmp_path / "r" / "base", "f", {"run_id": "base", "config_id": "f", **KEYS,
                              "impl": "fsdp", "dtype": "fp32", "status": "ok", "repeat": 0, "error": None},
                              steps)  # fmt: skip
    (tmp_path / "r" / "new" / "summary.json").unlink()
    _, out = compare(capsys, tmp_path / "r")
    assert "w2 mlp/tiny fsdp: not compared, no ok result in NEW (not yet run)" in out.err, out.err
    store.write_json(tmp_path / "r" / "new" / "summary.json", {"complete": True})  # at its end: never, not yet
    assert "w2 mlp/tiny fsdp: not compared, no ok result in NEW (not in NEW)" in compare(capsys, tmp_path / "r")[1].err


def test_the_index_lists_each_comparisons_unchanged_and_not_judged_counts():
    """docs/output.md promised the index the counts not judged; its table gave matched, slower, faster, too few."""
    from reports.pages.index import comparisons_index

    kept = {"href": "compare/a_vs_b.html", "base": "a", "new": "b", "outcome": "slower", "matched": 3, "slower": 0,
            "faster": 1, "unchanged": 2, "too_few": 0, "not_compared": 0, "failed": 1, "missing": 2}  # fmt: skip
    cells = (
        '<td>3</td><td>0</td><td>1</td><td>2</td><td>0</td><td><span class="failed">1 failed in NEW, 2 no ok '
        "result in NEW</span></td>"
    )  # matched, slower, faster, no change, too few, not judged
    assert cells in comparisons_index([kept]) and "<th>no significant change</th>" in comparisons_index([kept])
    older = {key: kept[key] for key in ("href", "base", "new", "outcome", "matched", "slower", "faster", "too_few")}
    assert comparisons_index([older]).count("—") == 2  # kept before the counts were: unknown, not 0


def test_runs_of_two_models_are_refused_in_one_line_and_nothing_written(tmp_path, capsys):
    """nightA (gpt2/small) against mlpX (mlp/tiny) exited 3 and wrote a page: nothing could ever match, which is bad
    input. Where NEW also ran the model, or only another dtype, today's verdicts stand (the dtype test above)."""
    fake_run(tmp_path / "r", "base")
    fake_run(tmp_path / "r", "new")
    for part in (tmp_path / "r" / "new" / "configs").glob("*.parquet"):
        pq.write_table(pq.read_table(part).drop(["workload"]).append_column("workload", pa.array(["bert"])), part)
    code, out = compare(capsys, tmp_path / "r")
    assert code == 2 and out.err == ("ddpbench: error: BASE 'base' measured mlp/tiny and NEW 'new' bert/tiny: no "
                                     "configuration can match; give a NEW run of mlp/tiny (compare judges two runs of "
                                     "one model: the same workload and size)\n"), out.err  # fmt: skip
    assert not (tmp_path / "site").exists() and not (tmp_path / "r" / "comparisons").exists()

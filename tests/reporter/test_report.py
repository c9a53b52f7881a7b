"""`ddpbench report`: a static site of relative links, plotly.js shipped once, user text escaped,
every run's failures, skips, CPU-ness and best bucket cap stated on its page."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import run_ddpbench

from harness.results import store
from reports import site

DATA = Path(__file__).resolve().parents[1] / "data"


def test_report_command_writes_index_and_run_page_with_the_figures(small_run, tmp_path):
    out = tmp_path / "site"
    done = run_ddpbench("report", "--results", str(small_run.parent), "--out", str(out))
    assert done.returncode == 0, done.stderr
    said = done.stdout.splitlines()  # each run as its page is written (progress), the index once all are
    assert said[-1] == (
        f"report: {out / 'index.html'} (what-if pages on dgx-h100: the default; --cluster NAME|FILE "
        "for another, '' for none)"
    )  # a new site: the default cluster, said
    assert f"  run e2e: {out / 'runs' / 'e2e.html'}" in said[0]
    # silent for 31 s on one run before, then four lines a run: off a terminal one at most, once the run is long
    parts = ("reading it…", "its what-if page on dgx-h100…", "its page…")
    status = [line for line in done.stderr.splitlines() if line.startswith("ddpbench report: [1/1] run e2e: ")]
    assert len(status) <= 1 and all(line.endswith(parts) for line in status), done.stderr
    page = (out / "runs" / "e2e.html").read_text()
    assert page.count('class="plotly-graph-div"') >= 9
    assert '<script src="../assets/plotly.min.js">' in page
    assert "ran on the <b>CPU</b> with the gloo backend" in page
    assert "Skipped configurations" in page and "needs CUDA" in page  # dataparallel on the CPU
    index = (out / "index.html").read_text()
    assert 'href="runs/e2e.html"' in index and "CPU, gloo, up to 2 ranks" in index
    assert (out / "assets" / "plotly.min.js").stat().st_size > 1_000_000
    assert "cdn.plot.ly" not in page and not re.search(r'src="https?://', page)  # nothing loaded off the machine
    # The answer comes first: a table naming every measured strategy with its step time, before any figure.
    answer = page.split("<h2 id=answer>", 1)[1].split('class="plotly-graph-div"', 1)[0]
    for strategy in ("naive", "flat", "stock", "bucketed", "local"):
        assert re.search(rf"<td>(<b>)?{strategy}(</b>)?</td><td>\d+\.\d+ ms</td>", answer), strategy
    # --profile: every configuration's traces are linked, with how to open them and the profiler caveat.
    profiles = page.split("<h2 id=profiles>", 1)[1].split("<h2", 1)[0]
    assert "https://ui.perfetto.dev" in profiles and "TraceAnalysis(trace_dir=" in profiles
    assert "under the profiler" in profiles and "Profiled:" in page.split("<h2 id=answer>")[0]
    for link in re.findall(r'href="([^"]+rank\d+\.json)"', profiles):
        assert (out / "runs" / link).resolve().is_file(), link
    assert len(re.findall(r'href="[^"]+rank\d+\.json"', profiles)) >= 2 * 4  # 2 ranks × 4 strategies at w2


def hand_made_run(results, *, error: str, command: list[str]):
    run = results / "hostile"
    store.write_json(run / "run.json", {"run_id": "hostile", "started_at": "2026", "device": "cpu", "command": command})
    base = {
        "run_id": "hostile",
        "impl": "naive",
        "impl_options": "{}",
        "workload": "mlp",
        "size": "tiny",
        "world_size": 2,
    }
    store.write_configuration(run, "c0", {**base, "config_id": "c0", "status": "failed", "error": error})
    ok = {**base, "config_id": "c1", "status": "ok", "step_ms_median": 2.0, "step_ms_p10": 1.5, "step_ms_p90": 3.0}
    parity = {
        "parity_max_abs_diff": 1.3e-5,
        "parity_tolerance": 1.03e-5,
        "parity_note": "largest difference in 0.weight",
    }
    store.write_configuration(run, "c1", {**ok, "parity_ok": False, **parity})
    return run


def test_user_text_is_escaped_and_failures_are_shown_with_their_error(tmp_path):
    hand_made_run(tmp_path / "results", error="<script>alert(1)</script>", command=["ddpbench", "<b>x</b>"])
    built = site.build_site(results=tmp_path / "results", out=tmp_path / "site")
    page = built.run_pages["hostile"].read_text()
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<b>x</b>" not in page and "&lt;b&gt;x&lt;/b&gt;" in page
    assert "Failed configurations" in page and "1 ok, 1 failed, 0 skipped" in page
    assert "naive (PARITY FAILED)" in page and "<b>FAILED</b>" in page
    # the banner gives the size, for a reader to judge: a failure by rounding reads differently from a wrong training
    assert "PARITY FAILED: c1 (max |Δ| 1.30e-05 against 1.03e-05 in 0.weight) did not train like one" in page


def test_an_empty_results_folder_builds_an_index_that_says_so(tmp_path):
    built = site.build_site(results=tmp_path / "none", out=tmp_path / "site")
    assert "No runs yet" in built.index.read_text()


@pytest.fixture
def golden(golden_site) -> site.BuiltSite:
    """The site of the golden runs in tests/data/, built once for the tests that only read it (conftest.py)."""
    return golden_site


def test_the_index_lists_runs_newest_first_with_their_machine(golden):
    index = golden.index.read_text()
    order = [index.index(f'href="runs/{name}.html"') for name in ("gpu_memory", "failures", "bucket_sweep", "cpu_run")]
    assert order == sorted(order)
    assert "2 × NVIDIA H100 80GB HBM3, NCCL, up to 2 ranks on 1 node" in index
    assert "CPU, gloo, up to 2 ranks" in index


def test_a_page_that_prints_a_command_says_once_that_it_assumes_the_venv(golden):
    """A newcomer pasted a page's `ddpbench predict …` where the README's command is `.venv/bin/ddpbench`: command
    not found. A page names it as the README does (it may be read on another machine) and says so once."""
    from reports.pages.html import COMMAND, VENV_NOTE, page

    pages = [golden.index, *golden.run_pages.values(), *golden.whatif_pages.values()]
    printing = [path for path in pages if COMMAND.search(path.read_text())]
    assert golden.run_pages["cpu_run"] in printing  # its answer points to `ddpbench predict --run …`
    for path in pages:
        assert path.read_text().count(VENV_NOTE) == (path in printing), path.name
    assert VENV_NOTE in page("t", "<pre>ddpbench bench --gpus 2</pre>", depth=0, plots=False)
    assert VENV_NOTE not in page("t", "see <code>ddpbench predict</code>", depth=0, plots=False)  # a mention alone


def test_failed_rows_show_their_error_and_skipped_rows_their_reason(golden):
    page = golden.run_pages["failures"].read_text()
    assert "Failed configurations" in page and "rank 1: RuntimeError: &lt;gloo&gt; connection reset" in page
    assert "Skipped configurations" in page and "needs CUDA GPUs" in page
    assert "2 ok, 1 failed, 1 skipped" in page
    # the answer first: the failed listed above it, the skipped (a device's, a plug-in's) below
    assert page.index("Failed configurations") < page.index("<h2 id=answer>") < page.index("Skipped configurations")


def test_warning_banners_are_one_line_high_with_their_details_folded(golden):
    tops = [page.read_text().split("<h2 id=answer>")[0] for page in golden.run_pages.values()]
    assert any('<details class="banner warning"><summary><b>' in top for top in tops)  # four pushed the answer down
    assert not any('<p class="banner warning">' in top for top in tops)


def test_a_bucket_sweep_of_one_repeat_names_no_best_cap_and_says_it_cannot_tell(golden):
    page = golden.run_pages["bucket_sweep"].read_text()
    assert "Best bucket_cap_mb for" not in page  # a "best" is the recommendation's to name, over repeats
    table = page.split("Recommended bucket_cap_mb", 1)[1]
    assert "2 ranks</td><td>too few repeats to tell (have 1, need about " in table
    assert "1 rank</td>" not in table  # nothing is communicated at world size 1: nothing to recommend


def test_a_gpu_run_has_no_cpu_banner_and_shows_its_topology(golden):
    page = golden.run_pages["gpu_memory"].read_text()
    assert "ran on the <b>CPU</b>" not in page
    assert "NVLink P2P" in page and "550.54.15" in page


def test_every_link_and_script_is_relative_and_resolves(golden):
    built = golden
    for path in [built.index, *built.run_pages.values()]:
        for target in re.findall(r'(?:href|src)="([^"#]+)"', path.read_text()):
            assert "://" not in target, target
            assert (path.parent / target).resolve().is_file(), f"{path.name} links to missing {target}"


def test_rebuilding_keeps_the_shared_plotly_asset_once(tmp_path):
    out = tmp_path / "site"
    shutil.copytree(DATA / "cpu_run", tmp_path / "results" / "cpu_run")
    site.build_site(results=tmp_path / "results", out=out)
    site.build_site(results=tmp_path / "results", out=out)
    assert [p.name for p in (out / "assets").iterdir()] == ["plotly.min.js"]
    assert "Plotly.newPlot" in (out / "runs" / "cpu_run.html").read_text()
    assert "plotly.js v" not in (out / "runs" / "cpu_run.html").read_text()  # the library is not inlined


def test_the_reporter_names_and_skips_bad_parts_and_a_run_of_a_newer_schema(tmp_path):
    results = tmp_path / "results"
    run = hand_made_run(results, error="rank 1: RuntimeError: boom", command=["ddpbench"])
    (run / "configs" / "truncated.parquet").write_bytes((run / "configs" / "c1.parquet").read_bytes()[:100])
    future = {"schema_version": store.SCHEMA_VERSION + 1, "run_id": "future", "config_id": "c0", "status": "ok",
              "impl": "naive", "workload": "mlp", "world_size": 1}  # fmt: skip
    store.write_json(results / "future" / "run.json", {"run_id": "future", "started_at": "2027"})
    (results / "future" / "configs").mkdir()
    pq.write_table(pa.Table.from_pylist([future]), results / "future" / "configs" / "c0.parquet")

    done = run_ddpbench("report", "--results", str(results), "--out", str(tmp_path / "site"))

    assert done.returncode == 0, done.stderr
    assert f"ddpbench: warning: skipping {run / 'configs' / 'truncated.parquet'}: unreadable Parquet" in done.stderr
    assert f"ddpbench: warning: skipping run {results / 'future'}" in done.stderr and "upgrade" in done.stderr
    assert (tmp_path / "site" / "runs" / "hostile.html").is_file()
    assert not (tmp_path / "site" / "runs" / "future.html").exists()


def test_a_copied_run_keeps_its_own_page_named_by_folder(tmp_path):
    """`cp -r results/X results/X-base`: two folders, one run id in run.json; neither page is lost."""
    results = tmp_path / "results"
    shutil.copytree(DATA / "cpu_run", results / "cpu_run")
    shutil.copytree(DATA / "cpu_run", results / "cpu_run-base")
    built = site.build_site(results=results, out=tmp_path / "site")
    assert sorted(built.run_pages) == ["cpu_run", "cpu_run-base"]
    assert all(page.is_file() for page in built.run_pages.values())
    index = built.index.read_text()
    assert 'href="runs/cpu_run.html"' in index and 'href="runs/cpu_run-base.html"' in index


def test_a_copied_run_gets_its_own_comparison_links_keyed_by_folder(tmp_path):
    """compare names runs by folder; keyed by run id, both copies would show the same link."""
    results, out = tmp_path / "results", tmp_path / "site"
    shutil.copytree(DATA / "cpu_run", results / "cpu_run")
    shutil.copytree(DATA / "cpu_run", results / "cpu_run-base")
    store.write_json(out / "compare" / "cpu_run-base-vs-cpu_run.json", {"base": "cpu_run-base", "new": "cpu_run"})
    (out / "compare" / "cpu_run-base-vs-cpu_run.html").write_text("<html></html>")
    rows = site.build_site(results=results, out=out).index.read_text().split("<tr")
    link = '<a href="compare/cpu_run-base-vs-cpu_run.html">'
    (new_row,) = [row for row in rows if 'href="runs/cpu_run.html"' in row]
    (base_row,) = [row for row in rows if 'href="runs/cpu_run-base.html"' in row]
    # one name on both rows, as the comparison's page and the index's list of comparisons name it: BASE → NEW
    assert f"{link}cpu_run-base → cpu_run</a>" in new_row and f"{link}cpu_run-base → cpu_run</a>" in base_row


def test_a_build_without_a_cluster_removes_the_what_if_page_an_earlier_build_left(tmp_path):
    """Nothing links it any more, and it answers for a cluster this build was not asked about."""
    stale = tmp_path / "runs" / "bucket_sweep.whatif.html"
    stale.parent.mkdir()
    stale.write_text("what if on an earlier build's cluster")
    assert site.write_whatif_page(DATA / "bucket_sweep", {}, pd.DataFrame(), None, tmp_path) is None
    assert not stale.exists()


def test_report_judges_an_older_runs_cap_sweep_again_by_todays_rule(tmp_path):
    """A sweep judged before caps of one bucket layout were one point kept its per-cap verdict (the luckier of two
    identical programs named, with a gain between them) until benched again: report writes it again from the run's
    rows, at the run's own confidence, and writes none where a run had none."""
    from harness.analysis.verdicts import sweep
    from harness.commands import report
    from reports.pages.pooled import run_confidence

    run = tmp_path / "results" / "bucket_sweep"
    shutil.copytree(DATA / "bucket_sweep", run)
    stale = store.read_recommendations(run).assign(best_step_ms=-1.0, decision="recommend")
    store.write_recommendations(run, stale)
    bare = tmp_path / "results" / "cpu_run"
    shutil.copytree(DATA / "cpu_run", bare)
    (bare / "recommendations.parquet").unlink(missing_ok=True)
    report._rejudge_cap_sweeps(tmp_path / "results")
    judged = store.read_recommendations(run)
    expected = sweep.recommendations(store.read_configs(run), store.read_steps(run),
                                     confidence=run_confidence(store.read_run_meta(run)))  # fmt: skip
    assert (judged["best_step_ms"] > 0).all()
    pd.testing.assert_series_equal(judged["best_step_ms"], expected["best_step_ms"], check_names=False)
    assert list(judged["decision"]) == list(expected["decision"])
    assert not (bare / "recommendations.parquet").exists()


def test_the_pages_commands_name_the_results_folder_and_the_site_they_were_built_from(golden):
    """A user whose runs live in their own --results read `ddpbench predict --run cpu_run …` on its pages: the id
    resolves only in the default results/, so the command failed as printed. Each now carries --results."""
    results = shlex.quote(str(DATA))
    out = shlex.quote(str(golden.index.parent))
    run_page = golden.run_pages["cpu_run"].read_text()
    assert f"ddpbench predict --run cpu_run --results {results} --cluster NAME --local-step-ms MS" in run_page
    collectives = golden.run_pages["failures"].read_text()  # no network measured: how to measure one, and rebuild
    assert f"ddpbench collectives --gpus 2 --device cpu --backend gloo --results {results}</code>" in collectives
    assert f"<code>ddpbench report --results {results} --out {out}</code>" in collectives
    # one world size (failures): nothing to scale here, yet predict prices it on a cluster
    scaling = "nothing to scale.</p><p>Its scaling efficiency on a cluster, per GPU count: <code>ddpbench predict"
    assert f"{scaling} --run failures --results {results} --cluster NAME" in collectives
    for page in golden.run_pages.values():  # no run named without its folder
        assert not re.search(r"--run [\w.-]+ --cluster", page.read_text()), page


def test_a_run_without_a_gradient_profile_says_why_it_has_no_what_if_page_and_what_gives_one():
    """`report` built no what-if page for a run benched with --largest-only and said nothing: its console line and
    run page now say why (no configuration at 1 rank, where bench records the profile) and the commands, as they
    run, that give it one."""
    from types import SimpleNamespace

    from reports.pages.run.run_sections import on_a_cluster

    h100 = SimpleNamespace(name="dgx-h100", path=None)
    meta = {"device": "cpu", "page": "failures", "results_folder": "mine", "site_folder": "site",
            "config": {"ladder": False}}  # fmt: skip
    said = site.no_whatif_words(meta, store.read_configs(DATA / "failures"), h100)  # world size 2 alone
    assert said.startswith("it ran no configuration at 1 rank (--largest-only), where bench records the gradient")
    assert ("; `ddpbench predict --run failures --results mine --cluster dgx-h100` measures one and stores it with "
            "the run, then `ddpbench report --results mine --out site` writes the page") in said  # fmt: skip
    gpu = {**meta, "device": "cuda", "page": "gpu_memory"}  # 1 rank measured, before profiles were recorded
    said = site.no_whatif_words(gpu, store.read_configs(DATA / "gpu_memory"), h100)
    assert said.startswith("it stored no gradient profile (bench records one at 1 rank); `ddpbench predict --run")
    assert "--cluster dgx-h100` on a machine with its cuda device measures one" in said
    assert site.no_whatif_words(meta, store.read_configs(DATA / "failures"), None) == ""  # none asked for
    page = on_a_cluster({**meta, "whatif_cluster": "dgx-h100", "whatif_missing": "none; `ddpbench report` <x>"})
    assert "No what-if page on dgx-h100: none; <code>ddpbench report</code> &lt;x&gt;.</p>" in page


def test_a_run_that_accumulated_gradients_gets_no_what_if_page_and_says_why(tmp_path, monkeypatch):
    """The what-if model prices one micro-batch and one sync a step, as `predict --run` does, which refuses a run of
    `--grad-accum` K>1: the site built its page anyway, a step of K micro-batches priced as one. Now it writes none and
    says why; the same run at K=1 keeps its page."""
    import dataclasses

    from harness.perfmodel.clusters.cluster import load

    shutil.copytree(DATA / "cpu_run", tmp_path / "results" / "cpu_run")
    (tmp_path / "site" / "runs").mkdir(parents=True)
    h100, real_read = load("dgx-h100"), site.read_run

    def read_at(accum: int):
        def read(folder, **kwargs):
            run = real_read(folder, **kwargs)
            return dataclasses.replace(run, configs=run.configs.assign(grad_accum=accum))

        return read

    built = {}
    for accum in (1, 4):
        monkeypatch.setattr(site, "read_run", read_at(accum))
        row, _, whatif = site.write_run(tmp_path / "results" / "cpu_run", tmp_path / "site", h100, comparisons=[],
                                        shared=[])  # fmt: skip
        built[accum] = whatif, (tmp_path / "site" / "runs" / "cpu_run.whatif.html").is_file(), row["whatif_missing"]
    assert built[1][:2] == (tmp_path / "site" / "runs" / "cpu_run.whatif.html", True)
    assert built[4][:2] == (None, False)  # K=1's page, written first, removed: nothing may link it
    assert built[4][2].startswith("it measured gradient accumulation (--grad-accum 4)")
    said = site.no_whatif_words({"page": "cpu_run"}, pd.DataFrame({"grad_accum": [1, 4]}), h100)
    assert said.startswith("it measured gradient accumulation (--grad-accum 4), which the what-if model does not price")
    assert site.accumulated(pd.DataFrame({"grad_accum": [1, 1]})) == [] == site.accumulated(pd.DataFrame({"x": [1]}))

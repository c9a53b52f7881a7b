"""`ddpbench report`: a static site with the figure, plotly.js shipped once, user text escaped."""

from __future__ import annotations

from conftest import run_ddpbench

from harness import store
from reports import figures, site


def test_report_command_writes_index_and_run_page_with_the_figure(small_run, tmp_path):
    out = tmp_path / "site"
    done = run_ddpbench("report", "--results", str(small_run.parent), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert str(out / "index.html") in done.stdout
    page = (out / "runs" / "e2e.html").read_text()
    assert 'class="plotly-graph-div"' in page
    assert '<script src="../assets/plotly.min.js">' in page
    assert "ran on the <b>CPU</b> with the gloo backend" in page
    index = (out / "index.html").read_text()
    assert 'href="runs/e2e.html"' in index and "CPU, gloo, up to 2 rank(s)" in index
    assert (out / "assets" / "plotly.min.js").stat().st_size > 1_000_000
    assert "cdn.plot.ly" not in page and "https://" not in page.split("<h2>Environment</h2>")[0]


def test_step_time_figure_has_one_trace_per_strategy_with_p10_p90_whiskers(small_run):
    configs = store.read_configs(small_run)
    figure = figures.step_time_by_strategy(configs, workload="mlp")
    assert sorted(trace.name for trace in figure.data) == ["bucketed", "flat", "local", "naive", "stock"]
    for trace in figure.data:
        assert list(trace.x) == ["1 rank", "2 ranks"]
        assert all(minus >= 0 for minus in trace.error_y.arrayminus)


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
    store.write_configuration(run, "c1", {**ok, "parity_ok": False, "parity_max_abs_diff": 0.3})
    return run


def test_user_text_is_escaped_and_failures_are_shown_with_their_error(tmp_path):
    hand_made_run(tmp_path / "results", error="<script>alert(1)</script>", command=["ddpbench", "<b>x</b>"])
    built = site.build_site(results=tmp_path / "results", out=tmp_path / "site")
    page = built.run_pages["hostile"].read_text()
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<b>x</b>" not in page and "&lt;b&gt;x&lt;/b&gt;" in page
    assert "Failed configurations" in page and "1 ok, 1 failed, 0 skipped" in page
    assert "naive (PARITY FAILED)" in page and "<b>FAILED</b>" in page


def test_an_empty_results_folder_builds_an_index_that_says_so(tmp_path):
    built = site.build_site(results=tmp_path / "none", out=tmp_path / "site")
    assert "No runs yet" in built.index.read_text()

"""`report`, `compare` and `predict` refuse a missing or wrong folder with one line and exit 2, write
nothing, and `predict` keeps its older spelling (`--results RUN`) working with a warning."""

from __future__ import annotations

import pytest

from harness import cli
from harness.results import store


def one_line_error(capsys) -> str:
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("ddpbench: error: ") and captured.err.count("\n") == 1, captured.err
    return captured.err


def test_report_on_a_missing_folder_exits_2_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "site"
    assert cli.main(["report", "--results", str(tmp_path / "no" / "such"), "--out", str(out)]) == 2
    assert "does not exist" in one_line_error(capsys)
    assert not out.exists()


def test_report_on_a_file_exits_2_and_writes_nothing(tmp_path, capsys):
    file = tmp_path / "results.txt"
    file.write_text("not a folder")
    assert cli.main(["report", "--results", str(file), "--out", str(tmp_path / "site")]) == 2
    assert "is a file" in one_line_error(capsys)
    assert not (tmp_path / "site").exists()


def test_report_on_one_run_folder_names_the_folder_that_holds_it(tmp_path, capsys):
    store.write_json(tmp_path / "r1" / "run.json", {"run_id": "r1"})
    assert cli.main(["report", "--results", str(tmp_path / "r1"), "--out", str(tmp_path / "site")]) == 2
    assert f"--results {str(tmp_path)!r}" in one_line_error(capsys)


def test_report_on_an_empty_folder_builds_a_site_that_says_so(tmp_path, capsys):
    (tmp_path / "results").mkdir()
    assert cli.main(["report", "--results", str(tmp_path / "results"), "--out", str(tmp_path / "site")]) == 0
    assert "No runs yet" in (tmp_path / "site" / "index.html").read_text()


def test_compare_with_a_missing_results_folder_says_so(tmp_path, capsys):
    missing = tmp_path / "gone"
    assert cli.main(["compare", "a", "b", "--results", str(missing), "--out", str(tmp_path / "site")]) == 2
    err = one_line_error(capsys)
    assert f"--results {str(missing)!r} does not exist; give the folder `ddpbench bench` wrote into" in err
    assert not (tmp_path / "site").exists()


def test_predict_results_names_a_folder_and_a_missing_one_is_refused(tmp_path, capsys):
    assert cli.main(["predict", "--results", str(tmp_path / "nowhere"), "--busbw", "9GB/s"]) == 2
    assert "nowhere" in one_line_error(capsys)


def test_predict_run_not_in_the_results_folder_is_refused_naming_it(tmp_path, capsys):
    assert cli.main(["predict", "--run", "no-such-run", "--results", str(tmp_path)]) == 2
    err = one_line_error(capsys)
    assert "--run 'no-such-run'" in err and str(tmp_path) in err


@pytest.mark.parametrize("spelling", ["id", "folder"])
def test_predict_results_run_is_the_deprecated_spelling_of_run(tmp_path, capsys, monkeypatch, spelling):
    """Old invocations keep working: the run is found, and a warning names the new spelling."""
    from harness.commands.predict import command as predict

    store.write_json(tmp_path / "r1" / "run.json", {"run_id": "r1"})
    seen = {}

    def from_run(args, given, caps, run_dir, *, device):
        seen["run"], seen["folder"] = args.run, args.results_dir
        raise SystemExit(0)  # stop before profiling: only the resolution is under test

    monkeypatch.setattr(predict, "_from_run", from_run)
    value = "r1" if spelling == "id" else str(tmp_path / "r1")
    flags = ["--results", value, "--results-dir", str(tmp_path)] if spelling == "id" else ["--results", value]
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit):
        cli.main(["predict", *flags])
    assert seen["run"] == value
    assert f"use --run {value}" in capsys.readouterr().err


def test_the_resume_hint_is_a_command_that_runs_from_this_shell(tmp_path, monkeypatch):
    """After `make setup` ddpbench lives in .venv/bin, off PATH: the Ctrl-C hint must say so."""
    from harness.commands import console

    script = tmp_path / ".venv" / "bin" / "ddpbench"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.argv", [str(script), "bench"])
    monkeypatch.setenv("PATH", "/nonexistent")
    assert console.resume_hint("r1", "results") == ".venv/bin/ddpbench bench --resume r1 --results results"
    monkeypatch.setenv("PATH", str(script.parent))  # activated: the plain name works
    assert console.resume_hint("r1", "results") == "ddpbench bench --resume r1 --results results"


def test_a_run_without_a_profile_is_told_why_it_has_no_what_if_page(tmp_path):
    """`report --cluster` of a `bench --largest-only` run listed its page and no what-if page, without a word: it
    stored no gradient profile (bench measures one at world size 1), which predict measures and keeps; and its
    memory per rank, fitted from two world sizes, needs a bench of the ladder."""
    import pandas as pd

    from harness.perfmodel.clusters import cluster as clusters
    from reports import site

    dgx = clusters.load("dgx-a100-40gb")
    meta = {"run_id": "a1", "page": "a1", "config": {"ladder": False}, "results_folder": str(tmp_path)}
    one_world = pd.DataFrame({"status": ["ok"], "world_size": [2]})
    said = site.no_whatif_words(meta, one_world, dgx)
    assert said.startswith("it ran no configuration at 1 rank (--largest-only), where bench records the gradient")
    assert f"`ddpbench predict --run a1 --results {tmp_path} --cluster dgx-a100-40gb` measures one" in said
    assert said.endswith("its memory per rank needs two world sizes: a bench without --largest-only")
    assert site.no_whatif_words(meta, one_world, None) == ""  # no cluster: no what-if page is asked for

"""`predict --json FILE`: the answer a CI script reads instead of the console (the bookings compared, the rankings,
decided or open), the same figures and verdict the console says; refused in one line where it has no answer to hold."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from harness import cli

DATA = Path(__file__).resolve().parent.parent / "data"
DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_json_holds_the_consoles_bookings_and_verdict_and_says_what_is_open(tmp_path, capsys):
    shutil.copytree(DATA / "cpu_run", tmp_path / "cpu_run")
    answer = tmp_path / "answer.json"
    assert cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path), "--cluster", "dgx-a100,dgx-h100",
                     "--nodes", "1,2", "--local-step-ms", "310", "--local-step-gpu", "a100-sxm4-80gb",
                     "--gpu-hour-price", "dgx-a100=1.8,dgx-h100=3.2", "--train-samples", "6.4M",
                     "--json", str(answer), "--out", str(tmp_path / "rows.csv")]) == 0  # fmt: skip
    said = capsys.readouterr().out.splitlines()
    record = json.loads(answer.read_text())
    header = re.split(r"\s{2,}", said[1].strip())
    rows = [dict(zip(header, re.split(r"\s{2,}", line.strip()), strict=False)) for line in said[2:6]]
    assert [(b["cluster"], b["gpus"]) for b in record["bookings"]] == [(r["cluster"], int(r["GPUs"])) for r in rows]
    for booking, row in zip(record["bookings"], rows, strict=True):
        low, high = booking["step_ms"]  # the console's '98.21–188.7', or one figure where both ends are one
        assert row["step ms"] == (f"{low:.4g}" if low == high else f"{low:.4g}–{high:.4g}")
        assert booking["book"] == row["book"] and booking["strategies"] == ["stock"] and booking["bucket_cap_mb"] == 25
        run_h = [float(v) for v in row["run h"].split("–")]
        assert booking["run_hours"] == [pytest.approx(h, rel=5e-3) for h in (run_h if len(run_h) == 2 else run_h * 2)]
        assert booking["run_cost"][0] == pytest.approx(float(row["run cost"].split("–")[0]), rel=5e-3)
    verdict = next(line for line in said if line.startswith("ddpbench predict: fastest: "))
    assert record["verdict"] == verdict.removeprefix("ddpbench predict: ")
    assert record["fastest"] == {"best": [{"cluster": "dgx-h100", "gpus": 16}], "decided": True, "open_on": [],
                                 "best_at_short_end": None, "best_at_long_end": None}  # fmt: skip
    # the console's 'cheapest … open until one step is measured on dgx-h100's GPU'
    assert record["cheapest"]["decided"] is False and record["cheapest"]["open_on"] == ["dgx-h100"]
    assert record["decided"] is False and record["prices"] == {"dgx-a100": 1.8, "dgx-h100": 3.2}
    # every column of --out's rows is named in the docs, as a script's author looks it up (21 were not)
    named = " ".join(doc.read_text() for doc in DOCS.glob("*.md"))
    columns = pd.read_csv(tmp_path / "rows.csv").columns  # named as code: `step_ms`, or in a list `cluster, run, …`
    assert not [column for column in columns if not re.search(rf"[`,]\s?{re.escape(column)}[`,]", named)]


@pytest.mark.parametrize(
    ("flags", "error"),
    [
        (["--gpus", "8", "--json", "a.json"], "--json 'a.json' writes the answer of a step predicted on a cluster"),
        (["--cluster", "dgx-h100", "--json", "a.csv"], "--json 'a.csv': the answer is a .json file"),
        (["--cluster", "dgx-h100", "--json", "missing/a.json"], "--json"),
    ],
)
def test_a_json_without_an_answer_to_hold_or_not_a_json_file_is_refused_in_one_line(tmp_path, capsys, flags, error):
    shutil.copytree(DATA / "cpu_run", tmp_path / "cpu_run")
    flags = [str(tmp_path / f) if f.endswith((".json", ".csv")) else f for f in flags]
    error = error.replace("'a.json'", repr(str(tmp_path / "a.json"))).replace("'a.csv'", repr(str(tmp_path / "a.csv")))
    assert cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path), *flags]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and error in captured.err, captured.err
    assert not list(tmp_path.glob("*.json")) and not list(tmp_path.glob("*.csv"))

"""Your model, end to end: from a folder outside the repository, the example workload file (it imports
only torch) and zoo models (torchvision, and transformers' seq2seq T5, the one with two inputs) under
every strategy at two world sizes, through the real command line; then the report names them.

One run serves every test here (two launches). A causal LM (hf:llama) builds and trains in
tests/plugins/test_zoo.py; the heavier zoo models of the acceptance (ConvNeXt, ViT-B/16, Llama under
DDP and FSDP) are the same code path at a bigger size: docs/measured/your-model-cpu.md has their figures.
"""

from __future__ import annotations

import html
import itertools
import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from conftest import run_ddpbench

import impls
from harness import cli

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ("my_workload.py:MyModel", "torchvision:squeezenet1_1", "hf:t5")


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("my-project")
    shutil.copy(ROOT / "examples" / "my_workload.py", folder / "my_workload.py")
    done = run_ddpbench("bench", "--gpus", "2", "--workloads", ",".join(WORKLOADS), "--size", "tiny",
                        "--steps", "2", "--warmup", "1", "--repeats", "1", "--results", "results", "--run-id", "mine",
                        cwd=folder, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # the report in this process, from the same folder: a fresh interpreter would only repeat torch's import
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.chdir(folder)
        assert cli.main(["report", "--results", "results", "--out", "site"]) == 0
    run = folder / "results" / "mine"
    return {"folder": folder, "run": run, "configs": pd.read_parquet(run / "configs"), "out": done.stdout,
            "page": (folder / "site" / "runs" / "mine.html").read_text()}  # fmt: skip


def test_every_strategy_that_applies_trains_each_workload_like_one_process(elsewhere):
    configs = elsewhere["configs"]
    assert sorted(set(configs["workload"])) == sorted(WORKLOADS)
    assert len(configs) == len(WORKLOADS) * len(impls.names()) * 2
    skipped = configs[configs["status"] == "skipped"]
    assert set(skipped["impl"]) == {"dataparallel", "rpc_hybrid"}, skipped[["impl", "error"]]  # no GPU; no remote part
    ran = configs[configs["status"] != "skipped"]
    assert (ran["status"] == "ok").all(), ran.loc[ran["status"] != "ok", ["config_id", "error"]].to_string()
    judged = ran[~ran["baseline"]]
    assert judged["parity_ok"].all(), judged.loc[~judged["parity_ok"].astype(bool), ["config_id", "parity_note"]]


def test_the_run_records_which_code_ran(elsewhere):
    file = elsewhere["folder"] / "my_workload.py"
    recorded = json.loads((elsewhere["run"] / "run.json").read_text())["workloads"]
    mine = recorded["my_workload.py:MyModel"]
    assert (mine["kind"], mine["path"], mine["spec"]) == ("file", str(file), f"{file}:MyModel")
    import hashlib

    assert mine["sha256"] == hashlib.sha256(file.read_bytes()).hexdigest()
    assert recorded["hf:t5"]["kind"] == "hf" and recorded["torchvision:squeezenet1_1"]["path"] is None
    specs = set(elsewhere["configs"]["workload_spec"])
    assert f"{file}:MyModel" in specs and "hf:t5" in specs


def test_zoo_models_count_their_flops_and_tokens(elsewhere):
    rows = elsewhere["configs"].query("status == 'ok'").set_index("workload")
    assert (rows["flops_per_sample"] > 0).all() and (rows["param_count"] > 0).all()
    assert (rows["activation_mb"] > 0).all()
    assert rows.loc["hf:t5", "tokens_per_batch"].max() == 64 * 2  # both sequences
    assert rows.loc["my_workload.py:MyModel", "tokens_per_batch"].isna().all()


def test_the_model_input_is_profiled_for_each_workload(elsewhere):
    names = sorted(p.name for p in (elsewhere["run"] / "gradprofile").glob("*.parquet"))
    assert len(names) == len(WORKLOADS) and all(":" not in name for name in names)


def test_the_report_page_names_every_workload_and_its_file(elsewhere):
    page = elsewhere["page"]
    for name in WORKLOADS:
        assert f"<h3>{name}/tiny · fp32 · sgd</h3>" in page  # the setup, its precision and its optimizer
    assert "Workloads: the code that ran" in page and str(elsewhere["folder"] / "my_workload.py") in page
    assert "w2 my_workload.py:MyModel/tiny stock" in elsewhere["out"]
    whatif = html.unescape((elsewhere["folder"] / "site" / "runs" / "mine.whatif.html").read_text())
    # --size scales a zoo model, not a file of yours: its gradients are not called 'the tiny size's' (a CPU run's page:
    # what the network costs a step, of the zoo models' full size, counted on the meta device)
    assert "with the model's " in whatif and "MiB of gradients, as the run built it (--size scales no file)" in whatif
    assert "with the full size's " in whatif and "with the tiny size's" not in whatif


def test_predict_counts_the_model_you_will_train_from_a_smaller_one_benched(elsewhere, monkeypatch, capsys):
    """A walkthrough benched its own 1.3B-parameter file shrunk with --wopt, and predict answered for the shrunk one
    ('stock fits (244 MiB a rank at most)'): --train-wopt names the model to train, whose memory and step floors
    are counted on the meta device (MyModel at width 2048: 4 × (2048² + 2048) + 2048 × 10 + 10 parameters,
    64.1 MiB of fp32 gradients in 10 tensors)."""
    folder = elsewhere["folder"]
    done = run_ddpbench("predict", "--run", "mine", "--results", "results", "--workload", "my_workload.py:MyModel",
                        "--cluster", "dgx-h100", "--nodes", "1", "--train-wopt", "width=2048", "--local-step-ms",
                        "20", "--out", "rows.csv", "--page", "page.html", cwd=folder)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    said = done.stdout
    assert "\n  the model you will train (width=2048): its parameters and activations counted on the meta" in said
    assert ("the model you will train puts floors under each step, right of | below (≥; left of it the "
            "benched model's): my_workload.py:MyModel's parameters (64.1 MiB of gradients in 10 tensors, counted on "
            "the meta device)") in said  # fmt: skip  # its options said once, with its memory above
    assert "≥" in said.split("the answer on dgx-h100")[1]  # the choice ranks by the trained model's floors
    rows = pd.read_csv(folder / "rows.csv")
    assert set(rows["train_options"]) == {'{"width": 2048}'}
    page = html.unescape((folder / "page.html").read_text())  # the page to share says which model it counted
    assert "counted for <b>the model you will train</b> (width=2048)" in page and "the tiny size's" not in page
    assert "<b>my_workload.py:MyModel[width=2048]/" in page  # its memory named as the model counted, not the run's
    # --nodes 1: its choice and memory at 8 GPUs, the count asked (the page once booked 8 to 1,024 whatever it said)
    choice = page.split("<th>book</th>")[1].split("</table>")[0]
    assert [row.split("<td>")[1].split("</td>")[0] for row in choice.split("<tr")[1:]] == ["8"]
    memory = page.split("<h2>Model state per rank</h2>")[1].split("</table>")[0]
    assert "<th>8 GPUs</th>" in memory and "16 GPUs" not in memory
    # at 4× the batch, 4× forward and backward (the optimizer's part, estimated from the parameters, stays): an own
    # cost left out (hooks and copies, with the parameters) stays as it was
    batch, optimizer = int(rows["run_batch_size"].iloc[0]), float(rows["local_optimizer_ms"].iloc[0])
    assert 0 < optimizer < 20  # not given: one pass of SGD over its 16.8 M parameters at an H100's bandwidth
    # the rest in this process (the command above is the real command line): a fresh interpreter would only repeat
    # torch's import, the run's and your file's
    monkeypatch.chdir(folder)
    wider = cli.main(["predict", "--run", "mine", "--results", "results", "--workload", "my_workload.py:MyModel",
                      "--cluster", "dgx-h100", "--nodes", "1", "--train-wopt", "width=2048", "--batch-size",
                      str(4 * batch), "--local-step-ms", repr(4 * (20 - optimizer) + optimizer), "--out", "rows4.csv",
                      "--page",
                      "page4.html"])  # fmt: skip
    assert wider == 0, capsys.readouterr().err[-2000:]
    page4 = html.unescape((folder / "page4.html").read_text())  # its heading: the batch predicted, and the run's
    assert f" to train, batch {4 * batch} per GPU (profiled: " in page4  # the batch predicted with the model to train,
    assert f", batch {batch} per GPU)</h2>" in page4  # the run's inside '(profiled: …)'
    own = [pd.read_csv(folder / name)["fsdp_own_left_out_ms"].iloc[0] for name in ("rows.csv", "rows4.csv")]
    # (equal where one rank's FSDP step exceeded DDP's; at this size on a busy CPU it may not: both 0, nothing shown)
    assert own[0] >= 0 and own[1] == pytest.approx(own[0], rel=1e-6, abs=1e-9)
    capsys.readouterr()
    code = cli.main(["predict", "--run", "mine", "--results", "results", "--workload", "my_workload.py:MyModel",
                     "--cluster", "dgx-h100", "--train-wopt", "widht=2048"])  # fmt: skip
    bad = capsys.readouterr()
    assert code == 2 and "--train-wopt widht=2048 is not valid" in bad.err
    assert "Traceback" not in bad.err and len(bad.err.strip().splitlines()) == 1
    twice = cli.main(["predict", "--run", "mine", "--results", "results", "--workload", "my_workload.py:MyModel",
                      "--cluster", "dgx-h100", "--train-wopt", "width=64", "--train-wopt",
                      "width=128"])  # fmt: skip  # a typo in a long command must not change the answer unsaid
    assert twice == 2 and "--train-wopt gives width more than once" in capsys.readouterr().err


TABLE_WIDTH = 120
"""The widest row predict's memory, step and answer tables may print: a terminal's width with room, read without
wrapping (console.predict.answer.WIDTH, the answer's)."""


def test_a_language_models_booking_read_keeps_its_tables_within_the_width(elsewhere, monkeypatch, capsys):
    """The read of a 1.3B Llama booked from a tiny run (predict --cluster dgx-h100 --nodes 2,4,8 --local-step-ms
    --train-wopt …) was 12 KB, its FSDP memory row 165 characters wide and its step table's rows 147: each table now
    says its GPU counts and units once, what is kept beside the peak a column a kind, the floors right of a bar and
    caps alike in one row; the answer's rows were 161, what the pick rests on now marks where its words would pass
    the width, said under the table. Here t5, the language model this run benched, at a larger shape, under the same
    flags."""
    monkeypatch.chdir(elsewhere["folder"])
    shape = ("d_model=1024", "d_ff=4096", "num_layers=24", "num_heads=16", "seq_len=512")
    code = cli.main(["predict", "--run", "mine", "--results", "results", "--workload", "hf:t5", "--cluster",
                     "dgx-h100", "--nodes", "2,4,8", "--local-step-ms", "900",
                     *(arg for option in shape for arg in ("--train-wopt", option))])  # fmt: skip
    said = capsys.readouterr().out
    assert code == 0
    lines = said.splitlines()
    tables = []
    for head in ("ddpbench predict: memory per rank at ", "ddpbench predict: the step per bucket cap on "):
        at = next(k for k, line in enumerate(lines) if line.startswith(head))
        rows = [lines[at + 1], *itertools.takewhile(_table_row, lines[at + 2 :])]  # its notes under it are prose
        assert len(rows) >= 3  # a header and a row a strategy, or GPU count
        tables += rows
    at = next(k for k, line in enumerate(lines) if line.startswith("ddpbench predict: the answer on dgx-h100, "))
    answer = [lines[at + 1], *itertools.takewhile(lambda line: line[:6].strip().isdigit(), lines[at + 2 :])]
    assert len(answer) == 4, "\n".join(lines[at : at + 6])  # a header and a row a GPU count: 16, 32, 64
    tables += answer
    notes = lines[at + len(answer) + 1 :]
    for mark in set(re.findall(r"\[\d+\]", "\n".join(answer))):  # each mark's words under the table, once
        assert sum(line.startswith(f"  {mark} ") for line in notes) == 1, mark
    assert max(len(row) for row in tables) <= TABLE_WIDTH, "\n".join(r for r in tables if len(r) > TABLE_WIDTH)
    assert " | " in said and "left of 79.11 GiB" in said  # the floors apart; the GPU's memory said once, in the header


def _table_row(line: str) -> bool:
    """A row of the memory table (a strategy's name, then figures) or of the step table (figures; a cap's row
    under its GPU count's starts at the cap, the figures it shares with the row above blank); not a note under
    either, whose words are one space apart."""
    cells = [cell.strip() for cell in line.strip().split("  ") if cell.strip() not in ("", "|")]
    named = bool(cells) and (cells[0].split(",")[0] in impls.names() or cells[0].isdigit())
    return line.startswith("  ") and named and len(cells) > 1 and cells[1][0].isdigit()

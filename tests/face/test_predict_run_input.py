"""What `predict --run` takes from a run, said or refused before it predicts: the one-rank rows its calibration
lacks, a missing profile of a run made on another device, which of several setups it predicts, the columns
`--out` needs to reproduce a row's efficiency, and a folder of runs or a missing cluster file given by mistake."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from terminal import Terminal

from harness import cli
from harness.analysis import roles
from harness.commands.console import invoked
from harness.commands.predict import inputs
from harness.perfmodel import measured
from harness.results import store

DATA = Path(__file__).resolve().parent.parent / "data"
CLUSTER = ["--cluster", "dgx-h100", "--nodes", "1"]


def _copy(run: str, results: Path) -> Path:
    shutil.copytree(DATA / run, results / run)
    return results / run


def _files(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*"))


def _without_one_rank_baseline(run: Path) -> None:
    configs = store.read_configs(run)
    for config_id in configs.loc[roles.is_baseline(configs) & (configs["world_size"] == 1), "config_id"]:
        (run / "configs" / f"{config_id}.parquet").unlink()


def _one_line_error(capsys) -> str:
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("ddpbench: error: ") and captured.err.count("\n") == 1
    return captured.err


def test_a_run_without_its_one_rank_baseline_is_scaled_to_its_reference_and_says_so(tmp_path, capsys):
    _without_one_rank_baseline(_copy("cpu_run", tmp_path))
    # a CPU run's steps need a GPU step: --local-step-ms then scales a step with DDP inside, said so, not called the
    # step without DDP
    assert cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path), *CLUSTER, "--local-step-ms", "50"]) == 0
    said = capsys.readouterr()
    baseline, reference = roles.baseline_name(), roles.reference_name()
    assert (f"warning: the prediction is only partly calibrated: run cpu_run has no {baseline} step at one rank for "
            f"mlp/tiny batch 8 (it has: ") in said.err  # fmt: skip
    assert f"the compute is scaled to {reference}'s step there, with DDP's own cost inside it" in said.err
    assert said.err.count("calibrated") == 1
    # the one-rank step is the reference's own (measured), not the profile's below it
    assert "compute scaled ×1.0" not in said.out  # the profile's own step: a scale of 1 would mean none
    # the step given sets the scale: the run's own step the profile was first scaled to is not said beside it
    assert f"to the run's {reference}'s (no {baseline} row) step at one rank (" not in said.out
    assert "one rank's step with DDP (its own cost inside the compute: no baseline step to separate it): " in said.out
    assert "without DDP's own cost (not measured" not in said.out
    out = said.out
    assert "compute scaled so that one rank's step, DDP's own cost inside it (no baseline step to take it apart" in out
    assert "step without DDP is 50 ms" not in out and "its own cost inside the compute: no baseline step" in out


def test_a_run_with_no_one_rank_rows_says_which_world_sizes_it_has(tmp_path, capsys):
    _copy("failures", tmp_path)  # world size 2 only
    assert cli.main(["predict", "--run", "failures", "--results", str(tmp_path), "--busbw", "10GB/s"]) == 0
    err = capsys.readouterr().err
    missing = f"{roles.baseline_name()} or {roles.reference_name()}"
    assert f"run failures has no {missing} step at one rank for mlp/tiny batch 8 (it has: " in err
    assert "at world size 2): the compute is the profile's own, and DDP's own cost is left out" in err


def test_the_rows_a_run_has_are_named_with_their_options(capsys):
    """'has no stock step at one rank (it has: …, stock, …)' read as a contradiction where every stock row set
    find_unused_parameters=True: the rows it has are named with the options they set, and what the calibration reads."""
    configs = store.read_configs(DATA / "cpu_run")
    reference = roles.reference_name()
    needed = roles.is_reference(configs)
    configs.loc[needed, "impl_options"] = '{"find_unused_parameters": true}'
    setup = {key: configs[key].fillna(measured.SETUP_DEFAULTS.get(key)).iloc[0] for key in measured.SETUP_KEYS}
    inputs.warn_uncalibrated(Path("cpu_run"), configs, setup)
    err = capsys.readouterr().err
    assert f"run cpu_run has no {reference} step at one rank for " in err
    assert f" {reference} find_unused_parameters=True at world size 1;" in err and f" {reference} at " not in err
    assert f"; the calibration reads {reference} with no option but its cap): " in err


def test_a_calibrated_run_says_no_such_warning(tmp_path, capsys):
    _copy("cpu_run", tmp_path)
    gpu_step = ["--local-step-ms", "50", "--local-ddp-ms", "1"]  # a CPU run's steps: scaled to a GPU's, DDP's cost
    assert cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path), *CLUSTER, *gpu_step]) == 0
    said = capsys.readouterr()
    assert "calibrated:" not in said.err and "one rank's step with DDP: " in said.out


@pytest.mark.parametrize("network", [CLUSTER, ["--busbw", "10GB/s"]])
def test_a_gpu_runs_missing_profile_is_not_measured_on_this_cpu(tmp_path, capsys, monkeypatch, network):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # "here" is a CPU, wherever the test runs
    monkeypatch.setattr(invoked, "ddpbench_command", lambda: ".venv/bin/ddpbench")  # a hint names it as typed
    run = _copy("gpu_memory", tmp_path)  # a cuda run that stored no gradient profile
    before = _files(tmp_path)
    assert cli.main(["predict", "--run", "gpu_memory", "--results", str(tmp_path), *network]) == 2
    err = _one_line_error(capsys)
    assert "run gpu_memory ran on cuda and stored no gradient profile for mlp/tiny batch 8" in err
    assert "`.venv/bin/ddpbench bench --device cuda --gpus 1 --workloads mlp --size tiny --batch-size 8" in err
    assert "--workload mlp --size tiny --batch-size 8 --local-step-ms MS" in err
    assert _files(tmp_path) == before and not (run / "gradprofile").exists()


def _with_a_second_batch_size(run: Path, batch: int) -> None:
    """The run as if it had measured its rows again at another batch size: a second workload setup."""
    for part in sorted((run / "configs").glob("*.parquet")):
        row = {**store.read_config_row(run, part.stem), "batch_size": batch}
        row["config_id"] = f"{int(part.stem[:4]) + 100:04d}{part.stem[4:]}-b{batch}"  # after the run's own
        store.write_parquet(part.with_name(f"{row['config_id']}.parquet"), [row], store.CONFIG_SCHEMA)


def test_a_run_of_two_setups_says_which_it_predicts_and_the_flags_of_the_other(tmp_path, capsys):
    _with_a_second_batch_size(_copy("cpu_run", tmp_path), 16)
    page = tmp_path / "page.html"  # without --nodes: its default, on the console and the page alike
    assert cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path), CLUSTER[0], CLUSTER[1],
                     "--page", str(page)]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert ("ddpbench predict: run cpu_run measured 2 workload setups: predicting the first, mlp/tiny batch 8; "
            "the others: mlp/tiny batch 16 by --batch-size 16") in out  # fmt: skip
    # the page, which travels without the console, says as much: its title (the index's entry) and its banner
    text = page.read_text()
    lines = out.splitlines()
    at = next(k for k, line in enumerate(lines) if line.split()[:2] == ["GPUs", "nodes"])
    printed = [row.split()[0] for row in lines[at + 1 :] if row.startswith(" ") and row.split()[0].isdigit()]
    assert printed == ["8", "16", "32", "64", "128", "512"]  # --nodes' default, 1 to 64 nodes
    assert f"At the GPU counts asked (<code>--gpus</code>, <code>--nodes</code>: {', '.join(printed)} GPUs): the " \
           "answer" in text  # fmt: skip  # not 8 to 1,024
    assert (
        "<title>What if: mlp/full batch 8 on dgx-h100, from run cpu_run&#x27;s mlp/tiny batch 8 profile</title>" in text
    )
    assert ('<p class="banner">This page predicts mlp/tiny batch 8 alone; the run measured mlp/tiny batch 16 by '
            "--batch-size 16: <code>predict --page</code> with those flags for each.</p>") in text  # fmt: skip
    assert cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path), *CLUSTER, "--batch-size", "16"]) == 0
    out = capsys.readouterr().out
    assert "workload setups" not in out and "mlp/tiny, batch 16 per rank" in out


def _full_size_alike_to_the_profile(monkeypatch, run: Path) -> None:
    """The full size counted on the meta device as the run's profile's tensors, each 3 % larger: as many tensors
    within ALIKE_BYTES of its bytes (torchvision:resnet18/tiny's 62 tensors, 42.7 MiB, against 44.6 MiB)."""
    from harness.commands.predict import full_size as predict_full_size

    grads = pd.read_parquet(next((run / "gradprofile").glob("*.parquet"))).sort_values("param_index")
    table = [[int(nbytes * 1.03) // 4 * 4, "float32", True, k // 2, name]
             for k, (nbytes, name) in enumerate(zip(grads["bytes"], grads["param_name"], strict=True))]  # fmt: skip
    real = predict_full_size._counted_on_meta.__wrapped__

    def alike(*args):
        return {**real(*args), "parameters": table, "grad_bytes": sum(row[0] for row in table)}

    monkeypatch.setattr(predict_full_size, "_counted_on_meta", alike)


def test_a_profile_that_stands_for_the_full_size_gives_one_answer_on_the_console_and_the_page(
    tmp_path, capsys, monkeypatch
):
    """A vision lead's resnet152/tiny: the console dropped the full size's floors ('as many as the full size's: its
    caps hold for it'), the page kept them ('stock at 25 MiB or fsdp 179.8–182.9' there, '≥179.9–182.9' here). One
    rule (sharded.alike_tensors): the page has no floors either, says why, and gives the console's steps."""
    run = _copy("bucket_sweep", tmp_path)  # a cap sweep, with cpu_run's profile of the same setup (mlp/tiny batch 8)
    shutil.copytree(DATA / "cpu_run" / "gradprofile", run / "gradprofile")
    _full_size_alike_to_the_profile(monkeypatch, run)
    page = tmp_path / "page.html"
    assert cli.main(["predict", "--run", "bucket_sweep", "--results", str(tmp_path), "--cluster", "dgx-h100",
                     "--nodes", "1,2,4", "--local-step-ms", "180", "--page", str(page)]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "as many as the full size's (0.00958 MiB): its caps hold for it" in out and " | " not in out
    zero = re.search(r"and ZeRO-1 \(.*?\) at the caps above: w8 ([\d.]+) ms, w16 ([\d.]+) ms, w32 ([\d.]+) ms", out)
    text = page.read_text()
    table = text[text.rfind("<table", 0, at := text.index("<th>ZeRO-1 step ms")) : text.index("</table>", at)]
    heads = re.findall(r"<th>(.*?)</th>", table)
    rows = [dict(zip(heads, re.findall(r"<td>(.*?)</td>", row), strict=True)) for row in table.split("<tr")[2:]]
    assert [row["ZeRO-1 step ms"] for row in rows] == list(zero.groups())  # the console's steps, not floors
    assert not [head for head in heads if "full size" in head or "tiny size" in head]
    assert "The full size's gradients, 0.00958 MiB, are as many tensors: the profile's caps hold" in html.unescape(text)


def test_a_setup_told_apart_by_dtype_alone_has_no_flag_that_chooses_it():
    from harness.commands.predict import inputs as predict_input

    first = {"workload": "w", "size": "tiny", "batch_size": 8, "dtype": "fp32", "optimizer": "sgd"}
    setups = [first, {**first, "dtype": "bf16"}, {**first, "workload": "v", "batch_size": 4}]
    assert predict_input.flags_choosing(setups[2], setups) == "--workload v"
    assert predict_input.flags_choosing(setups[1], setups).startswith("no flag of predict")


def test_out_rows_carry_what_reproduces_their_efficiency_and_float_columns(tmp_path, capsys):
    _copy("cpu_run", tmp_path)
    out = tmp_path / "rows.parquet"
    assert cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path), *CLUSTER, "--out", str(out)]) == 0
    schema = pq.read_schema(out)
    for column in ("local_step_ms", "compute_scale", "ddp_own_ms", "one_rank_step_ms"):
        assert str(schema.field(column).type) == "double", column  # local_step_ms too, though none was given
    rows = pq.read_table(out).to_pandas()
    assert rows["local_step_ms"].isna().all() and (rows["ddp_own_ms"] >= 0).all()
    assert (rows["one_rank_step_ms"] / rows["step_ms"]).to_numpy() == pytest.approx(rows["scaling_efficiency"])
    said = capsys.readouterr().out  # the rows are a CPU's compute on the cluster's network: the console names no step
    assert "one rank's step" not in said and "ddpbench predict: no step, strategy to book or cap on dgx-h100" in said
    # and a step to start from, estimated from the FLOPs at a stated share of the GPU's peak, as a command that runs
    from harness.commands.console.predict.estimate import ESTIMATE_SHARE

    estimate = next(line for line in said.splitlines() if "an estimate to start from, not a measurement" in line)
    count, unit = re.search(r"([\d.,]+) ([MGTP])FLOP a step", estimate).groups()  # '12.6 GFLOP', never '1.3e+10'
    flops = float(count.replace(",", "")) * {"M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}[unit]
    peak = float(re.search(r"\(([\d.]+) TFLOP/s", estimate).group(1))
    step_ms = float(estimate.rpartition("--local-step-ms ")[2])
    assert f"at {ESTIMATE_SHARE:.0%} of dgx-h100's GPU's dense peak" in estimate
    # mlp/full's 268.5 M parameters: its SGD pass (3.22 GB at 3,350 GB/s) is most of the step, once offered without
    # it (0.032 ms), which the command offered then warned was 'less than its optimizer's step can take (… 0.962 ms)'
    optimizer_ms = float(re.search(r"at least ([\d.]+) ms at the GPU's", estimate).group(1))
    assert step_ms == pytest.approx(flops / (ESTIMATE_SHARE * peak * 1e12) * 1e3 + optimizer_ms, rel=0.01)
    command = estimate.partition(" predict ")[2].split()
    assert command[:4] == ["--run", str(tmp_path / "cpu_run"), "--cluster", "dgx-h100"]
    assert command[4:6] == ["--nodes", "1"]  # the GPU counts asked, asked again (once dropped: 1 and 2 nodes priced)
    assert cli.main(["predict", *command, "--page", str(tmp_path / "guess.html")]) == 0
    followed = capsys.readouterr()
    assert "an estimate to start from" not in followed.out
    # its page says the step is that estimate, in the title the site's index lists it by ('at a 1.09 ms GPU step:
    # books stock at 100 MiB' read as a measured step) and in its banner; another step is not (test_netreport)
    guess = (tmp_path / "guess.html").read_text()
    assert f"at a {step_ms:g} ms GPU step estimated from its FLOPs, not measured, from run cpu_run" in guess
    assert "the step predict estimated from the model's FLOPs, not measured on any GPU" in guess
    assert "less than its optimizer's step can take" not in followed.err  # the step offered holds its optimizer
    assert f"{ESTIMATE_SHARE:.0%} of one GPU's dense peak" in followed.out + followed.err  # FLOPs beside it, as offered
    # the run's what-if page (report's) offers the same step, as an estimate, said so, in a command that names the run
    from harness.commands.report import estimated_steps
    from harness.perfmodel.clusters import cluster
    from reports.pages.whatif.memory import device_banner

    h100 = cluster.load("dgx-h100")
    [offered] = estimated_steps(tmp_path / "cpu_run", store.read_configs(tmp_path / "cpu_run"), h100)
    assert offered[:3] == ("mlp's full size", "", step_ms) and offered[3] in estimate  # one setup: no flag to choose it
    meta = {"device": "cpu", "page": "cpu_run", "results_folder": str(tmp_path)}
    banner = device_banner(meta, h100, None, estimates=[offered])
    assert "Not knowing it yet, for mlp&#x27;s full size, an estimate to start from, not a measurement: " in banner
    assert (f"<code>ddpbench predict --run cpu_run --results {tmp_path} --cluster dgx-h100 --local-step-ms {step_ms:g} "
            "--page FILE.html</code>") in banner  # fmt: skip


def test_a_run_of_two_setups_offers_each_its_own_estimated_step_in_a_command_that_predicts_it(tmp_path, capsys):
    """A CPU run of mlp and gpt2: its what-if page offered one estimated step, mlp's, naming no model, in a command
    that predicts mlp alone, to a reader of either. Here the run's second setup is its rows again at twice the batch
    (twice the FLOPs a step): each setup is offered its own step, named, with the flags that make predict choose it,
    and the second's command predicts the second."""
    from harness.commands.report import estimated_steps
    from harness.perfmodel.clusters import cluster
    from reports.pages.whatif.memory import device_banner

    run = _copy("cpu_run", tmp_path)
    _with_a_second_batch_size(run, 16)
    [profile] = (run / "gradprofile").glob("*.parquet")  # and its profile, as bench stores one a setup
    pd.read_parquet(profile).assign(batch_size=16).to_parquet(profile.with_name(profile.name.replace("b8", "b16")))
    h100 = cluster.load("dgx-h100")
    offered = estimated_steps(run, store.read_configs(run), h100)
    assert [(whose, flags) for whose, flags, _, _ in offered] == [
        ("mlp's full size", "--workload mlp"),
        ("mlp's full size", "--batch-size 16"),
    ]
    (_, _, first_ms, first_words), (_, _, second_ms, second_words) = offered
    assert second_ms > first_ms and "(8 samples a GPU" in first_words and "(16 samples a GPU" in second_words
    banner = device_banner({"device": "cpu", "page": "cpu_run", "results_folder": str(tmp_path)}, h100, None,
                           estimates=offered)  # fmt: skip
    commands = re.findall(r"<code>ddpbench predict (.*?)</code>", banner)[1:]  # the first: the banner's MS template
    assert commands == [f"--run cpu_run --results {tmp_path} --cluster dgx-h100 --workload mlp --local-step-ms "
                        f"{first_ms:g} --page FILE.html", f"--run cpu_run --results {tmp_path} --cluster dgx-h100 "
                        f"--batch-size 16 --local-step-ms {second_ms:g} --page FILE.html"]  # fmt: skip
    assert cli.main(["predict", *commands[1].removesuffix(" --page FILE.html").split()]) == 0
    out = capsys.readouterr().out
    assert "workload setups" not in out and "mlp/tiny, batch 16 per rank" in out  # the second setup, predicted


@pytest.mark.parametrize(("compute", "optimizer", "offered"), [(0.0001, 2.3441, 2.35), (0.0, 1.5, 1.51),
                                                               (0.5, 998.9, 1000.0), (12.3, 0.0, 12.3)])  # fmt: skip
def test_the_step_offered_is_rounded_up_and_above_its_optimizers_pass(compute, optimizer, offered):
    """Rounded to the nearest, 0.0001 ms of compute over a 2.3441 ms optimizer pass offered 2.34 ms, which the
    command it was offered in warned was less than its optimizer's step can take."""
    from harness.commands.console.predict.estimate import offered_step_ms

    assert offered_step_ms(compute, optimizer) == offered and offered > optimizer


def test_a_folder_of_runs_given_as_a_run_is_refused_naming_its_runs(tmp_path, capsys):
    _copy("cpu_run", tmp_path / "results")
    for network in (["--cluster", "dgx-h200"], ["--busbw", "10GB/s"]):
        assert cli.main(["predict", "--run", str(tmp_path / "results"), *network]) == 2
        err = _one_line_error(capsys)
        assert f"--run {str(tmp_path / 'results')!r} is a folder of runs, not one run" in err
        assert f"--run cpu_run --results {str(tmp_path / 'results')!r} (its newest runs: cpu_run)" in err


def test_a_folder_without_a_run_is_said_to_be_none_not_looked_up_as_an_id(tmp_path, capsys):
    """It once read 'not a run folder or a run id in 'results' (newest runs: none)', naming a folder not given."""
    (tmp_path / "empty").mkdir()
    assert cli.main(["predict", "--run", str(tmp_path / "empty"), "--busbw", "10GB/s"]) == 2
    assert f"--run {str(tmp_path / 'empty')!r} is a folder without a run.json: no bench run" in _one_line_error(capsys)


def test_a_run_without_its_machines_collectives_names_the_command_that_measures_them(tmp_path, capsys, monkeypatch):
    """A review's README-order walkthrough met 'run one there' with no command to copy."""
    monkeypatch.setattr(invoked, "ddpbench_command", lambda: ".venv/bin/ddpbench")  # a hint names it as typed
    _copy("cpu_run", tmp_path)
    assert cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path)]) == 2
    # (a run.json from before it kept its config: 2 ranks, as bench simulates them on the CPU by default)
    said = _one_line_error(capsys)
    assert (
        f"run `.venv/bin/ddpbench collectives --gpus 2 --device cpu --backend gloo --results {tmp_path}` on it, or"
        in said
    )
    assert not list(tmp_path.glob("*/collectives"))


@pytest.mark.parametrize(
    ("flag", "typed", "said"),
    [
        ("--size", "smal", "--size 'smal' is not valid; choose one of auto, tiny, small, full"),
        ("--workload", "mpl", "unknown workload 'mpl'; choose one of bert, gpt2, mlp"),
    ],
)
def test_a_misspelt_setup_is_refused_as_such_not_sent_to_bench(tmp_path, capsys, flag, typed, said):
    """`predict --run RUN --size smal` said 'bench the one you ask for (ddpbench bench --size smal …)': a command that
    is itself refused; --workload mpl likewise. Each is the typo, named with the valid choices."""
    _copy("cpu_run", tmp_path)
    assert cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path), flag, typed, *CLUSTER]) == 2
    error = _one_line_error(capsys)
    assert said in error and "bench the one you ask for" not in error, error


def test_a_setup_the_run_did_not_measure_is_refused_with_the_bench_that_would(tmp_path, capsys, monkeypatch):
    """A walkthrough asked for batch 64 of a run benched at batch 4 and was left to guess how to get it."""
    monkeypatch.setattr(invoked, "ddpbench_command", lambda: ".venv/bin/ddpbench")  # a hint names it as typed
    _copy("cpu_run", tmp_path)
    assert cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path), "--batch-size", "64",
                     "--busbw", "10GB/s"]) == 2  # fmt: skip
    said = _one_line_error(capsys)
    assert "run cpu_run has no measured setup matching --workload/--size/--batch-size/--optimizer (it has: " in said
    assert "bench the one you ask for (.venv/bin/ddpbench bench --batch-size 64 …) and predict from that run" in said
    # or, on a cluster, memory counted there on the meta device: a CPU run's profile gives no step at any batch, so
    # the cluster alone is enough (once --local-step-ms too was asked, a step the user may not have yet)
    assert "; or give --cluster to predict from this run with memory counted at batch 64 (and --local-step-ms, your " \
           "step at batch 64, for its steps)" in said  # fmt: skip
    assert cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path), "--batch-size", "64", "--cluster",
                     "dgx-h100", "--nodes", "1"]) == 0  # fmt: skip
    assert "--batch-size 64 --nodes 1 --local-step-ms" in capsys.readouterr().out  # the estimate, at batch 64
    flags = ["predict", "--run", "cpu_run", "--results", str(tmp_path), "--batch-size", "64", "--cluster", "dgx-h100",
             "--nodes", "1", "--local-step-ms", "50", "--out", str(tmp_path / "at64.csv")]  # fmt: skip
    assert cli.main(flags) == 0  # (this golden run kept no held state: its memory is checked with small_run's)
    rows = pd.read_csv(tmp_path / "at64.csv")  # the rows answer for batch 64, and say the run measured 8
    assert set(rows["batch_size"]) == {64} and set(rows["run_batch_size"]) == {8}
    capsys.readouterr()
    # a CPU's run without the step: estimated from the model's FLOPs at batch 64, the command to give it said
    assert cli.main(flags[:-4]) == 0
    said = capsys.readouterr().out.splitlines()
    estimate = next(line for line in said if "an estimate to start from" in line)
    # FSDP2's gathers priced at fp32 (a CPU runs no bf16 FSDP): their bytes at bf16 counted, said so
    assert any(line.startswith("ddpbench predict: what-if FSDP2 --opt param_dtype=bf16 (counted from the model, not "
                               "measured: bench runs FSDP at bf16 on CUDA only") for line in said)  # fmt: skip
    assert "(64 samples a GPU, counted on the meta device)" in estimate
    assert " --cluster dgx-h100 --batch-size 64 --nodes 1 --local-step-ms " in estimate


def test_a_run_with_nothing_measured_ok_is_said_so_not_blamed_on_flags_never_given(tmp_path, capsys):
    (tmp_path / "notrun").mkdir()
    (tmp_path / "notrun" / "run.json").write_text("{}")
    assert cli.main(["predict", "--run", "notrun", "--results", str(tmp_path), "--busbw", "10GB/s"]) == 2
    err = _one_line_error(capsys)
    assert "run notrun has no configuration measured ok" in err and "--workload" not in err


def test_a_cluster_file_that_is_not_there_is_said_to_be_missing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["predict", "--cluster", "missing.toml"]) == 2
    err = _one_line_error(capsys)
    assert "--cluster 'missing.toml': no such file; give a cluster profile's .toml file, or a built-in" in err
    assert "dgx-h100" in err and not list(tmp_path.iterdir())


def test_one_rank_rows_measured_before_ddp_was_steady_are_warned_about(capsys):
    """The H200's DDP check read DDP's start-up (3 warm-up steps of the 11 it needs on CUDA) as its own cost."""
    import pandas as pd

    from harness.commands.predict import inputs as predict_input

    setup = {"workload": "resnet50", "size": "full", "batch_size": 32, "dtype": "fp32", "optimizer": "sgd"}
    rows = pd.DataFrame([{**setup, "config_id": f"{impl}-w{world}", "impl": impl, "impl_options": "{}",
                          "world_size": world, "device": "cuda", "warmup": 3, "status": "ok", "step_ms_median": 45.0}
                         for impl in (roles.reference_name(), roles.baseline_name()) for world in (1, 2)])  # fmt: skip
    predict_input._warn_short_warmup(Path("results/ddp-own"), rows, setup)
    err = capsys.readouterr().err
    reference = roles.reference_name()
    assert err.count("\n") == 1 and f"run ddp-own's one-rank {reference} rows warmed up 3 of the 11 steps" in err
    predict_input._warn_short_warmup(Path("results/ddp-own"), rows.assign(warmup=11), setup)
    assert capsys.readouterr().err == ""


def test_a_cpu_runs_own_ddp_cost_is_not_carried_to_the_gpu_step_given(tmp_path, capsys):
    """A CPU's DDP cost at one rank (36 % of a ResNet-50 step over gloo in a user's walkthrough) is no GPU's
    (3.3-4.0 % on an H200): scaled to a GPU's step it made the forecast 36 % slower. It is said, and left out; the
    figures without it say they are before it (a table's 1.000 at w8 read as measured), and --local-ddp-ms gives the
    GPU's, carried into every step and the one-rank step the efficiencies divide."""
    _copy("cpu_run", tmp_path)
    args = ["predict", "--run", "cpu_run", "--results", str(tmp_path), *CLUSTER]
    import pandas as pd

    assert cli.main([*args, "--out", str(tmp_path / "cpu.csv")]) == 0  # the CPU's own steps keep it (in --out alone:
    assert "step ms" not in capsys.readouterr().out  # the console names no step of a CPU's compute)
    cpu = pd.read_csv(tmp_path / "cpu.csv")
    assert (cpu["ddp_own_ms"] > 1).all() and (cpu["ddp_own_source"] == "measured").all()  # 1.78 ms in this run
    assert cli.main([*args, "--local-step-ms", "50", "--out", str(tmp_path / "gpu.csv")]) == 0
    out = capsys.readouterr().out
    assert "a CPU's, left out of the GPU step given (an H200's was 3.3-4.0 % of its step)\n" in out
    assert "one rank's step without DDP is 50 ms (" in out  # the step every efficiency divides, said once
    assert "that step over each predicted step, both before DDP's own cost (--local-ddp-ms MS adds your GPU's)" in out
    assert "*: before DDP's own cost, the one-rank step's too):\n" in out and " step*  " in out
    assert " eff.*" in out and ", both before DDP's own cost. Why at w" in out  # the answer's figures
    gpu = pd.read_csv(tmp_path / "gpu.csv")
    assert gpu["ddp_own_ms"].isna().all() and gpu["local_ddp_ms"].isna().all()  # left out, not measured as 0
    assert (gpu["ddp_own_source"] == "left out").all() and gpu["one_rank_step_ms"].sub(50).abs().max() < 1e-6
    assert cli.main([*args, "--local-step-ms", "50", "--local-ddp-ms", "2", "--out", str(tmp_path / "ddp.csv")]) == 0
    out = capsys.readouterr().out
    assert "a CPU's, not used: --local-ddp-ms's 2 ms takes its place" in out
    assert "one rank's step with DDP: 52 ms (50 ms without DDP + 2 ms of DDP's own cost, --local-ddp-ms);" in out
    assert "step ms*" not in out and "before DDP's own cost" not in out
    ddp = pd.read_csv(tmp_path / "ddp.csv")
    assert (ddp["ddp_own_source"] == "given").all() and (ddp["local_ddp_ms"] == 2).all()
    assert ddp["ddp_own_ms"].sub(2).abs().max() < 1e-9 and ddp["one_rank_step_ms"].sub(52).abs().max() < 1e-6
    # every step carries it: up to 2 ms more than without (it lengthens backward, behind which more may hide)
    added = ddp["step_ms"] - gpu["step_ms"]
    assert (added >= 0).all() and (added <= 2 + 1e-9).all() and added.max() > 1
    assert list(ddp["scaling_efficiency"] * ddp["step_ms"]) == pytest.approx(list(ddp["one_rank_step_ms"]))
    for bad, said in (
        (["--local-ddp-ms", "-1"], "--local-ddp-ms -1 is not valid; give DDP's own cost at one GPU"),
        (["--local-ddp-ms", "2"], "--local-ddp-ms needs --local-step-ms: it is DDP's own cost"),
    ):
        assert cli.main([*args, *(["--local-step-ms", "50"] if bad[1] == "-1" else []), *bad]) == 2
        assert said in _one_line_error(capsys)


def test_an_optimizer_step_given_apart_is_said_and_a_bad_one_refused(tmp_path, capsys):
    """--local-optimizer-ms splits the GPU step given: said on the scaling line, written to --out, and the CPU
    optimizer's caveat is gone; without --local-step-ms, or not below it, it is refused in one line."""
    import pandas as pd

    _copy("cpu_run", tmp_path)
    args = ["predict", "--run", "cpu_run", "--results", str(tmp_path), *CLUSTER, "--local-step-ms", "50"]
    assert cli.main([*args, "--local-optimizer-ms", "2", "--out", str(tmp_path / "o.csv")]) == 0
    out = capsys.readouterr().out
    assert "its optimizer 2 ms of it (--local-optimizer-ms, or its estimate above) and forward and backward the" in out
    assert "not given:" not in out  # no estimate where the user gave it
    assert "of the step is the CPU's" not in out  # the optimizer's share is the GPU's now, not a CPU's
    given = pd.read_csv(tmp_path / "o.csv")
    assert (given["local_optimizer_ms"] == 2).all() and (given["local_optimizer_source"] == "given").all()
    for bad in (["--local-optimizer-ms", "50"], ["--local-optimizer-ms", "-1"]):
        assert cli.main([*args, *bad]) == 2
        assert f"--local-optimizer-ms {bad[1]} is not valid; give the optimizer's part" in _one_line_error(capsys)
    assert cli.main([*args[:-2], "--local-optimizer-ms", "2"]) == 2  # no step to take it from
    assert "--local-optimizer-ms needs --local-step-ms: it is the optimizer's part of that step" in _one_line_error(
        capsys
    )


def test_a_gpu_step_given_alone_takes_its_optimizer_from_the_bytes_it_moves_not_the_cpus_share(tmp_path, capsys):
    """A user's ViT-L (Adam) at 310 ms on an A100 was booked FSDP2 at 2.4x DDP's speed: the CPU's optimizer share (62 %)
    was scaled into the GPU step, and sharding it looked like a gain. Without --local-optimizer-ms the optimizer's part
    is now one memory-bound pass at the GPU's bandwidth (SGD: 12 B a parameter), said, used and written to --out."""
    import re

    import pandas as pd

    from harness.commands.console.predict.optimizer import optimizer_ms
    from harness.config.precision import memory_gbps

    _copy("cpu_run", tmp_path)
    args = ["predict", "--run", "cpu_run", "--results", str(tmp_path), *CLUSTER, "--local-step-ms", "50"]
    assert cli.main([*args, "--out", str(tmp_path / "e.csv")]) == 0
    out = capsys.readouterr().out
    said = re.search(r"not given: SGD moves 12 B a parameter, [\d.e+-]+ GB for ([\d,.]+) M parameters: at "
                     r"least ([\d.e+-]+) ms at the GPU's 3,350 GB/s", out)  # fmt: skip
    assert said, out
    parameters = float(said[1].replace(",", "")) * 1e6
    assert float(said[2]) == pytest.approx(parameters * 12 / 3350e9 * 1e3, rel=0.06)  # the figures said, rounded
    assert memory_gbps("NVIDIA H100 80GB HBM3") == 3350 and optimizer_ms(1e9, "adam", 2039) == pytest.approx(
        13.73, 1e-3
    )
    rows = pd.read_csv(tmp_path / "e.csv")
    assert (rows["local_optimizer_ms"] == float(f"{float(said[2]):.3g}")).all()  # the part the steps rest on
    assert (rows["local_optimizer_source"] == "estimated").all()  # not taken for one the user gave
    assert "(--local-optimizer-ms, or its estimate above)" in out and "of the step is the CPU's" not in out


def test_a_gpu_run_predicted_on_its_own_network_says_which_strategy_fits_its_gpu(tmp_path, capsys):
    """Without --cluster the GPU to fit is the run's own (its name and memory as torch reported them); a CPU run
    has none, and no choice is said for it (tests/perfmodel/test_predict.py's small run)."""
    import pandas as pd
    import torch

    import workloads
    from harness.measure import gradprofile
    from harness.perfmodel import predict

    run = _copy("gpu_memory", tmp_path)  # a cuda run on two H100s that stored no profile and no memory counts
    for part in (run / "configs").glob("*.parquet"):
        row = store.read_config_row(run, part.stem)
        if row["impl"] == "stock":
            row.update(held_param_mb=1.0, held_grad_mb=1.0, held_optimizer_state_mb=2.0, activation_mb=0.5)
        store.write_parquet(part, [row], store.CONFIG_SCHEMA)
    setup = {"workload": "mlp", "size": "tiny", "batch_size": 8, "dtype": "fp32", "optimizer": "sgd"}
    measured = gradprofile.measure(workloads.create("mlp", size="tiny"), batch_size=8, device=torch.device("cpu"),
                                   steps=2, warmup=1)  # fmt: skip
    predict.store_profile(run, setup, pd.DataFrame([{**setup, **r} for r in measured]), device="cuda")
    assert cli.main(["predict", "--run", "gpu_memory", "--results", str(tmp_path), "--gpus", "8",
                     "--busbw", "100GB/s"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    lines = out.splitlines()
    at = next(k for k, line in enumerate(lines) if line.startswith("ddpbench predict: memory per rank at "))
    assert lines[at + 1].split("  ")[-1].strip() == "left of 79.6 GiB"
    assert " ".join(lines[at + 2].split()[:8]) == "stock 4 MiB = 1+1+2 4.5 MiB 79.6"  # held: its parts; 0.5 of them
    assert lines[at + 2].endswith("  79.6 GiB")  # what it leaves (nothing kept beside: no such column)
    # what for, once, and the most samples a rank that leave 8 % of the count: 4 MiB held, 0.5 / 8 MiB a sample in
    # 79.6 GiB / 1.08, a million, past twice the batch counted (8): as far as the count's growth was checked
    assert int((79.6 * 1024 / 1.08 - 4) / (0.5 / 8)) > 16
    assert lines[at].endswith(
        "left: in one GPU of the run's NVIDIA H100 80GB HBM3, for buffers, working memory, "
        "CUDA's and NCCL's, with room (8% of the count) up to a batch a rank of stock about 1,200,000 by its slope, "
        "checked to 16:"  # once 'at least 16': what the slope gives, said unchecked past twice the batch
    )
    # mlp at its tiny size: what fits is the tiny model's (a review read 'fits' of a model 10,000 times smaller)
    assert lines[at + 4].startswith("  the tiny size's model, not the full size's: bench --size full for the one")
    lines = out.splitlines()
    at = next(k for k, line in enumerate(lines) if line.startswith("ddpbench predict: the answer on "))
    assert lines[at].startswith("ddpbench predict: the answer on the run's NVIDIA H100 80GB HBM3, the fastest step")
    assert lines[at + 2].split()[:2] == ["8", "stock"] and out.index("and FSDP2") < out.index(lines[at])


def test_the_step_given_is_said_in_flops_against_the_clusters_gpu_and_an_impossible_one_is_warned():
    """A user's --local-step-ms 20 for a 1.3B Llama at 4,096 tokens a GPU was taken without a word, though no H100
    runs it so fast: the step given is now said as the model's FLOPs a step over the GPU's dense peak."""
    import workloads
    from harness.commands.console.predict import scaling
    from harness.config.precision import peak_tflops
    from harness.measure.modelinfo import META, flops_per_sample

    setup = {"workload": "mlp", "size": "tiny", "batch_size": 8, "dtype": "bf16"}
    workload = workloads.create("mlp", size="full")
    with META:
        flops = flops_per_sample(workload, workload.build_model(), device=META) * 8
    gpu = "DGX H100: 8× H100 SXM5, NVLink 4 through NVSwitch (NVLS), 8× ConnectX-7 400 Gb/s"
    peak = peak_tflops(gpu, "bf16", tf32=False)
    fast = flops / (2 * peak * 1e12) * 1e3  # the step that would take twice the peak, in ms
    said, beyond = scaling.step_against_peak(None, setup, step_ms=fast, batch=8, gpu=gpu, options=None)
    assert beyond
    assert said.startswith(
        f"--local-step-ms {fast:g} for mlp's full size (8 samples a GPU) is {scaling.flops_text(flops)} a step"
    )
    assert (
        "at 200% of one GPU's dense peak" not in said
        and ": 200% of one GPU's dense peak in bf16 (989.5 TFLOP/s)" in said
    )
    assert said.endswith("no GPU runs that step so fast; check the step (and the batch it was measured at)")
    slow, beyond = scaling.step_against_peak(None, setup, step_ms=fast * 10, batch=8, gpu=gpu, options=None)
    assert ": 20% of one GPU's dense peak" in slow and "no GPU runs" not in slow and not beyond
    assert scaling.step_against_peak(None, setup, step_ms=fast, batch=8, gpu="my cluster", options=None) == ("", "")
    assert peak_tflops("DGX-1: 8× V100 SXM2 in NVLink 2's hybrid cube mesh", "fp32", tf32=False) == 15.7
    # a CPU run is fp32 for want of bf16 there: a user's 310 ms ViT-L on an A100 read "195% of the fp32 peak: no GPU
    # runs that step so fast", a false alarm, where it is 12% of the bf16 peak the GPU would train in
    import pandas as pd

    cpu_run = pd.DataFrame({"device": ["cpu"], "tf32": [False], "status": ["ok"], "workload": ["mlp"]})
    fp32 = {**setup, "dtype": "fp32"}
    fp32_peak = peak_tflops(gpu, "fp32", tf32=False)
    step = flops / (3 * fp32_peak * 1e12) * 1e3  # three times fp32's peak: 989.5 / 67 / 3 = 4.9 times under bf16's
    said, beyond = scaling.step_against_peak(cpu_run, fp32, step_ms=step, batch=8, gpu=gpu, options=None)
    # led by the dtype the GPU trains in, not the CPU's fp32 (a walkthrough read "214% of one GPU's dense peak in
    # fp32 … as benched; 15% of its bf16 peak" first, unwarned)
    assert not beyond and "300%" not in said
    assert said.endswith(": 20% of one GPU's dense peak in bf16 (989.5 TFLOP/s), --dtype auto's there (the CPU run "
                         "benched fp32)")  # fmt: skip
    said, beyond = scaling.step_against_peak(cpu_run, fp32, step_ms=fast, batch=8, gpu=gpu, options=None)
    assert beyond and ": 200% of one GPU's dense peak in bf16 (989.5 TFLOP/s), --dtype auto's there (the CPU run " \
                      "benched fp32): no GPU runs" in said  # fmt: skip
    # a CPU run benched --dtype fp32 by choice trains in fp32 on the GPU too: judged, and warned, there
    said, beyond = scaling.step_against_peak(cpu_run, fp32, step_ms=step, batch=8, gpu=gpu, options=None,
                                             requested="fp32")  # fmt: skip
    assert beyond and ": 300% of one GPU's dense peak in fp32 (67 TFLOP/s): no GPU runs that step so fast" in said
    # a slow step's TFLOP/s in three significant digits (one read "at 0 TFLOP/s")
    slow, _ = scaling.step_against_peak(cpu_run, fp32, step_ms=flops / 0.26e12 * 1e3, batch=8, gpu=gpu, options=None)
    assert " at 0.260 TFLOP/s: 0% of one GPU's dense peak in bf16" in slow
    assert [scaling.tflops_text(v) for v in (8.234, 148.2, 1234.0, 99.96)] == ["8.23", "148", "1,234", "100"]
    # a count in the unit of the rate beside it, never an exponent: it read '2e+13 FLOPs' beside '125 TFLOP/s'
    counts = [scaling.flops_text(v) for v in (2.04e13, 5.12e11, 9.9996e11, 1.2e15, 3e7)]
    assert counts == ["20.4 TFLOP", "512 GFLOP", "1.00 TFLOP", "1.20 PFLOP", "30.0 MFLOP"]


def test_a_step_far_below_any_training_steps_share_of_the_peak_is_warned_with_its_likely_cause():
    """A walkthrough benched a 1.3B Llama at 128 tokens and gave its 2,048-token step: '1% of one GPU's dense peak' was
    said without a word, and every memory figure counted the 128 tokens. Below scaling.LOW_SHARE the step is warned,
    naming the sequence counted and the flags that count the trained one; the same step at its own sequence is not."""
    from harness.commands.console.predict import scaling

    gpu = "DGX H100: 8× H100 SXM5, NVLink 4 through NVSwitch (NVLS), 8× ConnectX-7 400 Gb/s"
    setup = {"workload": "hf:llama", "size": "tiny", "batch_size": 8, "dtype": "bf16"}
    small = {"num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4, "intermediate_size": 512,
             "vocab_size": 1024}  # fmt: skip
    short, _ = scaling.step_against_peak(None, setup, step_ms=1.0, batch=8, gpu=gpu, options={**small, "seq_len": 64})
    share = float(short.split("TFLOP/s: ")[1].split("%")[0]) / 100
    step_ms = share / (scaling.LOW_SHARE * 2)  # the step at twice LOW_SHARE for 64 tokens
    said, warned = scaling.step_against_peak(None, setup, step_ms=step_ms, batch=8, gpu=gpu,
                                             options={**small, "seq_len": 64})  # fmt: skip
    assert not warned and "far below" not in said
    said, warned = scaling.step_against_peak(None, setup, step_ms=step_ms * 4, batch=8, gpu=gpu,
                                             options={**small, "seq_len": 64})  # fmt: skip
    assert warned and said.endswith(
        "under 2%, far below a training step's: likely not the model you train, as counted at 64 tokens a sample, "
        "unless it is memory-bound (depthwise convolutions: EfficientNet, MobileNet; embedding-heavy recommenders: "
        "DLRM); if you train at another "
        "sequence or batch, give yours (--train-wopt seq_len=N, --batch-size B)"
    )
    longer, warned = scaling.step_against_peak(None, setup, step_ms=step_ms * 4, batch=8, gpu=gpu,
                                               options={**small, "seq_len": 1024})  # fmt: skip
    assert not warned and "far below" not in longer  # the same step, counted at the sequence trained: 16× the FLOPs
    mlp = {"workload": "mlp", "size": "tiny", "batch_size": 8, "dtype": "bf16"}
    said, warned = scaling.step_against_peak(None, mlp, step_ms=1e6, batch=8, gpu=gpu, options=None)
    assert warned and said.endswith("give yours (--train-wopt KEY=VALUE, --batch-size B)")
    mine = {**mlp, "workload": "examples/my_workload.py:MyModel"}  # a file has no full size: as the run built it
    said, warned = scaling.step_against_peak(None, mine, step_ms=1e6, batch=8, gpu=gpu, options=None)
    assert said.startswith("--local-step-ms 1e+06 for examples/my_workload.py:MyModel as benched (8 samples a GPU)")


def test_a_language_models_step_without_its_training_sequence_says_which_sequence_is_counted(capsys):
    """A walkthrough benched a 1B Mistral-like model and gave its 2,048-token step without --train-wopt seq_len: the
    GPU-hours per tokens read 4x and the activations a quarter of the trained sequence's, unwarned (the FLOPs line at
    3 %, above its 2 %). With a step given and no seq_len, one line names the sequence counted and the flag."""
    import argparse

    from harness.commands.predict import inputs

    setup = {"workload": "hf:llama", "size": "tiny", "batch_size": 8, "dtype": "bf16"}
    small = {"num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4, "intermediate_size": 512,
             "vocab_size": 1024, "seq_len": 512}  # fmt: skip
    asked = argparse.Namespace(local_step_ms=100.0, train_wopt=[("hidden_size", ["256"])])
    inputs.say_sequence_counted(asked, None, setup, small)
    said = capsys.readouterr().out
    assert said == ("ddpbench predict: tokens and activations are counted at the run's sequence, 512 tokens a sample; "
                    "--train-wopt seq_len=M counts the one you train at\n")  # fmt: skip
    # none set (predict --workload, or a run at its size's sequence): the full size's, never 'the run's'
    inputs.say_sequence_counted(asked, None, setup, {key: v for key, v in small.items() if key != "seq_len"})
    said = capsys.readouterr().out
    assert said.startswith("ddpbench predict: tokens and activations are counted at the full size's default sequence, "
                           "1,024 tokens a sample;"), said  # fmt: skip
    for unsaid in (
        argparse.Namespace(local_step_ms=100.0, train_wopt=[("seq_len", ["512"])]),  # the one trained
        argparse.Namespace(local_step_ms=None, train_wopt=None),
    ):  # no step: no tokens a GPU-hour
        inputs.say_sequence_counted(unsaid, None, setup, small)
    inputs.say_sequence_counted(asked, None, setup, small, said="… give yours (--train-wopt seq_len=N, …)")
    inputs.say_sequence_counted(asked, None, {**setup, "workload": "mlp"}, None)  # no sequence to set
    assert capsys.readouterr().out == ""


def test_a_train_wopt_typo_is_answered_with_the_field_it_is_close_to():
    """A walkthrough's --train-wopt hidden_sise=2048 was refused without the 'did you mean' an unknown workload gets."""
    from harness.commands.predict import full_size as predict_full_size
    from harness.config.bench import ConfigError

    setup = {"workload": "hf:llama", "size": "tiny", "batch_size": 8, "dtype": "bf16"}
    with pytest.raises(ConfigError) as refused:
        predict_full_size.train_options([("hidden_sise", ("2048",))], None, setup)
    assert str(refused.value) == (
        "--train-wopt hidden_sise=2048 is not valid for hf:llama (hf:llama has no configuration field hidden_sise "
        "(did you mean hidden_size?); options are its configuration's fields (LlamaConfig) and seq_len, task)"
    )


def test_a_train_wopt_the_workload_does_not_take_points_at_a_bench_command_that_exists(monkeypatch):
    """gpt2 (registered) takes no option: its refusal's advice, a zoo model's fields set with bench's --wopt, read
    '--workloads hf:gpt2 --train-wopt seq_len=1024', a flag of bench's beside one of predict's: neither runs it."""
    from harness.commands.predict import full_size as predict_full_size
    from harness.config.bench import ConfigError

    monkeypatch.setattr(invoked, "ddpbench_command", lambda: ".venv/bin/ddpbench")  # a hint names it as typed
    setup = {"workload": "gpt2", "size": "tiny", "batch_size": 8, "dtype": "fp32"}
    with pytest.raises(ConfigError) as refused:
        predict_full_size.train_options([("seq_len", ("2048",))], None, setup)
    said = str(refused.value)
    assert said.startswith("--train-wopt seq_len=2048 is not valid for gpt2 (workload 'gpt2' has no option seq_len")
    assert "--train-wopt seq_len=1024" not in said  # predict takes no --workloads, bench no --train-wopt
    assert "e.g. .venv/bin/ddpbench bench --workloads hf:gpt2 --wopt seq_len=1024: docs/your-model.md" in said, said


def test_predict_says_on_a_terminal_what_its_silence_before_the_model_to_train_is(small_run, monkeypatch):
    """`predict --train-wopt` with a 1.3B Llama said nothing for 24 s (its model counted on the meta device): a
    terminal is told so until the next line, here its refusal, which wipes it first."""
    import sys

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setenv("COLUMNS", "200")
    flags = ["--run", small_run.name, "--results", str(small_run.parent), "--cluster", "dgx-h100"]
    assert cli.main(["predict", *flags, "--train-wopt", "colour=red"]) == 2
    said = terminal.getvalue()
    assert (
        said.startswith(
            f"\r\033[Kddpbench predict: reading run {small_run.name}, counting the model you train (--train-wopt) on "
            "the meta device…\r\033[K"
            "ddpbench: error: --train-wopt colour=red is not valid for mlp"
        )
        and said.count("\n") == 1
    )


def test_train_wopt_without_a_run_or_a_workload_is_refused_before_the_workload_is_imported(capsys, monkeypatch):
    """'--train-wopt needs --run RUN' came 17 to 33 s in, after the workload given was imported and built; with
    --workload it is the model --workload profiles (below), without either there is no model to change."""
    import workloads

    monkeypatch.setattr(workloads, "resolve", lambda *a, **k: pytest.fail("the workload was imported first"))
    assert cli.main(["predict", *CLUSTER, "--train-wopt", "hidden_size=64"]) == 2
    assert "--train-wopt does not apply to a collectives table" in _one_line_error(capsys)


def test_train_wopt_with_a_workload_is_checked_before_anything_is_profiled(tmp_path, capsys, monkeypatch):
    """predict --workload refused --train-wopt, so a BERT-large could be asked of no --workload: now the options are
    the model to train, each checked as with --run before the profile (minutes on a busy CPU) is measured."""
    from harness.commands.predict import gradient_profile

    monkeypatch.setattr(gradient_profile, "_measure_profile", lambda *a, **k: pytest.fail("profiled first"))
    flags = ["--workload", "mlp", "--size", "tiny", "--results", str(tmp_path), *CLUSTER, "--local-step-ms", "10"]
    assert cli.main(["predict", *flags, "--train-wopt", "colour=red"]) == 2
    assert "--train-wopt colour=red is not valid for mlp" in _one_line_error(capsys)
    assert _files(tmp_path) == []


def test_a_workload_too_large_to_profile_here_is_refused_with_the_bench_that_fits(tmp_path, capsys, monkeypatch):
    """A 1.3B Llama given to `predict --workload … --size full --optimizer adam` was profiled here anyway and killed for
    memory after 7 minutes, where `list` said its ranks would be: refused at once, with list's bench, in Adam."""
    import torch

    from harness.commands.console import plan

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(plan, "available_bytes", lambda: 2**25)  # a 32 MiB machine
    flags = ["--workload", "gpt2", "--size", "small", "--optimizer", "adam", "--results", str(tmp_path)]
    asked = ["--cluster", "dgx-a100-40gb", "--nodes", "1,2"]  # carried into the predict said (once dgx-h100's)
    assert cli.main(["predict", *flags, *asked, "--local-step-ms", "100"]) == 2
    said = _one_line_error(capsys)
    assert "--workload gpt2 --size small: profiling it here would be killed for memory: a DDP rank holds " in said
    assert "Adam's moments" in said and "more than the 32.0 MiB this machine has available; bench it smaller (" in said
    assert "--size tiny --batch-size 4 --optimizer adam, then " in said
    assert "predict --run RUN --cluster dgx-a100-40gb --nodes 1,2 " in said
    assert _files(tmp_path) == []  # nothing written


def test_predict_against_a_later_run_says_each_configuration_forecast_measured_and_error(tmp_path, capsys):
    _copy("cpu_run", tmp_path)
    later = _copy("cpu_run", tmp_path / "later")
    assert cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path), "--busbw", "1GB/s",
                     "--against", str(later)]) == 0  # fmt: skip
    out = capsys.readouterr().out
    check = out[out.index("forecast check: run cpu_run's forecast") :]
    measured = store.read_configs(later).query("impl == 'stock' and world_size == 2")["step_ms_median"].iloc[0]
    said = r"w2 mlp/tiny stock as shipped .*: forecast ([\d.]+) ms, measured ([\d.]+) ms, error ([-+][\d.]+)%"
    line = re.search(said, check)
    forecast, said_measured, error = map(float, line.groups())
    assert said_measured == pytest.approx(measured, abs=0.005)
    assert error == pytest.approx((forecast / said_measured - 1) * 100, abs=0.06)
    assert "no range: one rank to a core, the forecast is one step" in check and "no range stated" in check
    assert "another machine" not in capsys.readouterr().err  # the copy ran where cpu_run ran
    meta = json.loads((later / "run.json").read_text())
    meta["environment"]["hostname"] = "other"
    (later / "run.json").write_text(json.dumps(meta))
    assert cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path), "--busbw", "1GB/s",
                     "--against", str(later)]) == 0  # fmt: skip
    assert "ran on another machine than run cpu_run (hostname other, not golden)" in capsys.readouterr().err


@pytest.mark.parametrize("args", [["--against", "cpu_run"], ["--run", "cpu_run", "--against", "nope"],
                                  ["--run", "cpu_run", "--against", "cpu_run", "--cluster", "dgx-h100"]])  # fmt: skip
def test_predict_against_without_its_run_or_with_a_cluster_is_refused_in_one_line(tmp_path, capsys, args):
    _copy("cpu_run", tmp_path)
    before = _files(tmp_path)
    assert cli.main(["predict", "--results", str(tmp_path), *args]) == 2
    assert "--against" in _one_line_error(capsys)
    assert _files(tmp_path) == before


def test_a_run_without_a_cap_sweep_has_its_forecast_held_against_its_own_steps_as_shipped(tmp_path, capsys):
    """Its validation said only that it has no cap sweep, though stock at two ranks as shipped is a step to check."""
    _copy("cpu_run", tmp_path)
    assert cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path), "--busbw", "1GB/s"]) == 0
    out = capsys.readouterr().out
    assert "validation: this run has no stock bucket-cap sweep" in out
    check = out[out.index("forecast check: run cpu_run's forecast") :]
    assert "against run cpu_run's measured step" in check and "w2 mlp/tiny stock as shipped" in check
    assert cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path), "--busbw", "1GB/s",
                     "--against", "cpu_run"]) == 0  # fmt: skip
    assert capsys.readouterr().out.count("forecast check:") == 1  # said once, by its validation


def test_a_run_that_accumulated_gradients_is_refused_until_predict_prices_k(tmp_path, capsys):
    """predict priced a --grad-accum 4 row as one micro-batch and one sync, and pooled it with K=1's rows (a run of
    K=1 and 4 read 'the run's baseline step at one rank (215.5 ms over every repeat)', both K's steps in one mean)."""
    run = _copy("cpu_run", tmp_path)
    config_id = store.read_configs(run)["config_id"].iloc[-1]
    store.rewrite_config_row(run, config_id, {**store.read_config_row(run, config_id), "grad_accum": 4})
    written = list(_files(tmp_path))
    assert cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path), "--busbw", "10GB/s"]) == 2
    said = _one_line_error(capsys)
    assert "run cpu_run measured gradient accumulation (--grad-accum 4)" in said and "--grad-accum 1" in said
    assert list(_files(tmp_path)) == written  # nothing written

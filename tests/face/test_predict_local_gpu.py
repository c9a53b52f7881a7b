"""`predict --cluster --local-step-ms MS --local-step-gpu NAME`: a step measured on another GPU than the cluster's is
bounded there (config.precision.step_bounds), predicted at both ends, and a cap or a choice is said decided only where
both ends agree; on the cluster's own GPU it is taken as given."""

from __future__ import annotations

import shutil
import types
from pathlib import Path

import pandas as pd
import pytest

from harness import cli
from harness.analysis import agreement
from harness.commands.console.predict import gpu_ends, scaling
from harness.config.precision import GPUS, memory_gbps, peak_tflops

DATA = Path(__file__).resolve().parent.parent / "data"


def _rows(steps: dict[int, list[float]], caps=(1.0, 25.0, 100.0)) -> pd.DataFrame:
    frames = [agreement.with_answer_marks(pd.DataFrame({"bucket_cap_mb": list(caps), "step_ms": ms}))
              .assign(world_size=world) for world, ms in steps.items()]  # fmt: skip
    return pd.concat(frames, ignore_index=True)


def test_a_cap_is_decided_only_where_both_ends_name_it(capsys):
    short = _rows({8: [10.0, 9.0, 9.5], 16: [10.0, 10.0, 10.0]})  # w8: 25 MiB; w16: any cap
    long = _rows({8: [5.0, 6.0, 7.0], 16: [8.0, 9.0, 10.0]})  # w8: 1 MiB; w16: 1 MiB, which "any" holds
    verdicts = gpu_ends.ends_verdicts([short, long], None, 0.0)
    assert [(v["world_size"], v["decided"]) for v in verdicts] == [(8, False), (16, True)]
    assert verdicts[0]["ends"][0]["caps"] == {25.0} and verdicts[0]["ends"][1]["picks"] is None
    chosen = types.SimpleNamespace(name="dgx-h100", gpu_memory_gib=0.0)
    ends = [("compute-bound", 9.0), ("memory-bound", 18.0)]
    said = gpu_ends.say_ends_verdict(chosen, ends, [short, long], state=None)
    assert capsys.readouterr().out == f"ddpbench predict: {said}\n"
    assert said == ("at the other end (memory-bound, 18 ms a GPU step) DDP's step is w8 5, w16 8 ms; DDP's cap not "
                    "decided at w8 (compute-bound → memory-bound: w8 25 MiB → 1 MiB): one step measured on "
                    "dgx-h100's GPU settles it (--local-step-ms without --local-step-gpu)")  # fmt: skip


def test_a_choice_undecided_under_a_cap_both_ends_name_says_the_choice_alone(monkeypatch, capsys):
    """convnext_base's A100 step on dgx-h100: every cap tied at both ends, and zero joined the tie at the memory-bound
    end; the line had said "DDP's cap and the choice of strategy not decided at w8 (… w8 any cap → any cap, …)"."""
    frames = [_rows({8: [10.0, 10.0, 10.0]}), _rows({8: [20.0, 20.0, 20.0]})]
    picks = [("fsdp", "stock at 25 MiB"), ("fsdp", "stock at 25 MiB", "zero at 25 MiB")]
    ends = [{"caps": {1.0, 25.0, 100.0}, "picks": p, "step_ms": ms, "floored": False, "picked": [], "open": False}
            for p, ms in zip(picks, (10, 20), strict=True)]  # fmt: skip
    monkeypatch.setattr(gpu_ends, "ends_verdicts", lambda *a, **k: [{"world_size": 8, "ends": ends, "decided": False}])
    chosen = types.SimpleNamespace(name="dgx-h100", gpu_memory_gib=79.11)
    said = gpu_ends.say_ends_verdict(chosen, [("compute-bound", 10.0), ("memory-bound", 20.0)], frames, state=None)
    capsys.readouterr()
    # the same pick first at both ends: zero joining the tie changes no pick, and a step measured would settle only
    # that (a walkthrough read "the choice of strategy not decided … one step measured … settles it")
    assert said == ("at the other end (memory-bound, 20 ms a GPU step) DDP's step is w8 20 ms; DDP's cap and the "
                    "choice of strategy: the same at both ends at every GPU count, decided; only the tie differs at "
                    "w8 (compute-bound → memory-bound: w8 fsdp / stock at 25 MiB → fsdp / stock at 25 MiB / zero at "
                    "25 MiB)")  # fmt: skip
    ends[1]["picks"] = ("stock at 25 MiB", "fsdp")  # another pick first: the choice is open, a step settles it
    said = gpu_ends.say_ends_verdict(chosen, [("compute-bound", 10.0), ("memory-bound", 20.0)], frames, state=None)
    capsys.readouterr()
    assert said.endswith("the choice of strategy not decided at w8 (compute-bound → memory-bound: w8 fsdp / stock at "
                         "25 MiB → stock at 25 MiB / fsdp): one step measured on dgx-h100's GPU settles it "
                         "(--local-step-ms without --local-step-gpu)")  # fmt: skip
    ends[1]["picks"] = picks[1]
    # the other end's GPU-hours: the answer's table gives only the printed end's, and a cost compared across clusters
    # by it alone took the compute-bound end's (0.287 GPU-h per 1M samples for convnext_base on dgx-h100, not 0.555)
    ends[1]["picked"] = [types.SimpleNamespace(step_ms=ms, profiled_ms=None, left_out_ms=0.0) for ms in (20.0, 21.0)]
    state = pd.DataFrame({"world_size": [8]})
    said = gpu_ends.say_ends_verdict(chosen, [("compute-bound", 10.0), ("memory-bound", 20.0)], frames, state=state,
                                    batch=128)  # fmt: skip
    low, high = (ms / 1e3 * 1e6 / 128 / 3600 for ms in (20.0, 21.0))
    assert f"DDP's step is w8 20 ms; the pick's GPU-h per 1M samples w8 {low:.3g}–{high:.3g}; DDP's cap" in said
    # open there on FSDP's own cost (fsdp 20 ms without it, 30 with it; stock 21): the step booked once it is
    # measured, 20–21, as the answer's table and the bookings give it, not fsdp's 30 no one would book
    ends[1]["picked"][0].left_out_ms, ends[1]["open"] = 10.0, True
    said = gpu_ends.say_ends_verdict(chosen, [("compute-bound", 10.0), ("memory-bound", 20.0)], frames, state=state,
                                    batch=128)  # fmt: skip
    assert f"the pick's GPU-h per 1M samples w8 {low:.3g}–{high:.3g}; DDP's cap" in said


def test_an_a100_step_on_dgx_h100_is_predicted_at_both_ends_and_on_dgx_a100_as_given(tmp_path, capsys):
    """A user's 310 ms on an A100 was taken as an H100's step (1.6-3x off); now it is bounded and said so."""
    shutil.copytree(DATA / "cpu_run", tmp_path / "cpu_run")
    args = ["predict", "--run", "cpu_run", "--results", str(tmp_path), "--nodes", "1,2", "--local-step-ms", "310",
            "--local-step-gpu", "a100-sxm4-80gb"]  # fmt: skip
    out, page = tmp_path / "h100.csv", tmp_path / "h100.html"
    assert cli.main([*args, "--cluster", "dgx-h100", "--out", str(out), "--page", str(page)]) == 0
    said, warned = capsys.readouterr()
    a100, h100 = GPUS["a100-sxm4-80gb"], "H100 SXM5"
    # a CPU run's fp32 (--dtype auto) is no GPU's: the step was trained in what auto is on a GPU, bf16 (0.315, not
    # fp32's 0.291), and the line says it assumed that and how to have fp32
    peaks, bandwidths = (peak_tflops(a100, "bf16", tf32=False), peak_tflops(h100, "bf16", tf32=False)), (
        memory_gbps(a100), memory_gbps(h100))  # fmt: skip
    # the optimizer's estimated part (SGD: 12 B a parameter) stays memory-bound at the compute-bound end too
    optimizer = float(said.split("the optimizer's ")[1].split(" ms there (estimated as below)")[0])
    compute = (310 - optimizer) * peaks[0] / peaks[1] + optimizer * bandwidths[0] / bandwidths[1]
    memory = 310 * bandwidths[0] / bandwidths[1]
    assert (
        f"--local-step-ms 310 was measured on a100-sxm4-80gb, not dgx-h100's GPU: there it is not known, only "
        f"bounded, {compute:.4g} ms if compute-bound"
    ) in said and f"to {memory:.4g} ms if memory-bound" in said
    assert "dense bf16 312 → 989.5 TFLOP/s, bf16 assumed: --dtype auto's on each GPU, not the CPU run's fp32; a run " \
           "benched with --dtype fp32 bounds it in fp32" in said  # fmt: skip
    assert f"one rank's step without DDP is {compute:.4g} ms (the compute-bound end" in said  # the lines printed
    assert f"at the other end (memory-bound, {memory:.4g} ms a GPU step) DDP's step is w8 " in said
    # 310 ms is far below an A100's peak for mlp (warned): the ends bound it only if it scales as they assume, which
    # the line says as the bookings' verdict does (it had read a bare 'decided')
    decided = f"DDP's cap: the same at both ends at every GPU count, decided, {scaling.FAR_BELOW_ASSUMED}"
    assert decided in said
    assert "of one a100-sxm4-80gb's dense peak in bf16 (312 TFLOP/s)" in said + warned  # on the GPU that timed it
    rows = pd.read_csv(out)
    assert len(rows) % 2 == 0 and set(rows["local_step_end"]) == {"compute-bound", "memory-bound"}
    assert (rows["local_step_ms"] == 310).all() and (rows["local_step_gpu"] == "a100-sxm4-80gb").all()
    for end, step in (("compute-bound", compute), ("memory-bound", memory)):
        at = rows[rows["local_step_end"] == end]
        assert at["cluster_step_ms"].unique() == pytest.approx([float(f"{step:.4g}")])
        assert at["one_rank_step_ms"].to_numpy() == pytest.approx(at["cluster_step_ms"].to_numpy())  # CPU: no own
    html = page.read_text(encoding="utf-8")
    assert f"decided, {scaling.FAR_BELOW_ASSUMED}" in html  # the page says the console's line
    assert f"This page is at the compute-bound end, {float(f'{compute:.4g}'):g} ms" in html
    # the page's step is an end of the bound, not the step given: the banner and the title say so, not 'you gave'
    assert "an end of the bound on this GPU of the step given on another" in html
    assert (
        "given to <code>predict --local-step-ms</code>, not measured" not in html
        and "GPU step (an end of its bound), from run " in html
    )
    # the note on what it is scaled to
    assert "--local-step-ms, not measured;" not in html and "--local-step-ms, not measured)" not in html
    assert f"({compute:.4g} ms: an end of the bound on this GPU of the step given on another, above) over" in html
    # on the cluster's own GPU the step is as given: one set of rows, said in one line
    assert cli.main([*args, "--cluster", "dgx-a100", "--out", str(tmp_path / "a100.csv")]) == 0
    said = capsys.readouterr().out
    assert "whose datasheet figures are dgx-a100's GPU's: taken as its step there" in said
    assert "at the other end" not in said
    rows = pd.read_csv(tmp_path / "a100.csv")
    assert (rows["cluster_step_ms"] == 310).all() and rows["local_step_end"].isna().all()


def test_an_estimated_optimizer_stays_memory_bound_at_the_compute_bound_end(monkeypatch):
    """85 ms of a 1.3B Llama with AdamW timed on an H100, on dgx-h200 (the same dense peak, ×1): the compute-bound end
    kept the whole 85 ms while the optimizer's part was estimated again at the H200's bandwidth (7.85 ms, not 11.2),
    so forward and backward came out 77.15 ms against the H100's 73.8, the same chip 4.5 % slower. The optimizer's
    estimate on the GPU that timed the step is memory-bound at either end, as a part given is."""
    from harness.commands.console.predict import optimizer
    from harness.perfmodel.clusters import cluster

    monkeypatch.setattr(scaling, "requested_dtype", lambda args: "auto")
    h200, parameters = cluster.load("dgx-h200"), 1345.4e6
    args = types.SimpleNamespace(local_step_gpu="h100-sxm", local_step_ms=85.0, local_optimizer_ms=None, run=None)
    setup, profile = {"dtype": "fp32", "optimizer": "adamw", "size": "full"}, types.SimpleNamespace(
        grad_bytes=parameters * 4)  # fmt: skip
    bounds = gpu_ends.local_step_bounds(args, h200, pd.DataFrame({"device": ["cpu"]}), setup, profile)
    here, there = (
        optimizer.optimizer_ms(parameters, "adamw", memory_gbps(gpu)) for gpu in (GPUS["h100-sxm"], h200.description)
    )
    assert bounds.peak_ratio == 1 and bounds.optimizer_estimated and here == pytest.approx(11.24, abs=0.01)
    assert bounds.compute_ms - there == pytest.approx(85 - here)  # forward and backward as the H100 timed them
    assert bounds.memory_ms == pytest.approx(85 * memory_gbps(GPUS["h100-sxm"]) / memory_gbps(h200.description))
    given = gpu_ends.local_step_bounds(types.SimpleNamespace(**{**vars(args), "local_optimizer_ms": 20.0}), h200,
                                       pd.DataFrame({"device": ["cpu"]}), setup, profile)  # fmt: skip
    assert not given.optimizer_estimated and given.compute_ms == pytest.approx(65 + 20 * bounds.memory_ratio)


def test_a_bad_gpu_name_or_one_without_a_step_is_refused_in_one_line(tmp_path, capsys):
    shutil.copytree(DATA / "cpu_run", tmp_path / "cpu_run")
    args = ["predict", "--run", "cpu_run", "--results", str(tmp_path), "--cluster", "dgx-h100", "--out",
            str(tmp_path / "x.csv")]  # fmt: skip
    for flags, error in ((["--local-step-ms", "310", "--local-step-gpu", "a100"],
                          "--local-step-gpu 'a100' is not valid; choose one of h200-sxm, "),
                         (["--local-step-gpu", "a100-40gb"], "--local-step-gpu needs --local-step-ms")):  # fmt: skip
        assert cli.main([*args, *flags]) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err.count("\n") == 1 and error in captured.err
    assert not (tmp_path / "x.csv").exists()


def test_an_estimated_optimizer_is_weighed_as_the_share_the_pick_may_turn_on(tmp_path, monkeypatch):
    """A 1.3B Llama's fsdp pick rested on the optimizer's 11.2 ms, estimated from its bytes (13 % of an 85 ms step),
    yet its cell "the pick rests on" was blank: only a CPU's optimizer time was weighed for the share the pick turns
    on. An estimate is no measurement either: the console's table weighs it, and the page's (its rows say so)."""
    from harness.commands.console import predictions
    from reports.pages.whatif import choice

    shutil.copytree(DATA / "cpu_run", tmp_path / "cpu_run")
    weighed = {}
    table, section = predictions.strategy_choice, choice.choice_section

    def console_table(*args, **kwargs):
        weighed["console"] = kwargs["cpu_optimizer"]
        return table(*args, **kwargs)

    def page_choice(configs, group, *args, **kwargs):
        weighed["page"] = bool(group.iloc[0]["optimizer_estimated"])
        return section(configs, group, *args, **kwargs)

    monkeypatch.setattr(predictions, "strategy_choice", console_table)
    monkeypatch.setattr(choice, "choice_section", page_choice)
    args = ["predict", "--run", "cpu_run", "--results", str(tmp_path), "--cluster", "dgx-h100", "--nodes", "1",
            "--local-step-ms", "310", "--page", str(tmp_path / "h100.html")]  # fmt: skip
    assert cli.main(args) == 0
    estimate, step = weighed["console"]
    assert step == pytest.approx(310) and 0 < estimate < 310 and weighed["page"]
    weighed.clear()
    assert cli.main([*args, "--local-optimizer-ms", str(estimate)]) == 0  # given: a GPU's own, nothing to weigh
    assert weighed == {"console": (0.0, 0.0), "page": False}

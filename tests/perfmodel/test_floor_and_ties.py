"""The communication floor says what each strategy really sends (or nothing), and the predicted best
cap is a set when the model cannot tell caps apart."""

from __future__ import annotations

import json
import types

import pandas as pd
import pytest
from test_predict import _PROFILE_ROWS as PROFILE  # the same five 1 MiB gradients

from harness.analysis import agreement, predicted_why
from harness.commands.console import predictions
from harness.commands.console.predict import steps
from harness.perfmodel import measured, predict
from harness.perfmodel import network as net
from harness.perfmodel.network import Contention, Link

MB = 1024 * 1024
NETWORK = net.given_network(busbw_bytes_per_s=MB / 1e-3, latency_s=1e-3)  # 1 ms + 1 ms per MiB at n = 2


def config(config_id: str, impl: str, options: dict | None = None, *, step_ms: float = 30.0) -> dict:
    return {"config_id": config_id, "status": "ok", "impl": impl, "impl_options": json.dumps(options or {}),
            "workload": "w", "size": "tiny", "batch_size": 2, "dtype": "fp32", "optimizer": "sgd", "world_size": 2,
            "grad_bytes": 8 * MB, "trainable_param_count": 2 * MB, "step_ms_median": step_ms}  # fmt: skip


def floors(*rows: dict) -> dict[str, dict]:
    return {
        r["config_id"]: r for r in predict.floor_rows(pd.DataFrame([config("l", "local", step_ms=5.0), *rows]), NETWORK)
    }


def test_a_half_precision_hook_sends_half_the_bytes_so_its_floor_is_half_the_all_reduce():
    rows = floors(config("s", "stock"), config("h", "stock", {"comm_hook": "fp16"}),
                  config("b", "stock", {"comm_hook": "bf16"}))  # fmt: skip
    assert rows["s"]["allreduce_ms"] == pytest.approx(9.0)  # 1 ms + 8 MiB
    assert rows["h"]["allreduce_ms"] == pytest.approx(5.0) and rows["b"]["allreduce_ms"] == pytest.approx(5.0)
    assert rows["h"]["floor_ms"] == pytest.approx(5.0) and rows["h"]["local_ms"] == pytest.approx(5.0)


def test_sharded_optimizers_get_no_floor_since_the_local_step_does_not_bound_them():
    """zero and fsdp update 1/n of the parameters on each rank: they may step faster than local does."""
    rows = floors(config("z", "zero", step_ms=4.0), config("f", "fsdp", step_ms=4.0), config("s", "stock"))
    assert set(rows) == {"s"}


def test_strategies_that_do_not_all_reduce_their_whole_gradient_get_no_floor_rather_than_a_wrong_one():
    rows = floors(config("p", "stock", {"comm_hook": "powersgd"}), config("r", "rpc_hybrid"),
                  config("d", "dataparallel"), config("n", "naive"))  # fmt: skip
    assert set(rows) == {"n"}  # not powersgd, rpc_hybrid, dataparallel, nor local itself


def test_tied_caps_are_one_best_and_a_model_that_picks_any_of_them_agrees():
    error = agreement.prediction_error([1, 5, 25], [0.31, 0.33, 0.30], [0.290, 0.35, 0.2905])
    assert error["best_predicted_caps_mb"] == [1.0, 25.0] and error["best_measured_caps_mb"] == [25.0]
    assert (error["best_predicted_cap_mb"], error["best_cap_grid_steps"]) == (25.0, 0)
    apart = agreement.prediction_error([1, 5, 25], [0.31, 0.33, 0.30], [0.290, 0.35, 0.30])  # 3 % apart: no tie
    assert (apart["best_predicted_caps_mb"], apart["best_cap_grid_steps"]) == ([1.0], 2)


def predicted(step_ms: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"bucket_cap_mb": [1.0, 5.0, 25.0], "buckets": [3, 2, 1], "step_ms": step_ms,
                         "exposed_comm_ms": [0.1, 0.1, 0.1], "scaling_efficiency": [0.9, 0.8, 0.9]})  # fmt: skip


def test_the_predicted_best_cap_names_every_tied_cap_and_unmeasured_contention_says_so(capsys):
    link = Link(alpha_s=30e-6, busbw_bytes_per_s=9e9, source="given")
    predictions.predict_table(predicted([0.29, 0.35, 0.29]), world=2, link=link, contention=None)
    out = capsys.readouterr().out
    assert "(given); contention: not measured\n" in out and "×1.00" not in out
    assert "predicted fastest cap at w2: 1 or 25 MiB (tied) (0.29 ms" in out
    predictions.predict_table(predicted([0.30, 0.35, 0.29]), world=2, link=link, contention=Contention(1.2, 1.5))
    out = capsys.readouterr().out
    assert "contention: compute ×1.20, all-reduce ×1.50 while overlapped" in out
    assert "predicted fastest cap at w2: 25 MiB (0.29 ms" in out


def test_when_every_cap_ties_the_answer_is_that_the_cap_does_not_matter(capsys):
    link = Link(alpha_s=30e-6, busbw_bytes_per_s=9e9, source="given")
    predictions.predict_table(predicted([0.29, 0.2905, 0.29]), world=2, link=link, contention=None)
    line = capsys.readouterr().out.splitlines()[-1]
    assert line == ("  predicted fastest cap at w2: any: every cap is within 0.5 % of the fastest (0.29 ms, scaling "
                    "efficiency 0.900); DDP's default 25 MiB is as good as any")  # fmt: skip
    without_25 = predicted([0.29, 0.2905, 0.29]).assign(bucket_cap_mb=[1.0, 5.0, 10.0])
    steps.best_cap(without_25, world=2, decimals=2, caveat="a CPU's compute")
    assert capsys.readouterr().out.rstrip().endswith("; any of them will do [a CPU's compute]")
    steps.best_cap(predicted([0.29, 0.35, 0.30]), world=2, decimals=2)  # one ahead: by how much
    assert ("w2: 1 MiB (0.29 ms, scaling efficiency 0.900, 3.4% ahead of the next cap; 3.4% ahead of 25 MiB, under "
            "the 4 % the model can tell: keep 25 MiB)") in capsys.readouterr().out  # fmt: skip


def test_gpu_counts_where_every_cap_ties_share_one_line_with_each_ones_figures(capsys):
    """A figure alike at every GPU count of the line (0.900) is said once; those that differ, each."""
    tie, lead = predicted([0.29, 0.2905, 0.29]), predicted([0.29, 0.35, 0.30])
    frames = [tie.assign(world_size=8), tie.assign(world_size=16, step_ms=[0.31, 0.3105, 0.31]),
              lead.assign(world_size=32), tie.assign(world_size=64)]  # fmt: skip
    steps.best_caps(frames, decimals=3, caveats=["the small size's", "", "", "at 8 nodes unchecked"])
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "  predicted fastest cap at w8, w16: any: every cap is within 0.5 % of the fastest (0.290, 0.310 ms; "
        "scaling efficiency 0.900); DDP's default 25 MiB is as good as any [the small size's]",
        "  predicted fastest cap at w32: 1 MiB (0.290 ms, scaling efficiency 0.900, 3.4% ahead of the next cap; 3.4% "
        "ahead of 25 MiB, under the 4 % the model can tell: keep 25 MiB)",  # a lead: its own line, between them
        "  predicted fastest cap at w64: any: every cap is within 0.5 % of the fastest (0.290 ms, scaling efficiency "
        "0.900); DDP's default 25 MiB is as good as any [at 8 nodes unchecked]",
    ]


def test_the_step_table_says_once_what_tied_caps_share_and_keeps_every_figure(capsys):
    """gpt2/tiny benched, predicted on dgx-h100 with the full size's floors: its one bucket gave the same buckets,
    step, exposed and efficiency at every cap, and the strategies' floors were alike too, printed again on each of the
    six caps' rows a GPU count; only the full size's buckets told the rows apart. Said once, under the first cap."""
    cluster = types.SimpleNamespace(name="dgx-h100", gpus_per_node=8)
    frames = [pd.DataFrame({"world_size": world, "nodes": world // 8, "bucket_cap_mb": [1.0, 5.0, 25.0],
                            "buckets": 1, "step_ms": 1101.0, "exposed_comm_ms": 0.0, "scaling_efficiency": 1.0,
                            "full_size_buckets": [50, 37, 13], "full_size_comm_ms": [7.331, 6.238, 3.943],
                            "full_size_last_ms": [0.854, 0.868, 0.868], "full_size_step_floor_ms": 1101.0,
                            "full_size_exposed_ms": 0.0, "zero_full_size_step_floor_ms": [1108.0, 1108.0, 1109.0],
                            "fsdp_full_size_step_floor_ms": 1102.0}) for world in (16, 32)]  # fmt: skip
    steps.cluster_table(cluster, frames)
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[2:]]
    assert rows == [
        ["16", "2", "1", "1", "1101", "0", "1.000", "|", "50", "7.331", "0.854", "1101", "0", "1108", "1102"],
        ["5", "|", "37", "6.238", "0.868"],  # the left half as above; the floors too
        ["25", "|", "13", "3.943", "0.868", "1101", "0", "1109", "1102"],  # ZeRO-1's differs: the floors again
        ["32", "4", "1", "1", "1101", "0", "1.000", "|", "50", "7.331", "0.854", "1101", "0", "1108", "1102"],
        ["5", "|", "37", "6.238", "0.868"],  # a GPU count of its own says its figures again
        ["25", "|", "13", "3.943", "0.868", "1101", "0", "1109", "1102"],
    ]


def test_a_reference_faster_than_its_baseline_is_said_to_be_taken_as_0(monkeypatch, capsys):
    from harness.commands.console.predict import scaling

    monkeypatch.setattr(predict, "calibration_target", lambda configs, setup: (None, None))
    monkeypatch.setattr(measured, "reference_minus_baseline_s", lambda configs, setup: -0.000629)
    scaling.say_run_calibration(None, pd.DataFrame(), {}, scaled=False)
    assert ("DDP's own cost 0 ms a step at one rank (taken as 0: stock's step at one rank, every cap pooled (geometric "
            "mean over repeats), minus local's is -0.629 ms, noise)") in capsys.readouterr().out  # fmt: skip
    # beyond noise: a measurement problem, with how often the baseline ran first in its launch (repeats rotate it)
    monkeypatch.setattr(measured, "below_baseline", lambda *args, **kwargs: (20.0, 21.0))
    rows = pd.DataFrame({"impl": ["local", "local", "stock"], "baseline": [True, True, False], "world_size": 1,
                         "status": "ok", "step_ms_median": [21.0, 21.0, 20.0],
                         "launch_position": [0, 1, 0]})  # fmt: skip
    scaling.say_run_calibration(None, rows, {}, scaled=False)
    assert ("-0.629 ms, beyond noise: a measurement problem (the baseline ran first in its launch in 1 of its 2 "
            "repeats at one rank), no cost)") in capsys.readouterr().out  # fmt: skip


def test_validation_says_a_model_agrees_when_its_tied_best_holds_the_measured_best(capsys):
    group = pd.DataFrame({"bucket_cap_mb": [1.0, 25.0], "measured_ms": [0.31, 0.30], "predicted_raw_ms": [0.29, 0.29],
                          "predicted_ms": [0.29, 0.29], "predicted_contention_ms": [None, None],
                          "compute_scale": [1.0, 1.0], "reducer_ms": [0.0, 0.0]})  # fmt: skip
    error = agreement.prediction_error(group["bucket_cap_mb"], group["measured_ms"], group["predicted_ms"])
    predictions.validation(("w", "tiny", 2), group, None, [("calibrated", error)])
    out = capsys.readouterr().out
    assert "calibrated: MAPE 4.9%, best cap measured 25 MiB vs predicted 1 or 25 MiB (tied) (agrees)" in out


def test_validation_agrees_when_the_predicted_best_is_a_cap_the_sweep_calls_as_good(capsys):
    # The medians put 25 MiB first, the model 1 MiB, a grid step away; the sweep's repeats cannot tell
    # them apart, so the model picked a cap as good as the measured best. Without that set it does not agree.
    # Where the sweep calls every cap as good, any prediction would 'agree': that checks nothing, and says so.
    group = pd.DataFrame({"bucket_cap_mb": [1.0, 5.0, 25.0], "measured_ms": [0.31, 0.40, 0.30],
                          "predicted_raw_ms": [0.28, 0.35, 0.30], "predicted_ms": [0.28, 0.35, 0.30],
                          "predicted_contention_ms": [None] * 3, "compute_scale": [1.0] * 3,
                          "reducer_ms": [0.0] * 3})  # fmt: skip
    error = agreement.prediction_error(group["bucket_cap_mb"], group["measured_ms"], group["predicted_ms"])
    predictions.validation(("w", "tiny", 2), group, [1.0, 25.0], [("calibrated", error)])
    predictions.validation(("w", "tiny", 2), group, [25.0], [("calibrated", error)])
    predictions.validation(("w", "tiny", 2), group, [1.0, 5.0, 25.0], [("calibrated", error)])
    first, second, third = capsys.readouterr().out.split("validation w2")[1:]
    assert "best cap measured 25 MiB vs predicted 1 MiB (agrees: a cap the sweep calls as good)" in first
    assert "best cap measured 25 MiB vs predicted 1 MiB (2 grid steps apart)" in second
    assert "(no check of the best cap: the sweep calls every cap as good)" in third


def test_the_model_pairs_only_rows_that_gave_a_cap_never_ddps_default_layout_recorded_as_25():
    explicit = [{**config(f"e{cap:g}", "stock", {"bucket_cap_mb": cap}, step_ms=ms), "bucket_cap_mb": cap}
                for cap, ms in ((1.0, 20.0), (25.0, 24.0))]  # fmt: skip
    default = {**config("d", "stock", step_ms=50.0), "bucket_cap_mb": 25.0}  # no cap given: DDP's layout
    rows = predict.sweep_predictions(pd.DataFrame([*explicit, default]), PROFILE, NETWORK, cores=None)
    assert [(r["bucket_cap_mb"], r["measured_ms"]) for r in rows] == [(1.0, pytest.approx(20.0)),
                                                                      (25.0, pytest.approx(24.0))]  # fmt: skip


def test_a_failed_one_rank_baseline_leaves_the_calibration_out_rather_than_nan():
    """A failed row has no step: the calibration must not pool it (a NaN scale broke every prediction)."""
    setup = {"workload": "w", "size": "tiny", "batch_size": 2, "dtype": "fp32", "optimizer": "sgd"}
    failed = {**config("l1", "local", step_ms=float("nan")), "status": "failed", "world_size": 1}
    stock = {**config("s1", "stock"), "world_size": 1}
    configs = pd.DataFrame([failed, stock])
    assert measured.one_rank_baseline_s(configs, setup) is None and measured.ddp_own_cost_s(configs, setup) is None
    # the compute is then scaled to the reference's step at one rank, not left as the profile's
    role, step_s = predict.calibration_target(configs, setup)
    assert role == "reference" and step_s == pytest.approx(stock["step_ms_median"] / 1e3)
    ok = pd.DataFrame([{**failed, "status": "ok", "step_ms_median": 25.0}, stock])
    assert measured.one_rank_baseline_s(ok, setup) == pytest.approx(0.025)
    assert measured.ddp_own_cost_s(ok, setup) == pytest.approx(0.005)


@pytest.mark.parametrize(
    ("exposed", "comm", "said"),
    [(0.1, 5.0, "compute: the all-reduces (5 ms a step) hide behind backward (20 ms) but for 0.1 ms"),
     (12.0, 30.0, "bandwidth: the all-reduces take 30 ms a step, more than the backward (20 ms)"),
     (3.0, 10.0, "the gradients ready last: their all-reduces run after backward ends, 3 ms exposed")],
)  # fmt: skip
def test_the_answer_names_the_part_that_makes_the_step(exposed, comm, said):
    row = {"exposed_comm_ms": exposed, "comm_ms": comm, "step_ms": 40.0 + exposed}
    assert predicted_why.predicted_step(row, backward_ms=20.0).startswith(said)
    if said.startswith("compute"):  # after a why that named backward's ms (the full size's), not again
        again = predicted_why.predicted_step(row, backward_ms=20.0, backward_said=True)
        assert again == "compute: the all-reduces (5 ms a step) hide behind backward but for 0.1 ms"


def test_the_gradients_ready_last_are_named_from_the_profile():
    """GPT-2's embedding (tied to the output layer) is ready as backward ends: the why names the bucket it is in,
    by its largest gradient, and how much of the exposed its all-reduce is."""
    from harness.perfmodel.schedule import Grad, Profile, predict_caps

    grads = (Grad(2, 30 * 2**20, "float32", 0.004, "h.0.mlp.weight"), Grad(1, 2**20, "float32", 0.0099, "wpe"),
             Grad(0, 147 * 2**20, "float32", 0.010, "transformer.wte.weight"))  # fmt: skip
    link = Link(alpha_s=1e-5, busbw_bytes_per_s=100e9)
    row = predict_caps(Profile(0.005, 0.010, 0.001, grads), caps_mb=[25.0], link=link, world_size=64).iloc[0]
    assert (row["last_bucket_largest"], row["last_bucket_tensors"]) == ("transformer.wte.weight", 2)
    assert row["last_bucket_mb"] == pytest.approx(148.0)
    said = predicted_why.predicted_step(row, backward_ms=10.0)
    assert row["exposing_ms"] == pytest.approx(row["last_allreduce_ms"])  # it starts as backward ends
    ends = (
        f"; of that, {row['exposing_ms']:.3g} ms is transformer.wte.weight's bucket (148 MiB, ready as backward ends)"
    )
    assert said.startswith("the gradients ready last") and said.endswith(ends), said
    old = {k: row[k] for k in ("last_bucket_largest", "last_bucket_tensors", "last_bucket_mb", "last_allreduce_ms")}
    alone = f"alone takes {row['last_allreduce_ms']:.3g} ms"  # a row from before the exposing columns
    assert f"the last bucket, 148 MiB (transformer.wte.weight and 1 more), {alone}" in predicted_why._last_bucket_words(
        old
    )
    assert predicted_why._last_bucket_words({"exposed_comm_ms": 1.0}) == ""  # a row from before the names: nothing said


def test_the_why_names_the_bucket_that_exposes_most_not_a_tiny_last_one():
    """A recommender's embedding (51.2 MB, 94 % of the gradients) is ready at 99 % of backward, a few small layers
    after it: its all-reduce is most of what is exposed, the tiny last bucket's little; the why names the embedding's
    bucket, when it is ready, and, where it is so at every cap, that this is why any cap does."""
    from harness.perfmodel.schedule import Grad, Profile, predict_caps

    grads = (Grad(2, 3 * 2**20, "float32", 0.002, "user.weight"), Grad(1, 49 * 2**20, "float32", 0.0735, "big.weight"),
             Grad(0, 2**16, "float32", 0.0742, "bottom.2.weight"))  # fmt: skip
    link = Link(alpha_s=2e-5, busbw_bytes_per_s=10e9)
    frame = predict_caps(Profile(0.007, 0.0743, 0.01, grads), caps_mb=[1.0, 25.0, 100.0], link=link, world_size=32)
    for _, row in frame.iterrows():
        assert row["exposing_largest"] == "big.weight" and row["exposing_ready"] >= 0.0735 / 0.0743 - 1e-9
        assert row["exposing_ms"] > row["exposed_comm_ms"] / 2
    at_25 = frame.iloc[1]
    assert at_25["last_bucket_largest"] == "bottom.2.weight"  # the last bucket is the tiny one
    assert at_25["exposing_ready"] == pytest.approx(0.0735 / 0.0743)  # its bucket's last gradient is big.weight
    said = predicted_why.predicted_step(at_25, backward_ms=74.3)
    assert (
        f"of that, {at_25['exposing_ms']:.3g} ms is big.weight's bucket (" in said
        and "ready at 99% of backward)" in said
    )
    assert "bottom.2.weight" not in said
    alike = predicted_why.one_bucket_at_every_cap([frame])
    assert alike == "big.weight's bucket, ready at 99% of backward, is most of what is exposed at every cap"
    assert predicted_why.one_bucket_at_every_cap([frame.assign(exposing_ms=frame["exposed_comm_ms"] / 4)]) == ""


def test_the_answer_line_says_the_cap_as_the_per_node_line_does_and_one_node_count_as_one(capsys):
    """Every cap tied without 25 MiB among them: 'any', as the per-node line says; one node count: no 'w8 to w8'."""
    import types

    frame = pd.DataFrame({"bucket_cap_mb": [1.0, 5.0], "step_ms": [30.0, 30.01], "exposed_comm_ms": [0.02, 0.02],
                          "comm_ms": [2.0, 1.9], "scaling_efficiency": [0.999, 0.999],
                          "world_size": [8, 8]})  # fmt: skip
    predictions.cluster_answer(types.SimpleNamespace(name="dgx-a100"), [frame], backward_ms=20.0, caveat="")
    said = capsys.readouterr().out
    assert "answer for DDP on dgx-a100 (ZeRO-1's and FSDP2's steps follow)" in said
    assert "bucket_cap_mb any (every cap ties); at w8: step 30 ms, scaling efficiency 0.999. Why at w8: compute" in said
    assert "w8 to w8" not in said


def test_the_answer_quotes_the_cap_it_names_and_keeps_ddps_default_over_a_small_caps_thin_lead(capsys):
    """Tied with DDP's default 25 MiB: the answer says any will do and quotes 25 MiB's figures, not the fastest
    cap's; a smaller cap ahead of 25 MiB by under 4 % (what the model leaves out per collective) is no evidence,
    so the answer keeps the default and says the lead it set aside; unswept default, the caveat instead; DDP's
    own work is named where it costs more than what is exposed."""
    import types

    tied = pd.DataFrame(
        {
            "bucket_cap_mb": [1.0, 25.0],
            "step_ms": [30.0, 30.1],
            "exposed_comm_ms": [0.02, 0.05],
            "comm_ms": [6.0, 1.9],
            "scaling_efficiency": [0.999, 0.996],
            "world_size": [8, 8],
        }
    )
    thin = tied.assign(step_ms=[30.0, 30.6], world_size=[64, 64])  # 1 MiB 2 % ahead
    clear = tied.assign(step_ms=[30.0, 33.0], world_size=[128, 128])  # 1 MiB 10 % ahead
    cluster = types.SimpleNamespace(name="dgx-h200")
    predictions.cluster_answer(cluster, [tied, thin, clear], backward_ms=20.0, own_ms=3.5)
    said = capsys.readouterr().out
    assert ("bucket_cap_mb any (DDP's default 25 MiB is as good) from w8; 25 MiB (1 MiB predicted faster by under "
            "the 4 % the model can tell) from w64; 1 MiB from w128") in said  # fmt: skip
    assert "the all-reduces (6 ms a step at 1 MiB)" in said  # w128's named cap is the fastest
    assert "DDP's own work (3.5 ms a step, from its cost at one rank) costs more than that" in said
    assert "no evidence" not in said  # the thin lead was set aside, not followed with a caveat
    predictions.cluster_answer(cluster, [thin], backward_ms=20.0)
    said = capsys.readouterr().out
    assert "the all-reduces (1.9 ms a step at 25 MiB)" in said and "DDP's own work" not in said
    unswept = thin.assign(bucket_cap_mb=[1.0, 5.0])  # DDP's default not among the caps: nothing to keep
    predictions.cluster_answer(cluster, [unswept], backward_ms=20.0)
    said = capsys.readouterr().out
    assert "bucket_cap_mb 1 MiB; " in said
    assert "[a cap below 25 MiB (DDP's default bucket_cap_mb) ahead by under 4 % is no evidence" in said


def test_predicts_rows_mark_best_as_the_answer_names_it_and_fastest_as_the_model_ranks_it():
    """A review filtered --out's `best` and got 1 MiB where the answer said keep 25 MiB (1 MiB 0.6 % ahead)."""
    import pandas as pd

    frame = pd.DataFrame({"bucket_cap_mb": [1.0, 5.0, 25.0], "step_ms": [10.0, 10.2, 10.06]})
    marked = agreement.with_answer_marks(frame)
    assert marked["fastest"].tolist() == [True, False, False]  # 25 MiB is 0.6 % behind: no tie
    assert marked["best"].tolist() == [False, False, True]  # the lead is under 4 %: the answer keeps 25 MiB
    clear = agreement.with_answer_marks(frame.assign(step_ms=[10.0, 10.2, 11.0]))
    assert clear["best"].tolist() == clear["fastest"].tolist() == [True, False, False]


def test_the_named_cap_is_ddps_default_where_it_ties_or_a_smaller_caps_lead_is_thin_else_the_fastest():
    answer = agreement.cap_answer
    assert answer([1.0, 5.0, 25.0], [10.0, 10.02, 10.03]).index == 2  # tied with the default
    assert answer([1.0, 5.0, 25.0], [10.0, 10.02, 10.3]).index == 2  # 3 % ahead of the default: kept
    assert answer([1.0, 5.0, 25.0], [10.0, 10.02, 10.3]).lead_set_aside == pytest.approx(0.03)
    assert answer([1.0, 5.0, 25.0], [10.0, 10.02, 11.0]).index == 0  # 10 % ahead: the fastest
    assert answer([25.0, 100.0], [10.1, 10.0]).index == 1  # a larger cap needs no more than the tie
    assert answer([1.0, 5.0], [10.1, 10.0]).index == 1 and answer([1.0, 5.0], [10.1, 10.0]).unproven
    assert not answer([1.0, 5.0], [12.0, 10.0]).unproven and not answer([1.0, 5.0], [10.0, 10.02]).unproven
    assert answer([1.0, 5.0], [10.0, 10.02]).text == "any (every cap ties)"
    assert answer([25.0], [10.0]).text == "25 MiB"
    # A review's cases: a cap above 25 MiB is kept as 25 MiB would be; a tie with a larger cap quotes it.
    above = answer([1.0, 25.0, 100.0], [10.0, 10.3, 10.1])
    assert above.index == 2 and above.text.startswith("100 MiB (1 MiB predicted faster by under the 4 %")
    mixed = answer([5.0, 25.0, 50.0], [10.0, 10.1, 10.02])
    assert mixed.index == 2 and mixed.text == "5 or 50 MiB (tied)"
    assert answer([1.0, 25.0], [float("nan"), 10.0]).index == 1  # a cap not predicted takes no part


def test_a_fit_without_a_bandwidth_term_says_so_rather_than_an_infinite_bandwidth(capsys):
    """Collectives at sizes too small for their times to grow fit busbw = ∞: said as the report says it."""
    link = Link(alpha_s=1.5e-3, busbw_bytes_per_s=float("inf"), source="collectives run c1")
    predictions.predict_table(predicted([0.29, 0.35, 0.29]), world=2, link=link, contention=None)
    out = capsys.readouterr().out
    assert "no bandwidth term (the times did not grow with size: measure larger sizes)" in out and "inf" not in out


def test_the_per_node_line_gives_the_lead_the_answer_sets_aside(capsys):
    """A review read 'predicted best cap at w8: 1 MiB' right above an answer that kept 25 MiB, the lead over
    25 MiB said nowhere on the console."""
    frame = pd.DataFrame({"bucket_cap_mb": [1.0, 5.0, 25.0], "step_ms": [10.0, 10.1, 10.2],
                          "scaling_efficiency": [0.99, 0.98, 0.97]})  # fmt: skip
    steps.best_cap(frame, world=8, decimals=3)
    said = capsys.readouterr().out
    assert said.startswith("  predicted fastest cap at w8: 1 MiB (10.000 ms, scaling efficiency 0.990, 1.0% ahead of")
    assert "; 2.0% ahead of 25 MiB, under the 4 % the model can tell: keep 25 MiB)" in said


def test_the_benched_models_fsdp_step_is_said_beside_its_floor_only_where_above_it(capsys):
    """The read of a 1.3B Llama booked from a tiny run gave 'the benched model's own prediction w16 1091, …' after
    each full-size floor that ranked it, a figure no booking rests on: said only where it is above the floor."""
    from harness.commands.console.predict import full_size

    def frame(world: int, predicted: float) -> pd.DataFrame:
        return pd.DataFrame([{"world_size": world, "bucket_cap_mb": 25.0, "step_ms": 90.0, "fsdp_step_ms": predicted,
                              "fsdp_full_size_step_floor_ms": 100.0, "fsdp_own_ms": 0.0, "fsdp_full_size_gathers": 49,
                              "fsdp_full_size_gather_ms": 4.0, "fsdp_full_size_scatter_ms": 2.0}])  # fmt: skip

    full_size.fsdp_answer([frame(16, 95.0), frame(64, 99.0)], whose="the model you will train", small="the tiny size")
    assert "at least w16 100, w64 100 ms, its floor. Why at w64: its 49 gathers" in capsys.readouterr().out
    full_size.fsdp_answer([frame(16, 95.0), frame(64, 104.0)], whose="the model you will train", small="the tiny size")
    assert "its floor; the tiny size's own prediction w16 95, w64 104 ms. Why" in capsys.readouterr().out
    # a step nothing priced (NaN; cpu_run's FSDP2 on dgx-h100 at --local-step-gpu a100) is no figure to print
    full_size.fsdp_answer([frame(16, float("nan")), frame(64, float("nan"))], whose="the model", small="the tiny size")
    said = capsys.readouterr().out
    assert "its floor. Why at w64" in said and "nan" not in said
    full_size.fsdp_answer([frame(16, float("nan")), frame(64, 104.0)], whose="the model", small="the tiny size")
    assert "its floor; the tiny size's own prediction w64 104 ms. Why" in capsys.readouterr().out


def test_fsdp_floor_why_leaves_out_an_optimizer_step_nothing_priced():
    """cpu_run on dgx-h100 (--local-step-gpu a100-sxm4-80gb) read 'its optimizer steps 1/512 of every parameter
    (nan ms)' on the what-if page: a NaN is no figure; the sentence stands without it."""
    from harness.perfmodel.pick import ranked

    row = pd.Series({"world_size": 512, "fsdp_own_ms": 0.0, "fsdp_full_size_gathers": 34,
                     "fsdp_full_size_units": 17, "fsdp_full_size_gather_ms": 46.3,
                     "fsdp_full_size_scatter_ms": 23.1, "fsdp_optimizer_ms": 0.5})  # fmt: skip
    assert ranked.fsdp_floor_why(row).endswith("its optimizer steps 1/512 of every parameter (0.5 ms)")
    unpriced = ranked.fsdp_floor_why(pd.Series({**row, "fsdp_optimizer_ms": float("nan")}))
    assert unpriced.endswith("its optimizer steps 1/512 of every parameter") and "nan" not in unpriced

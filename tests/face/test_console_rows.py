"""The line each finished configuration gets: its time, its measured communication, its parity."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

from terminal import Terminal

from harness.commands import console

DATA = Path(__file__).resolve().parent.parent / "data"

ROW = {
    "world_size": 2, "workload": "mlp", "size": "small", "impl": "stock", "impl_options": "{}", "repeat": 0,
    "status": "ok", "step_ms_median": 77.29, "step_ms_p10": 70.0, "step_ms_p90": 80.0, "samples_per_s": 904.0,
    "parity_ok": True, "comm_ms": 37.43, "exposed_comm_ms": 27.41, "overlap_efficiency": 0.2353,
}  # fmt: skip


def test_a_row_with_measured_communication_says_how_much_was_hidden():
    line = console.describe_row(ROW)
    assert line == (
        "w2 mlp/small stock: 77.29 ms/step median (p10 70.00, p90 80.00), 904 samples/s at the median, "
        "comm 37.4 ms/step mean over ranks (27.4 exposed, 24% hidden), parity ok"
    )


def test_a_slow_model_keeps_its_samples_a_second():
    """A walkthrough's GPT-2 on the CPU read '0 samples/s' for 0.49."""
    assert ", 0.491 samples/s at the median, " in console.describe_row({**ROW, "samples_per_s": 0.4912})
    assert ", 12345 samples/s at the median, " in console.describe_row({**ROW, "samples_per_s": 12345.2})


def test_without_communication_or_its_measurement_nothing_is_claimed():
    for missing in ({"comm_ms": None}, {"comm_ms": float("nan")}, {"comm_ms": 0.0, "overlap_efficiency": None}):
        assert "comm" not in console.describe_row({**ROW, **missing})


def test_a_parity_failure_says_why():
    line = console.describe_row({**ROW, "parity_ok": False, "parity_note": "the loss sums over its batch"})
    assert line.endswith(", PARITY FAILED (the loss sums over its batch)")


def test_a_parity_failure_gives_its_size_against_the_tolerance_and_where():
    """A walkthrough's fsdp read 'PARITY FAILED (largest difference in …wo.weight)': no size to judge it by."""
    failed = {**ROW, "parity_ok": False, "parity_max_abs_diff": 1.3021e-5, "parity_tolerance": 1.0262e-5,
              "parity_note": "largest difference in wo.weight, after the first 3 warm-up steps"}  # fmt: skip
    assert console.describe_row(failed).endswith(
        ", PARITY FAILED (max |Δ| 1.30e-05 against 1.03e-05 in wo.weight, after the first 3 warm-up steps)"
    )
    unbounded = {**failed, "parity_tolerance": float("nan")}  # judged on updates (rpc_hybrid): no bound recorded
    assert console.describe_row(unbounded).endswith(", PARITY FAILED (max |Δ| 1.30e-05 in wo.weight, after the "
                                                    "first 3 warm-up steps)")  # fmt: skip


def test_a_failed_row_says_where_its_traceback_is():
    failed = {**ROW, "status": "failed", "error_kind": "exception", "error": "rank 0: RuntimeError: boom",
              "error_file": "failures/c0/rank0.traceback.txt"}  # fmt: skip
    assert console.describe_row(failed) == (
        "w2 mlp/small stock: FAILED (exception) rank 0: RuntimeError: boom "
        "[traceback in the run folder: failures/c0/rank0.traceback.txt]"
    )


def test_the_runs_last_counts_say_how_many_failed_parity():
    """A walkthrough's summing loss printed PARITY FAILED on its row, then '4 ok, 0 failed, 0 skipped' last."""
    from harness.commands.summary import counts_text

    counts = {"ok": 4, "skipped": 1}
    assert counts_text(counts) == "4 ok, 0 failed, 1 skipped"
    assert counts_text(counts, parity_failed=1) == "4 ok, 0 failed, 1 skipped (1 of the ok failed parity: see " \
                                                   "PARITY FAILED above)"  # fmt: skip


def test_the_cpu_profiles_collectives_table_names_zero_ones_column_as_its_broadcasts_alone(capsys):
    """ZeRO-1 all-reduces DDP's buckets too: a column headed 'ZeRO-1' beside 'DDP at 25 MiB', in a table of 'each
    strategy's collectives', read as all of ZeRO-1's communication, and less than DDP's (docs/clusters.md's example:
    6.359 against 10.33 ms), where it is its broadcasts alone, after DDP's all-reduces."""
    import types

    import pandas as pd

    from harness.commands.console.predict.steps import collectives_answer

    frame = pd.DataFrame({"world_size": [8], "nodes": [1], "bucket_cap_mb": [25.0], "full_size_mb": [1024.0],
                          "full_size_comm_ms": [10.0], "full_size_last_ms": [1.0], "zero_full_size_broadcast_ms": [6.0],
                          "fsdp_full_size_gather_ms": [11.0], "fsdp_full_size_scatter_ms": [5.5]})  # fmt: skip
    profile = types.SimpleNamespace(optimizer_s=0.01, local_step_s=0.1, grad_bytes=2**30)
    collectives_answer(types.SimpleNamespace(name="dgx-a100"), [frame], trained=False, profile=profile, optimizer="sgd")
    header, row = capsys.readouterr().out.splitlines()[1:3]
    assert header.split("  ")[-3:] == ["ZeRO-1 broadcasts", "FSDP2 gathers", "reduce-scatters"], header
    assert row.split()[-3:] == ["6", "11", "5.5"]


def test_the_collectives_table_names_the_run_strategies_it_leaves_out_and_why(capsys):
    """A walkthrough's own strategy (rsag, a flat buffer reduce-scattered then all-gathered) went missing from the
    table of 'each strategy's collectives' with no word: the run's strategies no step model times are named under
    it, by the roles their rows record (a name not registered here has a new strategy's), never by their names."""
    import types

    import pandas as pd

    from harness.commands.console.predict.steps import collectives_answer
    from harness.perfmodel.pick.communication import unpriced

    configs = pd.DataFrame({"impl": ["local", "stock", "zero", "fsdp", "naive", "rsag", "flat", "naive"],
                            "workload": ["mlp"] * 7 + ["gpt2"], "status": ["ok"] * 6 + ["failed", "ok"]})  # fmt: skip
    assert unpriced(configs, "mlp") == ["naive", "rsag"]  # the baseline sends nothing; a failed row measured none
    assert unpriced(configs[configs["impl"].isin(["stock", "zero", "fsdp"])], "mlp") == []
    frame = pd.DataFrame({"world_size": [8], "nodes": [1], "bucket_cap_mb": [25.0], "full_size_mb": [1024.0],
                          "full_size_comm_ms": [10.0], "full_size_last_ms": [1.0], "zero_full_size_broadcast_ms": [6.0],
                          "fsdp_full_size_gather_ms": [11.0], "fsdp_full_size_scatter_ms": [5.5]})  # fmt: skip
    profile = types.SimpleNamespace(optimizer_s=0.01, local_step_s=0.1, grad_bytes=2**30)
    collectives_answer(types.SimpleNamespace(name="dgx-a100"), [frame], trained=False, profile=profile, optimizer="sgd",
                       unpriced=["rsag"])  # fmt: skip
    under = capsys.readouterr().out.splitlines()[3]
    assert under.startswith("  not in the table: rsag, which no step model here times (it models DDP's buckets, ")
    assert under.endswith("the run page has what the run measured of its collectives")
    collectives_answer(types.SimpleNamespace(name="dgx-a100"), [frame], trained=False, profile=profile, optimizer="sgd")
    assert "not in the table" not in capsys.readouterr().out  # every strategy priced: nothing said


def test_the_cpu_profiles_collectives_table_sets_a_benched_2_byte_hook_beside_ddp_at_the_cap_it_ran_at(capsys):
    """A run that benched comm_hook=fp16 read the network's table without it (DDP per cap, ZeRO-1, FSDP2), though the
    hook's halved all-reduces do not depend on the GPU's compute: its column, named as the run names it, at the cap
    it ran at (benched_hooks, from the run's configurations), its all-reduces and the last in brackets."""
    import json
    import types

    import pandas as pd

    from harness.commands.console.predict.steps import collectives_answer
    from harness.perfmodel.pick.compressed import benched_hooks

    configs = pd.DataFrame({"impl": ["stock", "stock", "stock", "stock", "no-such"],
                            "workload": ["gpt2", "gpt2", "gpt2", "mlp", "gpt2"],
                            "impl_options": [json.dumps(o) for o in ({}, {"comm_hook": "fp16", "static_graph": False},
                                                                     {"comm_hook": "fp16", "static_graph": True},
                                                                     {"comm_hook": "bf16"}, {"comm_hook": "fp16"})],
                            "bucket_cap_mb": [25.0, 25.0, 25.0, 5.0, 1.0]})  # fmt: skip
    hooks = benched_hooks(configs, "gpt2")  # with static_graph: another option; another strategy's hook: not DDP's
    assert hooks == {25.0: "stock comm_hook=fp16"} and benched_hooks(configs) == {**hooks, 5.0: "stock comm_hook=bf16"}
    frame = pd.DataFrame({"world_size": [8, 8], "nodes": [1, 1], "bucket_cap_mb": [5.0, 25.0],
                          "full_size_mb": [1024.0] * 2, "full_size_comm_ms": [12.0, 10.0],
                          "full_size_last_ms": [1.0, 1.2], "compressed_full_size_comm_ms": [7.0, 5.5],
                          "compressed_full_size_last_ms": [0.5, 0.7], "zero_full_size_broadcast_ms": [6.0] * 2,
                          "fsdp_full_size_gather_ms": [11.0] * 2, "fsdp_full_size_scatter_ms": [5.5] * 2})  # fmt: skip
    profile = types.SimpleNamespace(optimizer_s=0.01, local_step_s=0.1, grad_bytes=2**30)
    collectives_answer(types.SimpleNamespace(name="dgx-a100"), [frame], trained=False, profile=profile, optimizer="sgd",
                       hooks=hooks)  # fmt: skip
    legend, header, row = capsys.readouterr().out.splitlines()[:3]
    heads = [h.strip() for h in header.split("  ") if h.strip()]
    assert heads[2:5] == ["DDP at 5 MiB", "DDP at 25 MiB", "stock comm_hook=fp16 at 25 MiB"], header
    assert row.split()[2:8] == ["12", "(1)", "10", "(1.2)", "5.5", "(0.7)"]  # the hook's at 25 MiB, not at 5
    assert legend.endswith("; a comm_hook's: DDP's in 2-byte floats, its casts left out:")


def test_a_stopped_run_says_how_many_of_its_saved_rows_measured_anything():
    """SIGTERM said '2 of 6 configurations saved' where both rows recorded the ranks killed under them."""
    both_failed = console.saved_text(["failed", "failed"], 6)
    assert both_failed == ("2 of 6 configurations saved, none measured: 2 rows recording a failure (--retry-failed "
                           "runs them again)")  # fmt: skip
    assert console.saved_text(["ok", "ok"], 6) == "2 of 6 configurations saved, all measured"
    assert console.saved_text(["ok", "failed", "skipped"], 3) == ("3 of 3 configurations saved, 1 measured: 1 row "
                                                                  "recording a failure (--retry-failed runs it again), "
                                                                  "1 skipped")  # fmt: skip
    assert console.saved_text([], 6) == "0 of 6 configurations saved"


def test_off_a_terminal_a_long_configuration_gets_a_line_a_minute_with_the_bars_words_and_eta(tmp_path, monkeypatch):
    """A slow configuration left a log 12 minutes silent between 'run …: N configurations' and its line."""
    import io
    import time

    from harness.commands.console.progress import Progress
    from harness.config.grid import Configuration
    from harness.handoff.progress import StepProgress

    def planned(impl: str) -> Configuration:
        return Configuration(config_id=f"w2-{impl}", impl=impl, impl_options={}, workload="mlp", size="small",
                             world_size=2, nnodes=1, batch_size=8, steps=20, warmup=3, dtype="fp32", device="cpu",
                             backend="gloo", seed=0, parity=True)  # fmt: skip

    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    log = io.StringIO()  # not a terminal
    progress = Progress(tmp_path, [planned("stock"), planned("naive"), planned("flat")], stream=log,
                        budget_ends=1000.0 + 450)  # --budget 7 min 30 s  # fmt: skip
    StepProgress(tmp_path, "w2-stock", 23)(9)  # rank 0's hint: 10 of 3 warm-up + 20 steps done
    clock[0] += 59
    progress.tick()
    assert log.getvalue() == ""  # within the minute: nothing
    clock[0] += 1
    progress.tick()
    assert log.getvalue() == ("ddpbench: running [1/3] w2 mlp/small stock: step 7/20, 60 s in; no ETA before the "
                              "first finishes\n")  # fmt: skip
    progress.tick()
    assert log.getvalue().count("\n") == 1  # at most one line a minute
    monkeypatch.setattr(console, "describe_row", lambda row: "w2 mlp/small stock: …")
    monkeypatch.setattr("harness.results.store.read_config_row", lambda run, config_id: {})
    clock[0] += 60  # the first finishes after 2 minutes
    progress.written(planned("stock"))
    clock[0] += 80  # 200 s since the start, 1 finished: 2 to go at 200 s each (tqdm's rate at this instant)
    progress.tick()
    assert log.getvalue().splitlines()[-1] == ("ddpbench: running [2/3] the next configuration: launching, 80 s in; "
                                               "about 7 min left for the 2 to go at this session's pace, 2 min past "
                                               "--budget's end")  # 200 + 400 s against 450  # fmt: skip
    StepProgress(tmp_path, "w2-flat", 23)(0)  # the launch runs flat before naive: the line names the one stepping
    clock[0] += 60
    progress.tick()
    assert log.getvalue().splitlines()[-1].startswith("ddpbench: running [2/3] w2 mlp/small flat: warm-up step 1/3, ")


def test_a_compute_slowdown_within_noise_is_said_not_measured_with_its_bound(capsys):
    """`collectives` under load printed 'compute 4943055.01× slower': the burst lost about as long as the all-reduce
    lasted, leaving the ratio a denominator of nothing. The console says what it could not measure, and the bound
    (none where it is 1×: the burst's spread alone outlasted the all-reduce)."""
    import pandas as pd

    from harness.commands.console import predictions

    collectives = pd.DataFrame({"world_size": [2], "op": ["all_reduce"], "bytes": [1024], "busbw_gbps": [1.0],
                                "correct": [True]})  # fmt: skip
    row = {"world_size": 2, "compute_slowdown": 15.5, "comm_slowdown": 2.49, "latency_slowdown": 6.96}
    predictions.collectives_table(collectives, pd.DataFrame([{**row, "compute_slowdown_at_least": True}]))
    line = capsys.readouterr().out.splitlines()[-1]
    assert line == ("  w2 overlap: compute's slowdown while an all-reduce is in flight not measured (the compute "
                    "burst's own spread alone is as long as the compute it did during the all-reduce: at least "
                    "15.50×), all-reduce 2.49× (4 KiB: 6.96×) slower while the other runs")  # fmt: skip
    predictions.collectives_table(collectives, pd.DataFrame([{**row, "compute_slowdown": 1.0,
                                                               "compute_slowdown_at_least": True}]))  # fmt: skip
    assert "during the all-reduce), all-reduce 2.49×" in capsys.readouterr().out
    for measured in (False, None):  # measured, or a run from before the bound was kept
        predictions.collectives_table(collectives, pd.DataFrame([{**row, "compute_slowdown_at_least": measured}]))
        assert capsys.readouterr().out.splitlines()[-1].startswith("  w2 overlap: compute 15.50× slower, all-reduce")


def _said(stream: io.StringIO, text: str) -> None:
    """Wait for a Status's timer (its own thread) to say `text` off a terminal."""
    import time

    for _ in range(200):
        if text in stream.getvalue():
            return
        time.sleep(0.05)


def test_a_status_is_one_row_in_place_wiped_by_any_next_line_on_a_terminal(monkeypatch):
    """`report` glued a warning onto its status line ('report: refreshing each run's model tables…ddpbench:
    warning: …'): its line was wiped only where report itself called clear(). Whoever says the next line wipes it,
    a warning included; a line too wide for one row is cut with '…' (a wrapped line's first row outlives the wipe)."""
    from harness.commands.console.progress import Status

    monkeypatch.setenv("COLUMNS", "80")
    screen = Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    status = Status("report", stream=screen)
    status.show("reading results", checked=False)
    status.show("refreshing each run's model tables")
    console.warning("two folders, one run id")
    assert screen.getvalue() == ("\r\x1b[Kddpbench report: reading results…\r\x1b[Kddpbench report: refreshing each "
                                 "run's model tables…\r\x1b[Kddpbench: warning: two folders, one run id\n")  # fmt: skip
    monkeypatch.setenv("COLUMNS", "16")
    narrow = Terminal()
    Status("list", stream=narrow).show("counting")
    console.say("workload x")
    assert narrow.getvalue() == "\r\x1b[Kddpbench list:…\r\x1b[K"


def test_off_a_terminal_a_status_is_said_once_its_part_lasts_and_once_a_run(monkeypatch):
    """Off a terminal `report` said four lines a run ('reading it…', 'its what-if page…', 'its page…', then its
    path): a log gets one line a silence for the parts within one run, once the silence has lasted QUIET_S, none for
    a quick one, and nothing said before the input is checked."""
    import time

    from harness.commands.console import progress

    monkeypatch.setattr(progress, "QUIET_S", 0.05)
    log = io.StringIO()
    status = progress.Status("report", stream=log)
    status.show("reading results", checked=False)
    time.sleep(0.2)  # before the input is checked: never said, however long
    status.show("[1/2] run a: reading it", within="run a")
    status.show("[1/2] run a: its page", within="run a")  # the same run's: its clock goes on
    _said(log, "its page")
    status.show("[1/2] run a: its page, again", within="run a")  # said of run a already: nothing more
    time.sleep(0.2)
    console.say("  run a: a.html")
    status.show("[2/2] run b: reading it", within="run b")
    console.say("  run b: b.html")  # quick: said nothing
    time.sleep(0.2)
    assert log.getvalue() == "ddpbench report: [1/2] run a: its page…\n"


def test_predict_train_wopt_refused_off_a_terminal_is_one_line(tmp_path, capsys, monkeypatch):
    """`predict --train-wopt n_layer=abc` said what it waited for, then its refusal: its options are checked as its
    model is counted, so its line is a terminal's only (the silence's timer shortened here, not off)."""
    import shutil
    import time

    import workloads
    from harness import cli
    from harness.commands.console import progress

    shutil.copytree(DATA / "cpu_run", tmp_path / "cpu_run")
    parse = workloads.parse_options
    monkeypatch.setattr(progress, "QUIET_S", 0.01)
    monkeypatch.setattr(workloads, "parse_options", lambda *a, **k: time.sleep(0.3) or parse(*a, **k))
    assert cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path), "--cluster", "dgx-h100",
                     "--train-wopt", "classes=abc"]) == 2  # fmt: skip
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "--train-wopt classes=abc is not valid for mlp" in err


def test_predict_on_several_clusters_says_each_on_a_terminal_while_their_lines_are_held(tmp_path, monkeypatch):
    """`predict --cluster A,B` holds every line to say the bookings first: silent 6 to 14 s, then ~76 lines at once.
    A terminal is told which cluster is predicted, in place, until the held lines come out."""
    import shutil

    from harness import cli

    shutil.copytree(DATA / "cpu_run", tmp_path / "cpu_run")
    screen = Terminal()
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setattr(sys, "stderr", screen)
    assert cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path), "--cluster",
                     "dgx-a100,dgx-h100"]) == 0  # fmt: skip
    each = "".join(f"\r\x1b[Kddpbench predict: predicting on {name}…" for name in ("dgx-a100 (1/2)", "dgx-h100 (2/2)"))
    # and before the first, the run's rows read (4-5 s of a run's 90 here; no torch to import over its stored profile)
    first = "\r\x1b[Kddpbench predict: reading run cpu_run…\r\x1b[K"  # wiped as the next Status stands
    assert screen.getvalue().startswith(f"{first}{each}\r\x1b[Kddpbench: warning: ")  # wiped by the first held line


def test_predict_on_one_cluster_says_what_it_reads_and_predicts_before_its_first_line(tmp_path, monkeypatch):
    """`predict --run … --cluster dgx-a100 --nodes 1,8` ran 45-53 s on a busy CPU, its first line only after reading
    the run's rows and its memory and checks: a terminal is told each, in place, until the first line."""
    import shutil

    from harness import cli

    shutil.copytree(DATA / "cpu_run", tmp_path / "cpu_run")
    screen = Terminal()
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setattr(sys, "stderr", screen)
    assert cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path), "--cluster", "dgx-a100"]) == 0
    said = screen.getvalue()
    for what in ("reading run cpu_run", "predicting on dgx-a100"):
        assert f"\r\x1b[Kddpbench predict: {what}…\r\x1b[K" in said, repr(said[:400])  # and wiped


LOSSY = {"parity_ok": None, "parity_max_abs_diff": 7.6e-06, "parity_tolerance": 1e-05,
         "parity_note": "not judged: comm_hook=bf16 compresses gradients (lossy by design); in fc.bias"}  # fmt: skip


def test_a_lossy_hook_says_why_its_parity_is_not_judged_and_how_far_it_was():
    """A bf16 hook's row read 'parity not judged' word for word as `local`'s, as if nothing had been checked."""
    line = console.describe_row({**ROW, "impl_options": '{"comm_hook": "bf16"}', **LOSSY})
    assert line.endswith(", parity not judged: comm_hook=bf16 compresses gradients (lossy by design), "
                         "max |Δ| 7.6e-06 (tolerance 1e-05)")  # fmt: skip
    baseline = {**LOSSY, "parity_note": "not judged: each rank steps on its own batch (the baseline, by design)"}
    assert console.describe_row({**ROW, "impl": "local", **baseline}).endswith(", parity not judged")  # as ever
    assert console.describe_row({**ROW, "parity_ok": None}).endswith(", parity not judged")  # nothing measured


def test_a_timed_row_says_the_bytes_a_step_sent_beside_its_ms():
    """A bf16 hook halves what travels (8,481,792 bytes a step against 16,963,584), which gloo's ms barely show."""
    line = console.describe_row({**ROW, "comm_bytes": 8481792.0})
    assert ", comm 37.4 ms/step mean over ranks (27.4 exposed, 24% hidden, 8.09 MiB of messages), parity ok" in line
    assert "sent" not in console.describe_row({**ROW, "comm_bytes": None})  # no timeline: nothing claimed


def test_a_compression_hooks_time_in_flight_says_it_holds_the_hooks_casts():
    """A walkthrough read 'comm 304.2 ms/step ... 16 MiB of messages' for bf16 beside stock's 247.2 ms for 32.1 MiB,
    with no why: torch's hook casts the bucket and copies the sum back inside the window the timeline stamps."""
    import impls
    from harness.results.values import HOOK_TIMED

    stock, bf16 = impls.create("stock"), impls.create("stock", comm_hook="bf16")
    assert stock.timeline_caveat("cpu") is None
    # stored in every such row, a GPU's too: no time measured once on one CPU (it said '97 ms … at load 18')
    assert not re.search(r"\d ms|load \d", bf16.timeline_caveat("cuda"))
    note = f"{HOOK_TIMED}: {bf16.timeline_cost()}; {bf16.timeline_caveat('cpu')}"  # as the rank joins them
    line = console.describe_row({**ROW, "comm_bytes": 8481792.0, "comm_note": note})
    assert "(27.4 exposed, 24% hidden, 8.09 MiB of messages, the bf16 hook's casts counted in flight), parity" in line
    assert "casts" not in console.describe_row({**ROW, "comm_note": f"{HOOK_TIMED}: {stock.timeline_cost()}"})
    # timing wraps the hook DDP runs anyway: the fused all-reduce it replaces is stock's alone (a walkthrough's bf16
    # note said timing replaced it)
    assert "fused C++ all-reduce" in stock.timeline_cost() and "fused" not in bf16.timeline_cost()
    assert bf16.timeline_cost().startswith("timing DDP's buckets wraps the bf16 hook, a Python communication hook")


def test_a_line_a_signal_cut_short_is_said_before_the_stop_count(tmp_path, monkeypatch):
    """SIGINT mid-bench printed [1/18], then '3 of 18 configurations saved': a configuration counted as said before
    its line was printed (the signal came while its row was read) was never said. Its line comes from catch_up, once;
    the launcher's own call after it says nothing again."""
    import pytest

    from harness.commands.console.progress import Progress
    from harness.config.grid import Configuration
    from harness.results import store

    def planned(impl: str) -> Configuration:
        return Configuration(config_id=f"w2-{impl}", impl=impl, impl_options={}, workload="mlp", size="small",
                             world_size=2, nnodes=1, batch_size=8, steps=20, warmup=3, dtype="fp32", device="cpu",
                             backend="gloo", seed=0, parity=True)  # fmt: skip

    log, cut = io.StringIO(), ["stock"]

    def describe(row):
        if row["impl"] in cut:
            cut.remove(row["impl"])
            raise KeyboardInterrupt()  # the signal, while this line was made
        return f"{row['impl']}: …"

    monkeypatch.setattr(console, "describe_row", describe)
    monkeypatch.setattr(store, "read_config_row", lambda run, config_id: {"impl": config_id.split("-")[-1]})
    monkeypatch.setattr(store, "written_config_ids", lambda run: {"w2-local", "w2-stock"})
    progress = Progress(tmp_path, [planned("local"), planned("stock"), planned("flat")], stream=log)
    progress.written(planned("local"))
    with pytest.raises(KeyboardInterrupt):
        progress.written(planned("stock"))
    progress.catch_up()
    progress.written(planned("stock"))  # the launcher's own call, had it come after: said once
    assert log.getvalue().splitlines() == ["[1/3] local: …", "[2/3] stock: …"]


def test_a_launch_across_nodes_says_its_ranks_wait_for_every_node(tmp_path, monkeypatch):
    """Node 1 never came: node 0 said "the next configuration: launching, 4 min in" for its whole wait."""
    import io
    import time

    from harness.commands.console.progress import Progress
    from harness.config.grid import Configuration

    cfg = Configuration(config_id="w2-local", impl="local", impl_options={}, workload="mlp", size="tiny",
                        world_size=2, nnodes=2, batch_size=8, steps=5, warmup=1, dtype="fp32", device="cpu",
                        backend="gloo", seed=0, parity=True)  # fmt: skip
    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    log = io.StringIO()  # not a terminal
    progress = Progress(tmp_path, [cfg], stream=log)
    clock[0] += 240
    progress.tick()
    assert log.getvalue() == ("ddpbench: running [1/1] the next configuration: launching (its 2 nodes' ranks start "
                              "once every node has joined), 4 min in; no ETA before the first finishes\n")  # fmt: skip

"""The choice on a cluster: the fastest predicted step among the strategies whose memory fits."""

from __future__ import annotations

import dataclasses
import types

import pandas as pd
import pytest

from harness.commands.console import predictions
from harness.commands.console.predict import answer, steps
from harness.perfmodel import memory_words, sharded
from harness.perfmodel.pick import choice, choice_table, ranked
from harness.perfmodel.pick.words import choice_words

GIB = 1024.0  # MiB


def _state(rows: list[tuple[str, int, float]], options: str = "{}") -> pd.DataFrame:
    """Model-state rows (strategy, world size, model state in GiB), each with 10 GiB of activations."""
    return pd.DataFrame([{"impl": impl, "impl_options": options, "world_size": world, "total_mb": gib * GIB,
                          "activation_mb": 10 * GIB, "measured": False} for impl, world, gib in rows])  # fmt: skip


def _frame(world: int, ddp_ms: float, zero_ms: float) -> pd.DataFrame:
    return pd.DataFrame({"bucket_cap_mb": [25.0], "step_ms": [ddp_ms], "zero_step_ms": [zero_ms],
                         "zero_broadcast_ms": [2.0], "zero_bucket_view_broadcast_ms": [1.0],
                         "world_size": [world]})  # fmt: skip


STATE = _state([("stock", 8, 90.0), ("zero", 8, 60.0), ("fsdp", 8, 20.0),
                ("stock", 64, 60.0), ("zero", 64, 40.0), ("fsdp", 64, 5.0)])  # fmt: skip
FRAMES = [_frame(8, 100.0, 104.0), _frame(64, 100.0, 103.0)]


def test_the_fastest_that_fits_is_picked_and_a_tie_names_both():
    choices = choice.choose(predictions.labelled(STATE), FRAMES, 80.0)
    w8, w64 = choices
    assert [c.strategy for c in w8.picked] == ["zero"]  # stock is faster but needs 100 GiB of 80
    assert [(c.strategy, c.fits, c.need_mb) for c in w8.others] == [("stock", False, 100 * GIB)]
    assert [c.strategy for c in w64.picked] == ["stock", "zero"] and not w64.others  # 3 % apart: no evidence
    assert memory_words.untimed_that_fit(predictions.labelled(STATE), choices, 80.0) == {"fsdp": [8, 64]}


def test_a_strategy_with_other_options_or_no_step_model_is_never_picked():
    state = pd.concat([STATE, _state([("stock", 8, 1.0)], options='{"comm_hook": "fp16", "static_graph": true}')],
                      ignore_index=True)  # fmt: skip
    w8 = choice.choose(predictions.labelled(state), FRAMES, 80.0)[0]
    assert [c.strategy for c in w8.picked] == ["zero"]  # the hooked stock fits, but the model has no step for it


def test_ddp_with_a_compression_hook_is_ranked_by_its_schedule_in_fewer_bytes_and_says_so():
    """A user sweeping DDP's knobs for a cluster read 'stock comm_hook=bf16 … fit too, with no step model': the hook
    changes what DDP's schedule sends, which the cluster's network prices (compression.with_compressed)."""
    hooked = _state([("stock", 8, 1.0)], options='{"comm_hook": "bf16"}')
    frames = [_frame(8, 100.0, 104.0).assign(compressed_step_ms=95.0, compressed_share=0.5, exposed_comm_ms=8.0,
                                             compressed_exposed_comm_ms=3.0)]  # fmt: skip
    w8 = choice.choose(predictions.labelled(pd.concat([STATE, hooked], ignore_index=True)), frames, 80.0)[0]
    assert [(c.strategy, c.step_ms) for c in w8.picked] == [("stock comm_hook=bf16", 95.0)]
    assert w8.picked[0].note.startswith("50% of the bytes all-reduced, exposed communication 8 → 3 ms; lossy")
    rows = choice_table.table_rows(predictions.labelled(hooked), frames, 80.0)
    assert "stock comm_hook=bf16: 50% of the bytes all-reduced" in rows[0][-1]
    (no_optimizer,) = choice.without_optimizer(frames, 30.0)  # its step is DDP's: the whole optimizer in it
    assert float(no_optimizer["compressed_step_ms"].iloc[0]) == 65.0


def test_nothing_is_chosen_without_a_gpu_memory_or_counted_activations():
    assert choice.choose(predictions.labelled(STATE), FRAMES, 0.0) == []
    uncounted = STATE.assign(activation_mb=float("nan"))
    assert choice.choose(predictions.labelled(uncounted), FRAMES, 80.0) == []


def test_the_choice_says_the_pick_what_is_beside_it_and_what_fits_untimed(capsys):
    """The page's words in full; the console's table, with what it leaves out and the caveat under it, once."""
    said = choice_words(predictions.labelled(STATE), FRAMES, 80.0)
    assert said.startswith("the fastest predicted step of the strategies the")
    assert "w8 zero 104 ms (stock does not fit: 100 GiB a rank)" in said
    assert "w64 stock 100 ms or zero 103 ms (too close to call: under the 4 % the model can tell)" in said
    assert "; fsdp fits too, with no step model to predict its step here: the run page compares" in said  # no counts
    cluster = types.SimpleNamespace(name="dgx-h100", gpu_memory_gib=80.0)
    predictions.strategy_choice(STATE, cluster, frames=FRAMES, caveat="a CPU's compute")
    lines = capsys.readouterr().out.splitlines()
    # no full-size floor ranks a row here: its "≥" unexplained (it was said of every answer, floored or not)
    assert (
        lines[0]
        == "ddpbench predict: the answer on dgx-h100, the fastest step of what fits 80 GiB a GPU as counted above:"
    )
    # the cap each booking's step is at, named though no floors rank it (a cell read 'stock' beside 'stock at 25 MiB');
    # beside the step, each pick's peak a rank (state + 10 GiB of activations), as the page's table has it: whether it
    # fits was a screen below, in the memory table, where a resnet152 walkthrough looked for it first
    assert lines[1].split()[:4] == ["GPUs", "book", "step", "ms"] and lines[1].split()[4:6] == ["peak", "GiB"]
    assert lines[2].split() == ["8", "zero", "at", "25", "MiB", "104", "70", "stock", "does", "not", "fit"]
    assert lines[3].split() == ["64", "stock", "or", "zero", "at", "25", "MiB", "100–103", "70", "/", "50", "a", "tie",
                                "[1]"]  # fmt: skip
    assert lines[4] == "  [1] a tie (w64): a lead under 4% is more than the model can tell"
    assert lines[5:] == ["  fsdp fits too, with no step model to predict its step here: the run page compares what "
                         "the run measured", "  a CPU's compute"]  # fmt: skip
    small = _state([("stock", 8, 20.0), ("zero", 8, 19.0)])
    assert "w8 stock 100 ms (zero 110 ms, 10.0% slower)" in choice_words(
        predictions.labelled(small), [_frame(8, 100.0, 110.0)], 80.0
    )
    predictions.strategy_choice(small, cluster, frames=[_frame(8, 100.0, 110.0)])
    said = capsys.readouterr().out.splitlines()[2].split()
    assert said == ["8", "stock", "at", "25", "MiB", "100", "30", "zero", "at", "25", "MiB", "+10.0%"]


def test_fsdps_modelled_step_joins_the_choice_where_the_profile_has_its_blocks():
    frames = [frame.assign(fsdp_step_ms=ms) for frame, ms in zip(FRAMES, (150.0, 80.0), strict=True)]
    state = predictions.labelled(pd.concat([STATE, _state([("bucketed", 8, 30.0)])], ignore_index=True))
    w8, w64 = choice.choose(state, frames, 80.0)
    assert [c.strategy for c in w8.picked] == ["zero"]
    assert [(c.strategy, c.step_ms, c.fits) for c in w8.others] == [("stock", 100.0, False), ("fsdp", 150.0, True)]
    assert [c.strategy for c in w64.picked] == ["fsdp"]
    assert memory_words.untimed_that_fit(state, [w8, w64], 80.0) == {"bucketed": [8]}  # FSDP is timed now


def test_a_lead_inside_fsdps_own_cost_bounds_leaves_the_pick_open_and_one_beyond_them_decides_it(capsys):
    """A CPU's FSDP own cost is no GPU's: scaled to a GPU step given by --local-step-ms, FSDP2's step is bounded,
    from none of it to all of it, and the pick is decided only where it holds at both ends (a walkthrough's table read
    fsdp +246 % behind, the note under it a tie without that cost, the FSDP line that cost left out)."""
    frame = _frame(64, 100.0, 103.0).assign(fsdp_step_ms=90.0)
    (plain,) = choice.choose(predictions.labelled(STATE), [frame], 80.0)
    assert [c.strategy for c in plain.picked] == ["fsdp"] and not plain.open_on  # 10 % ahead, a point: no bounds
    left = frame.assign(fsdp_own_left_out_ms=20.0)  # 90 without it, 110 with a CPU's: stock and zero ahead then
    (unsure,) = choice.choose(predictions.labelled(STATE), [left], 80.0)
    assert unsure.open_on == ("FSDP2",) and not unsure.others
    assert [[c.strategy for c in ends] for ends in unsure.at_ends] == [["fsdp"], ["stock", "zero"]]
    assert (
        "w64 fsdp 90–110 ms (from none of its own cost, unmeasured on a GPU, to a CPU's, scaled) or stock 100 ms or "
        "zero 103 ms (open until FSDP's "
        "own cost is measured on a GPU (bench --gpus 1 --impls local,fsdp there): fsdp without it, stock or zero "
        "with a CPU's, scaled)"
    ) in choice_words(predictions.labelled(STATE), [left], 80.0)  # the page's words
    cluster = types.SimpleNamespace(name="dgx-h100", gpu_memory_gib=80.0)
    predictions.strategy_choice(STATE, cluster, frames=[left])
    said = capsys.readouterr().out
    row = next(line for line in said.splitlines() if line.split()[:1] == ["64"])
    # no next: all three booked, at the step booked once FSDP's cost is measured: fsdp's without it, stock's with it
    assert row.split()[:10] == ["64", "fsdp", "or", "stock", "at", "25", "MiB", "or", "zero", "at"]  # not fsdp's 110
    # the caps named, each pick's peak a rank beside its step: the note's words under the table
    assert row.endswith("90–100  15 / 70 / 50  [1]") and "a tie" not in said
    assert "  [1] open until FSDP's own cost is measured on a GPU (w64 fsdp without it, stock or zero with a CPU's, " \
           "scaled): bench --gpus 1 --impls local,fsdp on a GPU measures it" in said  # fmt: skip
    # ahead of stock even with all of it (12 ms, within the 4 % at the long end): fsdp at both ends, a range
    tied = frame.assign(fsdp_own_left_out_ms=12.0)
    (decided,) = choice.choose(predictions.labelled(STATE), [tied], 80.0)
    assert [c.strategy for c in decided.picked] == ["fsdp"] and not decided.open_on
    (row,) = choice_table.table_rows(predictions.labelled(STATE), [tied], 80.0)
    assert row[1:5] == (
        "fsdp",
        "90–102",
        "stock at 25 MiB",
        "level to +11.1%",
    )  # stock 2 % ahead of its long end: a tie there
    assert row[-1] == (
        "fsdp's step from none of its own cost, unmeasured on a GPU, to a CPU's, scaled; "
        "level with FSDP's own cost at a CPU's, "
        "11.1% behind without it: open until FSDP's own cost is measured on a GPU (bench --gpus 1 --impls local,fsdp "
        "there)"
    )  # each end said
    far = frame.assign(fsdp_step_ms=80.0, fsdp_own_left_out_ms=12.0)  # 8 ms ahead even with it: the pick
    assert [c.strategy for c in choice.choose(predictions.labelled(STATE), [far], 80.0)[0].picked] == ["fsdp"]


def test_an_open_pick_is_the_same_booking_in_the_answer_and_the_bookings_and_the_answer_names_its_end(capsys):
    """A walkthrough's bookings read 'fsdp → stock at 25 MiB ≥12.95–25' where the answer left 'fsdp or stock' open at
    ≥12.95–21.15 with no word of the end it was printed at: the booking names the open pick as the answer does, its
    range at that end is the answer's, and the answer's header says which end its row is (the other books stock)."""
    from harness.commands.console.predict import bookings as console_bookings
    from harness.perfmodel.clusters.bookings import of_cluster

    here = _frame(64, 100.0, 103.0).assign(fsdp_step_ms=90.0, fsdp_own_left_out_ms=20.0)  # compute-bound: open
    there = _frame(64, 200.0, 230.0).assign(fsdp_step_ms=215.0)  # memory-bound: stock ahead
    state = predictions.labelled(STATE)
    choices = [{64: choice.choose(state, [frame], 80.0)[0]} for frame in (here, there)]
    (w64,) = of_cluster("dgx-h100", 8, [here, there], choices, batch=128)
    (one_end,) = of_cluster("dgx-h100", 8, [here], choices[:1], batch=128)
    assert (w64.book, w64.other_end, w64.tied) == ("fsdp or stock or zero", "stock", ())
    assert console_bookings._cells(w64, None, ("compute-bound", "memory-bound"))[3:5] == (
        "fsdp or stock or zero → stock", "90–200")  # fmt: skip
    cluster = types.SimpleNamespace(name="dgx-h100", gpu_memory_gib=80.0)
    predictions.strategy_choice(STATE, cluster, frames=[here], batch=128,
                                other_end=("compute-bound", "memory-bound", there))  # fmt: skip
    said = capsys.readouterr().out
    assert "counted above (at the step's compute-bound end, the memory-bound end's below):" in said  # no floor: no ≥
    row = next(line for line in said.splitlines() if line.split()[:1] == ["64"])
    step = "–".join(f"{ms:.4g}" for ms in one_end.step_ms)
    gpu_hours = "–".join(f"{h:.3g}" for h in one_end.gpu_hours)
    assert row.split()[12] == step == "90–100" and gpu_hours in row.split()  # the booking's, at this end


def test_zero_with_a_bucket_view_is_timed_with_one_broadcast_a_rank():
    frame = _frame(8, 100.0, 104.0).assign(zero_broadcast_ms=6.0, zero_bucket_view_broadcast_ms=1.0)
    state = _state([("zero", 8, 20.0)], options='{"parameters_as_bucket_view": true}')
    (w8,) = choice.choose(predictions.labelled(state), [frame], 80.0)
    assert [(c.step_ms, c.fits) for c in w8.picked] == [(104.0 - 6.0 + 1.0, True)]


def test_a_gpu_count_without_state_is_skipped_and_uncounted_activations_are_said(capsys):
    state = pd.concat([_state([("stock", 8, 20.0)]), _state([("fsdp", 8, 5.0)]).assign(activation_mb=float("nan"))],
                      ignore_index=True)  # fmt: skip
    choices = choice.choose(predictions.labelled(state), [_frame(8, 100.0, 110.0), _frame(16, 90.0, 95.0)], 80.0)
    assert [c.world_size for c in choices] == [8]  # nothing was carried to 16 GPUs: no "nothing fits" there
    words = choice_words(predictions.labelled(state), [_frame(8, 100.0, 110.0)], 80.0)
    assert words.endswith("; fsdp left out: its activations were not counted")


def test_fsdp_kept_after_forward_is_timed_by_its_own_column():
    frame = _frame(8, 100.0, 104.0).assign(fsdp_step_ms=95.0, fsdp_kept_step_ms=90.0)
    state = pd.concat([_state([("fsdp", 8, 20.0)]), _state([("fsdp", 8, 30.0)], '{"reshard_after_forward": false}')],
                      ignore_index=True)  # fmt: skip
    (w8,) = choice.choose(predictions.labelled(state), [frame], 80.0)
    assert [(c.strategy, c.step_ms) for c in (*w8.picked, *w8.others)] == [
        ("fsdp reshard_after_forward=False", 90.0), ("fsdp", 95.0)]  # fmt: skip


def test_an_untimed_strategy_that_fits_at_some_gpu_counts_names_them():
    state = _state([("stock", 8, 20.0), ("stock", 64, 20.0), ("bucketed", 8, 90.0), ("bucketed", 64, 30.0)])
    words = choice_words(predictions.labelled(state), FRAMES, 80.0)
    assert "; bucketed at w64 fits too, with no step model" in words


def test_a_sharded_leads_dependence_on_the_optimizers_share_is_said():
    """A walkthrough's choice of ZeRO-1 (25 % ahead) rested on a CPU's Adam, 24 % of the step; a GPU's is a smaller
    share. DDP's 100 ms step holds 30 ms of optimizer: ZeRO-1's 80 ms, its optimizer on a quarter (7.5 ms), leads
    by 20 ms of the 22.5 ms it saves, so it needs f ≥ 1 − 20/22.5 of the optimizer's 30 %: 3.3 % of the step."""
    frame = _frame(8, 100.0, 80.0).assign(zero_optimizer_ms=7.5, fsdp_step_ms=60.0, fsdp_optimizer_ms=3.75)
    said = sharded.optimizer_break_even(frame, optimizer_ms=30.0, step_ms=100.0)
    assert (
        said == "at w8, ZeRO-1's lead needs the optimizer at 3% of the step or more; FSDP2's holds with no "
        "optimizer time at all"
    )  # fmt: skip  (FSDP2 leads by 40 ms, more than the 26.25 ms it saves)
    behind = frame.assign(zero_step_ms=101.0, fsdp_step_ms=float("nan"))
    assert sharded.optimizer_break_even(behind, optimizer_ms=30.0, step_ms=100.0) == ""  # no lead to explain
    close = frame.assign(zero_step_ms=99.9, fsdp_step_ms=float("nan"))  # 0.1 ms ahead: needs nearly all of it
    assert sharded.optimizer_break_even(close, optimizer_ms=30.0, step_ms=100.0) == (
        "at w8, ZeRO-1's lead needs the optimizer at 30% of the step or more"
    )
    # each strategy's line says its own; and a lead its left-out own cost eats is none (a walkthrough read FSDP2's
    # 'lead needs the optimizer at 0.4 %' where its step with its own cost was 17 % behind DDP's)
    assert sharded.optimizer_break_even(frame, optimizer_ms=30.0, step_ms=100.0, labels=("ZeRO-1",)) == (
        "at w8, ZeRO-1's lead needs the optimizer at 3% of the step or more"
    )
    eaten = frame.assign(fsdp_own_left_out_ms=45.0)  # 60 + 45 = 105 ms against DDP's 100
    assert sharded.optimizer_break_even(eaten, optimizer_ms=30.0, step_ms=100.0, labels=("FSDP2",)) == ""
    part = frame.assign(fsdp_own_left_out_ms=20.0)  # 80 ms whole: leads by 20 of the 26.25 ms it saves
    assert sharded.optimizer_break_even(part, optimizer_ms=30.0, step_ms=100.0, labels=("FSDP2",)) == (
        "at w8, FSDP2's lead needs the optimizer at 7% of the step or more"
    )


def test_a_pick_that_rests_on_a_cpus_optimizer_time_is_said_with_the_share_it_turns_on(capsys):
    """A walkthrough's choice named ZeRO-1 on 16 A100s 47 % ahead of DDP, all of it a CPU's Adam. Both fit here;
    DDP's 100 ms holds 30 ms of optimizer, ZeRO-1's its shard's 7.5 ms. At w8 ZeRO-1's 70 ms is 62.5 ms with no
    optimizer time, still over 4 % ahead of DDP's 70: the pick holds either way. At w64 its 95 ms is 87.5 ms without,
    behind DDP's 70: it leads alone while DDP's step is over 1.04 × its own, 100 − 30(1 − f) > 1.04 × (95 − 7.5(1 −
    f)), f = 21/22.2 of the 30 ms, 28 % of the 100 ms step (the steps cross at 23 %: between, a tie, booking DDP)."""
    state = _state([("stock", 8, 20.0), ("zero", 8, 10.0), ("stock", 64, 20.0), ("zero", 64, 10.0)])
    frames = [
        _frame(8, 100.0, 70.0).assign(zero_optimizer_ms=7.5),
        _frame(64, 100.0, 95.0).assign(zero_optimizer_ms=7.5),
    ]
    words = choice_words(predictions.labelled(state), frames, 80.0, optimizer_ms=30.0, step_ms=100.0)
    assert "w8 zero 70 ms (stock 100 ms, 42.9% slower)" in words  # holds with no optimizer time too: said plainly
    assert (
        "w64 zero 95 ms if a GPU's optimizer takes 28% of the one-GPU step or more, else stock (stock 100 ms" in words
    )
    plain = choice_words(predictions.labelled(state), frames, 80.0)  # a GPU's profile: its own optimizer
    assert "w64 zero 95 ms (stock 100 ms" in plain and " if a GPU's optimizer" not in plain


def test_a_decided_tie_names_first_the_pick_it_books_the_least_step_with_its_own_cost_in():
    """A walkthrough's answer booked 'fsdp or stock at 25 MiB' (fsdp 180.1 ms without its CPU-measured own cost,
    186.6 with it; stock 180.2) where its bookings booked 'stock at 25 MiB (or fsdp, …)': a tie decided at every
    corner names first what it books, the least step with every own cost's long end in, as the bookings book it."""
    frame = _frame(64, 180.2, 250.0).assign(fsdp_step_ms=180.1, fsdp_own_left_out_ms=6.5)
    (w64,) = choice.choose(predictions.labelled(STATE), [frame], 80.0)
    assert not w64.open_on and [c.strategy for c in w64.picked] == ["stock", "fsdp"]
    assert w64.picked[0] is w64.fastest


def test_zeros_own_cost_a_cpu_measured_bounds_its_step_as_fsdps_does():
    """A CPU's ZeRO own cost (30 ms here, scaled) is no GPU's either: 10 ms ahead without it, 20 behind with it, the
    pick is open; with FSDP2's bounded too, on every corner of both (each own cost at either end, apart)."""
    state = _state([("stock", 8, 20.0), ("zero", 8, 10.0)])
    frames = [_frame(8, 100.0, 90.0).assign(zero_own_left_out_ms=30.0)]
    w8 = choice.choose(predictions.labelled(state), frames, 80.0)[0]
    assert [c.strategy for c in w8.picked] == ["zero", "stock"] and w8.open_on == ("ZeRO-1",)
    assert (
        "(open until ZeRO's own cost is measured on a GPU (bench --gpus 1 --impls stock,zero there): zero without "
        "it, stock with a CPU's, scaled)"
    ) in (choice_words(predictions.labelled(state), frames, 80.0))
    # zero 90–97, fsdp 92–100.5, stock 100: zero with fsdp at both short ends, fsdp alone where only ZeRO's is long,
    # zero alone where only FSDP's is, all three at both long ends: no pick at every corner
    three = _state([("stock", 8, 20.0), ("zero", 8, 10.0), ("fsdp", 8, 5.0)])
    both = [_frame(8, 100.0, 90.0).assign(zero_own_left_out_ms=7.0, fsdp_step_ms=92.0, fsdp_own_left_out_ms=8.5)]
    (w8,) = choice.choose(predictions.labelled(three), both, 80.0)
    assert w8.open_on == ("ZeRO-1", "FSDP2") and [c.strategy for c in w8.picked] == ["zero", "fsdp", "stock"]
    (row,) = choice_table.table_rows(predictions.labelled(three), both, 80.0)
    assert row[-1].startswith(
        "open until ZeRO's and FSDP's own costs are measured on a GPU (bench --gpus 1 --impls "
        "stock,zero,local,fsdp there): zero or fsdp without it"
    )


def test_a_lead_over_the_pick_names_the_own_costs_of_the_two_compared_alone():
    """fsdp 97–105.5 ms against stock 100 read '3.0% faster without FSDP's and ZeRO's own cost, 5.5% slower without
    ZeRO's own cost, with FSDP's at a CPU's': ZeRO's own cost moves neither step, so its ends are not named."""
    three = _state([("stock", 8, 20.0), ("zero", 8, 10.0), ("fsdp", 8, 5.0)])
    frames = [_frame(8, 100.0, 110.0).assign(zero_own_left_out_ms=7.0, fsdp_step_ms=97.0, fsdp_own_left_out_ms=8.5)]
    (w8,) = choice.choose(predictions.labelled(three), frames, 80.0)
    assert [c.strategy for c in w8.picked] == ["stock"] and w8.bounds == ["FSDP2", "ZeRO-1"]
    said = choice_words(predictions.labelled(three), frames, 80.0)
    assert "fsdp 97–105.5 ms (from none of its own cost, unmeasured on a GPU, to a CPU's, scaled), " \
           "3.0% faster without FSDP's own cost, 5.5% " \
           "slower with it at a CPU's; zero 110–117 ms" in said, said  # fmt: skip


def test_no_turning_point_is_said_where_the_pick_is_already_too_close_to_call():
    state = _state([("stock", 8, 20.0), ("zero", 8, 10.0)])
    frames = [_frame(8, 100.0, 99.0).assign(zero_optimizer_ms=29.0)]  # 1 ms ahead: tied with stock already
    words = choice_words(predictions.labelled(state), frames, 80.0, optimizer_ms=30.0, step_ms=100.0)
    assert "too close to call" in words and "if a GPU's optimizer" not in words


def test_a_turning_share_under_one_percent_keeps_its_decimal_and_none_under_a_tenth_is_said():
    """A walkthrough read 'if a GPU's optimizer takes 0% of the one-GPU step or more': always so, saying nothing."""
    state = _state([("stock", 64, 20.0), ("zero", 64, 10.0)])

    def said(shard_ms: float) -> str:
        frames = [_frame(64, 100.0, 95.0).assign(zero_optimizer_ms=shard_ms)]
        return choice_words(predictions.labelled(state), frames, 80.0, optimizer_ms=30.0, step_ms=100.0)

    # 95 − 27.67 = 67.33 ms with no optimizer time: DDP's 70 within 4 % of it, a tie, until 0.57 % of the step
    assert "w64 zero 95 ms if a GPU's optimizer takes 0.6% of the one-GPU step or more, else stock or zero (a tie)" \
        in said(27.67)  # fmt: skip
    assert "w64 zero 95 ms (stock" in said(27.69) and "if a GPU's optimizer" not in said(27.69)  # 0.06 %


def test_a_pick_that_falls_into_a_tie_without_the_optimizer_says_where():
    """A 1.3B Llama on 16 H100s, the optimizer estimated at 11.2 ms of an 85 ms step: fsdp at 77.84 ms led stock's
    86.32, and its cell "the pick rests on" was blank, though with no optimizer time stock's 75.12 is within 4 % of
    fsdp's 77.14 (a tie, which books stock): fsdp leads alone while stock's step is over 1.04 × its own, above 6.4 %
    of the step (--local-optimizer-ms 5.4 read a tie, 5.8 fsdp alone)."""
    state = _state([("stock", 16, 20.0), ("fsdp", 16, 2.0)])
    frame = _frame(16, 86.32, 200.0).assign(zero_optimizer_ms=11.2, fsdp_step_ms=77.84, fsdp_optimizer_ms=0.7)
    labelled = predictions.labelled(state)
    (row,) = choice_table.noted_rows(labelled, [frame], 80.0, optimizer_ms=11.2, step_ms=85.0)
    (note,) = row[1]
    assert note.said == ("holds if a GPU's optimizer takes 6% of the one-GPU step or more, else stock or fsdp (a "
                         "tie) (--local-optimizer-ms, with --local-step-ms, settles it)")  # fmt: skip
    (alone,) = choice_table.noted_rows(labelled, [frame.assign(fsdp_step_ms=70.0)], 80.0, optimizer_ms=11.2,
                                       step_ms=85.0)  # fmt: skip
    assert alone[1] == []  # 69.3 ms with none: still over 4 % ahead of stock's 75.12, said plainly


def test_a_lead_smaller_than_the_step_models_own_errors_set_them_apart_is_too_close_to_call():
    """A walkthrough's check on its run's own steps read DDP -25 %, FSDP2 -44 %: a step is its prediction over (1 +
    its model's error), so stock's 115 ms stands for 153 ms and FSDP2's 90 ms for 161: a FSDP2 lead under
    0.75 / 0.56 − 1 = 33.9 % is the model's, not the cluster's. The other way round (stock predicted faster, its
    model reading higher) the usual 4 % band holds: FSDP2's true step is further behind than predicted."""
    state = _state([("stock", 8, 20.0), ("fsdp", 8, 10.0)])
    errors = {"DDP": [-0.25, -0.25], "FSDP2": [-0.44]}
    frames = [_frame(8, 115.0, 200.0).assign(fsdp_step_ms=90.0)]
    alone = choice.choose(predictions.labelled(state), frames, 80.0)[0]
    assert [c.strategy for c in alone.picked] == ["fsdp"] and alone.apart == 0.0
    both = choice.choose(predictions.labelled(state), frames, 80.0, errors)[0]
    assert [c.strategy for c in both.picked] == ["stock", "fsdp"]  # a tie: the least machinery first, not the step
    assert both.apart == pytest.approx(0.75 / 0.56 - 1)
    words = choice_words(predictions.labelled(state), frames, 80.0, errors=errors)
    assert "w8 stock 115 ms or fsdp 90 ms (too close to call: a lead under 34% is within how far the step models " \
           "missed this run's own steps)" in words  # fmt: skip
    (row,) = choice_table.table_rows(predictions.labelled(state), frames, 80.0, errors=errors)
    assert row[1:3] == ("stock at 25 MiB or fsdp", "90–115")  # the tie's span, not the first's step alone
    reverse = [_frame(8, 90.0, 200.0).assign(fsdp_step_ms=110.0)]  # stock ahead, and truly further ahead
    assert [c.strategy for c in choice.choose(predictions.labelled(state), reverse, 80.0, errors)[0].picked] == [
        "stock"
    ]
    alike = {"DDP": [-0.25], "FSDP2": [-0.26]}  # within 4 % of each other: the usual band
    assert [c.strategy for c in choice.choose(predictions.labelled(state), frames, 80.0, alike)[0].picked] == ["fsdp"]


def test_a_slower_strategy_whose_step_is_bounded_by_its_own_cost_is_behind_by_a_range():
    """A walkthrough read 'fsdp 181.6 ms, 0.8% slower' of a step that left out 40 ms of FSDP's own cost, then the
    table's +18.7 %: both ends are one range, said once; the cost's figure is the FSDP line's, not the table's."""
    state = _state([("stock", 8, 20.0), ("fsdp", 8, 10.0)])
    frames = [_frame(8, 100.0, 200.0).assign(fsdp_step_ms=100.8, fsdp_own_left_out_ms=40.0)]
    words = choice_words(predictions.labelled(state), frames, 80.0)
    assert (
        "fsdp 100.8–140.8 ms (from none of its own cost, unmeasured on a GPU, to a CPU's, scaled), 0.8–40.8% slower"
        in words
    )
    (row,) = choice_table.table_rows(predictions.labelled(state), frames, 80.0)
    assert row[1:5] == (
        "stock at 25 MiB",
        "100",
        "fsdp",
        "+0.8–40.8%",
    )  # a tie without it, stock with it: stock, decided
    assert row[-1] == "fsdp's step from none of its own cost, unmeasured on a GPU, to a CPU's, scaled"
    apart = [_frame(8, 100.0, 200.0).assign(fsdp_step_ms=110.0, fsdp_own_left_out_ms=40.0)]
    assert choice_table.table_rows(predictions.labelled(state), apart, 80.0)[0][3:5] == ("fsdp", "+10.0–50.0%")
    whole = [_frame(8, 100.0, 200.0).assign(fsdp_step_ms=110.0)]  # a GPU run's: its own cost in its step, a point
    assert choice_table.table_rows(predictions.labelled(state), whole, 80.0)[0][3:] == ("fsdp", "+10.0%", "")
    # slower by less than 4 % at both ends: a tie, as any two steps that close (a walkthrough's table named stock
    # alone with 'fsdp +1.4%' next, whose step left out 1.35 ms)
    close = [_frame(16, 121.3, 144.7).assign(fsdp_step_ms=123.0, fsdp_own_left_out_ms=1.35)]
    (tied,) = choice.choose(predictions.labelled(_state([("stock", 16, 20.0), ("fsdp", 16, 10.0)])), close, 80.0)
    assert [c.strategy for c in tied.picked] == ["stock", "fsdp"] and not tied.open_on


def test_the_answer_ends_as_a_table_of_the_pick_the_next_and_what_it_rests_on(capsys):
    """A walkthrough found the answer buried in one 2,500-character line: per GPU count, the pick, its step, the
    next that fits and how far behind, and what the pick rests on end it, one row each, in sight (the numbers of the
    turning-share test above, with stock too large at w8 and fsdp's step at w64, a CPU's own cost its long end: 90 ms
    ahead of zero's 95 without it, 102 behind with it, the pick open)."""
    state = _state([("stock", 8, 90.0), ("zero", 8, 10.0), ("stock", 64, 20.0), ("zero", 64, 10.0), ("fsdp", 64, 5.0)])
    frames = [
        _frame(8, 100.0, 75.0).assign(zero_optimizer_ms=7.5),
        _frame(64, 100.0, 95.0).assign(zero_optimizer_ms=7.5, fsdp_step_ms=90.0, fsdp_own_left_out_ms=12.0),
    ]
    cluster = types.SimpleNamespace(name="dgx-h100", gpu_memory_gib=80.0)
    predictions.strategy_choice(state, cluster, frames=frames, cpu_optimizer=(30.0, 100.0), batch=32)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("ddpbench predict: the answer on dgx-h100, the fastest step of what fits 80 GiB a GPU")
    header, w8, w64 = lines[1:4]
    assert [cell.strip() for cell in header.split("  ") if cell] == ["GPUs", "book", "step ms", "peak GiB",
                                                                     "next that fits", "behind", "GPU-h per 1M samples",
                                                                     "rests on"]  # fmt: skip  # over marks alone
    # 75 ms a step of 32 samples a GPU: 0.075 s × 10⁶ / 32 / 3,600 = 0.651 GPU-hours a million samples
    assert w8.split() == [
        "8",
        "zero",
        "at",
        "25",
        "MiB",
        "75",
        "20",
        "0.651",
        "[1]",
    ]  # no runner-up: none else fits, said under the table
    # open: fsdp or zero, the faster of them at each end (fsdp's 102 with its cost no one would book); stock behind
    # that at each end: 100 / 90, 100 / 95
    assert w64.split()[:17] == ["64", "fsdp", "or", "zero", "at", "25", "MiB", "90–95", "15", "/", "20", "stock", "at",
                                "25", "MiB", "+5.3–11.1%", "0.781–0.825"]  # fmt: skip
    assert header.index("book") == w64.index("fsdp")  # words aligned left, figures right
    assert header.index("behind") + len("behind") == w64.index("+5.3–11.1%") + len("+5.3–11.1%")
    # the notes' words beside the figures would pass the console's width: marks, the words under the table once
    assert w64.endswith("  [2]") and max(map(len, lines[1:4])) <= answer.WIDTH
    assert lines[4:] == [
        "  [1] stock does not fit (w8)",
        "  [2] open until FSDP's own cost is measured on a GPU (w64 fsdp without it, zero with a CPU's, scaled): "
        "bench --gpus 1 --impls local,fsdp on a GPU measures it",
    ]  # no optimizer's share said where the pick is open already
    # thousands of GPU-hours without an exponent: 8 s a step of one sample
    (row,) = choice_table.table_rows(predictions.labelled(_state([("stock", 8, 20.0)])),
                                     [_frame(8, 8000.0, 9000.0)], 80.0, batch=1)  # fmt: skip
    assert row[5] == "2,222"


def test_options_given_at_their_defaults_are_the_strategys_own_step():
    """A walkthrough swept gradient_as_bucket_view=false,true and static_graph=false,true: DDP as it ships, asked
    by name, read 'none modelled fits' beside 'fits (11.3 GiB a rank)'. Options at their defaults are the step
    models' own, and so are those that leave DDP's buckets and all-reduces as they are (gradient_as_bucket_view: a
    1.3B Llama fitted only with it, and it went unpriced, never picked), said so; any other stays untimed."""
    shipped = _state([("stock", 8, 20.0)], '{"gradient_as_bucket_view": false, "static_graph": false}')
    viewed = _state([("stock", 8, 19.0)], '{"gradient_as_bucket_view": true, "static_graph": false}')
    unused = _state([("stock", 8, 18.0)], '{"find_unused_parameters": true}')
    state = predictions.labelled(pd.concat([shipped, viewed, unused], ignore_index=True))
    (w8,) = choice.choose(state, [_frame(8, 100.0, 104.0)], 80.0)
    assert [(c.strategy, c.step_ms) for c in w8.picked] == [(s, 100.0) for s in state["strategy"].iloc[:2]]
    assert w8.picked[1].note.startswith("priced as DDP's: gradient_as_bucket_view leaves its buckets and all-reduces")
    said = choice_words(state, [_frame(8, 100.0, 104.0)], 80.0)
    assert "stock find_unused_parameters=True fits too, with no step model" in said and "view=True fits too" not in said


def test_no_choice_for_want_of_counted_activations_is_said(capsys):
    """A walkthrough's bf16 run had no activations counted, and the choice and its table were dropped unsaid."""
    uncounted = _state([("stock", 8, 20.0)]).assign(activation_mb=float("nan"))
    cluster = types.SimpleNamespace(name="dgx-a100", gpu_memory_gib=80.0)
    predictions.strategy_choice(uncounted, cluster, frames=[_frame(8, 100.0, 104.0)])
    assert "no choice of strategy on dgx-a100: the activations were not counted" in capsys.readouterr().err


def test_a_table_whose_models_missed_the_runs_own_steps_says_so_in_its_title(capsys):
    """A walkthrough's answer table read clean, and only after it did 'How sure' say the models were off by 57 %."""
    cluster = types.SimpleNamespace(name="dgx-a100", gpu_memory_gib=80.0)
    state = _state([("stock", 8, 20.0)])
    predictions.strategy_choice(state, cluster, frames=[_frame(8, 100.0, 104.0)], errors={"DDP": [-0.57, -0.5]})
    assert (
        "the step models missed this run's own steps by up to 57%: not borne out, see below):"
        in (capsys.readouterr().out.splitlines()[0])
    )
    predictions.strategy_choice(state, cluster, frames=[_frame(8, 100.0, 104.0)], errors={"DDP": [-0.1]})
    assert "not borne out" not in capsys.readouterr().out


def test_a_modelled_strategy_the_run_never_benched_is_named_where_predicted_faster_never_booked():
    """A team lead's cap sweep benched stock alone: its what-if page booked stock at every GPU count while its own
    chart put ZeRO-1 and FSDP2 well ahead. What a rank of theirs holds was never measured, so neither is chosen, but
    each is named where its predicted step beats the pick, as you would bench it."""
    state = predictions.labelled(_state([("stock", 8, 20.0), ("stock", 64, 20.0)]))
    frames = [_frame(8, 100.0, 75.0).assign(fsdp_step_ms=120.0), _frame(64, 100.0, 130.0).assign(fsdp_step_ms=90.0)]
    w8, w64 = choice.choose(state, frames, 80.0)
    assert [c.strategy for c in w8.picked] == ["stock"] and [(c.strategy, c.step_ms) for c in w8.unbenched] == [
        ("zero", 75.0)
    ]  # FSDP2 at 120 ms is slower: not named
    assert [(c.strategy, c.step_ms) for c in w64.unbenched] == [("fsdp", 90.0)]
    w8_row = choice_table.table_rows(state, frames, 80.0)[0]
    assert w8_row[1] == "stock at 25 MiB" and w8_row[-1].endswith(
        "zero predicted faster (75 ms) but not benched: bench it (--impls zero) to see what a rank holds"
    )
    assert "w8 stock 100 ms (zero 75 ms, not benched: bench it to see what a rank holds)" in choice_words(
        state, frames, 80.0
    )
    benched = predictions.labelled(_state([("stock", 8, 20.0), ("zero", 8, 90.0)]))  # zero benched, does not fit
    assert not choice.choose(benched, frames[:1], 80.0)[0].unbenched
    # a lead the model cannot tell (a user read 'fsdp predicted faster (45.19 ms)' against stock's 45.22) is no lead:
    # named only beyond the band a tie among benched ones spans
    level, ahead = _frame(8, 100.0, 99.3).assign(fsdp_step_ms=120.0), _frame(8, 100.0, 95.0).assign(fsdp_step_ms=120.0)
    assert not choice.choose(state, [level], 80.0)[0].unbenched
    assert [c.strategy for c in choice.choose(state, [ahead], 80.0)[0].unbenched] == ["zero"]


def test_where_nothing_benched_fits_the_modelled_strategies_never_benched_are_named_as_the_way_out():
    """A cap sweep of stock alone, on a model whose DDP state outgrows the GPU: the table read 'none modelled fits' at
    every GPU count and nothing beside it, while the lines above it predicted ZeRO-1's and FSDP2's steps, slower or
    not: which of them fits is unmeasured, so each is named with its step and how to bench it, and stock unfit."""
    state = predictions.labelled(_state([("stock", 8, 90.0)]).assign(batch_size=1))
    frames = [_frame(8, 100.0, 130.0).assign(fsdp_step_ms=120.0)]  # both slower than stock would be
    (w8,) = choice.choose(state, frames, 80.0)
    assert not w8.picked and [(c.strategy, c.step_ms) for c in w8.unbenched] == [("zero", 130.0), ("fsdp", 120.0)]
    (row,) = choice_table.table_rows(state, frames, 80.0)
    assert row[1] == "none modelled fits" and row[-1] == (
        "zero predicted (130 ms) but not benched: bench it (--impls zero) to see what a rank holds; fsdp predicted "
        "(120 ms) but not benched: bench it (--impls fsdp) to see what a rank holds; stock does not fit"
    )
    assert "w8 no modelled strategy fits (stock does not fit: 100 GiB a rank; zero 130 ms, not benched" in (
        choice_words(state, frames, 80.0)
    )


def test_strategies_without_a_step_model_are_told_what_their_options_change():
    """A knobs sweep's static_graph=True read 'no step model' and nothing more: say that its all-reduces are the
    strategy's own, and name an option whose effect on them is not known without claiming one."""
    import pandas as pd

    labels = ["stock static_graph=True", "stock powersgd", "stock", "stock fp16 view"]
    state = pd.DataFrame({"strategy": labels, "impl": ["stock"] * 4,
                          "impl_options": ['{"static_graph": true}', '{"comm_hook": "powersgd"}', "{}",
                                           '{"comm_hook": "fp16", "gradient_as_bucket_view": true}']})  # fmt: skip
    said = memory_words._unmodelled_why(state, ["stock static_graph=True"])
    assert said == (
        " (the step models leave out static_graph; static_graph changes DDP's own work on the host, not its "
        "buckets or all-reduces: their communication is the same strategy's without it)"
    )
    assert memory_words._unmodelled_why(state, ["stock powersgd"]) == " (the step models leave out comm_hook=powersgd)"
    # a 2-byte hook's bytes are modelled ('50% of the bytes all-reduced'): predict said it left out comm_hook after
    # naming them; gradient_as_bucket_view's saved copy is in the memory table it printed
    said = memory_words._unmodelled_why(state, ["stock fp16 view"])
    assert said.startswith(" (the step models leave out gradient_as_bucket_view; ") and "comm_hook" not in said
    assert said.endswith("; the gradient copy gradient_as_bucket_view saves is in the memory per rank)")
    assert memory_words._unmodelled_why(state, ["stock"]) == ""  # nothing beyond its defaults: nothing to name


def test_the_cpus_optimizer_share_is_said_without_guessing_which_way_a_gpus_differs():
    """bf16 on a CPU made Adam 0.3 % of a 1.3B model's step, which read 'a GPU's Adam … is likely a smaller share':
    a GPU's Adam over that model is a larger one. The share is said as measured, and no direction claimed."""
    from harness.perfmodel.sharded import optimizer_share_caveat

    said = optimizer_share_caveat(0.003, scaled=True, optimizer="adam")
    assert said.startswith("the optimizer's 0.3% of the step is the CPU's, scaled: a GPU's Adam, one memory-bound")
    assert "larger or smaller" in said and "--local-optimizer-ms" in said and "likely" not in said


def _floored(world: int) -> pd.DataFrame:
    """The tester's 1.3B llama at w64 (llama-small, --local-step-ms 40): the small profile's steps alike at every cap
    (its answer: 25 MiB), the full size's floors least at 100 MiB (46.45 ms), 63.96 ms at 25 MiB."""
    return pd.DataFrame({"bucket_cap_mb": [1.0, 25.0, 50.0, 100.0], "world_size": world,
                         "step_ms": [40.37, 40.37, 40.37, 40.37],
                         "full_size_step_floor_ms": [73.14, 63.96, 51.12, 46.45],
                         "zero_step_ms": 44.94, "zero_broadcast_ms": 4.67, "zero_bucket_view_broadcast_ms": 1.0,
                         "zero_full_size_step_floor_ms": [127.5, 118.3, 105.5, 100.8],
                         "zero_full_size_broadcast_ms": 54.5, "zero_bucket_view_full_size_broadcast_ms": 10.0,
                         "fsdp_step_ms": 40.62, "fsdp_full_size_step_floor_ms": 70.99})  # fmt: skip


def test_where_floors_exist_a_step_on_ddps_schedule_is_ranked_at_the_cap_its_ranked_figure_is_least():
    """A tester's booking table ranked DDP at 25 MiB, the small profile's cap ('64 stock ≥63.96 | fsdp +11.5%'),
    while its own floors had 46.45 ms at 100 MiB: DDP and ZeRO-1 are each ranked at the cap where the higher of their
    prediction and floor is least, and the table and words say that cap; FSDP2's step, the same at every cap, none."""
    state = predictions.labelled(_state([("stock", 64, 20.0), ("zero", 64, 11.0), ("fsdp", 64, 2.0)]))
    (w64,) = choice.choose(state, [_floored(64)], 80.0)
    assert [(c.named, c.step_ms) for c in w64.picked] == [("stock at 100 MiB", 46.45)]
    others = {c.strategy: c for c in w64.others}
    assert (others["zero"].cap_mb, others["zero"].step_ms) == (100.0, 100.8) and others["fsdp"].cap_mb is None
    (row,) = choice_table.table_rows(state, [_floored(64)], 80.0)
    assert row[1:5] == ("stock at 100 MiB", "≥46.45", "fsdp", f"+{70.99 / 46.45 - 1:.1%}")
    words = choice_words(state, [_floored(64)], 80.0)
    assert "w64 stock at 100 MiB, at least 46.45 ms (full-size floor; 40.37 ms as profiled)" in words
    # the what-if page's headline bound and its floors' columns come from the same rows
    figures = ranked.full_size_figures(_floored(64).assign(local_step_ms=40.0))
    assert (figures["full_size_cap_mb"], figures["full_size_least_step_ms"]) == (100.0, 46.45)
    assert (figures["zero_full_size_cap_mb"], figures["zero_full_size_step_floor_ms"]) == (100.0, 100.8)
    # floors alike within the tie: booked at 25 MiB, and the headline's figure and bound are 25 MiB's, as the
    # console's answer gives them (a page read 'at most 1.000 … at least 180 ms at any cap (25 MiB, …)' against the
    # console's 180.3 ms and 0.998 there: the least over every cap read as the booked cap's)
    alike = _floored(64).assign(full_size_step_floor_ms=[180.0, 180.3, 180.3, 180.3], local_step_ms=180.0)
    figures = ranked.full_size_figures(alike)
    assert (figures["full_size_cap_mb"], figures["full_size_least_step_ms"]) == (25.0, 180.3)
    assert figures["full_size_efficiency_at_most"] == pytest.approx(180.0 / 180.3)
    # a floor under the profiled step: the most it lets the efficiency be is the floor's, as the page says it beside
    # that floor (read 0.999, the ranked 300.3 ms's, beside a floor of 300.1 ms, which allows 1.000)
    under = _floored(64).assign(step_ms=300.3, full_size_step_floor_ms=300.1, local_step_ms=300.0)
    figures = ranked.full_size_figures(under)
    assert (figures["full_size_least_step_ms"], figures["full_size_step_floor_ms"]) == (300.3, 300.1)
    assert figures["full_size_efficiency_at_most"] == pytest.approx(300.0 / 300.1)
    # without floors, the cap the small profile's answer names, unsaid
    plain = _floored(64).drop(columns=[c for c in _floored(64) if "full_size" in c])
    (alone,) = choice.choose(state, [plain], 80.0)
    assert [c.named for c in alone.picked] == ["stock", "fsdp"]  # 40.37 and 40.62 ms: a tie
    # alike floors: the small profile's cap where it is among them, else DDP's default, else the largest
    assert ranked.least_row(_floored(64), [50.0, 50.0, 50.0, 50.0]) == 1
    assert ranked.least_row(_floored(64), [60.0, 70.0, 50.0, 50.0]) == 3
    # 1 MiB 0.4 % under 25 MiB is within the model's tie (agreement.TIE_TOLERANCE): no advice to set 1 MiB
    assert ranked.least_row(_floored(64), [50.0, 50.2, 60.0, 70.0]) == 1
    # 0.6 % is more than that tie, but not than the model can tell (ranked.CAN_TELL, 4 %, as the pick for bookings):
    # a what-if page moved DDP to 5 MiB on 0.67 %, 'the cap its floors favour'; past 4 %, 1 MiB is the least
    assert ranked.least_row(_floored(64), [50.0, 50.3, 60.0, 70.0]) == 1
    assert ranked.least_row(_floored(64), [50.0, 52.1, 60.0, 70.0]) == 0


def test_a_tie_takes_in_every_step_no_slower_than_its_slowest_and_says_its_band_once():
    """A tester's page read '8 | fsdp or zero | ≥91.52–108.8 | stock | +9.6%' (stock at 101.1 ms, faster than
    zero's 108.8, behind) and 'a lead under 133% is within how far the step models missed' with stock at +77%
    behind: the band is pairwise (each model's error against the pick's); the tie is closed, every step within the
    widest band that put one in the tie is in it, and that band is the one said."""
    errors = {"FSDP2": [-0.57], "ZeRO-1": [0.0]}  # zero's model reads 1 / 0.43 − 1 = 133 % above fsdp's
    fsdp, zero, stock = (choice.Candidate("fsdp", 1.0, True, 4453.0, model="FSDP2"),
                         choice.Candidate("zero", 1.0, True, 5363.0, model="ZeRO-1"),
                         choice.Candidate("stock", 1.0, True, 7883.0, model="DDP"))  # fmt: skip
    picked = choice._picked([fsdp, zero, stock], errors=errors)
    assert [c.strategy for c in picked] == ["fsdp", "zero", "stock"]  # stock, +77 %, is within the 133 % said
    beyond = dataclasses.replace(stock, step_ms=4453.0 * 2.4)  # +140 %: beyond the band, behind
    assert [c.strategy for c in choice._picked([fsdp, zero, beyond], errors=errors)] == ["fsdp", "zero"]
    # the 4 % band's tie, closed too: stock between two tied steps is in it
    page = [choice.Candidate("fsdp", 1.0, True, 91.52, model="FSDP2"),
            choice.Candidate("stock", 1.0, True, 101.1, model="DDP"),
            choice.Candidate("zero", 1.0, True, 108.8, model="ZeRO-1")]  # fmt: skip
    missed = {"FSDP2": [-0.43], "ZeRO-1": [-0.29]}  # zero's reads 0.71 / 0.57 − 1 = 25 % above fsdp's, DDP unchecked
    assert [c.strategy for c in choice._picked(page, errors=missed)] == ["fsdp", "stock", "zero"]
    state = predictions.labelled(_state([("fsdp", 8, 2.0), ("stock", 8, 20.0), ("zero", 8, 11.0)]))
    frames = [_frame(8, 101.1, 108.8).assign(fsdp_step_ms=91.52)]
    (row,) = choice_table.table_rows(state, frames, 80.0, errors=missed)
    # named as a user picks among equals, the least machinery first (a user read 'fsdp or stock or zero' as fsdp
    # winning, where its lead was the model's to tell), the step no order: the tie's span
    assert row[1:5] == ("stock at 25 MiB or zero at 25 MiB or fsdp", "91.52–108.8", "", "")
    assert row[-1] == f"a tie: a lead under {0.71 / 0.57 - 1:.0%} is within how far the step models missed this " \
                      "run's own steps"  # fmt: skip


def test_a_pick_that_fits_only_tightly_is_named_after_a_roomier_one_it_ties_and_said(capsys):
    """A walkthrough's answer booked 'stock or zero' with no word that stock left 1.75 GiB of 79.11, under the 8 % the
    count has read below a measured peak, while zero left 11 GiB: a tie names the roomier first, and a tight pick, in a
    tie or alone, is said with what it leaves and the batch at which it fits with room."""
    state = predictions.labelled(_state([("stock", 8, 64.0), ("zero", 8, 40.0), ("stock", 64, 64.0),
                                         ("zero", 64, 40.0)]).assign(batch_size=8))  # fmt: skip
    # stock: 74 GiB of 79.11, 5.11 left (under 8 % of 74); 10 GiB of activations over 8 samples: at 7, 72.75 GiB,
    # at most 79.11 / 1.08 = 73.25 GiB: room; zero: 50 GiB
    frames = [_frame(8, 100.0, 103.0), _frame(64, 100.0, 110.0)]  # a tie at w8; stock alone at w64
    w8, w64 = choice.choose(state, frames, 79.11)
    assert [c.strategy for c in w8.picked] == ["zero", "stock"] and w8.fastest.strategy == "stock"
    assert [(c.strategy, c.tight) for c in w64.picked] == [("stock", True)]
    rows = choice_table.table_rows(state, frames, 79.11)
    # the step's span and the lag: from the fastest; a tight fit not booked plainly (a user read "book: fsdp or stock
    # at 25 MiB" with stock's 1.75 GiB left for the CUDA context, NCCL's buffers and the loss's working memory)
    assert rows[0][1:5] == ("zero at 25 MiB or stock at 25 MiB (tight)", "100–103", "", "")
    assert rows[1][1:5] == ("stock at 25 MiB (tight)", "100", "zero at 25 MiB", "+10.0%")
    tight = ("stock fits tight (5.11 GiB left, batch 7 a rank fits with room; under 8% of the count, which has read "
             "up to 8% below a measured peak)")  # fmt: skip
    assert rows[0][-1] == f"a tie: a lead under 4% is more than the model can tell; {tight}" and rows[1][-1] == tight
    assert ("w8 zero 103 ms or stock 100 ms (fits tight: 5.11 GiB left: under 8% of the count, which has read up to "
            "8% below a measured peak) (too close to call") in choice_words(state, frames, 79.11)  # fmt: skip
    cluster = types.SimpleNamespace(name="dgx-h100", gpu_memory_gib=79.11)
    predictions.strategy_choice(state, cluster, frames=frames)
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].split()[-5:] == ["50", "/", "74", "[1]", "[2]"]  # the peaks a rank, the notes under the table
    assert lines[5] == ("  [2] stock fits tight (w8, w64: 5.11 GiB left, batch 7 a rank fits with room): under 8% of "
                        "the count, which has read up to 8% below a measured peak")  # fmt: skip
    from harness.commands.console.predict import memory as memory_table

    memory_table.model_state(
        state.assign(floor_mb=0.0, dtype="fp32", tokens_per_batch=0), [8, 64], cluster
    )  # and at what batch each has room
    said = capsys.readouterr().out.splitlines()
    # zero: (79.11 / 1.08 − 40) / 1.25 GiB a sample = 26.6, past twice the batch counted (8), as far as the count's
    # growth was checked: its slope's 26, said unchecked past 16 (once 'at least 16', where vit_b_16's hid some
    # 1,100); stock: (73.25 − 64) / 1.25 = 7.4
    assert said[0].endswith(", with room (8% of the count) up to a batch a rank of zero about 26 by its slope, "
                            "checked to 16, stock 7:"), said[0]  # fmt: skip  # once 'zero at least 16
    assert said[3].endswith("tight, 5.11 GiB")
    roomy = choice.choose(state, frames, 90.0)[0]  # 16 GiB left: no longer tight, the faster named first again
    assert [c.strategy for c in roomy.picked] == ["stock", "zero"] and not any(c.tight for c in roomy.picked)


def test_a_language_models_cost_is_counted_in_tokens(capsys):
    """A walkthrough's Llama booking asked tokens a second a GPU; the table gave GPU-hours a million samples. With
    the tokens a GPU steps on counted (32 samples of 1,024 tokens): 0.075 s × 10⁹ / 32,768 / 3,600 = 0.636 GPU-hours
    a billion tokens."""
    state = _state([("stock", 8, 90.0), ("zero", 8, 10.0)]).assign(tokens_per_batch=32 * 1024)
    frames = [_frame(8, 100.0, 75.0).assign(zero_optimizer_ms=7.5)]
    cluster = types.SimpleNamespace(name="dgx-h100", gpu_memory_gib=80.0)
    predictions.strategy_choice(state, cluster, frames=frames, batch=32)
    header, w8 = capsys.readouterr().out.splitlines()[1:3]
    assert "GPU-h per 1B tokens" in header and "1M samples" not in header
    assert w8.split()[:8] == ["8", "zero", "at", "25", "MiB", "75", "20", "0.636"]
    assert choice_table.tokens_a_step(state.assign(tokens_per_batch=float("nan"))) is None  # a vision model: samples


def test_a_strategy_that_failed_parity_in_the_run_is_left_out_of_the_choice_and_said_once(capsys):
    """A walkthrough booked 'stock at 25 MiB or fsdp or zero' with fsdp failed at both world sizes, a note below saying
    'no answer until the run page says why': one that does not train as one process would is no booking."""
    failed = STATE.assign(parity_failed_by=[float("nan"), 2.8e-3, float("nan")] * 2,
                          parity_failed_tolerance=[float("nan"), 6.1e-5, float("nan")] * 2, batch_size=8)  # fmt: skip
    w8, w64 = choice.choose(predictions.labelled(failed), FRAMES, 80.0)
    assert not w8.picked and [c.strategy for c in w8.others] == ["stock"]  # zero fitted; stock does not
    assert [c.strategy for c in w64.picked] == ["stock"] and not w64.others  # was a tie with zero
    words = "zero (largest difference 2.8e-03, tolerance 6.1e-05 there) left out: it failed parity in this run"
    assert choice_words(predictions.labelled(failed), FRAMES, 80.0).count(words) == 1  # the what-if page's
    cluster = types.SimpleNamespace(name="dgx-h100", gpu_memory_gib=80.0)
    predictions.strategy_choice(failed, cluster, frames=FRAMES)
    out = capsys.readouterr().out
    assert out.count(words) == 1 and " zero " not in out.replace(words, "")


def test_a_runs_failed_parity_reaches_the_model_state_and_a_run_without_tolerances_says_none():
    from test_state_per_rank import RUN

    from harness.perfmodel.memory import state_per_rank
    from harness.perfmodel.pick import parity

    assert parity.passed(state_per_rank(RUN, [8])).equals(state_per_rank(RUN, [8]))  # nothing judged, nothing failed
    fsdp = RUN["impl"] == "fsdp"
    broken = RUN.assign(parity_ok=fsdp.map({True: False, False: True}), parity_max_abs_diff=fsdp * 0.0037)
    state = predictions.labelled(state_per_rank(broken, [8]))
    assert set(state.loc[state["parity_failed_by"].notna(), "strategy"]) == {"fsdp"}
    assert "fsdp" not in set(parity.passed(state)["strategy"])
    assert parity.left_out_words(state).startswith("fsdp (largest difference 3.7e-03) left out: it failed parity")
    rows = pd.DataFrame({"parity_ok": [True, False, None], "parity_max_abs_diff": [0.0, 4e-3, None],
                         "parity_tolerance": [1e-5, 6e-5, None]})  # fmt: skip
    assert parity.failure(rows) == {parity.FAILED_BY: 4e-3, parity.TOLERANCE: 6e-5}


ABORTED = (
    "rank 1 killed by SIGABRT (exit code -6) before its first step completed: gloo::EnforceNotMet: Received "
    "data size doesn't match expected size. Is there a distributed collective mismatch in your code?"
)


def test_a_strategy_that_failed_in_the_run_is_no_booking_and_never_named_as_not_benched():
    """A walkthrough's fsdp died at 2 ranks on a mixture-of-experts model (its ranks routed tokens to different
    experts: gloo's collective mismatch), too few world sizes to fit its memory, yet predict's answer named it 'fsdp
    not benched … bench it (--impls fsdp)' beside the table: it was benched, and failed; said once with its words."""
    import json

    from test_state_per_rank import RUN

    from harness.perfmodel.memory import state_per_rank
    from harness.perfmodel.pick import failed

    assert json.loads(state_per_rank(RUN, [8])[failed.FAILED].iloc[0]) == []  # its other repeat at 2 ranks ran
    died = RUN[~((RUN["impl"] == "fsdp") & (RUN["status"] == "ok") & (RUN["world_size"] == 2))]
    state = state_per_rank(died.assign(error=ABORTED), [8])
    assert (
        "fsdp" not in set(state["impl"]) and failed.left_out_words(state) == f"fsdp failed at 2 ranks here: {ABORTED}"
    )
    listed = json.dumps([{"impl": "fsdp", "impl_options": "{}", "world_size": 2, "error": ABORTED}])
    unfit = predictions.labelled(_state([("stock", 8, 20.0), ("zero", 8, 90.0)]).assign(failed_here=listed))
    frames = [_frame(8, 100.0, 130.0).assign(fsdp_step_ms=90.0)]  # FSDP2's step the fastest
    (w8,) = choice.choose(unfit, frames, 80.0)
    assert [c.strategy for c in w8.picked] == ["stock"] and not w8.unbenched
    assert memory_words.unchosen_words(unfit, [w8], 80.0)[0] == f"fsdp failed at 2 ranks here: {ABORTED}"
    # measured at the world sizes its memory is fitted from, failed at a larger one: left out all the same
    later = listed.replace('"world_size": 2', '"world_size": 4')
    benched = predictions.labelled(_state([("stock", 8, 20.0), ("fsdp", 8, 10.0)]).assign(failed_here=later))
    (w8,) = choice.choose(benched, frames, 80.0)
    assert [c.strategy for c in w8.picked] == ["stock"] and not w8.others and not w8.unbenched
    assert failed.left_out_words(benched).startswith("fsdp failed at 4 ranks here: rank 1 killed by SIGABRT")
    # FSDP2's answer, a prediction beside DDP's, says it too; ZeRO-1's, whose strategies did not fail, says nothing
    from harness.analysis import roles

    assert failed.timed_by(benched, roles.shards_parameters) == (
        "fsdp failed at 4 ranks here, so it is no booking: a prediction only"
    )
    assert failed.timed_by(benched, roles.sharded_optimizer_over_allreduce) == "" == failed.timed_by(None, bool)


def test_tied_gpu_counts_say_their_published_caveats_together_once(capsys):
    """A walkthrough on dgx-a100 at 1, 2 and 4 nodes read the 2-node tables' misses twice in one bracket ('at 2 nodes
    …; at 2 nodes (the most checked, for 4 nodes) …'), each with its advice: where the GPU counts tie on one line,
    their caveats are said together, as the node counts' `joint` words."""
    tied = [pd.DataFrame({"bucket_cap_mb": [1.0, 25.0], "step_ms": [10.0, 10.0], "scaling_efficiency": [1.0, 1.0],
                          "world_size": [world] * 2, "nodes": [world // 8] * 2}) for world in (16, 32)]  # fmt: skip
    steps.best_caps(tied, decimals=1, caveats=["at 2 nodes …", "at 2 nodes (the most checked) …"],
                          joint=lambda nodes: f"joint words for nodes {nodes}")  # fmt: skip
    line = capsys.readouterr().out
    assert line.startswith("  predicted fastest cap at w16, w32: any") and line.count("\n") == 1
    assert line.rstrip().endswith("[joint words for nodes [2, 4]]") and "the most checked" not in line
    steps.best_caps(tied, decimals=1, caveats=["a", "b"])  # without joint words: each said, as before
    assert capsys.readouterr().out.rstrip().endswith("[a; b]")


def test_what_does_not_fit_in_fp32_activations_is_said_in_fp32():
    """A CPU run counts activations in fp32: a walkthrough's 7B model read 'zero does not fit' at 143 GiB a rank, and
    benched in bf16, as an H200 trains, zero fit at 134 GiB and was the pick at 8 GPUs. The table says the dtype."""
    rows = [("stock", 8, 90.0), ("zero", 8, 75.0), ("fsdp", 8, 20.0)]  # with 10 GiB of activations: 100, 85, 30
    frames = [_frame(8, 100.0, 104.0).assign(fsdp_step_ms=90.0)]
    fp32 = predictions.labelled(_state(rows).assign(dtype="fp32", batch_size=1))
    (row,) = choice_table.table_rows(fp32, frames, 80.0)
    assert row[1] == "fsdp" and row[-1] == (
        "stock, zero do not fit in fp32 (the run's dtype, its activations counted so; bf16's differ: bench --dtype "
        "bf16 to count them)"
    )
    # on a GPU without bf16 (dgx1-v100 read "bf16's differ: bench --dtype bf16"): the half precision it trains in,
    # fp16, which bench autocasts in with a grad scaler, on the CPU too
    v100 = predictions.labelled(_state(rows).assign(dtype="fp32", batch_size=1, gpu_half_dtype="fp16"))
    assert choice_table.table_rows(v100, frames, 80.0)[0][-1] == (
        "stock, zero do not fit in fp32 (the run's dtype, its activations counted so; fp16's differ: bench --dtype "
        "fp16 to count them)"
    )
    bf16 = predictions.labelled(_state(rows).assign(dtype="bf16", batch_size=1))
    assert choice_table.table_rows(bf16, frames, 80.0)[0][-1] == "stock, zero do not fit"
    # an fp32 run's activations counted again in bf16 for a GPU that trains so (predict's trained_dtype): the dtype
    # the fit was judged in is said, with no advice to count bf16's
    judged = predictions.labelled(_state(rows).assign(dtype="fp32", activation_dtype="bf16", batch_size=1))
    assert choice_table.table_rows(judged, frames, 80.0)[0][-1] == "stock, zero do not fit (activations in bf16)"


def test_what_does_not_fit_is_said_as_the_sum_it_is_and_where_the_bucket_copy_overflows_so():
    """A recommender's 23.8 GiB embedding at 16 GPUs read 'fsdp, stock, zero do not fit in bf16', nothing of why (and
    'in bf16' of fp32 state): FSDP2 holds 95.4 GiB unsharded, ZeRO-1 47.7 GiB of Adam state whole on one rank (one
    parameter it cannot split), stock its Adam state too. Each is named by the largest thing its rank holds; only the
    activations are said to be in bf16."""
    table = 23.8 * GIB
    kinds = {"held_param_mb": [table / 16, table, table], "held_grad_mb": [table / 16, table, table],
             "held_optimizer_state_mb": [table / 8, 2 * table, 2 * table], "floor_mb": [0.0, 2 * table, 0.0],
             "unsharded_mb": [4 * table, 0.0, 0.0], "buckets_mb": [0.0, table, table]}  # fmt: skip
    state = _state([("fsdp", 16, 101.0), ("zero", 16, 143.0), ("stock", 16, 143.0)]).assign(
        dtype="fp32", activation_dtype="bf16", batch_size=256, **kinds
    )
    frames = [_frame(16, 5.0, 5.5).assign(fsdp_step_ms=5.4)]
    (row,) = choice_table.table_rows(predictions.labelled(state), frames, 79.11)
    assert row[1] == "none modelled fits" and row[-1] == (
        "fsdp, stock, zero do not fit (over 79.11 GiB: fsdp 206 GiB = 101 GiB of model state + 10 GiB of activations "
        "+ 95.2 GiB held unsharded, stock and zero 177 GiB = 143 GiB of model state + 10 GiB of activations + 23.8 GiB "
        "of gradient buckets; activations in bf16)"
    )
    # DDP's bucket copy is what overflows: said, with what gradient_as_bucket_view needs, which fits (a 1.3B Llama's),
    # the flag spelt as a label beside it spells the option (once '=true' beside 'stock gradient_as_bucket_view=False')
    held = {"held_param_mb": 5 * GIB, "held_grad_mb": 5 * GIB, "held_optimizer_state_mb": 10 * GIB}
    state = _state([("stock", 8, 20.0)]).assign(activation_mb=14.9 * GIB, buckets_mb=5.01 * GIB, batch_size=2, **held)
    (row,) = choice_table.table_rows(predictions.labelled(state), [_frame(8, 100.0, 104.0)], 39.39)
    assert row[-1].endswith(
        "; stock does not fit (over 39.39 GiB: stock 39.9 GiB = 20 GiB of model state + 14.9 GiB of activations + "
        "5.01 GiB of gradient buckets; with --opt gradient_as_bucket_view=True 34.9 GiB, which fits, at DDP's step)"
    )


def test_a_tie_at_one_cap_says_the_cap_once_in_the_consoles_book_cell():
    """'stock at 25 MiB or zero at 25 MiB' took 33 of a 161-character row of a 1.3B Llama's answer: the cap once."""
    assert answer.book_cell("stock at 25 MiB or zero at 25 MiB") == "stock or zero at 25 MiB"
    assert (
        answer.book_cell("stock comm_hook=fp16 at 25 MiB or stock at 25 MiB")
        == "stock comm_hook=fp16 or stock at 25 MiB"
    )
    for apart in ("stock at 25 MiB or zero at 100 MiB", "stock or zero", "fsdp", "zero at 25 MiB"):
        assert answer.book_cell(apart) == apart  # caps apart, none, or one pick: as the page says it


def test_the_cap_caveats_advice_only_where_a_miss_on_every_all_reduce_could_move_the_cap_named():
    """A walkthrough's A100 line (every cap within 0.5 %, 0.3 ms of all-reduces exposed in a 180 ms step) ended 'fit
    your cluster's nccl-tests log (--nccl-tests) before choosing by this margin': no 25 % miss on every all-reduce
    could move 25 MiB out of the tie there. At a 3× shorter step the same all-reduces could, and it is said."""
    frame = pd.DataFrame({"bucket_cap_mb": [1.0, 5.0, 25.0], "world_size": 16, "nodes": 2,
                          "step_ms": [180.0, 180.0, 180.2], "comm_ms": [1.0, 0.5, 0.32],
                          "full_size_step_floor_ms": [180.0, 180.0, 180.3],
                          "full_size_comm_ms": [1.12, 0.54, 0.39]})  # fmt: skip
    assert not ranked.miss_could_move_cap([frame])
    short = frame.assign(step_ms=[56.76, 56.77, 56.92], full_size_step_floor_ms=[56.76, 56.84, 56.95])
    assert ranked.miss_could_move_cap([frame, short])
    assert ranked.miss_could_move_cap([frame], miss=1.1)  # a miss as large as the worst table's: it could


def test_a_gpu_runs_own_cost_not_told_from_noise_is_the_runs_at_the_long_end_not_a_cpus():
    """A run on a GPU whose FSDP steps at one rank did not tell its own cost from noise bounds FSDP2's step from 0 to
    that figure, the run's: the choice called its long end 'a CPU's' ('from none of its own cost to a CPU's', 'with
    a CPU's'), false there. A CPU run's stays a CPU's."""
    from harness.commands.console.predict import bookings as console_bookings
    from harness.perfmodel.clusters.bookings import of_cluster

    frame = _frame(64, 100.0, 103.0).assign(fsdp_step_ms=90.0, fsdp_own_left_out_ms=20.0, own_cost_whose="the run's")
    words = choice_words(predictions.labelled(STATE), [frame], 80.0)
    assert (
        "fsdp 90–110 ms (from none of its own cost, not told from noise, to the run's, scaled)" in words
        and "a CPU's" not in words
    )
    assert "fsdp without it, stock or zero with the run's, scaled" in words
    (row,) = choice_table.table_rows(predictions.labelled(STATE), [frame], 80.0)
    assert "a CPU's" not in " ".join(row) and "the run's" in " ".join(row)
    (made,) = choice.choose(predictions.labelled(STATE), [frame], 80.0)
    rows = frame.assign(nodes=8)
    (booked,) = of_cluster("dgx-h100", 8, [rows], [{64: made}], batch=128)
    ranged = console_bookings._ranged_words([booked], None)
    assert ranged.endswith("from none of FSDP's own cost to the run's, scaled") and booked.whose == "the run's"
    cpu = choice_words(predictions.labelled(STATE), [frame.drop(columns="own_cost_whose")], 80.0)
    assert "(from none of its own cost, unmeasured on a GPU, to a CPU's, scaled)" in cpu


def test_a_column_blank_on_every_row_is_left_out_of_the_answer_table():
    """A walkthrough's tables had 'next that fits', 'behind' and 'the pick rests on' blank down every row."""
    header = ("GPUs", "book", "step ms", "next that fits", "behind", "GPU-h per 1M samples", "the pick rests on")
    rows = [("8", "stock at 25 MiB", "61.31", "", "", "2.13", ""), ("16", "stock at 25 MiB", "61.59", "", "", "", "")]
    kept, shown = choice_table.without_blank_columns(header, rows)
    assert kept == ("GPUs", "book", "step ms", "GPU-h per 1M samples")
    assert shown == [("8", "stock at 25 MiB", "61.31", "2.13"), ("16", "stock at 25 MiB", "61.59", "")]


def test_a_table_too_wide_for_the_peak_column_says_each_picks_peak_under_it(capsys, monkeypatch):
    """A resnet152 booking's table (a tie of stock and fsdp, its GPU-hours and three notes) was 127 characters with
    the peak column, past the console's width: its rows lose the column, and the line under them says each pick's
    peak a rank at each GPU count, the figures the column held (state + 10 GiB of activations)."""
    from harness.commands.console.predict import answer

    monkeypatch.setattr(answer, "WIDTH", 50)
    cluster = types.SimpleNamespace(name="dgx-h100", gpu_memory_gib=80.0)
    predictions.strategy_choice(STATE, cluster, frames=FRAMES)
    lines = capsys.readouterr().out.splitlines()
    assert "peak" not in lines[1] and lines[2].split()[:6] == ["8", "zero", "at", "25", "MiB", "104"]
    assert lines[4] == "  peak GiB a rank (of 80): w8 zero 70; w64 stock 70, zero 50"

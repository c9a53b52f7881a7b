"""The figures a pick's ranges are said in (harness.perfmodel.pick.bounds, choice_table's cells): each reads what the
judgement over the corners says."""

from __future__ import annotations

import dataclasses

from harness.commands.console import predictions
from harness.perfmodel.pick import bounds, choice, choice_table
from harness.perfmodel.pick.words import choice_words
from tests.perfmodel.test_choice import _frame, _state


def test_a_lead_that_rounds_to_zero_reads_zero_without_a_minus():
    """A lead of 0.01 % at one end read '-0.0% to +30.0%': a zero has no sign to give."""
    assert bounds.behind_text(-0.0001, 0.30) == "0.0–30.0%"
    assert choice_table.behind_cell(-0.0001, 0.30) == "+0.0–30.0%"
    assert bounds.behind_text(-0.0001, 0.0002) == "0.0%"
    assert bounds.behind_text(-0.012, 0.40) == "-1.2% to +40.0%"  # a lead that shows stays a lead


def test_a_lead_inside_the_tie_band_never_reads_as_the_band_itself():
    """A run's table read 'next that fits: zero +4.0–109.6%' with no tie, where zero was 3.96 % behind at one end:
    inside the 4 % band (agreement.SMALL_CAP_LEAD), tied there; the figure keeps the digits that say so."""
    assert choice_table.behind_cell(0.03957, 1.096) == "+3.96–109.6%"
    assert bounds.behind_text(0.03957, 0.03957) == "3.96%"
    assert bounds.behind_text(0.0401, 0.5) == "4.0–50.0%"  # outside the band, and reads so at 0.1 %
    assert bounds.behind_text(0.0399, 0.5) == "3.99–50.0%"
    assert bounds.behind_text(0.03999, 0.5) == "3.999–50.0%"
    assert bounds.behind_text(0.01, 0.5, band=0.1) == "1.0–50.0%"
    assert bounds.behind_text(0.0997, 0.5, band=0.1) == "9.97–50.0%"  # a wider band (the models' errors): its edge


def _run_like() -> choice.Choice:
    """A run's w8 on dgx-h100: stock ≥94.77 ms booked; FSDP2 from 94.95 ms (none of its own cost) to 222 ms (a
    CPU's, scaled), ZeRO-1 from 98.52 to 198.5 ms: decided for stock only at every corner."""
    stock = choice.Candidate("stock", 1e3, True, 94.77, model="DDP")
    fsdp = choice.Candidate("fsdp", 1e3, True, 94.95, 127.0, model="FSDP2")
    zero = choice.Candidate("zero", 1e3, True, 98.52, 100.0, model="ZeRO-1")
    return choice.Choice(8, [stock], [zero, fsdp])


def test_the_next_that_fits_is_judged_over_the_corners_as_the_pick_is():
    """The table named zero next, the fastest with every own cost in, never FSDP, which is 0.19 % behind without it,
    while the bookings tied it from that end: the next is the fastest of the rest at each corner, each named."""
    made = _run_like()
    named, (low, high) = choice_table.next_fits(made)
    assert [c.strategy for c in named] == ["fsdp", "zero"]
    assert (round(low, 4), round(high, 4)) == (round(94.95 / 94.77 - 1, 4), round(198.52 / 94.77 - 1, 4))
    cells, notes = choice_table._cells(made, None, optimizer_ms=0.0, step_ms=0.0)
    assert cells[3:5] == ("fsdp or zero", "+0.2–109.5%")
    assert [n.said for n in notes] == [f"{s}'s step {bounds.OWN_RANGE}" for s in ("fsdp", "zero")]
    close = dataclasses.replace(
        made,
        picked=[dataclasses.replace(made.picked[0], step_ms=95.11)],  # the run's w8
        others=[dataclasses.replace(made.others[0], left_out_ms=0.0), made.others[1]],
    )
    cells, notes = choice_table._cells(close, None, optimizer_ms=0.0, step_ms=0.0)  # fsdp ahead without its own cost
    assert (
        cells[4] == "level to +3.6%"
        and notes[0].figure == "level without FSDP's own cost, 3.6% behind with it at a CPU's"
    )
    # it read '-0.2% to +3.9%' and '[1] fsdp from none of its own cost to a CPU's', no end said; then 'behind -0.2%'
    assert notes[0].rest == "open until FSDP's own cost is measured on a GPU (bench --gpus 1 --impls local,fsdp there)"
    assert "behind -" not in notes[0].figure  # ahead by less than the pick's tie: level, not behind by a negative
    alone = dataclasses.replace(made, others=[made.others[0]])  # one of the rest: named at every corner
    assert [c.strategy for c in choice_table.next_fits(alone)[0]] == ["zero"]


def test_faster_and_slower_are_true_at_every_corner_else_said_at_one_end():
    """'-3.0% to +47.0% slower' of a step ahead at one end, and 'predicted faster' of a never-benched one above the
    pick's step without its own cost: each word now holds at every corner, or says it holds at one end."""
    assert bounds.lead_words(0.001, 1.051) == "0.1–105.1% slower"
    assert bounds.lead_words(-0.03, 0.47) == "3.0% faster to 47.0% slower"
    assert bounds.lead_words(-0.05, -0.02) == "2.0–5.0% faster"
    assert bounds.lead_words(-0.0001, 0.3) == "0.0–30.0% slower"
    state = predictions.labelled(_state([("stock", 8, 20.0), ("fsdp", 8, 10.0)]))
    frames = [_frame(8, 100.0, 200.0).assign(fsdp_step_ms=97.0, fsdp_own_left_out_ms=40.0)]
    (made,) = choice.choose(state, frames, 80.0)  # fsdp ties stock without its own cost, trails it with: stock
    assert [c.strategy for c in made.picked] == ["stock"]
    assert (
        "fsdp 97–137 ms (from none of its own cost, unmeasured on a GPU, to a CPU's, scaled), "
        "3.0% faster without FSDP's own cost, 37.0% "
        "slower with it at a CPU's" in choice_words(state, frames, 80.0)
    )  # which end each holds at, said
    assert bounds.lead_words(-0.03, 0.47, ({"FSDP2": 0, "ZeRO-1": -1}, {"FSDP2": -1, "ZeRO-1": 0})) == (
        "3.0% faster without FSDP's own cost, with ZeRO's at a CPU's, 47.0% slower without ZeRO's own cost, with "
        "FSDP's at a CPU's")  # fmt: skip
    alone = predictions.labelled(_state([("stock", 8, 90.0), ("fsdp", 8, 10.0)]))  # stock does not fit: fsdp
    between = [_frame(8, 100.0, 100.0).assign(fsdp_step_ms=80.0, fsdp_own_left_out_ms=40.0)]  # zero never benched
    (made,) = choice.choose(alone, between, 80.0)
    assert [c.strategy for c in made.unbenched] == ["zero"] and not made.faster_at_every_corner(made.unbenched[0])
    assert (
        "zero predicted faster with FSDP's own cost at a CPU's (100 ms) but not benched"
        in choice_table.table_rows(alone, between, 80.0)[0][-1]
    )
    ahead = [between[0].assign(zero_step_ms=70.0)]  # below fsdp's fastest possible step: faster at every corner
    assert "zero predicted faster (70 ms) but not benched" in choice_table.table_rows(alone, ahead, 80.0)[0][-1]
    behind = [between[0].assign(zero_step_ms=125.0)]  # slower than fsdp at every corner: not named
    assert not choice.choose(alone, behind, 80.0)[0].unbenched


def test_the_console_says_which_end_the_next_leads_at_and_names_every_gpu_count_under_the_note(capsys, monkeypatch):
    """fsdp 1 % ahead of stock without its own cost and 39 % behind with a CPU's at w8, behind at both ends at w16: the
    note under the table said '(w8, w16)' of both and no end; now w8's ends and the bench that tells them apart, and
    w16 still named beside it (a note with a figure at one GPU count only dropped the others)."""
    import types

    from harness.commands.console.predict import answer

    state = _state([("stock", 8, 20.0), ("fsdp", 8, 10.0), ("stock", 16, 20.0), ("fsdp", 16, 10.0)])
    frames = [_frame(8, 100.0, 200.0).assign(fsdp_step_ms=99.0, fsdp_own_left_out_ms=40.0),
              _frame(16, 100.0, 200.0).assign(fsdp_step_ms=101.0, fsdp_own_left_out_ms=40.0)]  # fmt: skip
    cluster = types.SimpleNamespace(name="dgx-h100", gpu_memory_gib=80.0)
    predictions.strategy_choice(state, cluster, frames=frames)
    said = capsys.readouterr().out
    assert "level to +39.0%" in said and "+1.0–41.0%" in said  # not '-1.0% to +39.0%' beside a single pick
    ends = "w8 level without FSDP's own cost, 39.0% behind with it at a CPU's"
    waits = "open until FSDP's own cost is measured on a GPU (bench --gpus 1 --impls local,fsdp there)"
    assert (
        f"  [1] fsdp's step from none of its own cost, unmeasured on a GPU, to a CPU's, scaled ({ends}): {waits}"
        in said
    )  # w16's said in its row
    monkeypatch.setattr(answer, "WIDTH", 40)  # marks alone: every note's words under the table
    predictions.strategy_choice(state, cluster, frames=frames)
    printed = capsys.readouterr().out
    assert (
        f"  [1] fsdp's step from none of its own cost, unmeasured on a GPU, to a CPU's, scaled ({ends}): {waits}"
        in printed
    )
    assert "  [2] fsdp's step from none of its own cost, unmeasured on a GPU, to a CPU's, scaled (w16)" in printed


def test_a_flip_is_said_over_the_own_costs_of_the_two_strategies_compared_and_its_bench_once():
    """A vit table read 'behind -0.4% to +4.5%' beside stock, noted 'w32 level without FSDP's and ZeRO's own cost, 4.5%
    behind without ZeRO's own cost, with FSDP's at a CPU's: bench --gpus 1 --impls local,fsdp,stock,zero on a GPU
    tells which; w64 …' of stock against FSDP: ZeRO's own cost named where zero was not compared, the bench once a
    GPU count, and never whether it was decided. Now 'level to +4.5%', FSDP's ends alone, open until it is measured."""
    stock = choice.Candidate("stock", 1e3, True, 300.2, model="DDP")
    fsdp = choice.Candidate("fsdp", 1e3, True, 299.1, 14.8, model="FSDP2")
    zero = choice.Candidate("zero", 1e3, True, 314.1, 0.2, model="ZeRO-1")
    made = choice.Choice(32, [stock], [fsdp, zero])
    cells, notes = choice_table._cells(made, None, optimizer_ms=0.0, step_ms=0.0)
    assert cells[3:5] == ("fsdp", "level to +4.6%")
    assert notes[0].said == (
        "fsdp's step from none of its own cost, unmeasured on a GPU, to a CPU's, scaled; "
        "level without FSDP's own cost, 4.6% behind with it at a CPU's: "
        "open until FSDP's own cost is measured on a GPU (bench --gpus 1 --impls local,fsdp there)"
    )  # fmt: skip
    assert "ZeRO" not in notes[0].said + notes[0].figure


def test_the_lag_behind_a_tie_is_read_against_the_step_its_cell_shows():
    """A run's w8: stock ≥181.1 tied with FSDP2 from 177.2 ms (none of its own cost) to 179.6 (a CPU's), the cell
    '177.2–181.1', zero next at 192.9: 'behind +7.4–8.8%' was against the fastest pick at each corner (179.6 at the
    long one), a step no cell shows; against the cell's ends it is +6.5 % (on 181.1) to +8.9 % (on 177.2)."""
    stock = choice.Candidate("stock", 1e3, True, 181.1, model="DDP")
    fsdp = choice.Candidate("fsdp", 1e3, True, 177.2, 2.4, model="FSDP2")
    zero = choice.Candidate("zero", 1e3, True, 192.9, model="ZeRO-1")
    tie = choice.Choice(8, [stock, fsdp], [zero])
    cells, _ = choice_table._cells(tie, None, optimizer_ms=0.0, step_ms=0.0)
    assert cells[2] == "177.2–181.1"
    _, (low, high) = choice_table.next_fits(tie)
    assert (round(low, 4), round(high, 4)) == (round(192.9 / 181.1 - 1, 4), round(192.9 / 177.2 - 1, 4))
    assert cells[3:5] == ("zero", "+6.5–8.9%")

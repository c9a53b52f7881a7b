"""The figures a pick's ranges are said in (harness.perfmodel.pick.bounds, choice_table's cells): each reads what the
judgement over the corners says."""

from __future__ import annotations

from harness.perfmodel.pick import bounds, choice_table


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

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

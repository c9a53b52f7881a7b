"""`ddpbench compare` where one run holds DDP as shipped and the other only its 25 MiB stand-in: paired as the run
page pairs them (roles.reference_rank), said so in the row, and what NEW ran of a strategy named where it has none
of a configuration. Built from the fixtures: cpu_run holds plain stock, bucket_sweep stock at caps 1, 5, 25."""

from __future__ import annotations

import html
import shutil
from pathlib import Path

import pandas as pd
import pytest

from harness import cli
from harness.analysis import roles
from harness.analysis.verdicts import compare
from harness.results import values

DATA = Path(__file__).resolve().parents[1] / "data"
PAIRED = "stock (as shipped) -> stock bucket_cap_mb=25, its stand-in"


@pytest.fixture
def results(tmp_path) -> Path:
    """Copies of the two fixtures: compare keeps its comparison beside BASE, never in tests/data."""
    for name in ("cpu_run", "bucket_sweep"):
        shutil.copytree(DATA / name, tmp_path / "results" / name)
    return tmp_path / "results"


def test_plain_stock_in_base_is_judged_against_news_25_mib_stand_in_and_said_so(results, capsys):
    frame, _, not_compared = compare.compare(results / "cpu_run", results / "bucket_sweep", threshold=0.05)
    stock = frame[frame["impl"] == "stock"]
    assert sorted(stock["world_size"]) == [1, 2] and list(stock["paired"]) == [PAIRED, PAIRED]
    assert not_compared == []
    failed, missing = compare.without_counterpart(results / "cpu_run", results / "bucket_sweep")
    assert failed == [] and not any("stock" in line for line in missing)  # only naive, which NEW never ran
    code = cli.main(["compare", "cpu_run", "bucket_sweep", "--results", str(results), "--out", str(results.parent)])
    out = capsys.readouterr()
    assert code == 3  # one repeat a side: too few repeats to tell, and naive is missing in NEW
    assert f"w1 mlp/tiny {PAIRED}: " in out.out and "stock: not compared" not in out.err
    page = (results.parent / "compare" / "cpu_run_vs_bucket_sweep.html").read_text()
    assert f"w2 mlp/tiny {html.escape(PAIRED)}" in page  # named as the console names it (the line above)


def test_the_stand_in_in_base_is_judged_against_plain_stock_in_new_and_the_other_caps_name_news(results, capsys):
    frame, _, _ = compare.compare(results / "bucket_sweep", results / "cpu_run", threshold=0.05)
    reverse = "stock bucket_cap_mb=25, its stand-in -> stock (as shipped)"
    assert list(frame.loc[frame["impl"] == "stock", "paired"]) == [reverse, reverse]
    _, missing = compare.without_counterpart(results / "bucket_sweep", results / "cpu_run")
    assert "w1 mlp/tiny stock bucket_cap_mb=5: not compared, no ok result in NEW (NEW has stock only at its " \
           "defaults; with 3 settings of it in BASE, this one is paired with none)" in missing  # fmt: skip
    assert not any("bucket_cap_mb=25" in line for line in missing)


def test_a_stand_in_matched_exactly_is_not_judged_again_for_the_reference_as_shipped():
    """BASE stock and stock at 25 MiB, NEW stock at 25 MiB: 25 against 25; plain stock has nothing of its own."""
    plain, capped = ("stock", "{}"), ("stock", '{"bucket_cap_mb": 25.0}')
    assert roles.reference_partner(plain, [plain], [capped, ("stock", '{"bucket_cap_mb": 5.0}')]) == capped
    assert roles.reference_partner(plain, [plain, capped], [capped]) is None
    assert roles.reference_partner(capped, [capped, plain], [plain]) is None  # BASE holds DDP as shipped itself
    assert roles.reference_partner(("bucketed", "{}"), [("bucketed", "{}")], [capped]) is None  # not the reference


def test_the_options_new_ran_a_strategy_at_are_named_instead_of_a_bare_not_in_new():
    names = ["impl", "impl_options", "workload", "world_size"]
    caps = [("stock", f'{{"bucket_cap_mb": {cap}}}', "mlp", 1) for cap in (25.0, 1.0, 5.0)]
    said = compare._nearest_in_new(("stock", '{"bucket_cap_mb": 100.0}', "mlp", 1), caps, names)
    assert said == "NEW has stock only at bucket_cap_mb=1, 5, 25"
    assert compare._nearest_in_new(("stock", "{}", "mlp", 2), caps, names) == "not in NEW"  # another world size
    assert values.settings_words(['{"static_graph": true}', "{}"]) == "its defaults; static_graph=True"


def test_the_first_buckets_that_tell_the_stand_in_apart_are_said_not_counted_as_a_different_measurement(results):
    """Since torch 2.9 an explicit 25 MiB cap caps the first bucket too (1 MiB as shipped): by design, not a setting."""
    for run, first in (("cpu_run", 1.0), ("bucket_sweep", 25.0)):
        for part in (results / run / "configs").glob("*stock*.parquet"):
            pd.read_parquet(part).assign(first_bucket_cap_mb=first).to_parquet(part)
    frame, _, not_compared = compare.compare(results / "cpu_run", results / "bucket_sweep", threshold=0.05)
    assert not_compared == []
    assert set(frame.loc[frame["impl"] == "stock", "paired"]) == {f"{PAIRED} (first bucket 1 vs 25 MiB)"}


def test_stock_asking_its_defaults_by_name_is_matched_with_plain_stock(results, capsys):
    """A sweep of gradient_as_bucket_view records `false`, the default, by name: the same DDP as a plain row."""
    new = results / "cpu_run_spelled"
    shutil.copytree(results / "cpu_run", new)
    for part in (new / "configs").glob("*stock*.parquet"):
        pd.read_parquet(part).assign(impl_options='{"gradient_as_bucket_view": false}').to_parquet(part)
    frame, _, not_compared = compare.compare(results / "cpu_run", new, threshold=0.05)
    assert sorted(frame.loc[frame["impl"] == "stock", "world_size"]) == [1, 2] and not_compared == []
    failed, missing = compare.without_counterpart(new, results / "cpu_run")
    assert failed == [] and missing == []
    assert roles.acting_options("stock", '{"gradient_as_bucket_view": false}') == "{}"
    assert roles.acting_options("stock", '{"bucket_cap_mb": 25.0}') == '{"bucket_cap_mb": 25.0}'  # the stand-in stays
    assert roles.acting_options("stock", None) is None  # nothing dropped: as read

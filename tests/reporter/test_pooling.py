"""A run with --repeats reads as one verdict per strategy: the answer table, its headline, the index and
every takeaway pool the repeats the same way, and name a winner only with the repeats' evidence."""

from __future__ import annotations

import html
import json
import re

import numpy as np
import pandas as pd
import pytest

from harness.analysis import scaling, stats
from harness.analysis.verdicts import decide, sweep
from harness.results.values import ratio_number
from reports.aggregate import with_labels
from reports.pages import answer, compare, evidence, headline, pooled
from reports.pages import index as pages
from reports.pages.notes import winner
from reports.pages.run import takeaways


def repeats(impl: str, medians: list[float], *, world: int = 2, options: dict | None = None, **extra) -> list[dict]:
    """One config row per repeat of one strategy."""
    options = options or {}
    cap = options.get("bucket_cap_mb", 25.0 if impl in ("stock", "zero") else None)
    rows = []
    for r, ms in enumerate(medians):
        row = {"config_id": f"{impl}-{json.dumps(options)}-w{world}-r{r}", "status": "ok", "impl": impl,
               "impl_options": json.dumps(options), "workload": "mlp", "size": "tiny", "world_size": world,
               "repeat": r, "step_ms_median": ms, "step_ms_cv": 0.02, "parity_ok": True, "bucket_cap_mb": cap,
               "first_bucket_cap_mb": 1.0 if impl == "stock" and not options else cap}  # fmt: skip
        rows.append({**row, **{k: (v[r] if isinstance(v, list) else v) for k, v in extra.items()}})
    return rows


def in_full(group: pd.DataFrame) -> str:
    """The lead in full, as section 1's sentence says it (winner.lead): the ratio to the next, its interval and what
    a verdict is about, which the run page's headline leaves to it (it says the answer alone)."""
    name, words = winner.lead(group)
    return name + words


def run(*strategies: list[dict]) -> pd.DataFrame:
    return with_labels(pd.DataFrame([row for rows in strategies for row in rows]))


# The reviewer's page: one repeat of zero cap 1 is the fastest single measurement (60 ms), but its
# repeats disagree; zero cap 25 is the fastest strategy once repeats are pooled.
SPLIT = run(
    repeats("local", [30.0, 31.0]),
    repeats("stock", [100.0, 102.0], scaling_efficiency=[0.30, 0.40], mem_peak_rss_mb=[900.0, 950.0]),
    repeats("zero", [60.0, 140.0], options={"bucket_cap_mb": 1.0}, scaling_efficiency=[0.79, 0.48]),
    repeats("zero", [80.0, 82.0], options={"bucket_cap_mb": 25.0}, scaling_efficiency=[0.50, 0.52]),
    repeats("naive", [160.0, 165.0], scaling_efficiency=[0.20, 0.21]),
)


def test_the_headline_and_the_takeaway_name_the_same_pooled_winner_and_no_repeat():
    group = pooled.ranked(SPLIT, workload="mlp")
    headline = winner.headline(group)
    said = takeaways.fastest(SPLIT, workload="mlp")
    assert headline.startswith("At 2 ranks: <b>zero bucket_cap_mb=25</b> leads")
    assert said.startswith("At 2 ranks zero bucket_cap_mb=25 leads")
    assert "#" not in said and "#" not in html.unescape(headline)  # never a repeat's label
    assert said.endswith("naive is slowest, at 2.01× the step of zero bucket_cap_mb=25.")  # 162.5 / 81


def test_a_winner_backed_by_its_repeats_is_fastest_with_the_interval():
    group = pooled.ranked(SPLIT, workload="mlp")
    # next is zero cap 1 (geometric mean 91.7 ms), whose repeats disagree too much to tell it from 81 ms; the
    # ratio is of geometric means (91.7 / 81.0 ms), the estimate ranks and intervals are built around
    judged = stats.ratio_interval([80.0, 82.0], [60.0, 140.0])
    # two caps of one sweep: the repeats it needs are the sweep's (launch by launch from 8), as its cap table says
    assert sweep.recommend_cap({25.0: [80.0, 82.0], 1.0: [60.0, 140.0]}, aligned=True)["repeats_needed"] == 416
    assert judged["low"] < 1 < judged["high"] and f"{judged['ratio']:.2f}" == "1.13"
    assert in_full(group) == (
        "zero bucket_cap_mb=25 leads (80.99 ms); too few repeats to tell it from "
        f"zero bucket_cap_mb=1, the next: so far {1 / judged['ratio']:.2f}× the step of zero bucket_cap_mb=1 "
        f"({judged['ratio']:.2f}× faster; 95% interval {sweep.TOO_WIDE}; have 2 repeats, need about 416, a rough guide "
        "from 2 repeats), and faster than stock: "
        "0.80× stock's step (1.25× faster; "
        f"{evidence.interval_text(evidence.inverted(evidence.evidence(group.iloc[0], group.iloc[2])))})"
    )
    # the page's headline: the answer in one sentence, the step against stock, and why it is not decided
    assert winner.headline(group) == (
        "At 2 ranks: <b>zero bucket_cap_mb=25</b> leads: 80.99 ms a step, 1.25× faster than stock; not decided: "
        "too few repeats to tell it from the next, zero bucket_cap_mb=1 (have 2, need about 416, a rough guide "
        "from 2 repeats); parity ok."
    )
    against_stock = stats.ratio_interval([80.0, 82.0], [100.0, 102.0])
    assert against_stock["low"] > 1  # stock's interval excludes 1: a plain "faster than stock"
    clean = run(repeats("stock", [100.0, 102.0]), repeats("zero", [80.0, 82.0]))
    line = in_full(pooled.ranked(clean, workload="mlp"))
    # The leader's step over the next's, the interval of that same ratio: its ends are stock's over zero's, swapped.
    assert line == (f"zero is fastest (80.99 ms): 0.80× the step of the next, stock (1.25× faster; 95% "
                    f"interval {1 / against_stock['high']:.2f}–{1 / against_stock['low']:.2f})")  # fmt: skip
    assert "not significant" not in line and "leads" not in line
    assert winner.headline(pooled.ranked(clean, workload="mlp")) == (
        "At 2 ranks: <b>zero</b> is fastest: 80.99 ms a step, 1.25× faster than stock; decided over 2 repeats; "
        "parity ok."
    )


def test_the_reviewers_case_says_not_significantly_and_an_interval_with_a_tiny_end_too_wide():
    noisy = run(repeats("stock", [1.0, 1.18]), repeats("zero", [0.30, 1.04], options={"bucket_cap_mb": 25.0}))
    group = pooled.ranked(noisy, workload="mlp")
    line = in_full(group)
    judged = stats.ratio_interval([0.30, 1.04], [1.0, 1.18])
    assert judged["low"] < 0.01  # the interval the old page printed as "(0.00–…)"
    assert f"{judged['ratio']:.2f}" == "1.94"  # of geometric means (1.086 / 0.559 ms), the interval's centre
    assert line.startswith(
        "zero bucket_cap_mb=25 leads (0.56 ms); too few repeats to tell it from stock, the "
        f"next: so far 0.51× stock's step (1.94× faster; 95% interval {sweep.TOO_WIDE}; have 2 repeats"
    )  # not '<0.01–…' beside a step's 'too wide to bound it': one wording for an interval that bounds nothing
    assert "0.00" not in line
    table = answer.world_table(group, pd.DataFrame(), workload="mlp")
    assert f"too few repeats to tell (estimate 0.51×, 1.94× faster, interval {sweep.TOO_WIDE})" in table
    assert pages.run_headline(noisy).endswith("0.56 ms (leads; too few repeats)")


def test_a_table_with_a_given_interval_beside_too_wide_ones_says_the_one_rule():
    """A newcomer's table read 'interval 0.18–4.63' for local beside 'too wide to bound it' for every strategy: one rule
    (an end past 1/10 or 10), which read as two until the page said it."""
    mixed = run(repeats("stock", [1.0, 1.18]), repeats("zero", [0.30, 1.04], options={"bucket_cap_mb": 25.0}),
                repeats("fsdp", [1.15, 1.25]))  # fmt: skip
    group = pooled.ranked(mixed, workload="mlp")
    fsdp = group[group["strategy"] == "fsdp"].iloc[0]
    judged = evidence.evidence(group[group["strategy"] == "stock"].iloc[0], fsdp)  # fsdp slower: its step over stock's
    given = sweep.ratio_interval_text(judged["low"], judged["high"])
    assert given != sweep.TOO_WIDE and f"interval {given}" in answer.world_table(group, pd.DataFrame(), workload="mlp")
    assert html.unescape(answer.bounds_note(group)) == (
        "<p class=caption>An interval reads “too wide to bound it” where an end lies below 0.1× or above 10×; "
        f"fsdp's {given}, however wide, lies within, so it is given.</p>"
    )
    clean = run(repeats("stock", [100.0, 102.0]), repeats("zero", [80.0, 82.0]))
    assert answer.bounds_note(pooled.ranked(clean, workload="mlp")) == ""  # every interval given: nothing to square


def test_one_repeat_a_side_is_too_few_to_tell_never_a_bare_winner():
    single = run(repeats("stock", [100.0]), repeats("zero", [80.0]), repeats("fsdp", [90.0]))
    line = in_full(pooled.ranked(single, workload="mlp"))
    assert "leads (80.00 ms); too few repeats to tell it from fsdp, the next: so far 0.89× fsdp's step" in line
    assert ("too few repeats to tell it from stock: so far 0.80× stock's step (1.25× faster; --repeats 2 or more; "
            "have 1, need about 2, a rough guide from 1 repeat)") in line  # fmt: skip
    assert (
        "leads: 80.00 ms a step, so far 1.25× faster than stock; not decided: too few repeats to tell it from the "
        "next, fsdp (have 1, these two need about" in winner.headline(pooled.ranked(single, workload="mlp"))
    )
    assert pages.run_headline(single).endswith("80.00 ms (leads; too few repeats to tell it from fsdp, the next; vs "
                                               "stock: too few repeats to tell)")  # fmt: skip
    setup = single.assign(dtype="fp32", optimizer="adam")  # the index names what a run's memory answer rests on
    assert pages.run_headline(setup).startswith("mlp/tiny fp32 adam, 2 ranks: <b>zero</b>")
    assert ratio_number(0.004) == "<0.01" and ratio_number(927.1) == "927"
    assert ratio_number(83191606.53) == ">1000"  # two repeats' 99.5 % interval: unbounded, not a figure
    alone = run(repeats("stock", [100.0, 101.0], world=1), repeats("zero", [80.0, 81.0], world=1))
    alone_said = "(leads; not judged; one rank: nothing communicated, only each strategy&#x27;s own cost)"
    assert pages.run_headline(alone).endswith(alone_said)  # never 'fastest': as the table's cell, no verdict
    once = run(repeats("stock", [100.0], world=1), repeats("zero", [80.0], world=1))
    assert pages.run_headline(once).endswith(  # nor 'too few repeats', which more repeats would not cure
        alone_said
    )  # one bracket, not two
    assert "one rank" not in pages.run_headline(single)


def test_stock_as_shipped_is_the_one_without_options_not_an_explicit_cap_25():
    both = run(repeats("stock", [100.0, 101.0]), repeats("stock", [90.0, 91.0], options={"bucket_cap_mb": 25.0}),
               repeats("zero", [80.0, 81.0]))  # fmt: skip
    group = pooled.ranked(both, workload="mlp")
    assert winner.reference_row(group)["strategy"] == "stock"
    assert winner.reference_name(winner.reference_row(group)) == "stock"
    table = answer.world_table(group, pd.DataFrame(), workload="mlp")
    assert "<th>× stock's step</th>" in table
    hooked = run(repeats("stock", [90.0, 91.0], options={"bucket_cap_mb": 25.0, "comm_hook": "fp16"}))
    assert winner.reference_row(pooled.ranked(hooked, workload="mlp")) is None


def test_an_explicit_cap_25_stands_in_only_named_for_what_it_is():
    explicit = run(repeats("stock", [100.0, 102.0], options={"bucket_cap_mb": 25.0}),
                   repeats("stock", [110.0, 111.0], options={"bucket_cap_mb": 1.0}),
                   repeats("zero", [80.0, 82.0], options={"bucket_cap_mb": 1.0}))  # fmt: skip
    group = pooled.ranked(explicit, workload="mlp")
    name = "stock bucket_cap_mb=25 (first bucket 25 MiB)"
    assert winner.reference_name(winner.reference_row(group)) == name
    assert f"<th>× the step of {name}</th>" in answer.world_table(group, pd.DataFrame(), workload="mlp")
    assert f"the step of the next, {name} (" in in_full(group)
    assert f"a step, 1.25× faster than {name}; decided over 2 repeats;" in winner.headline(group)
    assert f"the step of the next, {name} (" in takeaways.fastest(explicit, workload="mlp")
    from reports.aggregate import RunData

    page = answer.answer_section(RunData(meta={}, configs=explicit, ranks=pd.DataFrame(), phases=pd.DataFrame(),
                                         boxes=pd.DataFrame(), series=pd.DataFrame()), ["mlp"])  # fmt: skip
    assert "stock at an explicit bucket_cap_mb=25 stands in" in page


def test_stock_asking_its_defaults_by_name_is_the_reference_named_plain_with_no_stand_in_said():
    """A walkthrough's sweep of gradient_as_bucket_view=false,true read '—' in every 'vs stock' cell; once found, the
    reference was said to be 'stock at an explicit bucket_cap_mb=25', which the run never ran."""
    from reports.aggregate import RunData

    knobs = run(repeats("local", [30.0, 31.0]),
                repeats("stock", [100.0, 102.0], options={"gradient_as_bucket_view": False}),
                repeats("stock", [95.0, 96.0], options={"gradient_as_bucket_view": True}))  # fmt: skip
    group = pooled.ranked(knobs, workload="mlp")
    assert winner.reference_name(winner.reference_row(group)) == "stock"  # named by what it sets: nothing
    page = answer.answer_section(RunData(meta={}, configs=knobs, ranks=pd.DataFrame(), phases=pd.DataFrame(),
                                         boxes=pd.DataFrame(), series=pd.DataFrame()), ["mlp"])  # fmt: skip
    assert "<th>× stock's step</th>" in page and "stands in" not in page


def test_comm_hidden_pools_every_repeat_and_noise_is_the_median_cv():
    mixed = run(
        repeats("stock", [100.0, 101.0, 100.5]),
        repeats("zero", [80.0, 81.0, 80.5], comm_ms=[10.0, 10.0, 20.0], exposed_comm_ms=[10.0, 0.0, 5.0],
                step_ms_cv=[0.05, 0.04, 0.5]),
    )  # fmt: skip
    row = pooled.ranked(mixed, workload="mlp").iloc[0]
    assert row["overlap_efficiency"] == pytest.approx(1 - 15.0 / 40.0)  # not the first repeat's 0 %
    assert row["comm_ms"] == pytest.approx(40.0 / 3) and row["exposed_comm_ms"] == pytest.approx(5.0)
    assert row["cv"] == pytest.approx(0.05) and row["noise"] == ""  # the median CV, as stats.noise_note: steady
    html = answer.world_table(pooled.ranked(mixed, workload="mlp"), pd.DataFrame(), workload="mlp")
    assert "<td>62%</td>" in html and "steady (cv 0.05)" in html and "noisy" not in html


def test_the_cap_to_use_is_the_verdict_for_the_rows_own_options():
    hooks = run(repeats("stock", [100.0, 101.0], options={"bucket_cap_mb": 5.0}),
                repeats("stock", [90.0, 91.0], options={"bucket_cap_mb": 5.0, "comm_hook": "fp16"}))  # fmt: skip
    verdicts = pd.DataFrame([
        {"impl": "stock", "workload": "mlp", "world_size": 2, "other_options": '{"comm_hook": "fp16"}',
         "decision": "recommend", "best_cap_mb": 5.0, "equivalent_caps_mb": "[5.0]"},
        {"impl": "stock", "workload": "mlp", "world_size": 2, "other_options": "{}",
         "decision": "flat", "best_cap_mb": 5.0, "equivalent_caps_mb": "[5.0, 25.0]"},
    ])  # fmt: skip
    html = answer.world_table(pooled.ranked(hooks, workload="mlp"), verdicts, workload="mlp")
    rows = re.findall(r"<tr[^>]*><td>\d</td><td>(?:<b>)?([^<]+)(?:</b>)?</td>(?:<td>[^<]*</td>){2}<td>([^<]+)", html)
    assert rows == [("stock bucket_cap_mb=5 comm_hook=fp16", "use bucket_cap_mb=5"),
                    ("stock bucket_cap_mb=5", "flat: any of 5, 25 MiB")]  # fmt: skip


def test_scaling_memory_and_communication_sentences_name_each_strategy_once_pooled():
    # One slow one-rank launch (stock's repeat 0 at 100 samples/s, against 400) made the per-repeat figures
    # 0.80 and 0.25 (median 0.53); pooled, each repeat weighs half in the baseline: √(160·200) / (2 · √(100·400)).
    scaled = run(
        repeats("stock", [50.0, 12.5], world=1, samples_per_s=[100.0, 400.0], scaling_efficiency=[1.0, 1.0]),
        repeats("stock", [60.0, 50.0], samples_per_s=[160.0, 200.0], scaling_efficiency=[0.80, 0.25]),
        repeats("naive", [20.0, 20.0], world=1, samples_per_s=[200.0, 200.0]),
        repeats("naive", [80.0, 80.0], samples_per_s=[100.0, 100.0], scaling_efficiency=[0.25, 0.25]),
    )
    stock = pooled.ranked(scaled, workload="mlp").set_index(["world_size", "strategy"]).loc[(2, "stock")]
    assert stock["scaling_efficiency"] == pytest.approx(np.sqrt(160.0 * 200.0) / (2 * np.sqrt(100.0 * 400.0)))
    said = takeaways.scaling(scaled, workload="mlp")
    assert said == (
        "At 2 ranks, share of linear scaling kept against each one's own one-rank step (pooled over repeats): "
        "stock 45%, naive 25%."
    )
    plain = pd.concat([scaled, run(repeats("local", [8.0, 8.0], world=1, samples_per_s=[250.0, 250.0]))])
    plain = plain.reset_index(drop=True)
    stock = pooled.ranked(plain, workload="mlp").set_index(["world_size", "strategy"]).loc[(2, "stock")]
    assert stock["scaling_efficiency_vs_local"] == pytest.approx(np.sqrt(160.0 * 200.0) / (2 * 250.0))
    assert takeaways.scaling(plain, workload="mlp") == (
        "At 2 ranks, share of linear scaling kept against local at one rank (pooled over repeats): stock 36%, "
        "naive 20% (against their own one-rank step: stock 45%, naive 25%)."
    )
    assert takeaways.memory(SPLIT, workload="mlp") == (
        "At 2 ranks the peak process memory (RSS) is 950 MiB. Each figure is the highest of the strategy's repeats: "
        "the one to plan for."
    )


def test_pooled_scaling_pairs_the_same_options_and_setup_and_names_no_figure_for_mixed_setups():
    swept = run(
        repeats("zero", [10.0, 10.0], world=1, options={"bucket_cap_mb": 1.0}, samples_per_s=[100.0, 100.0]),
        repeats("zero", [10.0, 10.0], world=1, options={"bucket_cap_mb": 25.0}, samples_per_s=[50.0, 50.0]),
        repeats("zero", [20.0, 20.0], options={"bucket_cap_mb": 1.0}, samples_per_s=[120.0, 120.0]),
        repeats("zero", [20.0, 20.0], options={"bucket_cap_mb": 25.0}, samples_per_s=[90.0, 90.0]),
    )
    frame = pooled.ranked(swept, workload="mlp").set_index(["world_size", "strategy"])["scaling_efficiency"]
    assert frame[(2, "zero bucket_cap_mb=1")] == pytest.approx(0.6)  # 120 / (2 × 100), its own cap's baseline
    assert frame[(2, "zero bucket_cap_mb=25")] == pytest.approx(0.9)  # 90 / (2 × 50)
    # Two batch sizes under one strategy name are two setups: no single figure is theirs.
    mixed = swept.assign(batch_size=[8, 8, 8, 8, 8, 16, 8, 8])
    assert pooled.ranked(mixed, workload="mlp").set_index(["world_size", "strategy"]).loc[
        (2, "zero bucket_cap_mb=1"), "scaling_efficiency"] is None  # fmt: skip
    both_scaled = pd.concat([mixed, mixed.iloc[[0]].assign(batch_size=16, samples_per_s=60.0, config_id="b16")])
    keyed = both_scaled.assign(dtype="fp32", optimizer="sgd", device="cpu", backend="gloo", nnodes=1, grad_accum=1)
    assert sorted(scaling.pooled_scaling(keyed)["scaling_efficiency"]) == pytest.approx([0.6, 0.9, 1, 1, 1, 1])
    assert pooled.ranked(both_scaled, workload="mlp").set_index(["world_size", "strategy"]).loc[
        (2, "zero bucket_cap_mb=1"), "scaling_efficiency"] is None  # 0.6 at batch 8, 1.0 at 16  # fmt: skip
    assert pooled.ranked(swept.drop(columns="samples_per_s"), workload="mlp")["scaling_efficiency"].isna().all()
    without_baseline = swept[swept["world_size"] == 2]
    assert pooled.ranked(without_baseline, workload="mlp")["scaling_efficiency"].isna().all()


def test_a_strategy_that_hides_none_is_given_the_after_backward_reason_only_by_design():
    timed = run(
        repeats("stock", [100.0, 101.0]),
        repeats("zero", [80.0, 81.0], comm_ms=[5.0, 5.0], exposed_comm_ms=[5.0, 5.0]),  # one bucket: 0 %
        repeats("naive", [120.0, 121.0], comm_ms=[9.0, 9.0], exposed_comm_ms=[9.0, 9.0]),
        repeats("flat", [110.0, 111.0], comm_ms=[6.0, 6.0], exposed_comm_ms=[6.0, 6.0]),
    )
    assert takeaways.communication(timed, workload="mlp") == (
        "At 2 ranks zero hides none; flat and naive hide none (by design: they communicate after backward)."
    )
    untimed = timed.assign(comm_ms=np.nan, exposed_comm_ms=np.nan, samples_per_s=np.nan)
    assert takeaways.communication(untimed, workload="mlp") == "" and takeaways.scaling(untimed, workload="mlp") == ""


def test_an_auto_runs_answer_judges_at_its_stopping_rules_confidence():
    """Under --repeats auto the verdicts are judged at 99.5 % a look: the answer calls nothing significant at
    95 % that the run's own rule left open (the reviewer's page said '1.08× faster (1.01–1.14)' there)."""
    auto = pooled.run_confidence({"config": {"repeats": "auto", "max_repeats": 20}})
    assert auto == pytest.approx(0.995) and pooled.run_confidence({"config": {"repeats": 3}}) == stats.CONFIDENCE
    close = run(repeats("stock", [100.0, 103.0, 98.0]), repeats("zero", [89.0, 92.0, 90.0]))
    assert stats.ratio_interval([89.0, 92.0, 90.0], [100.0, 103.0, 98.0])["low"] > 1.05  # beyond 5 % at 95 %
    assert stats.ratio_interval([89.0, 92.0, 90.0], [100.0, 103.0, 98.0], confidence=auto)["low"] < 1
    fixed = in_full(pooled.ranked(close, workload="mlp"))
    judged = in_full(pooled.ranked(close, workload="mlp", confidence=auto))
    assert "is fastest (" in fixed and "; 95% interval" in fixed
    assert "leads (" in judged and "too few repeats to tell" in judged and "; 99.5% interval" in judged
    assert "not decided" in winner.headline(pooled.ranked(close, workload="mlp", confidence=auto))


def test_at_one_rank_which_the_stopping_rule_never_judges_the_answer_looks_once_at_95_percent():
    auto = pooled.run_confidence({"config": {"repeats": "auto", "max_repeats": 20}})
    both = run(repeats("stock", [100.0, 103.0], world=1), repeats("zero", [92.0, 95.0], world=1),
               repeats("stock", [100.0, 103.0]), repeats("zero", [92.0, 95.0]))  # fmt: skip
    frame = pooled.ranked(both, workload="mlp", confidence=auto)
    assert set(frame.loc[frame["world_size"] == 1, "confidence"]) == {stats.CONFIDENCE}
    assert frame.loc[frame["world_size"] == 2, "confidence"].tolist() == pytest.approx([0.995, 0.995])
    one, two = (in_full(frame[frame["world_size"] == world]) for world in (1, 2))
    assert "; 95% interval" in one and "; 99.5% interval" in two
    # No verdict is about one rank: a page's 'need about 14' there read as one the run works towards.
    short = winner.headline(frame[frame["world_size"] == 1])
    assert "need" not in one + short and "have 2" not in one + short, one + short
    # Nor 'too few repeats', which more repeats would cure: the cell beside it reads 'not judged (estimate 0.92×…)'.
    assert short.endswith(f", an estimated 1.09× faster than stock; {winner.ONE_RANK}; parity ok."), short
    assert "too few repeats" not in one + short and "so far" not in one + short, one + short
    assert f"; {winner.ONE_RANK}: against the next, stock, an estimate 0.92× stock's step (1.09× faster" in one
    assert "need about" in in_full(frame[frame["world_size"] == 2])
    at = {world: frame[frame["world_size"] == world] for world in (1, 2)}
    cells = [answer.against_reference(at[w][at[w]["impl"] == "zero"].iloc[0], winner.reference_row(at[w]))
             for w in (1, 2)]  # fmt: skip
    assert cells[0].startswith("not judged (estimate 0.92×") and cells[1].startswith("too few repeats to tell")
    # however far apart its repeats put them: a walkthrough's flat read '0.80× (1.26× faster; 0.73–0.87)' there
    apart = run(repeats("stock", [100.0, 100.2] * 3, world=1), repeats("flat", [80.0, 80.1] * 3, world=1))
    frame = pooled.ranked(apart, workload="mlp")
    flat = frame[frame["strategy"] == "flat"].iloc[0]
    assert evidence.evidence(flat, winner.reference_row(frame))["judged"] == evidence.SIGNIFICANT  # a finding elsewhere
    cell = answer.against_reference(flat, winner.reference_row(frame))
    assert cell.startswith("not judged (estimate 0.80×, 1.25× faster, interval "), cell
    # and the headline, the lead and the index say it as the cell does: a page read 'zero is fastest … decided over
    # 6 repeats' beside 'not judged (estimate 0.80×…)'
    three = run(repeats("stock", [100.0, 100.2] * 3, world=1), repeats("zero", [80.0, 80.1] * 3, world=1),
                repeats("fsdp", [90.0, 90.1] * 3, world=1))  # fmt: skip
    frame = pooled.ranked(three, workload="mlp")
    assert evidence.evidence(frame.iloc[0], frame.iloc[1])["judged"] == evidence.SIGNIFICANT
    short, full = html.unescape(winner.headline(frame)), in_full(frame)
    assert short.endswith(
        f"leads: 80.05 ms a step, an estimated 1.25× faster than stock; {winner.ONE_RANK}; parity ok."
    )
    assert f"leads (80.05 ms); {winner.ONE_RANK}: against the next, fsdp, an estimate 0.89× fsdp's step" in full
    assert full.endswith(", and against stock, an estimate 0.80× stock's step (1.25× faster; 95% interval 0.80–0.80)")
    said = short + full + takeaways.fastest(three, workload="mlp")
    assert not any(word in said for word in ("fastest", "decided", "faster than stock:", "slowest")), said
    assert winner.lead_caveat(frame) == "leads; not judged"


def test_the_answer_calls_significant_only_what_the_verdicts_call_beyond_the_threshold_too():
    """A page once said 'zero 1.13× faster (1.01–1.25)' while the run's verdict said 'too few repeats to
    tell': the interval excluded 1 but not the 5 % threshold. The answer now judges as the verdicts do."""
    small = run(repeats("stock", [100.0, 103.0, 98.0]), repeats("zero", [90.0, 93.0, 91.0]))
    assert stats.ratio_interval([90.0, 93.0, 91.0], [100.0, 103.0, 98.0])["low"] > 1  # significant, not beyond 5 %
    frame = pooled.ranked(small, workload="mlp")
    zero = frame[frame["strategy"] == "zero"].iloc[0]
    reference = frame[frame["strategy"] == "stock"].iloc[0]
    assert answer.against_reference(zero, reference).startswith("too few repeats to tell (estimate")
    assert "leads (" in in_full(frame) and "have 3 repeats, need about" in in_full(frame)
    assert "leads: " in winner.headline(
        frame
    ) and "not decided: too few repeats (have 3, need about" in winner.headline(frame)
    level = run(repeats("stock", [100.0, 130.0]), repeats("zero", [99.9, 130.1]))  # a walkthrough's at one rank
    frame = pooled.ranked(level, workload="mlp")
    said = answer.against_reference(frame[frame["strategy"] == "zero"].iloc[0], winner.reference_row(frame))
    assert said.startswith("too few repeats to tell (estimate 1.00×, interval")  # not '1.00× faster'


def test_not_significant_means_the_verdicts_narrow_interval_that_decides_neither_way():
    """'no 5% change shown' is the verdicts' 'no significant change': an interval narrower than ±5 % that calls
    neither way (it once read 'not significant', beside intervals such as 1.01–1.08 that exclude 1); a wide one
    is 'too few repeats to tell' (the docs' promise), never 'no 5% change shown'."""
    tight = run(repeats("stock", [100.0, 100.4, 100.2]), repeats("zero", [99.6, 100.0, 99.8]))
    assert stats.verdict([99.6, 100.0, 99.8], [100.0, 100.4, 100.2], threshold=0.05)["verdict"] == stats.NO_CHANGE
    frame = pooled.ranked(tight, workload="mlp")
    assert answer.against_reference(frame.iloc[0], frame.iloc[1]).endswith(", no 5% change shown")
    assert "leads (99.80 ms), no 5% change shown: 1.00× the step of the next, stock (95% interval" in in_full(frame)
    assert "leads: 99.80 ms a step; tied with the next, stock: no 5% change shown; parity ok." in winner.headline(frame)
    assert winner.lead_caveat(frame) == "leads; no 5% change shown"


def test_ranks_rest_on_the_geometric_means_the_ratios_are_built_around():
    """Bucketed's median (1 ms) beats stock's (2 ms) but its geometric mean (2.15 ms) does not: ranked by median,
    the page once put zero first and called it '0.93× faster'. One estimate ranks and compares."""
    split = run(repeats("stock", [2.0, 2.0, 2.0]), repeats("zero", [1.0, 1.0, 10.0]))
    frame = pooled.ranked(split, workload="mlp")
    assert frame["strategy"].tolist() == ["stock", "zero"]
    assert frame["step_ms"].tolist() == pytest.approx([2.0, stats.geometric_mean([1.0, 1.0, 10.0])])
    line = in_full(frame)
    assert line.startswith("stock leads (2.00 ms); too few repeats to tell it from zero, "
                           "the next: so far 0.93× zero's step (1.08× faster")  # fmt: skip
    assert "0.93× faster" not in line and "estimate 1.08×, interval" in answer.world_table(frame, pd.DataFrame(),
                                                                                          workload="mlp")  # fmt: skip


def test_the_legend_states_not_significant_as_the_rule_applies_it_not_as_a_difference_within_5_percent():
    """The legend once said the rule 'can tell that any difference is within the 5% threshold'; but the rule
    judges the interval's width, so 1.005–1.091 (a 9 % slowdown not ruled out) is 'not significant'. The legend
    and compare's page now state the rule in one set of words (evidence.no_change_rule)."""
    fast, slow = [100.0, 102.0, 98.0], [104.0, 106.0, 104.0]
    judged = stats.verdict(fast, slow, threshold=0.05)
    assert judged["verdict"] == stats.NO_CHANGE and judged["high"] > 1.09  # reaches past 5 %, still no change
    frame = pooled.ranked(run(repeats("stock", slow), repeats("zero", fast)), workload="mlp")
    assert (
        answer.against_reference(frame.iloc[0], frame.iloc[1]) == "0.96× (1.05× faster; 0.92–1.00), no 5% change shown"
    )
    rule = evidence.no_change_rule(0.05)
    assert "narrower than ±5% (half its width, on the log scale, at most log 1.05)" in rule
    assert "can still reach past 5% on one side, as 1.00–1.10 does" in rule
    assert (f"'no 5% change shown' where the verdicts' rule calls no significant change (the interval may exclude 1: "
            f"a change under the threshold is no change that counts): {rule};") in answer.CAPTION  # fmt: skip
    assert "can tell that any difference is within" not in answer.CAPTION
    page = compare.comparison_page("a", "b", pd.DataFrame(), {"outcome": "cannot tell", "sentence": "nothing"},
                                   environment=[], not_judged=[], threshold=0.05)  # fmt: skip
    assert f"<b>no significant change</b> where {rule};" in page and evidence.decided_rule(0.05) in page


def test_a_strategy_judged_on_its_first_repeat_pools_to_that_verdict():
    """A later repeat's row carries no verdict (judged on the configuration's first repeat): the pooled row is
    ok where the judged repeat passed, failed where it failed, and never 'not judged' for that reason."""
    later = [True, None, None]
    rows = run(repeats("stock", [100.0, 101.0, 99.0], parity_ok=later),
               repeats("naive", [160.0, 161.0, 159.0], parity_ok=[False, None, None]),
               repeats("local", [30.0, 31.0, 30.5], parity_ok=[None] * 3))  # fmt: skip
    parity = pooled.ranked(rows, workload="mlp").set_index("impl")["parity_ok"]
    assert parity["stock"] is True and parity["naive"] is False and parity["local"] is None


def test_two_caps_that_made_the_same_buckets_are_said_to_be_one_measurement_not_a_doubtful_lead():
    """Their steps differ by the launches' spread alone: the cell and the index say so, not "not significant"
    (whose legend means an interval narrower than ±5 %)."""
    one = [[0.13]] * 2
    rows = run(repeats("stock", [8.0, 8.1], options={"bucket_cap_mb": 1.0}, bucket_sizes_mb=one),
               repeats("stock", [12.0, 12.4], bucket_sizes_mb=one),
               repeats("local", [5.0, 5.1]))  # fmt: skip
    group = pooled.ranked(rows, workload="mlp")
    reference = winner.reference_row(group)
    leader = group[~group["is_floor"]].iloc[0]
    cell = answer.against_reference(leader, reference)
    # no "1.51× faster" either: a reader took a review's "2.35× faster … (one measurement)" at face value
    assert cell == "the same buckets: one measurement (1.52× apart: the launches' spread)", cell
    assert "faster" not in cell and "not significant" not in cell
    assert winner.lead_caveat(group) == "leads; the same buckets as the next"
    headline = in_full(group)
    assert "makes the same buckets, so the two are one measurement" in headline and "faster than" not in headline
    headline = winner.headline(group)
    assert "makes the same buckets: one measurement" in headline and "faster than" not in headline
    assert winner.versus_stock(leader, reference).startswith(f"the same buckets as {reference['strategy']}: one ")


def test_the_slowest_said_of_a_layout_that_made_the_leaders_buckets_is_one_measurement():
    """A CPU sweep's section 1 said 'stock bucket_cap_mb=1 is slowest, at 2.09× the step of stock bucket_cap_mb=100'
    where both caps made one bucket of 0.13 MiB: the table beside it called them one measurement. The caps are one
    row now (one_layout_pooled); stock's default layout, which made the same bucket, is still one measurement."""
    one = [[0.13]] * 2
    rows = run(repeats("stock", [8.0, 8.1], options={"bucket_cap_mb": 100.0}, bucket_sizes_mb=one),
               repeats("zero", [12.0, 12.4]),
               repeats("stock", [20.0, 21.0], bucket_sizes_mb=one),
               repeats("stock", [16.0, 17.0], options={"bucket_cap_mb": 1.0}, bucket_sizes_mb=one))  # fmt: skip
    said = takeaways.fastest(rows, workload="mlp")
    assert said.startswith("At 2 ranks stock (caps 1, 100 MiB: one bucket layout) leads (11.52 ms, both caps"), said
    assert said.endswith("stock is slowest, at 1.78× the step of stock (caps 1, 100 MiB: one bucket layout), though it "
                         "makes the same buckets: one measurement, apart by the launches' spread."), said  # fmt: skip


def test_caps_that_made_one_layout_head_the_page_and_the_index_as_one_pooled_launch_by_launch():
    """A walkthrough's page and index opened 'stock bucket_cap_mb=100 leads (7.88 ms)': a cap run twice, where 25 MiB
    made the same one bucket and ran 8 times. The caps are one configuration: the headline names them as one, each
    launch one repeat (the geometric mean of its caps' medians), and ranks it against the other strategy."""
    one = [[0.13]] * 8
    rows = run(repeats("stock", [7.8, 8.0], options={"bucket_cap_mb": 100.0}, bucket_sizes_mb=one[:2]),
               repeats("stock", [10.0, 10.4, 9.8, 10.2, 10.1, 9.9, 10.3, 10.0], options={"bucket_cap_mb": 25.0},
                       bucket_sizes_mb=one),
               repeats("zero", [9.0, 9.2, 9.1, 8.9, 9.0, 9.1, 9.2, 9.0], options={"bucket_cap_mb": 25.0}),
               repeats("local", [5.0, 5.1]))  # fmt: skip
    group = pooled.ranked(rows, workload="mlp")
    assert group.iloc[0]["strategy"] == "stock bucket_cap_mb=100"  # the table still ranks each cap
    launches = [np.sqrt(7.8 * 10.0), np.sqrt(8.0 * 10.4), 9.8, 10.2, 10.1, 9.9, 10.3, 10.0]
    one_layout = evidence.one_layout_pooled(group)
    stock = one_layout[one_layout["impl"] == "stock"].iloc[0]
    assert stock["strategy"] == "stock (caps 25, 100 MiB: one bucket layout)" and stock["repeats"] == 8
    assert np.allclose(stock["repeat_ms"], launches) and stock["step_ms"] == pytest.approx(
        stats.geometric_mean(launches)
    )
    headline = html.unescape(winner.headline(group))
    assert headline.startswith("At 2 ranks: <b>zero bucket_cap_mb=25</b> is fastest: 9.06 ms a step"), headline
    assert "the next, stock (caps 25, 100 MiB: one bucket layout) (" in in_full(group)
    assert "bucket_cap_mb=100" not in headline
    index = html.unescape(pages.run_headline(rows))
    assert "<b>zero bucket_cap_mb=25</b> 9.06 ms (fastest)" in index, index
    quick = run(repeats("stock", [7.8, 8.0], options={"bucket_cap_mb": 100.0}, bucket_sizes_mb=one[:2]),
                repeats("stock", [10.0, 10.4], options={"bucket_cap_mb": 25.0}, bucket_sizes_mb=one[:2]),
                repeats("zero", [9.4, 9.6], options={"bucket_cap_mb": 25.0}))  # fmt: skip
    index = html.unescape(pages.run_headline(quick))  # no cap named as the leader where its caps made one layout
    said = "<b>stock (caps 25, 100 MiB: one bucket layout)</b> 8.98 ms, both caps' launches pooled (leads; too few"
    assert said in index, index  # a figure no row holds: said to be pooled, as the run page says it


def test_the_answer_opens_at_the_largest_world_size():
    """A review's run page opened with 'At 1 rank: stock bucket_cap_mb=1 leads', where nothing is communicated;
    the 2-rank answer the run exists for came after its table."""
    from reports.aggregate import RunData

    both = run(repeats("stock", [10.0, 10.5], world=1), repeats("zero", [11.0, 11.2], world=1),
               repeats("stock", [20.0, 20.5]), repeats("zero", [18.0, 18.2]))  # fmt: skip
    page = answer.answer_section(RunData(meta={}, configs=both, ranks=pd.DataFrame(), phases=pd.DataFrame(),
                                         boxes=pd.DataFrame(), series=pd.DataFrame()), ["mlp"])  # fmt: skip
    assert "At 2 ranks:" in page and page.index("At 2 ranks:") < page.index("At 1 rank:")


def test_the_index_and_the_run_page_say_the_verdict_the_console_said():
    """A walkthrough's console said 'fsdp vs stock: faster, at 0.61×' after 2 repeats and the index 'leads; too few
    repeats': the index judged fsdp against the next (zero), a pair no verdict of the run is about, and said not
    which. It now names the next and gives the run's own verdict against stock, in the console's words."""
    from harness.analysis.verdicts import decide

    rows = run(repeats("local", [0.5, 0.5]), repeats("stock", [2.00, 2.02]), repeats("fsdp", [1.22, 1.23]),
               repeats("zero", [1.26, 1.30]))  # fmt: skip
    meta = {"config": {"repeats": "auto", "max_repeats": 20}}
    found = decide.strategy_verdicts(rows, confidence=decide.look_confidence(20))  # the console's, less the caps
    said = {v.subject: v for v in found}
    fsdp, zero = said["w2 mlp/tiny fsdp vs stock"], said["w2 mlp/tiny zero vs stock"]
    assert fsdp.decided and fsdp.word.startswith("faster, at 0.61×") and not zero.decided  # what the console says
    cell = html.unescape(pages.run_headline(rows, meta))
    assert cell.endswith(f"fsdp</b> 1.22 ms (leads; too few repeats to tell it from zero, the next; vs stock: "
                         f"{fsdp.word})")  # fmt: skip
    frame = pooled.ranked(rows, workload="mlp", confidence=pooled.run_confidence(meta))
    headline = in_full(frame)
    assert "too few repeats to tell it from zero" in headline and "a lead the run does not decide" in headline
    assert "and faster than stock: 0.61× stock's step (1.64× faster; 99.5% interval" in headline
    assert "1.64× faster than stock; not decided: too few repeats to tell it from the next, zero" in winner.headline(
        frame
    )
    two = run(repeats("stock", [2.00, 2.02]), repeats("fsdp", [1.22, 1.23]))  # the next is stock: that very verdict
    assert pages.run_headline(two, meta).endswith("1.22 ms (fastest)")
    ahead = run(repeats("stock", [1.00, 1.02]), repeats("fsdp", [1.22, 1.23]), repeats("zero", [1.06, 1.40]))
    said = in_full(pooled.ranked(ahead, workload="mlp", confidence=0.995))
    assert "too few repeats to tell it from zero" in said and "does not decide" not in said  # zero vs stock: a verdict
    assert pages.run_headline(ahead, meta).endswith("1.01 ms (leads; too few repeats)")


def test_caps_of_one_layout_say_their_step_is_pooled_and_their_buckets_once():
    """A CPU page's headline read 'zero (caps 5, 25 MiB: one bucket layout) leads (6023.1 ms) … 0.94× stock': the
    geometric mean of the two caps' rows, launch by launch, a figure no row of the table holds (its ratio for the
    pair read 0.88×). It now says the step is the caps' launches pooled, and the caption how. And 'every cap makes one
    bucket of 27.7 MiB, every gradient: a cap splits …' stood four times on that page: the buckets and why, once."""
    from reports.aggregate import RunData

    one = [[0.13]] * 2
    rows = run(*(repeats(impl, [ms, ms * 1.02], world=world, options={"bucket_cap_mb": cap}, bucket_sizes_mb=one)
                 for world in (2, 4) for impl, base in (("zero", 10.0), ("stock", 12.0))
                 for cap, ms in ((5.0, base), (25.0, base * 1.2))))  # fmt: skip
    verdicts = pd.DataFrame([{"workload": "mlp", "impl": impl, "world_size": world, "other_options": "{}",
                              "decision": stats.FLAT, "equivalent_caps_mb": "[5.0, 25.0]", "caps_mb": "[5.0, 25.0]",
                              "best_cap_mb": 5.0, "same_buckets_mb": "[0.13]", "repeats": 2}
                             for world in (2, 4) for impl in ("zero", "stock")])  # fmt: skip
    empty = {key: pd.DataFrame() for key in ("ranks", "phases", "boxes", "series")}
    page = html.unescape(answer.answer_section(RunData(meta={}, configs=rows, recommendations=verdicts, **empty),
                                               ["mlp"]))  # fmt: skip
    pooled_ms = stats.geometric_mean([10.0, 10.2, 12.0, 12.24])
    said = (
        f"<b>zero (caps 5, 25 MiB: one bucket layout)</b> is fastest: {pooled_ms:.2f} ms a step, both caps' launches "
        "pooled,"
    )
    assert page.count(said) == 2, page  # at 4 ranks and at 2
    assert page.count(answer.POOLED_CAPS.strip()) == 1  # how, in the caption
    assert page.count(sweep.ONLY_BETWEEN) == 1 and page.count("every cap makes one bucket of 0.13 MiB") == 1
    assert page.count("flat: any of 5, 25 MiB (every cap makes the same buckets)") == 2 * 2 * 2 - 1  # lines, cells
    # The table ranks as the headline does: a CPU page's bold first row was 'zero bucket_cap_mb=1', one of two caps
    # of one program, under a headline that named zero first; each cap's noise stays in the pooled row's cell.
    assert not re.search(r"<td>(<b>)?(zero|stock) bucket_cap_mb=", page) and f"<td>{pooled_ms:.2f} ms</td>" in page
    assert page.count("<td>1</td><td><b>zero (caps 5, 25 MiB: one bucket layout)</b></td>") == 2
    plain = run(repeats("zero", [10.0, 10.2]), repeats("stock", [12.0, 12.2]))
    assert answer.POOLED_CAPS.strip() not in answer.answer_section(RunData(meta={}, configs=plain, **empty), ["mlp"])


def test_the_leads_need_is_the_cap_verdicts_where_it_is_that_pair_and_named_as_the_pairs_where_not():
    """A walkthrough's page said 'need about 11' of its leading two caps (1 and 5 MiB, neither 25) where the console
    said 22 of the sweep's verdict, which holds each cap against 25 MiB: another pair's need, read as the verdict's.
    The pair's is named as the pair's, and the verdict's (1 MiB against 25) is the console's number."""
    caps = {1.0: [10.0, 14.0], 5.0: [10.5, 13.5], 25.0: [11.0, 16.5]}
    rows = run(*(repeats("stock", ms, options={"bucket_cap_mb": cap}) for cap, ms in caps.items()))
    frame = pooled.ranked(rows, workload="mlp")
    said = html.unescape(winner.lead(frame)[1])  # section 1's sentence; the headline's short form below
    pair = evidence.evidence(frame.iloc[0], frame.iloc[1])
    verdict = sweep.recommend_cap(caps, aligned=True)  # the console's and the cap table's
    assert verdict["decision"] == stats.TOO_FEW and pair["needed"] != verdict["repeats_needed"]
    assert f"have 2 repeats, these two {stats.needed_text(pair['needed'], 2)})" in said
    assert f"(have 2, these two {stats.needed_text(pair['needed'], 2)})" in html.unescape(winner.headline(frame))
    assert "(a lead the run does not decide: its cap verdict holds each cap against the 25 MiB cap)" in said
    assert said.count("need ") == 2 and f"have 2 repeats, {stats.needed_text(verdict['repeats_needed'], 2)})" in said
    two = run(*(repeats("stock", ms, options={"bucket_cap_mb": cap}) for cap, ms in caps.items() if cap != 5.0))
    ranked_two = pooled.ranked(two, workload="mlp")  # the pair is the verdict's own
    alone, short = (html.unescape(text) for text in (winner.lead(ranked_two)[1], winner.headline(ranked_two)))
    need = sweep.recommend_cap({cap: ms for cap, ms in caps.items() if cap != 5.0}, aligned=True)["repeats_needed"]
    assert f"have 2 repeats, {stats.needed_text(need, 2)})" in alone and "these two" not in alone
    assert f"(have 2, {stats.needed_text(need, 2)})" in short and "these two" not in short


def test_one_runs_pages_pool_each_workload_once_at_each_confidence_asked(monkeypatch):
    """A run page pooled the same rows 7 times (a third of its time): while one run's pages are built, once."""
    calls = []
    original = pooled._ranked
    monkeypatch.setattr(pooled, "_ranked", lambda *args: calls.append(args) or original(*args))
    fresh = [pooled.ranked(SPLIT, workload="mlp", confidence=c) for c in (0.95, 0.995)]
    with pooled.kept_while():
        kept = [pooled.ranked(SPLIT, workload="mlp", confidence=c) for c in (0.95, 0.995, 0.95)]
        kept[0].loc[0, "step_ms"] = -1.0  # a caller's change reaches no other caller
        assert pooled.ranked(SPLIT, workload="mlp")["step_ms"].iloc[0] > 0
        assert pooled.ranked(SPLIT.copy(), workload="mlp")["step_ms"].iloc[0] > 0  # another frame: pooled anew
    assert len(calls) == 2 + 1 + 1
    pd.testing.assert_frame_equal(kept[1], fresh[1])
    pd.testing.assert_frame_equal(kept[2], fresh[0])
    assert list(kept[1]["confidence"]) != list(kept[2]["confidence"])
    pooled.ranked(SPLIT, workload="mlp")  # outside: pooled each time, as a test's changed rows need
    assert len(calls) == 5


def test_a_strategy_verdict_over_caps_of_one_layout_is_the_pages_pooled_figure():
    """A run at load ~9 said 'zero bucket_cap_mb=25 vs stock bucket_cap_mb=25: slower, at 3.60×' from two repeats
    of one cap, while zero's caps 1 and 25 (one bucket: one computation) measured 2.30/3.21 against 11.82/11.35
    ms, and the page ranked those caps as one configuration. The verdict judges what the page ranks: each side's caps
    of one layout pooled per launch, named as the page names them, at the page's ratio."""
    one = [[0.13]] * 2
    rows = run(repeats("stock", [3.0, 3.2], options={"bucket_cap_mb": 1.0}, bucket_sizes_mb=one),
               repeats("stock", [3.1, 3.3], options={"bucket_cap_mb": 25.0}, bucket_sizes_mb=one),
               repeats("zero", [2.30, 3.21], options={"bucket_cap_mb": 1.0}, bucket_sizes_mb=one),
               repeats("zero", [11.82, 11.35], options={"bucket_cap_mb": 25.0}, bucket_sizes_mb=one))  # fmt: skip
    (verdict,) = decide.strategy_verdicts(rows, confidence=stats.CONFIDENCE)
    # the layout note once, not on both sides; the ratio's words name stock as the subject does
    assert verdict.subject == "w2 mlp/tiny zero vs stock (each: caps 1, 25 MiB, one bucket layout)"
    assert verdict.line().count("one bucket layout") == 1, verdict.line()
    assert len(verdict.config_ids) == 8  # every cap of each side runs again while it is open
    group = evidence.one_layout_pooled(pooled.ranked(rows, workload="mlp"))
    reference = winner.reference_row(group)
    zero = group[group["impl"] == "zero"].iloc[0]
    assert reference["strategy"] == "stock (caps 1, 25 MiB: one bucket layout)"
    ratio = stats.geometric_mean([np.sqrt(2.30 * 11.82), np.sqrt(3.21 * 11.35)]) / stats.geometric_mean(
        [np.sqrt(3.0 * 3.1), np.sqrt(3.2 * 3.3)]
    )
    assert zero["step_ms"] / reference["step_ms"] == pytest.approx(ratio)
    said = f"{ratio:.2f}×"
    assert said in (verdict.word if verdict.decided else verdict.so_far), verdict.line()
    assert answer.against_reference(zero, reference).startswith(
        ("too few repeats to tell (estimate " if not verdict.decided else "") + said
    )


def test_a_verdict_names_a_one_layout_side_once_and_one_repeat_in_the_singular():
    """A review read 'zero (caps 1, 25 MiB: one bucket layout) vs stock (caps 1, 25 MiB: one bucket layout): open
    after 1 repeats'. One side pooled keeps its own note; a count of one is said in the singular."""
    one = [[0.13]]
    rows = run(repeats("stock", [3.0], options={"bucket_cap_mb": 1.0}, bucket_sizes_mb=one),
               repeats("stock", [3.1], options={"bucket_cap_mb": 25.0}, bucket_sizes_mb=one),
               repeats("zero", [2.3], options={"bucket_cap_mb": 25.0}, bucket_sizes_mb=one))  # fmt: skip
    (verdict,) = decide.strategy_verdicts(rows, confidence=stats.CONFIDENCE)
    assert verdict.line().startswith("w2 mlp/tiny zero bucket_cap_mb=25 vs stock (caps 1, 25 MiB: one bucket "
                                     "layout): open after 1 repeat; "), verdict.line()  # fmt: skip
    assert evidence.decided_text(pd.Series({"decided_after": 1, "repeats": 1, "repeats_needed": 5})) == "after 1 repeat"


def test_caps_of_one_layout_are_named_as_typed_not_as_the_bytes_ddp_recorded():
    """A page said 'caps 0.000499725, 0.000999451 MiB' where the console said 0.0005 and 0.001."""
    one = [[0.13]] * 2
    rows = run(repeats("stock", [8.0, 8.1], options={"bucket_cap_mb": 0.0005}, bucket_sizes_mb=one,
                       bucket_cap_mb=0.000499725),
               repeats("stock", [8.2, 8.0], options={"bucket_cap_mb": 0.001}, bucket_sizes_mb=one,
                       bucket_cap_mb=0.000999451),
               repeats("zero", [12.0, 12.4]))  # fmt: skip
    group = evidence.one_layout_pooled(pooled.ranked(rows, workload="mlp"))
    assert group.iloc[0]["strategy"] == "stock (caps 0.0005, 0.001 MiB: one bucket layout)", group.iloc[0]["strategy"]


def test_one_noisy_cap_of_a_pooled_layout_is_said_in_the_singular_and_its_note_kept_in_the_cell():
    """A page's headline read 'noisy at caps 25' (one cap); the pooled row's noise cell now says each cap's note."""
    one = [[0.13]] * 2
    rows = run(repeats("stock", [8.0, 8.1], options={"bucket_cap_mb": 1.0}, bucket_sizes_mb=one),
               repeats("stock", [8.2, 8.0], options={"bucket_cap_mb": 25.0}, bucket_sizes_mb=one, step_ms_cv=0.3),
               repeats("zero", [12.0, 12.4]))  # fmt: skip
    group = evidence.one_layout_pooled(pooled.ranked(rows, workload="mlp"))
    stock = group[group["impl"] == "stock"].iloc[0]
    assert stock["noise"] == "noisy at cap 25 (the table says how)", stock["noise"]
    assert answer.noise_cell(stock) == "<b>noisy</b>: cap 25: noisy steps (CV 0.30)", answer.noise_cell(stock)
    assert "; noisy at cap 25 (the table says how)." in winner.headline(group)


def test_every_need_on_a_page_sized_from_under_five_repeats_is_marked_a_rough_guide_as_the_console_marks_it():
    """The console marked 'need about 14, a rough guide from 2 repeats' where the run page beside it said 'need
    about 14' in its headline and 'need about 9' unmarked in its sentences: every need a page sizes from fewer than
    stats.ROUGH_UNDER repeats is marked, none from more."""
    import types

    group = pooled.ranked(SPLIT, workload="mlp")  # 2 repeats a strategy
    said = " ".join([in_full(group), winner.headline(group), answer.world_table(group, pd.DataFrame(), workload="mlp"),
                     evidence.decided_text(types.SimpleNamespace(decided_after=float("nan"), repeats_needed=9,
                                                                 repeats=2, so_far=""))])  # fmt: skip
    marks = re.findall(r"need about \d+(, a rough guide from 2 repeats)?", said)
    assert len(marks) >= 3 and all(marks), said
    five = evidence.decided_text(types.SimpleNamespace(decided_after=float("nan"), repeats_needed=9, repeats=5))
    assert five == "open after 5 repeats; need about 9"


def test_a_knob_sweep_names_each_configuration_by_what_it_sets_short_and_distinct_on_console_and_page(capsys):
    """An engineer swept DDP's knobs: every line and cell spelt each option, defaults included ('stock comm_hook=none
    gradient_as_bucket_view=False static_graph=False vs stock comm_hook=fp16 …', 300 characters a verdict line). A
    configuration is its strategy and what it sets away from the strategy as shipped; where two would read alike,
    the option that differs is kept."""
    from harness.commands import console
    from reports.aggregate import RunData

    sweep_of = [
        {"comm_hook": hook, "gradient_as_bucket_view": view} for hook in ("none", "fp16") for view in (False, True)
    ]
    stocks = (repeats("stock", [100.0 - 5 * k, 102.0 - 5 * k], options=o) for k, o in enumerate(sweep_of))
    knobs = run(repeats("local", [30.0, 31.0]), *stocks)
    names = {"stock", "stock comm_hook=fp16", "stock gradient_as_bucket_view=True",
             "stock comm_hook=fp16 gradient_as_bucket_view=True"}  # fmt: skip
    assert set(pooled.ranked(knobs, workload="mlp")["strategy"]) == names | {"local"}
    page = answer.answer_section(RunData(meta={}, configs=knobs, ranks=pd.DataFrame(), phases=pd.DataFrame(),
                                         boxes=pd.DataFrame(), series=pd.DataFrame()), ["mlp"])  # fmt: skip
    assert "=none" not in page and "=False" not in page and all(f">{html.escape(n)}<" in page for n in names)
    console.strategy_verdicts(decide.strategy_verdicts(knobs, confidence=0.95))
    lines = capsys.readouterr().out.splitlines()[1:]
    assert len(lines) == 3 and all(" vs stock: " in line and "=none" not in line and "=False" not in line
                                   for line in lines)  # fmt: skip
    assert {line.split(" vs ")[0].removeprefix("  w2 mlp/tiny ") for line in lines} == names - {"stock"}
    # a row asking a default by name beside one asking nothing reads alike: the option that differs is kept
    from harness.results.values import configuration_labels

    assert configuration_labels(["stock", "stock"], ['{"comm_hook": "none"}', "{}"]) == [
        "stock comm_hook=none",
        "stock",
    ]


def test_the_overlap_chart_draws_the_pooled_share_the_sentence_above_it_says():
    """§4's sentence said 'zero hides 54%' (pooled) over a chart of one repeat's 45 %: the chart pools now."""
    from reports.aggregate import communication_over_repeats, typical_repeats
    from reports.figures.steps import exposed_communication

    comm = run(
        repeats("local", [30.0, 31.0, 32.0]),
        repeats("zero", [80.0, 82.0, 90.0], comm_ms=[100.0, 200.0, 300.0], exposed_comm_ms=[55.0, 60.0, 180.0]),
    )
    said = takeaways.communication(comm, workload="mlp")
    assert "zero hides 51% of its communication (200.0 ms per step, mean)" in said  # 1 − 295/600
    figure = exposed_communication(communication_over_repeats(typical_repeats(comm), comm), workload="mlp")
    shares = [t.y[0] for t in figure.data if t.hovertemplate.startswith("%{y:.0%} hidden")]
    assert shares == [pytest.approx(1 - 295 / 600)]  # the median repeat (82 ms) hid 70 %


def test_the_index_says_given_up_where_the_console_gave_the_verdict_up():
    """A resnet50 run's console said of zero vs stock 'out of reach within --max-repeats at this spread, so given
    up' and 'more repeats will not decide it', where the index said '(leads; too few repeats)'."""
    from harness.analysis.verdicts import decide

    spread = [0.5, 2.4, 1.0, 0.45, 1.9, 0.7, 2.2, 0.8]
    rows = run(repeats("stock", spread), repeats("zero", [s * 1.02 for s in reversed(spread)]))
    meta = {"config": {"repeats": "auto", "max_repeats": 20}}
    (verdict,) = decide.strategy_verdicts(rows, confidence=decide.look_confidence(20), max_repeats=20)
    assert verdict.given_up and not verdict.decided  # what the console said
    said = html.unescape(pages.run_headline(rows, meta))
    assert said.endswith(f"({headline.GIVEN_UP.format(next='zero')})")
    # what was given up, against what: 'leads; given up as out of reach' alone left a team lead asking
    assert "(leads; too few repeats to tell it from zero, the next, and given up as out of reach" in said
    assert pages.run_headline(rows).endswith("(leads; too few repeats)")  # a fixed --repeats gives nothing up


def test_the_scaling_sentence_ranks_caps_of_one_layout_as_one_row():
    """A resnet50 page ranked 'stock bucket_cap_mb=100 38% … bucket_cap_mb=1 31%' between caps that made the same
    buckets, one measurement (the answer table pools them): one row, the caps' figures pooled as their steps are."""
    one = [[0.13]] * 2
    rows = run(*(repeats("stock", [ms, ms], world=world, options={"bucket_cap_mb": cap}, bucket_sizes_mb=one,
                         samples_per_s=[1000 / ms] * 2)
                 for world, cap, ms in ((1, 1.0, 10.0), (1, 25.0, 10.0), (2, 1.0, 40.0), (2, 25.0, 25.0))),
               repeats("local", [8.0, 8.0], world=1, samples_per_s=[125.0] * 2),
               repeats("local", [20.0, 20.0], samples_per_s=[100.0] * 2))  # fmt: skip
    said = takeaways.scaling(rows, workload="mlp")
    assert "bucket_cap_mb=" not in said, said
    # against local: 25/(2·125) at cap 1, 40/(2·125) at cap 25, pooled as the steps are, geometric
    assert "stock (caps 1, 25 MiB: one bucket layout) 13%" in said, said
    assert "against their own one-rank step: stock (caps 1, 25 MiB: one bucket layout) 16%" in said, said


def test_caps_at_one_rank_are_not_ranked_and_their_spread_is_said_beside_two_ranks():
    """A page read 'At 1 rank: stock bucket_cap_mb=100 leads: 856.6 ms a step, an estimated 1.35× faster than stock
    bucket_cap_mb=25' where the caps have nothing to all-reduce: their 2× spread was the machine's drift. At one rank
    the spread is said as noise; at two, beside the one-rank control's, in one clause."""
    caps = [(5.0, [1733.6, 1740.0], [2437.8, 2440.0]), (25.0, [1154.2, 1150.0], [2883.5, 2880.0]),
            (100.0, [856.6, 860.0], [1864.7, 1860.0])]  # fmt: skip
    rows = [repeats("stock", ms, world=w, options={"bucket_cap_mb": cap}) for cap, one, two in caps
            for w, ms in ((1, one), (2, two))]  # fmt: skip
    frame = pooled.ranked(run(*rows), workload="mlp")
    one, two = (frame[frame["world_size"] == world] for world in (1, 2))
    said = winner.headline(one)
    assert said.startswith(
        "At 1 rank: <b>stock</b>'s caps have nothing to all-reduce: their 2.02× spread (858.3–1736.8 ms a step)"
    ), said
    assert "is this machine's noise; parity ok" in said and "faster" not in said
    control = evidence.caps_alone_spread(one)
    assert control == pytest.approx(1736.8 / 858.3, rel=1e-3)
    beside = html.unescape(winner.headline(two, control))
    assert "; stock's caps spread 1.55× here, 2.02× at 1 rank with nothing to all-reduce" in beside
    mixed = pooled.ranked(run(repeats("stock", [100.0, 101.0], world=1), repeats("zero", [90.0, 91.0], world=1)),
                          workload="mlp")  # fmt: skip
    assert evidence.caps_alone_spread(mixed) is None and "all-reduce" not in winner.headline(mixed)  # strategies

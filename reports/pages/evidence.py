"""How sure the run's answers are: the evidence that one strategy beats another (the ratio of the repeats'
geometric means, its interval and the verdicts' judgement, stats.verdict) in the words the run page, its
headline and the index use; and under `--repeats auto`, how the answer formed, look by look
(harness.analysis.verdicts.history). Pure: ranked rows (reports.pages.pooled.ranked) or decisions in, words out.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from harness.analysis import drift, roles, stats
from harness.analysis.verdicts import decide, layouts, sweep
from harness.results.values import configuration_label
from reports.pages.html import esc, table

SIGNIFICANT, NOT_SIGNIFICANT, TOO_FEW = "significant", "not significant", stats.TOO_FEW


def decided_rule(threshold: float) -> str:
    """When stats.verdict calls a ratio slower or faster, in the words of every page that quotes it."""
    band = f"{threshold * 100:g}%"
    return f"lies beyond 1 ± {band}, or is narrower than ±{band}, excludes 1 and has the ratio beyond it"


def no_change_rule(threshold: float) -> str:
    """When stats.verdict calls 'no significant change', in words: its test is the interval's width (half of
    it on the log scale at most log(1 + threshold)), not where the interval lies, so a narrow interval that
    reaches past the threshold on one side qualifies; the example is one (1.00 to just under (1 + t)²)."""
    band = f"{threshold * 100:g}%"
    reach = math.floor((1 + threshold) ** 2 * 100) / 100
    return (f"the interval is narrower than ±{band} (half its width, on the log scale, at most log "
            f"{1 + threshold:g}) but neither lies beyond 1 ± {band} nor excludes 1 with the ratio beyond {band}: "
            f"such an interval can still reach past {band} on one side, as 1.00–{reach:.2f} does")  # fmt: skip


def evidence(fast: pd.Series, slow: pd.Series) -> dict:
    """How sure it is that `fast` (ranked first: the lower geometric mean) beats `slow`: `times` = slow /
    fast as a ratio of the repeats' geometric means, the estimate its interval is built around
    (stats.ratio_interval, the figure the console's verdicts give), the interval at the rows' confidence
    (pooled.run_confidence), and the judgement the verdicts' rule (stats.verdict) gives: significant where
    it calls `slow` slower (beyond the 5 % threshold too), not significant where it calls no significant
    change (`no_change_rule`: a narrow interval that decides neither way, which can still reach past 5 %),
    too few repeats where it cannot tell (`needed`: the repeats a side it would take; under two a side, by a
    quiet machine's spread of launches, as the cap table estimates it). Two caps of one strategy's sweep are
    judged by the sweep's rule (launch by launch from stats.PAIRED_FROM repeats, sweep.cap_pair_verdict), so
    the answer and the cap table agree."""
    confidence = float(fast.get("confidence", stats.CONFIDENCE))
    judge = {"threshold": stats.DEFAULT_THRESHOLD, "confidence": confidence}
    if caps_of_one_sweep(fast, slow) and _one_layout(fast, slow):  # as the sweep calls it: one measurement
        return {"times": stats.geometric_mean(slow["repeat_ms"]) / stats.geometric_mean(fast["repeat_ms"]),
                "low": None, "high": None, "judged": NOT_SIGNIFICANT, "confidence": confidence,
                "repeats": min(len(fast["repeat_ms"]), len(slow["repeat_ms"])), "needed": None,
                "same_buckets": True}  # fmt: skip
    if caps_of_one_sweep(fast, slow):
        aligned = stats.same_launches(fast["repeat_ids"], slow["repeat_ids"])
        judged = sweep.cap_pair_verdict(fast["repeat_ms"], slow["repeat_ms"], aligned=aligned, **judge)
    else:
        judged = stats.verdict(fast["repeat_ms"], slow["repeat_ms"], **judge)
    known = bool(np.isfinite(judged["low"]) and np.isfinite(judged["high"]))  # under two repeats a side: no interval
    word = {stats.SLOWER: SIGNIFICANT, stats.NO_CHANGE: NOT_SIGNIFICANT}.get(judged["verdict"], TOO_FEW)
    low, high = (judged["low"], judged["high"]) if known else (None, None)
    needed = judged["repeats_needed"]  # under two a side: by a quiet machine's spread of launches, as the cap table's
    return {"times": judged["ratio"], "low": low, "high": high, "judged": word, "confidence": confidence,
            "repeats": judged["repeats"], "needed": needed}  # fmt: skip


def inverted(proof: dict) -> dict:
    """The same evidence with the ratio the other way round (the interval on the logs is symmetric, so its ends
    swap exactly): the faster one's step over the slower's, the direction every ratio on the page is said in."""
    flip = {key: (None if proof[key] is None else 1 / proof[key]) for key in ("times", "low", "high")}
    return {**proof, "times": flip["times"], "low": flip["high"], "high": flip["low"]}


def repeat_ids(group: pd.DataFrame) -> list[int] | None:
    """Which repeats the rows are (what tells two caps that ran side by side); None where a row does not say."""
    return [int(r) for r in group["repeat"]] if "repeat" in group and group["repeat"].notna().all() else None


def bucket_layouts(group: pd.DataFrame) -> frozenset | None:
    """The bucket layouts the rows' launches made (sweep.bucket_layouts); None where a row did not record one."""
    return sweep.bucket_layouts(group["bucket_sizes_mb"]) if "bucket_sizes_mb" in group else None


def caps_of_one_sweep(one: pd.Series, other: pd.Series) -> bool:
    """Whether two answer rows are two caps of one strategy with its other options alike (a cap sweep's pair)."""
    if one.get("repeat_ids") is None or other.get("repeat_ids") is None:
        return False
    options = [{k: v for k, v in row["options"].items() if k != "bucket_cap_mb"} for row in (one, other)]
    caps = [row.get("bucket_cap_mb") for row in (one, other)]
    return one["impl"] == other["impl"] and options[0] == options[1] and not any(pd.isna(c) for c in caps)


def swept_caps(row: pd.Series, contenders: pd.DataFrame) -> set[float]:
    """The caps of `row`'s sweep among the answer's rows (a row of caps of one layout counts each of them)."""
    caps: set[float] = set()
    for _, other in contenders.iterrows():
        if other["strategy"] == row["strategy"] or caps_of_one_sweep(row, other):
            pooled_caps, cap = other.get("pooled_caps"), other.get("bucket_cap_mb")
            if isinstance(pooled_caps, list):
                caps |= set(pooled_caps)
            elif cap is not None and not pd.isna(cap):  # a strategy without buckets has no cap to count
                caps.add(float(cap))
    return caps


def a_verdicts_pair(best: pd.Series, runner: pd.Series, reference: pd.Series | None, contenders) -> bool:
    """Whether the lead's pair is what one verdict of the run rests on alone, so that its 'need about M' is that
    verdict's, as the console and the cap table say it: a strategy against the reference, or two caps of one
    sweep where one is the 25 MiB cap the sweep judges every cap against (sweep.recommend_cap), or the sweep has
    no other cap. A walkthrough's page said 'need about 11' of two caps, neither 25 MiB, where the console said
    22 of the sweep's verdict: another pair, unnamed."""
    if reference is not None and reference["strategy"] in (best["strategy"], runner["strategy"]):
        return True
    if not caps_of_one_sweep(best, runner):
        return False
    caps = swept_caps(best, contenders)
    pair = {float(best["bucket_cap_mb"]), float(runner["bucket_cap_mb"])}
    return len(caps) == 2 or (stats.REFERENCE_CAP_MB in caps and stats.REFERENCE_CAP_MB in pair)


def _one_layout(one: pd.Series, other: pd.Series) -> bool:
    """Whether every launch of both rows made the same buckets (sweep.same_buckets: the caps are one measurement)."""
    layouts = [row.get("bucket_layouts") for row in (one, other)]
    return all(layouts) and len(layouts[0] | layouts[1]) == 1


def one_layout_pooled(group: pd.DataFrame) -> pd.DataFrame:
    """Answer rows at one world size (pooled.ranked's) with the caps of one strategy that made one bucket layout in
    every launch (two explicit caps or more) as one row, ranked among the rest: the headline's and the index's. A
    walkthrough's page opened 'stock bucket_cap_mb=100 leads (7.88 ms)', a cap measured twice, where 25 MiB made the
    same buckets and ran 8 times: one configuration, ranked as several. The rule is the verdicts' own
    (layouts.layout_points: each launch one repeat of it, the geometric mean of its caps' medians there)."""
    if group.empty or "bucket_layouts" not in group:
        return group
    sweeps: dict[tuple, dict[float, int]] = {}
    for index, row in group.iterrows():
        options = dict(row["options"])
        cap = options.pop("bucket_cap_mb", None)
        if row["is_floor"] or cap is None or row.get("repeat_ids") is None or row.get("pooled_caps"):
            continue
        sweeps.setdefault((row["impl"], json.dumps(options, sort_keys=True)), {})[float(cap)] = index
    pooled, merged = [], []
    for by_cap in sweeps.values():
        launches = {cap: _launches(group.loc[index]) for cap, index in by_cap.items()}
        for point in layouts.layout_points(launches):
            if len(point.caps) > 1:
                pooled.append(_pooled_caps(group.loc[[by_cap[cap] for cap in point.caps]], point))
                merged += [by_cap[cap] for cap in point.caps]
    if not pooled:
        return group
    kept = group.drop(index=merged).assign(pooled_caps=None)
    frame = pd.concat([kept, pd.DataFrame(pooled).astype(object)], ignore_index=True)
    frame = frame.assign(step_ms=frame["step_ms"].astype(float), is_floor=frame["is_floor"].astype(bool))
    return frame.sort_values(["is_floor", "step_ms"], kind="stable").reset_index(drop=True)


def _launches(row: pd.Series) -> list[layouts.Launch]:
    """A pooled answer row's launches as layouts.layout_points takes them: its one layout for each, where it made one
    (else none: the row is not pooled)."""
    made = row.get("bucket_layouts")
    layout = list(next(iter(made))) if made and len(made) == 1 else None
    return [(launch, ms, layout) for launch, ms in zip(row["repeat_ids"], row["repeat_ms"], strict=True)]


def _pooled_caps(rows: pd.DataFrame, point: layouts.Point) -> dict:
    """One strategy's caps that made one layout (`point`), as one answer row: per launch the geometric mean of its
    caps' medians, named by the caps as typed; the 25 MiB cap's row, where pooled, lends the rest (it is the
    reference's stand-in), its cap too: against stock's default layout, where that made the same buckets, it is
    still one measurement."""
    typed = [float(options["bucket_cap_mb"]) for options in rows["options"]]
    base = rows.iloc[typed.index(point.cap)]
    medians = list(point.medians)
    parity = set(rows["parity_ok"])
    judged = False if False in parity else (True if True in parity else None)
    notes = [(cap, note) for cap, note in sorted(zip(typed, rows["noise"], strict=True)) if note]
    noisy = f"noisy at cap{'s' * (len(notes) > 1)} {layouts.cap_words([cap for cap, _ in notes])}"
    cvs = [cv for cv in rows["cv"] if cv is not None and not pd.isna(cv)]
    label = configuration_label(base["impl"], base["options"], without=("bucket_cap_mb",))
    return {**base.to_dict(), "strategy": layouts.pooled_label(label, point.caps), "repeat_ms": medians,
            "repeat_ids": list(point.repeats), "repeats": len(medians), "step_ms": stats.geometric_mean(medians),
            "first_bucket_cap_mb": None, "config_ids": frozenset().union(*rows["config_ids"]),
            "pooled_caps": list(point.caps), "parity_ok": judged,
            **{figure: _pooled_figure(rows, figure) for figure in ("scaling_efficiency",
                                                                   "scaling_efficiency_vs_local")},
            "cv": float(np.median(cvs)) if cvs else None,
            "noise": f"{noisy} (the table says how)" if notes else "",  # the headline's; the table's cell, each cap's
            "noise_by_cap": "; ".join(f"cap {cap:g}: {note}" for cap, note in notes)}  # fmt: skip


def _pooled_figure(rows: pd.DataFrame, column: str) -> float | None:
    """A scaling figure of caps of one layout as one row: the geometric mean of the caps' figures, each weighed by
    its repeats, as the row's step pools their launches (the 25 MiB cap's own figure stood for all: a run page ranked
    'stock bucket_cap_mb=100 38% … bucket_cap_mb=1 31%' between caps that were one measurement); None where a cap
    has none."""
    found = [(float(v), int(n)) for v, n in zip(rows.get(column, []), rows["repeats"], strict=True)
             if v is not None and not pd.isna(v)]  # fmt: skip
    if not found or len(found) < len(rows):
        return None
    return float(np.exp(sum(n * np.log(v) for v, n in found) / sum(n for _, n in found)))


def too_few_text(proof: dict, *, pair: bool = False) -> str:
    """What an undecided comparison rests on and what would settle it: '--repeats 2 or more; have 1, need about 7'
    without an interval (the cap table's words for the same guess), else '95% interval 0.90–1.30; have 3 repeats,
    need about 9' (stats.needed_text). `pair`: a comparison no verdict of the run rests on alone, whose need is
    named as the pair's ('these two need about 9'), not read as a verdict's, which the console says."""
    need = ("these two " if pair else "") + stats.needed_text(proof["needed"], proof["repeats"])
    if proof["low"] is None:
        guess = f"; have {proof['repeats']}, {need}" if proof.get("needed") else ""
        return f"--repeats 2 or more{guess}"
    return f"{interval_text(proof)}; have {proof['repeats']} repeats, {need}"


def interval_text(proof: dict) -> str:
    return f"{proof['confidence'] * 100:.3g}% interval {sweep.ratio_interval_text(proof['low'], proof['high'])}"


def levels_note(frames: list[pd.DataFrame], config: dict, *, swept: bool = False) -> str:
    """Why a page's ratio intervals are at two levels, said once, where it shows both: '--repeats auto' judges each
    verdict at every look at 1 − 5 %/looks (decide.look_confidence), one rank at 95 % (it never judges there). A
    page read '95% interval' at one rank and '98.3% interval' at two with no word why. The looks' level is the ratios'
    only: where the run `swept` a cap, one cap's own step interval (the sweep's whiskers, the cap table's CI:
    stats.center_interval) stays at 95 %, which a note of every interval at 2 ranks contradicted."""
    max_repeats = int(config.get("max_repeats") or decide.DEFAULT_MAX_REPEATS)
    level, looks = decide.confidence_for(config.get("repeats"), max_repeats), decide.looks(max_repeats)
    shown = [f for f in frames if not f.empty and ((f["world_size"] > 1) & (f["repeats"] >= stats.MIN_REPEATS)).any()]
    if not shown or round(level, 4) == round(stats.CONFIDENCE, 4):
        return ""
    one_rank = any(((f["world_size"] == 1) & (f["repeats"] >= stats.MIN_REPEATS)).any() for f in shown)
    also = f" At one rank, which it never judges, {stats.CONFIDENCE:.0%}." if one_rank else ""
    steps = (f" The cap sweep's interval of one cap's own step (its whiskers, the cap table's CI) is "
             f"{stats.CONFIDENCE:.0%}: no verdict is judged on it.") if swept else ""  # fmt: skip
    return (f"<p class=note>Ratio intervals at 2 ranks or more (a strategy's step over another's, a cap's over another "
            f"cap's) are {level * 100:.3g}%, not {stats.CONFIDENCE:.0%}: --repeats auto judged each verdict at up to "
            f"{len(looks)} looks (after {', '.join(map(str, looks))} repeats), each at {level * 100:.3g}%, so that all "
            f"looks together call a change wrongly at most {decide.ALPHA:.0%} of the time.{also}{steps}"
            "</p>")  # fmt: skip


NO_CHANGE_SHOWN = f"no {stats.DEFAULT_THRESHOLD:.0%} change shown"
"""The verdicts' 'no significant change' in a cell: its interval may well exclude 1 (1.01–1.08), so 'not
significant' would contradict the interval beside it; what it has not shown is a change that counts."""
CELL_DOUBT = {SIGNIFICANT: "", NOT_SIGNIFICANT: f", {NO_CHANGE_SHOWN}", TOO_FEW: ", too few repeats to tell"}


def decided_text(row) -> str:
    """'after 2 repeats', or why not: open after N (what the evidence bounds so far, and how many repeats it
    would need)."""
    if pd.notna(row.decided_after):
        return f"after {stats.repeats_text(int(row.decided_after))}"
    needed = None if pd.isna(row.repeats_needed) else int(row.repeats_needed)
    so_far = getattr(row, "so_far", "")
    return stats.open_text(int(row.repeats), so_far if isinstance(so_far, str) else "", needed)


def decisions_section(decisions: pd.DataFrame, config: dict) -> str:
    """'' unless the run repeated until decided; else when each verdict was decided, and the rule's looks."""
    if decisions.empty:
        return ""
    max_repeats = int(config.get("max_repeats") or decide.DEFAULT_MAX_REPEATS)
    looks = ", ".join(str(n) for n in decide.looks(max_repeats))
    confidence = decide.look_confidence(max_repeats)
    intro = (f"<p>--repeats auto judged the verdicts after {esc(looks)} repeats of each configuration still "
             f"open, each look at {confidence:.2%} confidence, so that all looks together call a change wrongly "
             f"at most {decide.ALPHA:.0%} of the time (docs/statistics.md). A decided verdict ran no more repeats "
             "unless an open one rested on the same configurations.</p>")  # fmt: skip
    ordered = decisions.sort_values(["decided", "decided_after", "subject"], ascending=[False, True, True])
    rows = [[esc(r.subject), esc(r.kind), esc(decided_text(r)), esc(r.word)] for r in ordered.itertuples()]
    classes = ["" if pd.notna(r.decided_after) else "open" for r in ordered.itertuples()]
    heading = "<h3 id=decided>When each verdict was decided</h3>"
    return heading + intro + table(["verdict", "kind", "decided", "verdict now"], rows, row_classes=classes)


# The answer's caption: the rules its ratios, intervals and words follow (said under reports.pages.answer's tables).
CAPTION = (
    "Ranked by step time: each repeat's median step (slowest rank per step), then the geometric mean over "
    "repeats, the estimate every ratio, verdict and recommended cap on this page is built around. "
    "'× stock's step' compares with stock as DDP ships it (no options: first bucket 1 MiB, then 25 MiB; where the run "
    "has none, with the stand-in the column names, below): the ratio of the repeats' geometric means, the strategy's "
    "step over stock's, as every ratio on this page and the console's verdicts run (under 1, also said as 'N× "
    "faster'), and, in brackets, the interval over repeats of that same ratio (Welch's t on the logs of the "
    f"repeats' medians; two caps of one sweep that ran side by side from {stats.PAIRED_FROM} repeats on, the paired "
    "t launch by launch, as the cap table judges them: 95 %, or under --repeats auto the confidence its stopping "
    "rule judges each look at, "
    "99.5 % at the default --max-repeats 20, except at one rank, which that rule never judges), which "
    f"needs two repeats a side; '{NO_CHANGE_SHOWN}' where the verdicts' rule calls no significant change (the "
    "interval may exclude 1: a change under the threshold is no change that counts): "
    f"{no_change_rule(stats.DEFAULT_THRESHOLD)}; 'too few repeats to tell' where the interval is too wide to say "
    "either. A winner is 'fastest' only when it beats the next strategy so, else it "
    "'leads'. 'comm. hidden' is 1 − Σ not hidden / "
    "Σ communication over the repeats (their per-step means). Noise is the repeats' median step CV (noisy above "
    f"{stats.NOISY_CV:g}), repeats whose medians disagree by more than {stats.NOISY_CV:.0%}, and steps that drift "
    f"within the measured window in most repeats (the last quarter's median at least {drift.DRIFT_FLOOR:.0%} and "
    f"{drift.DRIFT_Z:g} standard errors from the first half's: docs/statistics.md). 'floor' is local: "
    "every rank trains alone, no communication. It is measured like the rest (the geometric mean of its repeats, "
    "with their noise), not an exact bound: a strategy can come out below it, and a note under its table says where."
)
POOLED_CAPS = (
    " Caps of one strategy that made one bucket layout in every launch are one configuration, one row, in the tables, "
    "the headlines and section 1 ('stock (caps 5, 25 MiB: one bucket layout)'): each launch one repeat of it, the "
    "geometric mean of its caps' medians there, so its step ('…, both caps' launches pooled') and its ratios are of "
    "those caps' launches pooled, not of one of them; its noise, each cap's."
)
STAND_IN = (
    " This run has no stock row without options, so stock at an explicit bucket_cap_mb=25 stands in, named as "
    "such: since torch 2.9 an explicit cap caps the first bucket too, which DDP's default (1 MiB) does not."
)


def stand_in_note(reference: pd.Series | None) -> str:
    """The caption's words where the reference the page compares with is not DDP as shipped: STAND_IN for the 25 MiB
    cap; where every stock row set an option the model needs (roles.needed_by_every), that those stand in, named with
    it; '' for DDP as shipped."""
    if reference is None or not roles.beyond_defaults(reference["impl"], reference["options"]):
        return ""
    needed = roles.needed_by_every([reference["impl"]], [reference["options"]])
    if not needed:
        return STAND_IN
    said = ", ".join(f"{key}={value}" for key, value in needed.items())
    return (f" Every {reference['impl']} row of this run set {said}, an option some models need for it to run at all "
            f"(not one tuned for speed), so those rows stand in for {reference['impl']} as shipped, named with it: "
            "without it, a model whose loss leaves parameters unused fails.")  # fmt: skip


def caps_alone_spread(contenders: pd.DataFrame) -> float | None:
    """The slowest step over the fastest where `contenders` (one world size's, the floor apart) are bucket caps of one
    strategy alone, its other options alike; None otherwise. At one rank they have nothing to all-reduce, so their
    spread is the machine's noise (a page ranked convnext_tiny's caps there, '1.35× faster', from a 2× spread)."""
    if len(contenders) < 2 or contenders["impl"].nunique() != 1:
        return None
    others = {json.dumps({k: v for k, v in dict(o).items() if k != "bucket_cap_mb"}, sort_keys=True, default=str)
              for o in contenders["options"]}  # fmt: skip
    steps = contenders["step_ms"].astype(float)
    return float(steps.max() / steps.min()) if len(others) == 1 and steps.min() > 0 else None

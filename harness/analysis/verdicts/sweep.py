"""Bucket-cap sweeps: from a run's rows to a recommended `bucket_cap_mb` per strategy and world size.

The evidence per cap is its repeats (each repeat's median step); a cap is recommended only when it
beats the 25 MiB cap significantly and by at least the threshold (`stats.verdict`, as `compare`
judges), else the optimum is 'flat: any of …', or there were too few repeats to tell
(docs/statistics.md). Nothing is recommended where nothing communicates: world size 1 and the
`local` baseline.

A sweep point is a bucket layout, not just a cap: since torch 2.9 an explicit `bucket_cap_mb` caps
the first bucket too, so a row that gave no cap (DDP's default layout: 25 MiB, first bucket 1 MiB)
and a row that gave 25 (first bucket 25 MiB) are different measurements and are never pooled.

Pure: DataFrames in, a DataFrame out; `write_run_recommendations` alone reads a run and writes the
result next to it (`recommendations.parquet`), which the report and `predict` show.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

import impls
from harness.analysis import roles, stats
from harness.analysis.verdicts import layouts
from harness.analysis.verdicts.cap_verdict import cap_pair_verdict as cap_pair_verdict
from harness.analysis.verdicts.cap_verdict import recommend_cap as recommend_cap
from harness.results import store
from harness.results.values import configuration_label, options_of, ratio_number

GROUP_KEYS = ("impl", "other_options", "workload", "size", "batch_size", "grad_accum",
              "dtype", "optimizer", "world_size", "nnodes")  # fmt: skip
LAYOUT_KEYS = ("cap_given", "first_bucket_cap_mb")
"""Besides GROUP_KEYS, what keeps two layouts apart: whether the cap was an option (DDP's default layout
when not), and, where one cap was measured with several first buckets (a resume under another torch), the
first bucket."""


def other_options(options_json: str | None) -> str:
    """A configuration's options without its cap, as one comparable text (a static_graph row is not a plain one)."""
    options = options_of(options_json)
    options.pop("bucket_cap_mb", None)
    return json.dumps(options, sort_keys=True)


def label(row: pd.Series | dict) -> str:
    """'stock comm_hook=bf16': the strategy a sweep's row (or key) is of, with the options besides the cap that its
    strategy as shipped does not have: a sweep of four hook and find_unused_parameters pairs read four alike rows."""
    return configuration_label(row["impl"], row.get("other_options"), grad_accum=row.get("grad_accum"))


def given_cap(options_json: str | None) -> float | None:
    """The bucket_cap_mb a configuration gave as an option; None when it gave none (DDP's default layout,
    first bucket 1 MiB, recorded as 25: never pooled with an explicit 25, whose first bucket is 25 on
    torch ≥ 2.9)."""
    cap = options_of(options_json).get("bucket_cap_mb")
    return None if cap is None else float(cap)


def cap_given(options_json: str | None) -> bool:
    return given_cap(options_json) is not None


def swept_cap(configs: pd.DataFrame) -> pd.Series:
    """Each row's cap as a sweep names it: the bucket_cap_mb it gave, where it gave one and a layout was
    recorded, else the recorded one (DDP keeps whole bytes: 0.05 MiB is 52,428 bytes, recorded 0.0499992,
    and a recommendation must read 'bucket_cap_mb=0.05', the value to type)."""
    recorded = configs["bucket_cap_mb"]
    given = configs["impl_options"].map(given_cap).astype(float)
    return given.where(recorded.notna() & given.notna(), recorded)


def step_samples(configs: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Per configuration and measured step: the slowest rank's time, with the configuration's keys."""
    measured = steps[~steps["warmup"]]
    slowest = measured.groupby(["config_id", "step"], as_index=False)["step_ms"].max()
    keys = configs[configs["status"] == "ok"].assign(
        other_options=lambda c: c["impl_options"].map(other_options),
        cap_given=lambda c: c["impl_options"].map(cap_given),
        bucket_cap_mb=swept_cap,
    )
    if "first_bucket_cap_mb" not in keys:  # written before the first bucket was recorded
        keys = keys.assign(first_bucket_cap_mb=float("nan"))
    if "repeat" not in keys:  # rows without their repeat: no two can be paired by launch
        keys = keys.assign(repeat=-1)
    if "bucket_sizes_mb" not in keys:  # the buckets each cap made: where unrecorded, unknown
        keys = keys.assign(bucket_sizes_mb=None)
    columns = ["config_id", "repeat", "bucket_cap_mb", "bucket_sizes_mb", *GROUP_KEYS, *LAYOUT_KEYS]
    return slowest.merge(keys[columns], on="config_id")


def _layouts(group: pd.DataFrame):
    """One sweep per bucket-layout rule: rows that gave a cap apart from rows that did not (DDP's
    default layout), and split by first bucket where one cap was measured with several."""
    for _, same_rule in group.groupby("cap_given"):
        firsts = same_rule.groupby("bucket_cap_mb")["first_bucket_cap_mb"].nunique(dropna=False)
        if (firsts > 1).any():
            yield from (rows for _, rows in same_rule.groupby("first_bucket_cap_mb", dropna=False))
        else:
            yield same_rule


def _communicates(keys: dict) -> bool:
    return keys["world_size"] > 1  # every node's ranks


def sweeps(configs: pd.DataFrame, steps: pd.DataFrame):
    """Each bucket-cap sweep of a run: (its setup keys, {cap: the step samples of that cap's repeats}), for
    every communicating strategy × setup × world size × layout rule measured at two caps or more."""
    configs = configs[~roles.is_baseline(configs)]  # the baseline communicates nothing: no cap to choose
    if configs.empty or steps.empty:
        return
    samples = step_samples(configs, steps).dropna(subset=["bucket_cap_mb"])
    for keys, setup_rows in samples.groupby(list(GROUP_KEYS), dropna=False):  # a null key (older rows) is a key too
        setup = dict(zip(GROUP_KEYS, keys, strict=True))
        if not _communicates(setup):
            continue
        for group in _layouts(setup_rows):
            by_cap = {float(cap): g for cap, g in group.groupby("bucket_cap_mb")}
            if len(by_cap) >= 2:
                yield setup, by_cap


def recommendations(
    configs: pd.DataFrame, steps: pd.DataFrame, *, confidence: float = stats.CONFIDENCE
) -> pd.DataFrame:
    """One row per communicating strategy × setup × world size measured at two or more bucket caps;
    `confidence`: of each verdict's interval (raised by `--repeats auto` for its repeated looks)."""
    found = [{**setup, **recommend(by_cap, confidence=confidence)} for setup, by_cap in sweeps(configs, steps)]
    return pd.DataFrame(found)


def cap_repeats(by_cap: dict[float, pd.DataFrame]) -> tuple[dict[float, list[dict]], bool, list[layouts.Point]]:
    """Each cap's repeat summaries (stats.repeat_summary) in repeat order, whether every point ran once in each of
    the same repeats (a repeat's caps share one launch: they may be judged launch by launch), and the points the
    sweep judges (layouts.layout_points: caps that made one bucket layout in every launch are one)."""
    by_repeat = {cap: sorted(((int(r["repeat"].iloc[0]), stats.repeat_summary(r.sort_values("step")["step_ms"]),
                               r["bucket_sizes_mb"].iloc[0]) for _, r in g.groupby("config_id")),
                             key=lambda found: found[0])
                 for cap, g in by_cap.items()}  # fmt: skip
    launches = {cap: [(None if repeat < 0 else repeat, summary["median_ms"], sizes) for repeat, summary, sizes in found]
                for cap, found in by_repeat.items()}  # fmt: skip
    points = layouts.layout_points(launches)
    known = all(None not in point.repeats for point in points)
    aligned = known and stats.same_launches(*(point.repeats for point in points))
    return {cap: [summary for _, summary, _ in found] for cap, found in by_repeat.items()}, aligned, points


def cap_figures(repeats: dict[float, list[dict]]) -> dict[float, list[float]]:
    """Each cap's repeat medians (ms), from `cap_repeats`' summaries."""
    return {cap: [r["median_ms"] for r in reps] for cap, reps in repeats.items()}


def point_figures(points: list[layouts.Point]) -> dict[float, list[float]]:
    """Each point's step per launch (ms), keyed by the cap that names it (layouts.Point.cap)."""
    return {point.cap: list(point.medians) for point in points}


def recommend(
    by_cap: dict[float, pd.DataFrame], *, confidence: float = stats.CONFIDENCE, summarised: tuple | None = None
) -> dict:
    """One sweep's decision from its caps' rows (each configuration id one repeat): its points judged (caps that made
    one bucket layout in every launch are one point, layouts.layout_points), launch by launch where every point ran
    once in each of the same repeats (a repeat's caps share one launch), from stats.PAIRED_FROM of them.
    `summarised`: `cap_repeats(by_cap)`, where the caller has it already."""
    repeats, aligned, points = summarised or cap_repeats(by_cap)
    same = same_buckets(by_cap)
    if same is not None or len(points) == 1:  # one layout under every cap: one program, one point
        best = recommend_cap(_one_point(points, cap_figures(repeats)), confidence=confidence, aligned=aligned)
        best.update(decision=stats.FLAT, equivalent_caps_mb=sorted(by_cap), repeats_needed=None,  # nothing to tell
                    repeats=min(len(reps) for reps in repeats.values()),
                    **dict.fromkeys(NO_RATIO))  # fmt: skip
    else:
        best = recommend_cap(point_figures(points), confidence=confidence, aligned=aligned)
        caps_of = {point.cap: point.caps for point in points}
        best["equivalent_caps_mb"] = sorted(c for cap in best["equivalent_caps_mb"] for c in caps_of[cap])
    best["equivalent_caps_mb"] = json.dumps(best["equivalent_caps_mb"])
    same_text = None if same is None else json.dumps(same)
    pooled = [list(point.caps) for point in points if len(point.caps) > 1] if same is None else []
    return {
        "caps_mb": json.dumps(sorted(by_cap)),
        **best,
        "same_buckets_mb": same_text,
        "noise": _noise(repeats),
        "one_layout_caps_mb": json.dumps(pooled) if pooled else None,
    }


NO_RATIO = ("gain_vs_default", "gain_low", "gain_high", "next_cap_mb", "next_gain", "next_gain_low", "next_gain_high")
"""A sweep's ratios between its points: none where every cap made one layout (their figures differ by the launches)."""


def _one_point(points: list[layouts.Point], figures: dict[float, list[float]]) -> dict[float, list[float]]:
    """Every cap of one layout as the one point they are, named by its cap (25 MiB where swept): per launch the
    geometric mean of its caps' medians (layouts.layout_points); where the launches went unrecorded (older rows)
    every cap's every repeat."""
    if len(points) == 1:
        return point_figures(points)
    return {layouts.Point(tuple(sorted(figures)), (), ()).cap: [ms for cap in sorted(figures) for ms in figures[cap]]}


def same_buckets(by_cap: dict[float, pd.DataFrame]) -> list[float] | None:
    """The one bucket layout (MiB, in launch order) every cap of a sweep made in every repeat, where they all
    made the same (a model whose gradients fit under the smallest cap gets one bucket whatever the cap);
    None where the layouts differ or a row did not record its buckets."""
    launches = (sizes for rows in by_cap.values() for sizes in rows.drop_duplicates("config_id")["bucket_sizes_mb"])
    found = layouts.bucket_layouts(launches)
    return list(next(iter(found))) if found is not None and len(found) == 1 else None


bucket_layouts = layouts.bucket_layouts


def same_caps(row: pd.Series, cap: float) -> list[float]:
    """The caps besides `cap` that made its buckets, where the sweep pooled them as one point (`one_layout_caps_mb`)."""
    pooled = row.get("one_layout_caps_mb")
    groups = json.loads(pooled) if isinstance(pooled, str) else []
    return next(([c for c in caps if c != cap] for caps in groups if cap in caps), [])


def _noise(repeats: dict[float, list[dict]]) -> str:
    """The caps whose steps are noisy or drift, or whose repeats disagree, and why ('' when none)."""
    notes = {cap: stats.repeats_noise_note(reps) for cap, reps in repeats.items()}
    return "; ".join(f"cap {cap:g}: {note}" for cap, note in sorted(notes.items()) if note)


ONLY_BETWEEN = "a cap splits buckets only between parameters, so a smaller one may not split it"


def answer(row: pd.Series, *, why: bool = True) -> str:
    """The decision in words, for the console and the run page: the cap to use, or 'flat: any of …',
    or 'too few repeats to tell (have N, need about M)'; `why`: the buckets every cap made and why (ONLY_BETWEEN),
    which a page says once, else '(every cap makes the same buckets)'."""
    as_good = ", ".join(f"{c:g}" for c in json.loads(row["equivalent_caps_mb"]))
    if pd.isna(row.get("decision")):  # written before decisions were made: the fastest, no verdict
        return f"fastest: {row['best_cap_mb']:g} MiB (no verdict recorded: a run from before repeats were judged)"
    if row["decision"] == stats.RECOMMEND:  # the first a value to type; the caps that made its buckets after
        return f"use bucket_cap_mb={layouts.or_same(row['best_cap_mb'], same_caps(row, row['best_cap_mb']))}"
    if row["decision"] == stats.FLAT:
        same = row.get("same_buckets_mb")
        if isinstance(same, str) and not why:
            return f"flat: any of {as_good} MiB (every cap makes the same buckets)"
        if isinstance(same, str):
            sizes = json.loads(same)
            # not 'a cap below it splits it': a review's cap 1 made the same one bucket of 1.01 MiB, one parameter
            made = (f"one bucket of {sizes[0]:.3g} MiB, every gradient: {ONLY_BETWEEN}" if len(sizes) == 1
                    else f"the same {len(sizes)} buckets: the caps are one measurement")  # fmt: skip
            return f"flat: any of {as_good} MiB (every cap makes {made})"
        return f"flat: any of {as_good} MiB"
    return (
        f"too few repeats to tell (have {row['repeats']}, {stats.needed_text(row['repeats_needed'], row['repeats'])})"
    )


def point_text(row: pd.Series, cap: float, unit: str = " MiB") -> str:
    """'1 MiB', or where the sweep pooled caps that made its buckets, '1 MiB (or 2: the same buckets)'."""
    return layouts.or_same(cap, same_caps(row, cap), unit=unit)


def versus_reference(row: pd.Series) -> str:
    """'25 MiB takes 1.49× as long (99.5% interval 1.31–1.70)' (a ratio of step times, so its direction
    cannot be misread; its interval at the verdicts' confidence, where recorded: an undecided sweep still
    bounds what its fastest cap can win); where 25 MiB is the fastest, how far the next point is behind it ('the
    next, 5 MiB, takes 1.12× as long …'); '' when 25 MiB was not measured, or makes the same buckets as every cap
    (their ratio is the launches' noise)."""
    if isinstance(row.get("same_buckets_mb"), str):
        return ""
    if row["best_cap_mb"] == stats.REFERENCE_CAP_MB:
        ahead = row.get("next_cap_mb")
        if ahead is None or pd.isna(ahead):
            return ""
        said = _as_long(row, "next_gain", "next_gain_low", "next_gain_high")
        return f"the next, {point_text(row, float(ahead))}, {said}" if said else ""
    said = _as_long(row, "gain_vs_default", "gain_low", "gain_high")
    return f"{point_text(row, stats.REFERENCE_CAP_MB)} {said}" if said else ""


def _as_long(row: pd.Series, gain: str, low: str, high: str) -> str:
    """'takes 1.49× as long (99.5% interval 1.31–1.70)' from a gain over the fastest and its interval's ends."""
    gain, low, high, confidence = (row.get(key) for key in (gain, low, high, "confidence"))
    if gain is None or pd.isna(gain):
        return ""
    known = all(v is not None and not pd.isna(v) for v in (low, high, confidence))
    interval = f" ({confidence * 100:.3g}% interval {ratio_interval_text(1 + low, 1 + high)})" if known else ""
    return f"takes {1 + gain:.2f}× as long{interval}"


def no_reference_ratio(row: pd.Series) -> str:
    """Why a sweep's row has no `versus_reference` (a review read the blank cells as a fault): the same buckets at
    every cap, 25 MiB the fastest, or 25 MiB not swept."""
    if isinstance(row.get("same_buckets_mb"), str):
        return "the same buckets as every cap"
    if row["best_cap_mb"] == stats.REFERENCE_CAP_MB:
        return "the fastest"  # a row written before the next point's ratio was recorded
    return "not in the sweep" if stats.REFERENCE_CAP_MB not in json.loads(row["caps_mb"]) else ""


def without_reference(frame: pd.DataFrame) -> str:
    """Where a sweep lacks the 25 MiB cap: the rule its verdict follows there and, where such a verdict is open, why
    the command that would decide it keeps the sweep's caps; '' where every sweep has 25 MiB (a review read '25 MiB:
    not in the sweep' beside a rule that named 25 MiB alone, and a command to decide it that never added 25)."""
    lacking = frame[[stats.REFERENCE_CAP_MB not in json.loads(caps) for caps in frame.get("caps_mb", [])]]
    if lacking.empty:
        return ""
    which = "no sweep here has it" if len(lacking) == len(frame) else f"{len(lacking)} of {len(frame)} sweeps lack it"
    said = (f"without {stats.REFERENCE_CAP_MB:g} MiB (DDP's default) in a sweep ({which}), when it beats every other "
            "cap swept, which says nothing against DDP's default")  # fmt: skip
    if not (lacking["decision"] == stats.TOO_FEW).any():
        return said
    return (
        f"{said}: the command that decides the open ones keeps the sweep's caps, as its repeats and time are "
        f"counted for them; add {stats.REFERENCE_CAP_MB:g} to its --bucket-cap-mb to judge them against DDP's default"
    )


TOO_WIDE = "too wide to bound it until more repeats narrow it"  # said inside brackets: no bracket of its own


def interval_text(low: float, high: float) -> str:
    """'20.36–23.10' (ms), or where it bounds nothing a reader can use (two repeats' t-interval: '20.36–169658.62')
    TOO_WIDE; '' where there is none."""
    if pd.isna(low):
        return ""
    return TOO_WIDE if high > 3 * max(low, 0.0) else f"{low:.2f}–{high:.2f}"


BOUNDS_NOTHING = 10.0
"""A ratio's interval with an end past this factor either way (below 1/10, above 10) bounds nothing a reader can use."""


def ratio_interval_text(low: float, high: float) -> str:
    """A ratio's interval, '0.69–1.37', or TOO_WIDE (as a step's, interval_text) where an end is past BOUNDS_NOTHING
    either way: every ratio's interval is said by this one rule (two repeats' intervals read '<0.01–>1000', 'too wide
    to bound it' and '0.01–183' on neighbouring lines)."""
    if low < 1 / BOUNDS_NOTHING or high > BOUNDS_NOTHING:
        return TOO_WIDE
    return f"{ratio_number(low)}–{ratio_number(high)}"


def describe(row: pd.Series, *, why: bool = True) -> str:
    """One line a person reads: the decision, the fastest cap and how sure, how much longer 25 MiB takes, the noise;
    `why`, as answer() takes it."""
    versus = versus_reference(row)
    gain = f"; {versus}" if versus else ""
    bounds = interval_text(row["best_ci_low_ms"], row["best_ci_high_ms"])
    interval = f", its step's 95% CI {bounds}" if bounds else ""  # the step's; the ratio's interval, after, is its own
    noise = f" [noisy: {row['noise']}]" if row.get("noise") else ""
    return (
        f"w{row['world_size']} {row['workload']}/{row['size']} {label(row)}: {answer(row, why=why)}; "
        f"{best_words(row)}: {row['best_step_ms']:.2f} ms{interval}{gain}; "
        f"the fewest repeats a cap had: {row['repeats']}{noise}"  # (auto reruns the open ones only)
    )


def best_words(row: pd.Series) -> str:
    """What `best_step_ms` is the step of: 'fastest 1 MiB', 'leading so far 1 MiB (or 2: the same buckets)', or where
    every cap made one layout, POOLED (no cap of them is faster: one program)."""
    if isinstance(row.get("same_buckets_mb"), str):
        return POOLED
    lead = "fastest" if row["decision"] != stats.TOO_FEW else "leading so far"  # 'fastest' is a decided word
    return f"{lead} {point_text(row, row['best_cap_mb'])}"


POOLED = "the caps' launches pooled"


def write_run_recommendations(
    run: Path, *, confidence: float = stats.CONFIDENCE, configs: pd.DataFrame | None = None
) -> pd.DataFrame:
    """A finished run's recommendations, written next to it when it swept bucket caps (else empty); `configs`: its
    rows where the caller has read them already."""
    configs = store.read_configs(run) if configs is None else configs
    frame = recommendations(configs, store.read_steps(run), confidence=confidence)
    if not frame.empty:
        store.write_recommendations(run, frame)
    return frame


def as_good_caps(table: pd.DataFrame, *, workload: str, size: str, world: int) -> list[float] | None:
    """The caps the stock sweep's best does not beat by the threshold (`equivalent_caps_mb`), where it has them."""
    if table.empty:
        return None
    rows = table[(table["impl"] == impls.reference_name()) & (table["workload"] == workload)
                 & (table["size"] == size) & (table["world_size"] == world)]  # fmt: skip
    return json.loads(rows["equivalent_caps_mb"].iloc[0]) if len(rows) == 1 else None

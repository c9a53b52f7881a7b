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
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

import impls
from harness.analysis import roles, stats
from harness.results import store
from harness.results.values import UNBOUNDED_RATIO, options_of, ratio_number

GROUP_KEYS = ("impl", "other_options", "workload", "size", "batch_size", "dtype", "optimizer", "world_size", "nnodes")
LAYOUT_KEYS = ("cap_given", "first_bucket_cap_mb")
"""Besides GROUP_KEYS, what keeps two layouts apart: whether the cap was an option (DDP's default layout
when not), and, where one cap was measured with several first buckets (a resume under another torch), the
first bucket."""


def other_options(options_json: str | None) -> str:
    """A configuration's options without its cap, as one comparable text (a static_graph row is not a plain one)."""
    options = options_of(options_json)
    options.pop("bucket_cap_mb", None)
    return json.dumps(options, sort_keys=True)


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


def cap_repeats(by_cap: dict[float, pd.DataFrame]) -> tuple[dict[float, list[dict]], bool]:
    """Each cap's repeat summaries (stats.repeat_summary) in repeat order, and whether every cap ran once in
    each of the same repeats (a repeat's caps share one launch: they may be judged launch by launch)."""
    by_repeat = {cap: sorted(((int(r["repeat"].iloc[0]), stats.repeat_summary(r.sort_values("step")["step_ms"]))
                              for _, r in g.groupby("config_id")), key=lambda pair: pair[0])
                 for cap, g in by_cap.items()}  # fmt: skip
    aligned = stats.same_launches(*([repeat for repeat, _ in pairs] for pairs in by_repeat.values()))
    return {cap: [summary for _, summary in pairs] for cap, pairs in by_repeat.items()}, aligned


def cap_figures(repeats: dict[float, list[dict]]) -> dict[float, list[float]]:
    """Each cap's repeat medians (ms), from `cap_repeats`' summaries."""
    return {cap: [r["median_ms"] for r in reps] for cap, reps in repeats.items()}


def recommend(
    by_cap: dict[float, pd.DataFrame], *, confidence: float = stats.CONFIDENCE, summarised: tuple | None = None
) -> dict:
    """One sweep's decision from its caps' rows (each configuration id one repeat), judged launch by launch
    where every cap ran once in each of the same repeats (a repeat's caps share one launch), from
    stats.PAIRED_FROM of them. `summarised`: `cap_repeats(by_cap)`, where the caller has it already."""
    repeats, aligned = summarised or cap_repeats(by_cap)
    figures = cap_figures(repeats)
    best = recommend_cap(figures, confidence=confidence, aligned=aligned)
    same = same_buckets(by_cap)
    if same is not None:  # one layout under every cap: the same measurement, whatever the repeats say
        best.update(decision=stats.FLAT, equivalent_caps_mb=sorted(by_cap), repeats_needed=None)  # nothing to tell
    best["equivalent_caps_mb"] = json.dumps(best["equivalent_caps_mb"])
    same_text = None if same is None else json.dumps(same)
    return {"caps_mb": json.dumps(sorted(by_cap)), **best, "same_buckets_mb": same_text, "noise": _noise(repeats)}


def same_buckets(by_cap: dict[float, pd.DataFrame]) -> list[float] | None:
    """The one bucket layout (MiB, in launch order) every cap of a sweep made in every repeat, where they all
    made the same (a model whose gradients fit under the smallest cap gets one bucket whatever the cap);
    None where the layouts differ or a row did not record its buckets."""
    launches = (sizes for rows in by_cap.values() for sizes in rows.drop_duplicates("config_id")["bucket_sizes_mb"])
    layouts = bucket_layouts(launches)
    return list(next(iter(layouts))) if layouts is not None and len(layouts) == 1 else None


def bucket_layouts(recorded: Iterable) -> frozenset | None:
    """The distinct bucket layouts (MiB, launch order) of launches' recorded `bucket_sizes_mb`; None where one
    launch did not record its buckets (then nothing can be said of them all)."""
    layouts = set()
    for sizes in recorded:
        if sizes is None or not hasattr(sizes, "__len__") or len(sizes) == 0:
            return None
        layouts.add(tuple(round(float(size), 6) for size in sizes))
    return frozenset(layouts)


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
    if row["decision"] == stats.RECOMMEND:
        return f"use bucket_cap_mb={row['best_cap_mb']:g}"
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
    return f"too few repeats to tell (have {row['repeats']}, {stats.needed_text(row['repeats_needed'])})"


def versus_reference(row: pd.Series) -> str:
    """'25 MiB takes 1.49× as long (99.5% interval 1.31–1.70)' (a ratio of step times, so its direction
    cannot be misread; its interval at the verdicts' confidence, where recorded: an undecided sweep still
    bounds what its fastest cap can win); '' when 25 MiB was not measured, is itself the fastest, or makes the
    same buckets as every cap (their ratio is the launches' noise)."""
    gain = row.get("gain_vs_default")
    if gain is None or pd.isna(gain) or row["best_cap_mb"] == stats.REFERENCE_CAP_MB:
        return ""
    if isinstance(row.get("same_buckets_mb"), str):
        return ""
    low, high, confidence = row.get("gain_low"), row.get("gain_high"), row.get("confidence")
    known = all(v is not None and not pd.isna(v) for v in (low, high, confidence))
    interval = f" ({confidence * 100:.3g}% interval {ratio_interval_text(1 + low, 1 + high)})" if known else ""
    return f"{stats.REFERENCE_CAP_MB:g} MiB takes {1 + gain:.2f}× as long{interval}"


def no_reference_ratio(row: pd.Series) -> str:
    """Why a sweep's row has no `versus_reference` (a review read the blank cells as a fault): the same buckets at
    every cap, 25 MiB the fastest, or 25 MiB not swept."""
    if isinstance(row.get("same_buckets_mb"), str):
        return "the same buckets as every cap"
    if row["best_cap_mb"] == stats.REFERENCE_CAP_MB:
        return "the fastest"
    return "not in the sweep" if stats.REFERENCE_CAP_MB not in json.loads(row["caps_mb"]) else ""


TOO_WIDE = "too wide to bound it (more repeats narrow it)"


def interval_text(low: float, high: float) -> str:
    """'20.36–23.10' (ms), or where it bounds nothing a reader can use (two repeats' t-interval: '20.36–169658.62')
    TOO_WIDE; '' where there is none."""
    if pd.isna(low):
        return ""
    return TOO_WIDE if high > 3 * max(low, 0.0) else f"{low:.2f}–{high:.2f}"


def ratio_interval_text(low: float, high: float) -> str:
    """A ratio's interval, '0.69–1.37', or TOO_WIDE (as a step's, interval_text) where an end is past what
    ratio_number writes as a figure: two repeats' interval read '<0.01–>1000' beside a step's 'too wide to bound it'."""
    return TOO_WIDE if low < 0.01 or high > UNBOUNDED_RATIO else f"{ratio_number(low)}–{ratio_number(high)}"


def describe(row: pd.Series, *, why: bool = True) -> str:
    """One line a person reads: the decision, the fastest cap and how sure, how much longer 25 MiB takes, the noise;
    `why`, as answer() takes it."""
    versus = versus_reference(row)
    gain = f"; {versus}" if versus else ""
    bounds = interval_text(row["best_ci_low_ms"], row["best_ci_high_ms"])
    interval = f", its step's 95% CI {bounds}" if bounds else ""  # the step's; the ratio's interval, after, is its own
    noise = f" [noisy: {row['noise']}]" if row.get("noise") else ""
    lead = "fastest" if row["decision"] != stats.TOO_FEW else "leading so far"  # 'fastest' is a decided word
    lead = ("by the launches' spread alone, " if isinstance(row.get("same_buckets_mb"), str) else "") + lead
    return (
        f"w{row['world_size']} {row['workload']}/{row['size']} {row['impl']}: {answer(row, why=why)} "
        f"({lead} {row['best_cap_mb']:g} MiB: {row['best_step_ms']:.2f} ms{interval}{gain}; "
        f"the fewest repeats a cap had: {row['repeats']}){noise}"  # (auto reruns the open ones only)
    )


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


def recommend_cap(
    figures_by_cap: dict[float, Sequence[float]],
    *,
    reference_cap: float = stats.REFERENCE_CAP_MB,
    threshold: float = stats.DEFAULT_THRESHOLD,
    confidence: float = stats.CONFIDENCE,
    aligned: bool = False,
) -> dict:
    """From each cap's repeat medians (`aligned`: the i-th of every cap ran in the same launch, so that from
    stats.PAIRED_FROM repeats on each cap is judged against the fastest launch by launch): the fastest cap,
    its interval, the caps it does not beat (how flat the optimum is), and the decision. Each rival is judged
    against the fastest by `stats.verdict`, the rule `compare` uses: 'recommend' only when the fastest is 'faster'
    than the reference cap (25 MiB: the value DDP uses when none is given) or, without it, than every other cap,
    that is significantly AND by at least the threshold; 'flat' when the repeats can tell it is not (one rival
    judged 'no significant change' is enough); 'too few repeats to tell' when they cannot tell which.

    `gain_vs_default` is the reference cap's step / the fastest's − 1. The reference is the cap
    the sweep measured at 25 MiB: given explicitly, as every cap of a sweep is, so on torch ≥ 2.9
    its first bucket is 25 MiB too, not the 1 MiB of DDP's layout when no cap is given."""
    centers = {cap: stats.center_interval(figures) for cap, figures in figures_by_cap.items()}
    best = min(centers, key=lambda cap: centers[cap][0])
    have = min(len(figures) for figures in figures_by_cap.values())
    paired = aligned and have >= stats.PAIRED_FROM
    judge = {"aligned": aligned, "threshold": threshold, "confidence": confidence}
    judged = {cap: cap_pair_verdict(figures, figures_by_cap[best], **judge) for cap, figures in figures_by_cap.items()
              if cap != best}  # fmt: skip
    words = {cap: found["verdict"] for cap, found in judged.items()}
    rivals = [reference_cap] if reference_cap in words else sorted(words)
    if all(words[cap] == stats.FASTER for cap in rivals):
        decision = stats.RECOMMEND
    elif any(words[cap] == stats.NO_CHANGE for cap in rivals):
        decision = stats.FLAT  # one rival the fastest surely does not beat rules a recommendation out
    elif any(words[cap] == stats.TOO_FEW for cap in rivals):
        decision = stats.TOO_FEW
    else:
        decision = stats.FLAT
    deciding = [judged[cap]["repeats_needed"] for cap in rivals]  # the most any verdict the decision rests on asks
    need = None if not deciding or None in deciding else max(deciding)
    if decision == stats.TOO_FEW and need is not None:
        need = max(need, have + 1)  # what is at hand did not decide: one more at least, as a verdict says
    reference, against = centers.get(reference_cap), judged.get(reference_cap)
    bounded = against is not None and bool(np.isfinite(against["low"]))
    return {
        "decision": decision,
        "best_cap_mb": best,
        "best_step_ms": centers[best][0],
        "best_ci_low_ms": centers[best][1],
        "best_ci_high_ms": centers[best][2],
        # Not beaten by the threshold: the caps 'flat: any of …' offers (every cap with one repeat).
        "equivalent_caps_mb": sorted(cap for cap in figures_by_cap if words.get(cap) != stats.FASTER),
        "gain_vs_default": reference[0] / centers[best][0] - 1 if reference else None,
        # At `confidence`, from the fastest's verdict against 25 MiB: at most what moving to it wins (null: none).
        "gain_low": 1 / against["high"] - 1 if bounded else None,
        "gain_high": 1 / against["low"] - 1 if bounded else None,
        "confidence": confidence,
        "repeats": have,
        "repeats_needed": need,
        "paired": paired,
    }


def cap_pair_verdict(
    base: Sequence[float], new: Sequence[float], *, aligned: bool, threshold: float, confidence: float
) -> dict:
    """Two caps of one sweep (`stats.verdict(base, new)`), as recommend_cap judges each rival against the fastest
    and the answer judges two caps: launch by launch from PAIRED_FROM repeats where they ran side by side
    (`aligned`). The repeats it needs are sized from this pair and the ratio seen, as `stats.verdict` sizes
    them: as independent sets while that decides before PAIRED_FROM, else launch by launch (never fewer than
    PAIRED_FROM, where pairing starts); one more at least while it is undecided."""
    have = min(len(base), len(new))
    paired = aligned and have >= stats.PAIRED_FROM
    judged = stats.verdict(base, new, threshold=threshold, confidence=confidence, paired=paired)
    judge = {"threshold": threshold, "confidence": confidence, "ratio": judged["ratio"]}
    need = stats.repeats_needed(stats.repeat_spread(base, new), **judge)
    if aligned and need is not None and need >= stats.PAIRED_FROM:
        together = stats.repeats_needed(stats.paired_spread((base, new)), paired=True, **judge)
        need = max(stats.PAIRED_FROM, together) if together is not None else need
    if judged["verdict"] == stats.TOO_FEW and need is not None:
        need = max(need, have + 1)
    return {**judged, "repeats_needed": need, "paired": paired}

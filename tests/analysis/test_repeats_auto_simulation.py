"""The acceptance of `--repeats auto`, by simulation: the sequential rule (harness.analysis.verdicts.decide) looks at
the evidence after every repeat and stops a verdict as soon as it is decided. Over the same scenarios as
the fixed-repeats acceptance (AR(1) steps around a per-launch offset, tests/analysis/test_verdict_simulation.py)
it must call identical code slower or faster at most 5 % of the time over all its looks, find a true 10 %
slowdown at least 80 % of the time, and, where the effect is 20 % or more, use fewer repeats than a fixed 5.
A verdict out of reach within --max-repeats (decide.out_of_reach) stops there, as in a run.

A sweep's caps run side by side in each launch, and from stats.PAIRED_FROM repeats on they are judged launch
by launch. Launches share part of their offset (measured here: a sweep's caps correlate 0.8–0.96 launch by
launch), so each sweep scenario with a launch offset is run with none and with 90 % of it shared; pairing
must keep the sweep's error rate when nothing is shared, and save repeats where much is.
Run with -s to see the table (docs/statistics.md quotes it).
"""

from __future__ import annotations

import numpy as np
from scipy import special

from harness.analysis import stats
from harness.analysis.verdicts import decide, sweep
from tests.analysis.test_verdict_simulation import SCENARIOS, repeat_medians

MAX_REPEATS = decide.DEFAULT_MAX_REPEATS
CONFIDENCE = decide.look_confidence(MAX_REPEATS)
PAIRS = 120
FIXED = stats.RECOMMENDED_REPEATS


def sequential(rng, ratio: float, *, phi: float, cv: float, offset: float) -> tuple[str, int]:
    """One verdict under the rule: both sides start with 2 repeats and grow to the next look while it is open."""
    draw = {"phi": phi, "cv": cv, "offset": offset}
    # Every repeat the rule may take, drawn at once; each look sees the first `look` of them, as a run would.
    base, new = repeat_medians(rng, MAX_REPEATS, **draw), repeat_medians(rng, MAX_REPEATS, scale=ratio, **draw)
    for look in decide.looks(MAX_REPEATS):
        judged = stats.verdict(base[:look], new[:look], threshold=stats.DEFAULT_THRESHOLD, confidence=CONFIDENCE)
        if judged["verdict"] != stats.TOO_FEW or decide.out_of_reach(
            base[:look], new[:look], max_repeats=MAX_REPEATS, confidence=CONFIDENCE, paired=False
        ):
            break
    return judged["verdict"], look


def sequential_sweep(rng, ratio: float, *, phi: float, cv: float, offset: float, shared: float) -> tuple[str, int]:
    """A two-cap sweep (the 25 MiB reference and a cap `ratio` as fast) under the same rule, both caps in each
    launch, which has the share `shared` of the offset's variance in common."""
    common = rng.normal(0, offset * np.sqrt(shared), MAX_REPEATS)
    own = {"phi": phi, "cv": cv, "offset": offset * np.sqrt(1 - shared), "common": common}
    every = {25.0: repeat_medians(rng, MAX_REPEATS, **own),
             1.0: repeat_medians(rng, MAX_REPEATS, scale=1 / ratio, **own)}  # fmt: skip
    for look in decide.looks(MAX_REPEATS):
        decided = sweep.recommend_cap({cap: figures[:look] for cap, figures in every.items()}, confidence=CONFIDENCE,
                                      aligned=True)  # fmt: skip
        if decided["decision"] != stats.TOO_FEW or decide.out_of_reach(
            every[1.0][:look],
            every[25.0][:look],
            max_repeats=MAX_REPEATS,
            confidence=CONFIDENCE,
            paired=look >= stats.PAIRED_FROM,
        ):  # two caps: the one comparison the sweep rests on
            break
    return decided["decision"], decided["repeats"]


def fixed(rng, ratio: float, *, phi: float, cv: float, offset: float) -> str:
    """The same verdict with a fixed 5 repeats a side and the fixed rule's 95 % interval."""
    draw = {"phi": phi, "cv": cv, "offset": offset}
    base, new = repeat_medians(rng, FIXED, **draw), repeat_medians(rng, FIXED, scale=ratio, **draw)
    return stats.verdict(base, new, threshold=stats.DEFAULT_THRESHOLD)["verdict"]


def spread(rng, *, phi: float, cv: float, offset: float) -> float:
    """The scenario's true spread of a repeat's median (sd of its log, from 4,000 simulated repeats)."""
    return float(np.std(np.log(repeat_medians(rng, 4000, phi=phi, cv=cv, offset=offset))))


def decidable(spread: float) -> bool:
    """Whether, at MAX_REPEATS a side, the interval of a ratio is narrow enough to call a 10 % change (its
    half-width within the threshold, as stats.verdict asks) in at least 80 % of runs for launches that spread
    this much: the expected half-width, widened by the 80th percentile of the estimated spread's own scatter
    (relative sd 1/√(2 df)), within the threshold."""
    df = 2 * MAX_REPEATS - 2
    half = stats.t_quantile(0.5 + CONFIDENCE / 2, df) * spread * np.sqrt(2 / MAX_REPEATS)
    return half * (1 + special.ndtri(0.8) / np.sqrt(2 * df)) <= np.log1p(stats.DEFAULT_THRESHOLD)


def rates(rng, *, phi: float, cv: float, offset: float) -> dict[str, float]:
    draw = {"phi": phi, "cv": cv, "offset": offset}
    same = [sequential(rng, 1.0, **draw) for _ in range(PAIRS)]
    slower10 = [sequential(rng, 1.10, **draw) for _ in range(PAIRS)]
    slower20 = [sequential(rng, 1.20, **draw) for _ in range(PAIRS)]
    return {
        "false": np.mean([word in (stats.SLOWER, stats.FASTER) for word, _ in same]),
        "power": np.mean([word == stats.SLOWER for word, _ in slower10]),
        "repeats_same": np.mean([n for _, n in same]),
        "repeats_10": np.mean([n for _, n in slower10]),
        "repeats_20": np.mean([n for _, n in slower20]),
        "right_20": np.mean([word == stats.SLOWER for word, _ in slower20]),
        "fixed_right_20": np.mean([fixed(rng, 1.20, **draw) == stats.SLOWER for _ in range(PAIRS)]),
        "spread": spread(rng, **draw),
    }


def sweep_rates(rng, *, shared: float, large: bool = True, **draw) -> dict[str, float]:
    """A sweep's false recommendations, its 10 % gains found and their repeats, and (`large`) its 20 % gains."""
    same = [sequential_sweep(rng, 1.0, shared=shared, **draw) for _ in range(PAIRS)]
    gain10 = [sequential_sweep(rng, 1.10, shared=shared, **draw) for _ in range(PAIRS)]
    gain20 = [sequential_sweep(rng, 1.20, shared=shared, **draw) for _ in range(PAIRS)] if large else [("", np.nan)]
    return {
        "sweep_false": np.mean([word == stats.RECOMMEND for word, _ in same]),
        "sweep_power": np.mean([word == stats.RECOMMEND for word, _ in gain10]),
        "sweep_repeats_10": np.mean([n for _, n in gain10]),
        "sweep_repeats_20": np.mean([n for _, n in gain20]),
        "sweep_right_20": np.mean([word == stats.RECOMMEND for word, _ in gain20]),
    }


SHARED = 0.9
"""The share of a launch's offset variance a sweep's caps have in common in the shared scenarios."""


def test_auto_repeats_keep_false_alarms_rare_find_real_changes_and_stop_early_on_large_ones():
    rng = np.random.default_rng(28)
    measured = {scenario: {**rates(rng, phi=scenario[0], cv=scenario[1], offset=scenario[2]),
                           **sweep_rates(rng, phi=scenario[0], cv=scenario[1], offset=scenario[2], shared=0.0)}
                for scenario in SCENARIOS}  # fmt: skip
    print(f"\nlooks after {decide.looks(MAX_REPEATS)} repeats, each at confidence {CONFIDENCE:.4f}")
    print(
        "φ    CV    offset | false | power 10% | repeats: same  10%  20% | 20% right | fixed 5 right | "
        "sweep: false power 10% repeats 10% 20% right 20% | repeat spread"
    )
    for (phi, cv, offset), r in measured.items():
        print(f"{phi:.1f}  {cv:.2f}  {offset:.2f}   | {r['false']:5.1%} | {r['power']:8.1%} | "
              f"{r['repeats_same']:13.1f} {r['repeats_10']:4.1f} {r['repeats_20']:4.1f} | {r['right_20']:8.1%} | "
              f"{r['fixed_right_20']:12.1%} | {sweep_text(r)} | "
              f"{r['spread']:.1%}{'' if decidable(r['spread']) else ' (too wide to decide 10 % in 20)'}")  # fmt: skip
    rows = list(measured.values())
    assert max(r["false"] for r in rows) <= 0.05 and max(r["sweep_false"] for r in rows) <= 0.05
    # Where the launches agree well enough to decide within --max-repeats, a real 10 % change is found;
    # where they do not, the verdict stays open and says how many repeats it needs (never a wrong word).
    assert min(r["power"] for r in rows if decidable(r["spread"])) >= 0.80
    assert min(r["sweep_power"] for r in rows if decidable(r["spread"])) >= 0.80
    assert sum(decidable(r["spread"]) for r in rows) >= len(rows) - 5  # the power claim covers 13 of 18
    # Where launches spread most (a repeat's median 7 % or more), 20 repeats cannot settle identical code:
    # found out of reach from 8 repeats on, it stops well short of 20, and a real 20 % change is still found.
    hopeless = [r for r in rows if r["spread"] >= 0.07]
    assert hopeless and max(r["repeats_same"] for r in hopeless) < 0.75 * MAX_REPEATS
    assert min(r["right_20"] for r in hopeless) >= 0.95
    # Where a fixed 5 decides a 20 % change, auto decides it too, with fewer repeats on average over those
    # scenarios; in the noisiest of them (a repeat's median spread 5 %) about as many as 5. A sweep whose caps
    # share nothing of their launches pays for pairing's fewer degrees of freedom from 8 repeats on: a little more.
    plain = [r for r in rows if r["fixed_right_20"] >= 0.95]
    for key, most in (("repeats_20", FIXED + 1), ("sweep_repeats_20", FIXED + 1.5)):
        assert np.mean([r[key] for r in plain]) < FIXED - 0.5 and max(r[key] for r in plain) <= most
    assert min(r["right_20"] for r in plain) >= 0.95 and min(r["sweep_right_20"] for r in plain) >= 0.95
    # Caps whose launches share most of their offset: judged launch by launch, never more false alarms, and
    # fewer repeats than with nothing shared wherever 20 repeats can decide a 10 % gain.
    print(f"sweep, {SHARED:.0%} of the launch offset shared by the caps:")
    for (phi, cv, offset), alone in measured.items():
        if offset == 0:
            continue
        shared = sweep_rates(rng, phi=phi, cv=cv, offset=offset, shared=SHARED, large=False)
        print(f"{phi:.1f}  {cv:.2f}  {offset:.2f}   | {sweep_text(shared)[:28]}")
        assert shared["sweep_false"] <= 0.05
        if decidable(alone["spread"]):
            assert shared["sweep_repeats_10"] < alone["sweep_repeats_10"]
            assert shared["sweep_power"] >= alone["sweep_power"]


def sweep_text(r: dict) -> str:
    return (f"{r['sweep_false']:5.1%} {r['sweep_power']:9.1%} {r['sweep_repeats_10']:11.1f} "
            f"{r['sweep_repeats_20']:4.1f} {r['sweep_right_20']:9.1%}")  # fmt: skip


def test_each_look_is_stricter_the_more_looks_the_run_may_take():
    assert decide.look_confidence(2) == stats.CONFIDENCE  # one look: the fixed rule's own interval
    assert decide.looks(20) == (2, 3, 4, 5, 6, 8, 10, 13, 16, 20)
    assert decide.looks(7) == (2, 3, 4, 5, 6, 7)
    assert decide.look_confidence(20) == 1 - 0.05 / 10
    assert decide.look_confidence(40) > decide.look_confidence(20)
    assert decide.next_look(6, 20) == 8 and decide.next_look(20, 20) is None

"""`--repeats auto`: the verdicts a run exists for, whether each is decided yet, and which configurations
must run again to decide the rest.

A run exists for two kinds of verdict, at every world size that communicates:

- **a bucket cap**: each sweep's recommendation (harness.analysis.verdicts.sweep): decided once it is 'use
  bucket_cap_mb=…' or 'flat', open while it is 'too few repeats to tell';
- **a strategy against the reference** (DDP as torch ships it), when the run has both: each other
  communicating strategy's ratio to it (stats.verdict): decided once 'slower', 'faster' or 'no
  significant change', open while 'too few repeats to tell'. The reference at another cap is the cap
  verdict's business; at another option (static_graph=true, a comm hook) it is a rival like any strategy,
  against the reference as asked at its defaults; the baseline communicates nothing and is no choice. A
  strategy's explicit caps that made one bucket layout in every launch are one side (verdicts.layouts), as the
  run page ranks them, so that the console and the page say one ratio.

**The stopping rule** (docs/statistics.md): the evidence is looked at after 2, 3, 4, 5, 6, 8, 10, 13,
16, 20, … repeats (`looks`: every repeat at first, where large effects are decided, then about a
quarter more each time, so that a run allowed many repeats pays for few looks), up to `--max-repeats`.
Each look judges at confidence 1 − α/L, L the number of looks the run may take. By Bonferroni's
inequality the chance that a verdict is ever wrongly 'slower' or 'faster' over all its looks is at most
α = 5 %, however the looks depend on each other: no model of the noise is needed for that bound.

**Out of reach** (`out_of_reach`): from FUTILE_FROM repeats on, a verdict that no number of repeats up to
`--max-repeats` is likely to decide at the spread seen, even for an effect at the optimistic end of what
its repeats allow, runs no more: it stays open and says what it would need. Giving up never gives a
verdict a word, so it cannot add a false 'slower' or 'faster'.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from harness.analysis import roles, stats
from harness.analysis.verdicts import layouts, sweep
from harness.config.flags import AUTO
from harness.results import values

ALPHA = 1 - stats.CONFIDENCE
"""The chance a verdict may be wrongly 'slower' or 'faster' over all its looks."""
DEFAULT_MAX_REPEATS = 20
"""Repeats after which an open verdict is left open (and says how many it would need)."""
LOOK_LADDER = (2, 3, 4, 5, 6, 8, 10, 13, 16, 20, 25, 32, 40, 50, 64, 80, 100)

FUTILE_FROM = 8
"""The fewest repeats from which an open verdict may be found out of reach: its spread is then estimated with
7 degrees of freedom or more (pairs of n launches have n − 1)."""
OPTIMISM = 0.9
"""The optimistic end of an effect: its one-sided upper bound at this confidence (its estimate plus the normal
quantile's standard errors)."""
SPREAD_OVERESTIMATE = 0.95
"""The spread seen may be this likely an overestimate by the factor √(χ²(0.95, df)/df) (1.30 at 14 df): 'no
significant change' is out of reach only when the interval at --max-repeats stays too wide after it."""

SETUP_KEYS = ("workload", "size", "batch_size", "grad_accum", "dtype", "optimizer", "world_size", "nnodes")
CAP, STRATEGY = "bucket cap", "against the reference"


def looks(max_repeats: int) -> tuple[int, ...]:
    """The repeat counts after which the evidence is judged: the ladder up to `max_repeats`, and it."""
    ladder = tuple(n for n in LOOK_LADDER if n < max_repeats)
    return (*ladder, max_repeats) if max_repeats >= stats.MIN_REPEATS else (stats.MIN_REPEATS,)


def next_look(repeats: int, max_repeats: int) -> int | None:
    """The repeat count of the next look after `repeats`; None when the last look is behind."""
    return next((n for n in looks(max_repeats) if n > repeats), None)


def look_confidence(max_repeats: int, *, alpha: float = ALPHA) -> float:
    """The confidence each look judges at, so that all of a verdict's looks together err at most `alpha`."""
    return 1 - alpha / len(looks(max_repeats))


def out_of_reach(
    base: list[float],
    new: list[float],
    *,
    max_repeats: int | None,
    confidence: float,
    paired: bool,
    threshold: float = stats.DEFAULT_THRESHOLD,
) -> bool:
    """Whether repeats up to `max_repeats` are unlikely to decide the ratio new / base at the spread seen:
    'no significant change' needs the interval within ±threshold, and its half-width projected to
    max_repeats stays wider than that even if the spread was overestimated (SPREAD_OVERESTIMATE); 'slower'
    or 'faster' needs the effect beyond the threshold by that half-width, and even its optimistic value
    (OPTIMISM's standard errors past the estimate) falls short. Never before FUTILE_FROM repeats."""
    have = min(len(base), len(new))
    if max_repeats is None or have < FUTILE_FROM or have >= max_repeats:
        return False
    from scipy.special import chdtri, ndtri  # here, not atop: its import is 1-2 s of every `compare` and `report`

    judged = stats.ratio_interval(base, new, confidence=confidence, paired=paired)
    effect, half = abs(np.log(judged["ratio"])), np.log(judged["high"] / judged["low"]) / 2
    df_now, df_max = (have - 1, max_repeats - 1) if paired else (2 * have - 2, 2 * max_repeats - 2)
    quantile = 0.5 + confidence / 2
    standard_error = half / stats.t_quantile(quantile, df_now)
    half_at_max = stats.t_quantile(quantile, df_max) * standard_error * np.sqrt(have / max_repeats)
    bound = np.log1p(threshold)
    overestimate = np.sqrt(chdtri(df_now, 1 - SPREAD_OVERESTIMATE) / df_now)  # χ²'s 95th percentile at df_now
    return bool(
        half_at_max > overestimate * bound and effect + float(ndtri(OPTIMISM)) * standard_error <= bound + half_at_max
    )


def confidence_for(repeats: int | str, max_repeats: int) -> float:
    """The confidence a run's verdicts are judged at: the look confidence under `--repeats auto`, else the
    fixed rule's (one look)."""
    return look_confidence(max_repeats) if repeats == AUTO else stats.CONFIDENCE


@dataclasses.dataclass(frozen=True)
class Verdict:
    """One verdict of a run at its current evidence."""

    kind: str  # CAP or STRATEGY
    subject: str  # 'w2 mlp/small stock' (CAP) or 'w2 mlp/small bucketed vs stock' (STRATEGY)
    word: str  # the verdict as the run would say it now
    decided: bool
    repeats: int  # the fewest repeats any of its configurations has
    repeats_needed: int | None  # per configuration, for an interval narrow enough, at the look confidence
    config_ids: frozenset[str]  # every repeat of every configuration it rests on
    given_up: bool = False  # open and out of reach within --max-repeats (`out_of_reach`): runs no more
    so_far: str = ""  # open: the estimate and its interval at the look confidence, what the evidence bounds already
    brief: str = ""  # the word once its why has been said (sweep.answer's why=False): the console says the why once
    instrument: bool = False  # its rival measures only (roles.described): not a strategy to deploy

    @property
    def reachable(self) -> bool:
        """Whether some number of repeats can decide it: a need below stats.MAX_REPEATS (at the cap, 'need more
        than 1000', the repeats differ far beyond the threshold and only a narrower spread decides it)."""
        return bool(self.repeats_needed) and self.repeats_needed < stats.MAX_REPEATS

    def said(self, said: set[str]) -> str:
        """The word, or its brief form where `said` holds it already (a console's words said so far: added to)."""
        word = self.brief if self.brief and self.word in said else self.word
        said.add(self.word)
        return word

    def line(self, said: set[str] | None = None) -> str:
        if self.decided:
            return f"{self.subject}: {self.word if said is None else self.said(said)}"
        why = "; out of reach within --max-repeats at this spread, so given up" if self.given_up else ""
        if self.given_up and self.repeats_needed and not self.reachable:  # its need said no count will do
            why = "; given up: the spread between launches must narrow first, with nothing else on the machine"
        return f"{self.subject}: {stats.open_text(self.repeats, self.so_far, self.repeats_needed, why=why)}"


def verdicts(
    configs: pd.DataFrame, steps: pd.DataFrame, *, confidence: float, max_repeats: int | None = None
) -> list[Verdict]:
    """Every verdict of the run's ok rows at `confidence` (look_confidence of the run's --max-repeats); with
    `max_repeats`, the open ones out of reach within it are marked given up."""
    ok = configs[configs["status"] == "ok"] if not configs.empty else configs
    if ok.empty:
        return []
    return [*_cap_verdicts(ok, steps, confidence, max_repeats), *_strategy_verdicts(ok, confidence, max_repeats)]


def strategy_verdicts(configs: pd.DataFrame, *, confidence: float, max_repeats: int | None = None) -> list[Verdict]:
    """The strategy verdicts alone (no steps needed): what the run page and the index say of a strategy against
    the reference is these, the console's own, so that no two outputs of one run disagree on a verdict; with
    `max_repeats` (an auto run's), the open ones out of reach within it marked given up, as the console said."""
    ok = configs[configs["status"] == "ok"] if not configs.empty else configs
    ok = ok.assign(**{key: None for key in SETUP_KEYS if key not in ok})  # rows of an older schema
    return [] if ok.empty else _strategy_verdicts(ok, confidence, max_repeats)


def sizing(found: list[Verdict], max_repeats: int) -> list[Verdict]:
    """The open verdicts that size a new run's --max-repeats: those some count past `max_repeats` decides, of a
    strategy to deploy where any is (a walkthrough advised 318, bucketed's need, where zero's took 242)."""
    beyond = [v for v in found if not v.decided and v.reachable and v.repeats_needed > max_repeats]
    return [v for v in beyond if not v.instrument] or beyond


def open_config_ids(found: list[Verdict]) -> set[str]:
    """The configurations (every repeat of each) that an open verdict not given up rests on: what runs again."""
    return {config_id for v in found if not v.decided and not v.given_up for config_id in v.config_ids}


def _subject(keys: dict, what: str) -> str:
    return f"w{int(keys['world_size'])} {keys['workload']}/{keys['size']} {what}"  # world_size: every node's ranks


def _cap_verdicts(ok: pd.DataFrame, steps: pd.DataFrame, confidence: float, max_repeats: int | None) -> list[Verdict]:
    found = []
    for setup, by_cap in sweep.sweeps(ok, steps):
        summarised = sweep.cap_repeats(by_cap)
        decision = sweep.recommend(by_cap, confidence=confidence, summarised=summarised)
        ids = frozenset(config_id for rows in by_cap.values() for config_id in rows["config_id"].unique())
        decided = decision["decision"] != stats.TOO_FEW
        figures = sweep.point_figures(summarised[2])  # what the decision judged: caps of one layout are one point
        given_up = not decided and len(figures) > 1 and _sweep_out_of_reach(figures, decision, confidence, max_repeats)
        versus = sweep.versus_reference(pd.Series(decision))
        fastest = sweep.point_text(pd.Series(decision), decision["best_cap_mb"])
        so_far = "" if decided else f"fastest {fastest}" + (f"; {versus}" if versus else "")
        found.append(Verdict(CAP, _subject(setup, sweep.label(setup)), sweep.answer(pd.Series(decision)), decided,
                             int(decision["repeats"]), decision["repeats_needed"], ids, given_up=given_up,
                             so_far=so_far, brief=sweep.answer(pd.Series(decision), why=False)))  # fmt: skip
    return found


def _sweep_out_of_reach(figures: dict, decision: dict, confidence: float, max_repeats: int | None) -> bool:
    """Every comparison the decision can rest on out of reach, judged as it judged them (paired or not): any
    one within reach may still decide the sweep. With the 25 MiB cap in the sweep those are each other cap
    against it, whichever cap leads now (sweep.recommend_cap judges the fastest against 25 MiB, or 25 MiB,
    when fastest, against every other cap); a lead between two other caps decides nothing. Without it, each
    cap against the fastest."""
    anchor = stats.REFERENCE_CAP_MB if stats.REFERENCE_CAP_MB in figures else decision["best_cap_mb"]
    paired = bool(decision["paired"])
    judge = {"max_repeats": max_repeats, "confidence": confidence, "paired": paired}
    return all(out_of_reach(f, figures[anchor], **judge) for cap, f in figures.items()
               if cap != anchor and not _surely_slower(f, figures[anchor], confidence, paired))  # fmt: skip


def _surely_slower(figures: list[float], anchor: list[float], confidence: float, paired: bool) -> bool:
    """A cap already judged slower than the anchor: it can neither lead nor tie, and where the anchor leads it
    already counts as beaten, so it can decide nothing more (its reach does not keep the sweep running)."""
    judged = stats.verdict(anchor, figures, threshold=stats.DEFAULT_THRESHOLD, confidence=confidence, paired=paired)
    return judged["verdict"] == stats.SLOWER


@dataclasses.dataclass(frozen=True)
class _Side:
    """One configuration of a setup as a strategy verdict judges it: its rows' impl_options (several where caps
    that made one bucket layout are pooled), its name (without the cap where pooled), its repeats' medians (a pooled
    one's per launch), its pooled caps."""

    impl: str
    options: frozenset
    label: str
    medians: list
    ids: frozenset
    caps: tuple = ()


def _sides(setup: pd.DataFrame) -> list[_Side]:
    """The setup's configurations, a strategy's explicit caps that made one bucket layout in every launch as one
    (layouts.layout_points: per launch the geometric mean of its caps' medians), as the run page ranks them."""
    sides, explicit = [], {}
    for (impl, options), rows in setup.groupby(["impl", "impl_options"], dropna=False, sort=False):
        cap = sweep.given_cap(options)
        if cap is None:
            sides.append(_Side(impl, frozenset([options]), values.configuration_label(impl, options),
                               list(rows["step_ms_median"]), frozenset(rows["config_id"])))  # fmt: skip
        else:
            explicit.setdefault((impl, sweep.other_options(options)), {})[cap] = (options, rows)
    for (impl, _), by_cap in explicit.items():
        launches = {cap: list(zip(_repeats(rows), rows["step_ms_median"], _recorded(rows), strict=True))
                    for cap, (_, rows) in by_cap.items()}  # fmt: skip
        for point in layouts.layout_points(launches):
            options, rows = by_cap[point.cap]
            pooled = point.caps if len(point.caps) > 1 else ()
            label = values.configuration_label(impl, options, without=("bucket_cap_mb",) if pooled else ())
            ids = frozenset(i for cap in point.caps for i in by_cap[cap][1]["config_id"])
            sides.append(_Side(impl, frozenset(by_cap[cap][0] for cap in point.caps), label, list(point.medians),
                               ids, pooled))  # fmt: skip
    return sides


def _repeats(rows: pd.DataFrame) -> list[int | None]:
    return [None if pd.isna(r) else int(r) for r in rows["repeat"]] if "repeat" in rows else [None] * len(rows)


def _recorded(rows: pd.DataFrame) -> list:
    return list(rows["bucket_sizes_mb"]) if "bucket_sizes_mb" in rows else [None] * len(rows)


def _strategy_verdicts(ok: pd.DataFrame, confidence: float, max_repeats: int | None) -> list[Verdict]:
    rows = roles.with_roles(ok)
    rows = rows[~rows["baseline"].astype(bool) & rows["step_ms_median"].notna()]
    found = []
    for keys, setup in rows.groupby(list(SETUP_KEYS), dropna=False):
        keys = dict(zip(SETUP_KEYS, keys, strict=True))
        if int(keys["world_size"]) < 2:
            continue  # one rank communicates nothing: every strategy is local
        reference = _reference(setup)
        if reference is None:
            continue
        sides = _sides(setup)
        base = next(side for side in sides if side.impl == reference[0] and reference[1] in side.options)
        for other in sides:
            options = next(iter(other.options))
            asked = set(roles.beyond_defaults(other.impl, options))
            acting = asked - {"bucket_cap_mb", *reference[2]}  # an option every reference row needs: read past
            if other.impl == reference[0] and not acting:
                continue  # the reference at another cap: the cap verdict decides it; another option is a rival
            judged = stats.verdict(base.medians, other.medians, threshold=stats.DEFAULT_THRESHOLD,
                                   confidence=confidence)  # fmt: skip
            word = _ratio_words(judged, base.label)
            versus = layouts.versus_label(other.label, other.caps, base.label, base.caps)
            subject = _subject(keys, versus + values.accumulation_words(keys.get("grad_accum")))  # K=1, K=4 apart
            decided = judged["verdict"] != stats.TOO_FEW
            given_up = not decided and out_of_reach(base.medians, other.medians, max_repeats=max_repeats,
                                                    confidence=confidence, paired=False)  # fmt: skip
            so_far = "" if decided else _ratio_so_far(judged, confidence, base.label)
            found.append(Verdict(STRATEGY, subject, word, decided, int(judged["repeats"]), judged["repeats_needed"],
                                 base.ids | other.ids, given_up=given_up, so_far=so_far,
                                 instrument=bool(roles.described(other.impl)[1])))  # fmt: skip
    return found


def _reference(setup: pd.DataFrame) -> tuple[str, str, dict] | None:
    """(impl, impl_options, the options a model needs that every reference row sets: roles.needed_by_every) of the
    setup's reference rows: DDP as shipped, else its stand-in (the 25 MiB cap, or those needed options)."""
    reference = setup[setup["reference"].astype(bool)]
    needed = roles.needed_by_every(reference["impl"], reference["impl_options"])  # as the run page reads them
    ranked = {(roles.reference_rank(o, impl, needed=needed), o, impl) for impl, o in
              zip(reference["impl"], reference["impl_options"], strict=True)}  # fmt: skip
    ranked = sorted((r for r in ranked if r[0] is not None), key=lambda r: r[0])
    return (ranked[0][2], ranked[0][1], needed) if ranked else None


def step_of(name: str) -> str:
    """ "stock's step"; 'the step of stock bucket_cap_mb=25' where a possessive would end a label of several words."""
    return f"{name}'s step" if " " not in name else f"the step of {name}"


def versus(ratio: float, step: str = "", *, interval: str = "") -> str:
    """One strategy's step against another's, as every verdict line and run page says it (a reader cross-checking
    the console against the page once found 0.81× on one and 1.24× on the other): this one's step over the other's,
    the same where faster as '1.24× faster', then the interval of that same ratio. `step`: step_of(the other), or ''
    where a column's head names it: "0.81× stock's step (1.24× faster; 99.5% interval 0.56–1.17)"."""
    notes = [words for words in (faster_words(ratio), interval) if words]
    said = f"{ratio:.2f}×" + (f" {step}" if step else "")
    return said + (f" ({'; '.join(notes)})" if notes else "")


def faster_words(ratio: float) -> str:
    """'1.24× faster' for a ratio of steps under 1 (0.81); '' where it is not faster to two decimals."""
    return f"{1 / ratio:.2f}× faster" if np.isfinite(ratio) and ratio > 0 and round(1 / ratio, 2) > 1 else ""


def _ratio_so_far(judged: dict, confidence: float, reference: str) -> str:
    """An open ratio's estimate and interval ("0.81× stock's step (1.24× faster; 99.5% interval 0.56–1.17)"); ''
    with one repeat a side (no interval)."""
    if not np.isfinite(judged["low"]):
        return ""
    interval = f"{confidence * 100:.3g}% interval {sweep.ratio_interval_text(judged['low'], judged['high'])}"
    return versus(judged["ratio"], step_of(reference), interval=interval)


def _ratio_words(judged: dict, reference: str) -> str:
    if judged["verdict"] == stats.TOO_FEW:
        return stats.TOO_FEW
    ratio = judged["ratio"]
    shown = versus(ratio, step_of(reference)) if np.isfinite(ratio) else "no ratio"
    return f"{judged['verdict']}, at {shown}"  # as the run page says it: 0.81× stock's step (1.24× faster)

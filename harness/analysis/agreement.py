"""How a predicted step-time curve over bucket caps agrees with the measured one: its error, and which caps
tie for best in each (a model's arithmetic cannot tell 0.290 from 0.291 ms apart)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from harness.bucketing import DDP_DEFAULT_CAP_MB

TIE_TOLERANCE = 0.005
"""Predicted (or measured) step times within this fraction of the fastest are a tie: the model's
arithmetic cannot tell 0.290 from 0.291 ms apart, so neither can be 'the' best cap."""


def tied_best(caps: Sequence[float], values: Sequence[float], *, tolerance: float = TIE_TOLERANCE) -> list[float]:
    """The caps whose value is within `tolerance` of the smallest, in cap order."""
    values = np.asarray(values, dtype=float)
    limit = values.min() * (1 + tolerance)
    return sorted(float(cap) for cap, value in zip(caps, values, strict=True) if value <= limit)


def caps_text(caps: Sequence[float]) -> str:
    """'5 MiB', or '1, 5 or 25 MiB (tied)' where the figures cannot tell several caps apart (`tied_best`): the one
    phrasing of tied caps on the console and in the reports."""
    names = [f"{cap:g}" for cap in caps]
    return f"{names[0]} MiB" if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]} MiB (tied)"


def best_and_margin(caps: Sequence[float], values: Sequence[float]) -> tuple[list[float], float | None]:
    """The tied best caps (`tied_best`) and how far ahead of the fastest cap not tied with them they are
    (the next cap's value over the best's, − 1); None when every cap is tied."""
    values = np.asarray(values, dtype=float)
    tied = tied_best(caps, values)
    others = [value for cap, value in zip(caps, values, strict=True) if float(cap) not in tied]
    return tied, (min(others) / values.min() - 1 if others else None)


def prediction_error(caps: Sequence[float], measured: Sequence[float], predicted: Sequence[float]) -> dict:
    """How well a predicted curve over bucket caps matches the measured one.

    MAPE (mean absolute percentage error); the best caps of each, ties included (within
    TIE_TOLERANCE of the fastest: `best_measured_caps_mb`, `best_predicted_caps_mb`); and how many
    grid steps apart the two sets are at their closest (0: the prediction's tied best includes a
    measured best; the target is at most 1). `best_measured_cap_mb`/`best_predicted_cap_mb` name
    one cap of each set: the pair that are closest, the fastest of each on a tie.
    """
    order = np.argsort(np.asarray(caps, dtype=float))
    caps_sorted = np.asarray(caps, dtype=float)[order]
    measured_sorted = np.asarray(measured, dtype=float)[order]
    predicted_sorted = np.asarray(predicted, dtype=float)[order]
    grid = {float(cap): index for index, cap in enumerate(caps_sorted)}
    best_measured = tied_best(caps_sorted, measured_sorted)
    best_predicted = tied_best(caps_sorted, predicted_sorted)
    pairs = [(abs(grid[m] - grid[p]), measured_sorted[grid[m]], predicted_sorted[grid[p]], m, p)
             for m in best_measured for p in best_predicted]  # fmt: skip
    steps, _, _, measured_cap, predicted_cap = min(pairs)
    return {
        "mape": float(np.mean(np.abs(predicted_sorted - measured_sorted) / measured_sorted)),
        "best_measured_cap_mb": measured_cap,
        "best_predicted_cap_mb": predicted_cap,
        "best_measured_caps_mb": best_measured,
        "best_predicted_caps_mb": best_predicted,
        "best_cap_grid_steps": int(steps),
    }


def agrees(error: dict, as_good: Sequence[float] | None) -> bool:
    """Whether a prediction's best cap agrees with the measurement (`prediction_error`'s `error`): its tied
    best includes a measured best, or a cap the sweep's repeats call as good as the best (`as_good`, the
    sweep's equivalent_caps_mb; None where the run has no recommendation)."""
    return error["best_cap_grid_steps"] == 0 or any(cap in (as_good or ()) for cap in error["best_predicted_caps_mb"])


def tells_no_cap_apart(caps: Sequence[float], as_good: Sequence[float] | None) -> bool:
    """Whether the sweep's repeats call every one of its `caps` as good as its best (`as_good`): then any predicted
    best cap 'agrees', and the agreement checks nothing."""
    return as_good is not None and {float(cap) for cap in caps} <= {float(cap) for cap in as_good}


SMALL_CAP_LEAD = 0.04
"""A predicted lead under which a cap smaller than DDP's default is no evidence: the model leaves out what each
extra collective costs the compute, and pytorch's published DGX-1 V100 timings have 1 MiB buckets 2.6 % (8
GPUs) and 3.8 % (16 GPUs) slower than 25 MiB, where the model puts 1 MiB 0.2-0.5 % ahead (docs/clusters.md)."""

SMALL_CAP_CAVEAT = (
    "a cap below 25 MiB (DDP's default bucket_cap_mb) ahead by under 4 % is no evidence: the model leaves out "
    "what each extra collective costs the compute (pytorch measured 1 MiB 2.6-3.8 % slower than 25 MiB on 8-16 "
    "V100s, where the model has it ahead)"
)


@dataclass(frozen=True)
class CapAnswer:
    """The cap an answer names for one curve of step times over caps (`cap_answer`)."""

    index: int  # the position of the named cap, whose figures the answer quotes
    text: str  # the cap as the answer says it
    tied: list[float]  # the caps tied for fastest (`tied_best`)
    margin: float | None  # their lead over the fastest cap not tied with them; None: every cap ties
    lead_set_aside: float | None  # a smaller cap's lead over DDP's default, under SMALL_CAP_LEAD, not followed
    unproven: bool  # the named cap is below DDP's default and ahead by under SMALL_CAP_LEAD: SMALL_CAP_CAVEAT
    named: list[float]  # every cap the answer names: `tied`, or the caps of 25 MiB or more it kept


def cap_answer(caps: Sequence[float], values: Sequence[float]) -> CapAnswer:
    """The cap to use, as the console's answer and the what-if page say it. Where every cap ties: any (DDP's
    default 25 MiB quoted where it is among them). Where the fastest caps include one of 25 MiB or more: those
    tied, quoting 25 MiB's figures (else the fastest of them). Where every fastest cap is smaller than 25 MiB but
    leads the fastest cap of 25 MiB or more by under SMALL_CAP_LEAD, that lead is no evidence (SMALL_CAP_CAVEAT):
    the answer keeps the caps of 25 MiB or more (their own tie; 25 MiB's figures where it is among them) and
    says the lead it set aside. Else the fastest; where no cap of 25 MiB or more was swept and it leads the next
    by under SMALL_CAP_LEAD, with the caveat. Non-finite values (a cap not predicted) take no part."""
    pairs = [(float(cap), float(value)) for cap, value in zip(caps, values, strict=True) if np.isfinite(value)]
    named, values = [cap for cap, _ in pairs], np.asarray([value for _, value in pairs])
    position = {cap: k for k, cap in enumerate(float(cap) for cap in caps)}  # in the caller's order
    tied, margin = best_and_margin(named, values)
    fastest = named[int(np.argmin(values))]
    if margin is None and len(tied) > 1:  # every cap ties
        keep = DDP_DEFAULT_CAP_MB in tied
        text = "any (DDP's default 25 MiB is as good)" if keep else "any (every cap ties)"
        return CapAnswer(
            position[DDP_DEFAULT_CAP_MB if keep else fastest], text, tied, margin, None, unproven=False, named=tied
        )
    if large := [cap for cap in tied if cap >= DDP_DEFAULT_CAP_MB]:
        return CapAnswer(
            position[_quoted(large, named, values)], caps_text(tied), tied, margin, None, unproven=False, named=tied
        )
    large = [cap for cap in named if cap >= DDP_DEFAULT_CAP_MB]
    if not large:  # nothing of 25 MiB or more to keep: the fastest, with the caveat where its lead is thin
        unproven = margin is not None and margin < SMALL_CAP_LEAD
        return CapAnswer(position[fastest], caps_text(tied), tied, margin, None, unproven=unproven, named=tied)
    large_values = [values[named.index(cap)] for cap in large]
    lead = min(large_values) / values.min() - 1
    if lead >= SMALL_CAP_LEAD:
        return CapAnswer(position[fastest], caps_text(tied), tied, margin, None, unproven=False, named=tied)
    kept = tied_best(large, large_values)
    faster = caps_text(tied).removesuffix(" (tied)")
    # No percentage in the words: an answer over several GPU counts merges the counts that say the same.
    text = f"{caps_text(kept)} ({faster} predicted faster by under the 4 % the model can tell)"
    return CapAnswer(position[_quoted(kept, named, values)], text, tied, margin, lead, unproven=False, named=kept)


TARGET_MAPE = 0.10
"""The error the model is held to on a run's own sweeps (the run page's 'Model error' table; issue #27's raw MAPE):
its predicted steps within 10 % of the measured ones on average."""


def with_answer_marks(frame):
    """A frame of predicted steps per cap (`bucket_cap_mb`, `step_ms`) with `best`: the caps the answer names
    (`cap_answer`, as the console and the pages say it), and `fastest`: the caps tied for the fastest step."""
    answer = cap_answer(frame["bucket_cap_mb"], frame["step_ms"])
    caps = frame["bucket_cap_mb"]
    return frame.assign(best=caps.isin(answer.named), fastest=caps.isin(answer.tied))


def _quoted(caps: list[float], named: list[float], values: np.ndarray) -> float:
    """Of caps an answer names together, the one whose figures it quotes: 25 MiB if among them, else the fastest."""
    return DDP_DEFAULT_CAP_MB if DDP_DEFAULT_CAP_MB in caps else min(caps, key=lambda cap: values[named.index(cap)])


def answer_row(frame):
    """A predicted frame's row (one world size, a row a cap) at the cap its answer names (`cap_answer`)."""
    return frame.iloc[cap_answer(frame["bucket_cap_mb"], frame["step_ms"]).index]

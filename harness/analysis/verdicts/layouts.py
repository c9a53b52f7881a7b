"""Caps that made one bucket layout are one configuration: the rule the sweep's verdict, the strategy verdicts and
the run page share (docs/statistics.md).

Two explicit `bucket_cap_mb` values that made the same buckets in every launch (a model whose largest gradients
outgrow both caps the same way) train the same program: their difference is the launches' spread, and judging them
apart names the luckier one and sizes its need from its luck. They are one point: per launch (repeat), the geometric
mean of its caps' medians there (the caps of one launch share its conditions, so the launch is one repeat of the
point, not two). A row that gave no cap (DDP's default layout, first bucket 1 MiB) is never one of them: its layout
rule is another. Pure: figures in, points out.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence

from harness.analysis import stats


def bucket_layouts(recorded: Iterable) -> frozenset | None:
    """The distinct bucket layouts (MiB, launch order) of launches' recorded `bucket_sizes_mb`; None where one
    launch did not record its buckets (then nothing can be said of them all)."""
    layouts = set()
    for sizes in recorded:
        if sizes is None or not hasattr(sizes, "__len__") or len(sizes) == 0:
            return None
        layouts.add(tuple(round(float(size), 6) for size in sizes))
    return frozenset(layouts)


@dataclasses.dataclass(frozen=True)
class Point:
    """One measured configuration of a sweep: its caps as typed (ascending; several where they made one layout),
    and per launch its step (a cap's median, or the geometric mean of its caps' medians in that launch)."""

    caps: tuple[float, ...]
    repeats: tuple[int | None, ...]
    medians: tuple[float, ...]

    @property
    def cap(self) -> float:
        """The cap that names the point: the 25 MiB reference where it is one of them, else the smallest."""
        return stats.REFERENCE_CAP_MB if stats.REFERENCE_CAP_MB in self.caps else self.caps[0]

    @property
    def others(self) -> tuple[float, ...]:
        """Its caps besides `cap`, which made the same buckets."""
        return tuple(c for c in self.caps if c != self.cap)


Launch = tuple[int | None, float, object]
"""One launch of a cap: its repeat (None where unrecorded), its median step (ms), its recorded `bucket_sizes_mb`."""


def layout_points(launches: Mapping[float, Sequence[Launch]]) -> list[Point]:
    """A strategy's explicit caps (as typed; its other options alike) as the points a sweep judges, in cap order:
    caps whose every launch made one and the same bucket layout are one point, each launch one repeat of it (the
    geometric mean of its caps' medians there); a cap whose layout or repeats went unrecorded, or varied, is its own."""
    alone, by_layout = [], {}
    for cap in sorted(launches):
        made = bucket_layouts(sizes for _, _, sizes in launches[cap])
        known = all(repeat is not None for repeat, _, _ in launches[cap])
        if made is not None and len(made) == 1 and known:
            by_layout.setdefault(next(iter(made)), []).append(cap)
        else:
            alone.append([cap])
    points = []
    for caps in [*alone, *by_layout.values()]:
        per_launch: dict = {}
        for cap in caps:
            for repeat, ms, _ in launches[cap]:
                per_launch.setdefault(repeat, []).append(float(ms))
        if len(caps) == 1:  # as measured, in its own order (unrecorded repeats included)
            repeats, medians = zip(*((r, float(ms)) for r, ms, _ in launches[caps[0]]), strict=True)
        else:
            repeats = tuple(sorted(per_launch))
            medians = tuple(stats.geometric_mean(per_launch[r]) for r in repeats)
        points.append(Point(tuple(caps), tuple(repeats), tuple(medians)))
    return sorted(points, key=lambda point: point.caps[0])


def cap_words(caps: Sequence[float]) -> str:
    """'1, 2' (as typed: 0.001, never the byte-rounded 0.000999451 a row records)."""
    return ", ".join(f"{cap:g}" for cap in caps)


def pooled_label(label: str, caps: Sequence[float]) -> str:
    """'stock (caps 1, 2 MiB: one bucket layout)': how the verdicts and the page name a point of several caps."""
    return f"{label} (caps {cap_words(caps)} MiB: one bucket layout)"


def or_same(cap: float, others: Sequence[float], *, unit: str = "") -> str:
    """'1 (or 2: the same buckets)': a point's cap to type first (`unit` after it), the caps that made its buckets
    after."""
    return f"{cap:g}{unit}" + (f" (or {cap_words(others)}: the same buckets)" if others else "")


def versus_label(label: str, caps: Sequence[float], base_label: str, base_caps: Sequence[float]) -> str:
    """A strategy verdict's pair, each named as the page names it (pooled_label where its caps made one layout),
    the note once where both pooled the same caps: 'bucketed vs stock (each: caps 1, 25 MiB, one bucket layout)'."""
    if caps and tuple(caps) == tuple(base_caps):
        return f"{label} vs {base_label} (each: caps {cap_words(caps)} MiB, one bucket layout)"
    return " vs ".join(pooled_label(name, of) if of else name for name, of in ((label, caps), (base_label, base_caps)))


def smaller_size_caps(row: Mapping, *, run: str | None) -> str:
    """'; caps 25, 50, 100 MiB made one bucket layout of gpt2/small's gradients, so this sweep cannot tell them
    apart; for the full size's cap, bench with --size full, or run ddpbench predict …': where a sweep of a size
    smaller than full pooled its largest caps (`one_layout_caps_mb`, JSON; a walkthrough's gpt2/small, 16.2 MiB of
    gradients, read '25 MiB (or 50, 100: the same buckets)' and no more); '' elsewhere. `run`: what names the run
    after --run (its id, and --results where not the default folder)."""
    pooled, size = row.get("one_layout_caps_mb"), row.get("size")
    if not isinstance(pooled, str) or not json.loads(pooled) or size in (None, "full"):
        return ""
    largest = max(json.loads(pooled), key=max)
    predict = f"ddpbench predict --run {run or 'RUN_ID'} --cluster NAME"
    return (f"; caps {cap_words(largest)} MiB made one bucket layout of {row.get('workload')}/{size}'s gradients, "
            f"so this sweep cannot tell them apart; for the full size's cap, bench with --size full, or run "
            f"{predict}, which prices each cap's communication on the full size")  # fmt: skip

"""What each bucket of the bucket timeline holds. The timeline records a bucket's bytes, not its parameters; the
run's gradient profile (recorded at one rank) has each parameter's name, bytes and when backward made it. Laid out
by DDP's rule at the configuration's recorded caps (harness.perfmodel.schedule.bucket_layout: in the order backward
made them, the first bucket's cap then bucket_cap_mb, a gradient closing the bucket it takes to its cap), they are
shown only where the layout gives every bucket's measured bytes exactly, on every rank of the typical step drawn:
then the layout is as good as measured. Elsewhere the page says they are not known, and why."""

from __future__ import annotations

import dataclasses

import pandas as pd

from harness.perfmodel.measured import SETUP_DEFAULTS, SETUP_KEYS
from harness.perfmodel.predict import profile_for
from harness.perfmodel.schedule import bucket_layout
from reports.figures.network import size_label

NAMES_IN_HOVER = 8
"""A bucket's hover names this many of its tensors, then how many more."""
NAMES_A_LINE = 3


@dataclasses.dataclass(frozen=True)
class Held:
    """One bucket's parameters, in the order backward made their gradients."""

    names: tuple[str, ...]
    parameters: int  # elements, summed over its tensors
    nbytes: int
    largest: str  # its largest tensor's name (the first made of equals)

    def label(self, prefix: str = "") -> str:
        """'transformer.wte.weight + 3 more': its largest tensor (the first made of equals) named; `prefix`, the
        model's common one, left out."""
        return f"{self.largest.removeprefix(prefix)}" + (
            f" + {len(self.names) - 1} more" if len(self.names) > 1 else ""
        )

    def hover(self) -> str:
        """'4 tensors, 1.08M parameters, in the order backward made them:<br>a, b, c,<br>d', NAMES_A_LINE a line
        (a hover one line wide ran off the page)."""
        names = self.names[:NAMES_IN_HOVER]
        shown = ",<br>".join(", ".join(names[k : k + NAMES_A_LINE]) for k in range(0, len(names), NAMES_A_LINE))
        more = f" and {len(self.names) - NAMES_IN_HOVER} more" if len(self.names) > NAMES_IN_HOVER else ""
        tensors = "1 tensor" if len(self.names) == 1 else f"{len(self.names)} tensors"
        return f"{tensors}, {_count(self.parameters)} parameters, in the order backward made them:<br>{shown}{more}"


@dataclasses.dataclass(frozen=True)
class Contents:
    """Per configuration, each bucket's parameters where DDP's rule over the profile gave its measured bytes
    (`held`), else why they are not shown (`unknown`); configurations without a bucket cap are in neither."""

    held: dict[str, dict[int, Held]]
    unknown: dict[str, str]
    prefix: str = ""  # the model's common name prefix ('transformer.'), left out of the row labels

    def of(self, config_id: str, collective) -> tuple[str, str]:
        """A timeline row's bucket's label and hover line (timeline.Holds); ('', '') where not known."""
        if getattr(collective, "collective", "all_reduce") != "all_reduce":
            return "", ""
        held = self.held.get(config_id, {}).get(int(collective.bucket))
        return (held.label(self.prefix), held.hover()) if held else ("", "")


NONE = Contents({}, {})


def bucket_contents(configs: pd.DataFrame, timeline: pd.DataFrame, profiles: pd.DataFrame) -> Contents:
    """Each timed configuration with a bucket cap: its buckets' parameters, where the layout matches its step."""
    held: dict[str, dict[int, Held]] = {}
    unknown: dict[str, str] = {}
    if timeline.empty or "bucket_cap_mb" not in configs or "first_bucket_cap_mb" not in configs:
        return NONE
    profiles = profiles.fillna(SETUP_DEFAULTS) if not profiles.empty else profiles
    for row in configs[configs["config_id"].isin(timeline["config_id"])].itertuples():
        if pd.isna(row.bucket_cap_mb) or pd.isna(row.first_bucket_cap_mb):
            continue  # no bucket cap: not DDP's buckets (naive, flat, FSDP)
        sent = measured_bytes(timeline[timeline["config_id"] == row.config_id])
        if not sent:
            continue
        setup = {key: getattr(row, key) for key in SETUP_KEYS if hasattr(row, key)}
        found = _laid_out(profiles, setup, row)
        if isinstance(found, str):
            unknown[row.config_id] = found
        elif mismatch := _mismatch(found, sent):
            unknown[row.config_id] = mismatch
        else:
            held[row.config_id] = dict(enumerate(found))
    names = [n for buckets in held.values() for h in buckets.values() for n in h.names]
    return Contents(held, unknown, _common_prefix(names))


def measured_bytes(collectives: pd.DataFrame) -> dict[int, list[int]]:
    """Per rank, its gradient all-reduces' bytes in bucket order, in the step drawn (broadcasts and masks left out)."""
    if "collective" in collectives:
        collectives = collectives[collectives["collective"] == "all_reduce"]
    collectives = collectives[collectives["bucket"] >= 0]
    ranks = collectives.groupby("rank") if "rank" in collectives else [(0, collectives)]
    return {int(rank): [int(b) for b in mine.sort_values("bucket")["bytes"]] for rank, mine in ranks}


def _laid_out(profiles: pd.DataFrame, setup: dict, row) -> list[Held] | str:
    """The profile's gradients in DDP's buckets at the row's caps, or why there are none."""
    profile = profile_for(profiles, setup) if not profiles.empty else None
    if profile is None:
        return (f"the run stored no gradient profile of {row.workload}/{row.size} (bench records one at 1 rank; "
                "`ddpbench predict --run RUN` measures one)")  # fmt: skip
    numel = _elements(profiles, setup)
    layout = bucket_layout(profile, float(row.bucket_cap_mb), first_cap_mb=float(row.first_bucket_cap_mb))
    return [_held(bucket, numel) for bucket in layout]


def _elements(profiles: pd.DataFrame, setup: dict) -> dict[int, int]:
    rows = profiles
    for key, value in setup.items():
        rows = rows[rows[key] == value]
    return dict(zip(rows["param_index"].astype(int), rows["numel"].astype(int), strict=True))


def _held(bucket, numel: dict[int, int]) -> Held:
    largest = max(bucket, key=lambda g: g.nbytes)  # max keeps the first of equals
    names = tuple(g.name or f"parameter {g.index}" for g in bucket)
    return Held(names, sum(numel.get(g.index, 0) for g in bucket), sum(g.nbytes for g in bucket),
                largest.name or f"parameter {largest.index}")  # fmt: skip


def _mismatch(layout: list[Held], sent: dict[int, list[int]]) -> str:
    """'' where every rank's buckets carried the layout's bytes, bucket by bucket; else the first difference."""
    laid = [h.nbytes for h in layout]
    for rank, measured in sent.items():
        if measured == laid:
            continue
        if len(measured) != len(laid):
            return (f"DDP's rule over the gradient profile makes {len(laid)} buckets, rank {rank}'s step sent "
                    f"{len(measured)}")  # fmt: skip
        k = next(i for i, (a, b) in enumerate(zip(laid, measured, strict=True)) if a != b)
        return (f"DDP's rule over the gradient profile makes bucket {k} {laid[k]} B ({size_label(laid[k])}), rank "
                f"{rank}'s step sent {measured[k]} B")  # fmt: skip
    return ""


def _common_prefix(names: list[str]) -> str:
    """The dotted prefix every name shares ('transformer.'), '' where none or one name."""
    if len(set(names)) < 2:
        return ""
    split = [name.split(".") for name in names]
    shared = []
    for parts in zip(*(words[:-1] for words in split), strict=False):  # to the shortest; a last part is its own
        if len(set(parts)) > 1:
            break
        shared.append(parts[0])
    return "".join(f"{part}." for part in shared)


def _count(n: int) -> str:
    """1080000 → '1.08M', 2048 → '2.05K', 512 → '512'."""
    for scale, unit in ((1e9, "G"), (1e6, "M"), (1e3, "K")):
        if n >= scale:
            return f"{n / scale:.3g}{unit}"
    return str(n)


def contents_lines(contents: Contents, labels: dict[str, str]) -> list[str]:
    """The timeline's lines on what its rows hold: where shown, how it is known; where not, why (each by the
    configuration's `labels`, for those drawn)."""
    lines = []
    shown = [labels[c] for c in labels if c in contents.held]
    if shown:
        lines.append(
            f"What each bucket holds (its row's label names its largest tensor; hover for every one): the run's "
            f"gradient profile laid out by DDP's rule at each configuration's caps, in the order backward made the "
            f"gradients, a gradient closing the bucket it takes to the cap; shown where that gives every bucket's "
            f"measured bytes exactly, on every rank ({', '.join(shown)})."
        )
    lines += [f"{labels[c]}: what each bucket holds is not shown: {contents.unknown[c]}." for c in labels
              if c in contents.unknown]  # fmt: skip
    return lines

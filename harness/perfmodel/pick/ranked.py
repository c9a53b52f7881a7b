"""The figure each strategy is ranked by on a cluster, and the cap it is ranked at: its predicted step, or its floor
with the full size's parameters where that is higher (sharded.with_full_size_floors); ZeRO-1's floor wherever it has
one (REPLACED). A step on DDP's schedule (DDP's own, a compression hook's, ZeRO-1's) depends on the bucket cap: where
the floors exist, it is ranked at the cap where that figure is least (`least_row`), the full size's buckets being
another layout than the small profile's, whose cap `agreement.answer_row` names. The choice (choice.choose), the
console's answers and the what-if page all rank by this one rule.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from harness.analysis import agreement
from harness.bucketing import DDP_DEFAULT_CAP_MB
from harness.results.values import ms_text

REPLACED = {"ZeRO-1"}
"""Step models whose full-size floor stands in for their prediction wherever it has one: ZeRO-1's floor, DDP's step
as ranked + ZeRO's change for the whole model, replaces its prediction, which shards the smaller model (a small
llama's lm_head: 46 % of it in one shard, 6 % of the 1B's)."""

ALIKE = agreement.TIE_TOLERANCE
"""Figures within this fraction of the least are one figure (the model's arithmetic cannot tell them apart, as
agreement's cap answer holds): among them the cap is the small profile's, or DDP's default, not one 0.1 % lower that a
user would read as advice."""


def ranked_value(step: float, floor: float, model: str = "") -> float:
    """What a strategy is ranked by: its predicted `step`, or its full-size `floor` where higher (or wherever it has
    one, for a REPLACED `model`); NaN where it has no step."""
    if step is None or pd.isna(step):
        return float("nan")
    if floor is None or pd.isna(floor):
        return float(step)
    return float(floor) if model in REPLACED else max(float(step), float(floor))


def floors_in(frame: pd.DataFrame, floor_column: str) -> bool:
    """Whether the frame holds this full-size floor (with_full_size_floors added it, and it is known)."""
    return floor_column in frame and bool(frame[floor_column].notna().any())


CAN_TELL = agreement.SMALL_CAP_LEAD
"""Another cap's ranked figure below DDP's default's by under this fraction is no evidence (the model leaves out
what each extra collective costs): the floors keep 25 MiB, as the pick for bookings does (a what-if page moved DDP
to 5 MiB at 64 GPUs on a lead of 0.67 %, 'the cap its floors favour')."""


def least_row(frame: pd.DataFrame, values) -> int:
    """The position in `frame` (one GPU count, a row a cap) where `values` (the ranked figure per row) is least, or
    DDP's default's where it is within CAN_TELL of the least; among caps where it is alike (within ALIKE of the
    least), the cap the small profile's answer names (agreement.cap_answer), else the largest. The answer's position
    where no value is known."""
    named = agreement.cap_answer(frame["bucket_cap_mb"], frame["step_ms"]).index
    values = np.asarray(values, dtype=float)
    if not np.isfinite(values).any():
        return named
    least = np.nanmin(values)
    caps = [float(cap) for cap in frame["bucket_cap_mb"]]
    if DDP_DEFAULT_CAP_MB in caps and values[caps.index(DDP_DEFAULT_CAP_MB)] <= least * (1 + CAN_TELL):
        return caps.index(DDP_DEFAULT_CAP_MB)
    alike = [k for k, v in enumerate(values) if np.isfinite(v) and v <= least * (1 + ALIKE)]
    if named in alike:
        return named
    caps = [float(frame["bucket_cap_mb"].iloc[k]) for k in alike]
    return alike[caps.index(DDP_DEFAULT_CAP_MB)] if DDP_DEFAULT_CAP_MB in caps else alike[int(np.argmax(caps))]


def ranked_row(frame: pd.DataFrame, step_column: str, floor_column: str, model: str = "") -> pd.Series:
    """The frame's row at the cap this step (`step_column`, its floor `floor_column`) is ranked at: where the floors
    exist, the least of its ranked figure (`least_row`); else the small profile's answer's (agreement.answer_row)."""
    if not floors_in(frame, floor_column) or step_column not in frame:
        return agreement.answer_row(frame)
    values = [ranked_value(s, f, model) for s, f in zip(frame[step_column], frame[floor_column], strict=True)]
    return frame.iloc[least_row(frame, values)]


ZERO_COLUMNS = ("zero_step_ms", "zero_full_size_step_floor_ms")
"""ZeRO-1's predicted step and its full-size floor, as a cluster frame holds them."""


def ddp_ranked_row(frame: pd.DataFrame) -> pd.Series:
    """DDP's row at the cap it is ranked at (`ranked_row` of its step and full-size floor)."""
    return ranked_row(frame, "step_ms", "full_size_step_floor_ms", "DDP")


def caps_tie(frame: pd.DataFrame) -> bool:
    """Whether DDP's ranked figure (its step or its full-size floor, the higher) is alike (within ALIKE) at every cap
    of the frame, two caps or more: no cap is favoured, `least_row` names one by its rule."""
    values = [
        ranked_value(s, f, "DDP") for s, f in zip(frame["step_ms"], frame["full_size_step_floor_ms"], strict=True)
    ]
    known = [v for v in values if np.isfinite(v)]
    return len(known) == len(values) > 1 and max(known) <= min(known) * (1 + ALIKE)


def floors_lead(frame: pd.DataFrame) -> tuple[float, list[float]]:
    """How far DDP's ranked figure at the cap it is ranked at (`ddp_ranked_row`) is above the least of any cap, as a
    fraction, and the caps at that least: (0.0, []) where its cap's is the least (within ALIKE)."""
    values = [
        ranked_value(s, f, "DDP") for s, f in zip(frame["step_ms"], frame["full_size_step_floor_ms"], strict=True)
    ]
    known = [v for v in values if np.isfinite(v)]
    mine = ranked_value(*ddp_ranked_row(frame)[["step_ms", "full_size_step_floor_ms"]], "DDP")
    if not known or not np.isfinite(mine) or mine <= min(known) * (1 + ALIKE):
        return 0.0, []
    least = min(known)
    return mine / least - 1, [float(c) for c, v in zip(frame["bucket_cap_mb"], values, strict=True)
                              if np.isfinite(v) and v <= least * (1 + ALIKE)]  # fmt: skip


def floors_cap_words(cap_mb: float, tie: bool, lead: tuple[float, list[float]] = (0.0, [])) -> str:
    """Why DDP is ranked at `cap_mb` by its full-size floors, as the console's answer and the what-if page say it:
    'the cap its floors favour'; where they tie at every cap (`caps_tie`), which cap `least_row`'s rule took:
    'its floors tie at every cap, and 25 MiB is DDP's default'; where another cap's is lower by under CAN_TELL
    (`lead`: floors_lead's), 'within 0.67 % of 5 MiB's, less than the model can tell: 25 MiB is DDP's default'."""
    share, under = lead
    if not tie and under:
        return (f"within {share * 100:.2g} % of {layouts_text(under)} MiB's, less than the model can tell: "
                f"{cap_mb:g} MiB is DDP's default")  # fmt: skip
    if not tie:
        return "the cap its floors favour"
    whose = "DDP's default" if float(cap_mb) == DDP_DEFAULT_CAP_MB else "the profiled model's answer"
    return f"its floors tie at every cap, and {cap_mb:g} MiB is {whose}"


def kept_default_words(frames: list[pd.DataFrame]) -> str:
    """' but at w8: within 3.7 % of 100 MiB's, …: 25 MiB is DDP's default' (floors_cap_words): where DDP's cap changes
    along the GPU counts, those that keep DDP's default against a lower floor (a walkthrough read '25 MiB from w8;
    100 MiB from w16, the cap its floors favour' where 100 MiB's floor was 3.7 % below 25's at w8)."""
    said = []
    for frame in frames:
        if (lead := floors_lead(frame))[1]:  # a lower cap set aside at this count
            row = ddp_ranked_row(frame)
            said.append(f"w{int(row['world_size'])}: {floors_cap_words(row['bucket_cap_mb'], False, lead)}")
    return f" but at {'; '.join(said)}" if said else ""


def layouts_text(caps: list[float]) -> str:
    """'5', '1 and 5', '1, 5 and 10': caps as a sentence names them."""
    named = [f"{cap:g}" for cap in caps]
    return named[0] if len(named) == 1 else f"{', '.join(named[:-1])} and {named[-1]}"


def floors_bind(frame: pd.DataFrame) -> bool:
    """Whether DDP's full-size floor at the small profile's cap is above its prediction there: the full size's
    figures, not the small model's, then say what DDP's step is."""
    if not floors_in(frame, "full_size_step_floor_ms"):
        return False
    named = agreement.answer_row(frame)
    return bool(named["full_size_step_floor_ms"] > named["step_ms"])


def full_size_figures(frame: pd.DataFrame) -> dict:
    """Where a frame (one GPU count, a row a cap) holds the full size's floors: DDP's full-size columns (`full_size_*`)
    and ZeRO-1's floor at the cap each is ranked at (`ranked_row`; `full_size_cap_mb`, `zero_full_size_cap_mb`), the
    least DDP's step can take with its gradients at any cap (its prediction or floor, the higher) and the most its
    floor lets its scaling efficiency be (the one-GPU step, `local_step_ms`, over the floor: the page says it beside
    that floor, and read 0.999 from the ranked 300.3 ms beside a floor of 300.1 ms, which allows 1.000), both at
    the cap DDP is ranked at (`full_size_cap_mb`, and why that cap: `full_size_cap_why`, floors_cap_words); {}
    without floors."""
    if "full_size_step_floor_ms" not in frame:
        return {}
    ddp, zero = ddp_ranked_row(frame), ranked_row(frame, *ZERO_COLUMNS, "ZeRO-1")
    # at the cap it is ranked and booked at, as the console's answer says it: the least over every cap, within the
    # tie of it, read as that cap's (a page's 'at least 180 ms at any cap (25 MiB, …)', the console's 180.3 there)
    least = ranked_value(ddp["step_ms"], ddp["full_size_step_floor_ms"])
    floor = ddp["full_size_step_floor_ms"] if pd.notna(ddp["full_size_step_floor_ms"]) else least  # its own end
    backward = frame["backward_ms"].iloc[0] if "backward_ms" in frame else float("nan")  # the runner-up's words'
    return {**{key: ddp[key] for key in frame if key.startswith("full_size_")}, "full_size_cap_mb": ddp.bucket_cap_mb,
            "zero_full_size_step_floor_ms": zero[ZERO_COLUMNS[1]], "zero_full_size_cap_mb": zero.bucket_cap_mb,
            "full_size_least_step_ms": least,
            "full_size_cap_why": floors_cap_words(ddp.bucket_cap_mb, caps_tie(frame), floors_lead(frame)),
            "full_size_runner_up": runner_up_words(frame, backward),
            "full_size_efficiency_at_most": frame["local_step_ms"].iloc[0] / floor}  # fmt: skip


def full_size_why(row: pd.Series, backward_ms: float, cap_mb: float, *, terse: bool = False,
                  against: str | None = None) -> str:  # fmt: skip
    """'at 100 MiB its all-reduces (NVLS-tree/Simple: on a cluster, NCCL's pick) take at least …': why DDP's
    full-size floor at `cap_mb` (the row's) costs what it does, against the backward that hides them, with the
    gradient that makes the last bucket what it is at any cap where one is larger than the cap (last_gradient_words),
    on a cluster the link that bounds them (`full_size_bound`: clusters.bound.bound_words) and `against`, the
    runner-up cap's margin (runner_up_words; else the row's `full_size_runner_up`, the what-if page's); '' where
    the row has no such floor. `terse`: the console's words, the same figures."""
    needed = ("full_size_comm_ms", "full_size_last_ms", "full_size_exposed_ms")
    if any(key not in row or pd.isna(row[key]) for key in needed) or pd.isna(backward_ms):
        return ""
    exposed, comm = ms_text(row["full_size_exposed_ms"]), ms_text(row["full_size_comm_ms"])  # never '1.08e+03'
    last = (f"only after backward's last gradient: at least {exposed} ms exposed" if terse else "starts only after "
            f"backward's last gradient, and at least {exposed} ms of them stay exposed")  # fmt: skip
    against = row.get("full_size_runner_up", "") if against is None else against
    return (f"at {cap_mb:g} MiB its all-reduces{run_as(row, 'full_size_algorithms')} take at least "
            f"{comm} ms a step, one after another, overlapping backward ({ms_text(backward_ms)} "
            f"ms){_said(row, 'full_size_bound')}; the last ({ms_text(row['full_size_last_ms'])} ms"
            f"{last_gradient_words(row, cap_mb)}) {last}"
            f"{'; ' + against if isinstance(against, str) and against else ''}")  # fmt: skip


def _said(row, column: str) -> str:
    """'; ' and the row's words in `column` (the link that bounds the all-reduces: clusters.bound), '' where none."""
    said = row.get(column)
    return f"; {said}" if isinstance(said, str) and said else ""


def last_gradient_words(row, cap_mb: float) -> str:
    """'; 147 MiB of it is transformer.wte.weight, one gradient larger than the cap, which no cap splits': where
    the full size's last bucket holds a gradient larger than `cap_mb` (`full_size_last_largest(_mb)`), why its
    all-reduce, exposed after backward, is much the same at every cap; '' else."""
    name, mib = row.get("full_size_last_largest"), row.get("full_size_last_largest_mb", float("nan"))
    if not isinstance(name, str) or not name or pd.isna(mib) or mib <= cap_mb:
        return ""
    return f"; {mib:.3g} MiB of it is {name}, one gradient larger than the cap, which no cap splits"


def runner_up_words(frame: pd.DataFrame, backward_ms: float) -> str:
    """'against 1 MiB, 0.04 ms lower: 50 buckets × 0.251 ms = 12.6 ms of all-reduces to 13 × 0.697 = 9.06 ms, hidden
    behind backward either way, and 2.33 ms exposed after it to 2.37 ms': what DDP's full-size floor at the cap it
    is ranked at (ddp_ranked_row) differs from the next-best cap's by (the cap of the least ranked figure among the
    others), per-bucket cost × buckets against the exposed last all-reduce; '' without floors or another cap."""
    needed = ("full_size_step_floor_ms", "full_size_comm_ms", "full_size_buckets", "full_size_exposed_ms")
    if any(key not in frame for key in needed) or len(frame) < 2 or pd.isna(backward_ms):
        return ""
    mine = ddp_ranked_row(frame)
    others = frame[frame["bucket_cap_mb"] != mine["bucket_cap_mb"]]
    values = [ranked_value(s, f, "DDP") for s, f in zip(others["step_ms"], others["full_size_step_floor_ms"],
                                                        strict=True)]  # fmt: skip
    if not any(np.isfinite(values)) or pd.isna(mine["full_size_step_floor_ms"]):
        return ""
    other = others.iloc[int(np.nanargmin(values))]
    margin = other["full_size_step_floor_ms"] - mine["full_size_step_floor_ms"]
    how = f"{ms_text(abs(margin))} ms {'higher' if margin > 0 else 'lower'}" if abs(margin) >= 0.005 else "alike"
    hidden = all(r["full_size_comm_ms"] <= backward_ms for r in (other, mine))
    spent = ", hidden behind backward either way" if hidden else f", against backward's {ms_text(backward_ms)} ms"

    def made(r) -> str:
        n = int(r["full_size_buckets"])
        return f"{n} buckets × {ms_text(r['full_size_comm_ms'] / max(n, 1))} ms = {ms_text(r['full_size_comm_ms'])} ms"

    return (f"against {other['bucket_cap_mb']:g} MiB, its floor {how}: {made(other)} of all-reduces to "
            f"{made(mine)}{spent}, and {ms_text(other['full_size_exposed_ms'])} ms exposed after it to "
            f"{ms_text(mine['full_size_exposed_ms'])} ms")  # fmt: skip


def run_as(row, column: str) -> str:
    """' (NVLS-tree/Simple)': how NCCL runs a row's collectives (`column`: nccl.ClusterLink.algorithms' words, kept
    on a cluster), said beside their cost; '' where the row has none (another network, one GPU)."""
    said = row.get(column) if column in row else None
    return f" ({said})" if isinstance(said, str) and said else ""


def algorithm_changes(rows, column: str, gpus=lambda n: f"w{n}", what: str = "its all-reduces") -> str:
    """'; its all-reduces run mostly as NVLS/Simple from w8, NVLS-tree/Simple from w16': where the pair that carries
    most of `what`'s time (`column`: comm_algorithm, full_size_algorithm, zero_full_size_broadcast_algorithm, …)
    changes along `rows` (one a GPU count, fewest first; `gpus` names a count), often why efficiency steps down
    there; '' where it never does."""
    pairs = [(int(r["world_size"]), r.get(column)) for r in rows if isinstance(r.get(column), str) and r.get(column)]
    merged = [pair for k, pair in enumerate(pairs) if k == 0 or pair[1] != pairs[k - 1][1]]
    if len(merged) <= 1:
        return ""
    said = ", ".join(f"{pair} from {gpus(n)}" for n, pair in merged)
    return f"; {what} run mostly as {said}"


BUCKET_VIEW_WORTH = 0.8
"""ZeRO-1's parameters_as_bucket_view is named where its broadcasts would take under this share of the default's."""

CLUSTER_BROADCASTS = (
    "broadcasts priced as NCCL all-gathers that carry as many bytes a link: the profile holds no broadcast"
)
CLUSTER_SHARDED = "gathers and reduce-scatters as NCCL's tuner picks them"


def zero_floor_why(rows: list[pd.Series], optimizer_ms: float | None = None) -> str:
    """Why ZeRO-1's full-size floor is what it is at the most GPUs of `rows` (its ranked row per GPU count), in full:
    its optimizer on the largest shard of the full size's elements (`optimizer_ms`: the whole step's, from; else
    derived), its largest parameter where that alone bounds it, its broadcasts, parameters_as_bucket_view's where it
    would save, its own cost where added. The what-if page says this; the console the reason that dominates."""
    from harness.perfmodel.sharding.zero import own_cost_words

    last = rows[-1]
    share, name, alone_share = (last["zero_full_size_largest_share"], last["zero_full_size_largest_parameter"],
                                last["zero_full_size_largest_parameter_share"])  # fmt: skip
    alone = alone_share == alone_share and math.isclose(share, alone_share, rel_tol=1e-6)  # NaN: none
    named = f", {name}," if isinstance(name, str) and name else ""  # '' where the count named none
    bound = f"; its largest parameter{named} alone holds {alone_share:.1%}: more ranks cannot shrink it" * alone
    whole = f"{ms_text(optimizer_ms)} → " if optimizer_ms is not None else ""
    return (f"its optimizer steps the largest shard, {share:.1%} of the elements ({whole}"
            f"{ms_text(last['zero_full_size_optimizer_ms'])} ms{bound}), then each rank broadcasts what it updated, "
            f"overlapping nothing: {zero_broadcasts(rows)}{own_cost_words(last)}")  # fmt: skip


def zero_broadcasts(rows: list[pd.Series], *, every: bool = True) -> str:
    """'148 broadcasts, one a parameter, take at least 4.06 → 11.1 ms (w8 → w32); parameters_as_bucket_view=true, one
    broadcast a rank, would take …' where that saves (BUCKET_VIEW_WORTH): at each GPU count, or (not `every`) at the
    most GPUs only."""
    first, last = rows[0], rows[-1]
    many = len(rows) > 1
    span = f" (w{int(first['world_size'])} → w{int(last['world_size'])})" * many
    sent = f"{ms_text(first['zero_full_size_broadcast_ms'])} → " * many + ms_text(last["zero_full_size_broadcast_ms"])
    worth = [r for r in (rows if every else rows[-1:]) if r["zero_bucket_view_full_size_broadcast_ms"]
             < BUCKET_VIEW_WORTH * r["zero_full_size_broadcast_ms"]]  # fmt: skip
    packed = ", ".join(f"{ms_text(r['zero_bucket_view_full_size_broadcast_ms'])} ms at w{int(r['world_size'])}"
                       for r in worth)  # fmt: skip
    packed = f"; parameters_as_bucket_view=true, one broadcast a rank, would take {packed}" if worth else ""
    changes = algorithm_changes(rows, "zero_full_size_broadcast_algorithm", what="they")
    return (f"{int(last['zero_full_size_broadcasts'])} broadcasts{run_as(last, 'zero_full_size_broadcast_algorithms')}"
            f", one a parameter, take at least {sent} ms{span}{changes}{packed}")  # fmt: skip


def fsdp_exposed_words(row) -> str:
    """', at least 3.34 ms of them exposed': FSDP2's full-size floor's communication nothing hid (fsdp.floor_with's
    exposed_s), as the DDP and ZeRO-1 lines say theirs; below a µs, 0 (a difference of sums read '1.73e-15 ms');
    '' in rows from before it was kept."""
    exposed = row.get("fsdp_full_size_exposed_ms", float("nan"))
    if exposed != exposed:
        return ""
    return f", at least {ms_text(exposed if exposed >= 1e-3 else 0.0)} ms of them exposed"


def fsdp_floor_why(row: pd.Series, rows=()) -> str:
    """Why FSDP2's full-size floor at `row`'s GPU count is what it is, in full: its gathers over its units, its
    reduce-scatters (each as NCCL runs them, and where that changes along `rows`, one a GPU count: fsdp_changes),
    one at a time, its optimizer on 1/n, its own cost where added."""
    own = f"; FSDP's own cost at one rank, {ms_text(row['fsdp_own_ms'])} ms, added" if row["fsdp_own_ms"] > 0 else ""
    exposed, optimizer = fsdp_exposed_words(row), row["fsdp_optimizer_ms"]  # NaN: nothing priced it, no figure
    optimizer_ms = "" if optimizer != optimizer else f" ({ms_text(optimizer)} ms)"
    return (
        f"each block is all-gathered before its forward and again before its backward, the root once "
        f"({int(row['fsdp_full_size_gathers'])} gathers a step over {int(row['fsdp_full_size_units'])} units), "
        f"each reduce-scattered after its backward; the gathers{run_as(row, 'fsdp_full_size_gather_algorithms')} "
        f"take at least {ms_text(row['fsdp_full_size_gather_ms'])} ms and the reduce-scatters"
        f"{run_as(row, 'fsdp_full_size_scatter_algorithms')} {ms_text(row['fsdp_full_size_scatter_ms'])} ms, one at "
        f"a time{exposed}{fsdp_changes(rows, lambda n: f'{n:,} GPUs')}; its optimizer steps "
        f"1/{int(row['world_size'])} of every parameter{optimizer_ms}{own}"
    )


def fsdp_changes(rows, gpus=lambda n: f"w{n}", *, full_size: bool = True) -> str:
    """Where the pair that carries most of FSDP2's full-size gathers', then reduce-scatters', time changes along
    `rows` (algorithm_changes; not `full_size`: the profile's own)."""
    prefix = "fsdp_full_size_" if full_size else "fsdp_"
    gathers, scatters = (algorithm_changes(rows, f"{prefix}{op}_algorithm", gpus, "they")
                         for op in ("gather", "scatter"))  # fmt: skip
    if gathers == scatters:  # alike: said once
        return gathers.replace("; they", "; its gathers and reduce-scatters", 1)
    return gathers.replace("; they", "; its gathers", 1) + scatters.replace("; they", "; its reduce-scatters", 1)


CAP_MISS = 0.25
"""The miss on every all-reduce a cap caveat's advice is weighed at (`miss_could_move_cap`): the published check's own
line, 'off by more than 25 %' (its worst misses are single sizes: 10 GiB's, a 2 MiB one's, not every bucket's)."""


def miss_could_move_cap(frames: list[pd.DataFrame], miss: float = CAP_MISS) -> bool:
    """Whether `miss` on every all-reduce could move the cap named out of the caps' tie (agreement.TIE_TOLERANCE) in
    any of these frames (one GPU count each, a row a cap): the named cap's step slower by its all-reduces' time ×
    `miss`, every other cap's faster by theirs; the profile's steps at the answer's cap and, where the rows hold them,
    the full size's floors at the cap they are ranked at. Where none could, the cap caveat's advice (fit the cluster's
    own log before choosing) cannot change the cap named and is left out (a walkthrough read it where every cap tied,
    0.3 ms of all-reduces exposed)."""
    for frame in frames:
        pairs = [(agreement.answer_row(frame), "step_ms", "comm_ms")]
        if floors_in(frame, "full_size_step_floor_ms") and "full_size_comm_ms" in frame:
            pairs.append((ddp_ranked_row(frame), "full_size_step_floor_ms", "full_size_comm_ms"))
        for named, step, comm in pairs:
            steps = frame["step_ms"].combine(frame[step], max) if step != "step_ms" else frame["step_ms"]
            least = float((steps - frame[comm] * miss).min())
            if max(named["step_ms"], named[step]) + named[comm] * miss > least * (1 + agreement.TIE_TOLERANCE):
                return True
    return False

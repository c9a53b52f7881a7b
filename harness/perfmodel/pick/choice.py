"""Which strategy to book on a cluster: per GPU count, the fastest predicted step among the strategies whose
memory fits. It joins the two halves `predict --cluster` answers apart: the step (DDP's schedule, ZeRO-1's and FSDP2's,
harness.perfmodel.schedule, .sharding.zero and .sharding.fsdp, at the cap DDP's answer names) and the memory
(harness.perfmodel.memory: a rank's need at its step's peak, `need_mb`, against the profile's GPU
memory). A strategy without a step model is named where it fits: its time needs a run.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pandas as pd

from harness.analysis import agreement, roles
from harness.perfmodel.fits import is_tight
from harness.perfmodel.memory import need_mb
from harness.perfmodel.memory_words import SAME_COLLECTIVES, same_collectives_note
from harness.perfmodel.pick import bounds, failed, parity, ranked
from harness.perfmodel.pick.compressed import compressed_note, compressed_rows


@dataclasses.dataclass(frozen=True)
class Candidate:
    strategy: str  # as the memory line names it
    need_mb: float  # what a rank needs at its step's peak at this GPU count (memory.need_mb)
    fits: bool
    step_ms: float | None  # what it is ranked by (None: no step model): its step, or its full-size floor if higher
    left_out_ms: float = 0.0  # an own cost a CPU measured beyond DDP's (FSDP's, ZeRO's), scaled: its step's long end
    profiled_ms: float | None = None  # the step predicted at the profile's size, where its full-size floor is higher
    model: str = ""  # whose step model times it (DDP, ZeRO-1, FSDP2), as the run's own-steps check names them
    note: str = ""  # what its step rests on beyond its model's (a compression hook's: compressed_note)
    cap_mb: float | None = None  # the cap it is ranked at, where the floors rank a step on DDP's schedule (ranked.py)
    step_cap_mb: float | None = None  # the cap its step is at, on DDP's schedule (ZeRO-1's too), floors or not
    tight: bool = False  # fits, but with less left than the count has read below a peak (fits.is_tight)
    whose: str = bounds.CPU  # whose own cost `left_out_ms` is: a CPU's, or "the run's" (a GPU's, not told from noise)

    @property
    def bounded(self) -> bool:
        """Its step is a range: from none of its own cost (a CPU's, no GPU's) to all of it, scaled."""
        return self.left_out_ms > 0

    def at(self, corner: dict) -> float:
        """Its step at a corner of the own-cost bounds (bounds.corners, keyed by step model)."""
        return self.step_ms + self.left_out_ms * (corner.get(self.model, bounds.SHORT) == bounds.LONG)

    @property
    def named(self) -> str:
        """'stock at 100 MiB': its name, with the cap it is ranked at where that is said."""
        return self.strategy + (f" at {self.cap_mb:g} MiB" if self.cap_mb is not None else "")

    @property
    def booked(self) -> str:
        """'stock at 25 MiB': its name with the cap its step is at wherever it runs on DDP's schedule, the answer
        table's cell (a booking without its cap read 'stock' beside 'stock at 25 MiB' of another model)."""
        cap = self.cap_mb if self.cap_mb is not None else self.step_cap_mb
        return self.strategy + (f" at {cap:g} MiB" if cap is not None else "")


@dataclasses.dataclass(frozen=True)
class Choice:
    world_size: int
    picked: list[Candidate]  # the fastest that fit, with those within SMALL_CAP_LEAD, at every corner of the own-cost
    # bounds (`bounds`); where no one is (`open_on`), the picks of every corner; [] where none modelled fits
    others: list[Candidate]  # the modelled ones not picked
    apart: float = 0.0  # where the picks are tied by more than SMALL_CAP_LEAD: how far the model's own errors set them
    unbenched: list[Candidate] = dataclasses.field(default_factory=list)  # modelled, not benched: faster, or none fits
    open_on: tuple[str, ...] = ()  # the step models whose own cost (a CPU's) the pick flips on: open until measured
    at_ends: tuple[list[Candidate], list[Candidate]] = ([], [])  # where open: the picks without every own cost, with

    @property
    def fastest(self) -> Candidate:
        """The pick whose step, its own cost's long end in, is least: `picked` names a tie's fits with room first, then
        the least machinery (MODELS' order), so this one need not be first."""
        return min(self.picked, key=whole_step)

    @property
    def whose(self) -> str:
        """Whose own cost the bounded steps' long ends hold (Candidate.whose): a CPU's unless the run's, a GPU's."""
        return next((c.whose for c in (*self.picked, *self.others) if c.bounded), bounds.CPU)

    @property
    def bounds(self) -> list[str]:
        """The step models whose steps here are bounded by an own cost (a CPU's): the corners' keys."""
        return list(dict.fromkeys(c.model for c in (*self.picked, *self.others) if c.fits and c.bounded))

    def behind(self, c: Candidate) -> tuple[float, float]:
        """How far `c`'s step is behind the fastest pick's, least and most over every corner of the bounds."""
        lags = [lag for lag, _ in self.behind_at(c)]
        return min(lags), max(lags)

    def behind_at(self, c: Candidate) -> list[tuple[float, dict]]:
        """(how far `c`'s step is behind the fastest pick's, the corner) at every corner of the bounds of the two
        compared alone: an fsdp-vs-stock lead read '3.0% faster without FSDP's and ZeRO's own cost' (as `lead_ends`
        names a corner), where ZeRO's moves neither step."""
        compared = [m for m in self.bounds if m in {c.model, *(p.model for p in self.picked)}]
        return [(c.at(at) / min(p.at(at) for p in self.picked) - 1, at) for at in bounds.corners(compared)]

    def lead_ends(self, c: Candidate) -> tuple[dict, dict]:
        """The corners where `c` is least and most behind the fastest pick: which end a lead holds at."""
        lags = self.behind_at(c)
        return min(lags, key=lambda lag: lag[0])[1], max(lags, key=lambda lag: lag[0])[1]

    def faster_at_every_corner(self, c: Candidate) -> bool:
        """Whether `c`'s step is below the fastest pick's at every corner by more than the model can tell."""
        return bool(self.picked) and self.behind(c)[1] < CLEARLY_AHEAD

    def faster_at_a_corner(self, c: Candidate) -> bool:
        """Whether `c`'s step is below the fastest pick's at one corner at least, by more than the model can tell."""
        return bool(self.picked) and self.behind(c)[0] < CLEARLY_AHEAD


def _asked(state: pd.DataFrame, options: dict) -> pd.Series:
    """Per row, whether it asked `options` and nothing else beyond its strategy's defaults (the cap is out already):
    {} for the step models' own; a sweep's gradient_as_bucket_view=false is DDP as it ships."""
    return roles.beyond_defaults_of(state).map(options.__eq__).astype(bool)


STEP_COLUMNS = {"reference": "step_ms", "compressed": "compressed_step_ms", "optimizer_shard": "zero_step_ms",
                "optimizer_shard_broadcast": "zero_broadcast_ms",
                "optimizer_shard_packed": "zero_bucket_view_broadcast_ms", "parameter_shard": "fsdp_step_ms",
                "parameter_shard_kept": "fsdp_kept_step_ms"}  # fmt: skip
"""Where a cluster frame holds each strategy's predicted step, and ZeRO-1's broadcasts (one a parameter; packed)."""
FLOOR_COLUMNS = {"reference": "full_size_step_floor_ms", "compressed": "compressed_full_size_step_floor_ms",
                 "optimizer_shard": "zero_full_size_step_floor_ms",
                 "optimizer_shard_broadcast": "zero_full_size_broadcast_ms",
                 "optimizer_shard_packed": "zero_bucket_view_full_size_broadcast_ms",
                 "parameter_shard": "fsdp_full_size_step_floor_ms",
                 "parameter_shard_kept": "fsdp_kept_full_size_step_floor_ms"}  # fmt: skip
"""The same for each step's floor with the full size's parameters (sharded.with_full_size_floors)."""


def step_rows(state: pd.DataFrame) -> dict[str, np.ndarray]:
    """Which state rows each step model times (STEP_COLUMNS' keys; ZeRO-1's with parameters_as_bucket_view under
    "optimizer_shard_packed"; DDP's with options that leave its collectives as they are, SAME_COLLECTIVES, priced as
    DDP's: a 1.3B Llama fitted only with gradient_as_bucket_view, which went unpriced and could not be picked): the
    same at every cap, so worked out once for a frame's rows (modelled_step)."""
    state = roles.with_roles(state)
    plain = _asked(state, {}).to_numpy()  # no option the step models leave out
    zero_one, sharded = (
        roles.sharded_optimizer_over_allreduce(state).to_numpy(),
        roles.shards_parameters(state).to_numpy(),
    )
    same = (
        roles.beyond_defaults_of(state)
        .map(lambda asked: all(key in SAME_COLLECTIVES and value is True for key, value in asked.items()))
        .to_numpy(bool)
    )
    return {"reference": roles.is_reference(state).to_numpy() & same, "compressed": compressed_rows(state).to_numpy(),
            "optimizer_shard": zero_one & plain,
            "optimizer_shard_packed": zero_one & _asked(state, {"parameters_as_bucket_view": True}).to_numpy(),
            "parameter_shard": sharded & plain,
            "parameter_shard_kept": sharded & _asked(state, {"reshard_after_forward": False}).to_numpy()}  # fmt: skip


def modelled_step(state: pd.DataFrame, named: pd.Series, columns: dict[str, str] = STEP_COLUMNS,
                  rows: dict[str, np.ndarray] | None = None) -> pd.Series:  # fmt: skip
    """Each state row's predicted step at this GPU count (`named`: the frame's row at the cap DDP's answer names):
    DDP's for the reference (its options at their defaults, or a compression hook alone: fp16's, bf16's), ZeRO-1's or
    FSDP2's for their roles (options at their defaults, or ZeRO-1's parameters_as_bucket_view, FSDP2's
    reshard_after_forward=false); NaN for the rest, and where the frame lacks
    the column (`columns`: FLOOR_COLUMNS for each step's full-size floor; `rows`: step_rows(state), if at hand)."""

    def value(key: str) -> float:
        return float(named.get(columns[key], np.nan))

    rows = step_rows(state) if rows is None else rows
    step = pd.Series(float("nan"), index=state.index)
    for key in ("reference", "compressed", "optimizer_shard", "parameter_shard", "parameter_shard_kept"):
        step[rows[key]] = value(key)  # the compressed: DDP's schedule, each bucket sent in fewer bytes
    step[rows["optimizer_shard_packed"]] = (  # one broadcast a rank
        value("optimizer_shard") - value("optimizer_shard_broadcast") + value("optimizer_shard_packed")
    )
    return step


def left_out_ms(state: pd.DataFrame, named: pd.Series) -> pd.Series:
    """Per state row, the own cost its modelled step leaves out beyond DDP's (also left out): FSDP's and ZeRO's,
    measured on a CPU, where the step is a GPU's (`fsdp_own_left_out_ms`, `zero_own_left_out_ms`); 0 for the rest."""
    left = pd.Series(0.0, index=state.index)
    for rows, column in ((roles.shards_parameters(state), "fsdp_own_left_out_ms"),
                         (roles.sharded_optimizer_over_allreduce(state), "zero_own_left_out_ms")):  # fmt: skip
        value = float(named.get(column, 0.0))
        left[rows.to_numpy()] = value if value == value else 0.0
    return left


CLEARLY_AHEAD = 1 / (1 + agreement.SMALL_CAP_LEAD) - 1
"""How far behind a pick (negative: ahead) a strategy never benched must be to be named faster: beyond the band a tie
among benched ones spans (`_picked`), as a user read 'fsdp predicted faster (45.19 ms) but not benched' against
stock's 45.22 ms, a 0.07 % lead the model cannot tell."""

MODELS = (("DDP", roles.is_reference), ("ZeRO-1", roles.sharded_optimizer_over_allreduce),
          ("FSDP2", roles.shards_parameters))  # fmt: skip
"""Each step model's name, as the run's own-steps check (own_check.errors_on_own_run) names it, and the rows it times:
the least machinery first (a tie names them in this order)."""
_MACHINERY = {name: k for k, (name, _) in enumerate(MODELS)}


def model_apart(fastest: Candidate, other: Candidate, errors: dict[str, list[float]] | None) -> float:
    """How much slower than `fastest` `other`'s prediction may be and its step still be the faster one, given how
    far each step model was from the run's own steps (predicted / measured − 1, per model): a step is its prediction
    over (1 + its model's error), so `other` is faster where its prediction is below `fastest`'s × (1 + other's) /
    (1 + fastest's); each model's errors pooled as the geometric mean of 1 + error. 0 where either model was not
    checked, both are one model's, or `other`'s model reads no lower than `fastest`'s."""
    if not errors or fastest.model == other.model or not errors.get(fastest.model) or not errors.get(other.model):
        return 0.0
    log_ratio = np.mean(np.log1p(errors[other.model])) - np.mean(np.log1p(errors[fastest.model]))
    return max(0.0, float(np.expm1(log_ratio)))


def choose(state: pd.DataFrame, frames: list[pd.DataFrame], capacity_gib: float,
           errors: dict[str, list[float]] | None = None) -> list[Choice]:  # fmt: skip
    """Per cluster frame (one GPU count each, with ZeRO-1's and FSDP2's columns), the choice among the strategies whose
    parity did not fail in the run (pick.parity) and that failed nowhere in it (pick.failed); [] without a GPU memory
    or without counted activations (memory_words.fit_words says nothing then either). `errors`: each step model's
    error on the run's own steps, which widens what is too close to call between two models (`model_apart`)."""
    # one that failed parity or failed outright is no booking (said: unchosen_words)
    everything, state = state, failed.bookable(parity.passed(state))
    if not capacity_gib or state.empty or state["activation_mb"].isna().all():
        return []
    state, choices = roles.with_roles(state), []  # once: each test of a role below would fill them again
    for frame in frames:
        named = agreement.answer_row(frame)
        at = state[(state["world_size"] == int(named["world_size"])) & state["activation_mb"].notna()]
        if at.empty:
            continue  # nothing the run measured was carried to this GPU count: nothing to choose from
        models = pd.Series("", index=at.index)
        for name, rows in MODELS:
            models[rows(at).to_numpy()] = name
        candidates = _ranked_candidates(at, frame, models, capacity_gib)
        timed = sorted((c for c in candidates if c.step_ms is not None), key=lambda c: c.step_ms)
        fitting = [c for c in timed if c.fits]
        bounded = list(dict.fromkeys(c.model for c in fitting if c.bounded))
        each, _ = bounds.at_every_corner(bounded, lambda at, fit=fitting: _picked(fit, at, errors))
        picked = [c for c in each[0] if all(c in ends for ends in each)]  # a pick at every corner: decided
        open_on = () if picked or not fitting else tuple(m for m in bounded if any(
            c.model == m for ends in each for c in ends)) or tuple(bounded)  # fmt: skip
        if open_on:  # no pick holds at every corner: each corner's, the short ends' first
            picked = list(dict.fromkeys(c for ends in each for c in ends))
        apart = 0.0 if open_on else max((model_apart(picked[0], c, errors) for c in picked[1:]), default=0.0)
        # a tie names what fits with room first, then, as a user picks among equals, the least machinery (DDP's
        # all-reduce, ZeRO-1, FSDP2: MODELS' order), then the least step with its own cost's long end in: booked
        # first, as the bookings book it (a user read 'fsdp or stock at 25 MiB or zero' as fsdp winning, its lead
        # only its own cost left out); open: the corners' order, the short ends' first
        picked = sorted(picked, key=lambda c: (c.tight, 0 if open_on else _MACHINERY.get(c.model, len(MODELS)),
                                               0.0 if open_on else whole_step(c)))  # fmt: skip
        made = Choice(int(named["world_size"]), picked, [c for c in timed if c not in picked],
                      apart if apart > agreement.SMALL_CAP_LEAD else 0.0, [], open_on,
                      (each[0], each[-1]) if open_on else ([], []))  # fmt: skip
        # named where faster than the pick at a corner at least (`faster_at_every_corner` says whether at each), or,
        # where nothing benched fits, as the way out: what a rank of theirs holds is unmeasured
        benched = {
            *models,
            *parity.benched_models(everything, made.world_size, MODELS),
            *failed.benched_models(everything, MODELS),
        }  # failed ones: benched too
        faster = [c for c in _unbenched(benched, frame) if not picked or made.faster_at_a_corner(c)]
        choices.append(dataclasses.replace(made, unbenched=faster))
    return choices


def _unbenched(benched: set[str], frame: pd.DataFrame) -> list[Candidate]:
    """ZeRO-1's and FSDP2's steps (ranked as `_candidate` ranks them, at the cap ranked.ranked_row names) where the
    run benched no strategy of theirs: predicted from the profile, but what a rank holds was never measured, so none
    is chosen; each named as you would bench it (its strategies' names)."""
    found = []
    for model, key in (("ZeRO-1", "optimizer_shard"), ("FSDP2", "parameter_shard")):
        if STEP_COLUMNS[key] not in frame:
            continue
        row = ranked.ranked_row(frame, STEP_COLUMNS[key], FLOOR_COLUMNS[key], model)
        step, floor = row.get(STEP_COLUMNS[key], np.nan), row.get(FLOOR_COLUMNS[key], np.nan)
        if model not in benched and not pd.isna(step):
            cap = _said_cap(frame, row, model, FLOOR_COLUMNS[key])
            found.append(dataclasses.replace(_candidate(_names_of(model), float("nan"), False, float(step),
                                                        float(floor), 0.0, model), cap_mb=cap))  # fmt: skip
    return found


def _said_cap(frame: pd.DataFrame, row: pd.Series, model: str, floor_column: str) -> float | None:
    """The cap a candidate is said to be ranked at: where the floors rank a step on DDP's schedule, else none."""
    on_schedule = model in ("DDP", "ZeRO-1")  # FSDP2's step is the same at every cap
    return float(row["bucket_cap_mb"]) if on_schedule and ranked.floors_in(frame, floor_column) else None


def _ranked_candidates(at: pd.DataFrame, frame: pd.DataFrame, models: pd.Series, capacity_gib: float):
    """Each state row of one GPU count as a Candidate, ranked at the cap where its ranked figure is least where the
    full size's floors exist (ranked.least_row), else at the cap the small profile's answer names."""
    need, left = need_mb(at), left_out_ms(at, agreement.answer_row(frame))
    rows = [frame.iloc[k] for k in range(len(frame))]
    masks = step_rows(at)
    steps = [modelled_step(at, row, rows=masks) for row in rows]  # per cap, each state row's step and floor
    floors = [modelled_step(at, row, FLOOR_COLUMNS, masks) for row in rows]
    hooked, asked = compressed_rows(at).to_numpy(), roles.beyond_defaults_of(at).tolist()
    named = agreement.cap_answer(frame["bucket_cap_mb"], frame["step_ms"]).index
    whose = str(frame["own_cost_whose"].iloc[0]) if "own_cost_whose" in frame else bounds.CPU
    found = []
    for j, (label, n, extra, model) in enumerate(zip(at["strategy"], need, left, models, strict=True)):
        floored = any(pd.notna(f.iloc[j]) for f in floors)
        values = [ranked.ranked_value(s.iloc[j], f.iloc[j], model) for s, f in zip(steps, floors, strict=True)]
        k = ranked.least_row(frame, values) if floored else named
        c = _candidate(label, float(n), n <= capacity_gib * 1024, steps[k].iloc[j], floors[k].iloc[j], float(extra),
                       model)  # fmt: skip
        at_cap = float(rows[k]["bucket_cap_mb"]) if model in ("DDP", "ZeRO-1") else None  # FSDP2's: any cap
        cap = at_cap if floored else None
        note = (
            compressed_note(rows[k], full_size=c.profiled_ms is not None)
            if hooked[j]
            else (same_collectives_note(asked[j]) if masks["reference"][j] else "")
        )
        found.append(dataclasses.replace(c, cap_mb=cap, step_cap_mb=at_cap, note=note,
                                         tight=is_tight(float(n), capacity_gib), whose=whose))  # fmt: skip
    return found


@functools.cache
def _names_of(model: str) -> str:
    """The registered strategies step model `model` times ('zero'), as you would bench them: the same every call."""
    return ", ".join(roles.names_of(dict(MODELS)[model]))


def _candidate(label: str, need: float, fits: bool, step: float, floor: float, left_out: float,
               model: str) -> Candidate:  # fmt: skip
    """A strategy ranked by its predicted step, or by its full-size floor where that is higher (the prediction moved
    the profile's smaller model's parameters; the floor the whole model's), or ZeRO-1's floor wherever it has one
    (ranked.REPLACED); `model`: whose step model times it."""
    if pd.isna(step):
        return Candidate(label, need, bool(fits), None, left_out, model=model)
    value = ranked.ranked_value(step, floor, model)
    raised = not pd.isna(floor) and (value != step or model in ranked.REPLACED)
    return Candidate(label, need, bool(fits), value, left_out, profiled_ms=float(step) if raised else None,
                     model=model)  # fmt: skip


def _picked(fitting: list[Candidate], at: dict | None = None, errors=None) -> list[Candidate]:
    """Of the candidates that fit, at a corner `at` of the own-cost bounds (bounds.corners; {}: every step at its
    short end): the fastest with those within what the model can tell (agreement.SMALL_CAP_LEAD, as for caps, or how
    far its errors on the run's own steps set the two models apart: `model_apart`), fastest first."""
    at = at or {}
    ordered = sorted(fitting, key=lambda c: c.at(at))
    if not ordered:
        return []
    pick, fastest = ordered[0], ordered[0].at(at)  # what every other is judged against
    band = {id(c): max(agreement.SMALL_CAP_LEAD, model_apart(pick, c, errors)) for c in ordered}
    tied = [c for c in ordered if c.at(at) <= fastest * (1 + band[id(c)])]  # each within its own pair's band
    widest = max(band[id(c)] for c in tied)  # the band the tie reaches: every step within it is in it too
    return [c for c in ordered if c.at(at) <= fastest * (1 + widest)]


def whole_step(c: Candidate) -> float:
    return c.step_ms + c.left_out_ms  # its long end: a CPU's own cost (FSDP's, ZeRO's), scaled, all in it


def without_optimizer(frames: list[pd.DataFrame], optimizer_ms: float) -> list[pd.DataFrame]:
    """The cluster frames with no optimizer time: DDP's step less `optimizer_ms`, the sharded ones' their shard's."""

    def one(frame: pd.DataFrame) -> pd.DataFrame:
        ddp = ("step_ms", "compressed_step_ms", FLOOR_COLUMNS["reference"], FLOOR_COLUMNS["compressed"])
        less = {c: frame[c] - optimizer_ms for c in ddp if c in frame}  # DDP's steps, hooked or not
        for step, shard in SHARD_OF.items():
            if step in frame and shard in frame:
                less[step] = frame[step] - frame[shard]
        return frame.assign(**less)

    return [one(frame) for frame in frames]


SHARD_OF = {"zero_step_ms": "zero_optimizer_ms", "fsdp_step_ms": "fsdp_optimizer_ms",
            "fsdp_kept_step_ms": "fsdp_optimizer_ms", FLOOR_COLUMNS["optimizer_shard"]: "zero_full_size_optimizer_ms",
            FLOOR_COLUMNS["parameter_shard"]: "fsdp_optimizer_ms",
            FLOOR_COLUMNS["parameter_shard_kept"]: "fsdp_optimizer_ms"}  # fmt: skip
"""The optimizer's part of each sharded step and full-size floor a cluster frame holds (FSDP2's shard is 1/n
whatever the size; ZeRO-1's largest shard is the full size's partition's in its floor)."""

"""Notes where a figure comes out below its floor: a winner faster than local under the answer's table, a bar
under its tick in the floor figure, each with the noise of the measured floor it beat.
Pure: ranked rows and configs in, sentences (HTML) out."""

from __future__ import annotations

import pandas as pd

from harness.analysis import roles, stats, why
from reports.pages.html import esc


def repeats_text(medians: list[float]) -> str:
    """'its 2 repeats 64.03–64.18 ms', or 'one repeat': the evidence behind a figure drawn or ranked."""
    if len(medians) < 2:
        return "one repeat"
    return f"its {len(medians)} repeats {min(medians):.2f}–{max(medians):.2f} ms"


def local_spread(medians: list[float]) -> str:
    """What local's repeats say of the floor they make: 'local's 2 repeats spread 51.14–98.80 ms, so the floor is
    measured noisily', where they disagree as the noise column judges; else that it is a measurement too."""
    if len(medians) < 2:
        return "local ran once: the floor is one measurement, with that launch's noise"
    spread = f"local's {len(medians)} repeats spread {min(medians):.2f}–{max(medians):.2f} ms"
    if "repeats disagree" in stats.noise_note([], medians):
        return spread + ", so the floor is measured noisily"
    return spread + ": the floor is a measurement too, not an exact bound"


def answer_below_floor(group: pd.DataFrame) -> str:
    """A note under one world size's answer table (pooled.ranked rows) where its winner comes out faster than
    local, the floor the table lists last: both are measured, so the floor bounds it only as far as its noise."""
    floor, contenders = group[group["is_floor"]], group[~group["is_floor"]]
    if floor.empty or contenders.empty or contenders.iloc[0]["step_ms"] >= floor.iloc[0]["step_ms"]:
        return ""
    best, local = contenders.iloc[0], floor.iloc[0]
    said = (f"{best['strategy']} ({best['step_ms']:.2f} ms; {repeats_text(best['repeat_ms'])}) comes out below "
            f"local, the floor ({local['step_ms']:.2f} ms); {local_spread(local['repeat_ms'])}.")  # fmt: skip
    return f'<p class="banner warning"><b>Below the floor:</b> {esc(said)}</p>'


def figure_below_floor(rows: pd.DataFrame, configs: pd.DataFrame) -> str:
    """A note under the floor figure naming each drawn bar below its tick (rows: network.with_floor's), per world
    size, with where that floor comes from: local's repeats, or the collectives run's fitted all-reduce."""
    under = rows[rows["step_ms_median"] < rows["floor_ms"]]
    notes = []
    for world, group in under.groupby("world_size"):
        bars = "; ".join(f"{r['config_label']} drawn at {r['step_ms_median']:.2f} ms, under its floor of "
                         f"{r['floor_ms']:.2f} ms ({repeats_text(_alike(configs, r, why.SAME_CONFIGURATION))})"
                         for _, r in group.iterrows())  # fmt: skip
        notes.append(f"<b>Below the floor at {int(world)} ranks:</b> {esc(bars)}. {esc(_floor_source(group, configs))}")
    return "".join(f'<p class="banner warning">{note}</p>' for note in notes)


def _floor_source(group: pd.DataFrame, configs: pd.DataFrame) -> str:
    """Why a floor can be beaten: it is local's measured step, or an all-reduce fitted to noisy timings."""
    said = []
    if (group["floor_ms"] == group["local_ms"]).any():
        setup = [key for key in why.SAME_CONFIGURATION if key not in ("impl", "impl_options")]
        local = _alike(configs[roles.is_baseline(configs)], group.iloc[0], setup)
        said.append(f"There the floor is local's step, the geometric mean of its repeats' medians: "
                    f"{local_spread(local)}.")  # fmt: skip
    if (group["floor_ms"] != group["local_ms"]).any():
        said.append("Where the floor is the all-reduce, it is the collectives run's fitted latency and bandwidth "
                    "applied to the bytes sent: a fit to noisy timings, not a bound measured in this run.")  # fmt: skip
    return " ".join(said)


def _alike(configs: pd.DataFrame, row: pd.Series, keys: tuple[str, ...] | list[str]) -> list[float]:
    """The ok repeats' median steps of the configurations that match `row` on `keys` (nulls match nulls)."""
    mask = configs["status"] == "ok"
    for key in (k for k in keys if k in configs and k in row):
        mask &= configs[key].isna() if pd.isna(row[key]) else configs[key] == row[key]
    return [float(ms) for ms in configs.loc[mask, "step_ms_median"].dropna()]

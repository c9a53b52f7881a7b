"""Statistics as small pure functions over measured samples."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd


def summarize(samples_ms: Sequence[float]) -> dict[str, float | None]:
    """Median, p10, p90 and coefficient of variation of step times."""
    values = np.asarray(samples_ms, dtype=float)
    if values.size == 0:
        return {"step_ms_median": None, "step_ms_p10": None, "step_ms_p90": None, "step_ms_cv": None}
    mean = values.mean()
    return {
        "step_ms_median": float(np.median(values)),
        "step_ms_p10": float(np.percentile(values, 10)),
        "step_ms_p90": float(np.percentile(values, 90)),
        "step_ms_cv": float(values.std(ddof=1) / mean) if values.size > 1 and mean > 0 else None,
    }


def slowest_rank_per_step(steps: pd.DataFrame) -> pd.Series:
    """Step time as the job sees it: per measured step, the slowest rank's time."""
    measured = steps[~steps["warmup"]] if "warmup" in steps else steps
    return measured.groupby("step")["step_ms"].max().sort_index()


def samples_per_second(*, step_ms: float | None, batch_size: int, world_size: int) -> float | None:
    if not step_ms:
        return None
    return batch_size * world_size * 1000.0 / step_ms


def scaling_efficiency(
    samples_per_s: float | None, *, world_size: int, single_rank_samples_per_s: float | None
) -> float | None:
    """Weak scaling: throughput at n ranks over n times the throughput at one rank."""
    if not samples_per_s or not single_rank_samples_per_s:
        return None
    return samples_per_s / (world_size * single_rank_samples_per_s)


def exposed_comm_ms(step_ms: float | None, local_step_ms: float | None) -> float | None:
    """The communication that backward did not hide: step time above the no-comm floor."""
    if step_ms is None or local_step_ms is None:
        return None
    return step_ms - local_step_ms


def overlap_efficiency(step_ms: float | None, local_step_ms: float | None) -> float | None:
    """local / impl step time: 1.0 when communication is completely hidden."""
    if not step_ms or local_step_ms is None:
        return None
    return local_step_ms / step_ms

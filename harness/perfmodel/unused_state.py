"""Model state at the full size where the run's ranks held gradients for only part of the trained parameters: a
mixture of experts whose idle experts got no token in the small run's steps (nor, under Adam, any moment), or a branch
its data never took. A share held so is the small run's routing, not the model's: at the full size every expert may
get tokens, and a rank then holds every gradient and their optimizer state. The memory answer counts them whole
(`whole_where_unused`), never below what training can need.
"""

from __future__ import annotations

import pandas as pd

from harness.analysis import roles

SHORT_SHARE = 0.01
"""Held gradients this share or more below the trained parameters' bytes (at one rank, or a shard of them) are
parameters without gradients, not rounding."""

MOMENTS = {"adam": 2, "adamw": 2, "sgd": 0}
"""The optimizer's state per trained parameter, in gradients' bytes (ddpbench's SGD keeps no momentum)."""


def held_share(rows: pd.DataFrame) -> pd.Series:
    """Each row's held gradients over those its rank would hold had every trained parameter one: all of them, or its
    shard where the strategy shards the parameters (FSDP2: 1/world); NaN where the row has no gradient bytes."""
    whole = rows["grad_bytes"] / 2**20
    sharded = roles.shards_parameters(rows).reindex(rows.index, fill_value=False).astype(bool)
    expected = whole / rows["world_size"].where(sharded, 1)
    return rows["held_grad_mb"] / expected.where(expected > 0)


def short_of(rows: pd.DataFrame) -> tuple[float, float] | None:
    """(the fewest MiB of gradients a rank held, at its world size as one rank's whole, the trained parameters' MiB)
    where the run's rows held gradients for fewer than the trained parameters (`held_share` below 1 − SHORT_SHARE
    in some row); None where every row held them all, or the rows say neither."""
    if rows.empty or not {"held_grad_mb", "grad_bytes", "world_size"} <= set(rows):
        return None
    share = held_share(rows)
    if not (share < 1 - SHORT_SHARE).any():
        return None
    least = share.idxmin()
    return float(share[least] * rows.loc[least, "grad_bytes"] / 2**20), float(rows.loc[least, "grad_bytes"] / 2**20)


def whole_where_unused(scaled: pd.DataFrame, measured: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """(`scaled`, the run's rows at the full size (sharded.at_full_size), with each rank's gradients and optimizer
    state at least as the full size's trained parameters need them (`grad_bytes`, the same in every row: all of them,
    or FSDP2's shard; the optimizer's MOMENTS of them, or the share of a strategy that splits it: ZeRO-1's is
    re-counted by torch's partition from the state at one rank, memory.state_per_rank); the words that say so) where
    `measured` (the run's rows) held gradients for fewer than its trained parameters; else `scaled` as it is, ''."""
    short = short_of(measured)
    if short is None or scaled.empty:
        return scaled, ""
    whole = scaled["grad_bytes"] / 2**20
    flags = roles.with_roles(scaled)
    sharded = roles.shards_parameters(flags).reindex(scaled.index, fill_value=False).astype(bool)
    split = roles.shards_state(flags).reindex(scaled.index, fill_value=False).astype(bool)
    world = scaled["world_size"]
    grads = whole / world.where(sharded, 1)
    moments = scaled["optimizer"].map(MOMENTS) if "optimizer" in scaled else pd.Series(float("nan"), scaled.index)
    state = moments * whole / world.where(split, 1)  # ZeRO-1's share re-counted by its partition where one is known
    bounded = scaled.assign(held_grad_mb=pd.concat([scaled["held_grad_mb"], grads], axis=1).max(axis=1))
    if "held_optimizer_state_mb" in scaled:
        bounded["held_optimizer_state_mb"] = pd.concat([scaled["held_optimizer_state_mb"], state], axis=1).max(axis=1)
    unknown = moments.isna().any() and "held_optimizer_state_mb" in scaled
    state_words = "their optimizer state as the run held it (an optimizer ddpbench knows no state of)" if unknown \
        else "their optimizer state"  # fmt: skip
    held, trained = short
    return bounded, (f"gradients and {state_words} counted whole: the run's ranks held gradients for "
                     f"{held:.3g} of its {trained:.4g} MiB of trained parameters (parameters its steps gave none, "
                     "as experts no token reached), which training the full size can give them all")  # fmt: skip

"""What each strategy's collectives take a step on a cluster, whatever the GPU computes: the profile's, or the full
size's where the rows hold its floors (the what-if page's table, and the console's where a CPU's compute ranks no
step)."""

from __future__ import annotations

import pandas as pd

COMMUNICATED = (("DDP", "comm_ms", "full_size_comm_ms"), ("ZeRO-1", "zero_broadcast_ms", "zero_full_size_broadcast_ms"),
                ("FSDP2 gathers", "fsdp_gather_ms", "fsdp_full_size_gather_ms"),
                ("FSDP2 reduce-scatters", "fsdp_scatter_ms", "fsdp_full_size_scatter_ms"))  # fmt: skip
"""Each strategy's collectives a step as a cluster's rows hold them: the profile's, and the full size's where its
floors are in the rows (DDP's per cap; ZeRO-1's broadcasts and FSDP2's the same at every cap)."""


def communicated(rows: pd.DataFrame, *, full: bool) -> pd.DataFrame:
    """Per GPU count and cap, the milliseconds each strategy's collectives take a step (COMMUNICATED: the full size's
    where `full`, the rows holding its floors, else the profile's) and DDP's last all-reduce, after backward, with
    DDP's under a 2-byte compression hook (`hook`, `hook last`: compression.with_compressed's); NaN
    where a strategy has no model (FSDP2 without block times). What holds whatever the GPU computes: the what-if
    page and the console say it where a CPU's compute ranks no step."""
    out = rows[["world_size", "nodes", "bucket_cap_mb"]].copy()
    for name, own, floor in COMMUNICATED:
        out[name] = rows[floor if full else own] if (floor if full else own) in rows else float("nan")
    out["DDP last"] = rows["full_size_last_ms" if full else "last_allreduce_ms"]
    for name, own, floor in (
        ("hook", "compressed_comm_ms", "compressed_full_size_comm_ms"),
        ("hook last", "compressed_last_allreduce_ms", "compressed_full_size_last_ms"),
    ):
        out[name] = rows[floor if full else own] if (floor if full else own) in rows else float("nan")  # 2-byte
    return out


LAST_BUCKET_LEAST = "the least any GPU exposes, no ranking of caps: a GPU's shorter backward hides less of the rest"
"""What DDP's last all-reduce ('DDP last') is where no step is predicted: the bucket ready as backward ends is exposed
at any compute speed, the buckets before it only on a GPU whose backward leaves too little time to hide them (a
recommender's embedding ready at 99 % of backward): a floor, so a cap whose last bucket is smaller is not the faster
for it."""

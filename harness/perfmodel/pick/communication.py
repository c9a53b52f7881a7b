"""What each strategy's collectives take a step on a cluster, whatever the GPU computes: the profile's, or the full
size's where the rows hold its floors (the what-if page's table, and the console's where a CPU's compute ranks no
step)."""

from __future__ import annotations

import pandas as pd

from harness.analysis import roles

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


def unpriced(configs: pd.DataFrame | None, workload: str | None = None) -> list[str]:
    """The strategies the run benched (of `workload`) whose collectives COMMUNICATED leaves out: none of the step
    models (DDP's bucket schedule, ZeRO-1's, FSDP2's) times them, by the roles they declare; the baseline, which
    communicates nothing, is none of them. A walkthrough's own strategy went missing from the table without a word."""
    if configs is None or configs.empty:
        return []
    rows = roles.with_roles(configs[configs["status"] == "ok"])
    rows = rows if workload is None or "workload" not in rows else rows[rows["workload"] == workload]
    priced = roles.is_reference(rows) | roles.sharded_optimizer_over_allreduce(rows) | roles.shards_parameters(rows)
    return list(dict.fromkeys(rows.loc[~(priced | roles.is_baseline(rows)), "impl"]))


def unpriced_words(names: list[str]) -> str:
    """'not in the table: rsag, naive, which no step model here times (…)', for `unpriced`'s names; '' for none."""
    if not names:
        return ""
    one = len(names) == 1
    return (f"not in the table: {', '.join(names)}, which no step model here times (it models DDP's buckets, ZeRO-1's "
            f"broadcasts and FSDP2's gathers and reduce-scatters, each strategy by the role its plug-in declares): "
            f"the run page has what the run measured of {'its' if one else 'their'} collectives")  # fmt: skip

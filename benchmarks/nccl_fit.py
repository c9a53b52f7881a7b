"""`predict --nccl-tests` on every published table: how closely a profile fitted to a real log gives
that log back, at every size of 64 KiB or more (#27's check asks within 10 %).

    .venv/bin/python benchmarks/nccl_fit.py            # the markdown table in docs/measured/cluster-model.md

Each table of tests/data/published/ with at least four rows of 64 KiB or more is written out as the
nccl-tests log it was copied from (its out-of-place size, time, algbw and busbw; ranks on one host
per node), read back by the reader `--nccl-tests` uses, and fitted from its GPU's built-in profile
with the algorithms its run allowed, as `--nccl-tests` fits (the levels only: one node's bandwidths
and NCCL's latency scale, or the network's bandwidth and latency). Unlike benchmarks/cluster_model.py
this is the fit's error on the rows it was fitted to: what a user who brings that log gets back.
Tables run with a forced protocol are left out (the fit lets NCCL choose among all of them).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import cluster_model

from harness.perfmodel.clusters import nccl, nccltests, nccltests_fit

MIN_ROWS = 4  # fewer rows than that pin nothing: the fit moves two or three levels
FIT_WITHIN = 0.10
LEVEL_NAMES = {"intra_busbw_gbps": "ring", "nvls_busbw_gbps": "NVLS", "inter_busbw_gbps": "net"}


def as_log(table: cluster_model.Table, folder: Path) -> nccltests.Log | None:
    """The table as the nccl-tests log it came from, read back by `--nccl-tests`' reader."""
    profile = cluster_model.profile_for(table)
    ranks = profile.gpus_per_node * table.nodes
    factor = nccl.bus_factor("all_reduce", ranks)
    choices = []
    for nbytes, busbw, time_us in cluster_model.read_table(cluster_model.PUBLISHED / table.file)[1]:
        if busbw <= 0:
            continue
        time_us = time_us or nbytes * factor / (busbw * 1e3)
        choices.append(nccl.Choice("all_reduce", nbytes, ranks, table.nodes, "", "", time_us))  # as published
    if sum(c.nbytes >= nccltests_fit.FIT_MIN_BYTES for c in choices) < MIN_ROWS:
        return None
    path = folder / table.file.replace(".csv", ".txt")
    path.write_text(nccltests.write_text(choices))
    return nccltests.read(path)


def fits() -> list[tuple[cluster_model.Table, nccltests_fit.Fit]]:
    out = []
    with tempfile.TemporaryDirectory() as folder:
        for table in cluster_model.TABLES:
            if table.protocols != nccl.PROTOCOLS:
                continue
            log = as_log(table, Path(folder))
            if log is None:
                continue
            base = cluster_model.profile_for(table)
            assert (log.ranks, log.nodes) == (base.gpus_per_node * table.nodes, table.nodes), table.file
            out.append((table, nccltests_fit.fit(base, [log], name=f"{base.name} fitted")))
    return out


def _fitted(fit: nccltests_fit.Fit) -> str:
    parts = []
    for field, value in fit.fitted.items():
        if field == "latency_scale":
            parts.append(f"latency × {value:.2f}")
        elif field == "inter_latency_us":
            parts.append(f"net latency {value:.1f} µs")
        else:
            parts.append(f"{LEVEL_NAMES[field]} {value:.0f} GB/s")
    return ", ".join(parts)


def markdown(fitted: list[tuple[cluster_model.Table, nccltests_fit.Fit]] | None = None) -> str:
    lines = ["| table | nodes | rows ≥ 64 KiB | fitted | mean abs error | worst (size) | rows within 10 % |",
             "|---|---:|---:|---|---:|---:|---:|"]  # fmt: skip
    for table, fit in fits() if fitted is None else fitted:
        worst = max(fit.errors, key=lambda e: abs(e[2]))
        within = sum(abs(e) <= FIT_WITHIN for *_, e in fit.errors)
        lines.append(f"| `{table.file.removesuffix('.csv')}` | {table.nodes} | {len(fit.errors)} | {_fitted(fit)} | "
                     f"{fit.mean_abs:.1%} | {worst[2]:+.1%} ({cluster_model.size_label(worst[1])}) | "
                     f"{within} of {len(fit.errors)} |")  # fmt: skip
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown())

"""The cluster model against every published nccl-tests table in tests/data/published/ (none of them
fitted to): predicted bus bandwidth over published, per size, 1 MiB to 8 GiB.

    .venv/bin/python benchmarks/cluster_model.py            # the markdown table in docs/measured/cluster-model.md
    .venv/bin/python benchmarks/cluster_model.py --sizes    # and every size of every table
    .venv/bin/python benchmarks/cluster_model.py --write    # and the built-in profiles' published check (JSON)

Each table is compared with the built-in profile of its GPU's node, on the table's node count,
with the algorithms and protocols its environment allowed (NCCL_ALGO, NCCL_PROTO), and, where the
table's network is not that node's DGX network, with the table's NICs (their count and rate set
NCCL's channels across nodes) and the profile's between-node bandwidth set from them at the DGX H100
profile's own ratio (380 GB/s of bus bandwidth for 8 × 400 Gb/s = 0.95 of the NICs).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.perfmodel.clusters import cluster, nccl
from harness.perfmodel.clusters.published import PUBLISHED_CHECKS

PUBLISHED = Path(__file__).resolve().parent.parent / "tests" / "data" / "published"
MIN_BYTES, MAX_BYTES = 2**20, 8 * 2**30
WITHIN = (0.20, 0.25)  # the bounds: one node within 20 % at every size, several nodes within 25 %
NIC_EFFICIENCY = 380 / 400  # DGX H100: ≈ 380 GB/s between nodes (GTC 2024 S62129) of 8 × 400 Gb/s = 400 GB/s


@dataclasses.dataclass(frozen=True)
class Table:
    file: str
    profile: str
    nodes: int
    algorithms: tuple[str, ...] | None = None  # NCCL_ALGO of the run; None: NCCL chose
    protocols: tuple[str, ...] = nccl.PROTOCOLS  # NCCL_PROTO of the run
    nics: tuple[int, float] | None = None  # the table's network (NICs per node, Gb/s each), when not the profile's
    note: str = ""
    healthy: bool = True  # False: a cluster its owner reported as degraded, or a paste whose rows jump about


# fmt: off
TABLES = (
    Table("h200_1node_azure_ndv5_allreduce_busbw.csv", "dgx-h200", 1, algorithms=("nvls",),
          note="NCCL_ALGO=NVLS; in place"),
    Table("h100_1node_azure_ndv5_allreduce_busbw.csv", "dgx-h100", 1, algorithms=("nvls",),
          note="NCCL_ALGO=NVLS; in place"),
    Table("h100_1node_aws_p5_batch_allreduce.csv", "dgx-h100", 1, note="NCCL's own choice"),
    Table("a100_1node_azure_ndv4_allreduce_busbw.csv", "dgx-a100", 1,
          note="page says NCCL_ALGO=NVLS, which A100 lacks: NCCL's choice assumed; in place"),
    Table("a100_1node_oci_bmgpu48_ubuntu_10GiB.csv", "dgx-a100", 1, note="10 GiB only"),
    Table("a100_1node_oci_bmgpu48_ol_10GiB.csv", "dgx-a100", 1, note="10 GiB only"),
    Table("a100_p4d_1to4node_nccl527_1GiB.csv", "dgx-a100", 1, note="1 GiB, the one-node row"),
    Table("a100_1node_galvatron_dgxa100_40gb_allreduce.csv", "dgx-a100", 1,
          note="one process, 8 GPUs (-g 8); a unit test's fixture"),
    Table("a100_1node_lamforest_80gb_allreduce.csv", "dgx-a100", 1, note="one process, 8 GPUs (-g 8)"),
    Table("h100_2node_aws_p5_efa3200_allreduce.csv", "dgx-h100", 2, nics=(32, 100), note="EFA, 32 × 100 Gb/s"),
    Table("h100_2node_oci_roce_allreduce.csv", "dgx-h100", 2, nics=(16, 200), note="RoCE, 16 × 200 Gb/s"),
    Table("h100_2node_gcp_a3mega_allreduce.csv", "dgx-h100", 2, nics=(8, 200),
          note="TCPXO Ethernet, 8 × 200 Gb/s"),
    Table("a100_2node_aws_p4de_efa400_allreduce.csv", "dgx-a100", 2, nics=(4, 100), note="EFA, 4 × 100 Gb/s"),
    Table("a100_2node_oci_bmgpu48_ubuntu_10GiB.csv", "dgx-a100", 2, nics=(16, 100),
          note="RoCE, 16 × 100 Gb/s; 10 GiB only"),
    Table("a100_2node_oci_bmgpu48_ol_10GiB.csv", "dgx-a100", 2, nics=(16, 100),
          note="RoCE, 16 × 100 Gb/s; 10 GiB only"),
    Table("h100_2node_dell_xe9680_ib400_nccltests309_allreduce.csv", "dgx-h100", 2,
          note="InfiniBand, 8 × 400 Gb/s, bare metal"),
    Table("h100_2node_gjaion_ib400_nccltests309_allreduce.csv", "dgx-h100", 2, note="InfiniBand, 8 × 400 Gb/s"),
    Table("h100_2node_gjaion_ib400_ring_minctas24_nccltests309_allreduce.csv", "dgx-h100", 2, algorithms=("ring",),
          note="NCCL_ALGO=Ring, NCCL_MIN_CTAS=24; InfiniBand, 8 × 400 Gb/s"),
    Table("h100_2node_crusoe_ib_nvlstree_nccltests294_allreduce.csv", "dgx-h100", 2, algorithms=("nvlstree",),
          note="NCCL_ALGO=NVLSTree; InfiniBand, cloud VMs"),
    Table("h100_4node_gjaion_ib400_nccltests309_allreduce.csv", "dgx-h100", 4, note="InfiniBand, 8 × 400 Gb/s"),
    Table("h100_4node_vmware_xe9680_ib400_nccltests309_allreduce.csv", "dgx-h100", 4,
          note="InfiniBand, 8 × 400 Gb/s; VMs"),
    Table("h100_8node_gjaion_ib400_nccltests309_allreduce.csv", "dgx-h100", 8, note="InfiniBand, 8 × 400 Gb/s"),
    Table("h100_8node_gjaion_ib400_minctas24_nccltests309_allreduce.csv", "dgx-h100", 8,
          note="NCCL_MIN_CTAS=24; InfiniBand, 8 × 400 Gb/s"),
    Table("h100_128node_nccltests322_roce_ring_ll128_allreduce.csv", "dgx-h100", 128, algorithms=("ring",),
          protocols=("LL128",), note="NCCL_ALGO=Ring, NCCL_PROTO=LL128, NCCL_MIN_NCHANNELS=32; network not stated "
          "(RoCE)"),
    Table("h100_2node_nccltests290_ib400_degraded_allreduce.csv", "dgx-h100", 2,
          note="a cluster its owner reported as degraded; InfiniBand", healthy=False),
    Table("h100_2node_nccltests290_ib400_ring_degraded_allreduce.csv", "dgx-h100", 2, algorithms=("ring",),
          note="the same degraded cluster, NCCL_ALGO=Ring", healthy=False),
    Table("h100_2node_mitorcd_dgxh100_suspect_allreduce.csv", "dgx-h100", 2,
          note="DGX H100, network not stated; erratic below 512 MiB", healthy=False),
    Table("h200_2node_nebius_ib_runai_allreduce.csv", "dgx-h200", 2, note="InfiniBand (the provider's)"),
)
# fmt: on


def read_table(path: Path) -> tuple[str, list[tuple[int, float, float]]]:
    """(its source line, [(bytes, busbw GB/s, time µs or 0 where the table has none)]) from a published
    table (comment lines, a header, rows)."""
    source, rows, header = "", [], None
    for line in path.read_text().splitlines():
        if line.startswith("# source:"):
            source = line.removeprefix("# source:").strip().split()[0]
        elif line.startswith("#") or not line.strip():
            continue
        elif header is None:
            header = line.split(",")
        else:
            values = dict(zip(header, line.split(","), strict=False))
            if "nodes" in values and values["nodes"] != "1":
                continue
            if values.get("busbw_gbps"):
                time_us = float(values.get("time_us") or 0)
                rows.append((int(values["size_bytes"]), float(values["busbw_gbps"]), time_us))
    return source, rows


def profile_for(table: Table) -> cluster.Cluster:
    profile = cluster.load(table.profile)
    if table.algorithms:  # NCCL_ALGO: NCCL chooses among these alone
        profile = dataclasses.replace(profile, algorithms=table.algorithms)
    if table.nics:  # their count and rate set NCCL's channels across nodes; their sum the bandwidth
        count, gbits = table.nics
        profile = dataclasses.replace(profile, nics=count, nic_gbps=gbits,
                                      inter_busbw_gbps=count * gbits / 8 * NIC_EFFICIENCY)  # fmt: skip
    return profile


def errors(table: Table) -> tuple[str, list[tuple[int, float, float, str]]]:
    """(source, [(bytes, published, predicted, algorithm/protocol)]) over 1 MiB … 8 GiB (a table of
    one point is kept whatever its size)."""
    source, rows = read_table(PUBLISHED / table.file)
    profile = profile_for(table)
    out = []
    for nbytes, busbw, _ in rows:
        if nbytes < MIN_BYTES or (nbytes > MAX_BYTES and len(rows) > 1):
            continue
        choice = nccl.choose(profile, "all_reduce", nbytes, nodes=table.nodes, protocols=table.protocols)
        out.append((nbytes, busbw, choice.busbw_gbps, f"{choice.algorithm}/{choice.protocol}"))
    return source, out


def summary_rows() -> list[dict]:
    rows = []
    for table in TABLES:
        source, points = errors(table)
        relative = [predicted / published - 1 for _, published, predicted, _ in points]
        worst = max(range(len(relative)), key=lambda i: abs(relative[i]))
        rows.append({"table": table, "source": source, "points": points, "mean": _mean_abs(relative),
                     "worst": relative[worst], "worst_bytes": points[worst][0],
                     "within": {bound: sum(abs(r) <= bound for r in relative) for bound in WITHIN}})  # fmt: skip
    return rows


def _mean_abs(values: list[float]) -> float:
    return sum(abs(v) for v in values) / len(values) if values else math.nan


def _within(row: dict, count: int) -> str:
    return " / ".join(f"{row['within'][bound]} of {count}" for bound in WITHIN)


def _span(points: list) -> str:
    """The sizes a table's points cover: one size, or the first–the last."""
    first, last = size_label(points[0][0]), size_label(points[-1][0])
    return first if len(points) == 1 else f"{first}–{last}"


def size_label(nbytes: int) -> str:
    if nbytes < 2**20:
        return f"{nbytes / 2**10:g} KiB"
    return f"{nbytes / 2**30:g} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:g} MiB"


def markdown() -> str:
    lines = ["| table | profile × nodes | sizes | mean abs error | worst (size) | sizes within 20 % / 25 % "
             "| conditions | source |", "|---|---|---|---:|---:|---:|---|---|"]  # fmt: skip
    for row in summary_rows():
        t, points = row["table"], row["points"]
        lines.append(f"| `{t.file.removesuffix('.csv')}` | {t.profile} × {t.nodes} | {_span(points)} | "
                     f"{row['mean']:.1%} | {row['worst']:+.1%} ({size_label(row['worst_bytes'])}) | "
                     f"{_within(row, len(points))} | {t.note} | {row['source']} |")  # fmt: skip
    return "\n".join(lines)


def published_checks() -> dict[str, list[dict]]:
    """Per built-in profile, its error against each healthy table (published.PUBLISHED_CHECKS' content):
    what `predict --cluster` and the what-if page tell a user about the profile they chose."""
    checks: dict[str, list[dict]] = {}
    for row in summary_rows():
        t, points = row["table"], row["points"]
        if not t.healthy:
            continue
        checks.setdefault(t.profile, []).append({
            "table": t.file.removesuffix(".csv"), "nodes": t.nodes, "sizes": _span(points),
            "count": len(points), "within_25": row["within"][0.25],
            "mean_abs_error": round(row["mean"], 6), "worst_error": round(row["worst"], 6),
            "worst_size": size_label(row["worst_bytes"]), "conditions": t.note, "source": row["source"]})  # fmt: skip
    return {name: sorted(rows, key=lambda r: r["nodes"]) for name, rows in sorted(checks.items())}


def published_checks_text() -> str:
    return json.dumps(published_checks(), indent=1, ensure_ascii=False) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", action="store_true", help="every size of every table too")
    parser.add_argument("--write", action="store_true", help=f"write {PUBLISHED_CHECKS} too")
    args = parser.parse_args()
    print(markdown())
    if args.write:
        PUBLISHED_CHECKS.write_text(published_checks_text())
    if args.sizes:
        for row in summary_rows():
            print(f"\n{row['table'].file}")
            for nbytes, published, predicted, how in row["points"]:
                print(f"  {size_label(nbytes):>9}  published {published:7.1f}  predicted {predicted:7.1f}  "
                      f"{predicted / published - 1:+6.1%}  {how}")  # fmt: skip


if __name__ == "__main__":
    main()

"""Which of a cluster's links bounds its all-reduces at a world size, and the least time that link sets on a step's
gradients: the why's 'the 25 Gb/s between nodes bounds them at w16 (2.6 GB/s bus bandwidth; the node's PCIe 12 GB/s):
1.32 GiB × 2·15/16 / 2.6 GB/s = 1022 ms'. The bandwidth is the one nccl.bus_bandwidth starts from for the algorithm
NCCL picks (its protocols and per-channel caps only lower it, a tree halves it), so that time is a floor on the bytes
alone, each call's latency left out: the all-reduces priced beside it take it or more.
"""

from __future__ import annotations

import dataclasses

from harness.perfmodel.clusters import nccl
from harness.perfmodel.clusters.cluster import Cluster
from harness.perfmodel.clusters.nccl import ALGORITHM_NAMES
from harness.results.values import ms_text

NAMED = {said: algorithm for algorithm, said in ALGORITHM_NAMES.items()}  # 'NVLS-tree' → 'nvlstree'
FABRICS = {"nvswitch": "NVSwitch", "nvlink": "NVLink mesh", "pcie": "PCIe"}


@dataclasses.dataclass(frozen=True)
class Bound:
    """The link that bounds an all-reduce, its bus bandwidth (GB/s) and the other level's, where it is faster."""

    link: str  # 'the 25 Gb/s between nodes', "the node's PCIe", "the node's NVSwitch (NVLS)"
    busbw_gbps: float
    beside: str = ""  # "the node's PCIe 12 GB/s": the level that does not bound it; '' on one level
    note: str = ""  # ' (twice its 380: NVLS-tree at 2 nodes)': why its busbw is not the profile's own

    def floor_s(self, nbytes: float, world_size: int) -> float:
        """A ring's bytes of an all-reduce of `nbytes` over this link: nbytes × 2(n−1)/n / busbw."""
        return nbytes * 2 * (world_size - 1) / world_size / (self.busbw_gbps * 1e9)


def _between(cluster: Cluster, busbw_gbps: float) -> Bound:
    nics = f"{cluster.nics} × " if cluster.nics > 1 else ""
    twice = f" (twice its {cluster.inter_busbw_gbps:g}: NVLS-tree at 2 nodes)" * (busbw_gbps > cluster.inter_busbw_gbps)
    return Bound(f"the {nics}{cluster.nic_gbps:g} Gb/s between nodes", busbw_gbps, note=twice)


def _level(cluster: Cluster, level: str, busbw_gbps: float) -> Bound:
    if level == "inter":
        return _between(cluster, busbw_gbps)
    if level == "nvls":
        return Bound("the node's NVSwitch (NVLS)", busbw_gbps)
    return Bound(f"the node's {FABRICS.get(cluster.fabric, cluster.fabric)}", busbw_gbps)


def bound(cluster: Cluster, algorithm: str, nodes: int) -> Bound:
    """The level whose bus bandwidth `algorithm` (NCCL's name: ring, tree, nvls, nvlstree) runs at on `nodes` nodes,
    the slowest of those nccl.level_bandwidths gives (the ones nccl.bus_bandwidth starts from), the faster other
    said beside it."""
    levels = sorted((_level(cluster, level, gbps) for level, gbps in
                     nccl.level_bandwidths(cluster, algorithm, nodes).items()), key=lambda b: b.busbw_gbps)  # fmt: skip
    low, *higher = levels
    return dataclasses.replace(low, beside="; ".join(f"{b.link} {b.busbw_gbps:g} GB/s{b.note}" for b in higher))


def bound_words(link, sizes: list[float], world_size: int) -> str:
    """'the 25 Gb/s between nodes bounds them at w16 (2.6 GB/s bus bandwidth; the node's PCIe 12 GB/s): 1.32 GiB ×
    2·15/16 / 2.6 GB/s = 1022 ms': the link that bounds the all-reduces of `sizes` (a step's buckets, bytes) on a
    cluster's `link` (nccl.ClusterLink), by the algorithm that carries most of their time, and the least it lets them
    take; '' on one GPU or another network."""
    if not hasattr(link, "cluster") or world_size <= 1 or not sum(sizes):
        return ""
    _, pair = link.algorithms(sizes, world_size)
    if not pair:
        return ""
    limit, nbytes = bound(link.cluster, NAMED[pair.split("/")[0]], link.nodes(world_size)), sum(sizes)
    beside = f"; {limit.beside}" if limit.beside else ""
    return (f"{limit.link} bounds them at w{world_size} ({limit.busbw_gbps:g} GB/s bus bandwidth{limit.note}{beside}): "
            f"{_gib(nbytes)} × 2·{world_size - 1}/{world_size} / {limit.busbw_gbps:g} GB/s = "
            f"{ms_text(limit.floor_s(nbytes, world_size) * 1e3)} ms")  # fmt: skip


def _gib(nbytes: float) -> str:
    return f"{nbytes / 2**30:.3g} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:.3g} MiB"

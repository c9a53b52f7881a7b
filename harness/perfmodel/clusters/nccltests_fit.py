"""A cluster profile fitted to nccl-tests logs (`nccltests.Log`): the fit moves only the profile's levels (one
node: the ring's and NVLS's bandwidths and one scale on NCCL's latencies; several: the network's bandwidth and
latency), pulls each weakly towards the profile's value, and reports its own error on the rows it used.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path

from harness.perfmodel.clusters import nccl
from harness.perfmodel.clusters.cluster import Cluster
from harness.perfmodel.clusters.nccltests import Log
from harness.protocols import ConfigError

PRIOR_WEIGHT = 0.01  # per level's log, against each row's log ratio: see `fit`
FIT_MIN_BYTES = 64 * 1024  # below this a collective is all latency: bandwidths cannot be read from it
FIT_BOUNDS = (0.01, 1e5)  # each fitted level's range (GB/s, µs, a scale): one at its edge was not pinned by the rows


@dataclasses.dataclass(frozen=True)
class Fit:
    cluster: Cluster
    fitted: dict[str, float]  # profile field → fitted value (GB/s, µs; latency_scale: × NCCL's latencies)
    errors: tuple[tuple[str, int, float], ...]  # (log, bytes, predicted/measured − 1) on the rows used

    @property
    def worst(self) -> float:
        return max((abs(e) for *_, e in self.errors), default=0.0)

    @property
    def mean_abs(self) -> float:
        return sum(abs(e) for *_, e in self.errors) / len(self.errors) if self.errors else 0.0


def _fields_for(logs: Sequence[Log], base: Cluster) -> list[str]:
    """One node's logs move NCCL's latencies (by one factor) and the node's bandwidths; several
    nodes' logs the network's latency (NCCL's latencyInter) and bandwidth."""
    fields = []
    if any(log.nodes == 1 for log in logs):
        fields += ["latency_scale", "intra_busbw_gbps"]
        if base.nvls_busbw_gbps > 0 and "nvls" in base.algorithms:
            fields.append("nvls_busbw_gbps")
    if any(log.nodes > 1 for log in logs):
        fields += ["inter_latency_us", "inter_busbw_gbps"]
    return fields


def _search_start(base: Cluster, field: str) -> float:
    """The base's value of a level, lifted off 0 (the search runs in log space): 1 µs of latency."""
    return max(getattr(base, field), 1.0 if field == "inter_latency_us" else 0.01)


def predicted(cluster: Cluster, log: Log, nbytes: int) -> nccl.Choice:
    return nccl.choose(cluster, log.collective, nbytes, nodes=log.nodes, ranks=log.ranks)


def fit(base: Cluster, logs: Sequence[Log], *, name: str) -> Fit:
    """The base profile's bandwidth levels that make the model closest to the logs' busbw (least
    squares on log ratios, every row ≥ 64 KiB alike, with a weak pull of each level towards the
    base's value), and the error on those rows."""
    from scipy.optimize import least_squares

    points = [(log, row) for log in logs for row in log.rows if row.nbytes >= FIT_MIN_BYTES and row.busbw_gbps > 0]
    if not points:
        raise ConfigError(f"--nccl-tests: no rows of {FIT_MIN_BYTES // 1024} KiB or more to fit bandwidths to")
    fields = _fields_for(logs, base)

    def cluster_at(log_values) -> Cluster:
        values = {f: float(math.exp(v)) for f, v in zip(fields, log_values, strict=True)}
        return dataclasses.replace(base, name=name, **values)

    # A weak pull towards the base profile: a level no row is limited by (a ring under NVLS, say)
    # stays at the profile's value instead of drifting wherever the search leaves it, while a level
    # the rows pin barely feels it (a 1 % misfit on one row weighs as much as moving a level 2.7×).
    # A base of 0 (InfiniBand's added latency) has no scale to pull towards in log space: no pull.
    start = {f: _search_start(base, f) for f in fields}
    pulled = [(i, math.log(start[f])) for i, f in enumerate(fields) if getattr(base, f) > 0]

    def residuals(log_values):
        cluster = cluster_at(log_values)
        misfit = [math.log(predicted(cluster, log, row.nbytes).busbw_gbps / row.busbw_gbps) for log, row in points]
        return misfit + [PRIOR_WEIGHT * (log_values[i] - anchor) for i, anchor in pulled]

    # Starts: the base profile's values; its bandwidths halved below the logs' peak (a level that does
    # not limit the model at the base value is flat there: the search would not leave it); and, with
    # logs of one node and of several, the node fitted to its own logs first and the network to the
    # rest (below). The solution that fits best wins.
    peak = max(row.busbw_gbps for _, row in points)
    starts = [start, {f: (min(v, peak) / 2 if f.endswith("_gbps") else v) for f, v in start.items()}]
    starts += _staged_start(base, logs, name=name)
    cap = {"intra_busbw_gbps": base.link_gbps or FIT_BOUNDS[1]}  # a ring no faster than its links: else refused
    low, high = math.log(FIT_BOUNDS[0]), [math.log(cap.get(f, FIT_BOUNDS[1])) for f in fields]
    solutions = [least_squares(residuals, [min(max(math.log(start[f]), low), high[k]) for k, f in enumerate(fields)],
                               bounds=([low] * len(fields), high)) for start in starts]  # fmt: skip
    cluster = cluster_at(min(solutions, key=lambda solution: solution.cost).x)
    errors = tuple(
        (Path(log.path).name, row.nbytes, predicted(cluster, log, row.nbytes).busbw_gbps / row.busbw_gbps - 1)
        for log, row in points
    )
    found = Fit(cluster, {f: getattr(cluster, f) for f in fields}, errors)
    return dataclasses.replace(found, cluster=_said_fitted(cluster, logs, found))


SOURCE_KEYS = {"intra_busbw_gbps": "intra.busbw_gbps", "nvls_busbw_gbps": "intra.nvls_busbw_gbps",
               "inter_busbw_gbps": "inter.busbw_gbps", "inter_latency_us": "inter.latency_us",
               "latency_scale": "latency_scale"}  # fmt: skip
"""A fitted field's key in a profile's [sources]: where its number now comes from."""


def _said_fitted(cluster: Cluster, logs: Sequence[Log], found: Fit) -> Cluster:
    """The fitted profile with each fitted number's source the logs (and the fit's error), not the base
    profile's datasheet: a page that shows the profile says where its numbers came from."""
    names = ", ".join(dict.fromkeys(Path(log.path).name for log in logs))
    said = (
        f"{len(logs)} nccl-tests log(s) of up to {max(log.nodes for log in logs)} node(s) ({names}): busbw "
        f"error on their rows ≥ {FIT_MIN_BYTES // 1024} KiB mean {found.mean_abs:.1%}, worst {found.worst:.1%}"
    )
    sources = {**cluster.sources, **{SOURCE_KEYS[f]: f"fitted to {said}" for f in found.fitted}}
    return dataclasses.replace(cluster, sources=sources, fitted_to=said, fitted_nodes=max(log.nodes for log in logs))


def _staged_start(base: Cluster, logs: Sequence[Log], *, name: str) -> list[dict[str, float]]:
    """The node's levels fitted to the one-node logs alone, then the network's to the others with the
    node's held: one start, when there are logs of both kinds. Fitted together from the base, a slow
    network can be read as a slow ring inside the node (the ring is what crosses nodes, and under NVLS
    no one-node row pins it), which fits the multi-node rows about as well and predicts wrongly."""
    one_node = [log for log in logs if log.nodes == 1]
    if not one_node or len(one_node) == len(logs):
        return []
    try:  # each part needs rows of its own to fit; without them the joint starts are all there is
        node = fit(base, one_node, name=name).fitted
        network = fit(dataclasses.replace(base, **node), [log for log in logs if log.nodes > 1], name=name).fitted
    except ConfigError:
        return []
    return [{**node, **network}]

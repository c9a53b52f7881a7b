"""A cluster profile fitted to nccl-tests logs (`nccltests.Log`): the fit moves only the profile's levels (one
node: the ring's and NVLS's bandwidths and one scale on NCCL's latencies; several: the network's bandwidth and
latency; the node from one-node logs alone, then the network with the node held), pulls each weakly towards the
profile's value, holds a bandwidth no row is limited by at it, and reports its own error on the rows it used.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path

from harness.perfmodel.clusters import nccl
from harness.perfmodel.clusters.cluster import Cluster
from harness.perfmodel.clusters.nccltests import Log, Row
from harness.protocols import ConfigError
from harness.results.values import counted

PRIOR_WEIGHT = 0.01  # per level's log, against each row's log ratio: see `fit`
FIT_MIN_BYTES = 64 * 1024  # below this a collective is all latency: bandwidths cannot be read from it
FIT_BOUNDS = (0.01, 1e5)  # each fitted level's range (GB/s, µs, a scale): one at its edge was not pinned by the rows


@dataclasses.dataclass(frozen=True)
class Fit:
    cluster: Cluster
    fitted: dict[str, float]  # profile field → fitted value (GB/s, µs; latency_scale: × NCCL's latencies)
    errors: tuple[tuple[str, int, float], ...]  # (log, bytes, predicted/measured − 1) on the rows used
    held: tuple[str, ...] = ()  # fields of `fitted` that limit none of the rows: kept at the base's value

    @property
    def worst(self) -> float:
        return max((abs(e) for *_, e in self.errors), default=0.0)

    @property
    def mean_abs(self) -> float:
        return sum(abs(e) for *_, e in self.errors) / len(self.errors) if self.errors else 0.0


def _search_start(base: Cluster, field: str) -> float:
    """The base's value of a level, lifted off 0 (the search runs in log space): 1 µs of latency."""
    return max(getattr(base, field), 1.0 if field == "inter_latency_us" else 0.01)


def predicted(cluster: Cluster, log: Log, nbytes: int) -> nccl.Choice:
    return nccl.choose(cluster, log.collective, nbytes, nodes=log.nodes, ranks=log.ranks)


def fit(base: Cluster, logs: Sequence[Log], *, name: str) -> Fit:
    """The base profile's levels that make the model closest to the logs' busbw (least squares on log ratios,
    every row ≥ 64 KiB alike, with a weak pull of each level towards the base's value), and the error on those
    rows. Staged: the node's levels from the one-node logs alone, then the network's from the others with the
    node's held (fitted together, a slow network can be read as a slow ring inside the node: the ring is what
    crosses nodes, and under NVLS no one-node row pins it). A level no row is limited by stays the base's."""
    points = _points(logs)
    if not points:
        raise ConfigError(f"--nccl-tests: no rows of {FIT_MIN_BYTES // 1024} KiB or more to fit bandwidths to")
    one_node = [log for log in logs if log.nodes == 1]
    fitted, held, cluster = {}, [], dataclasses.replace(base, name=name)
    for part, fields in ((one_node, _node_fields(base)), ([log for log in logs if log.nodes > 1], INTER_FIELDS)):
        if part and _points(part):  # one node's logs of small sizes alone pin nothing: the node stays the base's
            values, unpinned = _fit_part(cluster, _points(part), fields)
            cluster = dataclasses.replace(cluster, **values)
            fitted.update(values)
            held += unpinned
    errors = tuple(
        (Path(log.path).name, row.nbytes, predicted(cluster, log, row.nbytes).busbw_gbps / row.busbw_gbps - 1)
        for log, row in points
    )
    found = Fit(cluster, fitted, errors, tuple(held))
    return dataclasses.replace(found, cluster=_said_fitted(cluster, logs, found, base=base))


REACH_MARGIN = 1.05  # a row this far above the model's ceiling is not noise (nccl-tests' repeats differ 1-3 %)


@dataclasses.dataclass(frozen=True)
class Beyond:
    """A row across nodes that no network level reaches: the model bounds it by the node's own levels."""

    log: str
    nbytes: int
    measured_gbps: float
    ceiling_gbps: float  # the model's busbw at that size with an unbounded network


def beyond_reach(cluster: Cluster, logs: Sequence[Log]) -> list[Beyond]:
    """The rows of several nodes' logs above what `cluster` predicts there with the network unbounded: the model
    takes min(node, network) as the bound across nodes (docs/clusters.md, 'The model' 2), so no network level fits
    them, and the fit holds the network and misses them whatever it is."""
    unbounded = dataclasses.replace(cluster, inter_busbw_gbps=FIT_BOUNDS[1])
    found = []
    for log, row in _points([log for log in logs if log.nodes > 1]):
        ceiling = predicted(unbounded, log, row.nbytes).busbw_gbps
        bound = limits(unbounded, log, row.nbytes, "intra_busbw_gbps")  # not a small row's latency: the ring's
        if bound and row.busbw_gbps > ceiling * REACH_MARGIN:
            found.append(Beyond(Path(log.path).name, row.nbytes, row.busbw_gbps, ceiling))
    return found


def reach_text(beyond: Sequence[Beyond], cluster: Cluster) -> str:
    """'2-node rows of 64 MiB–8 GiB (8 of them) read up to 42.6 GB/s, above the node's ring's 24.97 GB/s, …': the
    one line that says why the fit misses them; "" where none."""
    if not beyond:
        return ""
    top = max(beyond, key=lambda b: b.measured_gbps)
    low, high = min(b.nbytes for b in beyond), max(b.nbytes for b in beyond)
    logs = ", ".join(dict.fromkeys(b.log for b in beyond))
    return (f"{len(beyond)} rows across nodes ({logs}, {size_text(low)}–{size_text(high)}) read up to "
            f"{top.measured_gbps:.3g} GB/s, above the node's ring's {cluster.intra_busbw_gbps:.4g} GB/s, which the "
            f"model takes as the bound across nodes (min(node, network): docs/clusters.md, 'The model' 2): no network "
            f"level reaches them, so the fit predicts {top.ceiling_gbps:.3g} GB/s at {size_text(top.nbytes)} and plans "
            "across nodes slower than these logs")  # fmt: skip


def size_text(nbytes: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:g} {unit}"
    return f"{nbytes} B"


def _points(logs: Sequence[Log]) -> list[tuple[Log, Row]]:
    return [(log, row) for log in logs for row in log.rows if row.nbytes >= FIT_MIN_BYTES and row.busbw_gbps > 0]


def _node_fields(base: Cluster) -> list[str]:
    """One node's logs move NCCL's latencies (by one factor) and the node's bandwidths."""
    nvls = base.nvls_busbw_gbps > 0 and "nvls" in base.algorithms
    return ["latency_scale", "intra_busbw_gbps", *(["nvls_busbw_gbps"] * nvls)]


INTER_FIELDS = ["inter_latency_us", "inter_busbw_gbps"]  # several nodes' logs: NCCL's latencyInter, the network


def _fit_part(base: Cluster, points: list[tuple[Log, Row]], fields: list[str]) -> tuple[dict[str, float], list[str]]:
    """`fields` fitted to `points`, each weakly pulled towards the base; a bandwidth that limits none of the rows at
    the fitted values (`limits`) is held at the base's and the rest fitted again: rows it barely touches (LL's, under
    its cap) would move it wherever their noise asks. Returns every field's value and those held."""
    free, held = list(fields), []
    while free:
        values = _least_squares(base, points, free)
        cluster = dataclasses.replace(base, **values)
        unpinned = [
            f
            for f in free
            if f.endswith("_gbps")  # a latency adds to every row: none is "limited" by it
            and not any(limits(cluster, log, row.nbytes, f) for log, row in points)
        ]
        if not unpinned:
            break
        held += unpinned
        free = [f for f in free if f not in unpinned]
    else:
        values = {}
    return {**{f: getattr(base, f) for f in fields}, **values}, held


LIMITED = 0.4
"""A row is limited by a level when its busbw moves at least 0.4 times as much as the level (d log busbw / d log
level, the level lowered 10 %): the level's bandwidth is the binding one and carries much of the row's time. A ring
under LL's cap moved by ±3 % noise reaches 0.36 on its rows; a network carrying half a row's time, 0.5."""


def limits(cluster: Cluster, log: Log, nbytes: int, field: str) -> bool:
    value = getattr(cluster, field)
    if value <= 0:
        return False
    lower = dataclasses.replace(cluster, **{field: value * 0.9})
    ratio = predicted(lower, log, nbytes).busbw_gbps / predicted(cluster, log, nbytes).busbw_gbps
    return abs(math.log(ratio) / math.log(0.9)) >= LIMITED


def _least_squares(base: Cluster, points: list[tuple[Log, Row]], fields: list[str]) -> dict[str, float]:
    from scipy.optimize import least_squares

    def cluster_at(log_values) -> Cluster:
        return dataclasses.replace(base, **{f: float(math.exp(v)) for f, v in zip(fields, log_values, strict=True)})

    # A weak pull towards the base profile: a level the rows pin barely feels it (a 1 % misfit on one row weighs
    # as much as moving a level 2.7×). A base of 0 (InfiniBand's added latency) has no scale to pull towards in log
    # space: no pull.
    start = {f: _search_start(base, f) for f in fields}
    pulled = [(i, math.log(start[f])) for i, f in enumerate(fields) if getattr(base, f) > 0]

    def residuals(log_values):
        cluster = cluster_at(log_values)
        misfit = [math.log(predicted(cluster, log, row.nbytes).busbw_gbps / row.busbw_gbps) for log, row in points]
        return misfit + [PRIOR_WEIGHT * (log_values[i] - anchor) for i, anchor in pulled]

    # Starts: the base profile's values, and its bandwidths halved below the logs' peak (a level that does not limit
    # the model at the base value is flat there: the search would not leave it). The one that fits best wins.
    peak = max(row.busbw_gbps for _, row in points)
    starts = [start, {f: (min(v, peak) / 2 if f.endswith("_gbps") else v) for f, v in start.items()}]
    cap = {"intra_busbw_gbps": base.link_gbps or FIT_BOUNDS[1]}  # a ring no faster than its links: else refused
    low, high = math.log(FIT_BOUNDS[0]), [math.log(cap.get(f, FIT_BOUNDS[1])) for f in fields]
    solutions = [least_squares(residuals, [min(max(math.log(start[f]), low), high[k]) for k, f in enumerate(fields)],
                               bounds=([low] * len(fields), high)) for start in starts]  # fmt: skip
    best = min(solutions, key=lambda solution: solution.cost).x
    return {f: float(math.exp(v)) for f, v in zip(fields, best, strict=True)}


SOURCE_KEYS = {"intra_busbw_gbps": "intra.busbw_gbps", "nvls_busbw_gbps": "intra.nvls_busbw_gbps",
               "inter_busbw_gbps": "inter.busbw_gbps", "inter_latency_us": "inter.latency_us",
               "latency_scale": "latency_scale"}  # fmt: skip
"""A fitted field's key in a profile's [sources]: where its number now comes from."""


def _worst(found: Fit) -> str:
    """'-63.0% (2 MiB in l40s-2node.txt)': signed, and where."""
    log, nbytes, error = max(found.errors, key=lambda e: abs(e[2]))
    return f"{error:+.1%} ({size_text(nbytes)} in {log})"


def _said_fitted(cluster: Cluster, logs: Sequence[Log], found: Fit, *, base: Cluster) -> Cluster:
    """The fitted profile with each fitted number's source the logs (and the fit's error), not the base
    profile's datasheet (a level held, its own source and why it was held), and its description the base's
    with what it was fitted to: a page or a saved file that shows the profile says where its numbers came from."""
    names = ", ".join(dict.fromkeys(Path(log.path).name for log in logs))
    said = (
        f"{counted(len(logs), 'nccl-tests log')} of up to {counted(max(log.nodes for log in logs), 'node')} ({names}): "
        "busbw "
        f"error on their rows ≥ {FIT_MIN_BYTES // 1024} KiB mean {found.mean_abs:.1%}, worst {_worst(found)} "
        "(+: predicted faster)"
    )
    if reach := reach_text(beyond_reach(cluster, logs), cluster):
        said += f"; {reach}"
    sources = {**cluster.sources, **{SOURCE_KEYS[f]: f"fitted to {said}" for f in found.fitted}}
    for field in found.held:
        own = cluster.sources.get(SOURCE_KEYS[field], "")
        sources[SOURCE_KEYS[field]] = f"{own}; held at {base.name}'s value by the fit to {names}: no row limited by it"
    description = f"{base.description or base.name}; fitted from {base.name} to nccl-tests logs {names}"
    return dataclasses.replace(cluster, sources=sources, fitted_to=said, fitted_nodes=max(log.nodes for log in logs),
                               description=description)  # fmt: skip

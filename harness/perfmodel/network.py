"""The network as the step-time model sees it: what one all-reduce costs at each world size.

An all-reduce of S bytes over n ranks takes `t(S) = α + S × f(n) / busbw`, f(n) = 2(n−1)/n
(nccl-tests' bus factor), fitted from a `ddpbench collectives` run or given (`--busbw`,
`--latency`). With it, optionally, contention: how much compute and communication slow each
other down while they overlap (measured by `ddpbench collectives`; on the CPU gloo's threads
share the cores).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from harness.config.units import parse_bandwidth, parse_latency
from harness.results import model_tables, store
from harness.results.invocation import on_every_node
from harness.results.layout import session_running


def allreduce_bus_factor(world_size: int) -> float:
    return 2 * (world_size - 1) / world_size


def bus_factor(op: str, world_size: int) -> float:
    """nccl-tests' bus factor: the bytes each rank's link carries per byte of the message, as a ring moves them
    (a broadcast's is 1: every byte passes every link once)."""
    if op == "all_reduce":
        return allreduce_bus_factor(world_size)
    return 1.0 if op == "broadcast" else (world_size - 1) / world_size  # all_gather, reduce_scatter


# ---------------------------------------------------------------- the network


@dataclasses.dataclass(frozen=True)
class Link:
    """One collective's cost at one world size: t(S) = alpha_s + S × bus factor / busbw_bytes_per_s; an
    all-reduce's unless `op` says otherwise (a broadcast's, for ZeRO's parameters)."""

    alpha_s: float
    busbw_bytes_per_s: float
    source: str = "given"
    largest_bytes: float | None = None  # the largest message it was fitted on (None: given, not fitted)
    op: str = "all_reduce"

    def allreduce_s(self, nbytes: float, world_size: int) -> float:
        """This link's collective of `nbytes` (named for the all-reduce that DDP's schedule asks for)."""
        if world_size <= 1 or nbytes <= 0:
            return 0.0  # one rank has nothing to exchange
        return self.alpha_s + nbytes * bus_factor(self.op, world_size) / self.busbw_bytes_per_s

    def collective_s(self, op: str, nbytes: float, world_size: int) -> float:
        """`op` (nccl-tests' size: an all-gather's output, a reduce-scatter's input) on this link: its own fit
        where `op` is this link's, else at this link's α and bus bandwidth (NCCL's rings carry every collective
        at about the same busbw: an assumption, said where it is used)."""
        return dataclasses.replace(self, op=op).allreduce_s(nbytes, world_size)

    def broadcast_s(self, nbytes: float, world_size: int) -> float:
        return self.collective_s("broadcast", nbytes, world_size)


def fit_link(sizes_bytes: Sequence[float], times_s: Sequence[float], *, world_size: int, source: str = "fit",
             op: str = "all_reduce") -> Link:  # fmt: skip
    """Least squares of t(S) = α + S·f/busbw on relative error (each size counts alike, small
    ones included), with α ≥ 0 and 1/busbw ≥ 0 (scipy's non-negative least squares)."""
    from scipy.optimize import nnls

    sizes = np.asarray(sizes_bytes, dtype=float)
    times = np.asarray(times_s, dtype=float)
    if len(sizes) < 2:
        raise ValueError("fitting α and β needs at least two message sizes")
    design = np.column_stack([np.ones_like(sizes), sizes * bus_factor(op, world_size)]) / times[:, None]
    (alpha, inverse_busbw), _ = nnls(design, np.ones_like(times))
    return Link(alpha_s=float(alpha), busbw_bytes_per_s=1.0 / inverse_busbw if inverse_busbw > 0 else float("inf"),
                source=source, largest_bytes=float(sizes.max()), op=op)  # fmt: skip


def links_from_collectives(frame: pd.DataFrame, *, source: str = "collectives", op: str = "all_reduce"
                           ) -> dict[int, Link]:  # fmt: skip
    """One fitted link per world size from the `op` rows that passed their check."""
    rows = frame[(frame["op"] == op) & frame["correct"].astype(bool)]
    links = {}
    for world, group in rows.groupby("world_size"):
        if len(group) >= 2:
            links[int(world)] = fit_link(group["bytes"], group["time_us"] / 1e6, world_size=int(world),
                                         source=source, op=op)  # fmt: skip
    return links


def link_for(links: dict[int, Link], world_size: int) -> Link:
    """The link measured at this world size, else the nearest measured one (an extrapolation:
    a ring all-reduce's bus bandwidth is roughly flat in n, its latency is not)."""
    if world_size in links:
        return links[world_size]
    nearest = min(links, key=lambda n: (abs(np.log2(n) - np.log2(world_size)), -n))
    link = links[nearest]
    return dataclasses.replace(link, source=f"{link.source} at world size {nearest}, extrapolated")


@dataclasses.dataclass(frozen=True)
class Contention:
    """Overlapped work runs slower: compute by `compute_slowdown` while an all-reduce is in
    flight, an all-reduce by `comm_slowdown` while backward computes (1.0, 1.0: none), measured
    on a `probe_bytes` message. `latency_slowdown`, where measured (a 4 KiB all-reduce), is what
    each call's latency pays: the schedule splits every bucket's slowdown into the two parts."""

    compute_slowdown: float = 1.0
    comm_slowdown: float = 1.0
    latency_slowdown: float | None = None
    probe_bytes: int = 8 * 1024**2


NO_CONTENTION = Contention()


# ---------------------------------------------------------------- a run's network


@dataclasses.dataclass(frozen=True)
class Network:
    links: dict[int, Link]
    contention: dict[int, Contention]
    source: str
    others: dict[str, dict[int, Link]] = dataclasses.field(default_factory=dict)  # the other collectives' fits, by op
    unfinished: dict[int, Path] = dataclasses.field(default_factory=dict)  # launched, nothing kept: each one's log
    in_progress: bool = False  # the collectives run is still being written: its last unfinished launch may be running
    fewer_nodes: str = ""  # where it spanned fewer nodes than the run it prices: that, in one line (`fewer_nodes`)


def given_network(*, busbw_bytes_per_s: float, latency_s: float) -> Network:
    link = Link(latency_s, busbw_bytes_per_s, source=f"given: busbw {busbw_bytes_per_s / 1e9:g} GB/s, "
                f"latency {latency_s * 1e6:g} µs")  # fmt: skip
    return Network({0: link}, {}, link.source)


def network_link(network: Network, world_size: int) -> Link:
    return network.links[0] if 0 in network.links else link_for(network.links, world_size)


def fitted_link(network: Network, op: str, world_size: int) -> Link | None:
    """`op`'s link fitted at this world size (else the nearest fitted); None where none was measured."""
    links = network.others.get(op)
    return link_for(links, world_size) if links else None


def broadcast_link(network: Network, world_size: int) -> Link | None:
    return fitted_link(network, "broadcast", world_size)


def sharded_links(network: Network, world_size: int) -> tuple[Link, Link]:
    """The all-gather's and the reduce-scatter's links: each one's fit where measured, else the all-reduce's."""
    fallback = network_link(network, world_size)
    return tuple(fitted_link(network, op, world_size) or fallback for op in ("all_gather", "reduce_scatter"))


def matching_collectives(results: Path, meta: dict) -> Path | None:
    """The collectives run in `results` made on the same machine, device and backend as the run, that measured
    something (a run stopped before its first world size finished holds no row): the one started nearest the
    run (a network measured days later is another network: re-reading an old run must not price it on the
    newest), else the newest where the run's start is unknown (`predict` on this machine, no run); of those
    measured across as many nodes as the run (--nnodes) where there is one."""
    key = (meta.get("environment", {}).get("hostname"), meta.get("device"), meta.get("backend"))
    found = []
    for run in model_tables.list_collectives_runs(results):
        other = model_tables.read_collectives_meta(run)
        same_machine = (other.get("hostname"), other.get("device"), other.get("backend")) == key
        if same_machine and not model_tables.read_collectives(run).empty:
            found.append((run, model_tables.started(other), _nodes(other)))
    # a run across nodes is priced on a network measured across as many nodes, where there is one
    found = [f[:2] for f in found if f[2] == _nodes(meta)] or [f[:2] for f in found]
    began = model_tables.started(meta)
    if began is None or not found:
        return found[0][0] if found else None
    return min(found, key=lambda f: abs((f[1] - began).total_seconds()) if f[1] is not None else float("inf"))[0]


def _nodes(meta: dict) -> int:
    """The nodes a run's config spanned (--nnodes; 1 in runs made before collectives took it)."""
    return int((meta.get("config") or {}).get("nnodes") or 1)


def measured_network(collectives_run: Path) -> Network:
    frame = model_tables.read_collectives(collectives_run)
    source = f"collectives run {collectives_run.name}"
    links = links_from_collectives(frame, source=source)
    contention = {int(r.world_size): _contention(r) for r in model_tables.read_contention(collectives_run).itertuples()}
    others = {op: links_from_collectives(frame, source=source, op=op) for op in ("broadcast", "all_gather",
                                                                                "reduce_scatter")}  # fmt: skip
    kept = {int(world) for world in frame["world_size"].unique()}
    unfinished = unfinished_launches(collectives_run, measured=kept)
    return Network(links, contention, source, others, unfinished, in_progress=session_running(collectives_run))


def unfinished_launches(collectives_run: Path, *, measured: set[int]) -> dict[int, Path]:
    """The world sizes the collectives run launched (a plan written) and kept nothing of (a launch that timed out or
    failed before its first size), each with its log: what a world size priced on another's fit was missing."""
    from harness.results.layout import PLANS, RunFolder

    # world-N.json, or world-N.nodeK.json from each node of a run across nodes: node 0's log is named as its plan
    plans = {plan.stem for plan in (collectives_run / PLANS).glob("world-*.json")}
    launched = sorted({int(size) for stem in plans if (size := stem.removeprefix("world-").split(".")[0]).isdigit()})
    folder = RunFolder(collectives_run)
    return {world: folder.log(f"world-{world}.node0" if f"world-{world}.node0" in plans else f"world-{world}")
            for world in launched if world not in measured}  # fmt: skip


def _contention(row) -> Contention:
    """A contention row as the schedule uses it (a run made before the latency was measured has none)."""
    latency = None if pd.isna(row.latency_slowdown) else float(row.latency_slowdown)
    return Contention(float(row.compute_slowdown), float(row.comm_slowdown), latency, int(row.bytes))


def network_for_run(results: Path, run: Path) -> Network | None:
    """--busbw given to bench (stored in run.json), else a matching collectives run, else None."""
    meta = store.read_run_meta(run)
    config = meta.get("config", {})
    if config.get("busbw"):
        return given_network(busbw_bytes_per_s=parse_bandwidth(config["busbw"]),
                             latency_s=parse_latency(config.get("latency") or "0us"))  # fmt: skip
    collectives_run = matching_collectives(results, meta)
    if collectives_run is None:
        return None
    return dataclasses.replace(measured_network(collectives_run), fewer_nodes=fewer_nodes(collectives_run, meta))


def fewer_nodes(collectives_run: Path, meta: dict) -> str:
    """Where the collectives run that prices a run spanned fewer nodes than the run did (none across as many is in
    its results folder: `matching_collectives` takes one there first), that in one line, and the command that
    measures it; '' else. A run across nodes priced on one node's network was once priced so without a word."""
    measured, spanned = _nodes(model_tables.read_collectives_meta(collectives_run)), _nodes(meta)
    if measured >= spanned:
        return ""
    on = "one node" if measured == 1 else f"{measured} nodes"
    config = meta.get("config") or {}
    command = (
        f"ddpbench collectives --gpus {config.get('gpus') or 1} --nnodes {spanned} --rdzv-endpoint "
        f"{config.get('rdzv_endpoint') or 'HOST:PORT'} --run-id NEW_ID --results {collectives_run.parent}"
    )
    return (f"run {meta.get('run_id') or 'this run'} spanned {spanned} nodes, but the network it is priced on, "
            f"collectives run {collectives_run.name}'s, was measured on {on}: its collectives between nodes are priced "
            f"as within {on} (measured by `{command}`{on_every_node(spanned)})")  # fmt: skip


def collectives_command(run: Path, *, program: str = "ddpbench") -> str:
    """`ddpbench collectives …` as it would run to measure the bench run `run`'s machine beside it (its ranks, 2 at
    least; its device and backend, which `matching_collectives` matches; into the run's results folder). `program`:
    how ddpbench is named (a page's as the README names it; the terminal's as it was invoked)."""
    meta = store.read_run_meta(run)
    gpus, backend = max(meta.get("config", {}).get("gpus") or 2, 2), meta.get("backend") or "auto"
    return (f"{program} collectives --gpus {gpus} --device {meta.get('device', 'auto')} --backend {backend} "
            f"--results {run.parent}")  # fmt: skip


def fitted_source(link, op: str) -> str | None:
    """Where `op`'s own fit came from; None where the run measured none of it (the all-reduce's link stood in)."""
    return link.source if link.op == op else None

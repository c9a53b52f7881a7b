"""What `ddpbench predict --nccl-tests` checks in the logs it fits a cluster profile to, said before it predicts: a
collectives run of CPU processes given as a GPU cluster's, a log of another node shape or GPU than the profile's,
logs of two GPUs, a log given twice or two of one case, and a fit pushed to the edge of its search or far from the
profile's own figures."""

from __future__ import annotations

from pathlib import Path

from harness.commands import console
from harness.config.bench import ConfigError
from harness.results.values import counted


def warn_if_not_gpus(run: Path) -> None:
    """A collectives run of CPU processes fitted to a GPU cluster's profile: nothing else would say so."""
    from harness.results import model_tables

    if (meta := model_tables.read_collectives_meta(run)).get("device") == "cpu":
        console.warning(f"--nccl-tests {str(run)!r} measured {meta.get('config', {}).get('gpus', '?')} CPU "
                        f"processes over {meta.get('backend', 'gloo')}, not GPUs over NCCL: the fit gives the "
                        "profile a CPU's bandwidths and latencies, and predicts that machine")  # fmt: skip


def warn_other_node_shape(base, logs) -> None:
    """A log whose ranks per node are not the profile's GPUs per node: fitted as the profile's nodes, its rows
    would move the wrong levels (a 2-node log whose '# Rank' lines name no hosts reads as 16 ranks on one node,
    and its network's rows then fit an NVLink node). Said per log, with what to check."""
    for log in logs:
        per_node = log.ranks / log.nodes
        if per_node == base.gpus_per_node:
            continue
        hint = ("if it ran on several nodes, its '# Rank' lines must name their hosts" if per_node > base.gpus_per_node
                else "a profile of nodes that size (its gpus_per_node) fits it as measured")  # fmt: skip
        console.warning(f"nccl-tests log {log.path}: {log.ranks} ranks on {counted(log.nodes, 'node')}, "
                        f"{per_node:g} a node, where {base.name} has {base.gpus_per_node} GPUs a node; it is fitted "
                        f"as {base.name}'s nodes: {hint}")  # fmt: skip


FAR_MOVED = 3.0
"""A fitted bandwidth this many times off the profile's own value is more than a cluster's spread."""


def warn_far_moved(base, fitted: dict[str, float]) -> None:
    """A bandwidth level the fit moved FAR_MOVED times or more from the profile's value: a ring inside a DGX H100
    fitted to 24-56 GB/s (370 built in) came from a single 64 KiB row, and the page then printed it as the
    cluster's. Said per level: what few rows asked for, or logs of another cluster than the profile's."""
    from harness.perfmodel.clusters.nccltests_fit import FIT_BOUNDS, FIT_MIN_BYTES

    for field, value in fitted.items():
        own = getattr(base, field)
        # at an edge of the search: no row pinned it (a latency at the lower one is none, as NCCL's IB plugin has it)
        low = value <= FIT_BOUNDS[0] * 1.01 and not field.endswith("latency_us")
        if low or value >= FIT_BOUNDS[1] / 1.01:
            console.warning(f"the fit pushed {field} to {value:.4g}, the edge of its search: the rows of "
                            f"{FIT_MIN_BYTES // 1024} KiB and more do not pin it, so it measures nothing, nor do the "
                            f"small messages{' across nodes' * field.startswith('inter')} predicted with it; set "
                            "it in a profile of yours (--cluster FILE.toml) from your hardware's figures")  # fmt: skip
        elif field.endswith("_gbps") and own > 0 and not 1 / FAR_MOVED < value / own < FAR_MOVED:
            console.warning(f"the fit moved {field} from {own:g} to {value:.4g} ({value / own:.2g}×): a level moved "
                            "this far rests on the few rows it limits, or the logs are of another cluster than "
                            f"{base.name}; check those rows before planning by it")  # fmt: skip


def warn_if_other_gpu(base, logs) -> None:
    """Logs of one GPU fitted to another's profile: the bandwidths move, NCCL's per-generation latencies and the
    profile's algorithms (NVLS, say) stay the profile's. Said, not refused: a user's cluster may have none closer."""
    from harness.perfmodel.clusters import cluster, nccltests

    gpu = next((log.gpu for log in logs if log.gpu), "")
    own = nccltests.profile_for_gpu(gpu) if gpu else None
    if own is None or own == base.name:
        return
    theirs = cluster.load(own)
    if theirs.generation != base.generation:
        console.warning(f"the nccl-tests logs are of {gpu!r} ({theirs.generation}; ddpbench's profile {own}) and "
                        f"are fitted to {base.name}, a {base.generation} profile: the fit moves its bandwidths, not "
                        f"NCCL's {base.generation} latencies or its algorithms; --cluster {own} starts from the "
                        "logs' own GPU")  # fmt: skip
    else:
        console.say(f"ddpbench predict: the nccl-tests logs are of {gpu!r}: fitting {base.name} (as --cluster "
                    f"asks), not the built-in {own}")  # fmt: skip


def refuse_mixed_gpus(logs) -> None:
    """One profile describes one kind of GPU: logs of two are two clusters, each fitted on its own."""
    named = {}
    for log in logs:
        if log.gpu:
            named.setdefault(log.gpu, log.path)
    if len(named) > 1:
        (first, one), (second, other) = list(named.items())[:2]
        raise ConfigError(f"--nccl-tests: the logs are of different GPUs ({first!r} in {one}, {second!r} in {other}); "
                          "one profile describes one cluster: fit each cluster's logs on their own")  # fmt: skip


def refuse_repeated(paths) -> None:
    """A log given twice (`--nccl-tests A A B`, or one file by two paths) counts its rows twice in the fit."""
    seen: dict[Path, str] = {}
    for path in map(str, paths):
        if (key := Path(path).resolve()) in seen:
            raise ConfigError(f"--nccl-tests {path!r} is given twice (as {seen[key]!r} too): its rows would "
                              "weigh twice in the fit; give each log once")  # fmt: skip
        seen[key] = path


def warn_same_case(logs) -> None:
    """Two logs of one collective and node count: each row counts, so that case weighs as many times in the fit."""
    cases: dict[tuple[str, int], list[str]] = {}
    for log in logs:
        cases.setdefault((log.collective, log.nodes), []).append(str(log.path))
    for (collective, nodes), paths in cases.items():
        if len(paths) > 1:
            console.warning(f"nccl-tests logs {', '.join(paths)} are each {collective} on {counted(nodes, 'node')}: "
                            f"the fit weighs that case {len(paths)}× against the others; give one log a case unless "
                            "that is meant")  # fmt: skip

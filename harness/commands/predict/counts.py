"""The GPU and node counts a prediction prices: on a cluster `predict --nodes` (whole nodes), `--gpus` (within one
node, or whole nodes), their defaults, and the refusal of counts that fit no node or cross a network the profile
lacks; on the run's own network, what is said where a world size or a bucket lies beyond what it measured."""

from __future__ import annotations

import argparse

from harness.commands import console
from harness.commands.console import invoked
from harness.commands.predict import DEFAULT_COLLECTIVE_NODES, DEFAULT_NODES


def is_collective_table(args: argparse.Namespace) -> bool:
    """Collectives alone, unless a run or a workload asks for step times."""
    return not (args.run or args.workload)


def node_counts(args: argparse.Namespace) -> list[int]:
    """--nodes, or the default of the kind of prediction asked for."""
    from harness.config.units import MAX_PREDICTED_GPUS, parse_counts

    default = DEFAULT_COLLECTIVE_NODES if is_collective_table(args) else DEFAULT_NODES
    return parse_counts(args.nodes or default, flag="--nodes", at_most=MAX_PREDICTED_GPUS // 8)  # 8-GPU nodes


def gpu_counts(args: argparse.Namespace, chosen) -> list[int]:
    """A step's GPU counts on `chosen`: --gpus' (in one node, or whole nodes) beside --nodes' (the default's alone)."""
    from harness.config.units import gpu_counts_on_nodes

    nodes = node_counts(args) if args.nodes or not args.gpus else []
    return gpu_counts_on_nodes(args.gpus or [], nodes, per_node=chosen.gpus_per_node, cluster=chosen.name)


def nodes_asked(args: argparse.Namespace, chosen) -> list[int]:
    """A table's --nodes, or the nodes a step's GPU counts take (4 GPUs of 8-GPU nodes: 1), as the published check."""
    if is_collective_table(args):
        return node_counts(args)
    return sorted({-(-world // chosen.gpus_per_node) for world in gpu_counts(args, chosen)})


def refuse_nodes_without_network(base, args: argparse.Namespace) -> None:
    from harness.perfmodel.clusters import cluster

    nodes = nodes_asked(args, base)  # a --gpus that fits no node refused here, before any word about the profile
    asked = " ".join(f"{flag} {text}" for flag, text in (("--gpus", args.gpus and ",".join(map(str, args.gpus))),
                                                         ("--nodes", args.nodes)) if text)  # fmt: skip
    cluster.refuse_without_network(
        base, nodes, asked=asked or f"the default node counts ({', '.join(map(str, nodes))})"
    )


EXTRAPOLATION_FACTOR = 2
"""Buckets this many times the largest message a network was fitted on are beyond what it measured."""


def warn_if_extrapolated(link, bucket_bytes: int, *, world: int) -> None:
    """Say so when the buckets reach well past the sizes the network's bandwidth was fitted on: α–β fitted on
    small messages is mostly latency, and its bandwidth for megabytes is a guess."""
    if link.largest_bytes and bucket_bytes > EXTRAPOLATION_FACTOR * link.largest_bytes:
        largest, buckets = console.bytes_text(link.largest_bytes), console.bytes_text(bucket_bytes)
        enough = console.bytes_text(1 << (int(bucket_bytes) - 1).bit_length()).replace(" ", "")  # a power of two
        measure = f"{invoked.ddpbench_command()} collectives --sizes 1KiB:{enough}"  # as typed: pasted here
        console.warning(f"w{world}: the network was measured up to {largest} and these buckets reach {buckets}: "
                        f"its bandwidth there is extrapolated (`{measure}` measures it)")  # fmt: skip


def warn_unmeasured_world(network, world: int) -> None:
    """A world size the fitted network was not measured at: its link is the nearest size's (network.link_for),
    and without contention measured there the step is predicted with none: what its all-reduces and its compute
    cost each other while they overlap is left out (the cores its ranks share are priced apart: core_share, said
    under the table), so the step is optimistic by that. Each said as it is, with what it makes of the best cap."""
    said = []
    if world not in network.links:
        failed = "".join(f" ({network.source}'s launch at {n} ranks {_unfinished_words(network, n)}: log {log})"
                         for n, log in network.unfinished.items())  # fmt: skip
        said.append(f"its all-reduce cost is the one measured at {_sizes(network.links)} ranks, carried over{failed}")
    if world not in network.contention:
        measured = f" (measured at {_sizes(network.contention)} only)" if network.contention else ""
        said.append(f"it is predicted without contention{measured}: what its all-reduces and its compute cost "
                    "each other while they overlap is left out, so the step is optimistic by that much")  # fmt: skip
    if said:
        console.warning(f"w{world}: {'; '.join(said)}: its best cap is no measurement")


def _unfinished_words(network, world: int) -> str:
    """A launch that kept nothing: still running (its run's session holds the lock; only the last launched one can
    be), else failed."""
    if network.in_progress and world == max(network.unfinished):
        return "is still running, nothing kept yet"
    return "failed, nothing kept"


def _sizes(measured) -> str:
    return ", ".join(str(n) for n in sorted(measured))

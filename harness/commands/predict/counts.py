"""The GPU and node counts a cluster prediction prices: `predict --nodes` (whole nodes), `--gpus` (within one node,
or whole nodes), their defaults, and the refusal of counts that fit no node or cross a network the profile lacks."""

from __future__ import annotations

import argparse

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

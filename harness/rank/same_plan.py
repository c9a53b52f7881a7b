"""Several nodes, one plan: each node's launcher plans the launch from its own command line, so two nodes started
with different flags (another cap, another workload) would measure unlike configurations in lockstep under node 0's
labels. Before the first step every rank's plan is compared, and a launch whose nodes disagree stops, naming them."""

from __future__ import annotations

import hashlib
import json
import socket
from typing import Any

import torch.distributed as dist

from harness.results.invocation import on_every_node


class PlanMismatchError(RuntimeError):
    """The nodes of a launch planned different configurations."""


def plan_digest(configurations: list[dict[str, Any]]) -> str:
    """The configurations, every field of each, as one short hash: equal only where the plans are."""
    return hashlib.sha256(json.dumps(configurations, sort_keys=True).encode()).hexdigest()[:16]


def node_plan(plan: dict[str, Any]) -> dict[str, Any]:
    """What this rank tells the others of its plan: its node, host, digest and configuration ids."""
    configurations = plan["configurations"]
    return {
        "node": plan.get("node_rank"),
        "host": socket.gethostname(),
        "digest": plan_digest(configurations),
        "ids": [c["config_id"] for c in configurations],
    }


def mismatch_words(plans: list[dict[str, Any]]) -> str | None:
    """None where every rank's plan is node 0's (rank 0's); else one sentence naming each node that planned another,
    what it has that rank 0's plan has not and the other way round, and what to do."""
    reference = plans[0]
    others: dict[Any, dict[str, Any]] = {}
    for plan in plans[1:]:
        if plan["digest"] != reference["digest"]:
            others.setdefault((plan["node"], plan["host"]), plan)
    if not others:
        return None
    said = []
    for (node, host), plan in others.items():
        only_there = [i for i in plan["ids"] if i not in reference["ids"]]
        only_here = [i for i in reference["ids"] if i not in plan["ids"]]
        parts = [f"only it: {_few(only_there)}" if only_there else "",
                 f"only node {reference['node']}: {_few(only_here)}" if only_here else ""]  # fmt: skip
        differs = "; ".join(p for p in parts if p) or "the same ids, other settings (steps, batch, seed, …)"
        said.append(f"node {node} (host {host}) planned other configurations than node {reference['node']} "
                    f"(host {reference['host']}): {differs}")  # fmt: skip
    advice = ("nothing of this launch was measured; every node must run the same bench command (only --node-rank "
              f"differs): `bench --resume RUN_ID --retry-failed` runs node 0's plan{on_every_node(2)}")  # fmt: skip
    return "; ".join(said) + ": " + advice


def _few(ids: list[str], shown: int = 2) -> str:
    """'a, b and 3 more': the launcher keeps a failure's first 500 characters."""
    more = f" and {len(ids) - shown} more" if len(ids) > shown else ""
    return ", ".join(ids[:shown]) + more


def check_same_plan(plan: dict[str, Any], *, world_size: int, group: Any = None) -> None:
    """Raise PlanMismatchError where a rank on another node planned other configurations; on one node every rank
    reads the same plan file, and nothing is exchanged."""
    if all(c.get("nnodes", 1) <= 1 for c in plan["configurations"]):
        return
    plans: list[Any] = [None] * world_size
    dist.all_gather_object(plans, node_plan(plan), group=group)
    if words := mismatch_words(plans):
        raise PlanMismatchError(words)

"""Each built-in cluster profile's error against published nccl-tests tables (`published_checks.json` beside the
profiles): the checks by node count, in a phrase each, and where a cap chosen on a profile rests on sizes it misses."""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING

from harness.perfmodel.clusters.cluster import BUILTIN_FOLDER, Cluster, is_builtin

if TYPE_CHECKING:
    from collections.abc import Collection

# Each built-in profile's bus-bandwidth error against published nccl-tests tables (none fitted to),
# written by benchmarks/cluster_model.py --write; a test keeps it equal to that script's output.
PUBLISHED_CHECKS = BUILTIN_FOLDER / "published_checks.json"


def published_checks(cluster: Cluster) -> list[dict]:
    """The profile's error against each published nccl-tests table of its GPU, by node count (keys as
    benchmarks/cluster_model.py writes them); [] for a profile of the user's own or one fitted to logs."""
    if not is_builtin(cluster):
        return []
    record = _published_record()
    return record.get(cluster.name) or record.get(_same_network(cluster), [])


def _same_network(cluster: Cluster) -> str:
    """The built-in profile checked against published tables whose network is `cluster`'s, number for number (a
    built-in for another GPU memory: dgx-a100-40gb's is dgx-a100's); '' where none is."""
    from harness.perfmodel.clusters.cluster import FIELDS, NUMBERS, builtin_names, load

    def network(profile: Cluster) -> tuple:
        fields = [getattr(profile, f) for f in ("generation", "cpu", "algorithms", "fabric", "latency_scale")]
        return (*fields, *(getattr(profile, FIELDS[key]) for key in NUMBERS))

    return next((name for name in builtin_names() if name in _published_record() and name != cluster.name
                 and network(load(name)) == network(cluster)), "")  # fmt: skip


@functools.cache
def _published_record() -> dict[str, list[dict]]:
    """The file once per process: a report asks for it once per run's what-if page."""
    return json.loads(PUBLISHED_CHECKS.read_text())


CAP_CAVEAT_TAIL = (
    "buckets of those sizes may cost otherwise; fit your cluster's nccl-tests log (--nccl-tests) before "
    "choosing by this margin"
)


def cap_caveat(cluster: Cluster, nodes: int) -> str:
    """Where a built-in profile's check against published tables at `nodes` nodes (or the most checked below)
    found sizes off by more than 25 %, the words that say a cap chosen there rests on them: the buckets'
    all-reduces are those sizes. '' where every size checked was within 25 %, or nothing was checked."""
    return cap_caveats(cluster, [nodes])


def cap_caveats(cluster: Cluster, node_counts: list[int], *, above: Collection[int] = ()) -> str:
    """`cap_caveat` over several node counts (an answer that spans them), each checked table's misses once (node
    counts beyond the most checked share its words) and the advice once. `above`: node counts whose misses were said
    already (the console's published lines, published_check_summary's `networks`): named, not said again."""
    checked = {n: table for n in node_counts if (table := checked_table(cluster, n)) is not None}
    heads, referred = [], []
    for nodes in dict.fromkeys(checked.values()):
        beyond = [n for n, c in checked.items() if c == nodes and n > nodes]
        if not (head := _off_at(cluster, nodes, beyond)):
            continue
        if nodes in above:
            referred.append(nodes)
        else:
            heads.append(head)
    if referred:
        counts = ", ".join(map(str, referred))
        heads.insert(0, f"the sizes off by more than 25 % at {counts} node{'s' * (referred != [1])} (above)")
    return f"{'; '.join(heads)}: {CAP_CAVEAT_TAIL}" if heads else ""


def checked_table(cluster: Cluster, nodes: int) -> int | None:
    """The node count of the published tables whose check speaks for `nodes` nodes: the most checked at or below
    it (beyond it no table reaches); None where none is."""
    return max((c["nodes"] for c in published_checks(cluster) if c["nodes"] <= nodes), default=None)


def _off_at(cluster: Cluster, nodes: int, beyond: list[int]) -> str:
    """The misses of the tables checked at `nodes` nodes, said for it and for the node counts `beyond` it that
    no table reaches."""
    rows = [c for c in published_checks(cluster) if c["nodes"] == nodes]
    off = sum(c["count"] - c["within_25"] for c in rows)
    if not off:
        return ""
    worst = max(rows, key=lambda c: abs(c["worst_error"]))
    counts = (
        ", ".join(map(str, beyond[:-1])) + (" and " if len(beyond) > 1 else "") + (str(beyond[-1]) if beyond else "")
    )
    where = f"{nodes} node{'s' if nodes > 1 else ''}" + (f" (the most checked, for {counts} nodes)" if beyond else "")
    checked = sum(c["count"] for c in rows)
    on = f"; {missed_networks(rows)}" if nodes > 1 else ""  # one node's tables are its NVLink's, whatever the network
    return (f"at {where} this profile is off by more than 25 % on {off} of {checked} published sizes (worst "
            f"{worst['worst_error']:+.0%} at {worst['worst_size']}{on})")  # fmt: skip


def missed_networks(rows: list[dict]) -> str:
    """'9 on TCPXO Ethernet (8 × 200 Gb/s), 6 on InfiniBand (8 × 400 Gb/s)': the sizes off by more than 25 % in
    these tables, by the network they were measured on between nodes (a reader's may be another kind)."""
    missed: dict[str, int] = {}
    for c in rows:
        missed[_network_of(c)] = missed.get(_network_of(c), 0) + c["count"] - c["within_25"]
    return ", ".join(f"{count} on {network}" for network, count in sorted(missed.items(), key=lambda m: -m[1]) if count)


def _network_of(check: dict) -> str:
    """'EFA (4 × 100 Gb/s)' from a table's conditions ('NCCL_ALGO=Ring; EFA, 4 × 100 Gb/s'); 'a network not stated'."""
    kinds = ("EFA", "RoCE", "InfiniBand", "Ethernet", "network")
    part = next((p.strip() for p in check.get("conditions", "").split(";") if any(k in p for k in kinds)), "")
    name, _, rest = part.partition(", ")
    rate = rest.split(", ")[0]  # "8 × 400 Gb/s, bare metal": the rate alone groups like tables
    return (f"{name} ({rate})" if rate else name) or "a network not stated"


def published_check_summary(checks: list[dict], *, networks: bool = False) -> list[str]:
    """One phrase per node count: the tables, the sizes within 25 %, the worst error; with `networks`, the sizes
    off by more than that by the network between nodes they were measured on (missed_networks)."""
    parts = []
    for nodes in sorted({c["nodes"] for c in checks}):
        rows = [c for c in checks if c["nodes"] == nodes]
        worst = max(rows, key=lambda c: abs(c["worst_error"]))
        off = f"; off: {on}" if networks and nodes > 1 and (on := missed_networks(rows)) else ""
        parts.append(f"{nodes} node{'s' if nodes > 1 else ''}: {len(rows)} table{'s' if len(rows) > 1 else ''}, "
                     f"{sum(c['within_25'] for c in rows)} of {sum(c['count'] for c in rows)} sizes within 25 %, "
                     f"worst {worst['worst_error']:+.0%} ({worst['worst_size']}){off}")  # fmt: skip
    return parts

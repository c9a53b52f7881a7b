"""What `predict --cluster` says of how far its cluster profile was checked: against the published nccl-tests tables
of its GPU, per node count asked, and where the node counts asked reach past those tables or past the logs a profile
was fitted to (warned of, not refused)."""

from __future__ import annotations

from harness.commands.console import once, warning
from harness.commands.console import say as _say


def warn_beyond_published(chosen, nodes: list[int]) -> None:
    """Node counts past the largest published table the built-in profile was checked against."""
    from harness.perfmodel.clusters import published

    checked = max((c["nodes"] for c in published.published_checks(chosen)), default=None)
    if checked is not None and (beyond := [n for n in nodes if n > checked]):
        warning(f"{chosen.name}'s largest published table is of {checked} node{'s' if checked > 1 else ''}: "
                f"its predictions on {_counts_text(beyond)} nodes are unchecked")  # fmt: skip


def warn_beyond_logs(profile: str, measured: int, nodes: list[int]) -> None:
    """Node counts past the `measured` nodes of the logs a profile was fitted to: with one-node logs only, the
    network between nodes is the profile's own (nothing fitted it); with multi-node logs, the fitted network is
    carried to more nodes than measured."""
    beyond = [n for n in nodes if n > measured]
    if not beyond:
        return
    if measured == 1:
        warning(f"the logs are of one node: on {_counts_text(beyond)} nodes the network between nodes is "
                f"{profile}'s own values, not fitted (a log of 2 or more nodes fits it)")  # fmt: skip
    else:
        warning(f"the logs reach {measured} nodes: on {_counts_text(beyond)} nodes the fitted network is "
                "carried past what was measured")  # fmt: skip


def _counts_text(counts: list[int]) -> str:
    """[4, 8, 64] → '4, 8 and 64'."""
    names = [str(n) for n in counts]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def say_published_check(chosen, collective: str, *, nodes: list[int] | None, table: bool = False) -> None:
    """How far a built-in profile was from the published tables of its GPU, per node count of `nodes` (None: all).
    `table`: above a collectives table, each line behind '#' as the table's own, so that the output read back by
    `--nccl-tests` is the table alone."""
    from harness.perfmodel.clusters import cluster, published

    def say(line: str) -> None:
        _say(f"# {line}" if table else line)

    if checks := published.published_checks(chosen):  # a line each node count asked, then the others named
        asked = [c for c in checks if nodes is None or c["nodes"] in nodes]
        phrases = published.published_check_summary(asked, networks=True) or ["none at the node counts asked"]
        if others := sorted({c["nodes"] for c in checks} - {c["nodes"] for c in asked}):  # said, not listed
            phrases.append(f"tables of {', '.join(map(str, others))} nodes too: without --nodes")
        legend = once(" (+: predicted faster; docs/measured/cluster-model.md)")  # several clusters: the first's
        say(f"ddpbench predict: {chosen.name}'s all-reduce busbw against published nccl-tests, none fitted to{legend}:")
        for phrase in phrases:
            say(f"  {phrase}")
        if collective != "all_reduce":
            say(f"ddpbench predict: no published {collective} table was found: its predictions below "
                "are unchecked, beyond sharing the all-reduce's bandwidths")  # fmt: skip
    elif cluster.is_builtin(chosen):
        say(f"ddpbench predict: {chosen.name}: no published nccl-tests table found to check it against")
    elif chosen.fitted_to:  # a fit saved before: what it rests on is said next (cluster_from_args)
        return
    else:
        say(f"ddpbench predict: {chosen.path}: a profile of your own, not checked against published "
            "tables; --nccl-tests fits it to your logs and says the fit's error")  # fmt: skip

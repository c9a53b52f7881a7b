"""Nodes started with other flags: their plans are compared before the first step, and the launch stops, naming
the node and what differs (harness.rank.same_plan), instead of measuring unlike configurations under one label."""

from __future__ import annotations

import pytest

from harness.rank import same_plan


def cfg(config_id: str, *, nnodes: int = 2, steps: int = 5) -> dict:
    return {"config_id": config_id, "nnodes": nnodes, "steps": steps}


def plan(*configurations: dict, node: int = 0) -> dict:
    return {"node_rank": node, "configurations": list(configurations)}


def told(p: dict, host: str = "n0") -> dict:
    return {**same_plan.node_plan(p), "host": host}


def test_alike_plans_on_every_node_say_nothing():
    ranks = [told(plan(cfg("a"), cfg("b"), node=n)) for n in (0, 0, 1, 1)]
    assert same_plan.mismatch_words(ranks) is None


def test_a_node_with_another_cap_is_named_with_what_only_each_side_planned():
    node0 = told(plan(cfg("0000-local"), cfg("0001-cap1"), cfg("0002-cap25")), host="n0")
    node1 = told(plan(cfg("0000-local"), cfg("0001-cap5"), node=1), host="n1")
    words = same_plan.mismatch_words([node0, node0, node1, node1])
    assert words.startswith(
        "node 1 (host n1) planned other configurations than node 0 (host n0): only it: "
        "0001-cap5; only node 0: 0001-cap1, 0002-cap25: nothing of this launch was measured"
    )
    assert words.count("node 1 (host") == 1  # one sentence a node, not one a rank
    assert words.endswith(
        "`bench --resume RUN_ID --retry-failed` runs node 0's plan on every node, with its own --node-rank"
    )  # the retry across nodes in the one wording every line gives it


def test_the_same_ids_with_other_settings_still_differ():
    node1 = told(plan(cfg("a", steps=50), node=1))
    assert "the same ids, other settings" in same_plan.mismatch_words([told(plan(cfg("a"))), node1])


def test_a_long_list_is_cut_so_the_failure_keeps_its_advice():
    node1 = told(plan(*[cfg(f"id{i}") for i in range(9)], node=1))
    words = same_plan.mismatch_words([told(plan(cfg("x"))), node1])
    assert "only it: id0, id1 and 7 more" in words


def test_ranks_compare_their_plans_only_across_nodes(monkeypatch):
    exchanged = []

    def gather(out, mine, group=None):
        exchanged.append(mine)
        out[:] = [mine, {**mine, "node": 1, "digest": "other", "ids": ["z"]}]

    monkeypatch.setattr(same_plan.dist, "all_gather_object", gather)
    same_plan.check_same_plan(plan(cfg("a", nnodes=1)), world_size=2)  # one node: one plan file, nothing sent
    assert exchanged == []
    with pytest.raises(same_plan.PlanMismatchError, match=r"node 1 .* only it: z; only node 0: a"):
        same_plan.check_same_plan(plan(cfg("a")), world_size=2)

"""harness.rank.dist: the session's groups, and where records are gathered."""

from __future__ import annotations

import torch
import torch.distributed as dist

from harness.rank.dist import Session, distributed_session
from harness.rank.worker import _leaves_ranks_idle


def test_on_gloo_records_are_gathered_over_the_default_group(single_rank):
    assert single_rank.backend == "gloo" and single_rank.records_group is None
    assert single_rank.gather_to_main({"rank": 0}) == [{"rank": 0}]


def test_beside_nccl_records_are_gathered_over_the_gloo_group_so_waiting_ranks_wait_on_the_cpu(
    single_rank, monkeypatch
):
    """dataparallel's idle ranks wait in this gather while rank 0 computes on their GPUs: over NCCL
    they would spin a kernel on cuda:k. A gloo group stands in for the one made beside NCCL."""
    gloo = dist.new_group(backend="gloo")
    calls = []
    real_gather = dist.gather_object
    monkeypatch.setattr(dist, "gather_object", lambda *a, **kw: calls.append(kw) or real_gather(*a, **kw))
    session = Session(0, 1, 0, torch.device("cpu"), "nccl", records_group=gloo)
    assert session.gather_to_main("record") == ["record"]
    assert calls == [{"dst": 0, "group": gloo}]


def _sessions_groups(monkeypatch, *, backend, idle_ranks_wait, local_world_size):
    """The gloo groups a session creates, with init and new_group stubbed: no process group is made."""
    created = []
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(local_world_size))
    monkeypatch.setattr(dist, "init_process_group", lambda **kw: None)
    monkeypatch.setattr(dist, "new_group", lambda **kw: created.append(kw["backend"]) or "gloo-group")
    monkeypatch.setattr(dist, "destroy_process_group", lambda: None)
    with distributed_session(device_kind="cpu", timeout_s=5, backend=backend, idle_ranks_wait=idle_ranks_wait) as s:
        group = s.records_group
    return created, group


def test_beside_nccl_a_gloo_group_is_made_only_for_idle_ranks_on_one_node(monkeypatch):
    """Multi-node gloo may not connect (GLOO_SOCKET_IFNAME): NCCL runs that never leave ranks idle,
    or span nodes, must not depend on it."""
    assert _sessions_groups(monkeypatch, backend="nccl", idle_ranks_wait=True, local_world_size=4) == (
        ["gloo"],
        "gloo-group",
    )
    assert _sessions_groups(monkeypatch, backend="nccl", idle_ranks_wait=False, local_world_size=4) == ([], None)
    assert _sessions_groups(monkeypatch, backend="nccl", idle_ranks_wait=True, local_world_size=2) == ([], None)
    assert _sessions_groups(monkeypatch, backend="gloo", idle_ranks_wait=True, local_world_size=4) == ([], None)


def test_a_plan_leaves_ranks_idle_only_with_a_single_process_strategy():
    plan = {"configurations": [{"impl": "stock"}]}
    assert _leaves_ranks_idle(plan) is False
    plan["configurations"].append({"impl": "dataparallel"})
    assert _leaves_ranks_idle(plan) is True

"""harness.rank.dist: the session's groups, and where records are gathered."""

from __future__ import annotations

import re

import pytest
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


def _cuda_session_device(monkeypatch, *, local_rank: int, visible: int) -> list[int]:
    """The GPUs a CUDA session binds to (torch.cuda faked: `visible` GPUs), with init stubbed."""
    bound = []
    for name, value in (("RANK", local_rank), ("WORLD_SIZE", 4), ("LOCAL_RANK", local_rank), ("LOCAL_WORLD_SIZE", 4)):
        monkeypatch.setenv(name, str(value))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: visible)
    monkeypatch.setattr(torch.cuda, "set_device", bound.append)
    monkeypatch.setattr(dist, "init_process_group", lambda **kw: None)
    monkeypatch.setattr(dist, "destroy_process_group", lambda: None)
    with distributed_session(device_kind="cuda", timeout_s=5, backend="gloo") as session:
        assert session.device == torch.device("cuda", bound[0])
    return bound


def test_a_cuda_rank_binds_its_local_ranks_gpu_and_says_so_where_it_sees_none(monkeypatch):
    """LOCAL_RANK picks the GPU among those CUDA_VISIBLE_DEVICES leaves (gloo: more ranks share them round-robin).
    A rank that sees none (its driver or environment unlike the launcher's) says so, not `integer modulo by zero`."""
    assert _cuda_session_device(monkeypatch, local_rank=1, visible=2) == [1]
    assert _cuda_session_device(monkeypatch, local_rank=3, visible=2) == [1]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(RuntimeError, match=re.escape("rank 1 sees no CUDA GPU (CUDA_VISIBLE_DEVICES='')")):
        _cuda_session_device(monkeypatch, local_rank=1, visible=0)

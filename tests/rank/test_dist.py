"""harness.rank.dist: the session's groups, and where records are gathered."""

from __future__ import annotations

import torch
import torch.distributed as dist

from harness.rank.dist import Session


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

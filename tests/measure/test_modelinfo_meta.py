"""FLOPs counted on the meta device are the FLOPs counted on the CPU, and a run counts them once."""

from __future__ import annotations

import pytest
import torch

import workloads
from harness.measure import modelinfo
from harness.measure.training import build_model

CPU = torch.device("cpu")


@pytest.mark.parametrize("name", workloads.names())
def test_meta_count_equals_the_cpu_count_or_the_workload_falls_back(name):
    workload = workloads.create(name, size="tiny")
    if workload.unavailable_reason(device="cpu"):
        pytest.skip(workload.unavailable_reason(device="cpu"))
    on_meta = modelinfo._describe_on_meta(workload)
    model = build_model(workload, seed=0, device=CPU)
    on_cpu = {
        **modelinfo.parameter_sizes(model),
        **modelinfo.shard_units(workload, model),
        "flops_per_sample": modelinfo.flops_per_sample(workload, model, device=CPU),
    }
    if on_meta is None:  # a workload that reads values: describe counts it on the device instead
        assert modelinfo.describe(workload, batch_size=4, device=CPU)["flops_per_sample"] == on_cpu["flops_per_sample"]
        return
    assert on_meta == on_cpu
    assert on_meta["flops_per_sample"] > 0


def test_the_vision_and_mlp_workloads_are_counted_on_meta():
    # The point of counting on meta: a CNN's count costs no compute. If these fell back, it would be slow again.
    for name in ("mlp", "resnet50"):
        assert modelinfo._describe_on_meta(workloads.create(name, size="tiny")) is not None, name


def test_describe_once_reuses_the_count_of_an_earlier_launch_through_the_run_folder(tmp_path, monkeypatch):
    workload = workloads.create("mlp", size="tiny")
    key = ("mlp", "tiny", 4)
    first = modelinfo.describe_once(workload, key=key, batch_size=4, device=CPU, run=tmp_path, cache={})
    assert first["flops_per_sample"] > 0

    def no_counting(*args, **kwargs):
        raise AssertionError("counted again")

    monkeypatch.setattr(modelinfo, "describe", no_counting)
    again = modelinfo.describe_once(workload, key=key, batch_size=4, device=CPU, run=tmp_path, cache={})  # a new launch
    assert again == first


def test_describe_once_returns_none_and_remembers_a_failed_count(tmp_path, monkeypatch):
    calls = []

    def failing(*args, **kwargs):
        calls.append(1)
        raise RuntimeError("no formula")

    monkeypatch.setattr(modelinfo, "describe", failing)
    cache: dict = {}
    workload = workloads.create("mlp", size="tiny")
    for _ in range(2):
        assert modelinfo.describe_once(workload, key=("mlp", "tiny", 4), batch_size=4, device=CPU, run=tmp_path,
                                       cache=cache) is None  # fmt: skip
    assert len(calls) == 1


def test_the_units_fsdp_holds_whole_are_the_root_and_the_workloads_blocks():
    """gpt2's blocks are its transformer layers, all alike; the root holds the rest (the embeddings, tied to the
    head, and the final norm). Frozen parameters are held, not trained."""
    workload = workloads.create("gpt2", size="tiny")
    model = build_model(workload, seed=0, device=CPU)
    one = sum(p.numel() * p.element_size() for p in model.transformer.h[0].parameters())
    units = modelinfo.shard_units(workload, model)
    assert units["largest_block_bytes"] == units["largest_block_grad_bytes"] == one
    assert (
        units["root_param_bytes"] == units["root_grad_bytes"] == units["param_bytes"] - len(model.transformer.h) * one
    )
    assert units["param_bytes"] == sum(p.numel() * p.element_size() for p in model.parameters())
    model.transformer.wpe.requires_grad_(False)
    frozen = modelinfo.shard_units(workload, model)
    wpe = model.transformer.wpe.weight
    assert frozen["root_grad_bytes"] == units["root_grad_bytes"] - wpe.numel() * wpe.element_size()

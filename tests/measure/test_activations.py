"""What a forward keeps for backward (`activation_mb`), against a count by hand."""

from __future__ import annotations

import pytest
import torch

import workloads
from harness.measure import modelinfo

CPU = torch.device("cpu")


@pytest.mark.parametrize("batch", [8, 16])
def test_the_saved_tensors_of_a_small_mlp_are_what_its_operations_keep(batch):
    """mlp/tiny (Linear 32→32, ReLU, Linear 32→32, ReLU, Linear 32→10, cross-entropy), fp32: each Linear keeps
    its input (its weight is a parameter: left out), each ReLU its output, which is the next Linear's input
    (one storage, counted once), log-softmax its output and the loss the labels (int64) and a one-float total
    weight."""
    width, classes, float32, int64 = 32, 10, 4, 8
    by_hand = batch * (3 * width * float32 + classes * float32 + int64) + float32
    counted = modelinfo.activation_bytes(workloads.create("mlp", size="tiny"), batch_size=batch, device=CPU,
                                         dtype="fp32")  # fmt: skip
    assert counted == by_hand


def test_describe_gives_the_activations_of_the_runs_batch_and_dtype():
    workload = workloads.create("mlp", size="small")
    fp32 = modelinfo.describe(workload, batch_size=8, device=CPU)["activation_mb"]
    assert modelinfo.describe(workload, batch_size=16, device=CPU)["activation_mb"] == pytest.approx(2 * fp32, rel=1e-3)
    # Under bf16 autocast each Linear whose input needs a gradient keeps its weight's bf16 copy for backward
    # (7 of mlp/small's 8 hidden 1024×1024 ones: the first one's input is data): memory a bf16 run does hold,
    # and at batch 8 far more than the activations themselves.
    bf16 = modelinfo.describe(workload, batch_size=8, device=CPU, dtype="bf16")["activation_mb"]
    assert 7 * 1024 * 1024 * 2 / 2**20 < bf16 < 7 * 2 + fp32


@pytest.mark.parametrize("name", workloads.names())
def test_counted_on_meta_as_on_the_cpu_attention_as_flash_keeps_it(name):
    """The meta device runs SDPA's math backend alone (the T×T weights kept); counted as the flash kernel
    keeps it, a transformer's count on meta is the CPU's, whose SDPA runs flash (EmbeddingBag's offsets differ
    by a few bytes there)."""
    workload = workloads.create(name, size="tiny")
    if workload.unavailable_reason(device="cpu"):
        pytest.skip(workload.unavailable_reason(device="cpu"))
    figures = {"batch_size": 8, "dtype": "fp32"}
    on_cpu = sum(modelinfo._saved_bytes(workload, device=CPU, **figures).values())
    try:
        on_meta = sum(modelinfo._saved_bytes(workload, device=torch.device("meta"), **figures).values())
    except Exception:  # a value read: activation_bytes counts it on the device
        assert modelinfo.activation_bytes(workload, device=CPU, **figures) == on_cpu
        return
    assert on_meta == pytest.approx(on_cpu, rel=0.02, abs=128)


def test_who_keeps_them_is_the_innermost_module_running_and_the_loss_outside():
    """mlp/tiny's hand count by who keeps each tensor: the first Linear its input (the data), each ReLU its
    output (the next Linear's input, kept once), the loss its log-softmax, labels and total weight."""
    kept = modelinfo.activations_by_module(workloads.create("mlp", size="tiny"), batch_size=8, device=CPU,
                                           dtype="fp32")  # fmt: skip
    assert kept == {"Linear": 8 * 32 * 4, "ReLU": 2 * 8 * 32 * 4, modelinfo.LOSS: 8 * 10 * 4 + 8 * 8 + 4}
    assert modelinfo.largest_keepers(kept) == "ReLU 59%, Linear 30%, the loss 11%"
    assert modelinfo.largest_keepers({"A": 96, "B": 4}) == "A 96%"  # a keeper under 5 % is not named

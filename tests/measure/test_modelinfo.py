"""harness.measure.modelinfo on hand-made models whose counts and FLOPs can be worked out by hand."""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from harness.measure.modelinfo import FLOP_COUNT_SAMPLES, describe, parameter_sizes
from harness.protocols import WorkloadDefaults


@dataclasses.dataclass(kw_only=True)
class LinearWorkload(WorkloadDefaults):
    """y = W x with W of shape (3, 4), no bias; the loss is a sum (no FLOPs of its own)."""

    size: str = "tiny"

    def build_model(self) -> nn.Module:
        return nn.Linear(4, 3, bias=False)

    def make_batch(self, batch_size, *, device, generator):
        return torch.randn(batch_size, 4, device=device, generator=generator)

    def loss(self, model, batch):
        return model(batch).sum()


class TiedEmbeddings(nn.Module):
    """An embedding (5 × 4) whose weight is also the output projection, plus a frozen scale."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(5, 4)
        self.head = nn.Linear(4, 5, bias=False)
        self.head.weight = self.embed.weight
        self.scale = nn.Parameter(torch.ones(4, dtype=torch.float64), requires_grad=False)


def test_linear_layer_flops_are_forward_plus_weight_gradient():
    # Forward: a (2×4)·(4×3) matmul, 2·2·4·3 = 48 FLOPs (a multiply-add is 2).
    # Backward: only the weight gradient, a (3×2)·(2×4) matmul, another 48; the input needs no gradient.
    info = describe(LinearWorkload(), batch_size=16, device="cpu")
    assert FLOP_COUNT_SAMPLES == 2
    assert info["flops_per_sample"] == (48 + 48) / 2


def test_linear_layer_sizes():
    info = describe(LinearWorkload(), batch_size=16, device="cpu")
    assert info["param_count"] == info["trainable_param_count"] == 12
    assert info["grad_bytes"] == 12 * 4
    assert (info["largest_param_name"], info["largest_param_bytes"]) == ("weight", 48)
    assert info["samples_per_batch"] == 16
    assert info["tokens_per_batch"] is None


def test_tied_weight_is_counted_once_and_frozen_parameters_send_no_gradient():
    info = parameter_sizes(TiedEmbeddings())
    assert info["param_count"] == 5 * 4 + 4
    assert info["param_tensors"] == 2
    assert info["trainable_param_count"] == 5 * 4
    assert info["grad_bytes"] == 5 * 4 * 4  # the float64 frozen scale sends nothing
    assert (info["largest_param_name"], info["largest_param_bytes"]) == ("embed.weight", 80)


def test_language_models_report_tokens_per_batch():
    @dataclasses.dataclass(kw_only=True)
    class Tokens(LinearWorkload):
        def tokens_per_sample(self) -> int:
            return 7

    assert describe(Tokens(), batch_size=3, device="cpu")["tokens_per_batch"] == 21


def test_describe_leaves_the_callers_random_state_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    describe(LinearWorkload(), batch_size=2, device="cpu")
    assert torch.equal(torch.rand(3), expected)


def test_attention_flops_are_counted_on_the_cpu():
    """FlopCounterMode has no formula for the fused CPU attention kernel; describe must still count it."""

    @dataclasses.dataclass(kw_only=True)
    class Attention(LinearWorkload):
        def build_model(self) -> nn.Module:
            return nn.Linear(8, 8, bias=False)

        def make_batch(self, batch_size, *, device, generator):
            return torch.randn(batch_size, 1, 16, 8, device=device, generator=generator)

        def loss(self, model, batch):
            q = model(batch)
            return nn.functional.scaled_dot_product_attention(q, q, q).sum()

    # Per sample: the projection's forward matmul, then the same again for its weight gradient.
    projection = 2 * 16 * 8 * 8
    # q·kᵀ and p·v forward; backward is four such matmuls (dq, dk, dv and the scores' gradient).
    scores_and_mix = 2 * (2 * 16 * 16 * 8)
    flops = describe(Attention(), batch_size=2, device="cpu")["flops_per_sample"]
    assert flops == 2 * projection + 3 * scores_and_mix  # counting only the projection would give 4096


@dataclasses.dataclass(kw_only=True)
class ConvWorkload(WorkloadDefaults):
    """Two 3×3 convolutions over 6 channels of 5×5 (padding 1: 5×5 out), `groups` of them; the loss is a sum."""

    groups: int = 1
    size: str = "tiny"

    def build_model(self) -> nn.Module:
        return nn.Sequential(*(nn.Conv2d(6, 6, 3, padding=1, groups=self.groups, bias=False) for _ in range(2)))

    def make_batch(self, batch_size, *, device, generator):
        return torch.randn(batch_size, 6, 5, 5, device=device, generator=generator)

    def loss(self, model, batch):
        return model(batch).sum()


def test_grouped_convolution_backward_is_counted_once_per_group():
    # A convolution's forward per sample: 2 · 25 output points · 6 output channels · (6 / groups) inputs · 9 taps.
    # The first's backward makes only the weight's gradient (the batch needs none), the second's the input's too:
    # each the forward's multiply-adds again, so (1 + 1) + (1 + 2) forwards. torch's own formula counts the weight's
    # gradient of a depthwise one 6× (its channels): 40,500 here instead of 13,500.
    for groups in (1, 2, 6):
        forward = 2 * 25 * 6 * (6 // groups) * 9
        assert describe(ConvWorkload(groups=groups), batch_size=2, device="cpu")["flops_per_sample"] == 5 * forward

"""The workload contract, generated over every registered workload at size tiny on the CPU.

Each workload must build deterministically, make its batches on the device from the given
generator, give a finite loss that is a mean over samples, and send a gradient to every
trainable parameter; harness.measure.modelinfo must describe it consistently.
"""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys

import pytest
import torch

import workloads
from harness.measure.modelinfo import describe
from harness.protocols import SIZES, Workload
from workloads._text import IGNORE_INDEX, masked_per_sequence

NAMES = workloads.names()
CPU = torch.device("cpu")
LANGUAGE_MODELS = {"gpt2", "bert"}

# Published parameter counts of the real models, which `full` must reproduce exactly.
FULL_PARAM_COUNTS = {
    "resnet18": 11_689_512,  # torchvision ResNet18_Weights meta
    "resnet50": 25_557_032,  # torchvision ResNet50_Weights meta
    "vit": 86_567_656,  # torchvision ViT_B_16_Weights meta
    "gpt2": 124_439_808,  # GPT-2 small, "124M"
    "bert": 109_514_298,  # bert-base-uncased with its masked-LM head (no pooler)
}


def tiny(name: str) -> Workload:
    return workloads.create(name, size="tiny")


def build(workload: Workload, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return workload.build_model()


def batch(workload: Workload, *, seed: int, batch_size: int | None = None):
    generator = torch.Generator(device=CPU)
    generator.manual_seed(seed)
    return workload.make_batch(batch_size or workload.default_batch_size(), device=CPU, generator=generator)


def tensors(batch) -> list[torch.Tensor]:
    return [batch] if isinstance(batch, torch.Tensor) else list(batch)


def batches_equal(a, b) -> bool:
    return all(torch.equal(x, y) for x, y in zip(tensors(a), tensors(b), strict=True))


@pytest.mark.parametrize("name", NAMES)
def test_workload_declares_three_documented_sizes(name):
    size = workloads.entry(name).options()["size"]
    assert size.choices() == SIZES and size.default == "tiny"
    assert all(s in size.doc for s in SIZES), f"the doc of `size` should say what each size is: {size.doc!r}"
    for s in SIZES:
        assert workloads.create(name, size=s).default_batch_size() >= 1


@pytest.mark.parametrize("name", NAMES)
def test_workload_is_available_on_the_cpu_here(name):
    assert tiny(name).unavailable_reason(device="cpu") is None


@pytest.mark.parametrize("name", NAMES)
def test_one_step_gives_a_finite_loss_and_a_gradient_to_every_trainable_parameter(name):
    workload = tiny(name)
    model = build(workload)
    assert model.training, "workloads train: build_model must return the model in train mode"
    loss = workload.loss(model, batch(workload, seed=1))
    assert loss.dim() == 0 and math.isfinite(loss.item())
    loss.backward()
    for param_name, p in model.named_parameters():
        if p.requires_grad:
            assert p.grad is not None, f"{param_name} got no gradient"
            assert torch.isfinite(p.grad).all(), f"{param_name} has a non-finite gradient"


@pytest.mark.parametrize("name", NAMES)
def test_two_builds_under_the_same_seed_are_identical(name):
    first, second = build(tiny(name), seed=3).state_dict(), build(tiny(name), seed=3).state_dict()
    assert first.keys() == second.keys()
    assert all(torch.equal(first[key], second[key]) for key in first)


@pytest.mark.parametrize("name", NAMES)
def test_builds_under_different_seeds_differ(name):
    first, second = build(tiny(name), seed=3).state_dict(), build(tiny(name), seed=4).state_dict()
    assert any(not torch.equal(first[key], second[key]) for key in first)


@pytest.mark.parametrize("name", NAMES)
def test_same_generator_seed_gives_the_same_batch_and_other_ranks_get_other_batches(name):
    workload = tiny(name)
    assert batches_equal(batch(workload, seed=7), batch(workload, seed=7))
    assert not batches_equal(batch(workload, seed=7), batch(workload, seed=8))


@pytest.mark.parametrize("name", NAMES)
def test_make_batch_draws_from_the_generator_not_the_global_rng(name):
    workload = tiny(name)
    torch.manual_seed(0)
    first = batch(workload, seed=7)
    torch.manual_seed(1)
    assert batches_equal(first, batch(workload, seed=7))


@pytest.mark.parametrize("name", NAMES)
def test_batch_has_the_requested_size_on_the_requested_device(name):
    for tensor in tensors(batch(tiny(name), seed=1, batch_size=3)):
        assert tensor.shape[0] == 3 and tensor.device == CPU


@pytest.mark.parametrize("name", NAMES)
def test_a_training_step_is_deterministic(name):
    """Dropout is off: the same model and batch give the same loss twice, in train mode."""
    workload = tiny(name)
    model, data = build(workload), batch(workload, seed=1)
    assert torch.equal(workload.loss(model, data), workload.loss(model, data))


@pytest.mark.parametrize("name", NAMES)
def test_loss_is_a_mean_over_samples(name):
    """What data parallelism relies on: the mean of per-rank losses is the whole-batch loss.

    Eval mode, so that BatchNorm uses running statistics and samples are independent.
    """
    workload = tiny(name)
    model = build(workload).eval()
    data = tensors(batch(workload, seed=1, batch_size=4))
    halves = [tuple(t[:2] for t in data), tuple(t[2:] for t in data)]
    with torch.no_grad():
        whole = workload.loss(model, tuple(data))
        mean_of_halves = sum(workload.loss(model, half) for half in halves) / 2
    torch.testing.assert_close(whole, mean_of_halves)


@pytest.mark.parametrize("name", NAMES)
def test_modelinfo_is_consistent_with_the_model(name):
    workload = tiny(name)
    info = describe(workload, batch_size=4, device=CPU)
    params = dict(build(workload).named_parameters())
    trainable = [p for p in params.values() if p.requires_grad]
    assert info["param_count"] == sum(p.numel() for p in params.values())
    assert info["grad_bytes"] == sum(p.numel() * p.element_size() for p in trainable)
    assert info["largest_param_bytes"] == max(p.numel() * p.element_size() for p in params.values())
    assert info["flops_per_sample"] > 0
    assert info["samples_per_batch"] == 4
    tokens = workload.tokens_per_sample()
    assert info["tokens_per_batch"] == (4 * tokens if tokens else None)


@pytest.mark.parametrize("name", NAMES)
def test_language_models_report_their_sequence_length_and_others_none(name):
    workload = tiny(name)
    if name in LANGUAGE_MODELS:
        inputs = tensors(batch(workload, seed=1))[0]
        assert workload.tokens_per_sample() == inputs.shape[1]
    else:
        assert workload.tokens_per_sample() is None


@pytest.mark.parametrize("name", NAMES)
def test_tiny_is_tiny(name):
    """Tests and CI run every strategy on every workload at tiny: it must stay small."""
    assert sum(p.numel() for p in build(tiny(name)).parameters()) <= 150_000


@pytest.mark.parametrize(("name", "expected"), FULL_PARAM_COUNTS.items())
def test_full_size_is_the_real_model(name, expected):
    with torch.device("meta"):  # no memory, no initialisation cost
        model = workloads.create(name, size="full").build_model()
    assert sum(p.numel() for p in model.parameters()) == expected


def test_full_sizes_use_the_usual_inputs():
    assert workloads.create("gpt2", size="full").tokens_per_sample() == 1024
    assert workloads.create("bert", size="full").tokens_per_sample() == 512
    for name in ("resnet18", "resnet50", "vit"):
        assert workloads.create(name, size="full").shape.image_size == 224


def test_bert_masks_fifteen_percent_of_every_sequence():
    workload = tiny("bert")
    inputs, labels = batch(workload, seed=1, batch_size=6)
    masked = labels != IGNORE_INDEX
    seq = workload.tokens_per_sample()
    assert (masked.sum(dim=1) == masked_per_sequence(seq)).all()
    assert masked_per_sequence(seq) == round(0.15 * seq)
    mask_token = workload.shape.vocab - 1
    assert (inputs[masked] == mask_token).all() and (inputs[~masked] != mask_token).all()
    assert not torch.equal(masked[0], masked[1]), "the masked positions should vary between sequences"


def test_gpt2_targets_are_the_inputs_shifted_by_one():
    inputs, targets = batch(tiny("gpt2"), seed=1)
    assert torch.equal(inputs[:, 1:], targets[:, :-1])


def test_workloads_are_keyword_only_dataclasses():
    for name in NAMES:
        cls = workloads.entry(name).cls
        assert dataclasses.is_dataclass(cls)
        with pytest.raises(TypeError):
            cls("tiny")


def test_importing_the_registry_does_not_import_model_libraries():
    """`ddpbench list` and the planner import every workload: they must stay fast."""
    code = (
        "import sys, workloads; workloads.names(); "
        "heavy = [m for m in ('torchvision', 'transformers') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr

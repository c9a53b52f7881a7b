"""What a forward keeps for backward (`activation_mb`), against a count by hand."""

from __future__ import annotations

import pytest
import torch

import workloads
from harness.measure import activations, modelinfo

CPU = torch.device("cpu")


@pytest.mark.parametrize("batch", [8, 16])
def test_the_saved_tensors_of_a_small_mlp_are_what_its_operations_keep(batch):
    """mlp/tiny (Linear 32→32, ReLU, Linear 32→32, ReLU, Linear 32→10, cross-entropy), fp32: each Linear keeps
    its input (its weight is a parameter: left out), each ReLU its output, which is the next Linear's input
    (one storage, counted once), log-softmax its output and the loss the labels (int64) and a one-float total
    weight."""
    width, classes, float32, int64 = 32, 10, 4, 8
    by_hand = batch * (3 * width * float32 + classes * float32 + int64) + float32
    counted = activations.activation_bytes(workloads.create("mlp", size="tiny"), batch_size=batch, device=CPU,
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
    on_cpu = sum(activations._saved_bytes(workload, device=CPU, **figures).values())
    try:
        on_meta = sum(activations._saved_bytes(workload, device=torch.device("meta"), **figures).values())
    except Exception:  # a value read: activation_bytes counts it on the device
        assert activations.activation_bytes(workload, device=CPU, **figures) == on_cpu
        return
    assert on_meta == pytest.approx(on_cpu, rel=0.02, abs=128)


@pytest.mark.parametrize("spec", ["gpt2", "hf:llama", "torchvision:convnext_tiny"])
def test_a_bf16_run_is_counted_without_memory_under_the_cpus_autocast(spec):
    """Autocast has no meta device: a walkthrough's bf16 run read the fp32 count (8.22 GiB) labelled bf16. Counted
    on a CPU's fake tensors, the count is the real CPU run's under autocast, byte for byte here (bf16 copies of
    the weights kept for backward, matmuls' outputs in bf16, norms in fp32), and not the fp32 one. convnext's
    truncated-normal initialisation reads a value, which fake tensors cannot give: built on meta, then faked (a
    walkthrough's bf16 convnext had no activations, no fit and no answer)."""
    workload = workloads.create(spec, size="tiny")
    figures = {"batch_size": 2, "dtype": "bf16"}
    counted = sum(activations._saved_bytes(workload, device=torch.device("meta"), **figures).values())
    assert counted == pytest.approx(sum(activations._saved_bytes(workload, device=CPU, **figures).values()), rel=0.01)
    assert counted != sum(activations._saved_bytes(workload, device=CPU, batch_size=2, dtype="fp32").values())


def test_who_keeps_them_is_the_innermost_module_running_and_the_loss_outside():
    """mlp/tiny's hand count by who keeps each tensor: the first Linear its input (the data), each ReLU its
    output (the next Linear's input, kept once), the loss its log-softmax, labels and total weight."""
    kept = activations.activations_by_module(workloads.create("mlp", size="tiny"), batch_size=8, device=CPU,
                                           dtype="fp32")  # fmt: skip
    assert kept == {"Linear": 8 * 32 * 4, "ReLU": 2 * 8 * 32 * 4, activations.LOSS: 8 * 10 * 4 + 8 * 8 + 4}
    assert activations.largest_keepers(kept) == "ReLU 59%, Linear 30%, the loss 11%"
    assert activations.largest_keepers({"A": 96, "B": 4}) == "A 96%"  # a keeper under 5 % is not named


def test_attention_with_dropout_or_grouped_heads_is_counted_as_flash_and_torch_is_left_as_it_was():
    """The CPU flash kernel refuses dropout and fewer key heads than query heads: counted with dropout 0 and the
    key and value repeated, not with the math backend's T×T weights; and whatever the forward raises, the swap
    and the module hooks are undone."""
    import torch.nn.functional as F

    query, grouped = torch.randn(2, 8, 64, 16, requires_grad=True), torch.randn(2, 2, 64, 16, requires_grad=True)
    made = F.scaled_dot_product_attention
    with activations._flash_attention_kept():
        assert (
            F.scaled_dot_product_attention(query, query, query, dropout_p=0.1)
            .grad_fn.name()
            .startswith("ScaledDotProductFlashAttentionForCpu")
        )
        assert F.scaled_dot_product_attention(query, grouped, grouped, enable_gqa=True).grad_fn.name().startswith(
            "ScaledDotProductFlashAttentionForCpu")  # fmt: skip
    assert F.scaled_dot_product_attention is made

    class Broken(torch.nn.Module):
        def forward(self, x):
            raise RuntimeError("the forward fails")

    workload = workloads.create("mlp", size="tiny")
    hooks = (
        dict(torch.nn.modules.module._global_forward_pre_hooks),
        dict(torch.nn.modules.module._global_forward_hooks),
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(workload, "loss", lambda model, batch: Broken()(batch[0]))
        with pytest.raises(RuntimeError, match="the forward fails"):
            activations._saved_bytes(workload, batch_size=2, device=CPU, dtype="fp32")

    def out_of_memory(*args, **kwargs):
        raise RuntimeError("out of memory")

    with pytest.MonkeyPatch.context() as patch:  # a count that fails costs only itself, not the FLOPs beside it
        patch.setattr(activations, "activations_by_module", out_of_memory)
        info = modelinfo.describe(workload, batch_size=2, device=CPU)
    assert info["activation_mb"] is None and info["flops_per_sample"] > 0
    assert F.scaled_dot_product_attention is made
    assert (dict(torch.nn.modules.module._global_forward_pre_hooks),
            dict(torch.nn.modules.module._global_forward_hooks)) == hooks  # fmt: skip


@pytest.mark.parametrize(("name", "tolerance"), [("mlp", 0.0), ("gpt2", 0.02), ("resnet18", 0.02)])
def test_a_strategy_computing_in_bf16_keeps_what_fsdp2s_mixed_precision_keeps(single_rank, name, tolerance):
    """FSDP2 with param_dtype=bf16 (as ddpbench's fsdp shards it: BatchNorm in fp32 handing bf16 on, every block,
    the root; resharded after forward so that no gathered parameter is left among the saved tensors), on one CPU
    rank: what it keeps for backward, against the meta device's count of the model computing in bf16. Measured
    here: equal for mlp and llama, within 1.0 % for gpt2, bert, vit and resnet18."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    from harness.blocks import model_blocks
    from harness.measure.training import build_model

    workload = workloads.create(name, size="tiny")
    counted = activations.activations_computing_in(workload, batch_size=2, param_dtype="bf16")["activation_mb"]
    model = build_model(workload, seed=0, device=CPU)
    bf16 = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for norm in norms:
        fully_shard(norm, mp_policy=MixedPrecisionPolicy(param_dtype=torch.float32, output_dtype=torch.bfloat16))
    for block in (b for b in model_blocks(model) if all(b is not n for n in norms)):
        fully_shard(block, mp_policy=bf16)
    fully_shard(model, mp_policy=bf16, reshard_after_forward=True)
    generator = torch.Generator().manual_seed(0)
    batch = workload.make_batch(2, device=CPU, generator=generator)
    kept = {}

    def keep(tensor: torch.Tensor) -> torch.Tensor:  # each storage once, read when forward is done
        kept.setdefault(activations._storage_key(tensor), tensor.untyped_storage())
        return tensor

    with activations._flash_attention_kept(), torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
        workload.loss(model, batch)
    held = sum(storage.nbytes() for storage in kept.values()) / 2**20  # a gathered parameter freed since: 0
    fp32 = activations.activation_bytes(workload, batch_size=2, device=CPU, dtype="fp32") / 2**20
    assert counted == pytest.approx(held, rel=tolerance, abs=1e-9) and held < 0.75 * fp32  # BatchNorm keeps fp32

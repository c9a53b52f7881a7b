"""The conditions a count of what a forward keeps runs under, so that a CPU or the meta device counts what a GPU
run keeps (harness.measure.modelinfo): attention as a GPU's flash kernel keeps it, a CPU's fake tensors where autocast
is needed (it has no meta device), and transformers told our batches hold one sequence a row (the meta device cannot
read a value to find out). Under autocast the rules are the CPU's: a GPU's also runs layer_norm, softmax, log_softmax,
pow and exp in fp32, so it keeps somewhat more there (the loss's log-softmax over a vocabulary most of all); a GPU
run's own rows measure it. And the FLOPs formulas FlopCounterMode is given beside its own (`FLOP_FORMULAS`)."""

from __future__ import annotations

import contextlib
import sys

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import conv_flop_count


@contextlib.contextmanager
def one_sequence_a_row():
    """transformers looks for packed sequences in the position ids with a `.item()`, which the meta device cannot
    give; our batches hold one sequence a row, in which it finds none: it is told so without looking."""
    masking = sys.modules.get("transformers.masking_utils")
    original = getattr(masking, "find_packed_sequence_indices", None)
    if original is not None:
        masking.find_packed_sequence_indices = lambda position_ids: None
    try:
        yield
    finally:
        if original is not None:
            masking.find_packed_sequence_indices = original


def fake_cpu():
    """A mode whose tensors are a CPU's in everything but memory (their sizes and dtypes alone), real inputs taken."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    return FakeTensorMode(allow_non_fake_inputs=True)


@contextlib.contextmanager
def flash_attention_kept():
    """`scaled_dot_product_attention` run as the CPU's flash kernel, which keeps for backward what a GPU's flash
    and memory-efficient kernels keep (query, key, value, output and the log-sum-exp per query): the meta
    device runs only the math backend, which keeps the T×T attention weights (a full GPT-2 sample at 1,024
    tokens then keeps 1.81 GiB, not 1.18: benchmarks/activations.py), and the CPU runs it where flash refuses.
    Swapped in torch.nn.functional for the count, not intercepted as a torch function: nn.MultiheadAttention
    calls it from inside a function that dispatches as one. Dropout is set to 0 for the count: the CPU kernel
    refuses it, and a GPU's keeps only its random state for it. Grouped-query heads are given their key and value
    repeated (the CPU kernel wants as many as the queries): those two a little high. A call the kernel still
    refuses (some masks) runs as made."""
    made = F.scaled_dot_product_attention

    def as_flash(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **rest):
        if rest.get("enable_gqa") and query.shape[-3] != key.shape[-3]:
            group = query.shape[-3] // key.shape[-3]
            key, value = key.repeat_interleave(group, dim=-3), value.repeat_interleave(group, dim=-3)
        with contextlib.suppress(RuntimeError, TypeError, NotImplementedError):
            return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
                query, key, value, 0.0, is_causal, attn_mask=attn_mask, scale=scale
            )[0]
        return made(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale)

    F.scaled_dot_product_attention = as_flash
    try:
        yield
    finally:
        F.scaled_dot_product_attention = made


def _conv_backward_flop(grad_out_shape, x_shape, w_shape, _bias, _stride, _padding, _dilation, transposed,
                        _output_padding, _groups, output_mask, **rest) -> int:  # fmt: skip
    """A convolution's backward: the input's gradient and the weight's each take the forward's multiply-adds.
    torch's own formula counts the weight's gradient as if the convolution had one group, `groups` times too many
    for a grouped one: 64.5× a depthwise 7×7 convolution's whole backward over 128 channels, 3× ConvNeXt-B's
    training step (3.5e13 FLOPs counted at batch 128, 1.2e13 as its 15.4 GMACs a forward make it)."""
    forward = conv_flop_count(x_shape, w_shape, grad_out_shape, transposed)
    return forward * (bool(output_mask[0]) + bool(output_mask[1]))


FLOP_FORMULAS = {torch.ops.aten.convolution_backward: _conv_backward_flop}
"""FlopCounterMode's `custom_mapping`: formulas that replace torch's own where those count wrong."""

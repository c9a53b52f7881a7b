"""Shared pieces of the language-model workloads: shapes, random token batches, the loss.

Private (leading underscore): the registry does not load it as a plug-in. Nothing here
imports transformers; the workloads import it inside `build_model`.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from harness.protocols import WorkloadDefaults, lazy_module

torch = lazy_module("torch")
F = lazy_module("torch.nn.functional")
nn = lazy_module("torch.nn")

IGNORE_INDEX = -100
"""Label of a position that does not count in the loss (PyTorch's and Hugging Face's convention)."""

MASK_FRACTION = 0.15
"""Share of each sequence that BERT's masked-LM objective predicts."""


@dataclasses.dataclass(frozen=True)
class TransformerShape:
    """What one size of a language-model workload looks like."""

    layers: int
    hidden: int
    heads: int
    vocab: int
    seq: int
    batch_size: int


class LanguageModel(WorkloadDefaults):
    """What every language-model workload shares: a shape per size and the token counts.

    A subclass is a registered dataclass with its own `size` field and SHAPES table, and
    builds its model, batches and loss.
    """

    SHAPES: ClassVar[dict[str, TransformerShape]]
    requires = ("transformers",)
    size: str

    @property
    def shape(self) -> TransformerShape:
        return self.SHAPES[self.size]

    def default_batch_size(self) -> int:
        return self.shape.batch_size

    def tokens_per_sample(self) -> int:
        return self.shape.seq

    def loss(self, model: nn.Module, batch) -> torch.Tensor:
        inputs, labels = batch
        return token_loss(model(input_ids=inputs).logits, labels)


def causal_lm_batch(
    batch_size: int, shape: TransformerShape, *, device: torch.device, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, targets): `seq + 1` random tokens per sample, targets shifted by one.

    Shifting here, as nanoGPT's loader does, lets every one of the `seq` positions count in
    the loss without copying the logits to shift them.
    """
    tokens = torch.randint(0, shape.vocab, (batch_size, shape.seq + 1), device=device, generator=generator)
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def masked_lm_batch(
    batch_size: int, shape: TransformerShape, *, device: torch.device, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, labels): random tokens with `masked_per_sequence` positions replaced by the mask token.

    Labels hold the original token at masked positions and IGNORE_INDEX elsewhere. Every
    sequence masks the same number of positions, so the loss (a mean over masked tokens) is
    also a mean over samples, and the mean of per-rank gradients is the whole-batch gradient.
    The last id of the vocabulary is the mask token; ordinary tokens are drawn below it.
    """
    mask_token = shape.vocab - 1
    tokens = torch.randint(0, mask_token, (batch_size, shape.seq), device=device, generator=generator)
    scores = torch.rand(batch_size, shape.seq, device=device, generator=generator)
    positions = scores.argsort(dim=1)[:, : masked_per_sequence(shape.seq)]
    labels = torch.full_like(tokens, IGNORE_INDEX).scatter_(1, positions, tokens.gather(1, positions))
    inputs = tokens.scatter(1, positions, mask_token)
    return inputs, labels


def masked_per_sequence(seq: int) -> int:
    return max(1, round(MASK_FRACTION * seq))  # at least one, so the loss is never 0/0


def token_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy averaged over the tokens that count."""
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX)

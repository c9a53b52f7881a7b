"""`bert`: Hugging Face BERT (`BertForMaskedLM`) trained as a masked LM on random token ids.

Built from a `BertConfig`, never from downloaded weights. full is BERT-base (12 layers,
width 768, vocabulary 30522) at sequence 512. small and tiny shrink depth, width,
vocabulary and sequence (see SHAPES). 15% of the positions of every sequence are replaced
by a mask token and predicted; the rest are labelled -100 and ignored. Dropout is 0 so that
a step is deterministic; the decoder is tied to the word embeddings, as in BERT.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from harness.protocols import lazy_module, option
from workloads import register
from workloads._text import LanguageModel, TransformerShape, masked_lm_batch

torch = lazy_module("torch")
nn = lazy_module("torch.nn")

SHAPES = {
    "tiny": TransformerShape(layers=2, hidden=32, heads=2, vocab=256, seq=16, batch_size=4),
    "small": TransformerShape(layers=4, hidden=256, heads=4, vocab=4096, seq=128, batch_size=2),
    "full": TransformerShape(layers=12, hidden=768, heads=12, vocab=30522, seq=512, batch_size=16),
}


@register("bert", description="Hugging Face BERT masked LM on random tokens (BERT-base at sequence 512 at full)")
@dataclasses.dataclass(kw_only=True)
class BERT(LanguageModel):
    size: Literal["tiny", "small", "full"] = option(
        "tiny",
        "tiny: 2 layers of width 32, vocabulary 256, sequence 16; small: 4 layers of width 256, "
        "vocabulary 4096, sequence 128, batch 2; full: BERT-base at sequence 512, batch 16.",
    )

    SHAPES = SHAPES

    def build_model(self) -> nn.Module:
        from transformers import BertConfig, BertForMaskedLM

        shape = self.shape
        config = BertConfig(
            vocab_size=shape.vocab,
            hidden_size=shape.hidden,
            num_hidden_layers=shape.layers,
            num_attention_heads=shape.heads,
            intermediate_size=4 * shape.hidden,
            max_position_embeddings=shape.seq,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
            attn_implementation="sdpa",
        )
        return BertForMaskedLM(config).train()

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        return list(model.bert.encoder.layer)  # the encoder layers; embeddings (tied to the head) stay at the root

    def make_batch(self, batch_size: int, *, device: torch.device, generator: torch.Generator):
        return masked_lm_batch(batch_size, self.shape, device=device, generator=generator)

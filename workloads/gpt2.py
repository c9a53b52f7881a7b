"""`gpt2`: Hugging Face GPT-2 (`GPT2LMHeadModel`) trained as a causal LM on random token ids.

Built from a `GPT2Config`, never from downloaded weights. full is GPT-2 124M (12 layers,
width 768, vocabulary 50257) at sequence 1024. small and tiny shrink depth, width,
vocabulary and sequence (see SHAPES). Dropout is 0 so that a step is deterministic; the
input and output embeddings are tied, as in GPT-2, which the strategies must handle.
The loss is computed here (not by passing labels) so it is a plain mean over tokens and
transformers prints nothing.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from harness.protocols import lazy_module, option
from workloads import register
from workloads._text import LanguageModel, TransformerShape, causal_lm_batch

torch = lazy_module("torch")
nn = lazy_module("torch.nn")

SHAPES = {
    "tiny": TransformerShape(layers=2, hidden=32, heads=2, vocab=256, seq=16, batch_size=4),
    "small": TransformerShape(layers=4, hidden=256, heads=4, vocab=4096, seq=128, batch_size=2),
    "full": TransformerShape(layers=12, hidden=768, heads=12, vocab=50257, seq=1024, batch_size=8),
}


@register("gpt2", description="Hugging Face GPT-2 causal LM on random tokens (124M at sequence 1024 at full)")
@dataclasses.dataclass(kw_only=True)
class GPT2(LanguageModel):
    size: Literal["tiny", "small", "full"] = option(
        "tiny",
        "tiny: 2 layers of width 32, vocabulary 256, sequence 16; small: 4 layers of width 256, "
        "vocabulary 4096, sequence 128, batch 2; full: GPT-2 124M at sequence 1024, batch 8.",
    )

    SHAPES = SHAPES

    def build_model(self) -> nn.Module:
        from transformers import GPT2Config, GPT2LMHeadModel

        shape = self.shape
        config = GPT2Config(
            vocab_size=shape.vocab,
            n_positions=shape.seq,
            n_embd=shape.hidden,
            n_layer=shape.layers,
            n_head=shape.heads,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            # GPT-2's <|endoftext|> is its last id; pointing past a small vocabulary makes transformers warn.
            bos_token_id=shape.vocab - 1,
            eos_token_id=shape.vocab - 1,
            use_cache=False,  # training: no key/value cache to allocate
            attn_implementation="sdpa",
        )
        return GPT2LMHeadModel(config).train()

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        return list(model.transformer.h)  # the decoder layers; embeddings (tied to the head) stay at the root

    def make_batch(self, batch_size: int, *, device: torch.device, generator: torch.Generator):
        return causal_lm_batch(batch_size, self.shape, device=device, generator=generator)

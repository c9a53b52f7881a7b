"""`vit`: torchvision's Vision Transformer classifying random images into random labels.

full is ViT-B/16 (`torchvision.models.vit_b_16(weights=None)`) at 224×224: 86.6M parameters.
small and tiny are torchvision `VisionTransformer`s with smaller images, patches, depth and
width (see SHAPES). Dropout is 0 at every size (torchvision's default), so a step is
deterministic and the gradient-parity check can be exact.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from harness.protocols import lazy_module, option
from workloads import register
from workloads._vision import ImageClassifier, ImageShape

nn = lazy_module("torch.nn")


@dataclasses.dataclass(frozen=True)
class ViTShape(ImageShape):
    patch_size: int
    layers: int
    heads: int
    hidden: int


SHAPES = {
    "tiny": ViTShape(image_size=32, classes=10, batch_size=8, patch_size=8, layers=2, heads=2, hidden=32),
    "small": ViTShape(image_size=64, classes=100, batch_size=8, patch_size=8, layers=4, heads=4, hidden=256),
    "full": ViTShape(image_size=224, classes=1000, batch_size=32, patch_size=16, layers=12, heads=12, hidden=768),
}


@register("vit", description="torchvision Vision Transformer on random images (ViT-B/16 at 224×224 at full)")
@dataclasses.dataclass(kw_only=True)
class ViT(ImageClassifier):
    size: Literal["tiny", "small", "full"] = option(
        "tiny",
        "tiny: 32×32 images in 8×8 patches, 2 layers of width 32; small: 64×64 in 8×8 patches, 4 layers "
        "of width 256, batch 8; full: ViT-B/16 at 224×224, batch 32.",
    )

    SHAPES = SHAPES

    def build_model(self) -> nn.Module:
        from torchvision.models.vision_transformer import VisionTransformer

        shape = self.shape
        return VisionTransformer(
            image_size=shape.image_size,
            patch_size=shape.patch_size,
            num_layers=shape.layers,
            num_heads=shape.heads,
            hidden_dim=shape.hidden,
            mlp_dim=4 * shape.hidden,
            dropout=0.0,
            attention_dropout=0.0,
            num_classes=shape.classes,
        )

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        return list(model.encoder.layers)  # the encoder blocks; patch embedding, class token and head at the root

"""`resnet18`: torchvision's ResNet-18 classifying random images into random labels.

full is torchvision's `resnet18(weights=None)` at 224×224 (11.7M parameters).
small is the same architecture on 32×32 images with 100 classes (11.2M parameters, 45 MB of
gradients: communication matters) so that a CPU step takes a few hundred milliseconds.
Its last stage then sees a 1×1 map, so BatchNorm needs at least 2 samples per rank.
tiny narrows every stage to (8, 16, 32, 64) channels with one block each, on 64×64 images.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from harness.protocols import lazy_module, option
from workloads import register
from workloads._vision import ImageClassifier, ResNetShape, residual_blocks, resnet

nn = lazy_module("torch.nn")

SHAPES = {
    "tiny": ResNetShape(image_size=64, classes=10, batch_size=8, layers=(1, 1, 1, 1), widths=(8, 16, 32, 64)),
    "small": ResNetShape(image_size=32, classes=100, batch_size=8, layers=(2, 2, 2, 2)),
    "full": ResNetShape(image_size=224, classes=1000, batch_size=64, layers=(2, 2, 2, 2)),
}


@register("resnet18", description="torchvision ResNet-18 on random images (224×224 at full)")
@dataclasses.dataclass(kw_only=True)
class ResNet18(ImageClassifier):
    size: Literal["tiny", "small", "full"] = option(
        "tiny",
        "tiny: narrow (8–64 channels, 1 block per stage) at 64×64, ~80k params; small: ResNet-18 at "
        "32×32, 100 classes, batch 8; full: ResNet-18 at 224×224, 1000 classes, batch 64.",
    )

    SHAPES = SHAPES

    def build_model(self) -> nn.Module:
        return resnet("basic", self.shape)

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        return residual_blocks(model)

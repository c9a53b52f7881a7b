"""`resnet50`: torchvision's ResNet-50 classifying random images into random labels.

full is torchvision's `resnet50(weights=None)` at 224×224 (25.6M parameters).
small is the same architecture on 32×32 images with 100 classes (23.7M parameters, 95 MB of
gradients in 161 tensors, the layout that bucketing sees at full) at batch 4, so that a CPU
step stays within a few hundred milliseconds. Its last stage then sees a 1×1 map, so
BatchNorm needs at least 2 samples per rank.
tiny keeps the bottleneck blocks (1×1, 3×3, 1×1, projection shortcut) but narrows the stages
to (4, 8, 16, 32) planes with one block each, on 64×64 images.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from harness.protocols import lazy_module, option
from workloads import register
from workloads._vision import ImageClassifier, ResNetShape, residual_blocks, resnet

nn = lazy_module("torch.nn")

SHAPES = {
    "tiny": ResNetShape(image_size=64, classes=10, batch_size=8, layers=(1, 1, 1, 1), widths=(4, 8, 16, 32)),
    "small": ResNetShape(image_size=32, classes=100, batch_size=4, layers=(3, 4, 6, 3)),
    "full": ResNetShape(image_size=224, classes=1000, batch_size=64, layers=(3, 4, 6, 3)),
}


@register("resnet50", description="torchvision ResNet-50 on random images (224×224 at full)")
@dataclasses.dataclass(kw_only=True)
class ResNet50(ImageClassifier):
    size: Literal["tiny", "small", "full"] = option(
        "tiny",
        "tiny: narrow bottlenecks (4–32 planes, 1 block per stage) at 64×64; small: ResNet-50 at 32×32, "
        "100 classes, batch 4; full: ResNet-50 at 224×224, 1000 classes, batch 64.",
    )

    SHAPES = SHAPES

    def build_model(self) -> nn.Module:
        return resnet("bottleneck", self.shape)

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        return residual_blocks(model)

"""Shared pieces of the image-classification workloads: random images, the loss, narrow ResNets.

Private (leading underscore): the registry does not load it as a plug-in. torchvision is
imported inside the functions that need it, so that `import workloads` stays fast.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from typing import ClassVar

from harness.protocols import WorkloadDefaults, lazy_module

torch = lazy_module("torch")
F = lazy_module("torch.nn.functional")
nn = lazy_module("torch.nn")

STANDARD_RESNET_WIDTHS = (64, 128, 256, 512)
"""Stage widths of torchvision's ResNets; any other widths build a narrow ResNet."""


@dataclasses.dataclass(frozen=True)
class ImageShape:
    """What one size of an image workload looks like."""

    image_size: int
    classes: int
    batch_size: int


@dataclasses.dataclass(frozen=True)
class ResNetShape(ImageShape):
    layers: tuple[int, int, int, int]
    widths: tuple[int, int, int, int] = STANDARD_RESNET_WIDTHS


class ImageClassifier(WorkloadDefaults):
    """What every image workload shares: a shape per size, random images, cross-entropy.

    A subclass is a registered dataclass with its own `size` field and SHAPES table, and
    builds its model.
    """

    SHAPES: ClassVar[dict[str, ImageShape]]
    requires = ("torchvision",)
    size: str

    @property
    def shape(self) -> ImageShape:
        return self.SHAPES[self.size]

    def default_batch_size(self) -> int:
        return self.shape.batch_size

    def make_batch(self, batch_size: int, *, device: torch.device, generator: torch.Generator):
        return random_images(batch_size, self.shape, device=device, generator=generator)

    def loss(self, model: nn.Module, batch) -> torch.Tensor:
        return classification_loss(model, batch)


def random_images(
    batch_size: int, shape: ImageShape, *, device: torch.device, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Normal-noise images and uniform labels, made on `device` from `generator`."""
    size = shape.image_size
    images = torch.randn(batch_size, 3, size, size, device=device, generator=generator)
    labels = torch.randint(0, shape.classes, (batch_size,), device=device, generator=generator)
    return images, labels


def classification_loss(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    images, labels = batch
    return F.cross_entropy(model(images), labels)  # a mean over samples, as data parallelism assumes


def residual_blocks(model: nn.Module) -> list[nn.Module]:
    """A ResNet's residual blocks, stage by stage (torchvision's and the narrow one's names alike);
    the stem and the head are left to whoever holds the model."""
    return [block for stage in ("layer1", "layer2", "layer3", "layer4") for block in model.get_submodule(stage)]


def resnet(block_kind: str, shape: ResNetShape) -> nn.Module:
    """torchvision's ResNet for the standard widths, else the same architecture narrowed."""
    from torchvision.models.resnet import BasicBlock, Bottleneck, ResNet

    block = {"basic": BasicBlock, "bottleneck": Bottleneck}[block_kind]
    if shape.widths == STANDARD_RESNET_WIDTHS:
        return ResNet(block, list(shape.layers), num_classes=shape.classes)
    return narrow_resnet(block, shape.layers, shape.widths, num_classes=shape.classes)


def narrow_resnet(block: type[nn.Module], layers, widths, *, num_classes: int) -> nn.Module:
    """torchvision's ResNet with other stage widths (its constructor hard-codes 64…512).

    Same stem, torchvision's own residual blocks, same module names (conv1 … layer4, fc) and
    the same initialisation, so a tiny ResNet exercises the strategies like a real one.
    """
    from torchvision.models.resnet import conv1x1

    stem = widths[0]
    modules: OrderedDict[str, nn.Module] = OrderedDict(
        conv1=nn.Conv2d(3, stem, kernel_size=7, stride=2, padding=3, bias=False),
        bn1=nn.BatchNorm2d(stem),
        relu=nn.ReLU(inplace=True),
        maxpool=nn.MaxPool2d(kernel_size=3, stride=2, padding=1),
    )
    inplanes = stem
    for stage, (planes, blocks) in enumerate(zip(widths, layers, strict=True)):
        stride = 1 if stage == 0 else 2
        stage_blocks = []
        for _ in range(blocks):
            outplanes = planes * block.expansion
            downsample = None
            if stride != 1 or inplanes != outplanes:
                downsample = nn.Sequential(conv1x1(inplanes, outplanes, stride), nn.BatchNorm2d(outplanes))
            stage_blocks.append(block(inplanes, planes, stride, downsample))
            inplanes, stride = outplanes, 1
        modules[f"layer{stage + 1}"] = nn.Sequential(*stage_blocks)
    modules.update(avgpool=nn.AdaptiveAvgPool2d(1), flatten=nn.Flatten(), fc=nn.Linear(inplanes, num_classes))
    model = nn.Sequential(modules)
    _initialise_like_torchvision(model)
    return model


def _initialise_like_torchvision(model: nn.Module) -> None:
    for module in model.modules():
        if isinstance(module, nn.Conv2d):
            nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(module, nn.BatchNorm2d):
            nn.init.constant_(module.weight, 1)
            nn.init.constant_(module.bias, 0)

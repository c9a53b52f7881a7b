"""`mlp`: a deep multilayer perceptron on random features, classifying random labels.

Plain torch, so it runs everywhere; width and depth grow with the size, so that the
gradient volume (and so the communication) does too.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from harness.protocols import ConfigError, WorkloadDefaults, lazy_module, option
from workloads import register

torch = lazy_module("torch")
F = lazy_module("torch.nn.functional")
nn = lazy_module("torch.nn")

# size: (width, hidden layers, batch per rank)
SHAPES = {"tiny": (32, 2, 8), "small": (1024, 8, 32), "full": (4096, 16, 64)}


@register("mlp", description="deep MLP on random features (plain torch); width/depth grow with size")
@dataclasses.dataclass(kw_only=True)
class MLP(WorkloadDefaults):
    size: Literal["tiny", "small", "full"] = option(
        "tiny",
        "tiny: width 32 × 2 layers; small: 1024 × 8; full: 4096 × 16.",
    )
    classes: int = option(10, "Number of output classes.", valid="≥ 1")

    def __post_init__(self) -> None:
        if self.classes < 1:
            raise ConfigError(f"option classes={self.classes} is not valid; give a whole number ≥ 1")

    @property
    def width(self) -> int:
        return SHAPES[self.size][0]

    def default_batch_size(self) -> int:
        return SHAPES[self.size][2]

    def build_model(self) -> nn.Module:
        width, depth, _ = SHAPES[self.size]
        layers: list[nn.Module] = []
        for _ in range(depth):
            layers += [nn.Linear(width, width), nn.ReLU()]
        layers.append(nn.Linear(width, self.classes))
        return nn.Sequential(*layers)

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        return [layer for layer in model if isinstance(layer, nn.Linear)]  # every layer with parameters

    def make_batch(self, batch_size: int, *, device: torch.device, generator: torch.Generator):
        features = torch.randn(batch_size, self.width, device=device, generator=generator)
        labels = torch.randint(0, self.classes, (batch_size,), device=device, generator=generator)
        return features, labels

    def loss(self, model: nn.Module, batch) -> torch.Tensor:
        features, labels = batch
        return F.cross_entropy(model(features), labels)

"""A workload of your own for ddpbench: three methods, no import from ddpbench.

ddpbench bench --gpus 2 --workloads examples/my_workload.py:MyModel --wopt width=512
"""

import torch
import torch.nn.functional as F
from torch import nn


class MyModel:
    def __init__(self, width: int = 256, depth: int = 4, classes: int = 10):
        self.width, self.depth, self.classes = width, depth, classes

    def build_model(self) -> nn.Module:  # your model, as you build it for training
        layers = [m for _ in range(self.depth) for m in (nn.Linear(self.width, self.width), nn.ReLU())]
        return nn.Sequential(*layers, nn.Linear(self.width, self.classes))

    def make_batch(self, batch_size: int, *, device: torch.device, generator: torch.Generator):
        features = torch.randn(batch_size, self.width, device=device, generator=generator)
        labels = torch.randint(0, self.classes, (batch_size,), device=device, generator=generator)
        return features, labels  # tensors, a tuple or a dict of them

    def loss(self, model: nn.Module, batch) -> torch.Tensor:
        features, labels = batch
        return F.cross_entropy(model(features), labels)  # a mean over the batch

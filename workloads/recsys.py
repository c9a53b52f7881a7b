"""`recsys`: a recommendation-style model: a large embedding table over sparse ids plus an MLP.

Each sample has a bag of sparse item ids (of random length, padded with id 0, which the
table ignores) and a few dense features; the model sums the bag's embeddings, joins them with
the dense features through an MLP and predicts a click (binary cross-entropy). The table holds
almost all the parameters but each step touches only a few rows: with ordinary data parallelism
every rank keeps the whole table and all-reduces its whole gradient; with `rpc_hybrid` it lives
on a parameter server (`remote_part`), and trainers send only the pooled rows and their gradients.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Literal

from harness.protocols import WorkloadDefaults, lazy_module, option
from workloads import register

torch = lazy_module("torch")
F = lazy_module("torch.nn.functional")
nn = lazy_module("torch.nn")

PADDING_ID = 0
"""The id that fills a bag shorter than the longest; EmbeddingBag(padding_idx=0) leaves it out of the sum."""


@dataclasses.dataclass(frozen=True)
class RecsysShape:
    rows: int
    dim: int
    bag: int
    dense_features: int
    hidden: int
    layers: int
    batch_size: int


SHAPES = {
    "tiny": RecsysShape(rows=1_000, dim=16, bag=4, dense_features=8, hidden=32, layers=2, batch_size=8),
    "small": RecsysShape(rows=100_000, dim=64, bag=16, dense_features=16, hidden=256, layers=3, batch_size=64),
    "full": RecsysShape(rows=2_000_000, dim=128, bag=32, dense_features=64, hidden=1024, layers=4, batch_size=256),
}


@functools.cache
def _recommender_class() -> type:
    """Recommender, made at its first use: a torch module's subclass needs torch imported, and listing the workloads
    imports none (`lazy_module`)."""

    class Recommender(nn.Module):
        """Pooled embedding of the id bag and a projection of the dense features, then an MLP to one logit."""

        def __init__(self, shape: RecsysShape) -> None:
            super().__init__()
            self.embedding = nn.EmbeddingBag(shape.rows, shape.dim, mode="sum", padding_idx=PADDING_ID)
            self.bottom = nn.Sequential(nn.Linear(shape.dense_features, shape.dim), nn.ReLU())
            layers: list[nn.Module] = []
            width = 2 * shape.dim
            for _ in range(shape.layers):
                layers += [nn.Linear(width, shape.hidden), nn.ReLU()]
                width = shape.hidden
            layers.append(nn.Linear(width, 1))
            self.top = nn.Sequential(*layers)

        def forward(self, ids: torch.Tensor, dense: torch.Tensor) -> torch.Tensor:
            pooled = self.embedding(ids)
            return self.top(torch.cat([pooled, self.bottom(dense)], dim=1)).squeeze(1)

    return Recommender


@register("recsys", description="embedding table (EmbeddingBag) + MLP on sparse ids; its table can live remotely")
@dataclasses.dataclass(kw_only=True)
class Recsys(WorkloadDefaults):
    size: Literal["tiny", "small", "full"] = option(
        "tiny",
        "tiny: 1,000 × 16 table, bags of up to 4 ids; small: 100,000 × 64, bags of 16; full: 2,000,000 × "
        "128 (1 GiB in fp32), bags of 32.",
    )

    remote_part = "embedding"  # a class attribute, not an option: rpc_hybrid places this table on its server

    @property
    def shape(self) -> RecsysShape:
        return SHAPES[self.size]

    def default_batch_size(self) -> int:
        return self.shape.batch_size

    def build_model(self) -> nn.Module:
        return _recommender_class()(self.shape)

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        return [model.embedding, model.bottom, model.top]  # the table, the dense projection, the top MLP

    def make_batch(self, batch_size: int, *, device: torch.device, generator: torch.Generator):
        shape = self.shape
        ids = torch.randint(1, shape.rows, (batch_size, shape.bag), device=device, generator=generator)
        lengths = torch.randint(1, shape.bag + 1, (batch_size, 1), device=device, generator=generator)
        positions = torch.arange(shape.bag, device=device).unsqueeze(0)
        ids = ids.masked_fill(positions >= lengths, PADDING_ID)  # bags of 1 … bag ids
        dense = torch.randn(batch_size, shape.dense_features, device=device, generator=generator)
        clicks = torch.randint(0, 2, (batch_size,), device=device, generator=generator).float()
        return ids, dense, clicks

    def loss(self, model: nn.Module, batch) -> torch.Tensor:
        ids, dense, clicks = batch
        return F.binary_cross_entropy_with_logits(model(ids, dense), clicks)

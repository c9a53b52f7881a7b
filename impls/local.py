"""`local`: no communication at all. Every rank trains alone on its own batch.

The compute-only floor: `step_ms(impl) - step_ms(local)` at the same world size is the
communication that an impl did not hide behind backward.
"""

import dataclasses

from harness.protocols import StrategyDefaults
from impls import register


@register("local", description="no communication: every rank trains alone (the compute-only floor)")
@dataclasses.dataclass(kw_only=True)
class Local(StrategyDefaults):
    def wrap(self, model):
        return model

    def sync_gradients(self) -> None:
        pass

    @property
    def parity_exact(self) -> bool:
        return False  # each rank sees only its own batch: expected to differ from the reference

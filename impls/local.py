"""`local`: no communication at all. Every rank trains alone on its own batch.

The compute-only floor: `step_ms(local) / step_ms(impl)` at the same world size is what data
parallelism costs an impl there (`speedup_vs_local`). Its bucket timeline is empty: its
communication is measured, and it is zero.
"""

import dataclasses
from typing import ClassVar

from harness.protocols import StrategyDefaults
from impls import register


@register("local", description="no communication: every rank trains alone (the compute-only floor)")
@dataclasses.dataclass(kw_only=True)
class Local(StrategyDefaults):
    baseline: ClassVar[bool] = True  # the compute-only floor
    gradient_traffic: ClassVar[str] = "none"

    def wrap(self, model):
        return model

    def sync_gradients(self) -> None:
        pass

    def attach_timeline(self, timeline) -> bool:
        return True  # nothing to record: no collective ever runs

    @property
    def parity_exact(self) -> bool:
        return False  # each rank sees only its own batch: expected to differ from the reference

    @property
    def parity_inexact_why(self) -> str:
        return "each rank steps on its own batch, without synchronising (the baseline, by design)"

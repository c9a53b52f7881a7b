"""What a DDPBENCH_FAULT says (docs/faults.md): its kind and the configuration, rank and step it picks, parsed
once (`FaultRule.parse`) for the ranks that inject it (harness.handoff.faults) and for the readers that mark the
rows it held (harness.analysis.verdicts.environment)."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

FAULT_KINDS = ("raise", "oom", "stop", "kill", "exit", "slow")
CONDITIONS = ("impl", "world", "repeat", "cap", "rank", "step", "ms")


@dataclasses.dataclass(frozen=True)
class FaultRule:
    """A fault to inject: DDPBENCH_FAULT="KIND:impl=stock,world=2,rank=1,step=3" (';' between several).

    raise: a RuntimeError; oom: a real allocation far beyond any memory on the rank's device;
    stop: the rank freezes itself (SIGSTOP: a hang as its peers see it); kill: SIGKILL to itself;
    exit: the process ends with code 3, no exception; slow: the rank's backward starts `ms` later in
    every step from `step` on (a straggler, to watch the slowest rank be found: slow:rank=1,ms=20);
    the baseline strategy is never held, since the gap over it is what the straggler costs.
    The conditions (all optional but `ms`, which only slow takes and needs) pick the configuration's
    strategy, world size, repeat and bucket_cap_mb (`cap`, in MiB as --bucket-cap-mb takes it: one
    configuration of a launch that sweeps caps), the rank, and the step (warm-up included).
    On a parameter server's rank, which runs no steps, `step` counts the served module's forward
    calls (from any trainer, the first is 0): the fault fires inside the server's answer.
    """

    kind: str
    impl: str | None = None
    world: int | None = None
    repeat: int | None = None
    cap: float | None = None
    rank: int = 0
    step: int = 0
    ms: int = 0

    @classmethod
    def parse(cls, text: str) -> FaultRule:
        """KIND[:CONDITION=VALUE,…]; ValueError naming the bad part and the valid choices."""
        kind, _, conditions = text.strip().partition(":")
        if kind not in FAULT_KINDS:
            raise ValueError(f"DDPBENCH_FAULT kind {kind!r} is not one of {', '.join(FAULT_KINDS)}")
        fields: dict[str, Any] = {}
        for item in filter(None, (c.strip() for c in conditions.split(","))):
            key, sep, value = (part.strip() for part in item.partition("="))
            if key not in CONDITIONS:
                raise ValueError(f"DDPBENCH_FAULT condition {key!r} is not one of {', '.join(CONDITIONS)}")
            if not sep or not value:
                raise ValueError(f"DDPBENCH_FAULT condition {item!r} has no value; give {key}=VALUE")
            if key in fields:
                raise ValueError(f"DDPBENCH_FAULT condition {key!r} is given twice")
            if key == "cap" and re.fullmatch(r"[0-9]+(\.[0-9]+)?", value):  # MiB, as --bucket-cap-mb takes it
                fields[key] = float(value)
                continue
            if key != "impl" and not (value.isdigit() and value.isascii()):
                what = "a number of MiB ≥ 0, e.g. 25 or 0.5" if key == "cap" else "a whole number ≥ 0"
                raise ValueError(f"DDPBENCH_FAULT {key}={value!r} is not {what}")
            fields[key] = value if key == "impl" else int(value)
        if (kind == "slow") != bool(fields.get("ms")):
            raise ValueError("DDPBENCH_FAULT ms=M (M > 0) goes with slow, and slow needs it: slow:rank=1,ms=20")
        return cls(kind, **fields)

    def applies(
        self, *, impl: str, world: int, rank: int, step: int, repeat: int = 0, cap: float | None = None
    ) -> bool:
        """At this configuration, rank and step: `step` itself, or for `slow` every step from it on."""
        at_step = step >= self.step if self.kind == "slow" else step == self.step
        return (
            (self.impl is None or self.impl == impl)
            and (self.world is None or self.world == world)
            and (self.repeat is None or self.repeat == repeat)
            and (self.cap is None or self.cap == cap)
            and rank == self.rank
            and at_step
        )

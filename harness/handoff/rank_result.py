"""What each rank hands rank 0 for one configuration: a `RankResult`, gathered with `gather_object`.

The launcher makes them too, for the ranks of a configuration whose launch failed (from the failure
records in the run folder), so that a failed row is assembled as a measured one is.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

STATUSES = ("ok", "failed", "skipped", "idle", "stopped")
"""How a configuration went on one rank: idle while rank 0 drove every device (dataparallel); stopped when
its launch was ended because another rank failed."""


@dataclasses.dataclass(frozen=True)
class ParityVerdict:
    """The parity check of one configuration, as rank 0 judged it."""

    max_abs_diff: float | None
    within_tolerance: bool | None  # None: the check itself failed
    note: str
    allowed: float | None = None  # the tolerance at the largest difference's element (reference.compare)


@dataclasses.dataclass
class RankResult:
    """One rank's measurement of one configuration, gathered to rank 0 (pickled by gather_object)."""

    status: str
    error: str | None = None
    steps: list[dict[str, float]] = dataclasses.field(default_factory=list)
    """Per step, warm-up first: `step_ms` and each phase's `<phase>_ms`."""
    window_ms: float | None = None
    """From the first measured step's start to the last one's end."""
    memory: dict[str, Any] = dataclasses.field(default_factory=dict)
    """The memory columns this rank measured (ranks/), and what it held after its last step."""
    layout: dict[str, Any] | None = None
    """The strategy's bucket layout, where it has one (`Strategy.layout`)."""
    comm: list[dict[str, Any]] | None = None
    """The bucket timeline's rows (`CommTimeline.rows`); None where the collectives were not timed."""
    comm_note: str | None = None
    parity: ParityVerdict | None = None
    """Rank 0's verdict; None elsewhere, and where parity was not checked."""
    parity_exact: bool = True
    """Whether the strategy should reproduce the reference exactly (`Strategy.parity_exact`)."""
    parity_inexact_why: str | None = None
    """Where it should not: why, in the strategy's words (`Strategy.parity_inexact_why`), for the parity note."""
    trace_dir: str | None = None
    wall_s: float | None = None
    role: str = "trainer"
    """`trainer`, or `parameter_server` (rpc_hybrid's last rank)."""
    rpc: dict[str, float] | None = None
    """rpc_hybrid's trainers: `round_trips_per_step`, `bytes_per_step`."""
    scaler_skipped: int | None = None
    """fp16: the measured steps the grad scaler skipped (an inf in the gradients); None without a scaler."""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"rank status {self.status!r} is not one of {', '.join(STATUSES)}")


def error_line(exc: BaseException) -> str:
    """The exception's type and the last line of its message that says something (DDP's unused-parameter error: its
    cause): not indented, with a word in it. A message that ends in a module's repr (FSDP's 'does not support
    containers …: ModuleDict(' then the repr's lines and ')') is named by its sentence, not by ')'."""
    if UNUSED_PARAMETERS in str(exc):
        return f"{type(exc).__name__}: {_unused_parameters(str(exc), getattr(exc, '__notes__', []))}"
    lines = [line for line in str(exc).splitlines() if line.strip()]
    saying = [line for line in lines if not line[0].isspace() and re.search(r"[A-Za-z]{3}", line)]
    return f"{type(exc).__name__}: {(saying or lines)[-1].strip()}" if lines else type(exc).__name__


UNUSED_PARAMETERS = "parameters that were not used in producing loss"
"""DDP's error when some parameters got no gradient; its last line only says how to get a longer error."""


UNUSED_NAMED = "the parameters the loss did not use: "
"""The note `name_unused` adds to DDP's error, naming them."""
NAMED_AT_MOST = 4


def name_unused(exc: BaseException, names: list[str]) -> None:
    """DDP's unused-parameter error gives indices into the parameters it trains (`names`: the model's
    named_parameters that require a gradient, in order, as DDP lists them): their names, added as a note that the
    traceback shows and `error_line` says. Nothing where the error is another or gives no index."""
    indices = re.search(r"did not receive grad for rank \d+: ([\d ]+)", str(exc))
    if UNUSED_PARAMETERS not in str(exc) or not indices:
        return
    named = [names[int(i)] for i in indices.group(1).split() if int(i) < len(names)]
    if named:
        exc.add_note(UNUSED_NAMED + ", ".join(named))


def _unused_parameters(text: str, notes: list[str]) -> str:
    named = next((note.removeprefix(UNUSED_NAMED).split(", ") for note in notes if note.startswith(UNUSED_NAMED)), [])
    indices = re.search(r"did not receive grad for rank \d+: ([\d ]+)", text)
    if named:
        shown = named if len(named) <= NAMED_AT_MOST else named[: NAMED_AT_MOST - 1]
        more = f" and {len(named) - len(shown)} more" if len(shown) < len(named) else ""
        which = f" ({', '.join(shown)}{more})"
    else:
        which = f" (indices {indices.group(1).strip()} of model.parameters())" if indices else ""
    return (f"DDP: the loss did not use some of the model's parameters{which}; "
            f"--opt find_unused_parameters=true lets DDP run such a model")  # fmt: skip

"""What `ddpbench collectives` was asked to measure: `CollectivesConfig`, its defaults per
device, and the parsing of its flags (operations, message sizes).

Every check raises `ConfigError` with one line naming the bad value, before anything is written.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from harness.config.bench import BACKENDS, DEVICES, ConfigError, check_nodes, rank_ladder, validate_run_id
from harness.config.units import ELEMENT_BYTES, list_items, size_in_range  # float32 messages

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")
# Defaults per device: the CPU (gloo over loopback, cores shared with the ranks) gets a smaller
# largest message and fewer iterations, so `ddpbench collectives --gpus 2` takes seconds.
# `iters` is per batch (there are BATCHES): the CPU's 4 × 3 is about the 10 it timed before.
DEFAULT_SIZES = {"cpu": "1KB:32MB", "cuda": "1KB:256MB"}
DEFAULT_ITERS = {"cpu": 4, "cuda": 20}
DEFAULT_WARMUP = {"cpu": 2, "cuda": 5}
BATCHES = 3
"""Timed batches per size, each of `iters` iterations back to back (nccl-tests' -N, its -n being
`iters`): the rows' median and percentiles are over batches."""


def parse_size_range(text: str) -> tuple[int, int]:
    low, sep, high = text.partition(":")
    if not sep or ":" in high:
        raise ConfigError(f"--sizes {text!r} is not a range; give MIN:MAX, e.g. 1KB:64MB (collectives doubles "
                          "from MIN to MAX)")  # fmt: skip
    forms = "MIN:MAX, e.g. 1KB:64MB"
    low_bytes, high_bytes = (size_in_range(part, text, forms=forms) for part in (low, high))  # powers of 1024
    if low_bytes < ELEMENT_BYTES or high_bytes < low_bytes or low_bytes % ELEMENT_BYTES:  # doubling keeps MIN's floats
        raise ConfigError(f"--sizes {text!r} is not valid; give {ELEMENT_BYTES} B ≤ MIN ≤ MAX, MIN a multiple of "
                          f"{ELEMENT_BYTES} (whole floats), e.g. 1KB:64MB")  # fmt: skip
    return low_bytes, high_bytes


def message_sizes(low: int, high: int) -> list[int]:
    """Doubling from `low` while ≤ `high` (nccl-tests' -f 2)."""
    sizes = [low]
    while sizes[-1] * 2 <= high:
        sizes.append(sizes[-1] * 2)
    return sizes


def parse_ops(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(list_items(text, flag="--ops")))
    bad = [name for name in names if name not in OPS]
    if bad or not names:
        raise ConfigError(f"--ops {bad[0] if bad else text!r} is not a collective; choose from {', '.join(OPS)}")
    return names


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class CollectivesConfig:
    """Everything `ddpbench collectives` was asked to do."""

    gpus: int
    """Ranks on each node; world sizes run as the ladder 2, 4, … up to it, times `nnodes`."""
    ops: tuple[str, ...] = OPS
    """Collectives to measure."""
    sizes: tuple[int, int]
    """Smallest and largest message in bytes; sizes double in between."""
    iters: int
    """Timed iterations per batch (BATCHES batches per size), queued back to back."""
    warmup: int
    """Untimed iterations before them."""
    device: str
    """cpu or cuda (resolved)."""
    backend: str
    """gloo or nccl (resolved)."""
    results: Path = Path("results")
    run_id: str = ""
    timeout_s: float = 600.0
    """Seconds without progress (no message size finished) before a launch counts as hung."""
    contention: bool = True
    """Also measure how an all-reduce in flight and compute slow each other down."""
    nnodes: int = 1
    """Nodes in the job (as `bench` takes them): above 1 every world size spans them, so the rows measure the
    network between nodes."""
    node_rank: int = 0
    rdzv_endpoint: str | None = None
    command: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_nodes(self.nnodes, self.node_rank, self.rdzv_endpoint, self.run_id)
        if self.gpus * self.nnodes < 2:
            raise ConfigError(f"--gpus {self.gpus} is not valid for collectives; give 2 or more ranks (or, across "
                              "nodes, --nnodes 2 or more)")  # fmt: skip
        if self.iters < 1:
            raise ConfigError(f"--iters {self.iters} is not valid; give a whole number ≥ 1")
        if self.warmup < 0:
            raise ConfigError(f"--warmup {self.warmup} is not valid; give a whole number ≥ 0")
        if not self.timeout_s > 0:
            raise ConfigError(f"--timeout {self.timeout_s} is not valid; give seconds > 0")
        if self.device not in DEVICES[1:] or self.backend not in BACKENDS[1:]:
            raise ConfigError(f"device {self.device!r} / backend {self.backend!r} must be resolved before this point")
        validate_run_id(self.run_id)

    @property
    def world_sizes(self) -> list[int]:
        return [self.nnodes * n for n in rank_ladder(self.gpus) if self.nnodes * n > 1]

"""Gradient accumulation (`bench --grad-accum K[,K…]`): each measured step is K micro-batches of --batch-size per
rank, forward and backward each, the gradients synchronised after the last only (the strategy's `no_sync()` on the
others: DDP's own, FSDP2's set_requires_gradient_sync), then one optimizer step. Several values sweep it, as
--bucket-cap-mb sweeps caps: K=1 against K=8 at one global batch is the question a recipe with a fixed global batch
asks. What the flag takes, which strategies cannot run it, and the global batch a row trains on."""

from __future__ import annotations

from harness.config.units import list_items
from harness.protocols import ConfigError

FLAG = "--grad-accum"


def accumulation_counts(text: str) -> tuple[int, ...]:
    """'1,8' as (1, 8): each a whole number ≥ 1, each once (a value twice would measure the same rows twice)."""
    counts = []
    for item in list_items(text, flag=FLAG) or (text,):
        try:
            count = int(item)
        except ValueError:
            count = 0
        if count < 1:
            raise ConfigError(f"{FLAG} {item!r} is not valid; give micro-batches per step as whole numbers ≥ 1, "
                              f"e.g. {FLAG} 1,8 (1: no accumulation)")  # fmt: skip
        if count in counts:
            raise ConfigError(f"{FLAG} {text!r} gives {count} twice; give each count once")
        counts.append(count)
    return tuple(counts)


def refused(impl: str, grad_accum: int) -> str | None:
    """Why strategy `impl` cannot accumulate `grad_accum` micro-batches (its class's `grad_accum_refused`): the row
    is then skipped with these words, as the rank says them; None where it can, and always at K=1."""
    import impls as impl_registry

    if grad_accum == 1:
        return None
    why = getattr(impl_registry.entry(impl).cls, "grad_accum_refused", "")
    return f"cannot accumulate gradients ({FLAG} {grad_accum}): {why}" if why else None


def global_batch(*, world_size: int, grad_accum: int, batch_size: int) -> int:
    """Samples one optimizer step trains on: every rank's K micro-batches of `batch_size`."""
    return world_size * grad_accum * batch_size


def row_words(row) -> str:
    """' K=8 (global batch 512 = 8 ranks × K=8 × 8)' for a row (a mapping of configs columns) that accumulated
    gradients; '' for one that did not (`grad_accum` 1, or a row from before it), whose lines read as they did."""
    accum = int(row.get("grad_accum") or 1)
    if accum == 1:
        return ""
    words = batch_words(world_size=int(row["world_size"]), grad_accum=accum, batch_size=int(row["batch_size"]))
    return f" K={accum} ({words})"


def batch_words(*, world_size: int, grad_accum: int, batch_size: int) -> str:
    """'global batch 32 = 2 ranks × K=4 × 4': what a console line and the run page say of a row's step."""
    total = global_batch(world_size=world_size, grad_accum=grad_accum, batch_size=batch_size)
    ranks = "rank" if world_size == 1 else "ranks"
    return f"global batch {total} = {world_size} {ranks} × K={grad_accum} × {batch_size}"

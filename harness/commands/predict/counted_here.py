"""Where `predict` counts the activations of the model you will train, and says so: on the meta device (no memory,
no time), or, where its forward cannot run there (it reads a value: a mixture of experts' `if sel.any()`, an early
exit), on this CPU at a batch that fits here, carried to the batch asked by what one more sample adds
(meta_counts.activations_on_cpu); and why, in one clause, where neither can.
"""

from __future__ import annotations


def with_cpu_activations(full: dict | None, spec: str, options: dict, batch: int, dtype: str | None) -> dict | None:
    """`full` (modelinfo.counts_on_meta's) with its activations counted on this CPU where the meta device could not
    run its forward (`activation_meta_error`), within what this machine has available; as it is elsewhere."""
    if not full or full.get("activation_mb") is not None or not full.get("activation_meta_error"):
        return full
    from harness.commands.console.plan import available_bytes
    from harness.commands.console.progress import Status
    from harness.measure import meta_counts

    # a first count runs the model's forward here (~100 s for a large model), the cluster's status line above it
    status = Status("predict")
    status.show(f"counting its activations on this CPU at {cpu_batches_text(batch)} (the meta device cannot run "
                "its forward)")  # fmt: skip
    try:
        counted = meta_counts.activations_on_cpu(spec, "full", options, batch_size=batch, dtype=dtype or "fp32",
                                                 param_bytes=int(full["param_bytes"]),
                                                 room=available_bytes())  # fmt: skip
    finally:
        status.end()  # counted (or kept from a first predict): the next line is the prediction's
    return {**full, **counted}


def cpu_batches_text(batch: int) -> str:
    """'batch 1 and 2' (meta_counts.CPU_BATCHES), or 'batch 1' where the batch asked is the first: what it runs."""
    from harness.measure.meta_counts import CPU_BATCHES

    one, two = CPU_BATCHES
    return f"batch {one}" if batch == one else f"batch {one} and {two}"


def counted_words(full: dict, batch: int) -> str:
    """'' where the meta device counted the activations; else how they were counted instead: '; its activations on
    this CPU instead, at batch 1 and 2, carried to batch 8 by what the second sample added (582 MiB): the meta device
    cannot run its forward (Tensor.item() cannot be called on meta tensors)', or why they could not be counted."""
    from harness.perfmodel.memory import mib_text

    meta = full.get("activation_meta_error")
    if full.get("activation_mb") is not None and not full.get("activation_cpu_batches"):
        return ""
    if full.get("activation_mb") is None:
        here = f", nor on this CPU ({full['activation_cpu_error']})" if full.get("activation_cpu_error") else ""
        return f"; its activations could not be counted there{f' ({meta})' if meta else ''}{here}"
    batches = full["activation_cpu_batches"]
    added = full.get("activation_sample_added_mb")
    if len(batches) > 1:
        how = (f"at batch {batches[0]} and {batches[-1]}, carried to batch {batch} by what the second sample added "
               f"({mib_text(added)})")  # fmt: skip
    else:
        how = f"at batch {batches[0]}" + (f", carried to batch {batch} in proportion" if batch != batches[0] else "")
    return f"; its activations on this CPU instead, {how}: the meta device cannot run its forward ({meta})"

"""The dtype `ddpbench predict` judges what fits in: a CPU run counts its activations in fp32 (the CPU trains so under
--dtype auto), while the GPU the fit is for trains in bf16 under the same --dtype auto (precision.gpu_step_dtype).
There the activations are counted again in bf16 on the meta device (activations.activations_on_meta: a CPU's fake
tensors under its autocast), at the rows' size and batch and one sample more, and the fit is judged on them
(`judged_in`); elsewhere a run counted in fp32 says what bf16 would keep beside its count (`dtype_note`). The model
state stays as the run held it: ddpbench's bf16 is autocast, which keeps the parameters, gradients and optimizer
state in fp32; a model cast to bf16 whole would hold less, which no count here knows.
"""

from __future__ import annotations

import functools
import json

import pandas as pd

from harness.perfmodel.memory import mib_text


@functools.cache
def counted(spec: str, options: str, size: str, batch_size: int, dtype: str) -> dict | None:
    """The workload `spec` at `size` with `options` (JSON)'s activations at `batch_size` in `dtype`
    (activations.activations_on_meta: `activation_mb`, `activation_top`; its parameters not counted again); None where
    it cannot be made or counted; kept in the user's cache (harness.measure.meta_counts)."""
    from harness.measure import meta_counts

    kept = meta_counts.activations(spec, size, json.loads(options), batch_size=batch_size, dtype=dtype)
    return kept if kept and kept["activation_mb"] is not None else None


def gpu_dtype(run_dir, configs, setup: dict, gpu) -> str:
    """The dtype `gpu` (a cluster, its `description` naming its GPU) trains the run's model in, where it is not the
    run's: bf16 where a CPU run left --dtype auto and the GPU has a bf16 peak (precision.gpu_step_dtype); fp16 where
    the run is a bf16 one and the GPU has no bf16 (a V100: precision.trains_in); '' where it is the run's own, or no
    GPU is named."""
    from harness.config.precision import gpu_step_dtype
    from harness.results import store

    description = getattr(gpu, "description", None)
    if not description:
        return ""
    meta = store.read_run_meta(run_dir)
    device = str(configs["device"].iloc[0]) if configs is not None and "device" in configs and len(configs) else None
    device, requested = device or meta.get("device") or "cuda", (meta.get("config") or {}).get("dtype")
    run = str(setup.get("dtype") or "fp32")
    dtype, _ = gpu_step_dtype(run, device=device, requested=requested, gpu=description)  # bf16's: fp16 on a V100
    return dtype if dtype != run else ""


def judged_in(rows: pd.DataFrame, setup: dict, spec: str, options: dict, dtype: str, gpu, *,
              terse: bool = False) -> tuple[pd.DataFrame, str]:  # fmt: skip
    """(`rows` with their activations counted in `dtype` where it is given (gpu_dtype's) and every row's could be:
    `activation_mb`, `activation_top`, `activation_sample_added_mb` (one sample more, counted), `activation_dtype`;
    the note that says what the fit is judged in). Without `dtype`, or where a count fails, the rows as they are,
    with `dtype_note`'s words."""
    known = rows["activation_mb"].notna() if "activation_mb" in rows else pd.Series(False, index=rows.index)
    text = json.dumps(options, sort_keys=True)
    if not dtype or not known.any():
        return rows, dtype_note(setup, rows, spec, options, terse=terse, gpu=gpu)
    at = [(counted(spec, text, str(size), int(b), dtype), counted(spec, text, str(size), int(b) + 1, dtype))
          if ok else (None, None)
          for size, b, ok in zip(rows["size"], rows["batch_size"], known, strict=True)]  # fmt: skip
    if any(ok and (this is None or more is None) for ok, (this, more) in zip(known, at, strict=True)):
        return rows, dtype_note(setup, rows, spec, options, terse=terse, gpu=gpu)
    fp32, run = float(rows.loc[known, "activation_mb"].iloc[0]), str(setup.get("dtype") or "fp32")
    kept = {"activation_mb": [this["activation_mb"] if this else None for this, _ in at],
            "activation_top": [this["activation_top"] if this else None for this, _ in at],
            "activation_sample_added_mb": [more["activation_mb"] - this["activation_mb"] if this else None
                                           for this, more in at]}  # fmt: skip
    rows = rows.assign(**{k: pd.Series(v, index=rows.index, dtype=float if k != "activation_top" else object)
                          for k, v in kept.items()}, activation_dtype=dtype)  # fmt: skip
    where = f"{gpu.name}'s GPU" if getattr(gpu, "name", None) else "the GPU"
    if run != "fp32":  # a bf16 run on a GPU without bf16 (a V100): its autocast's dtype, the same bytes
        return rows, (f"what fits judged in {dtype} (autocast, with a grad scaler): {where} has no {run}, the run's "
                      f"dtype; activations counted so (in {run}, the run's dtype, {AT_PREDICTED}: "
                      f"{mib_text(fp32)})")  # fmt: skip
    if terse:
        return rows, (f"what fits judged in {dtype} (autocast), --dtype auto's on {where}: activations counted so "
                      f"(in fp32, the run's dtype, {AT_PREDICTED}: {mib_text(fp32)}), the state as held "
                      "(autocast keeps it fp32)")  # fmt: skip
    return rows, (f"what fits is judged in {dtype} (autocast), what --dtype auto trains in on {where} (the CPU run "
                  f"trained in fp32, --dtype auto's there): the activations counted again in {dtype} on the meta "
                  f"device, at the rows' batch and one sample more (in fp32, the run's dtype, {AT_PREDICTED}: "
                  f"{mib_text(fp32)}); the "
                  "parameters, gradients and optimizer state as the run held them, in fp32, as autocast keeps them "
                  "(a model cast to bf16 whole would hold less); bench --dtype fp32 to judge it in fp32")  # fmt: skip


AT_PREDICTED = "at the size and batch predicted"
"""Where the fp32 count beside bf16's was made: vit_b_16 benched at 32×32, batch 2 (5.71 MiB) read "fp32's, the
run's: 225 MiB", its count at 224×224 on the meta device, as if the run had measured it."""


def dtype_note(setup: dict, rows: pd.DataFrame, spec: str, options: dict, *, terse: bool = False, gpu=None) -> str:
    """Where the activations were counted in fp32 (a CPU run's default) and a GPU trains in bf16 under autocast: the
    same forward counted so (a CPU's fake tensors under its autocast, at the rows' size and batch and one sample
    more), since bf16 is no fixed share of fp32's. A walkthrough planned its H100s on fp32 activations, unwarned;
    a tester's 1.3B llama then read 'half the bytes' where bf16 keeps 8.63 GiB at one sample against fp32's 8.08:
    RMSNorm, the residual stream, softmax and the loss stay fp32, and autocast keeps a bf16 copy of each weight it
    casts for backward, once at any batch. That copy is said apart, and the two dtypes compared by what one more
    sample adds: mlp/full's 2.13 MiB of fp32 activations at 8 samples read '481 MiB in bf16 (226×)', 480 MiB of it
    the copies of 15 weights of 32 MiB, each sample 0.50× fp32's. On `gpu` (a cluster) without bf16 (a V100, whose
    --dtype auto trains in fp32), the same in fp16, its autocast (with a grad scaler), said so."""
    if setup.get("dtype") != "fp32" or "activation_mb" not in rows or rows["activation_mb"].isna().all():
        return ""
    from harness.config.precision import bench_in, trains_in

    half = trains_in("bf16", getattr(gpu, "description", None))  # fp16 on a GPU without bf16
    dtype = "fp32, the run's dtype" + (f" and --dtype auto's on {gpu.name}'s GPU, which has no bf16" if half != "bf16"
                                       else "")  # fmt: skip
    first = rows[rows["activation_mb"].notna()].iloc[0]
    fp32, batch = float(first["activation_mb"]), int(first["batch_size"])
    made_as = spec, json.dumps(options, sort_keys=True), str(first["size"])
    at, more, fp32_at, fp32_more = (counted(*made_as, b, d) for d in (half, "fp32") for b in (batch, batch + 1))
    autocast = "autocast" + ", with a grad scaler" * (half == "fp16")
    if at is None or more is None:
        if terse:
            return f"activations in {dtype}; {half}'s could not be counted here: {bench_in(half)}"
        return (f"activations in {dtype}: trained in {half} ({autocast}) the count differs either way (fewer bytes "
                f"where ops run in {half}, more for the {half} copies of the weights autocast keeps for backward) and "
                f"could not be counted here; {bench_in(half)} to count them so")  # fmt: skip
    at, added = at["activation_mb"], more["activation_mb"] - at["activation_mb"]
    once = max(at - added * batch, 0.0)  # kept once at any batch: the weights' bf16 copies
    fp32_added = fp32_more["activation_mb"] - fp32_at["activation_mb"] if fp32_at and fp32_more else 0.0
    ratio = f"{added / fp32_added:.2f}× fp32's" if fp32_added > 0 else ""  # a sample's against a sample's
    samples = f"{batch} sample{'s' * (batch != 1)}"
    if terse:  # the figures a GPU in bf16 (fp16) plans by; how they were counted is the what-if page's
        copies = f", {mib_text(once)} of it the weights' {half} copies, kept once" if once > 0 else ""
        each = f"each further sample {mib_text(added)}" + f", {ratio}" * bool(ratio)
        return (f"activations in {dtype}; in {half} ({autocast}) {mib_text(at)} at {samples} a rank{copies} ({each}): "
                f"{bench_in(half)} to count them so")  # fmt: skip
    return (f"activations in {dtype}: trained in {half} ({autocast}) the same forward keeps {mib_text(at)} at "
            f"{samples} a rank against fp32's {mib_text(fp32)}: {mib_text(once)} kept once at any batch, the {half} "
            f"copies of the weights autocast keeps for backward, and each further sample adds {mib_text(added)}"
            f"{f' ({ratio} {mib_text(fp32_added)})' * bool(ratio)}, counted on a CPU's fake tensors under its "
            f"autocast; {bench_in(half)} to count them and the rest so")  # fmt: skip

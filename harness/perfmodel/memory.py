"""Model state per rank at world sizes a run did not reach, from what its ranks held at the ones it did.

A rank holds its parameters, gradients and optimizer state after a step (the run's `held_*` columns): a part
every rank keeps whole and a part split over the ranks, so `held(n) = whole + split / n`. Both are solved per
strategy and per kind of state from the world sizes the run measured (least squares over them; two give them
exactly), never assumed from a strategy's name: ZeRO splits its optimizer state alone, FSDP all three, DDP
nothing (split = 0). A strategy that splits its optimizer state but not its parameters places whole parameters
on ranks, so the largest one's state stays on one rank: a floor under the even split (and ZeRO-1's re-counted at
another size has its optimizer state by torch's partition of that size's parameters). Beside it, what the
forward keeps for backward at the rank's batch (`activation_mb`, counted by harness.measure.modelinfo; in the
strategy's own dtype where it computes in another, `compute_activation_mb`), the same at every world size. And,
whole on every rank at any world size: the gradient buckets kept beside the gradients (`buckets_mb`), what a
sharding strategy holds whole beside its shards (`unsharded_mb`), what a strategy's sync allocates beside the
gradients as its plug-in declares it (`sync_temp_mb`, role `sync_temporaries`), a GPU's optimizer step's temporaries
(`optimizer_temp_mb`), and a communication hook's state and copies (`hook_state_mb`, `hook_copies_mb`). Buffers
and the kernels' working memory are in none of these: they are in a GPU run's peak. A rank needs its state, its
hook's, and the larger of backward's part and the optimizer step's (`need_mb`). Against a CPU rank's polled
peak, with Adam stepping as on a GPU, that count is within 1.5 % where gradients outweigh activations, up to 21 %
high for FSDP and where activations dominate, and up to 8 % low where gradients are the buckets from the start
(benchmarks/memory_model.py, docs/measured/). What of it fits a GPU, and at what batch: fits.py.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from harness.analysis import roles
from harness.perfmodel.pick import failed, parity
from harness.perfmodel.sharding import zero
from harness.results.values import options_of

HELD = {"held_param_mb": "parameters", "held_grad_mb": "gradients", "held_optimizer_state_mb": "optimizer state"}
OPTIMIZER = "held_optimizer_state_mb"
STRATEGY_KEYS = ["workload", "size", "batch_size", "dtype", "optimizer", "impl", "impl_options"]
SPLIT_SHARE = 0.01
"""A split part under this share of the state at one rank is the fit's noise, not sharding."""


def state_per_rank(configs: pd.DataFrame, worlds: list[int]) -> pd.DataFrame:
    """Per strategy measured at two world sizes or more (the baseline, one process's training, is none; a cap sweep's
    caps are one, and so are its defaults asked by name: `_as_run`): the MiB of each kind of state a rank holds at
    each of `worlds` (`predicted`) and at each world size measured (`measured`, as held: the largest rank, every
    repeat), and which kinds it splits; a `single_process` strategy at the world sizes measured only (one process
    drives one node's GPUs), its activations not counted past one GPU (its first gathers every replica's outputs and
    the whole batch's loss). Columns: STRATEGY_KEYS, world_size, measured (bool), one per HELD kind, total_mb, splits
    (the kinds' names, '' for none), floor_mb (the floor under an even split where one applies, else 0:
    _whole_parameter_floor), activation_mb (what the forward keeps for backward at the rank's batch, the same at every
    world size: the batch is per rank; NaN where the run did not count it), activation_top (who keeps the most of it;
    '' where not counted), activation_dtype (what it was counted in: the rows' `activation_dtype` where predict
    counted it in the dtype a GPU trains in, else the run's), gpu_half_dtype (the rows' half precision of the GPU
    the fit is for: bf16, fp16 on a V100; '' where not said), activation_sample_added_mb (what one more sample a rank
    adds to it, where counted at two batches: a bf16 run's copies of its weights are kept once, whatever the batch;
    NaN where not), tokens_per_batch,
    buckets_mb (`_buckets`), unsharded_mb (`_unsharded`; NaN where not recorded), optimizer_temp_mb
    (TEMPORARY_SHARE), sync_temp_mb (the gradients held times the role `sync_temporaries`: what its sync allocates
    beside them, as declared; measured nowhere), parity_failed_by and parity_failed_tolerance (pick.parity.failure:
    NaN unless it failed parity), failed_here (pick.failed.FAILED: the run's failed strategies). Empty where no
    strategy qualifies."""
    held = [column for column in HELD if column in configs]
    if len(held) < len(HELD) or configs.empty:
        return pd.DataFrame()
    ok = roles.with_roles(configs[(configs["status"] == "ok") & configs[held].notna().all(axis=1)])
    ok = ok[~ok["baseline"].astype(bool)]
    ok = ok.assign(impl_options=[_as_run(i, o) for i, o in zip(ok["impl"], ok["impl_options"], strict=True)])
    rows, failures = [], failed.failures(configs, _as_run)  # every row carries them: a failed one may have none
    for key, group in ok.groupby([k for k in STRATEGY_KEYS if k in ok], dropna=False, sort=False):
        by_world = group.groupby("world_size")[held].max()
        if len(by_world) < 2:
            continue  # one world size: whole and split cannot be told apart
        fits = {column: _fit(by_world.index.to_numpy(float), by_world[column].to_numpy(float)) for column in held}
        split_kinds = [c for c, (whole, split) in fits.items() if split > SPLIT_SHARE * (whole + split)]
        floor = _whole_parameter_floor(group, fits, split_kinds)
        table = zero.counted_table(group)  # ZeRO-1's re-counted: its optimizer state by torch's partition
        all_state = float(by_world.loc[1, OPTIMIZER]) if 1 in by_world.index else sum(fits.get(OPTIMIZER, (0, 0)))
        base = dict(zip([k for k in STRATEGY_KEYS if k in ok], key, strict=True))
        options = base.get("impl_options")
        computes_in = compute_dtype(options)  # its own dtype's count where predict made one, else none
        activations = _activations(group, "compute_activation_mb" if computes_in else "activation_mb")
        buckets, unsharded = _buckets(group), _unsharded(group, options)
        hook_state, hook_copies = hook_state_mb(group, options), hook_copies_mb(group, options)
        one_process = roles.flag(group, "single_process").any()  # one node's GPUs: never carried past those run
        for world in sorted({*map(int, by_world.index), *([] if one_process else worlds)}):
            measured = world in by_world.index
            state = {c: float(by_world.loc[world, c]) if measured else max(whole + split / world, floor.get(c, 0.0))
                     for c, (whole, split) in fits.items()}  # fmt: skip
            if table is not None:
                state[OPTIMIZER] = zero.optimizer_state_mb(table, all_state, world)
            rows.append({**base, "world_size": world, "measured": measured, "single_process": one_process, **state,
                         "total_mb": sum(state.values()), "splits": ", ".join(HELD[c] for c in split_kinds),
                         "floor_mb": sum(floor.values()),
                         "activation_mb": float("nan") if one_process and world > 1 else activations,
                         "activation_top": _first(group, "compute_activation_top" if computes_in
                                                  else "activation_top"), "computes_in": computes_in,
                         "activation_dtype": _first(group, "activation_dtype") or _first(group, "dtype"),
                         "gpu_half_dtype": _first(group, "gpu_half_dtype"),
                         "activation_sample_added_mb": float("nan") if computes_in or (one_process and world > 1)
                         else _activations(group, "activation_sample_added_mb"),
                         "buckets_mb": buckets,
                         "tokens_per_batch": _activations(group, "tokens_per_batch"),  # a language model's
                         "step_buckets_mb": _buckets_at_step(group, buckets),
                         "optimizer_temp_mb": state.get("held_optimizer_state_mb", 0.0)
                         * TEMPORARY_SHARE.get(str(base.get("optimizer")), 0.0),
                         "unsharded_mb": unsharded, "hook_state_mb": hook_state,
                         "sync_temp_mb": _declared(group, "sync_temporaries") * state.get("held_grad_mb", 0.0),
                         "hook_copies_mb": hook_copies, **parity.failure(group), failed.FAILED: failures})  # fmt: skip
    return pd.DataFrame(rows)


def _declared(group: pd.DataFrame, role: str) -> float:
    """A numeric role the strategy's rows record (with_roles filled a run's from before it); 0 where none."""
    values = pd.to_numeric(group[role], errors="coerce").dropna() if role in group else pd.Series(dtype=float)
    return float(values.max()) if len(values) else 0.0


def _whole_parameter_floor(group: pd.DataFrame, fits: dict, split_kinds: list[str]) -> dict[str, float]:
    """Where a strategy splits its optimizer state but keeps its parameters whole (ZeRO's), one rank keeps at least
    the largest parameter's state at any world size: its bytes times the state's ratio to the parameters, fitted."""
    optimizer, param = "held_optimizer_state_mb", "held_param_mb"
    if optimizer not in split_kinds or param in split_kinds or "largest_param_bytes" not in group:
        return {}
    largest = group["largest_param_bytes"].dropna()
    at_one = {column: sum(fits[column]) for column in (optimizer, param)}  # whole + split / 1
    if largest.empty or not at_one[param]:
        return {}
    return {optimizer: float(largest.max()) / 2**20 * at_one[optimizer] / at_one[param]}


def _buckets(group: pd.DataFrame) -> float:
    """The MiB of gradient buckets a rank keeps beside its gradients: the most any of the strategy's configurations
    laid out (`bucket_sizes_mb`, summed); 0 where it keeps none (role `keeps_buckets`) or its gradients are views of
    them (`gradient_as_bucket_view`); NaN where it keeps buckets but the run recorded no layout."""
    views = group["impl_options"].map(lambda text: bool(options_of(text).get("gradient_as_bucket_view")))
    if views.all() or not roles.flag(group, "keeps_buckets").any():
        return 0.0
    return _laid_out(group[~views])


def _laid_out(group: pd.DataFrame, per_row=np.sum) -> float:
    """The most MiB of buckets any of the rows laid out (`bucket_sizes_mb`, summed; or `per_row` of them: np.max,
    the largest bucket); NaN where none is recorded."""
    laid_out = group["bucket_sizes_mb"] if "bucket_sizes_mb" in group else pd.Series(dtype=object)
    found = [float(per_row(sizes)) for sizes in laid_out if listed(sizes)]
    return max(found) if found else float("nan")


def hook_state_mb(group: pd.DataFrame, options_json: str | None) -> float:
    """The MiB a DDP communication hook keeps from step to step: torch's PowerSGD hook, with its error feedback on
    (ddpbench's setting and torch's default), keeps each bucket's local error in a tensor of the bucket's size
    (`powerSGD_hook`'s `error_dict`), whatever `gradient_as_bucket_view`; its low-rank P and Q, (rows + columns) ×
    rank a matrix, are left out. 0 for any other hook; NaN where the run recorded no bucket layout."""
    return _laid_out(group) if options_of(options_json).get("comm_hook") == "powersgd" else 0.0


def hook_copies_mb(group: pd.DataFrame, options_json: str | None) -> float:
    """The MiB a DDP communication hook allocates in backward: torch's PowerSGD hook clones the bucket it compresses
    (`input_tensor_cp`) and makes the new error from it while the old one is still referenced: two copies of the
    largest bucket (a CPU rank's peak read 24 MiB over the count without them for a 28 MiB bucket, mlp/small; over
    NCCL several hooks may be in flight, which a GPU run's peak measures). 0 for any other hook; NaN where the run
    recorded no bucket layout."""
    return 2 * _laid_out(group, np.max) if options_of(options_json).get("comm_hook") == "powersgd" else 0.0


def _buckets_at_step(group: pd.DataFrame, buckets: float) -> float:
    """The buckets still beside the gradients at the optimizer step: less the gradients measured to live in them
    by then (`held_grad_view_mb`), all of them where the run did not measure it."""
    views = group["held_grad_view_mb"].dropna() if "held_grad_view_mb" in group else pd.Series(dtype=float)
    return buckets if views.empty or np.isnan(buckets) else max(buckets - float(views.max()), 0.0)


def listed(sizes) -> bool:
    return sizes is not None and not (isinstance(sizes, float) and np.isnan(sizes)) and len(sizes) > 0


TEMPORARY_SHARE = {"adam": 0.5, "adamw": 0.5, "sgd": 0.0}  # AdamW: Adam's step, its decay applied apart
"""What a GPU's default optimizer step allocates beside its state, as a share of that state: torch's Adam steps
every tensor at once (`foreach`, its default on GPUs) and makes one temporary the size of its second moment,
half its state (measured so on the CPU with `foreach` on: docs/measured/memory-model-cpu.md); plain SGD updates in
place."""

UNITS = ("param_bytes", "root_param_bytes", "root_grad_bytes", "largest_block_bytes", "largest_block_grad_bytes")


def _unsharded(group: pd.DataFrame, options_json: str | None) -> float:
    """The MiB a strategy that shards its parameters (`roles.shards_parameters`) holds whole at its peak, beside its
    shards (`unsharded_mb`); 0 for any other, NaN where the run did not record the model's blocks."""
    if not roles.shards_parameters(group).any():
        return 0.0
    known = group.dropna(subset=[c for c in UNITS if c in group]) if set(UNITS) <= set(group) else group.iloc[:0]
    if known.empty:
        return float("nan")
    sizes = {c: float(known.iloc[0][c]) for c in UNITS}
    options = options_of(options_json)
    # Gathered parameters and their gradients are in param_dtype, the reduce-scatter's input in reduce_dtype;
    # the recorded sizes are the fp32 masters'.
    param_scale, reduce_scale = (DTYPE_BYTES[options.get(k, "fp32")] / 4 for k in ("param_dtype", "reduce_dtype"))
    kept = options.get("reshard_after_forward") is False
    return unsharded_mb(**sizes, kept=kept, param_scale=param_scale, reduce_scale=reduce_scale)


DTYPE_BYTES = {"fp32": 4, "bf16": 2}


def unsharded_mb(*, param_bytes: float, root_param_bytes: float, root_grad_bytes: float, largest_block_bytes: float,
                 largest_block_grad_bytes: float, kept: bool, param_scale: float = 1.0,
                 reduce_scale: float = 1.0) -> float:  # fmt: skip
    """What FSDP2 holds whole at its peak beside its shards (bytes in, MiB out), as torch's FSDP2 does:
    - the root's parameters, gathered from forward to the end of backward, and its gradients, reduce-scattered
      only when backward ends (its inputs need no gradient, so autograd never calls its post-backward hook);
    - the largest block twice: its gather's buffer and its unsharded parameters (a GPU's prefetch may hold a
      third in flight: unchecked); its gradients and the previous block's reduce-scatter input, kept until the
      next block's;
    - with `reshard_after_forward=false`, every parameter instead of the root's and the blocks' (all stay
      gathered from forward to backward).
    Sizes are the fp32 masters'; `param_scale` and `reduce_scale` (param_dtype's and reduce_dtype's bytes over 4)
    size what is gathered and computed in, and what is reduce-scattered."""
    held = param_bytes if kept else root_param_bytes + 2 * largest_block_bytes
    grads = (root_grad_bytes + largest_block_grad_bytes) * param_scale + largest_block_grad_bytes * reduce_scale
    return (held * param_scale + grads) / 2**20


def need_mb(state: pd.DataFrame) -> pd.Series:
    """What each row's rank needs at its step's peak: its model state, its hook's (`hook_state_mb`), and the larger
    of what backward holds beside it (buckets, FSDP's unsharded parameters and gradients, its sync's declared
    temporaries, and the larger of the activations and the hook's copies) and what the optimizer step does (a GPU's
    optimizer temporaries, the buckets still beside the gradients then). What a run did not record counts as none
    (`unrecorded` names it)."""
    held, kept, copies, optimizer = need_parts(state)
    # The hook's copies come as a bucket is ready, the largest (often the embedding's) last: by then backward has
    # freed the activations (gpt2/small under PowerSGD: 1.3 % over a CPU rank's peak so, 25 % counting both).
    return held + np.maximum(kept + np.maximum(state["activation_mb"], copies), optimizer)


def need_parts(state: pd.DataFrame) -> tuple:
    """need_mb's parts but the activations: (what is held from step to step, what backward keeps beside the
    activations, the hook's copies, what the optimizer step holds beside the state); none recorded counts as 0."""

    def part(column: str) -> pd.Series | float:
        return state[column].fillna(0.0) if column in state else 0.0

    at_step = "step_buckets_mb" if "step_buckets_mb" in state else "buckets_mb"
    # a sync's temporaries beside the activations: an upper bound where it runs after backward has freed them
    return (state["total_mb"] + part("hook_state_mb"), part("buckets_mb") + part("unsharded_mb") + part("sync_temp_mb"),
            part("hook_copies_mb"), part("optimizer_temp_mb") + part(at_step))  # fmt: skip


def _as_run(impl: str, options_json: str | None) -> str | None:
    """A strategy's options as they act, less the bucket cap: DDP's buckets are not in the state held, so every cap
    of a sweep holds the same, and is one strategy here (its repeats at every cap pooled); so is a row asking its
    defaults by name (or an option that acts on nothing: impls.inert_options) beside a plain one."""
    options = options_of(options_json)
    acting = {k: v for k, v in roles.beyond_defaults(impl, options).items() if k != "bucket_cap_mb"}
    return options_json if acting == options else json.dumps(acting, sort_keys=True)


def compute_dtype(options_json: str | None) -> str:
    """The dtype a strategy computes in where it is not the run's (FSDP's param_dtype=bf16 in an fp32 run: the
    activations counted for the run's dtype are not its own; `compute_activation_mb` are, where counted); ''."""
    dtype = options_of(options_json).get("param_dtype", "fp32")
    return dtype if dtype != "fp32" else ""


def _first(group: pd.DataFrame, column: str) -> str:
    known = group[column].dropna() if column in group else pd.Series(dtype=object)
    return str(known.iloc[0]) if len(known) else ""


def _activations(group: pd.DataFrame, column: str = "activation_mb") -> float:
    """The setup's `activation_mb` (counted once per workload setup, so one value; or `tokens_per_batch`), NaN where
    not counted."""
    counted = group[column].dropna() if column in group else pd.Series(dtype=float)
    return float(counted.max()) if len(counted) else float("nan")


def _fit(worlds: np.ndarray, held_mb: np.ndarray) -> tuple[float, float]:
    """(whole, split) MiB of `held = whole + split / n` by least squares, neither below 0."""
    design = np.column_stack([np.ones_like(worlds), 1.0 / worlds])
    (whole, split), *_ = np.linalg.lstsq(design, held_mb, rcond=None)
    if split < 0:  # a part that grows with the ranks is none of ours: all whole
        return float(np.mean(held_mb)), 0.0
    if whole < 0:
        return 0.0, float(np.mean(held_mb * worlds))
    return float(whole), float(split)


def mib_text(value: float) -> str:
    """A model-state figure for reading, in the console and on the page alike: '0.354 MiB', '1.85 GiB'."""
    return f"{value / 1024:.3g} GiB" if value >= 1024 else f"{value:.3g} MiB" if value < 999.5 else f"{value:.0f} MiB"


def unrecorded(state: pd.DataFrame) -> str:
    """'buckets for stock, zero; unsharded parameters and gradients for fsdp not recorded (a run from before ddpbench
    recorded them): counted as none' for the strategies whose share `need_mb` could not count; '' for none."""
    said = []
    for column, what in (("buckets_mb", "buckets"), ("unsharded_mb", "unsharded parameters and gradients"),
                         ("hook_state_mb", "the hook's state")):  # fmt: skip
        names = list(dict.fromkeys(state.loc[state[column].isna(), "strategy"])) if column in state else []
        said += [f"{what} for {', '.join(names)}"] if names else []
    return (f"{'; '.join(said)} not recorded (a run from before ddpbench recorded them): counted as none"
            if said else "")  # fmt: skip

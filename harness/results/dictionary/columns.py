"""The column dictionary's per-configuration tables (configs, steps, ranks, timeline), each column declared once.

A column is (name, Arrow type, unit, one-line meaning). The store's Arrow schemas are built
from it (each field carries its unit and meaning as Parquet field metadata, so every part file
describes itself), the reader conforms older parts to it, and docs/results.md renders its
column tables from it (`python -m harness.results.docs`).
"""

# ruff: noqa: E501 (one column per line, its meaning included: the file reads as the table it declares)

from __future__ import annotations

import dataclasses

from harness.results.dictionary.kinds import (
    BOOL,
    BYTES,
    COUNT,
    F64,
    F64_LIST,
    I32,
    I64,
    MHZ,
    MIB_UNIT,
    MS,
    OPTIONS,
    PCT,
    RATIO,
    SECONDS,
    STR,
    UTC_TIME,
    WATTS,
    Column,
    Table,
)

PHASES = ("forward", "backward", "sync", "optimizer")  # a training step's phases, in order
PHASE_COLUMNS = tuple(f"{phase}_ms" for phase in PHASES)  # their columns in steps/


C = Column
RUN_ID = C("run_id", STR, "", "the run (its folder's name)")
CONFIG_ID = C(
    "config_id",
    STR,
    "",
    "one repeat of a configuration within the run: `<index>-w<world>-<workload>-<size>-<impl>[-<options>][-r<repeat>]`, the `-r<repeat>` where the run repeats configurations (none with `--repeats 1`); `<index>` is the row's place in the run, so each repeat has its own (group a configuration's repeats by its columns: docs/results.md, Reading a run with pandas)",
)
RANK = C("rank", I32, "", "the rank (process) in the launch")
WORKLOAD = C("workload", STR, "", "the workload as run: a registered name (workloads/), `FILE.py:NAME`, `package.module:NAME`, `torchvision:NAME`, `hf:MODEL_TYPE`, `timm:NAME`, with its options in brackets where it has some (`hf:llama[num_hidden_layers=4]`)")
SIZE = C("size", STR, "", "the workload's size: `tiny`, `small`, `full`")
IMPL = C("impl", STR, "", "the strategy (impls/)")
WORLD_SIZE = C(
    "world_size",
    I32,
    "",
    "ranks in the job; for `rpc_hybrid`, the trainers (its launch has one more rank, the parameter server)",
)
NNODES = C("nnodes", I32, "", "nodes in the job")
BUCKET_CAP_MB = C(
    "bucket_cap_mb",
    F64,
    MIB_UNIT,
    "the bucket cap the strategy used, where it has buckets: the one given, or DDP's default (25) when none was (`impl_options` holds what was asked)",
)
BATCH_SIZE = C("batch_size", I32, COUNT, "samples per rank per micro-batch: per step where `grad_accum` is 1")
GRAD_ACCUM = C(
    "grad_accum",
    I32,
    COUNT,
    "`--grad-accum`: micro-batches of `batch_size` per rank in each step, forward and backward each, the gradients synchronised after the last only (the strategy's `no_sync()` on the others), then one optimizer step; a step trains on `world_size × grad_accum × batch_size` samples (1 in runs from before this column, which had no accumulation)",
)
DTYPE = C(
    "dtype",
    STR,
    "",
    "`fp32`, or the autocast dtype of the forward (`bf16`, `fp16`); what `--dtype auto` resolved to (bf16 on GPUs that support it, fp32 elsewhere)",
)
TF32 = C(
    "tf32",
    BOOL,
    "",
    "`--tf32`: fp32 matmuls and convolutions were allowed TF32 tensor cores; false: no TF32 at all, cuDNN's included (null: written before it was recorded)",
)
OPTIMIZER = C("optimizer", STR, "", "`sgd`, `adam` or `adamw` (`--optimizer`)")
DEVICE = C("device", STR, "", "`cpu` or `cuda`")
BACKEND = C("backend", STR, "", "`gloo` or `nccl`")
THREADS = C("threads_per_rank", I32, COUNT, "CPU threads each rank had (on the CPU, the same at every world size)")
HOSTNAME = C("hostname", STR, "", "the machine (rank 0's, on several nodes)")
STARTED_AT = C("started_at", UTC_TIME, "UTC", "when the run started")
STEP_MS = C("step_ms", F64, MS, "the whole step on this rank")
GRAD_BYTES = C(
    "grad_bytes", I64, BYTES, "bytes of gradients one all-reduce of everything moves (shared parameters once)"
)
NETWORK = C("network", STR, "", "where α and the bus bandwidth came from")

# What the memory sampler measures, per rank (ranks/) and over the ranks (configs/: peaks are the
# largest rank's, the one that runs out first; means are the mean of the ranks).
MEMORY = (
    C("mem_peak_nvml_mb", F64, MIB_UNIT, "peak device memory used on the rank's GPU (NVML; `dataparallel`'s first GPU, which holds its parameters, of the several it drives)"),
    C("mem_peak_nvml_process_mb", F64, MIB_UNIT, "peak device memory NVML attributes to the rank's process"),
    C(
        "mem_peak_allocated_mb",
        F64,
        MIB_UNIT,
        "peak of the torch allocator's allocated memory, reset per configuration; where one process drives several GPUs (`dataparallel`), of the GPU that allocated most, which `mem_note` names with each GPU's peak",
    ),
    C("mem_peak_reserved_mb", F64, MIB_UNIT, "peak of the torch allocator's reserved memory, reset per configuration; where one process drives several GPUs, of the GPU `mem_peak_allocated_mb` is"),
    C(
        "mem_peak_rss_mb",
        F64,
        MIB_UNIT,
        "peak resident memory of the rank's process over the configuration (the kernel's high-water mark, reset per configuration; sampled where that is not possible)",
    ),
    C("mem_nvml_struct", STR, "", "the NVML memory struct read: `v2` (excludes driver-reserved memory) or `v1`"),
    C("gpu_util_mean_pct", F64, PCT, "mean GPU utilisation over the measured steps (NVML; build and warm-up excluded)"),
    C("gpu_util_peak_pct", F64, PCT, "peak GPU utilisation over the measured steps (NVML)"),
    C("sm_clock_mean_mhz", F64, MHZ, "mean SM clock over the measured steps (NVML)"),
    C("power_mean_w", F64, WATTS, "mean board power over the measured steps (NVML)"),
    C("power_peak_w", F64, WATTS, "peak board power over the measured steps (NVML)"),
    C("mem_samples", I32, COUNT, "samples the memory sampler took (period: `--mem-period-ms`)"),
    C("mem_note", STR, "", "why memory columns are null, where they are (NVML unavailable, a query it refused); where one process drives several GPUs, which GPU's the allocator peaks are"),
    C(
        "held_param_mb",
        F64,
        MIB_UNIT,
        "parameters a rank holds after its last step (its shard, for `zero` and `fsdp`; `rpc_hybrid`: trainers the dense part, the server the remote part)",
    ),
    C(
        "held_grad_mb",
        F64,
        MIB_UNIT,
        "gradients a rank holds after its last step (`rpc_hybrid` trainers: read from the distributed-autograd context; null on its server, whose contexts are released after each step)",
    ),
    C(
        "held_optimizer_state_mb",
        F64,
        MIB_UNIT,
        "optimizer state a rank holds after its last step (null for `rpc_hybrid`: inside DistributedOptimizer)",
    ),
    C(
        "held_grad_view_mb",
        F64,
        MIB_UNIT,
        "the part of `held_grad_mb` stored as views into a larger allocation: gradients that live in their strategy's buckets (DDP's `gradient_as_bucket_view`, `flat` and `bucketed` after their sync), so the buckets hold no second copy of them then; FSDP's sharded gradients are such views too (it keeps no buckets)",
    ),
    C(
        "held_ahead_batches_mb",
        F64,
        MIB_UNIT,
        "gradient accumulation's micro-batches made before the step, so that their making is not timed, beyond the one being trained: `grad_accum` − 1 of them (their tensors' bytes), held through the step. That much of the memory peaks is the harness's: a training loop that makes each batch before its forward does not hold them. 0 at `grad_accum` 1; null in runs from before the column",
    ),
)
PEAK_MEMORY = ("mem_peak_nvml_mb", "mem_peak_nvml_process_mb", "mem_peak_allocated_mb", "mem_peak_reserved_mb",
               "mem_peak_rss_mb", "gpu_util_peak_pct", "power_peak_w",
               "held_param_mb", "held_grad_mb", "held_optimizer_state_mb", "held_grad_view_mb",
               "held_ahead_batches_mb")  # fmt: skip
MEAN_MEMORY = ("gpu_util_mean_pct", "sm_clock_mean_mhz", "power_mean_w")
RANK_ZERO_MEMORY = ("mem_nvml_struct", "mem_samples", "mem_note")  # the sampler's setting and note: rank 0's
OVER_RANKS = {
    **dict.fromkeys(PEAK_MEMORY, "the largest rank's (the one that runs out first)"),
    **dict.fromkeys(MEAN_MEMORY, "the mean of the ranks'"),
    **dict.fromkeys(RANK_ZERO_MEMORY, "rank 0's"),
}


def over_ranks(column: Column) -> Column:
    """A memory column as configs/ holds it, one figure over the ranks: its meaning says which, since the
    per-rank words ("the rank's process") alone would leave a reader of a configs part to guess."""
    return dataclasses.replace(column, meaning=f"{column.meaning}; in configs/ {OVER_RANKS[column.name]}, in ranks/ each rank's")


# The strategy's roles, as its class declares them (harness.protocols.ROLES): what every reader decides by.
ROLES = (
    C(
        "baseline",
        BOOL,
        "",
        "the strategy communicates nothing: the compute-only floor every other is measured against at the same world size (`local`)",
    ),
    C(
        "reference",
        BOOL,
        "",
        "the strategy every other is measured against, whose bucket cap is recommended and predicted (`stock`: DDP as torch ships it)",
    ),
    C(
        "gradient_traffic",
        STR,
        "",
        "what crosses the network for the gradients each step: `allreduce` (every gradient byte all-reduced once), `sharded` (reduce-scatter, with all-gathers of the parameters), `none`, `other`",
    ),
    C(
        "shards_state",
        BOOL,
        "",
        "each rank keeps and updates a shard of the optimizer state or parameters: the strategy trades communication for memory (`zero`, `fsdp`)",
    ),
    C(
        "comm_after_backward",
        BOOL,
        "",
        "every collective runs after backward by design: no overlap to expect (`naive`, `flat`)",
    ),
    C(
        "keeps_buckets",
        BOOL,
        "",
        "the strategy keeps buffers its gradients travel in beside the gradients (DDP's buckets, a flat buffer), as `bucket_sizes_mb` lays them out (`stock`, `zero`, `bucketed`, `flat`, `rpc_hybrid`'s dense part)",
    ),
    C(
        "sync_temporaries",
        F64,
        RATIO,
        "what the strategy's gradient sync allocates beside the gradients and frees within the step, as a multiple of the gradients' bytes, as its class declares it (0: none): counted in the memory a rank needs (`need_mb`), never measured",
    ),
    C(
        "single_process",
        BOOL,
        "",
        "one process drives every GPU of the world size, on one node: its first GPU gathers every replica's outputs (`dataparallel`)",
    ),
)

# What the model is (harness.measure.modelinfo), the same on every rank.
MODEL = (
    C("param_count", I64, COUNT, "the model's parameters (shared ones once)"),
    C("trainable_param_count", I64, COUNT, "parameters with `requires_grad`"),
    C("param_tensors", I32, COUNT, "parameter tensors"),
    GRAD_BYTES,
    C("largest_param_name", STR, "", "the largest single parameter"),
    C("largest_param_bytes", I64, BYTES, "its size"),
    C("param_bytes", I64, BYTES, "every parameter's bytes (shared ones once)"),
    C("root_param_bytes", I64, BYTES, "the parameters' bytes no block holds (embeddings, stems, heads: what `fsdp` shards as the root and holds whole from forward to the end of backward); the blocks as `fsdp` wraps them"),
    C("root_grad_bytes", I64, BYTES, "the trained ones' among them: the root's gradients, which `fsdp` holds whole until backward ends"),
    C("largest_block_bytes", I64, BYTES, "the parameters' bytes of the largest block"),
    C("largest_block_grad_bytes", I64, BYTES, "the trained ones' bytes of the block that has the most"),
    C("tokens_per_batch", I64, COUNT, "tokens per rank per step, for language models"),
    C("flops_per_sample", F64, "FLOP", "forward+backward FLOPs per sample, counted by `FlopCounterMode`"),
    C("activation_mb", F64, MIB_UNIT, "what one forward at the rank's batch keeps for backward, under the run's dtype: "
      "every tensor saved for backward, each storage once, parameters and buffers left out (autocast's weight copies "
      "kept in), attention as a flash kernel keeps it; counted once per workload setup, outside the timed steps, on "
      "the meta device where the model runs there in fp32, else on the rank's device"),
    C("activation_top", STR, "", "the kinds of module that keep the most of `activation_mb`, with their shares "
      "('NewGELUActivation 48%, Conv1D 18%, the loss 16%': the class of the innermost module running when each "
      "tensor was first saved; the loss: outside the model)"),
)

CONFIGS = Table(
    "configs", "configs/<id>.parquet",
    "One row per configuration (× repeat). Memory columns are over the ranks, each saying how: peaks and held "
    "state the largest rank's, means the mean of the ranks, the sampler's count and note rank 0's.",
    (
        C("schema_version", I32, "", "the version of this format that wrote the part (see Schema versions)"),
        RUN_ID, CONFIG_ID,
        C("repeat", I32, "", "which of the `--repeats` measurements of this configuration (counted from 0, so 0 when run once; the console and the pages count from 1: repeat 0 is #1; repeats are interleaved)"),
        C("launch_position", I32, "", "its place in the launch whose processes ran it (0: the first after they started, which also pays what is cold); a pair of repeats (`--repeats`) runs an order and then its reverse, each pair starting one further along, so that every configuration's mean place is the middle; null where it never ran in a launch (a failure recorded for it) and in runs made before it was recorded"),
        C("status", STR, "", "`ok`, `failed` or `skipped`"),
        C("error", STR, "", "failed: the error's last line, naming the rank; skipped: the reason"),
        C("error_kind", STR, "", "why a failed row failed: `exception` (a Python exception), `oom` (an allocation refused: CUDA's out-of-memory, the CPU allocator's), `killed` (a rank died without an exception: a signal, a hard exit), `timeout` (no progress for `--timeout` seconds; `error` names the ranks that did not respond and where the others wait), `launch` (the launch never started a configuration); null otherwise"),
        C("error_file", STR, "", "the failing rank's full traceback, relative to the run folder (`failures/<id>/rank<N>.traceback.txt`); a rank killed without one (`killed`: SIGKILL), the traceback of the first peer whose collective its death broke, which `error` names"),
        C("fault", STR, "", "the `DDPBENCH_FAULT` injected on purpose into the launch that measured (or failed) this row and aimed at it: its strategy, world size, repeat, cap, rank and step could fire here (docs/faults.md); its times or failure are the fault's, not the code's, so leave the row out of a summary; null where none was, and in runs from before this column (run.json's `environment` names a fault set when the run began)"),
        IMPL,
        C("impl_options", OPTIONS, "", "the strategy's options: option name → its value as a JSON literal (`25.0`, `true`, `\"fp16\"`); ddpbench's reader returns them as one canonical JSON text"),
        *ROLES,
        WORKLOAD,
        C("workload_spec", STR, "", "what the ranks built the workload from: the spec as given, a file's path made absolute (run.json's `workloads` has its content's hash)"),
        C("workload_options", OPTIONS, "", "the workload's options (`--wopt`): option name → its value as a JSON literal, as `impl_options`"),
        SIZE, WORLD_SIZE, NNODES, BUCKET_CAP_MB, BATCH_SIZE, GRAD_ACCUM, DTYPE, TF32, OPTIMIZER, DEVICE, BACKEND, THREADS,
        C("steps", I32, COUNT, "measured steps"),
        C("warmup", I32, COUNT, "warm-up steps before them"),
        C("scaler_skipped_steps", I32, COUNT, "fp16: the measured steps whose optimizer step the grad scaler skipped (an inf or NaN in the scaled gradients: the scale halved, the parameters left as they were), the most of any rank (the strategies' ranks skip together: they check the reduced gradients); null in other dtypes and in runs from before this column"),
        C("step_ms_median", F64, MS, "median over measured steps of the slowest rank's step time"),
        C("step_ms_p10", F64, MS, "10th percentile of the same"),
        C("step_ms_p90", F64, MS, "90th percentile of the same"),
        C("step_ms_cv", F64, RATIO, "coefficient of variation of those step times (noise)"),
        C("step_ms_drift", F64, RATIO, "how far those step times moved within the measured window, in step order: median of the last quarter of the steps (at least 3) / median of the first half − 1 (−0.04: the last steps 4 % faster than the first); flagged (the noise note \"steps drift\") where at least 2 % and beyond 3 × `step_ms_drift_se`; null under 6 measured steps (docs/statistics.md)"),
        C("step_ms_drift_se", F64, RATIO, "the standard error of `step_ms_drift`, from the steps' own spread: √(π/2) σ √(1/first half + 1/last quarter) / the first half's median, σ from the median absolute difference of successive steps (which a level shift barely moves); null where the drift is"),
        C("samples_per_s", F64, "samples/s", "`batch_size × grad_accum × world_size / step_ms_median`"),
        C("step_period_ms", F64, MS, "the measured window (first step's start to the last one's end, the slowest rank's) / steps: a step plus what runs between steps (zeroing gradients, making the batch, gaps); below `step_ms_mean` where the ranks' steps do not line up (`local`'s ranks never wait for each other), since a step time takes the slowest rank at each step index, as a step that synchronised would wait for it"),
        C("window_samples_per_s", F64, "samples/s", "samples of all ranks in the measured window / the window's length: throughput including what runs between steps"),
        C("scaling_efficiency", F64, RATIO, "`samples_per_s(n) / (n × samples_per_s(1))`, same configuration at world size 1, same repeat (where that repeat ran none, the geometric mean of those that did; a summary over repeats pools the world-size-1 repeats: docs/statistics.md)"),
        C("scaling_efficiency_vs_local", F64, RATIO, "`samples_per_s(n) / (n × samples_per_s of local at world size 1)`: against one process that communicates nothing and wraps nothing, so the strategy's own cost at one rank counts too (on GPUs the figure to plan by; on the CPU the ranks also share the cores); same setup and repeat as `scaling_efficiency` (where that repeat ran no `local` at one rank, the geometric mean of those that did); the run page's scaling sentence and chart pool it over repeats as they pool `scaling_efficiency`; null without a `local` row at world size 1 (`--no-baseline`, a ladder without 1, several nodes) and in runs from before this column"),
        C("comm_ms", F64, MS, "measured communication: per step and rank, how long at least one of the strategy's collectives was in flight (the bucket timeline: the gradients', the broadcasts of buffers before forward and of ZeRO's parameters after its step, and bucketed's mask of used parameters); the mean over measured steps and ranks; 0 for `local`; null where not measured (see `comm_note`)"),
        C("exposed_comm_ms", F64, MS, "the part of `comm_ms` during which no compute of the step ran (forward, backward up to its last gradient, optimizer); the mean as above; 0 ≤ exposed ≤ comm step by step"),
        C("overlap_efficiency", F64, RATIO, "`1 − exposed_comm_ms / comm_ms` (totals over measured steps and ranks; HTA's communication–compute overlap; 1.0: all hidden, 0: none; null without communication)"),
        C("exposed_forward_ms", F64, MS, "the part of `exposed_comm_ms` inside the forward phase (a broadcast of buffers before it; FSDP's all-gathers); the mean as above; null where not measured, and in runs from before this column"),
        C("exposed_optimizer_ms", F64, MS, "the part of `exposed_comm_ms` inside the optimizer step (ZeRO's broadcast of the parameters each rank updated); the mean as above; null as above"),
        C("comm_bytes", F64, BYTES, "the sizes of a rank's collectives' messages a step, from the bucket timeline's `bytes` (under an fp16/bf16 hook half the bucket; PowerSGD's chain its own; not what a rank puts on the wire: a ring all-reduce of S bytes sends 2(n-1)/n × S): the mean over measured steps and ranks; null without a timeline, and in runs from before this column"),
        C("comm_note", STR, "", "why `comm_ms` is null: what timing would cost (DDP's buckets: `--bucket-timeline` times them), or that the strategy's collectives cannot be timed; or, where measured, what its figures carry: that the step paid for timing them (\"measured through a communication hook (--bucket-timeline), which its step pays: …\", a setting `compare` keeps apart), or why they may read high (gloo on CUDA; fsdp's all-gathers on a GPU, its hidden share then a lower bound; an fp16/bf16 compression hook's casts to 2-byte floats and back, inside its time in flight: \"the bf16 hook's casts counted in flight\", which the console's line says)"),
        C("step_ms_mean", F64, MS, "mean over measured steps of the slowest rank's step time (the figure the gap's parts add up to)"),
        C("compute_ms", F64, MS, "mean over measured steps of the compute of the rank that waited most in each step (where none waited, as the baseline's ranks never do, the fastest rank's: the one that would have): forward, backward up to its last gradient, optimizer, less blocking collectives (null where the collectives were not timed)"),
        C("gap_ms", F64, MS, "`step_ms_mean` − the baseline's (`local`) at the same world size, nodes and setup (same repeat): what data parallelism costs this configuration; null at world size 1, without a timeline, and for the baseline"),
        C("gap_exposed_comm_ms", F64, MS, "the part of `gap_ms` that is exposed communication not spent waiting for another rank (mean per step, as the rank that waited most in each step sees it: the waits show only from the ranks that waited)"),
        C("gap_waiting_ms", F64, MS, "the part spent waiting for the slowest rank: exposed time in which a collective was in flight only because another rank launched it later"),
        C("gap_slower_compute_ms", F64, MS, "the part from slower compute: `compute_ms` − the baseline's (hooks, copies into buckets, cores shared with communication threads)"),
        C("gap_rest_ms", F64, MS, "the part neither compute nor communication: the strategy's own work outside both (DDP copying buckets back, an optimizer wrapper)"),
        C("gap_residual_ms", F64, MS, "`gap_ms` − the four parts above: the step's difference between the slowest rank and the one that waited most (a rank held by the host's scheduler after the last transfer), less what the baseline's step holds beyond its compute (its sync phase, gaps), named, never hidden"),
        # The thresholds are harness/analysis/gap.py's LATE_*, written out: results sits below analysis.
        C("slowest_rank", I32, "", "the rank the others wait for: from at least 10 measured steps, last to launch in at least 95 % of them, late by at least 15 % of the step (and 1 ms) in the median of those (docs/statistics.md); null on a balanced run or without a timeline"),
        C("slowest_rank_late_ms", F64, MS, "how late it launched, the median over the steps it was last in (the longest any rank waited for it in a step)"),
        C("slowest_rank_share", F64, RATIO, "the share of measured steps in which it launched last"),
        C("last_rank", I32, "", "the rank that launched last in the most measured steps, named slow or not (`slowest_rank` is it where the rule holds): where none is named, the console and the run page say how near it came; null at one rank, without a timeline, or where no rank launched late"),
        C("last_rank_late_ms", F64, MS, "how late `last_rank` launched, the median over the steps it was last in"),
        C("last_rank_share", F64, RATIO, "the share of measured steps in which `last_rank` launched last"),
        C("speedup_vs_local", F64, RATIO, "`local` step time at the same world size / this step time (what data parallelism costs here; schema ≤ 3 called it overlap_efficiency)"),
        *(over_ranks(column) for column in MEMORY),
        C("parity_max_abs_diff", F64, "", "largest parameter difference from the single-process reference, in the parameters' own units (for `rpc_hybrid`, the parameter-server reference: see the README)"),
        C("parity_tolerance", F64, "", "what `parity_max_abs_diff` was allowed, at its element: the parameter dtype's atol + rtol·|reference|, plus under autocast 1e-2 (bf16; fp16 2e-3) of the parameter's largest change over the reference's steps, plus under Adam/AdamW 2·lr for each step the element's gradient was within 10·eps of zero but not 0, where none before it was beyond (harness/parity/reference.py); null where not judged or judged on updates (`rpc_hybrid`)"),
        C("parity_ok", BOOL, "", "true/false within the dtype's tolerance; null where not judged (`local`, lossy hooks), not checked, or judged on another repeat of the configuration (its first, or on one node the first whose row is not `failed`: the note says which); `rpc_hybrid` judges each parameter's update within 1e-3 of the largest expected update (fp32)"),
        C("parity_note", STR, "", "which parameter differed most, or why the verdict is null"),
        *MODEL,
        C("tokens_per_s", F64, "tokens/s", "tokens per second over all ranks: `tokens_per_batch / samples per batch × samples_per_s`"),
        C("achieved_tflops", F64, "TFLOP/s", "`flops_per_sample × samples_per_s / 10^12`"),
        C("mfu", F64, RATIO, "model FLOPs utilisation: `achieved_tflops / (dense peak TFLOP/s of one GPU × the GPUs used)` (one per rank; fewer where gloo ranks share GPUs), the peak for `dtype` (fp32: TF32's with `tf32`) from NVIDIA's datasheets (harness/config/precision.py); null where the GPU's peak is not known, and on the CPU"),
        C("first_bucket_cap_mb", F64, MIB_UNIT, "the first bucket's cap as the strategy used it (DDP's default: 1 MiB; an explicit cap caps the first bucket too, torch ≥ 2.9)"),
        C("bucket_sizes_mb", F64_LIST, MIB_UNIT, "the strategy's buckets in launch order after the measured steps (DDP's: after its rebuild; `flat`'s one flat buffer a dtype), where it has buckets"),
        C("trace_dir", STR, "", "with `--profile`: the folder of this configuration's traces (`traces/<id>/rank<N>.json`), relative to the run"),
        C("wall_s", F64, SECONDS, "the whole configuration: build, warm-up, steps, parity check"),
        C("torch_version", STR, "", "torch's version"),
        C("gpu_name", STR, "", "the GPU's name (null on the CPU)"),
        HOSTNAME,
        C("git_sha", STR, "", "ddpbench's commit, where it runs from a git checkout"),
        STARTED_AT,
        C("rpc_round_trips_per_step", F64, COUNT, "`rpc_hybrid`: RPCs a trainer makes to another process per step (forward calls to the server, the gradient messages distributed autograd sends back, the server's optimizer step), mean over trainers and measured steps; null without RPC"),
        C("rpc_bytes_per_step", F64, BYTES, "`rpc_hybrid`: tensor payload of those RPCs per trainer and step, both ways; RPC headers and pickled metadata not counted"),
    ),
)  # fmt: skip

STEPS = Table(
    "steps", "steps/<id>.parquet",
    "One row per configuration × rank × step. Phases are timed with CUDA events on GPUs, the wall clock on "
    "the CPU. For `rpc_hybrid`: forward includes the RPC to the server, backward is `dist_autograd.backward` "
    "(DDP's all-reduce and the gradient sent to the server), optimizer is `DistributedOptimizer.step`, sync "
    "the trainers' barrier after it; only trainers have steps.",
    (
        RUN_ID, CONFIG_ID, RANK,
        C("step", I32, "", "the step's index, warm-up steps included"),
        C("warmup", BOOL, "", "true for warm-up steps (kept to show warm-up effects, never counted)"),
        STEP_MS,
        C("forward_ms", F64, MS, "the forward pass and the loss (under autocast where `dtype` is not fp32); with `grad_accum` above 1, the sum over the step's micro-batches"),
        C("backward_ms", F64, MS, "`loss.backward()`, with whatever communication the strategy overlaps with it; with `grad_accum` above 1, the sum over the step's micro-batches (only the last one synchronises)"),
        C("sync_ms", F64, MS, "`sync_gradients()`: the gradient communication left after backward (DDP: none); after the last micro-batch's backward"),
        C("optimizer_ms", F64, MS, "`optimizer.step()`; in fp16 through the grad scaler, whose unscale, inf check (read on the host) and scale update it includes"),
        C("comm_ms", F64, MS, "how long at least one of the strategy's collectives was in flight in this step (null where not measured)"),
        C("exposed_comm_ms", F64, MS, "the part of `comm_ms` with no compute running (see configs/)"),
        C("exposed_backward_ms", F64, MS, "the part of `exposed_comm_ms` inside the backward phase (DDP waits for its buckets there); the rest lies in the sync phase, or in forward and optimizer as their own columns say"),
        C("exposed_forward_ms", F64, MS, "the part of `exposed_comm_ms` inside the forward phase (a broadcast of buffers; FSDP's all-gathers)"),
        C("exposed_optimizer_ms", F64, MS, "the part of `exposed_comm_ms` inside the optimizer step (ZeRO's broadcast of updated parameters)"),
        C("compute_ms", F64, MS, "how long the step computed: forward, backward up to its last gradient, optimizer, less blocking collectives (null where not timed)"),
        C("waiting_ms", F64, MS, "the part of `exposed_comm_ms` in which a collective of this rank was in flight only because another rank launched it later"),
        C("rest_ms", F64, MS, "the part of the step that was neither compute nor communication (`step_ms` = compute + exposed + rest)"),
        C("late_by_ms", F64, MS, "how much later this rank launched its collectives than the earliest rank (the most over the step's collectives; 0 for the earliest)"),
    ),
)  # fmt: skip

TIMELINE = Table(
    "timeline", "timeline/<id>.parquet",
    "The bucket timeline: one row per collective × rank × step, as the strategy launched it (for `stock` "
    "and `zero` through a DDP communication hook that does what DDP's built-in all-reduce does; `bucketed` "
    "from its own reducer; `naive` and `flat` around their blocking calls; `fsdp` through FSDP2's custom collectives, torch ≥ 2.8). Times are ms from the step's "
    "start on that rank (the phases' clock: CUDA events on GPUs, the wall clock on the CPU).",
    (
        RUN_ID, CONFIG_ID, RANK,
        C("step", I32, "", "the step's index, warm-up steps included"),
        C("warmup", BOOL, "", "true for warm-up steps"),
        C("bucket", I32, "", "the strategy's index of what travelled (a bucket, a flat group, a parameter), in launch order"),
        C("collective", STR, "", "`all_reduce`, FSDP's `all_gather` and `reduce_scatter`, `powersgd` (PowerSGD's chain of all-reduces for one bucket, one row), or a broadcast the step waits for: `broadcast_buffers` (before forward, bucket -1), `broadcast_parameters` (ZeRO's, after its optimizer step, bucket -2), or `unused_mask` (bucketed's all-reduce of which parameters had a gradient on some rank, with `find_unused_parameters`, after its buckets, bucket -3; DDP's own is inside its reducer, untimed)"),
        C("bytes", I64, BYTES, "what travelled: the bucket's size (fp16/bf16 hooks: half of it; PowerSGD: its uncompressed tensors, P and Q)"),
        C("ready_ms", F64, MS, "when its last gradient was in (DDP: when it called the hook)"),
        C("launched_ms", F64, MS, "when the collective was launched"),
        C("done_ms", F64, MS, "when it completed (CPU: the backend's completion callback; GPU: an event that waits for it)"),
        C("blocking", BOOL, "", "the caller waited for it (naive, flat; FSDP on the CPU): no compute ran on that thread or compute stream meanwhile"),
    ),
)  # fmt: skip

RANKS = Table(
    "ranks", "ranks/<id>.parquet",
    "One row per configuration × rank: this rank's memory (a rank-0 skew shows here).",
    (
        RUN_ID, CONFIG_ID, RANK,
        C("status", STR, "", "how the configuration went on this rank (`stopped`: its launch was ended because another rank failed)"),
        *MEMORY,
        C("wall_s", F64, SECONDS, "this rank's time for the whole configuration"),
        C("role", STR, "", "`trainer`, or `parameter_server` for `rpc_hybrid`'s last rank (its memory is the table's)"),
    ),
)  # fmt: skip

RUN_TABLES = {t.name: t for t in (CONFIGS, STEPS, RANKS, TIMELINE)}
"""The per-configuration tables; the run's other tables are harness.results.dictionary.model_columns'."""

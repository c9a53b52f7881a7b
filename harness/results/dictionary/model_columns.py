"""The column dictionary, continued: the tables beside a run's configurations (the sweep's
recommendations, `ddpbench collectives`' measurements, the gradient-ready profiles, the performance
model's predictions and floor). `TABLES` is every table of a run folder, these and columns.RUN_TABLES.
"""

# ruff: noqa: E501 (one column per line, its meaning included: the file reads as the table it declares)

from __future__ import annotations

from harness.results.dictionary.columns import (
    BACKEND,
    BATCH_SIZE,
    BUCKET_CAP_MB,
    CONFIG_ID,
    DEVICE,
    DTYPE,
    GRAD_ACCUM,
    GRAD_BYTES,
    HOSTNAME,
    IMPL,
    NETWORK,
    NNODES,
    OPTIMIZER,
    RUN_ID,
    RUN_TABLES,
    SIZE,
    STARTED_AT,
    THREADS,
    WORKLOAD,
    WORLD_SIZE,
    C,
)
from harness.results.dictionary.kinds import (
    BOOL,
    BYTES,
    COUNT,
    F64,
    I32,
    I64,
    MIB_UNIT,
    MS,
    RATIO,
    STR,
    US,
    Table,
)

RECOMMENDATIONS = Table(
    "recommendations", "recommendations.parquet",
    "After a bucket-cap sweep: one row per strategy × setup × world size measured at two or more caps "
    "(rewritten after a resume).",
    (
        RUN_ID, IMPL,
        C("other_options", STR, "", "the strategy's options other than `bucket_cap_mb`, as JSON text"),
        WORKLOAD, SIZE, BATCH_SIZE, GRAD_ACCUM, DTYPE, OPTIMIZER, WORLD_SIZE, NNODES,
        C("caps_mb", STR, MIB_UNIT, "the caps measured, a JSON list"),
        C("decision", STR, "", "`recommend` (the best cap beats the 25 MiB cap significantly and by at least 5 %, as `compare` judges, or every other cap when 25 was not measured; or 25 MiB itself, when it beats every other cap), `flat` (any of `equivalent_caps_mb`), or `too few repeats to tell` (docs/statistics.md); none at world size 1 or for `local`"),
        C("best_cap_mb", F64, MIB_UNIT, "the cap with the fastest step (of a point of several caps, `one_layout_caps_mb`, the cap that names it): per repeat the median step (the slowest rank per step; a point's, the geometric mean of its caps' medians in that launch), then the geometric mean over repeats"),
        C("best_step_ms", F64, MS, "that geometric mean of its repeats' medians (where every cap made the same buckets, `same_buckets_mb`, of their one point: each launch the geometric mean of its caps' medians)"),
        C("best_ci_low_ms", F64, MS, "its 95 % interval over repeats (t on the logs): low end; null with one repeat"),
        C("best_ci_high_ms", F64, MS, "high end"),
        C("equivalent_caps_mb", STR, MIB_UNIT, "the caps the best does not beat significantly by at least 5 % over repeats, the best included, a JSON list; every cap when too few repeats (the t test is `paired`'s)"),
        C("paired", BOOL, "", "whether each cap was judged against the best launch by launch (the t test of the per-launch log ratios): every cap ran once in each of the same repeats, 8 or more (`stats.PAIRED_FROM`); false: as independent sets (Welch's t). Null: written before pairing"),
        C("gain_vs_default", F64, RATIO, "`step at bucket_cap_mb=25 / best − 1`: the 25 MiB cap given explicitly like every cap of the sweep (on torch ≥ 2.9 its first bucket is 25 MiB: not DDP's default layout, which is never pooled with it); null when 25 was not measured, or where every cap made the same buckets (one program: no ratio between them)"),
        C("gain_low", F64, RATIO, "`gain_vs_default`'s interval over repeats at `confidence` (from the best cap's verdict against 25 MiB, launch by launch where `paired`): low end; null where 25 MiB is the best, was not measured, or has one repeat"),
        C("gain_high", F64, RATIO, "high end: at most what moving from 25 MiB to the best cap wins, at that confidence (that cap's interval, not a bound over every cap)"),
        C("next_cap_mb", F64, MIB_UNIT, "the point closest behind the best (named by its cap as `best_cap_mb` is); null where the sweep has one point"),
        C("next_gain", F64, RATIO, "`its step / best − 1`: how far the next point is behind (the console and the page say it where 25 MiB is the best, which `gain_vs_default` cannot); null where the sweep has one point"),
        C("next_gain_low", F64, RATIO, "`next_gain`'s interval over repeats at `confidence` (from its verdict against the best): low end; null with one repeat"),
        C("next_gain_high", F64, RATIO, "high end"),
        C("confidence", F64, RATIO, "the confidence of every verdict's interval here and of the gain's: 0.95 for one look, higher under `--repeats auto` (its looks are paid for: docs/statistics.md); null: written before it was recorded"),
        C("repeats", I32, COUNT, "the fewest repeats of any cap: the evidence behind the decision"),
        C("repeats_needed", I32, COUNT, "about how many repeats per cap decide at a 5 % threshold: the most any verdict the decision rests on needs, from the repeats' spread and the ratio seen; null where every cap made the same buckets (one measurement: no repeat tells them apart)"),
        C("same_buckets_mb", STR, MIB_UNIT, "the one bucket layout every cap made in every repeat (a JSON list, launch order), where they all made the same: the caps are then one measurement and the decision is `flat` whatever the repeats say; null where the layouts differ or were not recorded"),
        C("one_layout_caps_mb", STR, MIB_UNIT, "the caps (as typed) that made one bucket layout in every launch, pooled as one point of the sweep (per launch the geometric mean of their medians; the point named by 25 where it is one of them, else by the smallest, in `best_cap_mb`, `next_cap_mb`, `equivalent_caps_mb` lists them all), a JSON list of lists; null where no two caps did (or every cap did: `same_buckets_mb`)"),
        C("noise", STR, "", "the caps whose steps are noisy (CV > 0.1), whose repeats disagree (medians > 10 % apart) or whose steps drift within the window, and why; empty when none"),
    ),
    later=frozenset({"run_id"}),  # files written before it read it from their folder's name
)  # fmt: skip

COLLECTIVES = Table(
    "collectives", "collectives/w<N>.parquet",
    "`ddpbench collectives`: one file per world size, with its provenance in the run's `run.json` "
    "(`\"kind\": \"collectives\"`, environment, command line). One row per collective × message size, "
    "nccl-tests style.",
    (
        RUN_ID,
        C("op", STR, "", "the collective: `all_reduce`, `all_gather`, `reduce_scatter`, `broadcast`"),
        WORLD_SIZE,
        NNODES,  # above 1 the rows measure the network between nodes; null in runs made before them (one node)
        C("bytes", I64, BYTES, "the whole message: all_gather's output, reduce_scatter's input"),
        C("dtype", STR, "", "the message's element type (float32)"),
        C("iters", I32, COUNT, "timed iterations per batch, queued back to back (nccl-tests' -n)"),
        C("batches", I32, COUNT, "timed batches (each after a barrier, with one synchronize); null: written before batches, when every iteration was synchronised alone"),
        C("warmup", I32, COUNT, "warm-up iterations before them"),
        C("time_us", F64, US, "per iteration: per batch the slowest rank's mean (its batch between two CUDA events on GPUs, the wall clock on the CPU, divided by `iters`), the median over batches (older runs: over iterations each ended by a sync)"),
        C("time_us_p10", F64, US, "10th percentile of the same, over batches"),
        C("time_us_p90", F64, US, "90th percentile of the same, over batches"),
        C("algbw_gbps", F64, "GB/s (10^9 bytes/s)", "`bytes / time_us`"),
        C("busbw_gbps", F64, "GB/s (10^9 bytes/s)", "`algbw × factor`: all_reduce 2(n−1)/n, all_gather and reduce_scatter (n−1)/n, broadcast 1"),
        C("correct", BOOL, "", "after timing, a fresh run's result matched the expected rank-dependent values on every rank"),
        DEVICE, BACKEND, THREADS, HOSTNAME, STARTED_AT,
    ),
    later=frozenset({"nnodes"}),
)  # fmt: skip

CONTENTION = Table(
    "contention", "contention/w<N>.parquet",
    "An 8 MiB all-reduce and a compute burst (one linear layer's product and activation over and over: a 4 MiB weight streamed from memory), each timed alone, then overlapped, back to back in each of 11 repeats, on the same "
    "rank (the all-reduce launched asynchronously; on the CPU the burst polls it between pieces, on GPUs both "
    "are timed with CUDA events from one start); a 4 KiB all-reduce, all latency, alone and during the burst too. Older runs "
    "kept these as `collectives/contention-w<N>.parquet`; they are still read.",
    (
        RUN_ID, WORLD_SIZE,
        C("bytes", I64, BYTES, "the all-reduce's message"),
        C("compute_alone_ms", F64, MS, "the burst alone"),
        C("compute_overlapped_ms", F64, MS, "the burst while the all-reduce was in flight"),
        C("comm_alone_ms", F64, MS, "the all-reduce alone"),
        C("comm_overlapped_ms", F64, MS, "the all-reduce while the burst ran"),
        C("compute_slowdown", F64, RATIO, "how much slower compute runs while an all-reduce is in flight (per repeat, the burst's extra time spread over the all-reduce's duration; the median over repeats, the mean over ranks; ≥ 1)"),
        C("comm_slowdown", F64, RATIO, "per repeat, the all-reduce overlapped over alone; the median over repeats, the mean over ranks (≥ 1)"),
        C("compute_slowdown_at_least", BOOL, "", "true where `compute_slowdown` is not measured but a lower bound: in half the repeats or more (on any rank) the compute the burst did during the all-reduce (its time less the burst's extra time) was no more than the burst's own spread alone over the repeats (a loaded machine; a burst that lost as long as the all-reduce lasted), so the ratio's denominator is taken at that spread; null in runs made before"),
        DEVICE, BACKEND, THREADS, HOSTNAME,
        C("latency_alone_ms", F64, MS, "a 4 KiB all-reduce (all latency) alone"),
        C("latency_overlapped_ms", F64, MS, "the 4 KiB all-reduce while the burst ran (on the CPU seen between the burst's pieces: to about 1 ms)"),
        C("latency_slowdown", F64, RATIO, "per repeat, the 4 KiB all-reduce overlapped over alone; the median over repeats, the mean over ranks (≥ 1): what each call's latency pays while compute runs (null in runs made before it was measured)"),
    ),
    later=frozenset({"latency_alone_ms", "latency_overlapped_ms", "latency_slowdown", "compute_slowdown_at_least"}),
)  # fmt: skip

GRADPROFILE = Table(
    "gradprofile", "gradprofile/<workload>-<size>-b<batch>-<dtype>-<optimizer>.parquet",
    "Written by a bench run after its first configuration of each workload setup at world size 1 (or by "
    "`ddpbench predict`): one row per parameter, in `model.parameters()` order, shared ones once.",
    (
        RUN_ID, WORKLOAD, SIZE, BATCH_SIZE, DTYPE, OPTIMIZER, DEVICE, THREADS,
        C("param_index", I32, "", "registration order (`model.parameters()`, shared parameters once)"),
        C("param_name", STR, "", "the parameter's name"),
        C("numel", I64, COUNT, "its elements"),
        C("bytes", I64, BYTES, "its gradient's size"),
        C("param_dtype", STR, "", "its dtype"),
        C("requires_grad", BOOL, "", "whether it gets a gradient"),
        C("ready_ms", F64, MS, "median over the profiled steps of when its gradient was accumulated, after backward began (post-accumulate-grad hook; CUDA events on GPUs)"),
        C("used_ms", F64, MS, "median over the profiled steps of when forward first ran a module holding it, after forward began (forward pre-hook); null where no module's forward uses it"),
        C("block", I32, "", "index of the model's block holding it (the units `fsdp` shards one by one, in the model's order); null for the root's (embeddings, heads, tied weights)"),
        C("forward_ms", F64, MS, "the profiled steps' median forward, on every row"),
        C("backward_ms", F64, MS, "their median backward, on every row"),
        C("optimizer_ms", F64, MS, "their median optimizer step, on every row"),
        C("steps", I32, COUNT, "profiled steps (after warm-up)"),
    ),
    later=frozenset({"used_ms", "block"}),
)  # fmt: skip

PREDICTIONS = Table(
    "predictions", "predictions.parquet",
    "The step-time model against the run's bucket sweeps (`ddpbench predict`, `ddpbench report`): per `stock` "
    "bucket-cap configuration at world size ≥ 2 (repeats pooled) with a profile and a network.",
    (
        RUN_ID, WORKLOAD, SIZE, IMPL, WORLD_SIZE, BUCKET_CAP_MB,
        C("measured_ms", F64, MS, "geometric mean over repeats of `step_ms_median` (as the run page ranks and the sweep decides)"),
        C("predicted_raw_ms", F64, MS, "the simulated DDP schedule on the world-size-1 profile as measured, without contention"),
        C("predicted_raw_contention_ms", F64, MS, "the profile as measured with the collectives run's contention: nothing from the run's own configurations (null where no contention was measured)"),
        C("predicted_ms", F64, MS, "the same, calibrated on the run's own configurations at world size 1 (nothing communicated), without contention; its compute slowed by `shared_cores_scale` where set (the raw columns never are)"),
        C("predicted_contention_ms", F64, MS, "calibrated, with the measured contention (null where none was measured); slowed as `predicted_ms` is"),
        C("compute_scale", F64, RATIO, "`local` step at world size 1 (`stock`'s where the run has no `local` row there) / the profile's step: the profile scaled to the step timed over every repeat"),
        C("reducer_ms", F64, MS, "DDP's own cost with nothing to communicate: median `stock` (every cap) − `local` at world size 1, added to backward"),
        C("buckets", I32, COUNT, "buckets in the simulated assignment"),
        NETWORK,
        C("shared_cores_scale", F64, RATIO, "where the world size's ranks outnumber the run's cores (run.json's `usable_cpus`): how much slower each rank's compute is priced in `predicted_ms` and `predicted_contention_ms`, as `predict --run` prices it (the run's `local` step at its largest world size ≥ 2 over its one-rank step, times the further ranks per core, never below ranks / cores; without such a step, ranks / cores alone, a floor); null at a rank to a core"),
    ),
    later=frozenset({"run_id", "shared_cores_scale"}),
)  # fmt: skip

FLOOR = Table(
    "floor", "floor.parquet",
    "Each configuration's communication floor (written with `predictions.parquet`), where it has one: strategies "
    "that all-reduce their whole gradient and update every parameter on every rank; none for `local`, "
    "`dataparallel`, `rpc_hybrid`, a PowerSGD hook, nor `zero` and `fsdp` (each rank updates 1/n of the "
    "parameters, so `local_ms` bounds nothing).",
    (
        RUN_ID, CONFIG_ID, WORLD_SIZE, GRAD_BYTES,
        C("allreduce_ms", F64, MS, "one all-reduce of the bytes the configuration sends at the network's α and bus bandwidth: `grad_bytes`; 2 bytes an element under an fp16/bf16 hook"),
        C("local_ms", F64, MS, "`local` (no communication) step time at the same world size and setup"),
        C("floor_ms", F64, MS, "`max(local_ms, allreduce_ms)`: a measured bound (it computes at least the local step and sends at least those bytes), with local's noise and the fit's: a step can come out below it by chance, and the run page names any that does"),
        C("step_ms", F64, MS, "the configuration's measured step time"),
        NETWORK,
    ),
    later=frozenset({"run_id"}),  # files written before it read it from their folder's name
)  # fmt: skip

TABLES = {**RUN_TABLES, **{t.name: t for t in (RECOMMENDATIONS, COLLECTIVES, CONTENTION, GRADPROFILE,
                                             PREDICTIONS, FLOOR)}}  # fmt: skip

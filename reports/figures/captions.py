"""What each figure of the run page shows, in words: its caption (one per figure), and the rules it quotes.

A caption is a promise about the figure above it (what a bar, a line or a whisker measures, over which window),
so it lives in one place, next to the rule words the page's tables use too.
"""

from __future__ import annotations

from harness.analysis import agreement, stats
from reports import step_series
from reports.figures import timeline

BEATS_REFERENCE = (
    f"beats the {stats.REFERENCE_CAP_MB:g} MiB cap significantly and by at least {stats.DEFAULT_THRESHOLD * 100:g} %"
)
"""The recommended cap's rule (sweep.recommend_cap: stats.verdict's 'faster' against the 25 MiB cap), in words."""
OR_REFERENCE_ITSELF = f"(or {stats.REFERENCE_CAP_MB:g} MiB itself, when it beats every other cap)"
"""The rule's other half: when the 25 MiB cap is the fastest, recommend_cap judges it against every other cap."""
NOT_BEATEN = f"that its best does not beat significantly and by {stats.DEFAULT_THRESHOLD * 100:g} % or more"
"""What 'as good' caps are (sweep.recommend_cap's equivalent_caps_mb: the caps its verdict does not call slower)."""

CAPTIONS = {
    "step_time": "Shorter bars are faster: compare strategies within a world size, and each against local "
    "(no communication); a hatched bar marked PARITY FAILED trained wrongly.",
    "step_whiskers": " Whiskers span the steps' p10–p90.",
    "throughput": "Taller is better: samples per second over all ranks, counted over the measured window's wall "
    "time (the steps and what runs between them: zeroing gradients, making the batch); at equal world size it "
    "ranks as step time does unless a strategy spends more between its steps, across world sizes it shows what "
    "adding ranks buys.",
    "throughput_pooled": " With repeats, each bar is the geometric mean of the strategy's repeats' throughputs over "
    "their measured windows (the answer's and the table's samples/s are from the median step instead, without what "
    "runs between steps), and each dot is one repeat.",
    "scaling": "Lines near the dashed ideal (1.0) scale well: each point is throughput at n ranks over n times "
    "the throughput at one rank, both from the median step (as the answer's and the sentence's, not over the measured "
    "window as the throughput bars: a point need not be the ratio of two bars), with the batch per rank fixed (weak "
    "scaling) — one rank of local (one process "
    "that communicates nothing, so each strategy's own cost at one rank counts and the lines order as the step "
    "times do) where the run has one, else the strategy's own (the axis says which; the hover gives the other).",
    "sweep": "Step time against the cap, one line per world size through each cap's centre over its repeats (the "
    "geometric mean of the repeats' median steps, as the verdict below pools them), whiskers its 95% interval over "
    "repeats (none with one repeat; the axis reaches at most about twice the slowest point, and a whisker that runs "
    "past it is cut at its top, marked by an arrow, and given whole in the hover). A star marks a cap the "
    "recommendation below names, at the recommendation's own "
    f"figure: one that {BEATS_REFERENCE} over repeats {OR_REFERENCE_ITSELF}. No star: the optimum is flat, or the "
    "repeats were too few to tell (the table says which).",
    "floor": "Each bar is a configuration's median step; its black tick is the floor max(local step, one all-reduce "
    "of the bytes it sends at the measured latency and bus bandwidth: every gradient byte, half under an fp16/bf16 "
    "hook), where local's step is the geometric mean of its repeats' medians. Both parts are measured, so the floor "
    "is a measured bound with its own noise, not an exact one: a bar can come out below it by chance (a note under "
    "the figure names any), and the gap above it is roughly what better overlap could still win. Where local was "
    "not measured at that world size, the "
    "tick is the all-reduce alone. Strategies that do not all-reduce their whole gradient (PowerSGD, rpc_hybrid, "
    "DataParallel) have no floor and are not shown, nor do those that shard the optimizer (zero, fsdp: each rank "
    "updates 1/n of the parameters, so the local step bounds nothing).",
    "model": "The black line is stock's measured step per cap (the geometric mean of its repeats' median steps, "
    "as the answer ranks); the others are ddpbench predict's simulation of DDP's buckets over the "
    "run's gradient-ready profile and the measured network: dotted on the profile as measured, dashed calibrated "
    "on the run's own steps at one rank, where nothing is communicated (local's step, DDP's own cost), and with the "
    "measured compute/communication contention. The legend gives each curve's MAPE and best cap (several where "
    f"they tie within {agreement.TIE_TOLERANCE:.1%}).",
    "gap": "Each bar is one configuration's cost over local at the same world size (its mean step on the slowest "
    "rank less local's), split into parts that are each measured: communication no compute hid, the part of it "
    "spent waiting for a rank that launched later, compute slower than local's (below zero where faster), time "
    "neither computing nor communicating (the strategy's own work), and the residual, what local's own step holds "
    "beyond its compute. They add up to the gap (the black tick). Only configurations whose collectives were timed: "
    "every strategy's but stock's and zero's, which are timed with --bucket-timeline.",
    "breakdown": "Each bar is one configuration's mean step on its slowest rank (the rank with the longest mean "
    "step, named under its bar; measured steps only), split into the mean of each segment over those steps: the "
    "segments add up to that mean step, which can differ from the median step the answer ranks by. Ranks that wait "
    "for each other in every step end their steps nearly together, so where one rank is slow the rank drawn may be "
    "it (more compute) or one that waits for it (more red): the sentences below name a late rank where the run "
    "shows one. The red segment is measured communication that no compute hid (mean per step), taken out of the "
    "phase it fell in (DDP waits for its buckets inside backward; naive, flat and bucketed in sync; FSDP's "
    "all-gathers and a broadcast of buffers in forward; ZeRO's broadcast of parameters in the optimizer step). "
    "Where communication was not timed (stock and zero without "
    "--bucket-timeline) there is no red segment and backward or sync include it.",
    "exposed": "Left: the mean per step (over measured steps and ranks, not a median) of how long the strategy's "
    "collectives were in flight (outline) and of the part of it with no compute running (filled), both measured "
    "from the bucket timeline. Right: the share hidden, 1 − Σ not hidden / Σ in flight (naive and flat communicate "
    "after backward by design: 0; a strategy with a single bucket hides none either).",
    "timeline": "One ordinary step (rank 0's median step): each rank's phases on a row of its own, rank 0's "
    "first, then each bucket's collective (an all-reduce; FSDP's all-gathers and reduce-scatters; the broadcasts of "
    "buffers before forward and of ZeRO's parameters after its step; bucketed's mask of used parameters with "
    "find_unused_parameters) from launch to completion. The phases' row "
    "draws in red when a collective was in flight and no compute ran (communication not hidden, taken out of the "
    "phase it fell in as the stacked bars take it: DDP waits for its last buckets inside backward), so a bucket over "
    "the orange backward is hidden, and one over the red is not. A grey bar before a bucket spans from when it was "
    "ready to its launch, where it had to wait for an earlier bucket (buckets launch in order). A step of more than "
    f"{timeline.MAX_BUCKET_ROWS} collectives (one per parameter) has them all in one row a rank, each at its own "
    f"time. Every rank is drawn up to {timeline.MAX_RANKS_DRAWN}; above, rank 0 and the one whose collectives were "
    "longest in flight. In each bucket's row a lane per rank, rank 0's on top, each rank on its own step's clock: "
    "a bucket in flight far longer in one rank's lane than in rank 0's waited there for another rank's launch.",
    "memory": "Bars side by side are the ranks of one configuration: a taller rank 0 is a rank-0 skew. "
    "Panels without data were not measurable on this machine (null, never 0).",
    "memory_shared": " Ranks shared a GPU here: its device peak (NVML) is the whole GPU's, every rank on it "
    "counted, so each rank's own peak (its process's, NVML) is the panel to read per rank.",
    "frontier": "Lower-left is better; both axes start at zero, so small differences look small. Compare points "
    "of one colour (one world size); points of one colour drawn on each other share a label, the leftmost "
    "point's (hover names each).",
    "held": "Sizes of the tensors each rank holds after its last step: a sharded strategy's bars shrink with "
    "the world size where a replicated one's stay put. Buffers (DDP buckets, FSDP gathers) are not included.",
    "memory_cpu": "On the CPU only the process's peak RSS is measured (GPU panels are absent, not zero); "
    "bars side by side are the ranks of one configuration, so a rank-0 skew shows.",
    "distribution": "Narrow boxes are steady: quartiles of the measured slowest-rank step times, whiskers "
    "min–max; drawn from precomputed quartiles, not raw points.",
    "series": "Look for a flat line after the hollow circles (warm-up steps, not counted): a slope is drift. "
    f"Series with more than {step_series.MAX_SERIES_POINTS} measured steps show the median of each bin.",
    "noise": f"Red bars (cv above {stats.NOISY_CV:g}, dashed) are noisy: their medians differ by chance more "
    "than usual; rerun them with more steps before trusting small differences.",
    # the what-if page's
    "whatif_caps": "Each line is one bucket_cap_mb; each point DDP's bucket schedule simulated over this run's "
    "gradient-ready profile, every bucket's all-reduce costed as NCCL would run it.",
    "whatif_strategies": "Each modelled strategy's predicted step at the cap DDP's answer names (solid), and the floor "
    "the full size's parameters put under it (dotted, where the profile is a smaller size's): the choice ranks each "
    "by the higher of the two (ZeRO-1 by its floor, its prediction sharding the smaller model), among what fits.",
    "whatif_efficiency": "Scaling efficiency = the one-GPU step the note above names / the predicted step with the cap "
    "the answer names at that GPU count (its label).",
    "whatif_communication": "Each line is the milliseconds a strategy's collectives take a step on the cluster's "
    "network, as NCCL's algorithms run them: the bytes and the network alone. How much of it a step shows depends on "
    "the GPU's compute, which the run did not measure.",
}


POOLED = (
    " With repeats, each bar is the geometric mean of the strategy's repeats' medians (the answer's figure),"
    " its whiskers span the lowest to the highest repeat, and each dot is one repeat."
)
"""The step-time caption's addition where a run has repeats (strategies.pooled_repeats); the throughput's is
CAPTIONS["throughput_pooled"]: its bars pool the window's throughput, not medians."""
ONE_REPEAT_EACH = (
    " With repeats, this figure and every later one of a bar, box or row per configuration draw each"
    " configuration's median repeat: the launch whose median step is the median of its repeats' (the lower middle"
    " of an even count), unless its caption names another."
)
"""Said once a page, on the first per-configuration figure drawn (FigureList.add's `once`; aggregate.typical_repeats):
the later ones are the timeline, the distributions and the series; the gap, floor, memory and noise figures,
which draw another, say which."""
FLOOR_REPEATS = (
    " With repeats, each bar is the geometric mean of the configuration's repeats' median steps (the answer's figure,"
    " pooled as local's in the tick), its whiskers the lowest and highest repeat."
)
MEMORY_REPEATS = (
    " With repeats, this figure and the memory figures after it draw each configuration's repeat with the highest"
    " peak: the one to plan for, as the sentence above says."
)
"""Said once a page (FigureList.add's `once`); takeaways.memory's sentence says that each of its figures is the highest
of the strategy's repeats, the one to plan for (the caption once pointed at a sentence that did not say so)."""
NOISE_REPEATS = (
    " With repeats, each bar is the median CV over the configuration's repeats, as the answer's noise column."
)
SCALING_REPEATS = " With repeats each point is pooled over them, as the sentence above."
COMM_POOLED = (
    " With repeats, this figure pools them, as the sentence above and the answer's 'comm. hidden': each bar the mean of"
    " the repeats' per-step means, each share 1 − Σ not hidden / Σ in flight over them."
)
GAP_REPEATS = (
    " With repeats, each configuration is drawn from its median repeat by step time, the launch the step-time"
    " figures draw, as in the sentences below, and from every repeat where a slow rank was named."
)

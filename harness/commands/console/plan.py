"""What a `bench` run says before it launches anything: where it runs (the device, the cores, the precision),
its warm-up, a strategy that will save nothing, and its configurations (`--dry-run` lists each and stops there)."""

from __future__ import annotations

from harness.commands.console import say, seconds_text, warning
from harness.commands.console.forecast import Auto, minutes_text, say_forecast, steps_floor
from harness.commands.console.invoked import ddpbench_command
from harness.commands.console.profiling import warn_if_busy
from harness.config.ranks import available_cpus
from harness.results.values import counted


def say_plan(
    plan, *, requested_dtype: str, grows: bool = False, dry: bool = False, auto: Auto | None = None, expand=None
) -> None:
    """The device, the precision, and the run's first configurations (`grows`: --repeats auto may add rounds, up to
    `auto`'s bounds; `dry`: --dry-run's plan, every configuration listed and nothing made, and its time forecast;
    `expand(impls)`: the plan with other strategies, which a forecast past --budget narrows to)."""
    busy = ("the ranks share its cores with whatever else runs, so their steps read slower and noisier than on a quiet "
            "machine; run when it is quiet")  # fmt: skip
    if not plan.configurations:  # a resume that goes on deciding: its line said which verdicts, at which world sizes
        if plan.device == "cpu":
            warn_if_busy(busy)
        return
    worlds = sorted({c.world_size for c in plan.configurations})
    if plan.device == "cpu":
        say(f"ddpbench: no GPU in use: running on the CPU with the gloo backend, one process per simulated "
            f"GPU ({counted(plan.threads_per_rank, 'thread')} each), world sizes {worlds}")  # fmt: skip
        ranks, cores = (
            max((c.world_size // c.nnodes + c.extra_ranks for c in plan.configurations), default=0),
            available_cpus(),
        )
        if ranks > cores:
            warning(f"{ranks} ranks per node on {counted(cores, 'CPU core')}: ranks take turns on the cores, "
                    "so the larger world sizes' steps include waiting (report: 'Cores shared')")  # fmt: skip
        warn_if_busy(busy)
    else:
        backend = plan.configurations[0].backend.upper() if plan.configurations else "?"
        say(f"ddpbench: running on CUDA with {backend}, world sizes {worlds}")
    say(f"ddpbench: precision: {_precision_line(plan.configurations, requested_dtype)}")
    if plan.device == "cpu":
        warn_slow_half(plan.configurations, threads=plan.threads_per_rank)
    say_warmup(plan.configurations)
    warn_nothing_to_shard(plan.configurations)
    if plan.device == "cpu":
        warn_beyond_host_memory(plan.configurations)
        if not dry:
            warn_long_full_size(plan.configurations, threads=plan.threads_per_rank)
    count = len(plan.configurations)
    deciding = grows and any(c.repeated for c in plan.configurations)  # something to decide: rounds may follow
    more = ", to start (--repeats auto adds the repeats its open verdicts need)" if deciding else ""
    if dry:
        _list_planned(plan.configurations, more)
        say_forecast(plan.configurations, plan.run, threads=plan.threads_per_rank, auto=auto if grows else None,
                     expand=expand)  # fmt: skip
        return
    say(f"ddpbench: run {plan.run_id}: {count} configuration{'s' if count != 1 else ''}{more} -> {plan.run}/")
    if deciding and auto is not None and auto.budget_s is not None:  # first two repeats past it: said at the start
        say_forecast(plan.configurations, plan.run.parent, threads=plan.threads_per_rank, auto=auto, dry=False)


def say_nodes_wait(nnodes: int, endpoint: str, run_id: str, *, timeout_s: float | None) -> None:
    """Several nodes: torchrun's rendezvous says nothing while it waits, and this node gives up after the
    supervisor's startup limit or torchrun's join timeout, whichever comes first."""
    from harness.launch.supervise import startup_limit_s

    gives_up = seconds_text(startup_limit_s(timeout_s))
    say(f"ddpbench: waiting for {nnodes} nodes at {endpoint} … (each node runs the same command with --run-id "
        f"{run_id}; this node gives up after {gives_up} without them)")  # fmt: skip


def say_warmup(configurations) -> None:
    """Where strategies warm up for different numbers of steps, which and why; a warning where --warmup
    leaves a strategy fewer than it needs on the device (its first measured steps are not steady)."""
    from harness.config.grid import warmup_needed

    steps = {(c.impl, c.device): c.warmup for c in configurations}
    if len(set(steps.values())) > 1:
        common = min(steps.values())
        more = ", ".join(f"{impl} {warmup}" for (impl, _), warmup in steps.items() if warmup > common)
        listing = f"`{ddpbench_command()} list`"  # as invoked: pasted into this shell, it runs
        say(f"ddpbench: warm-up: {common} steps; {more} (what they need on the device: {listing})")
    for (impl, device), warmup in steps.items():
        if warmup < (need := warmup_needed(impl, device)):
            warning(f"--warmup {warmup}: {impl} needs {need} warm-up steps on {device} before its "
                    f"steps are steady; its first {need - warmup} measured steps are not (leave --warmup "
                    "out)")  # fmt: skip


SLOW_HALF = 2.0
"""A CPU whose bf16 or fp16 matmul runs this many times slower than its fp32 one (emulated: no such instructions) is
said to."""
SLOW_HALF_SIZE = 256
"""The one size both dtypes' matmuls are timed at for that ratio (the forecast's probe grows each its own way)."""


def warn_slow_half(configurations, *, threads: int) -> None:
    """A CPU run in bf16 or fp16 where this CPU computes that dtype far slower than fp32, measured now by a matmul of
    each at SLOW_HALF_SIZE² (a walkthrough's convnext_tiny bf16 run: 784 s of steps unforecast): its steps time the
    emulation. What predict takes from a half-precision run, the activations in it, it counts itself from a --dtype
    auto run for a GPU that trains in it (docs/your-model.md)."""
    from harness.measure.pace import cpu_flops_per_s

    for half in dict.fromkeys(c.dtype for c in configurations if c.dtype in ("bf16", "fp16")):
        fp32, rate = (cpu_flops_per_s(threads, dtype, SLOW_HALF_SIZE) for dtype in ("fp32", half))
        if rate * SLOW_HALF <= fp32:
            warning(f"--dtype {half}: this CPU computes {half} {fp32 / rate:.0f}× slower than fp32 (a "
                    f"{SLOW_HALF_SIZE}² matmul at {rate / 1e9:.2g} against {fp32 / 1e9:.3g} GFLOP/s, timed now): the "
                    f"steps time its emulation, no GPU's {half}; --dtype auto runs fp32 here, and predict counts a "
                    f"GPU's {half} activations from it")  # fmt: skip


def warn_nothing_to_shard(configurations) -> None:
    """ZeRO-1 shards only the optimizer's state, and SGD without momentum (ddpbench's sgd) keeps none: such rows
    pay for the sharding's communication with no memory to save (roles.shards_nothing_words, as the pages say it)."""
    import pandas as pd

    from harness.analysis import roles

    rows = pd.DataFrame([{"impl": c.impl, "optimizer": c.optimizer} for c in configurations])
    if said := roles.shards_nothing_words(rows):
        warning(said)


def warn_beyond_host_memory(configurations) -> None:
    """On the CPU every rank of a node holds its model in the host's memory: where a model's DDP rank (its
    parameters, gradients, buckets, Adam's moments where it steps with Adam, and the activations its forward keeps,
    counted on the meta device: no memory, no time) times the node's ranks exceeds what the host has available,
    say so before the ranks are killed for it (a walkthrough's --size full of hf:llama listed 8 configurations of
    ranks that each needed about 150 GiB, on 23 GiB). The full size, a model of yours, which --size does not scale
    (a walkthrough's 1.3B-parameter file at the default size was not warned about), and any size whose --wopt
    options may enlarge it (hf:llama tiny with hidden_size=2048 and 24 layers is 1.3B parameters, 72 GiB a rank):
    the smaller sizes, without options, are sized for the machine."""
    judged = [c for c in configurations if _may_be_large(c)]
    available = available_bytes() if judged else None
    if available is None:
        return
    from harness.measure import meta_counts  # counted once per model and kept (the user's cache), only where judged

    seen: set[str] = set()
    for cfg in sorted(judged, key=lambda c: -c.world_size):
        if cfg.workload in seen:
            continue  # its largest world size, the most ranks a node runs, is the one judged
        seen.add(cfg.workload)
        spec = cfg.workload_spec or cfg.workload  # as cfg.make_workload() builds it
        counts = meta_counts.counts(spec, cfg.size, cfg.workload_options, batch_size=cfg.batch_size, dtype=cfg.dtype)
        if counts is None:
            continue
        rank, parts = ddp_rank_bytes(counts, cfg.optimizer)
        ranks = cfg.world_size // cfg.nnodes
        if rank * ranks > available:
            mine = _as_written(cfg)
            smaller = ("smaller --wopt options much less, from which predict --run RUN --train-wopt KEY=VALUE "
                       "counts the one you will train" if mine or cfg.size != "full" else "a smaller --size much "
                       "less, from which predict --run counts the full one")  # fmt: skip
            label = cfg.workload if mine else f"{cfg.workload}/{cfg.size}"
            warning(f"{label}: a DDP rank holds about {rank / 2**30:.3g} GiB here "
                    f"({', '.join(parts[:-1])} and {parts[-1]}, counted on the meta device), "
                    f"{rank * ranks / 2**30:.3g} GiB for {counted(ranks, 'rank')}; this machine has "
                    f"{available / 2**30:.3g} GiB available: its ranks would be killed for memory (ZeRO and FSDP "
                    f"hold less; {smaller})")  # fmt: skip


def ddp_rank_bytes(counts: dict, optimizer: str) -> tuple[float, list[str]]:
    """What a DDP rank holds (bytes) of a model `counts` counted on the meta device (modelinfo.counts_on_meta): its
    parameters, gradients, DDP's buckets, Adam's moments where `optimizer` keeps them, the activations its forward
    keeps at the batch counted; and those parts' names."""
    moments = 2 if optimizer in ("adam", "adamw") else 0
    activations = counts["activation_mb"]
    parts = ["parameters", "gradients", "DDP's buckets", *(["Adam's moments"] * bool(moments)),
             *(["activations"] * (activations is not None))]  # fmt: skip
    return counts["param_bytes"] + (2 + moments) * counts["grad_bytes"] + (activations or 0) * 2**20, parts


def warn_long_full_size(configurations, *, threads: int) -> None:
    """A full size's steps (a model of yours, or one its --wopt options may enlarge: the ones the host's memory is
    judged for) on the CPU, when their floor (the dry run's: each by its FLOPs or its memory traffic, the higher)
    takes more than LONG_S here: said before the first launch, which would otherwise give no pace for the first
    configuration's hours."""
    from harness.config.grid import skip_reason

    heavy = [c for c in configurations if _may_be_large(c) and not skip_reason(c)]
    floor = steps_floor(heavy, threads=threads)
    if floor and floor[0] >= LONG_S:
        warning(f"the steps of {counted(len(heavy), 'configuration')} at their full size or as --wopt sets them take "
                f"at least {minutes_text(floor[0])} here by {floor[2]}; a smaller model takes far "
                "less, and predict --run (with --train-wopt) counts the one you will train from it")  # fmt: skip


LONG_S = 1800
"""A run whose full-size steps take at least this long (the dry run's floor) is warned about at its start."""


def _may_be_large(cfg) -> bool:
    """A configuration the smaller sizes do not bound: the full size, --wopt options that may enlarge a smaller one,
    or a model of yours, built as written whatever the size (the host's memory and the run's hours are judged)."""
    return cfg.size == "full" or bool(cfg.workload_options) or _as_written(cfg)


def _as_written(cfg) -> bool:
    """Whether the configuration's workload is a file or module of yours: built as written, whatever --size."""
    import workloads

    try:
        return workloads.resolve(cfg.workload_spec or cfg.workload).kind in ("file", "module")
    except Exception:  # a spec that no longer resolves: the run's own checks say so
        return False


def available_bytes() -> int | None:
    """MemAvailable of /proc/meminfo (Linux): what the host can give without swapping; None elsewhere."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            found = [line.split()[1] for line in meminfo if line.startswith("MemAvailable:")]
        return int(found[0]) * 1024 if found else None
    except (OSError, ValueError, IndexError):
        return None


def _precision_line(configurations, requested_dtype: str) -> str:
    """What the ranks compute in, as resolved from --dtype (auto) and --tf32."""
    first = configurations[0]
    compute = "fp32" if first.dtype == "fp32" else f"{first.dtype} autocast (parameters fp32)"
    resolved = " (--dtype auto)" if requested_dtype == "auto" else ""
    return f"{compute}{resolved}, TF32 {'on' if first.tf32 else 'off'}"


def _list_planned(configurations, more: str) -> None:
    """Every configuration as its progress line will name it, then what a run would launch."""
    from harness.config.grid import skip_reason
    from harness.launch.launcher import launch_order

    said: dict[str, int] = {}  # a reason in full once, then by the line that gave it (a sweep met one 16 times)
    skipped: dict[str, int] = {}  # each reason and how many it skips
    for number, cfg in enumerate(launch_order(configurations), 1):
        again = f" (repeat {cfg.repeat + 1})" if cfg.repeat else ""
        why = skip_reason(cfg)
        what = f"{cfg.warmup} warm-up + {cfg.steps} timed steps"
        if why:
            what = f"skipped here: {why}" if why not in said else f"skipped here, as [{said[why]}]"
            said.setdefault(why, number)
            skipped[why] = skipped.get(why, 0) + 1
        say(f"  [{number}/{len(configurations)}] {cfg.label()}{again}: {what}")
    launches = len({(c.world_size, c.extra_ranks, c.repeat) for c in configurations})
    say(
        f"ddpbench: dry run: {counted(len(configurations), 'configuration')} in {launches} torchrun "
        f"launch{'es' * (launches != 1)}{more}{skipped_text(len(configurations), skipped, said)}; "
        "nothing launched, nothing written (the same command without --dry-run runs them)"
    )


def skipped_text(total: int, skipped: dict[str, int], first: dict[str, int]) -> str:
    """': 28 to run, 4 skipped here (2 as [3]: needs CUDA GPUs; 2 as [7]: …)', '' where none is skipped: the forecast
    below counts the ones to run ('all 28 configurations'), and a newcomer read 32 then 28 with no word on the 4."""
    if not skipped:
        return ""
    reasons = "; ".join(f"{count} as [{first[why]}]: {_gist(why)}" for why, count in skipped.items())
    return f": {total - sum(skipped.values())} to run, {sum(skipped.values())} skipped here ({reasons})"


def _gist(reason: str) -> str:
    """A skip's reason up to its first explanation ('needs CUDA GPUs', not what nn.DataParallel does): its line says
    it in full."""
    cuts = [at for at in (reason.find(": "), reason.find(" (")) if at > 0]
    return reason[: min(cuts)] if cuts else reason

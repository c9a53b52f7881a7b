"""What a `bench` run says before it launches anything: where it runs (the device, the cores, the precision),
its warm-up, a strategy that will save nothing, and its configurations (`--dry-run` lists each and stops there)."""

from __future__ import annotations

from harness.commands.console import say, warning
from harness.commands.console.profiling import warn_if_busy


def say_plan(plan, *, requested_dtype: str, grows: bool = False, dry: bool = False) -> None:
    """The device, the precision, and the run's first configurations (`grows`: --repeats auto may add rounds; `dry`:
    --dry-run's plan, every configuration listed and nothing made)."""
    from harness.config.ranks import available_cpus

    worlds = sorted({c.world_size for c in plan.configurations})
    if plan.device == "cpu":
        say(f"ddpbench: no GPU in use: running on the CPU with the gloo backend, one process per simulated "
            f"GPU ({plan.threads_per_rank} thread(s) each), world sizes {worlds}")  # fmt: skip
        ranks, cores = (
            max((c.world_size // c.nnodes + c.extra_ranks for c in plan.configurations), default=0),
            available_cpus(),
        )
        if ranks > cores:
            warning(f"{ranks} ranks per node on {cores} CPU core(s): ranks take turns on the cores, "
                    "so the larger world sizes' steps include waiting (report: 'Cores shared')")  # fmt: skip
        warn_if_busy("the ranks share its cores with whatever else runs, so their steps read slower and "
                     "noisier than on a quiet machine; run when it is quiet")  # fmt: skip
    else:
        backend = plan.configurations[0].backend.upper() if plan.configurations else "?"
        say(f"ddpbench: running on CUDA with {backend}, world sizes {worlds}")
    say(f"ddpbench: precision: {_precision_line(plan.configurations, requested_dtype)}")
    say_warmup(plan.configurations)
    warn_nothing_to_shard(plan.configurations)
    count = len(plan.configurations)
    deciding = grows and any(c.repeated for c in plan.configurations)  # something to decide: rounds may follow
    more = ", to start (--repeats auto adds the repeats its open verdicts need)" if deciding else ""
    if dry:
        _list_planned(plan.configurations, more)
        return
    say(f"ddpbench: run {plan.run_id}: {count} configuration{'s' if count != 1 else ''}{more} -> {plan.run}/")


def say_warmup(configurations) -> None:
    """Where strategies warm up for different numbers of steps, which and why; a warning where --warmup
    leaves a strategy fewer than it needs on the device (its first measured steps are not steady)."""
    from harness.config.grid import warmup_needed

    steps = {(c.impl, c.device): c.warmup for c in configurations}
    if len(set(steps.values())) > 1:
        common = min(steps.values())
        more = ", ".join(f"{impl} {warmup}" for (impl, _), warmup in steps.items() if warmup > common)
        say(f"ddpbench: warm-up: {common} steps; {more} (what they need on the device: `ddpbench list`)")
    for (impl, device), warmup in steps.items():
        if warmup < (need := warmup_needed(impl, device)):
            warning(f"--warmup {warmup}: {impl} needs {need} warm-up steps on {device} before its "
                    f"steps are steady; its first {need - warmup} measured steps are not (leave --warmup "
                    "out)")  # fmt: skip


def warn_nothing_to_shard(configurations) -> None:
    """ZeRO-1 shards only the optimizer's state, and SGD without momentum (ddpbench's sgd) keeps none: such rows
    pay for the sharding's communication with no memory to save."""
    import pandas as pd

    from harness.analysis import roles

    rows = pd.DataFrame([{"impl": c.impl, "optimizer": c.optimizer} for c in configurations])
    if rows.empty:
        return
    names = sorted(set(rows.loc[roles.sharded_optimizer_over_allreduce(rows) & (rows["optimizer"] == "sgd"), "impl"]))
    if names:
        warning(f"{', '.join(names)} shard{'s' * (len(names) == 1)} only the optimizer's state, and "
                "--optimizer sgd keeps none: the sharding costs communication and saves no memory here; "
                "--optimizer adam keeps two moments a parameter, the state it shards")  # fmt: skip


def _precision_line(configurations, requested_dtype: str) -> str:
    """What the ranks compute in, as resolved from --dtype (auto) and --tf32."""
    if not configurations:
        return "nothing left to run"
    first = configurations[0]
    compute = "fp32" if first.dtype == "fp32" else f"{first.dtype} autocast (parameters fp32)"
    resolved = " (--dtype auto)" if requested_dtype == "auto" else ""
    return f"{compute}{resolved}, TF32 {'on' if first.tf32 else 'off'}"


def _list_planned(configurations, more: str) -> None:
    """Every configuration as its progress line will name it, then what a run would launch."""
    from harness.config.grid import skip_reason
    from harness.launch.launcher import launch_order

    for number, cfg in enumerate(launch_order(configurations), 1):
        again = f" (repeat {cfg.repeat + 1})" if cfg.repeat else ""
        what = (
            f"skipped here: {why}" if (why := skip_reason(cfg)) else f"{cfg.warmup} warm-up + {cfg.steps} timed steps"
        )
        say(f"  [{number}/{len(configurations)}] {cfg.label()}{again}: {what}")
    launches = len({(c.world_size, c.extra_ranks, c.repeat) for c in configurations})
    say(
        f"ddpbench: dry run: {len(configurations)} configuration(s) in {launches} torchrun launch(es){more}; "
        "nothing launched, nothing written (the same command without --dry-run runs them)"
    )

"""What `predict --run` says of a forecast for the run's own host.

Where a world size's ranks outnumber the cores the run's ranks had: the compute slowed
(`perfmodel.predict.core_share`), by the run's own measured slowdown or, unmeasured, by ranks / cores alone, and
whether the step priced is a step or only a floor. Where a world size beyond the run's leaves each rank fewer
threads than the run's ranks had: that the step may be faster than it will be, unpriced.

`predict --run OLD --against NEW`: the forecast OLD gives held against NEW's measured steps, per configuration of
DDP as the model simulates it: the step `predict --run OLD --gpus N` says at that cap (calibrated on OLD's one-rank
rows, with the collectives run's contention where it measured that world size, its compute slowed where the ranks
outnumber OLD's cores), NEW's measured step, the error, and whether the step fell inside the range the shared
cores give (none at a rank to a core: one step per cap)."""

from __future__ import annotations

from pathlib import Path

from harness.commands import console
from harness.commands.console import say


def share_words(share) -> str:
    """How the compute was slowed for `share`'s ranks on its cores, and by what measurement (or none)."""
    sharing = f"{share.world} ranks share {share.cores} cores"
    floor = f"×{share.floor:.3g} (ranks / cores: each rank's share of a core)"
    if share.carried is None:
        missing = "one rank" if share.measured_world else "a world size ≥ 2"
        return (f"{sharing}: compute slowed {floor}, the least it can be: a floor, not a step (to see how much more "
                "ranks sharing memory slow it, the run needs its baseline at one rank and at a world size ≥ 2; it "
                f"has none at {missing})")  # fmt: skip
    further = share.world / max(share.measured_world, share.cores)
    carried = f" × {further:.3g} (ranks per core beyond it)" if further != 1 else ""
    measured = f"the run's baseline at w{share.measured_world} over its one-rank step (×{share.measured_ratio:.3g})"
    if share.carried < share.floor:  # priced at the floor (CoreShare.scale): the measured slowdown is noise below it
        return (f"{sharing}: compute slowed {floor}, the floor: measured, {measured}{carried} is "
                f"×{share.carried:.3g}, below the least the sharing costs (the steps' noise)")  # fmt: skip
    return (f"{sharing}: compute slowed ×{share.carried:.3g}, measured: {measured}{carried}; {floor} alone would be "
            "the floor")  # fmt: skip


def share_at(run_dir, setup: dict, world: int):
    """The core share of `world` ranks on the cores `run_dir`'s ranks had (None: no run, or a rank to a core)."""
    from harness.perfmodel import predict
    from harness.results import store

    if run_dir is None:
        return None
    return predict.core_share(store.read_configs(run_dir), setup, world=world, cores=predict.run_cores(run_dir))


def thread_words(run_threads: int | None, cores: int | None, *, world: int, run_world: int) -> str | None:
    """Where the run's ranks had more than one thread each and `world` is beyond the largest world size it measured
    (`run_world`): that its ranks here have fewer threads than the one-rank step was measured with, which no core
    share prices (a `--gpus 1` run on 2 cores gave its rank both); None where each rank keeps its threads."""
    from harness.config.ranks import threads_per_rank

    if not run_threads or run_threads <= 1 or world <= run_world or not cores:
        return None
    threads = threads_per_rank(device="cpu", max_local_ranks=world, cpu_count=cores)
    if threads >= run_threads:
        return None
    return (f"w{world}: the run's ranks had {run_threads} threads each (it measured up to w{run_world}); {world} "
            f"ranks on its {cores} cores would have {threads} each: the compute is priced at the one-rank step's "
            f"{run_threads} threads, so each step here may be up to ×{run_threads / threads:.3g} too fast (unpriced: "
            f"bench --gpus {world} measures it)")  # fmt: skip


def threads_at(run_dir, world: int) -> str | None:
    """thread_words for `world` ranks on `run_dir`'s CPU run (None: no run, or not a CPU's)."""
    from harness.perfmodel import predict
    from harness.results import store

    if run_dir is None or store.read_run_meta(run_dir).get("device") != "cpu":
        return None
    configs = store.read_configs(run_dir)
    run_world = int(configs["world_size"].max()) if len(configs) else 1
    return thread_words(store.read_run_meta(run_dir).get("threads_per_rank"), predict.run_cores(run_dir),
                        world=world, run_world=run_world)  # fmt: skip


def against_one_rank(frame, profile):
    """The frame's scaling efficiencies against the one-rank step `profile` prices, not the slowed compute's."""
    return frame.assign(scaling_efficiency=profile.local_step_s * 1e3 / frame["step_ms"])


def say_shared_cores(share, frame) -> None:
    """Said under the world size's table: how its compute was slowed and, unmeasured, that its steps are floors."""
    if share is None:
        return
    console.say(f"  w{share.world}: {share_words(share)}")
    if share.carried is None:
        best = frame["step_ms"].min()
        bench = "--gpus 1 (its one-rank step)" if share.measured_world else "--gpus 2"
        console.warning(f"w{share.world}: each step above is a floor: the step is at least {best:.2f} ms at its "
                        f"best cap, more by what {share.world} ranks sharing memory bandwidth cost; bench "
                        f"{bench} measures that")  # fmt: skip


def range_words(row) -> str:
    """--against's range verdict for one row: inside or outside the bounds the shared cores give, or no range."""
    if "core_share" not in row:
        return "no range: one rank to a core, the forecast is one step"
    low, high, measured = row["low_ms"], row["high_ms"], row["measured_ms"]
    inside = "inside" if low <= measured <= high else "outside"
    ends = "between the ranks / cores floor's step and the measured slowdown's"
    return f"range {low:.2f}-{high:.2f} ms ({ends}): measured {inside}"


def forecast_rows(configs, profiles, later, network, *, cores: int | None = None) -> list[dict]:
    """OLD's forecast (`configs`, `profiles`: its rows and profiles) of each DDP configuration `later` measured at
    world size ≥ 2, its cap given or as shipped, with `forecast_ms` (the figure predict says there) and `error`
    ((forecast − measured) / measured); where ranks outnumber OLD's `cores`, its compute slowed and the bounds of
    that slowing (`low_ms`, `high_ms`: perfmodel.predict.sweep_predictions)."""
    from harness.perfmodel import predict

    rows = []
    for shipped in (False, True):
        for row in predict.sweep_predictions(configs, profiles, network, shipped=shipped, against=later, cores=cores):
            forecast = predict.forecast_ms(row)
            rows.append({**row, "shipped": shipped, "forecast_ms": forecast,
                         "error": forecast / row["measured_ms"] - 1})  # fmt: skip
    return sorted(rows, key=lambda r: (r["world_size"], r["workload"], r["size"], r["shipped"], r["bucket_cap_mb"]))


def check(run_dir: Path, against_dir: Path, network, *, said_if_none: bool = True) -> None:
    """Said after the forecast: each configuration of `against_dir` the forecast of `run_dir` covers (where it covers
    none, said so unless `said_if_none` is false)."""
    from harness.perfmodel import predict
    from harness.results import model_tables, store

    rows = forecast_rows(store.read_configs(run_dir), model_tables.read_gradprofiles(run_dir),
                         store.read_configs(against_dir), network, cores=predict.run_cores(run_dir))  # fmt: skip
    old, new = run_dir.name, against_dir.name
    if not rows and said_if_none:
        say(f"forecast check: run {new} measured no DDP step (stock, any cap) at world size ≥ 2 of the setup "
            f"run {old} profiled (workload, size, batch, dtype, optimizer): nothing to hold its forecast "
            "against")  # fmt: skip
    if not rows:
        return
    elsewhere = other_machine(run_dir, against_dir)
    if elsewhere:
        console.warning(f"--against {new} ran on another machine than run {old} ({elsewhere}): the forecast is for "
                        f"{old}'s, so each error below holds the machines' difference too")  # fmt: skip
    say(f"forecast check: run {old}'s forecast (the step predict --run {old} --gpus N prices at that cap) against run "
        f"{new}'s measured step (the slowest rank's median over its measured steps, geometric mean over repeats); "
        "error = forecast / measured − 1:")  # fmt: skip
    for r in rows:
        cap = "as shipped (1 MiB first bucket, then 25 MiB)" if r["shipped"] else f"cap {r['bucket_cap_mb']:g} MiB"
        side = "forecast faster than measured" if r["error"] < 0 else "forecast slower than measured"
        say(f"  w{r['world_size']} {r['workload']}/{r['size']} {r['impl']} {cap}: forecast {r['forecast_ms']:.2f} "
            f"ms, measured {r['measured_ms']:.2f} ms, error {r['error']:+.1%} ({side}); "
            f"{range_words(r)} [{r['network']}]")  # fmt: skip
        if "core_share" in r:
            say(f"    {share_words(r['core_share'])}")
    mape = sum(abs(r["error"]) for r in rows) / len(rows)
    ranged = [r for r in rows if "core_share" in r]
    inside = sum(r["low_ms"] <= r["measured_ms"] <= r["high_ms"] for r in ranged)
    judged = f"{inside} of {len(ranged)} inside their range" if ranged else "no range stated"
    say(f"  mean absolute error {mape:.1%} over {len(rows)}; {judged} (a range only where ranks share cores: at a "
        "rank to a core the forecast is one step, and the run's repeats give it no spread); ZeRO-1's and FSDP2's "
        "forecasts are not checked here")  # fmt: skip


MACHINE_KEYS = ("hostname", "cpu_model", "cpu_count", "gpu_name", "gpu_count")
"""What run.json's environment says of the machine: a forecast is held against a run on the same one."""


def other_machine(run_dir: Path, against_dir: Path) -> str:
    """How the two runs' machines differ, as 'hostname golden, not other; …' ('' where alike, or unrecorded)."""
    from harness.results import store

    def machine(run: Path) -> dict:
        meta = store.read_run_meta(run)
        return {"device": meta.get("device"), **{k: (meta.get("environment") or {}).get(k) for k in MACHINE_KEYS}}

    ours, theirs = machine(run_dir), machine(against_dir)
    return "; ".join(f"{key} {theirs[key]}, not {ours[key]}" for key in ours
                     if ours[key] is not None and theirs[key] is not None and ours[key] != theirs[key])  # fmt: skip


def against_run(args) -> Path | None:
    """--against's run folder, refused (before torch's import) without --run or beside --cluster/--nccl-tests, whose
    forecasts are another machine's."""
    from harness.config.bench import ConfigError
    from harness.perfmodel import predict

    if not getattr(args, "against", None):
        return None
    if not args.run or args.cluster or args.nccl_tests:
        raise ConfigError(f"--against {args.against!r} holds the forecast of --run RUN on its own machine against a "
                          "later run: give --run RUN, and no --cluster or --nccl-tests")  # fmt: skip
    try:
        return predict.resolve_run(args.against, args.results_dir)
    except ConfigError as error:  # its words name --run's value: this is --against's
        raise ConfigError(str(error).replace("--run ", "--against ", 1)) from None

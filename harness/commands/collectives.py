"""`ddpbench collectives`: validate the flags, launch the microbenchmarks (through the same
supervised launch as `bench`: `harness.launch.collectives`), print the bandwidth table.
Exit 1 when a launch failed or a collective gave a wrong result; 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import shutil

from harness.commands import console
from harness.commands.bench import EXIT_SIGNAL, StopSignals, Terminated
from harness.commands.console import invoked, predictions
from harness.commands.console.plan import say_nodes_wait
from harness.config.bench import DEVICES, ConfigError
from harness.results.values import counted


def collectives_config(args: argparse.Namespace, *, command: tuple[str, ...]):
    """Validate everything before anything is written: the config and the resolved device."""
    from harness.config import bench as cfgmod
    from harness.config import collectives
    from harness.config.ranks import available_cpus, threads_per_rank
    from harness.launch.collectives import RANK_MODULE
    from harness.launch.torchrun import check_switches, end_early, start_early

    check_switches()
    for flag, value, choices in (("--device", args.device, DEVICES), ("--backend", args.backend, cfgmod.BACKENDS)):
        if value not in choices:
            raise ConfigError(f"{flag} {value!r} is not valid; choose one of {', '.join(choices)}")
    guess = args.gpus if args.gpus is not None else 2
    if cfgmod.likely_cpu(args.device) and guess >= 1:
        # the ranks' imports begin while the rest is checked and the environment captured
        start_early(RANK_MODULE, threads=threads_per_rank(device="cpu", max_local_ranks=guess,
                                                          cpu_count=available_cpus()))  # fmt: skip
    device = cfgmod.resolve_device(args.device, cuda_available=args.device != "cpu" and cfgmod.cuda_available())
    if device != "cpu":
        end_early()
    backend = cfgmod.resolve_backend(args.backend, device=device)
    gpus = args.gpus if args.gpus is not None else (cfgmod.gpu_count() if device == "cuda" else 2)
    if device == "cuda":
        cfgmod.check_gpu_count(gpus=gpus, available=cfgmod.gpu_count(), backend=backend)
    config = collectives.CollectivesConfig(
        gpus=gpus,
        ops=collectives.parse_ops(args.ops),
        sizes=collectives.parse_size_range(args.sizes or collectives.DEFAULT_SIZES[device]),
        iters=args.iters if args.iters is not None else collectives.DEFAULT_ITERS[device],
        warmup=args.warmup if args.warmup is not None else collectives.DEFAULT_WARMUP[device],
        device=device,
        backend=backend,
        results=args.results,
        run_id=args.run_id,
        nnodes=args.nnodes,
        node_rank=args.node_rank,
        rdzv_endpoint=args.rdzv_endpoint,
        command=command,
    )
    run_id = config.run_id or cfgmod.new_run_id()
    if config.node_rank == 0:  # the other nodes join the folder node 0 makes
        cfgmod.check_results_folder(config.results, run_id)
    return config, run_id


def run(args: argparse.Namespace, *, command: tuple[str, ...]) -> int:
    from harness.config.collectives import BATCHES
    from harness.launch import collectives
    from harness.results import model_tables

    config, run_id = collectives_config(args, command=command)
    from harness.measure import env  # torch: after the ranks' imports began (`collectives_config`)

    run_dir = config.results / run_id
    console.say(f"ddpbench: collectives {','.join(config.ops)} on {config.device} with {config.backend}, "
                f"world sizes {config.world_sizes}, {BATCHES} batches of {config.iters} iterations per size "
                f"-> {run_dir}/")  # fmt: skip
    _warn_if_cores_shared(config)
    if config.nnodes > 1:  # torchrun's rendezvous says nothing while it waits
        say_nodes_wait(config.nnodes, config.rdzv_endpoint, run_id, timeout_s=config.timeout_s)
    stops = StopSignals()
    try:
        with stops.caught():
            collectives.run_collectives(
                config, run_id=run_id, environment=env.capture(config.command), on_world_done=_world_done
            )
    except collectives.LaunchFailed as exc:
        console.error(str(exc))
        _say_kept(run_dir, exc.world_size)
        return 1
    except (KeyboardInterrupt, Terminated):  # the launch in flight is down, ranks included; finished sizes stay
        why = stops.received or "SIGINT"
        done = model_tables.read_collectives(run_dir).groupby("world_size").size()  # the one stopped: its sizes so far
        if done.empty:  # an empty run would be listed, and chosen by predict, as if it had measured the network
            shutil.rmtree(run_dir, ignore_errors=True)
            console.say(f"ddpbench: stopped by {why} before the first message size was measured: nothing kept")
        else:
            saved = ", ".join(f"w{world} ({rows} op × size rows)" for world, rows in done.items())
            console.say(f"ddpbench: stopped by {why}: {saved} saved in {run_dir}/")
        return EXIT_SIGNAL[why]
    if config.node_rank:  # node 0's rank 0 writes the rows, and its launcher prints them
        console.say(f"ddpbench: node {config.node_rank}'s ranks are done; node 0 holds the rows in {run_dir}/")
        return 0
    frame = model_tables.read_collectives(run_dir)
    predictions.collectives_table(frame, model_tables.read_contention(run_dir))
    report = f"{invoked.ddpbench_command()} report --results {config.results}"  # as typed: pasted into this shell
    console.say(f"collectives: {model_tables.collectives_dir(run_dir)}/ (its page: `{report}`)")
    return 0 if frame["correct"].all() else 1


def _warn_if_cores_shared(config) -> None:
    """More ranks than cores: they take turns, and the contention measured is the cores', not the link's."""
    from harness.config.ranks import available_cpus

    cores = available_cpus()
    if config.device == "cpu" and config.gpus > cores:
        console.warning(f"{config.gpus} ranks on {counted(cores, 'CPU core')}: ranks take turns on the cores, so the "
                        "larger world sizes' bandwidth and contention include waiting for a core")  # fmt: skip


def _say_kept(run_dir, failed: int) -> None:
    """After a launch failed: the smaller world sizes kept, and that predict prices on them, the failed one's
    fit carried over from the nearest (a timeout on shared cores read as if everything was lost)."""
    from harness.results import model_tables

    done = model_tables.read_collectives(run_dir).groupby("world_size").size()
    if done.empty:
        console.say(f"ddpbench: nothing measured in {run_dir}/: predict cannot price on this run")
        return
    kept = ", ".join(f"w{world} ({counted(rows, 'op × size row')})" for world, rows in done.items())
    past = f"w{failed} on the sizes it measured, larger world sizes" if failed in done else f"w{failed} and larger"
    console.say(f"ddpbench: kept {kept} in {run_dir}/: predict and report price on them, {past} on the nearest "
                "measured world size's fit, carried over (predict says so where it does)")  # fmt: skip


def _world_done(world: int, seconds: float) -> None:
    console.say(f"ddpbench: collectives at world size {world} done in {seconds:.0f} s")

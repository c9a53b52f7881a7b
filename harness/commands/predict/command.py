"""`ddpbench predict`: predicted step time per bucket cap at world sizes you cannot run. It chooses the
gradient-ready profile (a run's, or measured now in this process) and the network (given by --busbw/--latency, or
fitted from a `ddpbench collectives` run of the same machine), prints the predictions, and with a run checks them
against the run's own bucket sweeps."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, NamedTuple

from harness.commands import console
from harness.commands.console import invoked, predictions
from harness.commands.console.predict import own_host
from harness.commands.console.progress import Status
from harness.commands.predict import bookings, cluster, counts, each_cluster, full_size, gradient_profile, inputs
from harness.config.bench import SIZE_CHOICES, ConfigError, HereDevice
from harness.results.values import counted

DEFAULT_WORLD = 8


class Basis(NamedTuple):
    """What a prediction on one network (this machine's, or given) rests on."""

    setup: dict  # the workload setup profiled (workload, size, batch_size, dtype, optimizer)
    network: Any
    profile: Any  # calibrated on the run's rows where there is a run
    worlds: list[int]
    caps: list[float] | None  # None: the default list
    fsdp_profile: Any  # without DDP's own cost (fsdp.compute_only)
    fsdp_own_s: float | None  # None: not measured (the run has no FSDP step at one rank)
    run_dir: Path | None = None
    state: Any = None  # each strategy's model state per rank (harness.perfmodel.memory.state_per_rank)
    gpu: Any = None  # the run's GPU to fit the state in (_run_gpu); None on the CPU
    fsdp_note: str = ""  # what FSDP2's predicted step leaves out (own_costs.fsdp_own_unknown)
    zero_own_s: float = 0.0  # ZeRO's own cost beyond DDP's at one rank (measured.zero_own_cost_s); 0 where not measured


def run(args: argparse.Namespace, *, command: tuple[str, ...]) -> int:
    import pandas as pd

    from harness.analysis import agreement
    from harness.config.units import parse_caps
    from harness.perfmodel.clusters import cluster as profiles
    from harness.perfmodel.measured import SETUP_KEYS
    from harness.perfmodel.network import NO_CONTENTION, network_link
    from harness.perfmodel.predict import DEFAULT_CAPS_MB, with_shared_cores
    from harness.perfmodel.schedule import largest_bucket_bytes, predict_caps
    from harness.perfmodel.sharded import with_sharded_steps
    from harness.results import store

    args.run, args.results_dir = inputs.run_and_folder(args)
    each_cluster.split(args)  # each cluster's --batch-size/--local-step-ms: the first's read until the clusters are
    cluster.check_flags(args)
    full_size.check_train_wopt(args.train_wopt)
    inputs.check_page(args)
    typed = args.cluster
    args.clusters = bookings.cluster_names(args)  # each refused here, where it is not one
    given = _given_network(args)
    caps = parse_caps(args.caps) if args.caps else None
    inputs.check_counts(args)
    # the run and each cluster named refused before torch's import (2 to 6 s), and the cluster before a profile is
    # measured (a minute on a busy CPU); everything about the run before a word about the cluster
    run_dir = inputs.resolve(args.run, args.results_dir) if args.run else None
    later = own_host.against_run(args)  # None: no --against
    if len(args.clusters) == 1 and args.clusters[0]:  # one profile ([None]: --nccl-tests alone; several: read)
        chosen = profiles.load(args.clusters[0])
        if args.gpus and not counts.is_collective_table(args):  # a count that fits no node: before a profile
            counts.gpu_counts(args, chosen)
    for flag, text, kept in (("--cluster", typed, args.clusters), ("--caps", args.caps, caps)):
        if text and kept:  # said once nothing more is refused: a refusal is its one line
            console.note_repeated(flag, text, kept)
    if cluster.wanted(args) and cluster.is_collective_table(args):  # the profile's table: no torch to import
        return cluster.run_collectives(args, cluster.cluster_from_args(args))
    # before a first line: the run's rows read (a run's stored profile needs no torch), or torch's import for a
    # profile measured here (2 to 6 s of silence before `--cluster A,B`'s first cluster was said), and --train-wopt's
    # model counted (24 s on a 1.3B Llama); on a terminal only
    counting = ", counting the model you train (--train-wopt) on the meta device" * bool(args.train_wopt)
    Status("predict").show(f"reading run {run_dir.name}{counting}" if run_dir else f"importing torch{counting}",
                           checked=False)  # fmt: skip
    device = HereDevice()  # torch asked only where a profile is measured here, or the run ran on another device
    if cluster.wanted(args):
        return _on_cluster(args, caps, run_dir, device=device)
    # a run's stored profile is said as stored, then calibrated on the run's rows (and said so)
    basis = (
        _from_run(args, given, caps, run_dir, device=device) if run_dir else _measured_now(args, given, device=device)
    )
    network, profile, run_dir, worlds = basis.network, basis.profile, basis.run_dir, basis.worlds
    caps = caps or basis.caps or list(DEFAULT_CAPS_MB)
    profiled_on = store.read_run_meta(run_dir).get("device") or device.type if run_dir is not None else device.type
    if given is not None and profiled_on == "cpu":  # a network typed in (a GPU cluster's) against a CPU's compute
        console.warning(f"the profile's compute is a CPU's, far slower than a GPU's, set against the network given "
                        f"(--busbw {args.busbw}): communication hides behind it, so these are a CPU's steps and their "
                        "efficiencies higher than a GPU's would be; predict --cluster NAME --local-step-ms MS "
                        "scales the compute to your GPU's one-GPU step")  # fmt: skip
    frames = []
    for world in worlds:
        link = network_link(network, world)
        measured = network.contention.get(world)  # None: not measured, predicted without contention
        share = own_host.share_at(run_dir, basis.setup, world)  # None: a rank to a core, or no run
        slowed = with_shared_cores(profile, share)
        frame = predict_caps(slowed, caps_mb=caps, link=link, world_size=world, contention=measured or NO_CONTENTION)
        frame = with_sharded_steps(own_host.against_one_rank(frame, profile), slowed, network, world_size=world,
                                   fsdp_profile=with_shared_cores(basis.fsdp_profile, share),
                                   fsdp_own_s=basis.fsdp_own_s, blocking=profiled_on == "cpu",
                                   zero_own_s=basis.zero_own_s)  # fmt: skip
        predictions.predict_table(frame, world=world, link=link, contention=measured)
        own_host.say_shared_cores(share, frame)
        if fewer_threads := own_host.threads_at(run_dir, world):
            console.warning(fewer_threads)
        counts.warn_if_extrapolated(link, largest_bucket_bytes(profile, caps), world=world)
        if given is None:  # a fitted network: said where this world size is not one it was measured at
            counts.warn_unmeasured_world(network, world)
        frames.append(agreement.with_answer_marks(frame).assign(world_size=world, network=link.source))
    cpu = "a CPU's compute: see the warning above" if given is not None and profiled_on == "cpu" else ""
    _sharded_answers(
        frames, profile, network, caveat=cpu, fsdp_caveat="; ".join(c for c in (cpu, basis.fsdp_note) if c)
    )
    if basis.gpu is not None:  # a GPU run: the fastest of the strategies that fit its GPU
        predictions.strategy_choice(basis.state, basis.gpu, frames=frames)
    if args.out:  # each row says what it rests on, as --cluster's rows do
        context = {"run": args.run, **{key: basis.setup.get(key) for key in SETUP_KEYS},
                   "one_rank_step_ms": profile.local_step_s * 1e3}  # fmt: skip
        cluster.write_rows(pd.concat(frames, ignore_index=True).assign(**context), Path(args.out))
    if run_dir is not None:
        _validate(run_dir.parent, run_dir, network, stored=given is None)
    if later is not None and later.resolve() != run_dir.resolve():  # the run's own: its validation said it
        own_host.check(run_dir, later, network)
    return 0


def _on_cluster(args: argparse.Namespace, caps, run_dir: Path | None, *, device) -> int:
    """--cluster / --nccl-tests: the step per cap of a run's (`run_dir`) or a fresh profile on the cluster."""
    import pandas as pd

    from harness.perfmodel.predict import DEFAULT_CAPS_MB
    from harness.perfmodel.schedule import profile_from_rows
    from harness.results import store

    # everything refusable about the run or the workload is refused before a word about the cluster; the run's rows
    # read (a run of 90 configurations, 0.5-1.8 s on a busy 2-core CPU) said by `run`'s first words
    fresh = [_fresh_setup(args, device, counts_full=True)] if run_dir is None else None
    matched = fresh or _run_setups(run_dir, args, device=device)
    setup = matched[0]
    train = full_size.train_options(args.train_wopt, store.read_configs(run_dir) if run_dir else None, setup)
    args.train_options = train  # the model you will train: its memory and floors, as the page counts them too
    configs = None
    if run_dir is not None:
        inputs.say_setup_choice(run_dir, matched)
        profile, source = gradient_profile._profile_for_run(run_dir, setup, device=device)
        configs = store.read_configs(run_dir)
        profiled_on = store.read_run_meta(run_dir).get("device") or device.type
    else:
        inputs.say_profiled_size(args, setup, device, trained=train)
        console.say(f"ddpbench predict: profiling {setup['workload']}/{setup['size']} (batch {setup['batch_size']}) "
                    f"here on {device.type}…")  # fmt: skip
        profile = profile_from_rows(
            pd.DataFrame(gradient_profile._measure_profile(setup, device=device, steps=args.profile_steps))
        )
        source = f"profile measured now on {device.type}"
        profiled_on = device.type
    # the answer, worked out last, said first (predict_each: several clusters' bookings compared, one cluster's table);
    # a profile measured now said its progress as it went, above
    with console.held():
        chosen = cluster.cluster_from_args(args) if len(args.clusters) == 1 else None  # several: each where predicted
        if configs is not None:
            caps = caps or _caps_of_run(configs)
        trained = getattr(args, "train_options", None)
        predictions.predict_profile(setup, profile, source, full_size.alike_words(setup, profile, configs,
                                                                                  options=trained))  # fmt: skip
        if configs is not None:
            inputs.warn_uncalibrated(run_dir, configs, setup)
        return bookings.predict_each(args, chosen, profile, caps or list(DEFAULT_CAPS_MB), device=profiled_on,
                                     run_dir=run_dir, configs=configs, setup=setup)  # fmt: skip


def _sharded_answers(frames, profile, network, *, caveat: str, fsdp_caveat: str) -> None:
    """ZeRO-1's and FSDP2's steps at the caps DDP's answers name, said with what the network priced them on."""
    from harness.perfmodel.sharded import priced_on
    from harness.perfmodel.sharding.zero import largest_parameter

    broadcasts, collectives = priced_on(network, int(frames[-1]["world_size"].iloc[0]))
    predictions.zero_answer(frames, optimizer_ms=profile.optimizer_s * 1e3, largest=largest_parameter(profile),
                            caveat=caveat, priced=broadcasts)  # fmt: skip
    predictions.fsdp_answer(frames, caveat=fsdp_caveat, priced=collectives)


def _from_run(args: argparse.Namespace, given, caps, run_dir: Path, *, device):
    """The Basis of a run: its profile (said, then calibrated), world sizes and caps; the network given, or fitted
    next to the run; FSDP's profile and own cost (`fsdp.compute_only`, `measured.fsdp_own_cost_s`); each strategy's
    model state at those world sizes, said, with the run's GPU (`_run_gpu`: None on the CPU) to fit it in."""
    from harness.perfmodel import measured
    from harness.perfmodel.network import collectives_command, network_for_run
    from harness.perfmodel.sharding import fsdp, own_costs
    from harness.results import store

    matched = _run_setups(run_dir, args, device=device)
    setup = matched[0]
    beside = run_dir.parent  # "in the same results folder": the run's own, however the run was named
    network = given or network_for_run(beside, run_dir)
    if network is None:
        measure = collectives_command(run_dir, program=invoked.ddpbench_command())  # as typed: pasted here
        raise ConfigError(f"no `ddpbench collectives` run from this run's machine in {str(beside)!r}; run "
                          f"`{measure}` on it, or give --busbw (and --latency)")  # fmt: skip
    if network.fewer_nodes:  # a run across nodes priced on a network measured on fewer
        console.warning(network.fewer_nodes)
    inputs.say_setup_choice(run_dir, matched)
    profile, source = gradient_profile._profile_for_run(run_dir, setup, device=device)
    predictions.predict_profile(setup, profile, source)
    configs = store.read_configs(run_dir)
    inputs.warn_uncalibrated(run_dir, configs, setup)
    fsdp_basis = (fsdp.compute_only(profile, configs, setup), measured.fsdp_own_cost_s(configs, setup))
    profile, calibration = _calibrated_to_run(profile, configs, setup)
    worlds = args.gpus if args.gpus else sorted({int(n) for n in configs["world_size"] if n > 1}) or [DEFAULT_WORLD]
    gpu = _run_gpu(run_dir)
    state = full_size.said_state(run_dir, configs, setup, worlds, gpu)
    unknown = own_costs.fsdp_own_unknown(calibration, configs, setup) if fsdp_basis[1] is None else ""  # beside FSDP2's
    return Basis(setup, network, profile, worlds, caps or _caps_of_run(configs), *fsdp_basis, run_dir, state, gpu,
                 unknown, measured.zero_own_cost_s(configs, setup) or 0.0)  # fmt: skip


def _run_gpu(run_dir: Path):
    """The run's GPU as a cluster profile names one for the memory answer (`name`, `gpu_memory_gib` as torch
    reports it); None for a CPU run, or one that recorded no GPU's memory."""
    import types

    from harness.results import store

    meta = store.read_run_meta(run_dir)
    gpu = next(iter(meta.get("environment", {}).get("gpus") or []), {})
    if meta.get("device") != "cuda" or not gpu.get("memory_mb"):
        return None
    return types.SimpleNamespace(
        name=f"the run's {gpu.get('name') or 'GPU'}", gpu_memory_gib=round(gpu["memory_mb"] / 1024, 1)
    )


def _calibrated_to_run(profile, configs, setup: dict):
    """(the profile, its calibration): scaled to the run's baseline step at one rank and DDP's own cost there added,
    said as it is done: the calibration `predict --cluster` and the what-if page use, and the model's best variant here
    ('calibrated + contention', docs/measured-cpu.md), so one run's steps are predicted one way."""
    from harness.commands.console.predict.scaling import say_run_calibration
    from harness.perfmodel import predict
    from harness.perfmodel.schedule import calibrate

    say_run_calibration(profile, configs, setup, scaled=False)
    calibration = predict.run_calibration(configs, setup, profile=profile)
    return calibrate(profile, calibration), calibration


def _caps_of_run(configs) -> list[float] | None:
    """The caps the run's answer prices: its sweep, when it swept two or more (each given as an option: DDP's default
    layout, recorded as 25, is no choice the run made), beside the default list, which the per-bucket model prices
    from the same profile; else None, the default list. Said either way, with the option that chooses others."""
    from harness.perfmodel.predict import DEFAULT_CAPS_MB, priced_caps, swept_caps

    swept = swept_caps(configs)
    listed = ",".join(f"{c:g}" for c in DEFAULT_CAPS_MB)
    if len(swept) >= 2:
        console.say(f"ddpbench predict: caps: the run's sweep, {', '.join(f'{c:g}' for c in swept)} MiB, beside the "
                    f"default list, {listed} MiB (--caps chooses others)")  # fmt: skip
        return priced_caps(configs)
    made = f"one cap only ({swept[0]:g} MiB)" if swept else "no cap"
    console.say(f"ddpbench predict: caps: the default list, {listed} MiB (the run swept {made}; "
                "--caps chooses others)")  # fmt: skip
    return None


def _measured_now(args: argparse.Namespace, given, *, device):
    """The Basis of a fresh setup profiled here, in this process (said); the network given, or this machine's fit."""
    import pandas as pd
    import torch

    from harness.config.ranks import available_cpus, threads_per_rank
    from harness.perfmodel.schedule import profile_from_rows

    setup = _fresh_setup(args, device)
    network = given or _this_machine_network(args.results_dir, device=device.type)
    if network is None:
        raise ConfigError("a network is needed: --cluster NAME|FILE (`ddpbench list`), --nccl-tests FILE, "
                          "--busbw (e.g. --busbw 90GB/s --latency 30us), or a `ddpbench collectives` run "
                          "of this machine in --results")  # fmt: skip
    inputs.say_auto_size(args, setup, device)
    world = args.gpus[0] if args.gpus else DEFAULT_WORLD  # one: several are a cluster's
    # On the CPU, a rank's share of the cores at that world size, as bench gives its ranks: compute as fast as theirs.
    threads = threads_per_rank(device="cpu", max_local_ranks=world, cpu_count=available_cpus()) \
        if device.type == "cpu" else None  # fmt: skip
    console.say(f"ddpbench predict: profiling {setup['workload']}/{setup['size']} (batch {setup['batch_size']}, "
                f"{setup['optimizer']}) here on {device.type} with "
                f"{counted(threads or torch.get_num_threads(), 'thread')}…")  # fmt: skip
    rows = gradient_profile._measure_profile(setup, device=device, threads=threads, steps=args.profile_steps)
    profile = profile_from_rows(pd.DataFrame(rows))
    predictions.predict_profile(setup, profile, f"profile measured now on {device.type}")
    return Basis(setup, network, profile, [world], None, fsdp_profile=profile, fsdp_own_s=None)  # nor DDP's own


def _validate(results_dir: Path, run_dir: Path, network, *, stored: bool) -> None:
    """The model against the run's measured sweeps, per (workload, size, world size)."""
    import pandas as pd

    from harness.analysis import agreement
    from harness.analysis.verdicts import sweep
    from harness.perfmodel import predict
    from harness.perfmodel.sharding import fsdp, zero
    from harness.results import model_tables, store

    configs, profiles = store.read_configs(run_dir), model_tables.read_gradprofiles(run_dir)
    cores = predict.run_cores(run_dir)  # ranks beyond them: their compute slowed, as the forecast above prices it
    if stored:  # the run's own network: its floor and model tables are (re)written for the report
        rows = predict.update_model_tables(results_dir, run_dir, network)[0]
    else:  # a hypothetical network is printed against the run, never stored with it
        rows = predict.sweep_predictions(configs, profiles, network, cores=cores)
    predictions.zero_validation(zero.run_checks(configs, profiles, network, cores=cores))
    predictions.fsdp_validation(fsdp.run_checks(configs, profiles, network, cores=cores))
    if not rows:  # its DDP steps as shipped are still a check of the schedule: the forecast held against them
        predictions.no_validation()
        own_host.check(run_dir, run_dir, network, said_if_none=False)
        return
    recommendations = store.read_recommendations(run_dir)
    for (workload, size, world), group in pd.DataFrame(rows).groupby(["workload", "size", "world_size"]):
        as_good = sweep.as_good_caps(recommendations, workload=workload, size=size, world=world)
        errors = [
            (label, agreement.prediction_error(group["bucket_cap_mb"], group["measured_ms"], group[column]))
            for column, label in predict.VARIANTS
            if group[column].notna().all() and len(group) > 1
        ]
        predictions.validation((workload, size, world), group, as_good, errors)


def _given_network(args: argparse.Namespace):
    from harness.config.units import parse_bandwidth, parse_latency
    from harness.perfmodel.network import given_network

    if args.latency and not args.busbw:
        raise ConfigError("--latency needs --busbw too (or neither: both fitted from collectives)")
    if not args.busbw:
        return None
    latency = parse_latency(args.latency) if args.latency else 0.0
    return given_network(busbw_bytes_per_s=parse_bandwidth(args.busbw), latency_s=latency)


def _this_machine_network(results: Path, *, device: str):
    import socket

    from harness.perfmodel.network import matching_collectives, measured_network

    backend = "nccl" if device == "cuda" else "gloo"
    meta = {"environment": {"hostname": socket.gethostname()}, "device": device, "backend": backend}
    run_dir = matching_collectives(results, meta) if Path(results).is_dir() else None
    return measured_network(run_dir) if run_dir is not None else None


def _run_setups(run_dir: Path, args: argparse.Namespace, *, device) -> list[dict]:
    """The run's setups the flags match, the first the one predicted; refused where its missing profile
    would be measured on another device than the run's (before a word about the network or the cluster)."""
    matched = inputs.matching_setups(run_dir, args)
    inputs.refuse_profiling_elsewhere(run_dir, matched[0], here=device, cluster=args.cluster)
    return matched


def _fresh_setup(args: argparse.Namespace, device, *, counts_full: bool = False) -> dict:
    """The setup profiled now. `counts_full` (--cluster, whose floors count the full size on the meta device): on
    the CPU, --size full profiles the small size (inputs.profiled_size)."""
    import workloads

    if args.workload and "," in args.workload:
        raise ConfigError(f"--workload {args.workload!r}: predict profiles one workload; give one of them")
    source = workloads.resolve(args.workload or "gpt2")  # raises ConfigError naming the valid workloads and specs
    size = args.size or "auto"
    if size not in SIZE_CHOICES:
        raise ConfigError(f"--size {size!r} is not valid; choose one of {', '.join(SIZE_CHOICES)}")
    size = inputs.profiled_size(source, size, device.type, counts_full=counts_full)
    batch = args.batch_size or source.create(size=size, options={}).default_batch_size()
    optimizer = args.optimizer or "sgd"
    asked = f"{args.cluster or 'dgx-h100'}" + (f" --nodes {args.nodes}" if args.nodes else "")  # the predict said
    _refuse_too_large(source.spec, size, batch=batch, optimizer=optimizer, cluster=asked)
    return {"workload": source.spec, "size": size, "batch_size": batch, "dtype": "fp32", "optimizer": optimizer}


def _refuse_too_large(spec: str, size: str, *, batch: int, optimizer: str, cluster: str) -> None:
    """Refused where profiling `spec` here (one process, its batch and optimizer) would outgrow this machine's memory,
    with `list`'s path: bench it smaller, then predict --run --train-wopt. A 1.3B Llama was profiled here anyway and
    killed for memory after 7 minutes, where `list` and `bench --dry-run` said its ranks would be. `cluster`: the
    --cluster (and --nodes) asked, carried into the predict said."""
    from harness.commands.fits_here import bench_smaller, too_large_here
    from harness.commands.info import _yours

    if too_large := too_large_here(spec, size, {}, batch=batch, optimizer=optimizer, ranks=1, many=False):
        how, then = bench_smaller(spec, {}, yours=_yours(spec), optimizer=optimizer, cluster=cluster)
        raise ConfigError(f"--workload {spec} --size {size}: profiling it here would be killed for memory: "
                          f"{too_large}; bench it smaller{how}" + (f", then {then}" if then else ""))  # fmt: skip

"""`ddpbench predict --cluster NAME|FILE` and `--nccl-tests FILE…`: a cluster you have not booked.

Without a run or a workload it predicts one collective per (nodes, size), as nccl-tests would print
it; with `--run RUN` (or `--workload`) it predicts the step time per bucket cap and world size of that
run's measured gradient profile on the cluster, and the best cap with its margin. `--nccl-tests`
fits the profile's bandwidths to the user's own nccl-tests logs first and says the fit's error.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from pathlib import Path

from harness.commands import console
from harness.commands.console import predictions
from harness.commands.console.predict import answer, estimate, full_size, published, scaling, steps
from harness.commands.predict import DEFAULT_SIZES, nccl_logs
from harness.commands.predict import full_size as predict_full_size
from harness.commands.predict import inputs as predict_input
from harness.commands.predict.counts import (
    gpu_counts,
    is_collective_table,
    node_counts,
    nodes_asked,
    refuse_nodes_without_network,
)
from harness.config.bench import ConfigError
from harness.results.values import counted


def wanted(args: argparse.Namespace) -> bool:
    return args.cluster is not None or bool(args.nccl_tests)  # `--cluster ''` is asked for, and refused by name


def check_flags(args: argparse.Namespace) -> None:
    """Everything refusable is refused before anything is measured, printed or written."""
    from harness.config.units import parse_size_range
    from harness.perfmodel.clusters.nccl import COLLECTIVES

    if args.out:
        predict_input.check_out(Path(args.out))
    if args.save_profile is not None:
        predict_input.check_save_profile(args)
    elif args.save_anyway:  # else ignored unsaid: the user believes a fit was kept that never was
        raise ConfigError("--save-anyway needs --save-profile FILE.toml (and --nccl-tests FILE): it saves a fit "
                          "refused as poor or as another GPU's")  # fmt: skip
    if args.collective not in COLLECTIVES:
        raise ConfigError(f"--collective {args.collective!r} is not valid; choose one of {', '.join(COLLECTIVES)}")
    scaling.check_local_flags(args)  # --local-step-ms, and the parts of it given apart
    if not wanted(args):
        other_collective = args.collective if args.collective != "all_reduce" else None  # DDP's, the default
        for flag, value in (("--nodes", args.nodes), ("--sizes", args.sizes), ("--local-step-ms", args.local_step_ms),
                            ("--local-optimizer-ms", args.local_optimizer_ms), ("--train-wopt", args.train_wopt),
                            ("--local-ddp-ms", args.local_ddp_ms), ("--collective", other_collective)):  # fmt: skip
            if value is not None:
                raise ConfigError(f"{flag} needs --cluster NAME|FILE or --nccl-tests FILE")
        return
    if args.busbw or args.latency:
        raise ConfigError("--busbw/--latency and --cluster/--nccl-tests each describe the network; give one of them")
    kind = "a collectives table" if is_collective_table(args) else "a DDP step"
    for flag, reason in _unused_flags(args):
        raise ConfigError(f"{flag} does not apply to {kind} on a cluster: {reason}")
    if args.sizes:
        parse_size_range(args.sizes)
    if args.nodes and "=" not in args.nodes:  # each cluster's own counts: read with the clusters (bookings)
        console.note_repeated("--nodes", args.nodes, node_counts(args))  # its bound too: before any profile


def _unused_flags(args: argparse.Namespace) -> list[tuple[str, str]]:
    """The flags given that this kind of cluster prediction would not read, each with why."""
    ranks = "the ranks are --nodes × the profile's GPUs per node"
    if is_collective_table(args):
        why = {"--caps": "bucket caps are a DDP step's, which --run RUN or --workload NAME predicts",
               "--local-step-ms": "it scales a DDP step's compute, which --run RUN or --workload NAME predicts",
               "--local-optimizer-ms": "it splits a DDP step's compute, which --run RUN or --workload NAME predicts",
               "--local-ddp-ms": "it adds to a DDP step, which --run RUN or --workload NAME predicts",
               "--train-wopt": "it changes the model --run RUN or --workload NAME predicts",
               "--gpus": ranks}  # fmt: skip
        given = {"--caps": args.caps, "--local-step-ms": args.local_step_ms, "--gpus": args.gpus,
                 "--local-optimizer-ms": args.local_optimizer_ms, "--train-wopt": args.train_wopt,
                 "--local-ddp-ms": args.local_ddp_ms}  # fmt: skip
    else:
        buckets = "a DDP step all-reduces its buckets, whose sizes the caps set (--caps)"
        why = {"--sizes": buckets, "--collective": buckets}
        given = {"--sizes": args.sizes,
                 "--collective": None if args.collective == "all_reduce" else args.collective}  # fmt: skip
    return [(flag, why[flag]) for flag, value in given.items() if value is not None]


def cluster_from_args(args: argparse.Namespace):
    """The profile named or given, fitted to the nccl-tests logs when there are any (and said so)."""
    from harness.perfmodel.clusters import cluster, nccltests, nccltests_fit

    logs = []
    nccl_logs.refuse_repeated(args.nccl_tests or [])
    for path in map(Path, args.nccl_tests or []):  # a log file, or a `ddpbench collectives` run's folder
        if _is_collectives_run(path):
            logs += nccltests.logs_from_collectives(path)
            nccl_logs.warn_if_not_gpus(path)
            continue
        if path.is_dir():
            raise ConfigError(f"--nccl-tests {str(path)!r} is a folder but not a `ddpbench collectives` run; give "
                              "nccl-tests' output files, or a collectives run's folder")  # fmt: skip
        logs.append(log := nccltests.read(path, collective=args.collective))
        if not log.named:
            console.warning(f"nccl-tests log {path} has no '# Collective test starting:' line and its name no "
                            f"program's: read as {log.collective}'s; if it is another collective's, name the file "
                            "after its program (e.g. all_gather_perf.txt)")  # fmt: skip
    nccl_logs.refuse_mixed_gpus(logs)
    nccl_logs.warn_same_case(logs)
    if args.cluster is not None:
        base = cluster.load(args.cluster)
        refuse_nodes_without_network(base, args)  # before any word about the profile: one line, as every refusal
        if missing := cluster.unsourced(base):
            console.warning(f"cluster profile {base.path}: no source for {', '.join(missing)}; say where each "
                            "number came from in its [sources] table, so that a reader can check it")  # fmt: skip
    else:
        guess = next((name for log in logs if (name := nccltests.profile_for_gpu(log.gpu))), None)
        if guess is None:
            names = ", ".join(cluster.builtin_names())
            pcie = next((log.gpu for log in logs if nccltests.is_pcie_card(log.gpu)), None)
            if pcie:  # the built-ins are NVLink boards: one of them would predict NVLS on a box without it
                raise ConfigError(f"--nccl-tests: the logs' GPU {pcie!r} is a PCIe card, and the built-in "
                                  f"profiles ({names}) are SXM boards on NVLink; describe your nodes in a .toml "
                                  "(fabric = \"pcie\": docs/clusters.md, 'A PCIe node') and give it with "
                                  "--cluster")  # fmt: skip
            raise ConfigError("--nccl-tests: the logs do not name a GPU ddpbench has a profile for; give the "
                              f"closest with --cluster ({names}) or a .toml file")  # fmt: skip
        console.say(f"ddpbench predict: the logs' GPU is {logs[0].gpu!r}: starting from the built-in {guess}")
        base = cluster.load(guess)
    if not logs:
        nodes = nodes_asked(args, base)
        published.say_published_check(base, args.collective, nodes=nodes if args.nodes or args.gpus else None,
                                      table=is_collective_table(args))  # fmt: skip
        published.warn_beyond_published(base, nodes)
        if base.fitted_to:  # a fit saved before (--save-profile): what it rests on, and how far it reaches
            console.say(f"ddpbench predict: {base.path}: a profile fitted to {base.fitted_to} (not checked "
                        "against published tables)")  # fmt: skip
            published.warn_beyond_logs(base.name, base.fitted_nodes, nodes)
        return base
    nccl_logs.warn_if_other_gpu(base, logs)
    nccl_logs.warn_other_node_shape(base, logs)
    name = f"{base.name} fitted to {counted(len(logs), 'nccl-tests log')} of {_nodes_text(logs)}"
    if args.save_profile:  # a file's: its stem, a name for tables, prose and --gpu-hour-price (fitted_to says the rest)
        name = Path(args.save_profile).stem
    fitted = nccltests_fit.fit(base, logs, name=name)
    predictions.nccl_fit(fitted, logs, base, reach=nccltests_fit.reach_text(
        nccltests_fit.beyond_reach(fitted.cluster, logs), fitted.cluster))  # fmt: skip
    nccl_logs.say_rows_beside(fitted, logs)
    nccl_logs.warn_far_moved(base, fitted.fitted)
    published.warn_beyond_logs(base.name, max(log.nodes for log in logs), nodes_asked(args, base))
    if args.save_profile:
        nccl_logs.refuse_poor_save(args, fitted, base, logs)
        Path(args.save_profile).write_text(cluster.to_toml(fitted.cluster), encoding="utf-8")
        console.say(f"ddpbench predict: the fitted profile is saved in {args.save_profile}: --cluster "
                    f"{args.save_profile} uses it, with what it was fitted to, in predict and report")  # fmt: skip
    return fitted.cluster


def _nodes_text(logs) -> str:
    """The node counts the logs measured: '1 node', '2 nodes', '1–4 nodes'."""
    low, high = min(log.nodes for log in logs), max(log.nodes for log in logs)
    counted = f"{low}–{high}" if low < high else f"{high}"
    return f"{counted} node{'s' if high > 1 else ''}"


def _is_collectives_run(path: Path) -> bool:
    from harness.results import model_tables

    return path.is_dir() and model_tables.collectives_meta_path(path) is not None


def run_collectives(args: argparse.Namespace, chosen) -> int:
    """One row per (nodes, size): what NCCL would run, its time and bandwidths."""
    import pandas as pd

    from harness.config.units import parse_size_range
    from harness.perfmodel.clusters import nccl

    sizes = parse_size_range(args.sizes or DEFAULT_SIZES)
    rows = []
    for nodes in node_counts(args):
        choices = [nccl.choose(chosen, args.collective, size, nodes=nodes) for size in sizes]
        predictions.cluster_collectives(chosen, choices)
        rows += [_collective_row(chosen, c) for c in choices]
    if args.out:
        write_rows(pd.DataFrame(rows), Path(args.out))
    return 0


def _source_of(chosen) -> str:
    """Which profile the rows rest on: 'built-in', or the file it was read from (a fitted profile's: the file it
    started from; its name says what it was fitted to). A user's file named like a built-in stays told apart."""
    from harness.perfmodel.clusters import cluster

    return "built-in" if cluster.is_builtin(chosen) else str(chosen.path)


def _collective_row(chosen, choice) -> dict:
    return {"cluster": chosen.name, "cluster_source": _source_of(chosen), "collective": choice.collective,
            "nodes": choice.nodes, "ranks": choice.ranks, "bytes": choice.nbytes, "time_us": choice.time_us,
            "algbw_gbps": choice.algbw_gbps, "busbw_gbps": choice.busbw_gbps, "algorithm": choice.algorithm,
            "protocol": choice.protocol}  # fmt: skip


def run_steps(args: argparse.Namespace, chosen, profile, caps: list[float], *, device: str, configs=None,
              setup: dict | None = None, state=None, errors=None):  # fmt: skip
    """Step time per bucket cap at each node count for the profile, and the best cap with its margin.
    With a run's `configs` (and the profile's `setup`), the profile is first calibrated on the run's rows
    at one rank (`predict.run_calibration`), as the what-if page does; then to --local-step-ms. Where no step is
    known (`steps_known`), each strategy's collectives per node count instead, and what gives the rest."""
    import pandas as pd

    from harness.analysis import agreement, roles
    from harness.perfmodel import predict
    from harness.perfmodel.clusters import published
    from harness.perfmodel.clusters.nccl import ClusterLink
    from harness.perfmodel.pick import failed
    from harness.perfmodel.schedule import Calibration, calibrate
    from harness.perfmodel.sharded import cluster_frame, optimizer_break_even, optimizer_share_caveat
    from harness.perfmodel.sharding import own_costs
    from harness.perfmodel.sharding.own_costs import zero_for_cluster
    from harness.perfmodel.sharding.zero import largest_parameter

    from_run = predict.run_calibration(configs, setup, profile=profile) if configs is not None else Calibration()
    carried = not (args.local_step_ms and device == "cpu")  # a CPU's own cost is no GPU's (scaled_to_local_step)
    given_optimizer_s = None if args.local_optimizer_ms is None else args.local_optimizer_ms / 1e3
    ddp_ms = args.local_ddp_ms  # DDP's own cost on the GPU, given: in place of the run's (a CPU's left out)
    calibration = predict.scaled_to_local_step(profile, from_run, args.local_step_ms and args.local_step_ms / 1e3,
                                               own_carried=carried, optimizer_s=given_optimizer_s,
                                               own_s=None if ddp_ms is None else ddp_ms / 1e3)  # fmt: skip
    known = scaling.steps_known(args, device)
    if configs is not None and known:
        scaling.say_run_calibration(profile, configs, setup, scaled=bool(args.local_step_ms), carried=carried,
                                    given_ms=ddp_ms)  # fmt: skip
    # an own cost (hooks, copies) goes with the parameters, not the batch: --batch-size's part of the scale is not its
    per_batch = (predict_input.memory_batch(args, setup) or 0) / int(setup["batch_size"]) if setup else 0.0
    run_scale = from_run.compute_scale * (per_batch or 1.0)
    sharded = own_costs.fsdp_for_cluster(profile, calibration, configs=configs, setup=setup, run_scale=run_scale,
                               carried=carried)  # fmt: skip
    zero_own = zero_for_cluster(configs, setup, calibration, run_scale=run_scale, carried=carried)
    profile = calibrate(profile, calibration)
    args.calibrated_backward_ms = profile.backward_s * 1e3  # the bookings' caps contrast (bookings.run_at_ends)
    trained = getattr(args, "train_options", None)  # --train-wopt: the model you will train, counted on meta
    smaller = bool(setup is not None and (setup.get("size") != "full" or trained is not None)
                   and predict_full_size.warn_not_whole_model(setup, profile, configs=configs, options=trained,
                                                              scaled=bool(args.local_step_ms), said=known))  # fmt: skip
    own_source = scaling.own_source(configs, setup, carried=carried, given=ddp_ms is not None)  # --out's, as said
    if known:
        scaling.say_one_rank_step(profile, calibration, local_step_ms=args.local_step_ms,
                                  own_measured=own_source == "measured", own_inside=own_source == "in the compute",
                                  optimizer_ms=args.local_optimizer_ms, ddp_ms=ddp_ms,
                                  step_from=scaling.step_from_words(args))  # fmt: skip
    flops = scaling.say_step_against_peak(args, configs, setup, chosen, trained)  # the step in FLOPs: a typo shows
    predict_input.say_sequence_counted(args, configs, setup, trained, said=flops)  # a language model's tokens
    link = ClusterLink(chosen)
    benched = ("the benched model's" if trained is not None and configs is not None  # --workload: its size profiled
               else f"the {setup['size'] if setup else ''} size's")  # fmt: skip
    small = (f"{benched} gradients, not your model's: a cap named is theirs, the floors yours (see the warning above)"
             if smaller else "")  # fmt: skip
    said_before: set[str] = set()

    def joined(*parts: str) -> str:  # a caveat once, where it first applies: the console is read down
        out = [part for part in dict.fromkeys(parts) if part and part not in said_before]
        said_before.update(parts)
        return "; ".join(out)

    caveat = (console.once(small),)  # several clusters: the first's
    rows = []
    for world in gpu_counts(args, chosen):  # --gpus' within a node too: the collective model prices any ranks there
        nodes = link.nodes(world)
        frame = cluster_frame(profile, caps=caps, link=link, world_size=world, zero_own=zero_own, fsdp_part=sharded)
        frame.insert(0, "nodes", nodes)
        frame.insert(0, "world_size", world)
        # whose own cost a bounded step's long end holds (the choice's words): a CPU's, or a GPU run's not told
        rows.append(agreement.with_answer_marks(frame).assign(own_cost_whose="the run's" if carried else "a CPU's"))
    if smaller:  # the full size's gradients on the same compute: the least each step can take
        rows = predict_full_size.with_floors(rows, setup, profile, configs=configs, link=link,
                                             fsdp_profile=sharded.profile, fsdp_own_s=sharded.own_s or 0.0,
                                             zero_own_s=zero_own.added_s, options=trained, said=known)  # fmt: skip
    own_ms = calibration.reducer_s * 1e3  # DDP's own cost as the prediction adds it (scaled with any compute)
    # --out's rows (bookings.predict_each writes them): each says what it rests on, the profile, workload, scaling
    given, measured_on = setup or {}, getattr(args, "local_step_gpu", None)
    context = {"cluster": chosen.name, "cluster_source": _source_of(chosen), "run": args.run,
               **{key: given.get(key) for key in ("workload", "size", "batch_size", "dtype", "optimizer")},
               # the batch the rows answer for: --batch-size's (memory counted there) beside the run's own
               "run_batch_size": given.get("batch_size"),
               "train_options": json.dumps(getattr(args, "train_options", None), sort_keys=True),
               **({"batch_size": batch} if (batch := predict_input.memory_batch(args, given)) else {}),
               "local_step_ms": float(getattr(args, "local_step_given", args.local_step_ms) or "nan"),
               "local_step_gpu": measured_on, "local_step_end": getattr(args, "local_step_end", None),
               "cluster_step_ms": float(args.local_step_ms or "nan"),  # float64 even where not given
               "local_optimizer_ms": float("nan" if args.local_optimizer_ms is None else args.local_optimizer_ms),
               "local_optimizer_source": getattr(args, "local_optimizer_source", None),
               "local_ddp_ms": float("nan" if ddp_ms is None else ddp_ms), "ddp_own_source": own_source,
               # the calibration and the one-rank step, so that a row reproduces its scaling_efficiency
               "compute_scale": calibration.compute_scale,
               "ddp_own_ms": own_ms if carried or ddp_ms is not None else float("nan"),
               "one_rank_step_ms": profile.local_step_s * 1e3}  # fmt: skip
    out = pd.concat(rows, ignore_index=True).assign(**context)
    if not known:  # a CPU's compute: what holds on any GPU (the memory, said above), and what gives the rest
        from harness.perfmodel.pick.communication import unpriced
        from harness.perfmodel.pick.compressed import benched_hooks

        hooks = benched_hooks(configs, given.get("workload"))  # DDP's beside, under the 2-byte hooks the run benched
        alone = len(getattr(args, "clusters", None) or [None]) == 1  # several: why no step said once, first
        left_out = unpriced(configs, given.get("workload"))  # the run's strategies no step model prices: named
        args.optimizer_share = steps.collectives_answer(chosen, rows, trained=trained is not None, profile=profile,
                                                        optimizer=(setup or {}).get("optimizer") or "sgd",
                                                        alone=alone, hooks=hooks, unpriced=left_out,
                                                        timed=bool(getattr(args, "train_samples_count", None)),
                                                        priced=getattr(args, "one_cluster_price", None) is not None,
                                                        )  # fmt: skip
        full_size.fsdp_bf16_what_if(setup, configs, trained)  # FSDP2's gathers above at fp32: their bytes at bf16
        estimate.say_step_estimate(args, configs, setup, chosen, trained, profile)  # a runnable step, an estimate
        return out
    before = own_source in ("left out", "not measured")  # the steps lack DDP's own cost: said, not hidden
    steps.cluster_table(chosen, rows, before_own=before)
    asked = args.nodes or args.gpus
    above = set(nodes_asked(args, chosen)) if asked else {c["nodes"] for c in published.published_checks(chosen)}
    from harness.perfmodel.pick import ranked

    def misses(nodes: list[int]) -> str:  # the published tables' misses, only where they could move the cap named
        at = [frame for frame in rows if int(frame["nodes"].iloc[0]) in nodes]
        return published.cap_caveats(chosen, nodes, above=above) if ranked.miss_could_move_cap(at) else ""

    said = [joined(*caveat, misses([int(frame["nodes"].iloc[0])])) for frame in rows]  # once each, a GPU count's
    steps.best_caps(
        rows,
        decimals=3,
        caveats=said,  # each GPU count's fastest cap, where all tie one line; the misses said above referred to
        joint=lambda nodes: "; ".join(filter(None, (*caveat, misses(nodes)))),
        whose=benched[:-2] if smaller else "",  # its figures the benched model's: not the answer, named so
    )
    floors = {label: predict_full_size.floor_words(rows, label) for label in predict_full_size.FLOORED}

    # the answer and the choice span every node count: each caveat once
    whose, small = ("the model you will train" if trained is not None else "the full size"), benched[:-2]
    lead = predict_full_size.full_size_lead(rows, whose, backward_ms=profile.backward_s * 1e3) if smaller else ""
    said = joined(*caveat, "" if lead else floors["DDP"])  # each node count's published-table caveat: above
    predictions.cluster_answer(chosen, rows, backward_ms=profile.backward_s * 1e3, caveat=said,
                               own_ms=None if before else own_ms,
                               full_size=lead, small=small)  # fmt: skip
    share = profile.optimizer_s / profile.local_step_s if profile.local_step_s else 0.0
    optimizer = (setup or {}).get("optimizer") or "sgd"  # a profile measured now steps --optimizer's (sgd)
    cpu = device == "cpu" and given_optimizer_s is None  # (one given: the GPU's, not a CPU's)
    estimated = getattr(args, "local_optimizer_source", None) == "estimated"  # a GPU's, from its bytes: the pick's
    # share is said where it turns on it, as on a CPU's (choice_table's notes); the CPU's caveats stay a CPU's
    cpu_optimizer = (profile.optimizer_s * 1e3, profile.local_step_s * 1e3) if cpu or estimated else (0.0, 0.0)

    def cpu_split(*labels: str) -> tuple[str, ...]:  # the CPU's optimizer share, and where these strategies' leads stop
        if not cpu:
            return ()
        return (
            optimizer_share_caveat(share, scaled=bool(args.local_step_ms), optimizer=optimizer, terse=True),
            optimizer_break_even(rows[-1], optimizer_ms=cpu_optimizer[0], step_ms=cpu_optimizer[1], labels=labels),
        )

    zero_floor = "" if full_size.has_zero_floors(rows) else floors["ZeRO-1"]  # said in its answer where it has one
    fsdp_floor = "" if full_size.has_fsdp_floors(rows) else floors["FSDP2"]
    zero_failed, fsdp_failed = (failed.timed_by(state, rows) for rows in (roles.sharded_optimizer_over_allreduce,
                                                                         roles.shards_parameters))  # fmt: skip
    full_size.zero_answer(rows, optimizer_ms=profile.optimizer_s * 1e3, largest=largest_parameter(profile),
                          whose=whose, small=small, caveat=joined(*caveat, zero_floor, *cpu_split("ZeRO-1"),
                                                                  zero_own.note, zero_failed))  # fmt: skip
    fsdp_note = full_size.fsdp_own_note(sharded)  # the console's words; the page's in full
    fsdp_caveat = joined(*caveat, fsdp_floor, *cpu_split("FSDP2"), fsdp_note, fsdp_failed)
    full_size.fsdp_answer(rows, whose=whose, small=small, caveat=fsdp_caveat)
    full_size.fsdp_bf16_what_if(setup, configs, trained)  # its bytes at bf16, counted: a CPU runs FSDP in fp32
    if state is not None:  # the two halves joined: the fastest of the strategies that fit (floors in its own words)
        asked = predict_input.memory_batch(args, setup) if setup else None
        step_batch = (asked or int(setup["batch_size"])) if setup else None
        batch_note = answer.run_batch_caveat(step_batch, step_given=bool(args.local_step_ms),
                                             batch_given=bool(args.batch_size))  # fmt: skip
        notes = joined(*caveat, *cpu_split("ZeRO-1", "FSDP2"), fsdp_note, zero_own.note)
        alone = (
            len(getattr(args, "clusters", None) or [None]) == 1
        )  # one cluster's answer first (command holds the rest)
        with console.ahead() if alone else contextlib.nullcontext():
            predictions.strategy_choice(state, chosen, frames=rows, caveat=notes, cpu_optimizer=cpu_optimizer,
                                        errors=errors, batch=step_batch, batch_note=batch_note,
                                        other_end=getattr(args, "other_end", None))  # fmt: skip
    return out


def write_rows(frame, out: Path) -> None:
    """`--out`: the prediction's rows, CSV or Parquet by the extension (predict_input.check_out checked it up front)."""
    try:
        if out.suffix == ".parquet":
            frame.to_parquet(out, index=False)
        else:
            frame.to_csv(out, index=False)
    except OSError as error:  # what check_out could not foresee (a read-only file system, a full disk)
        raise ConfigError(f"--out {str(out)!r}: {error.strerror or error}") from None
    console.say(f"ddpbench predict: wrote {len(frame)} rows to {out}")

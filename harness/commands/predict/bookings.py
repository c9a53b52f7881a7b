"""`predict --cluster A,B… --run RUN`: the run's profile (or a fresh one) predicted on each cluster in turn, as one
cluster's is (at both ends of a step measured on another GPU: `run_at_ends`), what is the run's and not a cluster's
said once; --out's rows of every cluster in one file; then, with several, the bookings (a cluster × a GPU count)
compared: the fastest and the fewest GPU-hours (at --gpu-hour-price's prices, the cheapest), decided or open
(perfmodel.clusters.bookings)."""

from __future__ import annotations

import argparse
import contextlib
import copy
import math
from pathlib import Path
from typing import NamedTuple

from harness.commands import console
from harness.commands.console import predictions
from harness.commands.console.predict import estimate, gpu_ends, scaling
from harness.commands.predict import cluster, counts, each_cluster
from harness.commands.predict import inputs as predict_input
from harness.config.bench import ConfigError


def cluster_names(args: argparse.Namespace) -> list[str | None]:
    """--cluster's profiles, names or .toml files separated by commas, each refused in one line (before anything is
    measured, printed or written) where it is not one; several are refused with what is one cluster's (a fit to
    nccl-tests logs, a what-if page, a collectives table); one named twice is one (`args.cluster` set to it). [None]:
    --nccl-tests alone. --gpu-hour-price's prices read into `args.gpu_hour_prices` (gpu_hour_prices), --nodes' counts
    of each cluster, where it names each's, into `args.cluster_nodes` (nodes_of_each; one cluster's into --nodes)."""
    from harness.perfmodel.clusters import cluster as profiles

    args.gpu_hour_prices, args.cluster_nodes = None, None
    if getattr(args, "json", None):
        check_json(args)
    priced = getattr(args, "gpu_hour_price", None)
    args.train_samples_count = _train_samples(args)
    if args.cluster is None or "," not in args.cluster:  # one: loaded, and refused, after the run (command.run)
        predict_input.check_cluster_file(args.cluster)
        _one_clusters_run(args, priced, [args.cluster] if args.cluster else [])
        _one_clusters_nodes(args, [args.cluster] if args.cluster else [])
        _one_clusters_values(args, args.cluster)
        return [args.cluster]
    names = [name.strip() for name in args.cluster.split(",")]
    known = ", ".join(profiles.builtin_names())
    if not all(names):
        raise ConfigError(f"--cluster {args.cluster!r} names an empty profile; give names ({known}) or .toml files, "
                          "separated by commas")  # fmt: skip
    kept = list(dict.fromkeys(names))
    if len(kept) == 1:  # one cluster named twice: one cluster's prediction, its flags as one's
        predict_input.check_cluster_file(kept[0])
        profiles.load(kept[0])  # refused here, before the note that it is named twice
        _one_clusters_run(args, priced, kept)
        _one_clusters_nodes(args, kept)
        _one_clusters_values(args, kept[0])
        args.cluster = kept[0]
        return kept
    each = " or ".join(kept)
    fitted = args.save_profile or f"{Path(kept[0]).stem}-fit.toml"  # a file's stem: not 'my.toml-fit.toml'
    fit_once = (f"; or fit the logs once to their cluster (--cluster {kept[0]} --nccl-tests LOG… --save-profile "
                f"{fitted}), then compare --cluster {','.join([fitted, *kept[1:]])}")  # fmt: skip
    for flag, given, why in (("--nccl-tests", args.nccl_tests, "its logs are one cluster's, the one they fit"),
                             ("--page", args.page, "a what-if page is one cluster's"),
                             ("--save-profile", args.save_profile, "it saves one cluster's fit")):  # fmt: skip
        if given:
            raise ConfigError(f"{flag} with --cluster {args.cluster!r}: {why}; give one cluster ({each}) with it"
                              f"{fit_once if flag != '--page' else ''}")  # fmt: skip
    if cluster.is_collective_table(args):
        raise ConfigError(f"--cluster {args.cluster!r}: a collectives table is one cluster's; give one ({each}), or "
                          "--run RUN (or --workload NAME) to compare the bookings of several")  # fmt: skip
    named = {}  # every profile read, and refused where it cannot be, before a word about any of them
    for name in kept:
        predict_input.check_cluster_file(name)
        named[name] = profiles.load(name).name
    if len(set(named.values())) < len(named):  # the bookings, the table and the prices know a profile by its name
        twice = next(n for n in named.values() if list(named.values()).count(n) > 1)
        alike = " and ".join(given for given, n in named.items() if n == twice)
        raise ConfigError(f"--cluster {args.cluster!r}: {alike} are both named {twice!r}; give one file another "
                          "`name` (or another file name, where it has none)")  # fmt: skip
    if args.nodes is not None and "=" in args.nodes:
        args.cluster_nodes = nodes_of_each(args.nodes, named)
    each_cluster.resolve(args, named)  # each's --batch-size and --local-step-ms, where given each's
    for name in kept:  # a cluster without a network, refused at more than one node: its own counts, where named
        cluster.refuse_nodes_without_network(profiles.load(name), _with_nodes_of(args, name))
    _refuse_one_step_for_several_gpus(args, [profiles.load(name) for name in kept])
    if priced is not None:
        args.gpu_hour_prices = gpu_hour_prices(priced, named)
    return kept


def nodes_of_each(text: str, clusters: dict[str, str]) -> dict[str, str]:
    """--nodes NAME=N,…,NAME=N,…: each cluster of `clusters` ({as --cluster names it: its profile's name}; either
    names it) with its own node counts, a name's counts running to the next NAME= (dgx-a100=1,2,dgx-h200=1), keyed by
    the name --cluster gives, each as --nodes' plain counts ('1,2'); refused in one line where a name is not one
    compared or named twice, a count not a whole number ≥ 1, a count before any name, a cluster left without one."""
    from harness.config.units import MAX_PREDICTED_GPUS, list_items

    most = MAX_PREDICTED_GPUS // 8  # 8-GPU nodes, as --nodes' plain counts
    example = ",".join(f"{given}={'1,2' if k == 0 else 1}" for k, given in enumerate(clusters))
    form = (f"give NAME=N,… for each cluster compared ({', '.join(clusters)}), e.g. {example}, or counts alone for "
            "every cluster (1,2)")  # fmt: skip
    names = {**{profile: given for given, profile in clusters.items()}, **{given: given for given in clusters}}
    counts: dict[str, list[int]] = {}
    name = None
    for item in list_items(text, flag="--nodes"):
        if "=" in item:
            typed, _, item = (part.strip() for part in item.partition("="))
            if typed not in names:
                raise ConfigError(f"--nodes {text!r}: {typed!r} is not a cluster compared; {form}")
            if names[typed] in counts:
                raise ConfigError(f"--nodes {text!r} names {typed!r} twice; {form}")
            name = names[typed]
            counts[name] = []
        if name is None:
            raise ConfigError(f"--nodes {text!r}: {item!r} comes before any NAME=, so no cluster's; {form}")
        if not (item.isascii() and item.isdigit() and 1 <= int(item) <= most):
            raise ConfigError(f"--nodes {text!r}: {item!r} is not a node count, a whole number from 1 to {most:,}; "
                              f"{form}")  # fmt: skip
        counts[name].append(int(item))
    missing = [given for given in clusters if given not in counts]
    if missing:
        raise ConfigError(f"--nodes {text!r} has no node count for {', '.join(missing)}; {form}")
    return {given: ",".join(map(str, sorted(set(each)))) for given, each in counts.items()}


def _one_clusters_nodes(args: argparse.Namespace, clusters: list[str]) -> None:
    """--nodes NAME=N,… with one cluster: its counts, NAME its name (or its profile's), as plain --nodes; refused
    without --cluster (the name would be a guess's) or where it names another."""
    from harness.perfmodel.clusters import cluster as profiles

    if args.nodes is None or "=" not in args.nodes:
        return
    if not clusters:
        raise ConfigError(f"--nodes {args.nodes!r} names a cluster's counts without --cluster; give the counts "
                          "alone (1,2)")  # fmt: skip
    args.nodes = nodes_of_each(args.nodes, {clusters[0]: profiles.load(clusters[0]).name})[clusters[0]]


def _one_clusters_values(args: argparse.Namespace, name: str | None) -> None:
    from harness.perfmodel.clusters import cluster as profiles

    if name and any(getattr(args, f"{key}_each", None) for key, _, _, _ in each_cluster.EACH):
        each_cluster.one_clusters(args, name, profiles.load(name).name)


def _with_nodes_of(args: argparse.Namespace, name: str) -> argparse.Namespace:
    """`args` with `name`'s own --nodes where --nodes names each cluster's (args.cluster_nodes), else as given."""
    if not getattr(args, "cluster_nodes", None):
        return args
    asked = copy.copy(args)
    asked.nodes = args.cluster_nodes[name]
    return asked


def _one_clusters_run(args: argparse.Namespace, priced: str | None, clusters: list) -> None:
    """--train-samples and --gpu-hour-price with one cluster (or none): its whole run timed at each GPU count, and at
    the price given, a plain one (3.9) or NAME=PRICE naming it, costed (`args.one_cluster_price`, keyed by its profile's
    name where predicted); refused in one line without --cluster (the run's own network books nothing) and for a price
    without the run it prices."""
    args.one_cluster_price = None
    given = [flag for flag, value in (("--train-samples", getattr(args, "train_samples", None)),
                                      ("--gpu-hour-price", priced)) if value is not None]  # fmt: skip
    if given and not clusters:
        raise ConfigError(f"{' and '.join(given)} without --cluster: the whole run is timed and priced on a cluster's "
                          "bookings; give one, --cluster dgx-h100 (or several to compare), or leave "
                          f"{'them' if len(given) > 1 else 'it'} out")  # fmt: skip
    if priced is None:
        return
    if args.train_samples_count is None:
        raise ConfigError(f"--gpu-hour-price {priced!r} with one cluster, {clusters[0]!r}: the price costs its whole "
                          f"run; give the run's samples too, --train-samples N, e.g. {TRAIN_EXAMPLE}, or leave the "
                          "price out")  # fmt: skip
    form = f"give what a GPU-hour of {clusters[0]} costs you, a number (3.9) or {clusters[0]}=PRICE"
    if "=" not in priced:
        args.one_cluster_price = _price(priced, priced, form)
        return
    from harness.perfmodel.clusters import cluster as profiles

    named = {clusters[0]: profiles.load(clusters[0]).name}  # NAME: as --cluster gives it, or its profile's name
    args.one_cluster_price = each_cluster.named_values(priced, named, flag="--gpu-hour-price", value="PRICE",
                                                       form=form, parse=lambda figure: _price(priced, figure, form),
                                                       noun="price")[clusters[0]]  # fmt: skip


def check_json(args: argparse.Namespace) -> None:
    """`--json`: the answer of a step's prediction on a cluster (the bookings), as a .json file that can be written."""
    if not args.cluster or cluster.is_collective_table(args):
        raise ConfigError(f"--json {args.json!r} writes the answer of a step predicted on a cluster: give --cluster "
                          "NAME with --run RUN (or --workload NAME); for the rows, --out FILE.csv")  # fmt: skip
    if Path(args.json).suffix != ".json":
        raise ConfigError(f"--json {args.json!r}: the answer is a .json file, e.g. answer.json")
    predict_input.check_writable(Path(args.json), flag="--json", example="answer.json", kind="a .json file")


def _train_samples(args: argparse.Namespace) -> float | None:
    """--train-samples N: the whole run's samples, refused in one line where it is not a count above 0."""
    from harness.config.units import parse_amount

    given = getattr(args, "train_samples", None)
    return None if given is None else parse_amount(given, flag="--train-samples", example=TRAIN_EXAMPLE)


TRAIN_EXAMPLE = "6.4M (100,000 steps at a global batch of 64)"


def gpu_hour_prices(text: str, clusters: dict[str, str]) -> dict[str, float]:
    """--gpu-hour-price NAME=PRICE,…: a GPU-hour's price on each cluster of `clusters` ({as --cluster names it: its
    profile's name}; a price may name either), keyed by the profile's name; refused in one line where a name is not
    one compared, a price not a number above 0, a cluster compared left without one (each_cluster.named_values)."""
    form = f"give NAME=PRICE a GPU-hour for each cluster compared, comma-separated ({', '.join(clusters)})"
    prices = each_cluster.named_values(text, clusters, flag="--gpu-hour-price", value="PRICE", form=form,
                                       parse=lambda figure: _price(text, figure, form), noun="price")  # fmt: skip
    return {clusters[given]: value for given, value in prices.items()}


def _price(text: str, figure: str, form: str) -> float:
    """`figure` of --gpu-hour-price `text` as a price, refused in one line where it is not a number above 0."""
    try:
        value = float(figure)
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(f"--gpu-hour-price {text!r}: {figure!r} is not a price, a number above 0; {form}")
    return value


def _refuse_one_step_for_several_gpus(args: argparse.Namespace, loaded: list) -> None:
    """--local-step-ms without --local-step-gpu is each cluster's own GPU's step: refused where their GPUs' datasheet
    figures differ (an A100's and an H100's), since one step timed on one GPU taken as both would tie them (it did:
    'dgx-a100 × 16 GPUs or dgx-h100 × 16 GPUs (tied)' for a step timed on an A100). GPUs the tables do not know
    (a profile of your own) cannot be told apart, and pass."""
    from harness.config.precision import GPUS, peak_tflops

    if not args.local_step_ms or getattr(args, "local_step_gpu", None) or getattr(args, "local_step_ms_each", None):
        return  # each cluster's own step given: each its own GPU's
    figures = {(peak_tflops(p.description, "bf16", tf32=False), peak_tflops(p.description, "fp32", tf32=False),
                p.memory_gbps) for p in loaded}  # fmt: skip
    if len(figures) > 1 and all(None not in figure[1:] for figure in figures):
        raise ConfigError(f"--local-step-ms {args.local_step_ms:g} with --cluster {args.cluster!r}, whose GPUs "
                          "differ: one step cannot be each one's own; name the GPU that timed it, --local-step-gpu "
                          f"NAME ({', '.join(GPUS)}), or give each one's, --local-step-ms "
                          f"{','.join(f'{p.name}=MS' for p in loaded)}")  # fmt: skip


def predict_each(args: argparse.Namespace, first, profile, caps: list[float], *, device: str, run_dir=None,
                 configs=None, setup: dict | None = None) -> int:  # fmt: skip
    """Each cluster of `args.clusters` in turn (`first`: the first's profile, already read and said), its memory,
    steps and answer as one cluster's; --page's page (one cluster) and --out's rows (every cluster's), then with
    several clusters the bookings compared, said first (or, without a step, why none is)."""
    import pandas as pd

    from harness.commands import report
    from harness.commands.console.progress import Status
    from harness.commands.predict import full_size
    from harness.perfmodel.own_check import OwnCheck, own_check

    several = len(args.clusters) > 1
    frames, booked, tokens, ends, gpus, far, verdict = [], [], None, None, {}, False, ""
    args.step_estimates = {}  # each cluster's step estimated from FLOPs, where none was given: shared by its copies
    # the run's words once, not a cluster's: the bookings' note too, where an answer table said it
    with console.said_once() if several else contextlib.nullcontext():
        status = Status("predict")  # several: each cluster's lines held till the end, 6 to 14 s of silence first
        for k, name in enumerate(args.clusters):
            # on stderr outside console.held, ended by the first line it lets out; one cluster too: its memory and
            # the check against the run's own steps come before its first line (3-8 s on a busy CPU)
            status.show(f"predicting on {name}" + f" ({k + 1}/{len(args.clusters)})" * several)
            asked = each_cluster.with_each(copy.copy(_with_nodes_of(args, name)), name)  # each cluster from the
            asked.cluster = name  # flags as given (its own --nodes, batch, step where named): an end's step set on them
            chosen = first if k == 0 and first is not None else cluster.cluster_from_args(asked)
            state = None  # each strategy's memory per rank: only a run measured what its ranks held
            if configs is not None:
                worlds = counts.gpu_counts(asked, chosen)
                state = full_size.said_state(run_dir, configs, setup, worlds, chosen, options=args.train_options,
                                             batch_size=predict_input.memory_batch(asked, setup))  # fmt: skip
            checked = OwnCheck()  # how far the same model was from the run's own steps, on its own machine
            if run_dir is not None:
                checked = own_check(run_dir.parent, run_dir, setup, configs=configs, cluster=chosen.name)
            ended = run_at_ends(asked, chosen, profile, caps, device=device, configs=configs, setup=setup, state=state,
                                errors=checked.errors)  # fmt: skip
            predictions.errors_on_own_run(checked.words if scaling.steps_known(args, device) else "")
            frames += ended.frames
            booked += ended.bookings
            gpus[chosen.name] = chosen.description
            tokens, ends, far = tokens or ended.tokens, ends or ended.ends, far or ended.far_below_peak
        if args.page:  # the same calibration, caps and scaling as the console's, from one node to 1,024 GPUs
            report.write_prediction_page(asked, chosen, run_dir, setup, caps, checked=checked)
        if args.out:
            cluster.write_rows(pd.concat(frames, ignore_index=True), Path(args.out))
    # several: the answer, said ahead of each cluster's prediction it rests on (command._on_cluster holds those)
    with console.ahead():
        if several and scaling.steps_known(args, device):
            from harness.commands.console.predict import bookings
            from harness.commands.console.predict.answer import run_batch_caveat

            asked = predict_input.memory_batch(args, setup) if setup else None
            batch = (asked or int(setup["batch_size"])) if setup else None
            note = run_batch_caveat(batch, step_given=bool(args.local_step_ms), batch_given=bool(args.batch_size))
            verdict = bookings.compared(booked, tokens=tokens is not None, ends=ends, note=note,
                                        prices=args.gpu_hour_prices, gpus=gpus, far_below_peak=far,
                                        samples=args.train_samples_count)  # fmt: skip
            if not getattr(args, "detail", True):  # the short form: 100-200 lines of 3 clusters' tables left out
                left = console.drop_held()
                console.say(f"ddpbench predict: each cluster's answer and 'Why' that these lines point to, with the "
                            f"prediction under it ({left} lines: its busbw checked, memory per rank, the step per "
                            "bucket cap), printed with --detail")  # fmt: skip
        elif args.train_samples_count and scaling.steps_known(args, device):  # one cluster's run, under its answer
            from harness.commands.console.predict import bookings

            price = getattr(args, "one_cluster_price", None)
            bookings.one_cluster_run(booked, samples=args.train_samples_count, ends=ends,
                                     prices=None if price is None else {chosen.name: price})  # fmt: skip
        elif several:  # no step: why no booking, once for every cluster
            from harness.commands.console.predict import steps

            steps.no_step(list(gpus), optimizer=(setup or {}).get("optimizer") or "sgd",
                          share=asked.optimizer_share,
                          priced=bool(args.gpu_hour_prices), timed=bool(args.train_samples_count))  # fmt: skip
            estimate.say_estimates_compared(args, args.step_estimates)  # the side by side, one command away
    if getattr(args, "json", None):
        _write_answer(args, booked, tokens=tokens is not None, verdict=verdict,
                      known=scaling.steps_known(args, device))  # fmt: skip
    return 0


def _write_answer(args: argparse.Namespace, booked: list, *, tokens: bool, verdict: str, known: bool) -> None:
    """--json FILE: the answer as a script reads it (perfmodel.clusters.decision), written atomically."""
    import json

    from harness.perfmodel.clusters import decision
    from harness.results.files import atomic_write

    why = "" if known else "no step: a CPU's profile names no step, strategy or cap; give --local-step-ms MS"
    record = decision.answer(booked if known else [], tokens=tokens, prices=args.gpu_hour_prices,
                             samples=args.train_samples_count, verdict=verdict, why_none=why)  # fmt: skip
    text = json.dumps(record, indent=2, allow_nan=False) + "\n"
    atomic_write(Path(args.json), lambda tmp: tmp.write_text(text))


class Ended(NamedTuple):
    """One cluster's prediction: its rows at each end, its bookings, a GPU's tokens a step (None: counted in
    samples), the ends' names where its step is bounded (None: the step is its GPU's own) and whether the step given
    is far below its GPU's peak (scaling.step_against_peak's warning: a step that may scale as neither end)."""

    frames: list
    bookings: list
    tokens: float | None
    ends: tuple[str, str] | None
    far_below_peak: bool = False  # the step given, far below its GPU's peak: its ends may bound it not


def run_at_ends(args: argparse.Namespace, chosen, profile, caps: list[float], *, device: str, configs=None,
                setup: dict | None = None, state=None, errors=None) -> Ended:  # fmt: skip
    """cluster.run_steps, once; or, where --local-step-gpu names a GPU whose datasheet figures are not the cluster's,
    at both ends of the step there (precision.step_bounds): the other end quietly first, then the shorter-step end
    printed (its args kept for the page), then whether the two ends' caps and choices agree."""
    from harness.commands.console.predict import optimizer
    from harness.perfmodel.clusters.bookings import of_cluster
    from harness.perfmodel.pick.choice_table import tokens_a_step

    bounds = gpu_ends.local_step_bounds(args, chosen, configs, setup, profile)
    ends = bounds.ends() if bounds is not None and not bounds.same else [(None, args.local_step_ms)]
    given, frames = args.local_step_ms, []
    args.local_step_given, args.local_optimizer_given = given, args.local_optimizer_ms
    if bounds is not None:
        gpu_ends.say_step_bounds(args, chosen, bounds, ends)
    for k in reversed(range(len(ends))):  # the end printed last: the page is written at it, as the console says
        args.local_step_end, step_ms = ends[k]
        if args.local_step_end is not None:
            args.local_step_ms = float(f"{step_ms:.4g}")  # an estimated optimizer estimated again there, below
            args.local_optimizer_ms = None if bounds.optimizer_estimated else bounds.optimizer_ms
        with console.quiet() if k else contextlib.nullcontext():
            optimizer.estimate_local_optimizer(args, chosen, setup, configs, profile)  # a GPU's, not the CPU's share
            if args.local_step_end is not None and args.local_optimizer_given is not None:
                args.local_optimizer_source = "given, scaled"  # by the memory bandwidths' ratio, as said
            args.other_end = (ends[0][0], ends[1][0], frames[0]) if k == 0 and frames else None  # answer's ranges
            frames.insert(0, cluster.run_steps(args, chosen, profile, caps, device=device, configs=configs,
                                               setup=setup, state=state, errors=errors))  # fmt: skip
    batch = (predict_input.memory_batch(args, setup) or int(setup["batch_size"])) if setup else None
    if len(ends) > 1:
        far = bool(getattr(args, "far_below_peak", False))  # the step given, far below its GPU's peak
        args.ends_verdict = gpu_ends.say_ends_verdict(chosen, ends, frames, state=state, errors=errors, batch=batch,
                                                      far_below_peak=far)  # fmt: skip
    tokens = tokens_a_step(state) if state is not None else None
    backward = getattr(args, "calibrated_backward_ms", float("nan"))  # the short end's, run last: the caps' reason
    booked = of_cluster(chosen.name, chosen.gpus_per_node, frames, [_choices(f, state, chosen, errors) for f in frames],
                        batch=batch or 1, tokens=tokens, local_ms=tuple(ms for _, ms in ends),
                        backward_ms=backward, capacity_gib=getattr(chosen, "gpu_memory_gib", 0.0) or 0.0)  # fmt: skip
    return Ended(frames, booked, tokens, (ends[0][0], ends[1][0]) if len(ends) > 1 else None,
                 bool(getattr(args, "far_below_peak", False)))  # fmt: skip


def _choices(rows, state, chosen, errors) -> dict:
    """The choice at each GPU count of one end's rows, as its answer's table made it; {} without a choice."""
    from harness.commands.console.predictions import labelled
    from harness.perfmodel.pick.choice import choose

    if state is None:
        return {}
    frames = [frame.reset_index(drop=True) for _, frame in rows.groupby("world_size", sort=True)]
    return {c.world_size: c for c in choose(labelled(state), frames, getattr(chosen, "gpu_memory_gib", 0.0), errors)}

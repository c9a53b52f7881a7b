"""What `ddpbench predict` is given, checked and said before it predicts: the run and its results folder (older
spellings too), the run (a folder of runs given by mistake is refused, naming its runs), the setup it predicts (the
others said, with their flags), whether its missing profile may be measured on this device, what the run's one-rank
rows leave uncalibrated, a cluster file that is not there, the files it writes."""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

from harness.commands import console
from harness.commands.console import invoked
from harness.config.bench import SIZE_CHOICES, ConfigError

SETUP_FLAGS = (("workload", "--workload"), ("size", "--size"), ("batch_size", "--batch-size"),
               ("optimizer", "--optimizer"))  # fmt: skip
"""The setup's keys predict's flags choose by (dtype has none)."""
BENCH_FLAGS = {**dict(SETUP_FLAGS), "workload": "--workloads"}  # bench's flags for them


def run_and_folder(args: argparse.Namespace) -> tuple[str | None, Path]:
    """(the run, the results folder). `--results` names the folder, as in every other command; the older
    spellings still work, with a warning: `--results RUN` (a run folder, or a run id) and `--results-dir DIR`."""
    folder = args.results_dir or Path("results")  # --results-dir: a silent alias (scripts of an older ddpbench)
    if args.results is None:
        return args.run, folder
    from harness.results import store

    given = Path(args.results)
    is_run = store.is_run_folder(given) or store.is_run_folder(folder / args.results)
    if args.run is None and is_run:
        console.warning(f"predict --results RUN is deprecated; use --run {args.results}")
        return args.results, folder
    if given.is_dir():
        return args.run, given
    raise ConfigError(f"--results {args.results!r} is not a results folder; give the folder with --results "
                      "and the run with --run RUN")  # fmt: skip


def resolve(text: str, results: Path) -> Path:
    """The run given to --run; a folder of runs given as one is refused naming its runs, as `report` names
    the folder above a run given as --results."""
    from harness.perfmodel import predict
    from harness.results import store

    folder = Path(text)
    if store.find_run(text, results) is None and store.list_runs(folder):
        raise ConfigError(f"--run {text!r} is a folder of runs, not one run; give one of them with the folder as "
                          f"--results: --run {store.list_runs(folder)[0].name} --results {text!r} (its newest runs: "
                          f"{store.newest_runs(folder)})")  # fmt: skip
    if store.find_run(text, results) is None and folder.is_dir() and not store.is_run_folder(folder):
        raise ConfigError(
            f"--run {text!r} is a folder without a run.json: no bench run; give a run's folder, or "
            f"a run id in --results {str(results)!r} (its newest runs: {store.newest_runs(results)})"
        )
    return predict.resolve_run(text, results)


def check_counts(args: argparse.Namespace) -> None:
    """--profile-steps, --batch-size: whole numbers ≥ 1; --gpus at most what a prediction takes; several with a run
    (each world size priced from its one profile, as its own world sizes are without --gpus) or a cluster, else one:
    a profile measured here gives its ranks the threads one world size's share of the cores allows."""
    from harness.config.units import MAX_PREDICTED_GPUS

    for flag, value in (("--profile-steps", args.profile_steps), ("--batch-size", args.batch_size)):
        if value is not None and value < 1:
            raise ConfigError(f"{flag} {value} is not valid; give a whole number ≥ 1")
    gpus = ",".join(map(str, args.gpus or ()))
    if args.gpus and args.gpus[-1] > MAX_PREDICTED_GPUS:
        raise ConfigError(f"--gpus {gpus} is not valid; give a whole number from 1 to {MAX_PREDICTED_GPUS:,} for each")
    if len(args.gpus or ()) > 1 and args.run is None and args.cluster is None and not args.nccl_tests:
        raise ConfigError(f"--gpus {gpus}: one world size for a profile measured here (its threads are one world "
                          "size's share of the cores); several with a bench run's profile (--run RUN --gpus "
                          f"{gpus}) or as GPU counts on a cluster's nodes: --cluster NAME|FILE --gpus 2,4 (or "
                          "--nodes 1,2, whole nodes)")  # fmt: skip


def check_cluster_file(name: str | None) -> None:
    """A .toml path that is not there is a missing file, not an unknown profile name (said before any other flag)."""
    from harness.perfmodel.clusters import cluster

    if name:
        cluster.refuse_missing_file(name)


def matching_setups(run_dir: Path, args: argparse.Namespace) -> list[dict]:
    """The run's setups --workload/--size/--batch-size match, in run order; none is refused naming them all. With
    --cluster and --local-step-ms (the step at your batch), a setup at another batch matches: `memory_batch`."""
    from harness.perfmodel import predict

    setups = predict.run_setups(run_dir)
    if accum := predict.accumulated(run_dir):  # its K>1 steps are K micro-batches and one sync, priced as one each
        raise ConfigError(f"run {run_dir.name} measured gradient accumulation (--grad-accum {','.join(map(str, accum))}"
                          "); predict prices one micro-batch and one sync a step, not K: give a run at "
                          "--grad-accum 1")  # fmt: skip
    chosen = [
        s for s in setups if all(not getattr(args, key) or getattr(args, key) == s[key] for key, _ in SETUP_FLAGS)
    ]
    if not setups:  # nothing to match: no flag of the user's is at fault
        raise ConfigError(f"run {run_dir.name} has no configuration measured ok: nothing to predict from; give "
                          "a bench run that finished one")  # fmt: skip
    other_batch = [s for s in setups if all(not getattr(args, key) or getattr(args, key) == s[key]
                                            for key, _ in SETUP_FLAGS if key != "batch_size")]  # fmt: skip
    stepless = _on_the_cpu(run_dir)  # its profile gives no step at any batch: memory (and the estimate) at yours
    if (
        not chosen
        and other_batch
        and args.batch_size
        and (getattr(args, "local_step_ms", None) or stepless)
        and args.cluster
    ):
        # your step at your batch is given (--local-step-ms), or the run is a CPU's, whose profile gives no step at
        # any batch: memory is counted at your batch (memory_batch), the rest scales
        return other_batch
    if not chosen:
        if args.size and args.size not in SIZE_CHOICES:  # a typo ('smal') is refused, not suggested to bench
            raise ConfigError(f"--size {args.size!r} is not valid; choose one of {', '.join(SIZE_CHOICES)}")
        if args.workload:  # likewise 'mpl', in bench's words
            import workloads

            workloads.resolve(args.workload)
        have = ", ".join(map(setup_text, setups))
        bench = " ".join(f"{flag} {getattr(args, key)}" for key, flag in BENCH_FLAGS.items() if getattr(args, key))
        missing = " and ".join(flag for flag, given in (("--cluster", args.cluster), ("--local-step-ms", getattr(
            args, "local_step_ms", None))) if not given)  # fmt: skip
        other = (f"; or give {missing} (your step at batch {args.batch_size}) to predict from this run with memory "
                 f"counted at batch {args.batch_size}" if other_batch and args.batch_size else "")  # fmt: skip
        if other and stepless:  # a CPU's profile gives no step: the cluster alone counts the memory there
            other = (f"; or give --cluster to predict from this run with memory counted at batch {args.batch_size} "
                     f"(and --local-step-ms, your step at batch {args.batch_size}, for its steps)")  # fmt: skip
        raise ConfigError(f"run {run_dir.name} has no measured setup matching --workload/--size/--batch-size/"
                          f"--optimizer (it has: {have}); bench the one you ask for ({invoked.ddpbench_command()} "
                          f"bench {bench} …) and predict from that run{other}")  # fmt: skip
    return chosen


def _on_the_cpu(run_dir: Path) -> bool:
    from harness.results import store

    return store.read_run_meta(run_dir).get("device") == "cpu"


def memory_batch(args: argparse.Namespace, setup: dict) -> int | None:
    """The batch a rank to count memory at where --batch-size asks another than the predicted setup's (accepted with
    --cluster, and --local-step-ms or a CPU run's profile, which gives no step at any batch: `matching_setups`);
    None where it is the setup's own."""
    asked = getattr(args, "batch_size", None)
    return asked if asked and asked != int(setup.get("batch_size") or 0) else None


def say_setup_choice(run_dir: Path, chosen: list[dict]) -> None:
    """With several setups matching, which one is predicted (the first) and the flags that choose each other."""
    from harness.perfmodel import predict

    if len(chosen) < 2:
        return
    every = predict.run_setups(run_dir)
    others = "; ".join(f"{setup_text(s)} by {flags_choosing(s, every)}" for s in chosen[1:])
    console.say(f"ddpbench predict: run {run_dir.name} measured {len(chosen)} workload setups: predicting the "
                f"first, {setup_text(chosen[0])}; the others: {others}")  # fmt: skip


def setup_text(setup: dict) -> str:
    """'gpt2/full batch 8', with the dtype and optimizer where they are not the defaults."""
    from harness.perfmodel.measured import SETUP_DEFAULTS

    text = f"{setup['workload']}/{setup['size']} batch {setup['batch_size']}"
    rest = [str(setup[key]) for key, default in SETUP_DEFAULTS.items() if setup.get(key, default) != default]
    return f"{text} ({', '.join(rest)})" if rest else text


def setups_left_out(run_dir: Path, setup: dict) -> list[str]:
    """The run's setups other than `setup`, each with the flags that predict it ('resnet18/tiny batch 8 by --workload
    resnet18'): what a page of `setup` alone leaves out."""
    from harness.perfmodel import predict

    every = predict.run_setups(run_dir)
    return [f"{setup_text(s)} by {flags_choosing(s, every)}" for s in every if setup_text(s) != setup_text(setup)]


def flags_choosing(setup: dict, setups: list[dict]) -> str:
    """The fewest of predict's setup flags under which `setup` is the first match, so the one predicted (with any
    flags it matches added, still the first: the matches only narrow)."""
    for count in range(1, len(SETUP_FLAGS) + 1):
        for keys in itertools.combinations(SETUP_FLAGS, count):
            first = next(s for s in setups if all(s[key] == setup[key] for key, _ in keys))
            if first == setup:
                return " ".join(f"{flag} {setup[key]}" for key, flag in keys)
    return "no flag of predict (it differs in dtype only)"


def refuse_profiling_elsewhere(run_dir: Path, setup: dict, *, here, cluster: str | None) -> None:
    """A run with no profile for the setup, made on another device: profiled here, its compute would be this
    device's and stored with the run as if the run's own (a CPU profile of a GPU run takes minutes and is
    tens of times slower). Refused before anything is measured, printed or written."""
    from harness.perfmodel import predict
    from harness.results import store

    ran_on = store.read_run_meta(run_dir).get("device") or _configs_device(run_dir)
    if ran_on is None or predict.stored_profile(run_dir, setup) is not None or ran_on == here.type:
        return  # `here.type` (a HereDevice's) last: it asks torch (seconds), which a stored profile spares
    program = invoked.ddpbench_command()  # as typed: a hint pasted into the same shell
    bench = (f"{program} bench --device {ran_on} --gpus 1 --workloads {setup['workload']} --size {setup['size']} "
             f"--batch-size {setup['batch_size']} --dtype {setup['dtype']}")  # fmt: skip
    here_too = (f"{program} predict --cluster {cluster or 'NAME'} --workload {setup['workload']} --size "
                f"{setup['size']} --batch-size {setup['batch_size']} --local-step-ms MS")  # fmt: skip
    raise ConfigError(f"run {run_dir.name} ran on {ran_on} and stored no gradient profile for {setup_text(setup)}: "
                      f"one measured here on {here.type} would be this machine's compute, not the run's. Profile it "
                      f"where it ran (`{bench}` there stores one), or predict from a profile measured here, scaled to "
                      f"your {ran_on} step at one rank: `{here_too}`")  # fmt: skip


def _configs_device(run_dir: Path) -> str | None:
    """The device the run's rows record, for a run.json written before it said."""
    from harness.results import store

    devices = store.read_configs(run_dir).get("device")
    return next(iter(devices.dropna()), None) if devices is not None else None


def warn_uncalibrated(run_dir: Path, configs, setup: dict) -> None:
    """One line where the run's one-rank rows leave the calibration out (`predict.run_calibration` leaves out
    silently what it lacks): the compute is scaled to the baseline's step, else to the reference's, else left
    as the profile's own; DDP's own cost (the reference's step minus the baseline's) needs both."""
    from harness.analysis import roles
    from harness.perfmodel import measured

    _warn_short_warmup(run_dir, configs, setup)
    baseline, reference = roles.baseline_name(), roles.reference_name()
    missing = [name for name, role in ((baseline, "baseline"), (reference, "reference"))
               if measured.pooled_step_s(configs, setup, world=1, role=role) is None]  # fmt: skip
    if not missing:
        return
    if len(missing) == 2:
        how, left = "not", "the profile's own, and DDP's own cost is left out"
    elif baseline in missing:
        how, left = "only partly", (f"scaled to {reference}'s step there, with DDP's own cost inside it rather than "
                                    "apart (scaled as compute, on forward and backward alike)")  # fmt: skip
    else:
        how, left = "only partly", f"scaled to {baseline}'s step, and DDP's own cost is left out"
    rows = measured.setup_rows(configs, setup)
    others = roles.is_reference(rows) & (rows["world_size"] == 1) & ~measured.ddp_defaults_but_cap(rows)
    plain = f"; the calibration reads {reference} with no option but its cap" if others.any() else ""
    console.warning(f"the prediction is {how} calibrated: run {run_dir.name} has no {' or '.join(missing)} step at "
                    f"one rank for {setup_text(setup)} (it has: {_rows_text(configs, setup)}{plain}): the compute is "
                    f"{left}")  # fmt: skip


def _warn_short_warmup(run_dir: Path, configs, setup: dict) -> None:
    """One line where the one-rank rows the calibration reads were measured before their strategy was steady
    (roles.warmup_short_by): an H200 run's DDP start-up, read as its own cost, was 3.68 ms against 1.55."""
    from harness.analysis import roles
    from harness.perfmodel import measured

    rows = measured.setup_rows(configs, setup)
    rows = rows[(rows["world_size"] == 1) & (roles.is_reference(rows) | roles.is_baseline(rows))]
    short = roles.short_warmups(rows)
    if short.empty:  # (rows without a warm-up column have none)
        return
    for (impl, device, warmup, needed), _ in short.groupby(["impl", "device", "warmup", "needed"]):
        console.warning(f"run {run_dir.name}'s one-rank {impl} rows warmed up {int(warmup)} of "
                        f"the {int(needed)} steps {impl} needs on {device}: their steps, and the "
                        "calibration and DDP's own cost read from them, include start-up; rerun them with this "
                        "ddpbench, --warmup left out")  # fmt: skip


def _rows_text(configs, setup: dict) -> str:
    """'stock find_unused_parameters=True at world size 1; local, stock at world size 2': what the setup's rows are,
    each with the options it set (configuration_label), or 'no rows'. A walkthrough read 'has no stock step at one
    rank (it has: …, stock, … at world size 1)' of a run whose stock rows all set find_unused_parameters=True."""
    from harness.perfmodel.measured import setup_rows
    from harness.results.values import configuration_label

    rows = setup_rows(configs, setup)
    labels = rows.assign(label=[configuration_label(i, o) for i, o in zip(rows["impl"], rows["impl_options"],
                                                                          strict=True)])  # fmt: skip
    by_world = labels.groupby("world_size")["label"].agg(lambda names: ", ".join(sorted(set(names))))
    return "; ".join(f"{names} at world size {world}" for world, names in by_world.items()) or "no rows"


def say_auto_size(args: argparse.Namespace, setup: dict, device) -> None:
    """The size --size auto chose, when it is not the whole model: a CPU profiles the small one. Unsaid for a
    model of the user's own file or module, which --size does not scale (a walkthrough was told to use it)."""
    from workloads import resolve

    if not args.size and setup["size"] != "full" and resolve(setup["workload"]).kind not in ("file", "module"):
        console.say(f"ddpbench predict: --size auto profiles {setup['workload']}'s {setup['size']} size on "
                    f"{device.type}; --size full profiles the whole model (slower here)")  # fmt: skip


def profiled_size(source, size: str, device: str, *, counts_full: bool) -> str:
    """The size to profile for --size `size`: auto's, small on the CPU and full on GPUs; with `counts_full` (--cluster,
    whose floors count the full size's gradients on the meta device), small on the CPU for --size full too, where
    --size scales the workload: a CPU profiled hf:bert/full at batch 32 for over 400 s, unsaid how long."""
    if size == "auto":
        return "full" if device == "cuda" else "small"
    if counts_full and size == "full" and device == "cpu" and source.kind not in ("file", "module"):
        return "small"
    return size


def say_profiled_size(args: argparse.Namespace, setup: dict, device, *, trained: dict | None) -> None:
    """With --cluster and --workload: the size profiled where it is not the model counted on the meta device (the
    full size, or --train-wopt's model), said before the profile. Unsaid for a model of your own file or module,
    which --size does not scale."""
    from workloads import resolve

    if resolve(setup["workload"]).kind in ("file", "module") or (setup["size"] == "full" and trained is None):
        return
    whose = "the model you will train" if trained else "the full size"
    asked = args.size or "auto"
    why = ""
    if device.type == "cpu" and asked in ("auto", "full"):  # what profiling the whole model here would cost
        times = _flops_ratio(setup, trained)
        why = (f" (--size {asked} on cpu: {whose} takes {times} its FLOPs a sample; on a GPU --size full profiles "
               "the full size)")  # fmt: skip
    detail = " (the full size with --train-wopt's options)" if trained else ""
    console.say(f"ddpbench predict: profiling {setup['workload']}'s {setup['size']} size{why}; {whose}{detail} is "
                "counted on the meta device: its gradients floor each step")  # fmt: skip


def _flops_ratio(setup: dict, trained: dict | None) -> str:
    """'83×': the full size's (or --train-wopt's model's) training FLOPs a sample over the profiled size's, both
    counted on the meta device (cached: measure.meta_counts); 'more of' where either cannot be counted."""
    from harness.measure import meta_counts

    full = (meta_counts.flops(setup["workload"], "full", trained or {}) or {}).get("flops_per_sample")
    profiled = (meta_counts.flops(setup["workload"], setup["size"], {}) or {}).get("flops_per_sample")
    return f"{full / profiled:,.0f}×" if full and profiled else "more of"


def check_page(args: argparse.Namespace) -> None:
    """`--page FILE`: a run's what-if page (a run and a cluster), an .html file writable in a folder that exists."""
    if not args.page:
        return
    if not args.run or not (args.cluster is not None or args.nccl_tests):
        raise ConfigError(f"--page {args.page!r} needs --run RUN and --cluster NAME|FILE (or --nccl-tests FILE): "
                          "the page is a run's profile on a cluster")  # fmt: skip
    if Path(args.page).suffix != ".html":
        raise ConfigError(f"--page {args.page!r}: give an .html file")
    check_writable(Path(args.page), flag="--page", example="reports/site/whatif.html", kind="an .html file")


OUT_SUFFIXES = (".csv", ".parquet")


def check_out(out: Path) -> None:
    """`--out`: a file of a format we write, where a file can be written."""
    if out.suffix not in OUT_SUFFIXES:
        raise ConfigError(f"--out {str(out)!r}: the extension says the format; give a {' or '.join(OUT_SUFFIXES)} file")
    check_writable(out, flag="--out", example="rows.csv", kind=f"a {' or '.join(OUT_SUFFIXES)} file")


def check_save_profile(args: argparse.Namespace) -> None:
    """`--save-profile`: a fit to save, and a .toml file it can be saved as."""
    if not args.nccl_tests:
        raise ConfigError(f"--save-profile {args.save_profile!r} needs --nccl-tests FILE: it saves the profile "
                          "fitted to your logs (a built-in or your own .toml is already a file)")  # fmt: skip
    out = Path(args.save_profile)
    if out.suffix != ".toml":
        raise ConfigError(f"--save-profile {args.save_profile!r}: a cluster profile is a .toml file, e.g. "
                          "my-cluster.toml")  # fmt: skip
    check_writable(out, flag="--save-profile", example="my-cluster.toml", kind="a .toml file")


def check_writable(out: Path, *, flag: str, example: str, kind: str) -> None:
    """A file (not a folder; `kind` in words, `example` one) in a folder that exists and this user can write in: a
    missing folder is refused, not made, since one mistyped would be made without a word and the file lost in it."""
    from harness.results.layout import can_write_in

    if out.is_dir():
        raise ConfigError(f"{flag} {str(out)!r} is a folder; give a file in it, e.g. {str(out / Path(example).name)!r}")
    if not (folder := out.absolute().parent).is_dir():
        raise ConfigError(f"{flag} {str(out)!r}: no folder {str(out.parent)!r}; give {kind} in a folder that exists, "
                          f"e.g. {example}")  # fmt: skip
    if not can_write_in(folder):
        raise ConfigError(f"{flag} {str(out)!r}: {str(folder)!r} is not a folder this user can write in")


def say_sequence_counted(args: argparse.Namespace, configs, setup: dict | None, trained: dict | None, *,
                         said: str = "") -> None:  # fmt: skip
    """With a step given (--local-step-ms) for a model whose sequence an option sets (a zoo model's seq_len) and no
    --train-wopt seq_len: one line that its tokens (the GPU-hours per tokens, the FLOPs) and activations are the run's
    sequence's (none set: the full size's default), and the flag that counts the one you train at. A walkthrough
    trained at 2,048 tokens a model benched at 512 read 4× the GPU-hours and a quarter of the activations, unwarned
    (the FLOPs line at 3 %, above its 2 %). Unsaid where the FLOPs line (`said`) already names the flag."""
    from harness.commands.predict.full_size import trained_source
    from harness.measure import meta_counts

    given = {key for key, _ in getattr(args, "train_wopt", None) or ()}
    if not (args.local_step_ms and setup) or "seq_len" in given or "--train-wopt seq_len=" in said:
        return
    spec, options = trained_source(configs, setup, trained)
    if spec.partition(":")[0] != "hf" or not (tokens := (meta_counts.flops(spec, "full", options) or {}).get(
            "tokens_per_sample")):  # fmt: skip
        return
    whose = "the run's" if "seq_len" in options else "the full size's default"  # --workload's, or a run's unset
    console.say(f"ddpbench predict: tokens and activations are counted at {whose} sequence, {tokens:,} tokens a "
                "sample; --train-wopt seq_len=M counts the one you train at")  # fmt: skip

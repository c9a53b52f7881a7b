"""`ddpbench report`: refresh each run's model tables, judge its cap sweep again, then build the HTML site from the
results."""

from __future__ import annotations

import argparse
import functools

from harness.commands import console
from harness.config.bench import ConfigError
from harness.results.layout import check_output_folder, check_runs_folder
from harness.results.values import counted


def run(args: argparse.Namespace, *, command: tuple[str, ...]) -> int:
    from harness.commands.console.progress import Status

    check_runs_folder(args.results)
    check_output_folder("--out", args.out)
    import impls

    impls.names()  # a strategy file that breaks its contract refused once, here, not as every run skipped for it
    # on stderr, ended by the next line said (a warning's too): a run's pages take seconds each, the imports several
    return _build(args, Status("report"))


def _build(args: argparse.Namespace, status) -> int:
    from harness.commands.console.invoked import ddpbench_command
    from harness.results.invocation import as_invoked

    status.show(f"reading {args.results}", checked=False)  # before the input is checked: on a terminal only
    from harness.perfmodel import predict
    from harness.perfmodel.clusters import cluster
    from reports import site

    name, whence = _cluster_to_use(args.cluster, site.last_cluster(args.out))
    try:
        chosen = cluster.load(name) if name else None
    except ConfigError as error:  # a profile of yours the site was built with, moved or changed since
        if args.cluster is not None:
            raise
        raise ConfigError(f"{error} ({whence}): give --cluster NAME|FILE, or --cluster '' for none") from None
    if chosen is not None:  # the what-if page predicts one node to 1,024 GPUs
        from reports.pages.whatif.page import world_sizes

        gpus = world_sizes(chosen)
        cluster.refuse_without_network(chosen, [-(-n // chosen.gpus_per_node) for n in gpus],
                                       asked=f"--cluster: the what-if page's {gpus[0]} to {gpus[-1]} GPUs")  # fmt: skip
    # The floor and the model's curves depend on collectives runs that may have come after a bench run.
    status.show("refreshing each run's model tables")  # seconds only where a table is stale
    predict.update_all_model_tables(args.results)
    _rejudge_cap_sweeps(args.results)
    _warn_shared_run_ids(args.results)

    from reports.pages.compare import write_kept_comparisons

    # Each `compare` kept beside the runs, twice: before the run pages, which link the comparisons the site holds,
    # and after them, which the comparison pages link where the site holds them.
    write_kept_comparisons(args.results, args.out)

    def written(
        run_id: str, page, whatif, missing: str
    ) -> None:  # as each run's pages are written: a site of many runs takes a while
        none = f" (no what-if page on {chosen.name}: {as_invoked(missing, ddpbench_command())})" if missing else ""
        console.say(f"  run {run_id}: {page}" + (f" (what if on {chosen.name}: {whatif.name})" if whatif else none))

    built = site.build_site(results=args.results, out=args.out, cluster=chosen, on_run=written,
                            as_predict=functools.partial(as_predict_counts, cluster=chosen),
                            on_step=status.show)  # fmt: skip
    for run_id, page in built.collectives_pages.items():
        console.say(f"  collectives {run_id}: {page}")
    if kept := write_kept_comparisons(args.results, args.out):  # each `compare` kept beside the runs, listed
        site.refresh_index(args.out)
        console.say(f"  {counted(kept, 'comparison')}: {args.out}/compare/")
    on = f"what-if pages on {chosen.name}" if chosen is not None else "no what-if pages"
    console.say(f"report: {built.index} ({on}: {whence})")
    return 0


def _cluster_to_use(given: str | None, kept: str | None) -> tuple[str, str]:
    """(the --cluster to build the what-if pages on, '' for none; why that one, for the console). A plain `report`
    keeps the cluster the site was last built with: it rebuilt a site made with `--cluster dgx-a100` on the
    default, without a word, under the same file names."""
    from reports.site import DEFAULT_CLUSTER

    if given is not None:
        return given, "as --cluster asked"
    if kept is not None:
        return kept, ("the site's last build had none; --cluster NAME|FILE for one" if not kept else
                      "the site's last build's; --cluster NAME|FILE for another, '' for none")  # fmt: skip
    return DEFAULT_CLUSTER, "the default; --cluster NAME|FILE for another, '' for none"


def as_predict_counts(run_dir, configs, *, cluster) -> dict:
    """What a site's what-if page takes to say what `predict --run --cluster` says of the same run: each setup's
    memory as predict counts it (in the dtype the cluster's GPU trains in), the full size's parameters under a smaller
    size's steps (their floors, which the choice ranks by), and the step models' error on the run's own steps (which
    the choice weighs), and the steps predict estimates from the FLOPs of a CPU run (estimated_steps)."""
    from harness.commands.predict import full_size as predict_full_size
    from harness.perfmodel.own_check import own_check

    return {"memory": lambda setup: predict_full_size.memory_rows(run_dir, configs, setup, gpu=cluster),
            "full_params": lambda setup, grad_bytes: predict_full_size.full_parameters(setup, configs, grad_bytes),
            "checked": lambda setup: own_check(run_dir.parent, run_dir, setup, configs=configs,
                                               cluster=cluster.name),
            "step_estimate": lambda: estimated_steps(run_dir, configs, cluster)}  # fmt: skip


def estimated_steps(run_dir, configs, cluster) -> list[tuple[str, str, float, str]]:
    """(whose step, the flags that choose its setup in predict, ms, words) per setup the run measured: the one-GPU step
    `predict --run RUN --cluster NAME` estimates from that setup's FLOPs where no --local-step-ms is given
    (estimate.step_estimate). Every setup's, each named: a run of mlp and gpt2 offered mlp's step alone, unnamed, in
    a command that predicts mlp, to a reader of either. A setup no flag of predict chooses, or whose FLOPs or GPU peak
    are not known, is left out."""
    from harness.commands.console.predict import estimate
    from harness.commands.predict.inputs import flags_choosing
    from harness.perfmodel import predict

    setups = predict.run_setups(run_dir)
    as_predict = argparse.Namespace(run=str(run_dir), results_dir=run_dir.parent, batch_size=None, train_options=None)
    offered = []
    for setup in setups:
        flags = flags_choosing(setup, setups) if len(setups) > 1 else ""
        if flags.startswith("no flag"):
            continue  # predict cannot choose it: no command to offer
        profile = predict.stored_profile(run_dir, setup)
        step = estimate.step_estimate(as_predict, configs, setup, cluster, None, profile)
        if step is not None:
            offered.append((f"{setup['workload']}'s full size", flags, *step))
    return offered


def _rejudge_cap_sweeps(results) -> None:
    """Each run's cap recommendations judged again by today's rule, from its rows, at its own confidence: a sweep
    written before caps of one bucket layout were judged as one point named the luckier of two identical programs
    (and a 278 % 'gain' between them), and its pages would show that until it was benched again. Only where a run
    has them: report writes no verdict a run never made."""
    from harness.analysis.verdicts import sweep
    from harness.results import layout, store
    from reports.pages.pooled import run_confidence

    for run in store.list_runs(results):
        if (run / layout.RECOMMENDATIONS).is_file():
            sweep.write_run_recommendations(run, confidence=run_confidence(store.read_run_meta(run)))


def _warn_shared_run_ids(results) -> None:
    """Two run folders whose run.json name the same run (`cp -r results/X results/X-base`): the site keeps
    a page for each, named by folder, but both pages carry one run id. Said, naming both folders."""
    from harness.results import store

    first_folder: dict[str, object] = {}
    for folder in store.list_runs(results):
        try:
            run_id = store.read_run_meta(folder).get("run_id")
        except (OSError, ValueError, AttributeError):
            continue  # list_runs has named it
        if run_id in first_folder:
            console.warning(f"{first_folder[run_id]} and {folder} both have run_id {run_id!r} in run.json: the site "
                            f"keeps both pages, told apart by folder (runs/{first_folder[run_id].name}.html and "
                            f"runs/{folder.name}.html); give the copy its own run_id in its run.json to tell them "
                            "apart by name as well")  # fmt: skip
        else:
            first_folder[run_id] = folder


def _relink(out, run_dir):
    """The index of the site in `out`, and the run's page and what-if page (on the cluster the site was last built
    with) again, linking the page `predict --page` wrote there (site.relink_run); None where `out` is no site."""
    from harness.perfmodel.clusters import cluster
    from reports import site

    try:
        kept = site.last_cluster(out)
        chosen = cluster.load(kept) if kept else None
    except ConfigError:  # a profile of yours the site was built with, moved since: its next `report` says so
        return site.refresh_index(out)
    counts = functools.partial(as_predict_counts, cluster=chosen) if chosen is not None else None
    return site.relink_run(run_dir, out, chosen, as_predict=counts)


def _ends_words(args: argparse.Namespace) -> str:
    """The page's words for a step measured on another GPU (predict_cluster.run_at_ends): its two ends on the cluster's
    GPU, the one the page is at, and the other end's verdict; '' where the step is the cluster GPU's own."""
    if getattr(args, "local_step_end", None) is None:
        return ""
    return (
        f"{args.ends_said}. This page is at the {args.local_step_end} end, {args.local_step_ms:g} ms. "
        f"Predicted {args.ends_verdict}."
    )


def _step_is_the_estimate(args: argparse.Namespace, chosen, run_dir, configs, setup: dict) -> bool:
    """Whether --local-step-ms is, as offered to 3 figures, the step predict estimates from the model's FLOPs
    (estimate.step_estimate): no GPU's measured step, which the page's title (the index's entry) and banner then say.
    An index listed 'at a 1.09 ms GPU step: books stock at 100 MiB' where 1.09 ms was that estimate, pasted."""
    from harness.commands.console.predict import estimate
    from harness.perfmodel import predict

    if not args.local_step_ms or getattr(args, "local_step_end", None) is not None:  # an end of a bound: not given
        return False
    profile = predict.stored_profile(run_dir, setup)
    offered = estimate.step_estimate(args, configs, setup, chosen, args.train_options, profile)
    return offered is not None and f"{offered[0]:g}" == f"{args.local_step_ms:g}"


def _asked_gpus(args: argparse.Namespace, chosen) -> list[int]:
    """The GPU counts of `predict --gpus` and `--nodes` (or the default's, as the console's), the page's tables' and
    choice's."""
    from harness.commands.predict.counts import gpu_counts

    return gpu_counts(args, chosen)


def write_prediction_page(args: argparse.Namespace, chosen, run_dir, setup: dict, caps: list[float], *,
                          checked=None) -> None:  # fmt: skip
    """`predict --page FILE`: the run's what-if page for the setup predicted, on the cluster chosen, with the
    caps and the --local-step-ms scaling the console used, in one file (plotly.js inside) to share."""
    from pathlib import Path

    from harness.commands.predict import full_size as predict_full_size
    from harness.commands.predict import inputs as predict_input
    from harness.config.bench import ConfigError
    from harness.perfmodel.measured import of_setup
    from harness.results import model_tables, store
    from reports.pages.whatif.page import whatif_page
    from reports.site import INDEX_FACTS

    # The page is of the setup predicted: its rows and its profile only.
    configs, profiles = store.read_configs(run_dir), model_tables.read_gradprofiles(run_dir)
    profiles = of_setup(profiles, setup)
    meta = {**store.read_run_meta(run_dir), "page": Path(run_dir).name}  # the run's folder: its line in a site's index
    html = whatif_page(meta, of_setup(configs, setup), profiles, chosen, caps=caps,
                       local_step_ms=args.local_step_ms, standalone=True, checked=lambda one: checked,
                       memory=lambda one: predict_full_size.memory_rows(  # as the console's
                           run_dir, configs, one, batch_size=predict_input.memory_batch(args, one),
                           options=args.train_options, gpu=chosen),
                       full_params=lambda one, grad_bytes: predict_full_size.full_parameters(
                           one, configs, grad_bytes, options=args.train_options),
                       local_optimizer_ms=args.local_optimizer_ms, batch_size=args.batch_size,
                       optimizer_from=getattr(args, "optimizer_from", "as given"), local_ddp_ms=args.local_ddp_ms,
                       trained=predict_full_size.trained_text(configs, setup, args.train_options)
                       if args.train_options is not None else "", ends=_ends_words(args),
                       gpus=_asked_gpus(args, chosen),
                       site_nav=(Path(args.page).parent / INDEX_FACTS).is_file(),
                       setup_name=predict_input.setup_text(setup),
                       left_out=predict_input.setups_left_out(run_dir, setup),
                       train_run=(samples, getattr(args, "one_cluster_price", None))
                       if (samples := getattr(args, "train_samples_count", None)) else None,
                       step_estimated=_step_is_the_estimate(args, chosen, run_dir, configs, setup))  # fmt: skip
    try:
        store.atomic_write(Path(args.page), lambda tmp: tmp.write_text(html, encoding="utf-8"))
    except OSError as error:  # a folder check cannot foresee every refusal (a full disk, /proc)
        raise ConfigError(f"--page {args.page!r}: {error.strerror or error}") from None
    listed = _relink(Path(args.page).parent, run_dir)  # written into a built site: its pages link it at once
    console.say(f"ddpbench predict: what-if page written: {args.page}" + (f" (listed in {listed})" if listed else
                " (no site's index.html beside it: nothing links it)"))  # fmt: skip

"""The what-if page of a run: its measured gradient-ready profile on a cluster it did not run on —
predicted step time, scaling efficiency and best bucket cap from one node to 1,024 GPUs (its tables and choice
at the GPU counts `predict --nodes` asked, where it did), the cluster profile's sources, next to what the run
measured. Rows in, HTML out; the predictions come
from the performance model (`harness.perfmodel`: DDP's bucket schedule over NCCL's algorithms)."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from harness.analysis import agreement, predicted_why, roles, stats
from harness.analysis.verdicts.sweep import given_cap
from harness.perfmodel.clusters.cluster import Cluster
from harness.perfmodel.clusters.nccl import ClusterLink
from harness.perfmodel.measured import SETUP_DEFAULTS, ddp_own_cost_s
from harness.perfmodel.own_check import OwnCheck
from harness.perfmodel.pick import ranked
from harness.perfmodel.pick.communication import unpriced
from harness.perfmodel.pick.compressed import benched_hooks
from harness.perfmodel.predict import (
    calibration_target,
    priced_caps,
    profiles_by_setup,
    run_calibration,
    scaled_to_local_step,
)
from harness.perfmodel.schedule import Parameters, calibrate, scaled_words
from harness.perfmodel.sharded import cluster_frame, floored_parameters, with_full_size_floors
from harness.perfmodel.sharding.own_costs import fsdp_for_cluster, zero_for_cluster
from harness.results import store
from harness.results.invocation import page_run_words
from reports.figures import whatif as figures
from reports.figures.captions import CAPTIONS
from reports.pages.html import HEADING_NAME, FigureList, esc, name_html, page, table
from reports.pages.notes.winner import milliseconds
from reports.pages.whatif import choice as wc
from reports.pages.whatif import full_size, steps_table
from reports.pages.whatif import memory as wm
from reports.pages.whatif import profile as wp
from reports.pages.whatif.calibration import calibration_note

MAX_GPUS = 1024
DEFAULT_LAYOUT = "DDP's default (25 MiB, a first bucket of 1 MiB)"


def world_sizes(cluster: Cluster) -> list[int]:
    """One node, then doubling, up to 1,024 GPUs; where the profile says how many nodes the cluster has (`nodes`), up
    to them, ending at all of them (a page of 2 nodes' logs opened at 1,024 GPUs on 128 nodes)."""
    most = cluster.nodes * cluster.gpus_per_node if cluster.nodes else MAX_GPUS
    doubled = [n for k in range(most.bit_length()) if (n := cluster.gpus_per_node * 2**k) <= most]
    return doubled + [most] * (cluster.nodes > 0 and doubled[-1] != most)


def setup_label(setup: dict, batch_size: int | None = None) -> str:  # at --batch-size's, where predict was given one
    other = f"{batch_size} per GPU (the run measured {setup['batch_size']})" if batch_size not in (None, setup[
        "batch_size"]) else f"{setup['batch_size']} per GPU"  # fmt: skip
    return f"{setup['workload']}/{setup['size']}, batch {other}"


def predicted_rows(profiles: pd.DataFrame, configs: pd.DataFrame, cluster: Cluster, *, caps: list[float] | None = None,
                   local_step_ms: float | None = None, device: str = "cpu", optimizer_from: str = "as given",
                   full_params: Callable[[dict, int], Parameters | None] | None = None,
                   local_optimizer_ms: float | None = None, batch_size: int | None = None,
                   local_ddp_ms: float | None = None, worlds: list[int] | None = None) -> pd.DataFrame:  # fmt: skip
    """Per stored setup, GPU count and cap (`caps`; else the run's sweep beside the default list): the predicted step,
    the profile calibrated on the run's rows at one rank and scaled to `local_step_ms` (its optimizer's part
    `local_optimizer_ms`, `optimizer_from` in words; DDP's own cost `local_ddp_ms`) as `predict --cluster` does;
    `full_params(setup, the profile's gradient bytes)`: the full size's parameters where the profile is a smaller
    size's, whose floors under each step the rows hold (sharded.with_full_size_floors) unless the profile stands for
    them (sharded.floored_parameters, as predict's console); `batch_size`: --batch-size's;
    `worlds`: the GPU counts (default: world_sizes)."""
    caps = caps or priced_caps(configs)
    link, frames = ClusterLink(cluster), []
    carried = not (local_step_ms and device == "cpu")  # a CPU's own costs are no GPU's
    for setup, profile in profiles_by_setup(profiles):
        from_run = run_calibration(configs, setup, profile=profile)
        optimizer_s, own_s = (None if ms is None else ms / 1e3 for ms in (local_optimizer_ms, local_ddp_ms))  # given
        calibration = scaled_to_local_step(profile, from_run, local_step_ms and local_step_ms / 1e3,
                                           own_carried=carried, optimizer_s=optimizer_s, own_s=own_s)  # fmt: skip
        run_scale = from_run.compute_scale * (batch_size or setup["batch_size"]) / setup["batch_size"]  # as predict's
        sharded = fsdp_for_cluster(
            profile, calibration, configs=configs, setup=setup, run_scale=run_scale, carried=carried
        )
        zero_own = zero_for_cluster(configs, setup, calibration, run_scale=run_scale, carried=carried)
        calibrated = calibrate(profile, calibration)
        target = calibration_target(configs, setup)[0]
        context = {"setup": setup_label(setup, batch_size), "local_step_ms": calibrated.local_step_s * 1e3,
                   "backward_ms": calibrated.backward_s * 1e3, "compute_scale": calibration.compute_scale,
                   "calibrated_to": target, "own_measured": ddp_own_cost_s(configs, setup) is not None,
                   "ddp_own_ms": calibration.reducer_s * 1e3, "local_step_given": local_step_ms or 0.0,
                   "step_batch": batch_size or setup["batch_size"],  # a GPU's samples a step, as the steps are
                   "own_left_out": not carried and target == "baseline" and local_ddp_ms is None,
                   "optimizer_given": local_optimizer_ms is not None, "optimizer_from": optimizer_from,
                   "optimizer_estimated": optimizer_from.startswith("estimated"),  # optimizer.py's words: a GPU's
                   "own_costs_left_out": "; ".join(note for note in (sharded.note, zero_own.note) if note),
                   "own_costs_scaling": own_cost_scaling(calibration, run_scale),  # the caveats' "on your step"
                   "fsdp_own_over": steps_table.own_over(sharded), "fsdp_own_noise": sharded.noise,
                   "zero_own_noise": zero_own.noise, "own_cost_whose": "the run's" if carried else "a CPU's",
                   "grad_mb": profile.grad_bytes / 2**20, "grad_tensors": len(profile.grads), "profiled_on": device,
                   "optimizer_share": calibrated.optimizer_s / (calibrated.local_step_s or 1.0),
                   **{f"setup_{key}": value for key, value in setup.items()}, "size": setup["size"]}  # fmt: skip
        # the console's rule: a profile of as many tensors and nearly the bytes stands for the full size, no floors
        full = full_params(setup, profile.grad_bytes) if full_params else None
        params = floored_parameters(profile, full)
        context["alike_full_size_mb"] = full.grad_bytes / 2**20 if full and not params else float("nan")
        for world in worlds or world_sizes(cluster):
            frame = cluster_frame(calibrated, caps=caps, link=link, world_size=world, zero_own=zero_own,
                                  fsdp_part=sharded)  # fmt: skip
            if params:
                frame = with_full_size_floors(frame, calibrated, params, link=link, world_size=world,
                                              fsdp_profile=sharded.profile, fsdp_own_s=sharded.own_s or 0.0,
                                              zero_own_s=zero_own.added_s).assign(
                    full_size_mb=params.grad_bytes / 2**20)  # fmt: skip
            frames.append(frame.assign(world_size=world, nodes=link.nodes(world), **context))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def own_cost_scaling(calibration, run_scale: float) -> str:
    """How the caveats' own costs, said "on your step", were scaled ('An own cost measured at one rank is scaled
    ×0.00388 from the run's step to yours (…)': own_costs' scale, the compute's over the run's own), for a details
    element under them."""
    scale = calibration.compute_scale / run_scale if run_scale else 1.0
    return f"An own cost measured at one rank is {scaled_words(scale, run_scale)}"


def best_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Per setup and GPU count, the cap the answer names (`agreement.cap_answer`) with its figures, the answer's
    words, the caps tied for fastest, their margin over the fastest cap not tied with them (None: every cap is
    tied), the lead the answer set aside and whether it carries the small-cap caveat."""
    best = []
    for _, group in rows.groupby(["setup", "world_size"], sort=False):
        answer = agreement.cap_answer(group["bucket_cap_mb"], group["step_ms"])
        best.append({**group.iloc[answer.index].to_dict(), "answer": answer.text, "tied": answer.tied,
                     "margin": answer.margin, "lead_set_aside": answer.lead_set_aside,
                     "unproven": answer.unproven, **ranked.full_size_figures(group)})  # fmt: skip
    return pd.DataFrame(best)


def measured_rows(configs: pd.DataFrame) -> pd.DataFrame:
    """What the run measured with the reference strategy (DDP): the step per world size and cap, its repeats
    pooled as the run page pools them (stats.geometric_mean of their medians)."""
    ok = configs[(configs["status"] == "ok") & roles.is_reference(configs)].fillna(SETUP_DEFAULTS)
    if ok.empty:
        return ok
    ok = ok.assign(cap=ok["impl_options"].map(lambda text: DEFAULT_LAYOUT if (c := given_cap(text)) is None else c))
    keys = ["workload", "size", "batch_size", "world_size", "cap"]
    return ok.groupby(keys, dropna=False, sort=False)["step_ms_median"].agg(stats.geometric_mean).reset_index()


def steps_known(meta: dict, local_step_ms: float | None = None) -> bool:
    """Whether the page may give steps, a strategy to book and a cap: the run's compute a GPU's, or scaled to the
    one-GPU step given. A CPU's hides communication a GPU's shows, and `predict --local-step-ms` answers otherwise."""
    return bool(local_step_ms) or meta.get("device") != "cpu"


def whatif_page(meta: dict, configs: pd.DataFrame, profiles: pd.DataFrame, cluster: Cluster, *,
                caps: list[float] | None = None, local_step_ms: float | None = None, standalone: bool = False,
                memory: Callable[[dict], tuple[pd.DataFrame, str]] | None = None, optimizer_from: str = "as given",
                checked: Callable[[dict], OwnCheck | None] | None = None,
                full_params: Callable[[dict, int], Parameters | None] | None = None, trained: str = "",
                local_optimizer_ms: float | None = None, batch_size: int | None = None,
                local_ddp_ms: float | None = None, ends: str = "", gpus: list[int] | None = None,
                site_nav: bool = False, setup_name: str = "", left_out: list[str] = (),
                step_estimate: Callable[[], list[tuple[str, str, float, str]]] | None = None,
                train_run: tuple[float, float | None] | None = None, step_estimated: bool = False) -> str:  # fmt: skip
    """The page in a site (links to the index and the run's page), or `standalone`: one file with plotly.js in it and
    no links, as `predict --page` writes it (`site_nav`: written into a site's folder, the same links from there, and
    plotly.js from the site's asset);
    `caps`, `local_step_ms`, `full_params` as predicted_rows takes them;
    `memory(setup)`: the rows memory is counted from and what size they are of (default: the run's own);
    `checked(setup)`: the step models' errors on the run's own steps; `trained`: what --train-wopt changed; `ends`:
    a step measured on another GPU, at both ends on this one (wm.device_banner); `gpus`: the GPU counts asked
    (`predict --gpus`, `--nodes`), the tables' and the choice's, the figures' from one node to 1,024 GPUs beside them;
    `setup_name`: the one setup a page of `predict --page` predicts, in its title, and `left_out` the run's others,
    each with the flags that predict it, in its banner; `step_estimate()`: per setup, a one-GPU step estimated from
    its model's FLOPs, named, with the flags choosing it and its words, which a CPU run's banner offers
    (wm.device_banner); `train_run`: predict's --train-samples and its price a GPU-hour (None without one), the whole
    run's hours and cost beside the choice (wc.with_run); `step_estimated`: `local_step_ms` is that estimate, no GPU's
    measured step (its title and banner say so)."""
    run_id, device = meta.get("run_id", ""), meta.get("device", "?")
    worlds = sorted(set(gpus)) if gpus else world_sizes(cluster)  # the tables' and the choice's
    rows = predicted_rows(profiles, configs, cluster, caps=caps, local_step_ms=local_step_ms, device=device,
                          full_params=full_params, local_optimizer_ms=local_optimizer_ms, batch_size=batch_size,
                          optimizer_from=optimizer_from, local_ddp_ms=local_ddp_ms,
                          worlds=sorted({*world_sizes(cluster), *worlds}))  # fmt: skip
    up = "" if standalone else "../"  # a page to share: written into a site's folder (`site_nav`), beside its index
    nav = "" if standalone and not site_nav else (
        f'<nav><a href="{up}index.html">all runs</a><a href="{"runs/" if standalone else ""}'
        f'{esc(meta.get("page", run_id))}.html">run {esc(run_id)}</a></nav>')  # fmt: skip
    inside = not rows.empty and bool((rows["calibrated_to"] == "reference").all())  # DDP's cost in the compute
    estimates = step_estimate() if step_estimate and device == "cpu" and not local_step_ms else []  # a GPU's: none
    parts = [
        nav,
        f"<h1>What if run {esc(run_id)} ran on {esc(cluster.name)}?</h1>",
        wm.device_banner(meta, cluster, local_step_ms, inside=inside, ends=ends, estimates=estimates).replace(
            wm.GIVEN_HTML, wm.ESTIMATED_HTML if step_estimated else wm.GIVEN_HTML
        ),
        wm.trained_banner(trained),
        _left_out(setup_name, left_out),
        "" if rows.empty else wp.carried_banner(cluster, rows["nodes"]),
    ]
    run = page_run_words(meta)
    asked = _asked(worlds, cluster) if gpus else within_node(cluster, run)  # under the first setup's answer
    # a page to share is one setup's: the one it predicts (the full size, --batch-size's), the run's profile after
    predicted = full_size.predicted_name(rows, trained) if setup_name and not rows.empty else setup_name
    named = f"{setup_name} (run {run_id})" if predicted == setup_name else predicted
    named = named if setup_name else f"run {run_id}"  # the run's own page, every setup: not ' (run ID)'
    title = f"What if: {named} on {cluster.name}" + (f" at a {local_step_ms:g} ms GPU step" if local_step_ms else "")
    title += " estimated from its FLOPs, not measured" if step_estimated else ""  # the index's entry: a guess said
    title += " (an end of its bound)" if ends else ""  # not the step given: another GPU's, carried (wm.device_banner)
    title += f", from run {run_id}'s {setup_name} profile" if predicted != setup_name else ""
    mark = {"shared": True, "run": str(meta.get("page", run_id))} if standalone else {}  # the index's link to it
    if rows.empty:
        parts.append("<p>This run stored no gradient-ready profile (a bench run at world size 1 stores one), so "
                     "there is nothing to predict from.</p>")  # fmt: skip
        return page(title, "\n".join(parts), depth=1, plots=False, **mark)
    # plotly.js: a page alone carries its own (4.8 MB); one in a site's folder, beside its index, loads the site's
    placed = {"inline": standalone and not site_nav, "depth": 0 if standalone else 1, **mark}
    figs, booked = FigureList(), {}
    rows = rows.assign(size=wm.BENCHED, run_size=rows["size"]) if trained else rows  # memory, floors: another's
    counted = {label: memory(wm.setup_of(group)) for label, group in rows.groupby("setup")} if memory else {}
    marked = {"marked": worlds} if gpus else {}  # the figures' span, the counts asked in bold
    for setup, group in rows.groupby("setup", sort=False):
        default = full_size.default_configuration(meta, group["setup_workload"].iloc[0])  # hf:MODEL_TYPE's full
        at = group[group["world_size"].isin(worlds)]  # the tables' and the choice's GPU counts
        if not steps_known(meta, local_step_ms):  # a CPU's compute: what holds on any GPU, no step to rank by
            workload = wm.setup_of(group).get("workload")
            sized = store.size_scales(meta, {"workload": group["setup_workload"].iloc[0]})  # a file of yours: never
            parts += [full_size.heading(setup, group, trained, default), asked,
                      wm.communication_section(at, cluster, sized=sized, counts=counted.get(setup, (None,))[0],
                                               caveats=wp.unchecked(cluster, at, fitted=False),  # a fit's reach
                                               default=default, hooks=benched_hooks(configs, workload),
                                               unpriced=unpriced(configs, workload)),
                      figs.add(figures.communication_vs_gpus(wm.communicated(group), cluster=cluster.name, **marked),
                               CAPTIONS["whatif_communication"])]  # fmt: skip
            asked = ""
            continue
        best, sure, curve = best_rows(at), checked(wm.setup_of(group)) if checked else None, best_rows(group)
        moves = ranked.miss_could_move_cap([frame for _, frame in at.groupby("world_size", sort=True)])
        # the choice said first as a table (README), then the answer's words and why
        parts += [full_size.heading(setup, group, trained, default),
                  wc.choice_section(configs, at, cluster, worlds, booked=booked, run=train_run,
                                 rows=counted[setup][0] if setup in counted else None, checked=sure),
                  asked, _answer(best, cluster, trained, default, moves=moves), wp.how_sure(sure, cluster, best),
                  calibration_note(group.iloc[0], meta, ended=bool(ends), cluster=cluster.name),
                  figs.add(figures.step_vs_gpus(group, cluster=cluster.name, profiled=_profiled(group), **marked),
                           CAPTIONS["whatif_caps"]),
                  figs.add(figures.strategies_vs_gpus(curve, cluster=cluster.name, **marked),
                           CAPTIONS["whatif_strategies"]),
                  figs.add(figures.efficiency_vs_gpus(curve, cluster=cluster.name, **marked),
                           CAPTIONS["whatif_efficiency"]),
                  steps_table.best_table(best), steps_table.floors_why(at)]  # fmt: skip
        asked = ""
    rows, size_note = configs, ""
    if counted:  # every setup's rows as predict counts them, with what size they are of
        rows = pd.concat([rows for rows, _ in counted.values()], ignore_index=True)
        size_note = "; ".join(dict.fromkeys(note for _, note in counted.values() if note))
    unshared = roles.shards_nothing_words(configs)  # said once a page: the choice's caveats, where any, say it first
    said_above = bool(unshared) and esc(unshared) in "".join(parts)
    parts += [_measured_section(configs), wm.memory_section(rows, cluster, worlds, size_note=size_note,
                                                            batch_given=batch_size, shards_said=said_above, run=run),
              wp.sources_section(cluster), wp.published_section(cluster)]  # fmt: skip
    return page(title, "\n".join(parts), **placed, book=_book_words(booked.get("row")) if mark else "")


def _book_words(row: tuple | None) -> str:
    """'stock at 25 MiB, 300.3 ms at 64 GPUs': the choice's table's row at the most GPUs (its book and step cells as
    they read), which the site's index gives beside the page's link; '' without a table."""
    if not row:
        return ""
    gpus, book, step = row[:3]
    return f"{book}, {step} ms at {int(gpus):,} GPUs" if step else f"{book} at {int(gpus):,} GPUs"


def _answer(best: pd.DataFrame, cluster: Cluster, trained: str = "", default: str = "", *, moves: bool = True) -> str:
    """The cap from the fewest GPUs to the most, in the console answer's words, and why the step at the most GPUs
    costs what it does (the same sentence `predict --cluster` ends with); where the rows hold the full size's floors,
    what they bound for the model to train first, the profiled size's figures after, said to be its; the published
    tables' caveat only where their misses could move the cap named (`moves`: ranked.miss_could_move_cap)."""
    last = best.iloc[-1]
    why_last = predicted_why.predicted_step(last, backward_ms=last["backward_ms"], own_ms=last["ddp_own_ms"])
    why_last += ranked.algorithm_changes([r for _, r in best.iterrows()], "comm_algorithm", lambda n: f"{n:,} GPUs")
    before = " (before DDP's own cost, left out)" if last["own_left_out"] else ""  # the calibration note says why
    said = (f"(ZeRO-1's and FSDP2's steps at the same cap are in the table below): {esc(_caps_by_size(best))}. "
            f"Efficiency{before} {full_size.efficiencies(best, 'scaling_efficiency', ', ', nodes=True)}. "
            f"<b>Why</b> at {int(last['world_size'])} GPUs: {esc(why_last)}."
            f"{wp.caveat(cluster, int(last['nodes'])) * moves}{_small_cap_caveat(best)}"
            f"{wp.unchecked(cluster, best, fitted=False)}")  # fmt: skip
    if "full_size_efficiency_at_most" not in best or best["full_size_efficiency_at_most"].isna().all():
        return f'<p class="headline"><b>Best cap for DDP</b> {said}</p>'
    profiled = wm.size_words(esc(last["size"]))
    return (full_size.full_size_lead(best, trained, default) +
            f'<p class="headline"><b>{profiled[0].upper() + profiled[1:]} profile</b> ({last["grad_mb"]:.4g} MiB of '
            f"gradients, the run's), <b>best cap for DDP</b> {said} Its cap is of its own buckets, not of the model "
            "to train.</p>")  # fmt: skip


def _left_out(setup_name: str, left_out: list[str]) -> str:
    """Where the page predicts one of the run's setups: the others, each with the flags that predict it."""
    if not left_out:
        return ""
    return (f'<p class="banner">This page predicts {esc(setup_name)} alone; the run measured '
            f"{esc('; '.join(left_out))}: <code>predict --page</code> with those flags for each.</p>")  # fmt: skip


def _asked(worlds: list[int], cluster: Cluster) -> str:
    """A page of `predict --page`: that the tables and the choice are at the GPU counts asked, the figures wider."""
    span = sorted({*world_sizes(cluster), *worlds})
    asked = ", ".join(f"{w:,}" for w in worlds)
    return (
        f"<p>At the GPU counts asked (<code>--gpus</code>, <code>--nodes</code>: {asked} GPUs): the answer, the "
        "choice and the tables; "
        f"the figures from {span[0]:,} to {span[-1]:,} GPUs, those counts in bold on their axes.</p>"
    )


def within_node(cluster: Cluster, run: str = "RUN") -> str:
    """How to price fewer GPUs than a node (a user who asked about 4 GPUs found the page start at 8, one node):
    predict's --gpus, which the collective model prices on the node's own links as any count of ranks in a node.
    `run`: what names the run after --run (invocation.page_run_words)."""
    fewer = [n for n in (2, 4) if n < cluster.gpus_per_node]
    if not fewer:
        return ""
    counts = ",".join(map(str, fewer))
    return (f"<p>Fewer GPUs than {esc(cluster.name)}'s {cluster.gpus_per_node} a node ({' or '.join(map(str, fewer))}"
            f"): <code>ddpbench predict --run {esc(run)} --cluster {esc(cluster.name)} --gpus {counts} --page "
            "FILE.html</code> prices them in one node, this page's tables and choice at those counts.</p>")  # fmt: skip


def _profiled(group: pd.DataFrame) -> str:
    """Whose gradients a setup's predictions bucket where the model to train is another ("the tiny size's"), else ""."""
    return wm.size_words(group["size"].iloc[0]) if full_size.has_floors(group) else ""


def _caps_by_size(best: pd.DataFrame) -> str:
    """The cap to use and where it changes with the GPU count, in the console answer's words."""
    changes = [(int(row.world_size), row.answer) for _, row in best.iterrows()]
    merged = [change for k, change in enumerate(changes) if k == 0 or change[1] != changes[k - 1][1]]
    return merged[0][1] if len(merged) == 1 else "; ".join(f"{text} from {n} GPUs" for n, text in merged)


def _small_cap_caveat(best: pd.DataFrame) -> str:
    text = agreement.SMALL_CAP_CAVEAT
    return f" <i>{esc(text[0].upper() + text[1:])}.</i>" if best["unproven"].any() else ""


def _measured_section(configs: pd.DataFrame) -> str:
    measured = measured_rows(configs)
    if measured.empty:
        return ""
    cells = [[name_html(f"{r.workload}/{r.size}, batch {r.batch_size}", HEADING_NAME), str(int(r.world_size)),
              r.cap if isinstance(r.cap, str) else f"{r.cap:g}", milliseconds(r.step_ms_median)]
             for r in measured.itertuples()]  # fmt: skip
    return ("<h2>What the run measured</h2><p>The reference strategy's step on the run's own machine, per world "
            "size and cap (the geometric mean of its repeats' median steps, as on the run page): the evidence the "
            "profile comes from.</p>" + table(["setup", "ranks", "cap MiB", "step"], cells))  # fmt: skip

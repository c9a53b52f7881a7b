"""What `ddpbench predict --nccl-tests` checks in the logs it fits a cluster profile to, said before it predicts: a
collectives run of CPU processes given as a GPU cluster's, a log of another node shape or GPU than the profile's,
logs of two GPUs, a log given twice or two of one case, and a fit pushed to the edge of its search or far from the
profile's own figures."""

from __future__ import annotations

from pathlib import Path

from harness.commands import console
from harness.config.bench import ConfigError
from harness.results.values import counted


def warn_if_not_gpus(run: Path) -> None:
    """A collectives run of CPU processes fitted to a GPU cluster's profile: nothing else would say so."""
    from harness.results import model_tables

    if (meta := model_tables.read_collectives_meta(run)).get("device") == "cpu":
        console.warning(f"--nccl-tests {str(run)!r} measured {meta.get('config', {}).get('gpus', '?')} CPU "
                        f"processes over {meta.get('backend', 'gloo')}, not GPUs over NCCL: the fit gives the "
                        "profile a CPU's bandwidths and latencies, and predicts that machine")  # fmt: skip


def warn_other_node_shape(base, logs) -> None:
    """A log whose ranks per node are not the profile's GPUs per node: fitted as the profile's nodes, its rows
    would move the wrong levels (a 2-node log whose '# Rank' lines name no hosts reads as 16 ranks on one node,
    and its network's rows then fit an NVLink node). Said per log, with what to check."""
    for log in logs:
        per_node = log.ranks / log.nodes
        if per_node == base.gpus_per_node:
            continue
        hint = ("if it ran on several nodes, its '# Rank' lines must name their hosts" if per_node > base.gpus_per_node
                else "a profile of nodes that size (its gpus_per_node) fits it as measured")  # fmt: skip
        console.warning(f"nccl-tests log {log.path}: {log.ranks} ranks on {counted(log.nodes, 'node')}, "
                        f"{per_node:g} a node, where {base.name} has {base.gpus_per_node} GPUs a node; it is fitted "
                        f"as {base.name}'s nodes: {hint}")  # fmt: skip


FAR_MOVED = 3.0
"""A fitted bandwidth this many times off the profile's own value is more than a cluster's spread."""


def warn_far_moved(base, fitted: dict[str, float]) -> None:
    """A bandwidth level the fit moved FAR_MOVED times or more from the profile's value: a ring inside a DGX H100
    fitted to 24-56 GB/s (370 built in) came from a single 64 KiB row, and the page then printed it as the
    cluster's. Said per level: what few rows asked for, or logs of another cluster than the profile's."""
    from harness.perfmodel.clusters.nccltests_fit import FIT_BOUNDS, FIT_MIN_BYTES

    for field, value in fitted.items():
        own = getattr(base, field)
        # at an edge of the search: no row pinned it (a latency at the lower one is none, as NCCL's IB plugin has it)
        low = value <= FIT_BOUNDS[0] * 1.01 and not field.endswith("latency_us")
        if low or value >= FIT_BOUNDS[1] / 1.01:
            console.warning(f"the fit pushed {field} to {value:.4g}, the edge of its search: the rows of "
                            f"{FIT_MIN_BYTES // 1024} KiB and more do not pin it, so it measures nothing, nor do the "
                            f"small messages{' across nodes' * field.startswith('inter')} predicted with it; set "
                            "it in a profile of yours (--cluster FILE.toml) from your hardware's figures")  # fmt: skip
        elif field.endswith("_gbps") and own > 0 and not 1 / FAR_MOVED < value / own < FAR_MOVED:
            console.warning(f"the fit moved {field} from {own:g} to {value:.4g} ({value / own:.2g}×): a level moved "
                            "this far rests on the few rows it limits, or the logs are of another cluster than "
                            f"{base.name}; check those rows before planning by it")  # fmt: skip


def other_gpu(base, logs) -> str:
    """'the logs' GPU 'NVIDIA A100-SXM4-80GB' is an A100, l40s-pcie's an L40S (its description)': the GPU the logs
    name against the one the profile's description names; "" where they agree or either names none."""
    from harness.config.precision import gpu_family

    gpu = next((log.gpu for log in logs if log.gpu), "")
    theirs, own = gpu_family(gpu), gpu_family(base.description)
    if theirs is None or own is None or theirs == own:
        return ""
    return f"the logs' GPU {gpu!r} is an {theirs}, {base.name}'s an {own} (its description)"


def warn_if_other_gpu(base, logs) -> None:
    """Logs of one GPU fitted to another's profile: the bandwidths move, NCCL's per-generation latencies and the
    profile's algorithms (NVLS, say) stay the profile's. Said, not refused: a user's cluster may have none closer
    (--save-profile is: refuse_poor_save)."""
    from harness.perfmodel.clusters import cluster, nccltests

    gpu = next((log.gpu for log in logs if log.gpu), "")
    own = nccltests.profile_for_gpu(gpu) if gpu else None
    theirs = cluster.load(own) if own is not None and own != base.name else None
    if (differs := other_gpu(base, logs)) and (theirs is None or theirs.tuner_generation == base.tuner_generation):
        console.warning(f"{differs}: fitting one GPU's logs to another's profile moves its bandwidths to theirs "
                        "and plans that cluster with them; fit logs of the profile's own GPU")  # fmt: skip
        return
    if theirs is None:
        return
    if theirs.tuner_generation != base.tuner_generation:
        console.warning(f"the nccl-tests logs are of {gpu!r} ({theirs.generation}; ddpbench's profile {own}) and "
                        f"are fitted to {base.name}, a {base.generation} profile: the fit moves its bandwidths, not "
                        f"NCCL's {base.tuner_generation} latencies or its algorithms; --cluster {own} starts from the "
                        "logs' own GPU")  # fmt: skip
    else:
        console.say(f"ddpbench predict: the nccl-tests logs are of {gpu!r}: fitting {base.name} (as --cluster "
                    f"asks), not the built-in {own}")  # fmt: skip


def refuse_mixed_gpus(logs) -> None:
    """One profile describes one kind of GPU: logs of two are two clusters, each fitted on its own."""
    named = {}
    for log in logs:
        if log.gpu:
            named.setdefault(log.gpu, log.path)
    if len(named) > 1:
        (first, one), (second, other) = list(named.items())[:2]
        raise ConfigError(f"--nccl-tests: the logs are of different GPUs ({first!r} in {one}, {second!r} in {other}); "
                          "one profile describes one cluster: fit each cluster's logs on their own")  # fmt: skip


def refuse_repeated(paths) -> None:
    """A log given twice (`--nccl-tests A A B`, or one file by two paths) counts its rows twice in the fit."""
    seen: dict[Path, str] = {}
    for path in map(str, paths):
        if (key := Path(path).resolve()) in seen:
            raise ConfigError(f"--nccl-tests {path!r} is given twice (as {seen[key]!r} too): its rows would "
                              "weigh twice in the fit; give each log once")  # fmt: skip
        seen[key] = path


def warn_same_case(logs) -> None:
    """Two logs of one collective and node count: each row counts, so that case weighs as many times in the fit."""
    cases: dict[tuple[str, int], list[str]] = {}
    for log in logs:
        cases.setdefault((log.collective, log.nodes), []).append(str(log.path))
    for (collective, nodes), paths in cases.items():
        if len(paths) > 1:
            console.warning(f"nccl-tests logs {', '.join(paths)} are each {collective} on {counted(nodes, 'node')}: "
                            f"the fit weighs that case {len(paths)}× against the others; give one log a case unless "
                            "that is meant")  # fmt: skip


POOR_SAVE = 0.25
"""A fit whose mean busbw error passes this is not saved as a profile unless --save-anyway insists."""


def refuse_poor_save(args, fit, base, logs) -> None:
    """--save-profile of a fit that does not describe its logs (mean busbw error over 25 %) or of another GPU's logs:
    a saved profile is used later without its warnings (predict --cluster FILE, report), so it is refused, one line,
    nothing written, unless --save-anyway."""
    if getattr(args, "save_anyway", False):
        return
    differs = other_gpu(base, logs)
    why = [f"its mean busbw error on the logs is {fit.mean_abs:.1%}, over {POOR_SAVE:.0%}"] * (fit.mean_abs > POOR_SAVE)
    why += [differs] * bool(differs)
    if why:
        raise ConfigError(f"--save-profile {args.save_profile!r}: not saved: {'; '.join(why)} (see above); a profile "
                          "used later carries no such warning: --save-anyway saves it all the same")  # fmt: skip


WORST_SHOWN = 8
"""Rows of the logs shown beside the fit's predictions: all where so few, else the worst so many."""


def say_rows_beside(fit, logs) -> None:
    """Each log row beside the fitted profile's prediction (busbw, GB/s; +: predicted faster), the worst where many:
    a mean error hides which sizes miss and which way."""
    from harness.perfmodel.clusters.nccltests_fit import _points, predicted, size_text

    rows = [(log, row, predicted(fit.cluster, log, row.nbytes).busbw_gbps) for log, row in _points(logs)]
    shown = sorted(rows, key=lambda r: -abs(r[2] / r[1].busbw_gbps - 1))[:WORST_SHOWN]
    shown.sort(key=lambda r: (str(r[0].path), r[1].nbytes))
    which = "each row" if len(shown) == len(rows) else f"the {len(shown)} worst of {len(rows)} rows"
    console.say(f"ddpbench predict: the logs beside the fit, {which} ≥ 64 KiB (busbw GB/s; +: predicted faster):")
    width = max(len(Path(log.path).name) for log, _, _ in shown)
    console.say(f"  {'log':<{width}s}  {'size':>9s}  {'measured':>8s}  {'fitted':>7s}  {'error':>7s}")
    for log, row, fitted in shown:
        console.say(f"  {Path(log.path).name:<{width}s}  {size_text(row.nbytes):>9s}  {row.busbw_gbps:8.2f}  "
                    f"{fitted:7.2f}  {fitted / row.busbw_gbps - 1:+7.1%}")  # fmt: skip

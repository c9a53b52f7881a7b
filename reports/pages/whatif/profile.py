"""What the what-if page says of the cluster profile its predictions rest on: every number with its source
(NCCL's algorithms and the latency scale a fit moved among them), how far it was checked against
published tables or fitted to the user's logs, and how sure a prediction is (the fit's own error and the node
counts past the logs, before the step models' check on the run's own steps)."""

from __future__ import annotations

import pandas as pd

from harness.perfmodel.clusters.cluster import Cluster, is_builtin
from harness.perfmodel.clusters.published import cap_caveat, published_check_summary, published_checks
from harness.perfmodel.own_check import OwnCheck
from reports.pages.html import esc, table


def how_sure(checked: OwnCheck | None, cluster: Cluster, best: pd.DataFrame) -> str:
    """How sure the steps above are: a profile fitted to the user's logs, the fit's error on them and the node counts
    of `best` it is carried past them to, first (what the network's figures rest on); then the step models against
    the run's own steps, in `predict`'s words, where predict checked them."""
    said = [fitted_reach(cluster, best)] if cluster.fitted_to else []
    said += [checked.words] if checked and checked.words else []
    said = [esc(words[0].upper() + words[1:]) for words in said]
    return f"<p class=takeaway><b>How sure</b>: {'. '.join(said)}.</p>" if said else ""


def fitted_reach(cluster: Cluster, best: pd.DataFrame) -> str:
    """'the network is fitted to 2 nccl-tests log(s) … worst 9.3%; on 8 to 64 nodes it is carried past what they
    measured': a fitted profile's own error and how far past its logs the node counts of `best` go."""
    past = sorted({int(n) for n in best["nodes"] if n > cluster.fitted_nodes})
    reach = f"{cluster.fitted_nodes} node{'s' if cluster.fitted_nodes > 1 else ''}"
    return (f"the network is fitted to {cluster.fitted_to}; " + (
        f"on {span(past)} nodes it is carried past what they measured ({reach})" if past
        else f"every node count here is within what they measured ({reach})"))  # fmt: skip


def carried_banner(cluster: Cluster, nodes) -> str:
    """Near the top of the page, where a profile fitted to the user's logs is predicted on more nodes than they
    measured: which node counts are carried past them (said only at the end of a long paragraph, a page of 2 nodes'
    logs opened at 1,024 GPUs on 128 nodes with nothing to say so)."""
    past = sorted({int(n) for n in nodes if n > cluster.fitted_nodes}) if cluster.fitted_to else []
    if not past:
        return ""
    reach = f"{cluster.fitted_nodes} node{'s' if cluster.fitted_nodes > 1 else ''}"
    hint = "" if cluster.nodes else (" (<code>nodes = N</code> in the profile ends the page at your cluster's "
                                      "size: docs/clusters.md)")  # fmt: skip
    return (f'<p class="banner">Your nccl-tests logs reach {reach}: on {span(past)} nodes this page\'s network is '
            f"carried past what was measured{hint}.</p>")  # fmt: skip


def unchecked(cluster: Cluster, best: pd.DataFrame, *, fitted: bool = True) -> str:
    """Node counts past the largest published table the profile was checked against, as predict warns; of a profile
    fitted to logs, those past the logs (`fitted`: unless How sure says them)."""
    checked = max((c["nodes"] for c in published_checks(cluster)), default=None)
    beyond = sorted({int(n) for n in best["nodes"] if checked is not None and n > checked})
    if cluster.fitted_to:  # fitted to logs: checked against them, up to their node count
        past = sorted({int(n) for n in best["nodes"] if n > cluster.fitted_nodes})
        reach = f"{cluster.fitted_nodes} node{'s' if cluster.fitted_nodes > 1 else ''}"
        return (f" <i>Your logs reach {reach}: on {span(past)} nodes the fitted network is carried past what they "
                "measured.</i>" if past and fitted else "")  # fmt: skip
    if not beyond:
        return ""
    return (f" <i>{esc(cluster.name)}'s largest published table is of {checked} node{'s' if checked > 1 else ''}: "
            f"its predictions on {span(beyond)} nodes are unchecked.</i>")  # fmt: skip


def span(counts: list[int]) -> str:
    return str(counts[0]) if len(counts) == 1 else f"{counts[0]} to {counts[-1]}"


def caveat(cluster: Cluster, nodes: int) -> str:
    """The check against published tables where a cap chosen there rests on sizes it found off (as predict says): at
    the most GPUs' node count, which the choice's caveats leave to it (choice.choice_section)."""
    said = cap_caveat(cluster, nodes)
    return f" <i>{esc(said[0].upper() + said[1:])}.</i>" if said else ""


NOT_FITTED = "not fitted: NCCL's latencies as its tuner has them"
"""latency_scale's source where a profile leaves it at 1 and says none."""


def sources_section(cluster: Cluster) -> str:
    """Every field the predictions rest on, its value and its source: the algorithms NCCL may pick,
    the latency scale (which a fit to logs moves), the node's and the network's numbers, the GPU's memory."""
    values = {"gpus_per_node": cluster.gpus_per_node, "generation": cluster.generation, "cpu": cluster.cpu,
              "algorithms": ", ".join(cluster.algorithms),
              "latency_scale": cluster.latency_scale,
              "intra.nvlinks": cluster.nvlinks, "intra.link_gbps": cluster.link_gbps,
              "intra.busbw_gbps": cluster.intra_busbw_gbps, "intra.nvls_busbw_gbps": cluster.nvls_busbw_gbps,
              "inter.nics": cluster.nics, "inter.nic_gbps": cluster.nic_gbps,
              "inter.busbw_gbps": cluster.inter_busbw_gbps, "inter.latency_us": cluster.inter_latency_us,
              **({"gpu_memory_gib": cluster.gpu_memory_gib} if cluster.gpu_memory_gib else {})}  # fmt: skip
    default = {"latency_scale": NOT_FITTED} if cluster.latency_scale == 1.0 else {}
    cells = [[esc(key), esc(f"{value:g}" if isinstance(value, float) else value),
              esc(cluster.sources.get(key) or default.get(key, "not given"))]
             for key, value in values.items()]  # fmt: skip
    where = f"built-in profile {cluster.name}" if is_builtin(cluster) else "your profile"
    return (f"<h2>The cluster profile</h2><p>{esc(cluster.description)} ({esc(where)}); the model: "
            "NCCL's tuner, with NCCL master's constants (2026) whatever NCCL the cluster runs "
            "(docs/clusters.md).</p>" + table(["field", "value", "source"], cells))  # fmt: skip


def published_section(cluster: Cluster) -> str:
    """How far this profile's bus bandwidths were from every published nccl-tests table of its GPU:
    the error to expect of the communication behind the predictions above, by node count."""
    checks = published_checks(cluster)
    if cluster.fitted_to:  # fitted to the user's logs: how well, and how far past them the page reaches
        return (f"<h2>Against your logs</h2><p>This profile's levels were fitted to {esc(cluster.fitted_to)}; the "
                "source of each fitted number above says so. Beyond "
                f"{cluster.fitted_nodes} node{'s' if cluster.fitted_nodes > 1 else ''}, the predictions carry the "
                "fitted network past what your logs measured. Published tables were not checked against a fitted "
                "profile (docs/clusters.md).</p>")  # fmt: skip
    if not checks:
        what = "no published table was found for it" if is_builtin(cluster) else "a profile of your own"
        return (f"<h2>Against published figures</h2><p>Not checked: {what}. Fit it to your nccl-tests logs "
                "(<code>ddpbench predict --nccl-tests FILE</code>), which says the fit's own error.</p>")  # fmt: skip
    cells = [[str(c["nodes"]), esc(c["table"]), esc(c["sizes"]), f"{c['mean_abs_error']:.1%}",
              f"{c['worst_error']:+.1%} ({esc(c['worst_size'])})", f"{c['within_25']} of {c['count']}",
              esc(c["conditions"]), f'<a href="{esc(c["source"])}">source</a>'] for c in checks]  # fmt: skip
    return ("<h2>Against published figures</h2><p>The model's all-reduce bus bandwidth on this profile against "
            "every published nccl-tests table of its GPU we found, none fitted to: "
            f"{esc('; '.join(published_check_summary(checks)))}. The sizes where a table is far off are "
            "where the predictions above are least sure (docs/measured/cluster-model.md).</p>"
            + table(["nodes", "table", "sizes", "mean abs error", "worst (size)", "sizes within 25 %",
                     "conditions", "source"], cells))  # fmt: skip

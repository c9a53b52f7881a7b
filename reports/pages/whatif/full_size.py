"""What the what-if page says of the full size, where the profile is a smaller size's: which model `--size full`
is (for `hf:MODEL_TYPE`, transformers' default configuration of that type, not a model of yours), the setup's
heading, and the headline of what the full size's floors bound."""

from __future__ import annotations

import pandas as pd

from harness.perfmodel.pick import ranked
from reports.pages.html import HEADING_NAME, esc, name_html


def default_configuration(meta: dict, workload: str) -> str:
    """ "transformers' default llama configuration": what `--size full` builds of `hf:MODEL_TYPE` (workloads/_zoo/hf.py:
    the configuration as it is, AutoConfig.for_model's defaults, with the run's --wopt), which a page calling it "the
    model to train" passed off as the reader's model; '' for every other workload, whose full size is the model as
    named (a registered workload's, a torchvision model at its standard crop, a configuration file as written)."""
    source = (meta.get("workloads") or {}).get(workload) or {}
    if source.get("kind") != "hf" or source.get("path"):
        return ""
    model_type = str(source.get("spec") or workload).removeprefix("hf:").split("[")[0]
    options = ", ".join(f"{key}={value}" for key, value in (source.get("options") or {}).items())
    return f"transformers' default {model_type} configuration" + (f" with {options}" if options else "")


def not_yours(default: str) -> str:
    """ "transformers' default llama configuration, not a model of yours: …": default_configuration's words, and what
    counts the reader's own model instead."""
    return f"{default}, not a model of yours: --train-wopt KEY=VALUE, or hf:your/config.json, counts yours"


def yours_instead(default: str) -> str:
    """' (transformers' default llama configuration, not a model of yours: …)' after "the full size"; '' for ''."""
    return f" ({not_yours(default)})" if default else ""


def has_floors(group: pd.DataFrame) -> bool:
    """Whether a setup's rows hold the full size's floors (`full_size_mb`): a run of several setups has the column
    for all of them, empty for those it does not apply to (a file of yours, which --size does not scale)."""
    return "full_size_mb" in group and bool(group["full_size_mb"].notna().any())


def heading(setup: str, group: pd.DataFrame, trained: str, default: str = "") -> str:
    """A setup's heading on the what-if page: where the page knows the model to train (its floors, `full_size_mb`),
    that model first and the profiled one after it, since a heading of the benched size read as the answer for the
    model to train, at the batch its steps are at; `trained`: what --train-wopt changed; `default`:
    default_configuration's words, where the full size is transformers' defaults, which the page cannot call the model
    to train."""
    workload = str(group["setup_workload"].iloc[0]) if "setup_workload" in group else ""
    if not has_floors(group):
        return f"<h2>{_shortened(setup, workload)}</h2>"
    profiled = _shortened(_profiled(setup, group, workload), workload)
    if default and not trained:
        full = _shortened(workload + "/full", workload)
        return f"<h2>{full}, {esc(default)}{_at_batch(group)} (profiled: {profiled})</h2>"
    target = f"{workload} with {trained}" if trained else f"{workload}/full"
    return f"<h2>{_shortened(target, workload)} to train{_at_batch(group)} (profiled: {profiled})</h2>"


def predicted_name(rows: pd.DataFrame, trained: str) -> str:
    """'vit/full batch 256 (adamw)': the setup a page of one setup predicts, in predict's words for the run's
    (inputs.setup_text): the model to train where the rows hold its floors (`trained`: what --train-wopt changed),
    at the batch its steps are at (--batch-size's); a page titled by the run's setup alone read 'batch 8' over a
    heading of batch 256, and two such pages were one link text on the index."""
    from harness.perfmodel.measured import SETUP_DEFAULTS

    first = rows.iloc[0]
    workload = str(first["setup_workload"])
    target = (f"{workload} with {trained}" if trained else f"{workload}/full") if has_floors(rows) else (
        f"{workload}/{first['setup_size']}")  # fmt: skip
    rest = [str(first[f"setup_{key}"]) for key, default in SETUP_DEFAULTS.items()
            if first.get(f"setup_{key}", default) != default]  # fmt: skip
    return f"{target} batch {int(first['step_batch'])}" + (f" ({', '.join(rest)})" if rest else "")


def _profiled(setup: str, group: pd.DataFrame, workload: str) -> str:
    """'mlp/tiny, batch 1 per GPU': the size and batch the run measured (not --batch-size's, which the steps are at;
    the run's size, `run_size`, where the rows say 'benched': the console's and the run's tables' label)."""
    if not {"size", "setup_batch_size"} <= set(group):
        return setup
    first = group.iloc[0]
    size = first["run_size"] if "run_size" in group else first["size"]
    return f"{workload}/{size}, batch {int(first['setup_batch_size'])} per GPU"


def _at_batch(group: pd.DataFrame) -> str:
    """', batch 8 per GPU': the batch the predicted steps are at where --batch-size set another than the run's."""
    if not {"step_batch", "setup_batch_size"} <= set(group):
        return ""
    step, measured = (int(group[column].iloc[0]) for column in ("step_batch", "setup_batch_size"))
    return f", batch {step} per GPU" if step != measured else ""


def _shortened(text: str, workload: str) -> str:
    """`text`, escaped, with only the workload's name shortened where long (a config file's path): the words after it
    say what the heading is and stay whole."""
    if workload and text.startswith(workload):
        return name_html(workload, HEADING_NAME // 2) + esc(text[len(workload) :])
    return name_html(text, HEADING_NAME)


def full_size_lead(best: pd.DataFrame, trained: str, default: str = "") -> str:
    """What the full size's floors bound for the model to train (the best rows' `full_size_*`): the headline's first
    paragraph, before the profiled size's own figures, which would read as the model to train's; `default` as
    heading takes it."""
    last, rows = best.iloc[-1], [row for _, row in best.iterrows()]
    floor, least = (f"{last[key]:.4g}" for key in ("full_size_step_floor_ms", "full_size_least_step_ms"))
    # the floor is the table's; the choice ranks DDP by the higher of it and the profiled size's step: a floor once
    # read 'at least 300.3 ms' where the table's floor said 300.1
    ranked_at = "" if least == floor else f"; it ranks DDP at {least} ms, the profiled size's step, the higher"
    whose = f"the model you will train ({esc(trained)})" if trained else "the full size"
    which = "" if trained else esc(yours_instead(default))
    return (f'<p class="headline"><b>{whose[0].upper() + whose[1:]}</b>{which}, {last["full_size_mb"]:,.0f} MiB of '
            f"gradients (counted on the meta device): DDP's scaling efficiency is at most "
            f"{efficiencies(best, 'full_size_efficiency_at_most', ' and at most ')} with "
            f"{'its' if trained else 'the full size' + chr(39) + 's'} gradients: there its step takes at least "
            f"{floor} ms at {last['full_size_cap_mb']:g} MiB, its floor (where the choice ranks it: "
            f"{esc(last['full_size_cap_why'])}{ranked_at}) against {last['local_step_ms']:.4g} ms on one GPU, on the "
            "profile's compute (the last columns of the table under the figures give each strategy's floor)."
            f"{_full_size_why(last, ranked.algorithm_changes(rows, 'full_size_algorithm', _gpus))}</p>")  # fmt: skip


def efficiencies(best: pd.DataFrame, column: str, joint: str, *, nodes: bool = False) -> str:
    """'0.999 on one node (8 GPUs) and at most 0.981 at 1024 GPUs' (`joint` between; `nodes`: '… on 128 nodes'): the
    fewest GPUs' and the most's; '0.999 on 4 nodes (32 GPUs)' where the rows are of one GPU count (`predict --nodes
    4`), said once; '0.999 from 4 nodes (32 GPUs) to 64 GPUs' where every count's is the same at three places (a
    page read 'at most 0.999 on 4 nodes … and at most 0.999 at 64 GPUs')."""
    first, last = best.iloc[0], best.iloc[-1]
    fewest = f"{first[column]:.3f} on {nodes_text(int(first['nodes']))} ({int(first['world_size'])} GPUs)"
    if len(best) > 1 and len({f"{value:.3f}" for value in best[column]}) == 1:  # one figure, said once
        return (f"{fewest.replace(' on ', ' from ', 1)} to {int(last['world_size'])} GPUs"
                + f" on {nodes_text(int(last['nodes']))}" * nodes)  # fmt: skip
    most = f"{last[column]:.3f} at {int(last['world_size'])} GPUs" + f" on {nodes_text(int(last['nodes']))}" * nodes
    return fewest if len(best) == 1 else f"{fewest}{joint}{most}"


def _gpus(count: int) -> str:
    return f"{count:,} GPUs"


def nodes_text(count: int) -> str:
    """'one node', '2 nodes': where a row's GPUs are (the fewest asked need not be one node: `predict --nodes 2,4`)."""
    return "one node" if count == 1 else f"{count} nodes"


def _full_size_why(row: pd.Series, changes: str = "") -> str:
    """' <b>Why</b> at 1024 GPUs: …': the full size's all-reduces at the cap DDP is ranked at (`full_size_cap_mb`),
    the profiled size's 'why' being of other buckets; '' where the row has no such floor (ranked.full_size_why)."""
    said = ranked.full_size_why(row, row.get("backward_ms", float("nan")), row.get("full_size_cap_mb", float("nan")))
    return f" <b>Why</b> at {int(row['world_size'])} GPUs: {esc(said)}{esc(changes)}." if said else ""

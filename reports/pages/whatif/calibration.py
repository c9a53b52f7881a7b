"""The what-if page's calibration note: what the run's one-rank rows changed in the profile (its compute scaled to the
run's step, or to one given with --local-step-ms; DDP's own cost added or left out), the full size's floors where the
rows hold them, and the one-GPU step every scaling efficiency on the page is against."""

from __future__ import annotations

import pandas as pd

from harness.perfmodel.memory import mib_text
from harness.results import store
from harness.results.invocation import page_run_words
from harness.results.values import ms_text
from reports.pages.html import esc
from reports.pages.whatif.memory import size_words


def calibration_note(row: pd.Series, meta: dict | None = None, *, ended: bool = False, cluster: str = "NAME") -> str:
    """What the run's one-rank rows changed in the profile, and the step every efficiency is against (`ended`: an end
    of the bound on this GPU of a step given on another, as the banner says, not the step given; `cluster`: the
    page's, which the predict command that scales so names)."""
    to, given = row["calibrated_to"], row["local_step_given"]
    gave = ("an end of the bound on this GPU of the step given on another, above" if ended else
            "given to predict with --local-step-ms, not measured")  # fmt: skip  # a reader of the page gave nothing
    own = ("; DDP's own cost measured on the CPU is left out (no GPU's; --local-ddp-ms MS gives yours)"
           if row["own_left_out"] else f" and DDP's own cost ({ms_text(row['ddp_own_ms'])} ms a step at one rank) added"
           if row["ddp_own_ms"] else "; DDP's own cost at one rank (the reference's step less the baseline's, never "
           "below 0) is 0 ms here" if row["own_measured"] else "; DDP's own cost is not measured (the run has no "
           "reference step at one rank), so none is added" if to == "baseline" else "")  # fmt: skip
    scaled = {"baseline": f"The profile's compute is scaled ×{row['compute_scale']:.4g} to the run's baseline step "
              "at one rank (timed over every repeat)",
              "reference": f"The profile's compute is scaled ×{row['compute_scale']:.4g} to the run's reference step "
              "at one rank (timed over every repeat; the run has no baseline step there, so DDP's own cost is inside "
              "the compute rather than apart)"}.get(to, "The profile is as measured (the run has no baseline or "
                                                      "reference step at one rank to scale it to)")  # fmt: skip
    if given:
        first = f"first calibrated on the run's {to} step at one rank" if to else "the run has no step at one rank"
        step = "with DDP (its own cost inside)" if to == "reference" else "without DDP"
        scaled = (f"The profile's compute is scaled ×{row['compute_scale']:.4g} so that one GPU's step {step} "
                  f"is {given:g} ms ({gave}; {first})")  # fmt: skip
        if row.get("optimizer_given"):
            part = ms_text(row["optimizer_share"] * row["local_step_ms"])
            scaled += f", its optimizer {part} ms of it, {row['optimizer_from']}"
    whose = "the reference's" if to == "reference" else "the baseline's, plus DDP's own cost"
    if given:
        whose = gave + (", plus DDP's own cost" if row["ddp_own_ms"] else "")
    flag, before = " --local-step-ms MS" if given else "", ", both before DDP's own cost" * bool(row["own_left_out"])
    sized = store.size_scales(meta or {}, {"workload": row.get("setup_workload")})  # a file of yours: never
    other = "" if row["size"] == "full" or not sized else (
        " A model of another size (the one you will train) has other buckets: bench it for its own page.")  # fmt: skip
    if not pd.isna(alike := row.get("alike_full_size_mb", float("nan"))):  # the console's words (alike_words)
        other = f" The full size's gradients, {mib_text(alike)}, are as many tensors: the profile's caps hold for it."
    if "full_size_mb" in row and not pd.isna(row["full_size_mb"]):
        other += (f" The table's last three columns are the least each step can take with the full size's "
                  f"parameters, {row['full_size_mb']:,.0f} MiB of gradients (counted on the meta device), on this "
                  "profile's compute as scaled, its split of forward, backward and optimizer included (when each "
                  "full-size gradient is made is not measured): DDP's all-reduces one after another, the last after "
                  "backward; ZeRO-1's optimizer shard and broadcasts after DDP's; FSDP2's gathers and "
                  "reduce-scatters one at a time (docs/clusters.md). The choice ranks each strategy by its floor "
                  "where that is above its step, and ZeRO-1 by its floor wherever it has one.")  # fmt: skip
    size = size_words(esc(row["size"])) if sized else "the model's as the run built it (--size scales no file)"
    return (f"<p>The profile is {size}: {row['grad_mb']:.4g} MiB of gradients in "
            f"{int(row['grad_tensors'])} tensors, which every prediction below buckets and all-reduces.{other} "
            f"{scaled}{own}, as <code>ddpbench predict --run {esc(page_run_words(meta or {}))} --cluster "
            f"{esc(cluster)}{flag}</code> does. "
            f"Scaling efficiency = the one-GPU step{'' if row['own_left_out'] else ' with DDP'} "
            f"({row['local_step_ms']:.4g} ms: {whose}) over each "
            f"predicted step{before}.</p>")  # fmt: skip

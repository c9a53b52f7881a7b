"""Beside the answer's headline: where a sharding strategy's lead over stock on a CPU run is mostly its optimizer step,
in bench's own figures (aggregate.RunData.optimizer_steps: the optimizer step as timed), that share and what gives a
GPU's answer (harness.analysis.optimizer_lead)."""

from __future__ import annotations

import pandas as pd

from harness.analysis.optimizer_lead import GPU_ANSWER, lead_words
from harness.results.invocation import page_run_words
from reports.pages.evidence import TOO_FEW, evidence
from reports.pages.html import esc


def optimizer_lead(contenders: pd.DataFrame, reference: pd.Series | None, run) -> str:
    """' On this CPU 80% of its lead over stock is the optimizer step (747 → 289 ms as timed, …): a GPU's optimizer
    takes another share, so `ddpbench predict …` gives a GPU's answer.' where the leader (the first of `contenders`,
    the answer's rows but the floor) shards its state across ranks (not at one rank, where it shards nothing), `run`
    (aggregate.RunData) ran on the CPU and its optimizer step is most of its lead over `reference` (stock), 'of its
    lead so far' where the repeats are too few to tell the two apart; '' else."""
    configs = run.configs
    if contenders.empty or reference is None or "device" not in configs or not (configs["device"] == "cpu").all():
        return ""
    best = contenders.iloc[0]
    if best["strategy"] == reference["strategy"] or not bool(best.get("shards_state")) or best["world_size"] < 2:
        return ""
    open_ = evidence(best, reference)["judged"] == TOO_FEW
    said = lead_words(run.optimizer_steps, best["config_ids"], reference["config_ids"], str(reference["strategy"]),
                      so_far=open_)  # fmt: skip
    if not said:
        return ""
    predict = f"ddpbench predict --run {page_run_words(run.meta)} --cluster NAME --local-step-ms MS"
    command = f"<code>{esc(predict)}</code>"
    return f" On this CPU {esc(said)}: {GPU_ANSWER.format(command=command)}."

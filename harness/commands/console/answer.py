"""The choice as a table, said before its long form: per GPU count, the strategy to book, its step, the fastest
of the rest that fits and how far behind it is, and what the pick rests on. The rules are
harness.perfmodel.choice's; its `choice_words` (the line after the table, and the what-if page) say every
strategy's step and every caveat in full."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.commands.console import say
from harness.perfmodel.choice import Choice, choose, turning_share, whole_step, without_optimizer
from harness.results.values import ms_text

if TYPE_CHECKING:
    import pandas as pd

HEADER = ("GPUs", "book", "step ms", "next that fits", "behind", "the pick rests on")


def choice_table(state: pd.DataFrame, capacity_gib: float, frames: list[pd.DataFrame], *, cluster_name: str,
                 optimizer_ms: float = 0.0, step_ms: float = 0.0, errors=None) -> None:  # fmt: skip
    """Say the table (`state` labelled by `strategy`, as choice_words takes it); nothing where `choose` has no
    choice to make."""
    choices = choose(state, frames, capacity_gib, errors)
    if not choices:
        return
    without = {c.world_size: c for c in choose(state, without_optimizer(frames, optimizer_ms), capacity_gib, errors)
               } if optimizer_ms else {}  # fmt: skip
    rows = [answer_row(c, without.get(c.world_size), optimizer_ms=optimizer_ms, step_ms=step_ms) for c in choices]
    widths = [max(len(row[k]) for row in (HEADER, *rows)) for k in range(len(HEADER) - 1)]
    say(f"ddpbench predict: the answer on {cluster_name}, the fastest step of what fits {capacity_gib:g} GiB a GPU "
        "(≥: the full size's floor ranks it; the line after says each step and what it rests on):")  # fmt: skip
    for row in (HEADER, *rows):
        cells = [cell.rjust(width) if k in (0, 2, 4) else cell.ljust(width) for k, (cell, width) in
                 enumerate(zip(row, widths, strict=False))]  # fmt: skip
        say("  " + "  ".join([*cells, row[-1]]).rstrip())


def answer_row(choice: Choice, without: Choice | None, *, optimizer_ms: float, step_ms: float) -> tuple[str, ...]:
    """One GPU count's cells: (GPUs, book, step ms, next that fits, behind, the pick rests on)."""
    if not choice.picked:
        return (str(choice.world_size), "none modelled fits", "", "", "", "")
    first = choice.picked[0]
    book = " or ".join(c.strategy for c in choice.picked)
    step = f"{'≥' if first.profiled_ms is not None else ''}{first.step_ms:.4g}"
    rest = sorted((c for c in choice.others if c.fits and c.step_ms is not None), key=lambda c: c.step_ms)
    runner = rest[0] if rest else None
    behind = f"+{runner.step_ms / whole_step(first) - 1:.1%}" if runner else ""
    notes = []
    if len(choice.picked) > 1:
        notes.append(f"a tie: a lead under {max(choice.apart, 0.04):.0%} is more than the model can tell")
    if turns := turning_share(choice, without, optimizer_ms=optimizer_ms, step_ms=step_ms):
        notes.append(f"holds{turns}")
    if first.left_out_ms:  # FSDP's own cost as a CPU measured it, scaled: no GPU's
        left = ms_text(first.left_out_ms)
        notes.append(f"its step leaves out its own cost ({left} ms more than DDP's as a CPU measured it, scaled)")
    notes += [f"{c.strategy} may be faster ({c.step_ms:.4g} ms before its own cost)" for c in choice.maybe]
    unfit = sorted(c.strategy for c in (*choice.others, *choice.maybe) if not c.fits)
    notes += [f"{', '.join(unfit)} do{'es' * (len(unfit) == 1)} not fit"] if unfit else []
    return (str(choice.world_size), book, step, runner.strategy if runner else "", behind, "; ".join(notes))

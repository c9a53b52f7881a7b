"""The comparison page of two runs: per configuration, the ratio and whether it is significant.

Rendering only: `harness.analysis.compare` computes the table; this turns it into a page of the site.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from harness.results import store
from reports.html import esc, page

VERDICT_CLASS = {"slower": "failed", "faster": "ok", "no significant change": "", "too few repeats to tell": ""}


def verdict_cell(r) -> str:
    """The verdict (bold unless no change), the repeats a decision needs when too few, the noise behind it."""
    text = f"<b>{esc(r.verdict)}</b>" if r.verdict != "no significant change" else esc(r.verdict)
    if r.verdict == "too few repeats to tell":
        text += esc(f" (have {min(r.base_repeats, r.new_repeats)}, need about {r.repeats_needed})")
    return text + (f"<br><small>{esc(r.noise)}</small>" if getattr(r, "noise", "") else "")


def comparison_table(frame: pd.DataFrame) -> str:
    head = "".join(
        f"<th>{t}</th>"
        for t in (
            "strategy",
            "options",
            "workload",
            "size",
            "ranks",
            "base ms",
            "new ms",
            "ratio",
            "95% CI",
            "p",
            "verdict",
        )
    )
    rows = []
    for r in frame.itertuples():
        options = " ".join(f"{k}={v}" for k, v in json.loads(r.impl_options or "{}").items())
        cells = [
            esc(r.impl), esc(options), esc(r.workload), esc(r.size), esc(r.world_size),
            f"{r.base_ms:.2f}", f"{r.new_ms:.2f}", f"{r.ratio:.3f}", f"{r.ratio_ci_low:.3f}–{r.ratio_ci_high:.3f}",
            f"{r.p_value:.2g}", verdict_cell(r),
        ]  # fmt: skip
        rows.append(f'<tr class="{VERDICT_CLASS[r.verdict]}">' + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return f"<div class=scroll><table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"


def comparison_page(base: str, new: str, frame: pd.DataFrame, warnings: list[str], *, threshold: float) -> str:
    parts = [
        '<p><a href="../index.html">all runs</a></p>',
        f"<h1>{esc(new)} against {esc(base)}</h1>",
        f"<p>Ratio = new / base step time: per repeat the median step (slowest rank per step), then the geometric "
        f"mean over repeats. A configuration is <b>slower</b> or <b>faster</b> only when the 95% interval of the "
        f"ratio (Welch's t over repeats) excludes 1 and the ratio is beyond {threshold:.0%}; when the repeats "
        f"cannot decide, <b>too few repeats to tell</b>.</p>",
    ]
    if warnings:
        items = "".join(f"<li>{esc(w)}</li>" for w in warnings)
        parts.append(f'<div class="banner"><b>The environments differ</b>; compare with care:<ul>{items}</ul></div>')
    parts.append(comparison_table(frame) if not frame.empty else "<p>No configuration was measured in both runs.</p>")
    return page(f"ddpbench: {new} vs {base}", "\n".join(parts), depth=1)


def write_comparison_page(out: Path, base: str, new: str, frame: pd.DataFrame, warnings, *, threshold: float) -> Path:
    path = Path(out) / "compare" / f"{base}_vs_{new}.html"
    text = comparison_page(base, new, frame, warnings, threshold=threshold)
    store.atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return path

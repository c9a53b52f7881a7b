"""The run page's section 6, whether to trust every number: the step time's distribution, series and noise per
configuration, each configuration's gradient parity (over its repeats: failed where any failed), and when each
verdict was decided."""

from __future__ import annotations

import pandas as pd

from harness.analysis import stats
from harness.results.values import configuration_label
from reports import aggregate
from reports.aggregate import RunData
from reports.figures import steps as stepfigures
from reports.figures.captions import CAPTIONS, NOISE_REPEATS
from reports.pages import evidence
from reports.pages.html import FigureList, esc, name_html, table
from reports.pages.run.run_sections import config_cell, one_repeat_each

NOT_CHECKED = "not checked"  # a repeat's note where parity was checked on another (harness.handoff.records)


def parity_by_configuration(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration over its repeats: failed where any repeat failed (the note names those
    repeats), ok where every judged one passed, the largest |Δ| of any repeat with the tolerance it had, the label
    saying how many."""
    keys = [key for key in aggregate.SAME_CONFIGURATION if key in rows]
    pooled = []
    for _, group in rows.groupby(keys, dropna=False, sort=False):
        verdicts = [None if v is None or pd.isna(v) else bool(v) for v in group["parity_ok"]]
        failed = [int(r) + 1 for r, v in zip(group["repeat"], verdicts, strict=True) if v is False]
        first = group.iloc[0]
        label = configuration_label(first["impl"], first["impl_options"])
        pooled.append({
            "config_label": f"{label} · w{first['world_size']} ({stats.repeats_text(len(group))})",
            **{key: first[key] for key in ("workload", "size") if key in group},
            "parity_ok": False if failed else (True if True in verdicts else None),
            "parity_max_abs_diff": group["parity_max_abs_diff"].max(),
            "parity_tolerance": _at_largest(group),
            "parity_note": f"failed in repeat{'s' * (len(failed) > 1)} {', '.join(map(str, failed))}" if failed
                           else _pooled_note(group),
        })  # fmt: skip
    return pd.DataFrame(pooled)


def _at_largest(group: pd.DataFrame) -> float | None:
    """The tolerance the repeat with the largest |Δ| was judged by (none in a run from before it was recorded)."""
    if "parity_tolerance" not in group or group["parity_max_abs_diff"].isna().all():
        return None
    return group.loc[group["parity_max_abs_diff"].idxmax(), "parity_tolerance"]


def _pooled_note(group: pd.DataFrame) -> str:
    """The repeats' parity notes, each once; 'not checked' (the repeats after the one that was) said as the
    others', so that 'identical to the reference …; not checked' does not read as one verdict and its denial; a
    later repeat's 'not judged: <why>' said once, within the first's 'not judged: <why>; <what it measured>'."""
    notes = list(dict.fromkeys(n for n in group["parity_note"] if isinstance(n, str) and n))
    # a never-judged strategy's later repeats say its reason alone, the first its reason and what it measured
    notes = [n for n in notes if not any(other.startswith(f"{n}; ") for other in notes)]
    if NOT_CHECKED in notes and len(notes) > 1:
        return "; ".join(n for n in notes if n != NOT_CHECKED) + " (the other repeats: not checked)"
    return "; ".join(notes)


def parity_table(configs: pd.DataFrame) -> str:
    """Each configuration's gradient parity; with repeats, one row per configuration over them; the model first where
    the run measured several (each configuration's rows are alike but for it: a failure would not say whose)."""
    ok = aggregate.labelled(configs)
    ok = parity_by_configuration(ok) if aggregate.has_repeats(ok) and not ok.empty else ok
    models = _models(ok)
    several = models.nunique() > 1
    ok = ok.assign(model=models).sort_values("model", kind="stable") if several else ok
    rows = [
        [
            *([name_html(r.model)] if several else []),
            esc(r.config_label),
            config_cell("parity_ok", r.parity_ok, None),
            config_cell("parity_max_abs_diff", r.parity_max_abs_diff, None),
            config_cell("parity_tolerance", getattr(r, "parity_tolerance", None), None),
            esc(r.parity_note),
        ]
        for r in ok.itertuples()
    ]
    classes = ["failed" if r.parity_ok is False else "" for r in ok.itertuples()]
    head = [*(["model"] if several else []), "configuration", "parity", "max |Δ| vs reference", "tolerance there",
            "note"]  # fmt: skip
    return table(head, rows, row_classes=classes)


def _models(rows: pd.DataFrame) -> pd.Series:
    """Each row's workload/size ('gpt2/tiny'), its workload alone where it has no size."""
    if "workload" not in rows:
        return pd.Series("", index=rows.index)
    sizes = rows["size"].fillna("") if "size" in rows else pd.Series("", index=rows.index)
    return rows["workload"].astype(str) + sizes.map(lambda size: f"/{size}" if size else "")


def trust_section(run: RunData, workloads: list[str], figs: FigureList) -> str:
    parts = ["<h2 id=trust>6. Is every number trustworthy?</h2>"]
    shown, note = one_repeat_each(run.configs)
    for workload in workloads:
        figure = stepfigures.step_time_distribution(shown, run.boxes, workload=workload)
        parts.append(figs.add(figure, CAPTIONS["distribution"], once=note))
        parts.append(figs.add(stepfigures.step_time_series(shown, run.series, workload=workload),
                              CAPTIONS["series"], once=note))  # fmt: skip
        noise, said = (aggregate.over_repeats(shown, run.configs, "step_ms_cv"), NOISE_REPEATS) if note else (shown, "")
        parts.append(figs.add(stepfigures.noise(noise, workload=workload), CAPTIONS["noise"] + said))
    parts.append("<h3>Gradient parity</h3>" + parity_table(run.configs))
    parts.append(evidence.decisions_section(run.decisions, run.meta.get("config") or {}))
    return "\n".join(parts)

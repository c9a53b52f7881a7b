"""Warnings shown where decisions are made (the top of a run page, next to the answer): noisy
configurations, ranks sharing a device, a run with one world size, a run that did not finish.
Pure: a run's metadata and configs in, a list of sentences (HTML) out."""

from __future__ import annotations

from typing import Any

import pandas as pd

from harness.analysis import stats, why
from reports.pages.html import esc


def noisy(configs: pd.DataFrame) -> list[str]:
    """The configurations whose step CV, the median over their repeats (as the answer's noise column and
    stats.noise_note judge it), is above NOISY_CV: counted as configurations, not as repeats."""
    ok = configs[configs["status"] == "ok"]
    if "step_ms_cv" not in ok or ok.empty:
        return []
    keys = [key for key in why.SAME_CONFIGURATION if key in ok]
    cvs = ok.groupby(keys, dropna=False)["step_ms_cv"].median() if keys else ok["step_ms_cv"]
    loud = cvs[cvs > stats.NOISY_CV]
    if loud.empty:
        return []
    return [
        f"<b>Noisy:</b> {len(loud)} of {len(cvs)} measured configurations have a step CV above {stats.NOISY_CV:g} "
        f"(the median over their repeats; up to {loud.max():.2f}); differences of a few per cent between them may "
        "be chance. Rerun with more --steps and --repeats on a quieter machine before acting on them."
    ]


def shared_devices(meta: dict[str, Any], configs: pd.DataFrame) -> list[str]:
    """Ranks per node above the GPUs (on GPUs) or rank threads above the cores (on the CPU) of the machine."""
    environment = meta.get("environment") or {}
    worlds = configs["world_size"].dropna().astype(int) if "world_size" in configs else pd.Series(dtype=int)
    if worlds.empty:
        return []
    nnodes = int(configs["nnodes"].max()) if "nnodes" in configs and configs["nnodes"].notna().any() else 1
    per_node = -(-int(worlds.max()) // max(nnodes, 1))
    if meta.get("device") == "cuda":
        gpus = environment.get("gpu_count") or len(environment.get("gpus") or [])
        if gpus and per_node > gpus:
            return [
                f"<b>Devices shared:</b> {per_node} ranks per node ran on {gpus} GPU{'s' if gpus != 1 else ''}, so "
                "several ranks took turns on one device: step times and scaling efficiency at that world size "
                "measure the oversubscription, not the strategy."
            ]
        return []
    threads = int(meta.get("threads_per_rank") or 1)
    cores = environment.get("cpu_count")
    if cores and per_node * threads > cores:
        return [
            f"<b>Cores shared:</b> {per_node} ranks × {threads} thread(s) ran on {cores} cores: ranks took turns, "
            "so communication and compute slowed each other more than on separate devices."
        ]
    return []


def one_world_size(configs: pd.DataFrame) -> list[str]:
    ok = configs[configs["status"] == "ok"]
    if ok.empty or set(ok["world_size"].dropna().astype(int)) != {1}:
        return []
    return [
        "<b>One rank only:</b> at world size 1 nothing is communicated, so there is no strategy or bucket cap to "
        "recommend; run with --gpus 2 or more."
    ]


def interrupted(meta: dict[str, Any], configs: pd.DataFrame, *, resume_command: str) -> list[str]:
    """Planned configurations that have no row: the run was stopped (Ctrl-C, a crash, a lost node)."""
    planned = {c.get("config_id") for c in meta.get("configurations") or [] if c.get("config_id")}
    done = set(configs["config_id"]) if "config_id" in configs else set()
    missing = planned - done
    if not missing:
        return []
    return [
        f"<b>Interrupted:</b> {len(planned & done)} of {len(planned)} planned configurations were recorded; "
        f"{len(missing)} never ran. Finish the run with <code>{esc(resume_command)}</code>."
    ]


def alerts(meta: dict[str, Any], configs: pd.DataFrame, *, resume_command: str) -> str:
    sentences = [
        *interrupted(meta, configs, resume_command=resume_command),
        *shared_devices(meta, configs),
        *one_world_size(configs),
        *noisy(configs),
    ]
    return "".join(f'<p class="banner warning">{s}</p>' for s in sentences)


def status_counts(meta: dict[str, Any], configs: pd.DataFrame) -> dict[str, int]:
    """ok, failed, skipped and planned-but-never-run (a run stopped early), counted apart."""
    counts = configs["status"].value_counts().to_dict() if "status" in configs and not configs.empty else {}
    planned = {c.get("config_id") for c in meta.get("configurations") or [] if c.get("config_id")}
    done = set(configs["config_id"]) if "config_id" in configs else set()
    return {
        "ok": int(counts.get("ok", 0)),
        "failed": int(counts.get("failed", 0)),
        "skipped": int(counts.get("skipped", 0)),
        "not run": len(planned - done),
    }

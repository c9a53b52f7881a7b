"""A run's `summary.json`: its counts and where its wall time went, added up over the sessions that
made it. A run stopped (Ctrl-C, --fail-fast) and finished with `--resume` is one run: each session
adds its wall time, training-step time and fixed costs to the earlier sessions' (never overwrites
them); `session` keeps the latest session's own figures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.results.layout import SUMMARY_JSON


def earlier(run: Path) -> dict[str, Any]:
    """What the run's earlier sessions recorded; {} for a new run (or a summary that cannot be read)."""
    from harness.results import store

    try:
        return store.read_json(Path(run) / SUMMARY_JSON)
    except (OSError, ValueError):
        return {}


def write(plan, wall_s: float, *, complete: bool) -> dict[str, Any]:
    """This session's figures added to the earlier sessions', written, and returned."""
    from harness.analysis import stats
    from harness.results import store

    configs = store.read_configs(plan.run)
    steps = store.read_steps(plan.run)
    ran_now = {c.config_id for c in plan.configurations}  # a resumed session counts only what it ran
    step_s = stats.training_seconds(steps[steps["config_id"].isin(ran_now)])
    before = earlier(plan.run)
    # where the wall time went, phase by phase, the steps among them: no fixed cost (named so before 2026-12-05)
    # other: the launcher between launches, polling, the last read
    session = {**plan.phases_s, "other": max(0.0, wall_s - sum(plan.phases_s.values()))}
    phases = dict(before.get("phases_s") or before.get("fixed_cost_s") or {})
    for phase, seconds in session.items():
        phases[phase] = phases.get(phase, 0.0) + seconds
    totals = {
        "wall_s": before.get("wall_s", 0.0) + wall_s,
        "training_step_s": before.get("training_step_s", 0.0) + step_s,
        "phases_s": phases,
        "status_counts": configs["status"].value_counts().to_dict(),
        "configurations": len(configs),
        "sessions": before.get("sessions", 1 if before else 0) + 1,
        "complete": complete,
        "session": {
            "wall_s": wall_s,
            "training_step_s": step_s,
            "phases_s": session,
            # what this session launched: a configuration skipped on this device launches nothing
            "launched": int(configs[configs["config_id"].isin(ran_now)]["status"].ne("skipped").sum()),
        },
    }
    store.write_json(Path(plan.run) / SUMMARY_JSON, totals)
    return totals

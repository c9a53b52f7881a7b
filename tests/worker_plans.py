"""A launch plan for the worker, as the launcher writes it, for tests that run it in this process."""

from __future__ import annotations


def plan_for(tmp_path, configurations) -> dict:
    context = {"run_id": "t", "started_at": "2025-01-01T00:00:00+00:00", "threads_per_rank": 1}
    return {"run_dir": str(tmp_path), "context": context, "configurations": [c.to_json() for c in configurations]}

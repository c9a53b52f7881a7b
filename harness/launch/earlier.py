"""What a configuration's earlier repeats decide for the next: which repeat judges its parity, and whether
it runs at all where an earlier repeat raised what it would raise again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.config import grid
from harness.config.bench import BenchConfig
from harness.config.grid import Configuration
from harness.handoff import faults
from harness.results import store
from harness.results.invocation import resume_command, retry_words

RETRY = "--retry-failed"
"""The flag that runs a run's failed configurations again."""


def planned_configurations(run: Path) -> list[Configuration]:
    """Every configuration of the run, those of earlier sessions and rounds too (run.json's)."""
    return [Configuration.from_json(c) for c in store.read_run_meta(run)["configurations"]]


def first_to_judge(config: BenchConfig, run: Path, group: list[Configuration]) -> list[Configuration]:
    """`group` with each configuration's parity judged by its first repeat written and not failed (a crash, a
    hang, a killed rank): where the first failed, the next judges, or the configuration has no verdict. One
    node's launcher cannot see what another's recorded, and every node's ranks must agree on who judges (a
    GPU's verdict is a replay with collectives): on several nodes the first repeat judges, as before."""
    if config.nnodes > 1 or not any(cfg.parity and cfg.repeat > 0 for cfg in group):
        return group
    status = store.written_statuses(run)
    ran: dict[str, list[int]] = {}
    for cfg in planned_configurations(run):
        if status.get(cfg.config_id, "failed") != "failed":  # unwritten: not run (yet), so no verdict either
            ran.setdefault(grid.identity(cfg), []).append(cfg.repeat)

    def judging(cfg: Configuration) -> Configuration:
        earlier = [repeat for repeat in ran.get(grid.identity(cfg), []) if repeat < cfg.repeat]
        return dataclasses.replace(cfg, judging_repeat=min(earlier, default=cfg.repeat)) if cfg.parity else cfg

    return [judging(cfg) for cfg in group]


def failing_again(
    config: BenchConfig, run: Path, group: list[Configuration]
) -> Iterator[tuple[Configuration, dict[str, Any]]]:
    """Each configuration of `group` whose earlier repeat raised what it would raise again (a model that breaks
    under a strategy breaks in every repeat: `faults.fails_alike`), with the failure to record instead of a
    launch. On several nodes every node's launcher must run the same launches, and only node 0's sees failures."""
    if config.nnodes > 1 or not any(cfg.repeat > 0 for cfg in group):
        return
    written = store.read_configs(run)
    failed = set(written.loc[(written["status"] == "failed") & (written["error_kind"] == "exception"), "config_id"])
    raised: dict[str, tuple[int, str]] = {}
    for cfg in planned_configurations(run):
        if cfg.config_id in failed and (error := faults.failure_that_repeats(run, cfg.config_id)):
            raised.setdefault(grid.identity(cfg), (cfg.repeat, error))
    for cfg in group:
        repeat, error = raised.get(grid.identity(cfg), (cfg.repeat, ""))
        if repeat < cfg.repeat:
            yield cfg, {"error_kind": "exception", "error": (
                f"not run: its repeat {repeat + 1} raised {error}, which a repeat raises again; "
                f"{retry_words(1, f'`{resume_command(run.name, run.parent, more=(RETRY,))}`')}")}  # fmt: skip

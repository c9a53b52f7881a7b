"""`--repeats auto`: after each round of launches, judge the run's verdicts (harness.analysis.verdicts.decide) and run
again only the configurations an open verdict rests on, up to the next look, each repeat a launch of its own
as before, until every verdict is decided, --max-repeats is reached or --budget is spent.

The new repeats are added to run.json's configurations before they launch, so that `--resume` finds them
(and goes on deciding: a resumed auto run runs this loop too). Across nodes node 0 alone decides (its launcher judges
the rows, and its budget and pace are the run's): each round it decided goes into the run folder (layout.ROUNDS), and
the other nodes' launchers run it from there, so every node launches the same round. That needs --results on a file
system the nodes share (bench_run.create_run refuses auto across nodes without it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import time
from collections.abc import Callable

from harness.analysis import roles, stats
from harness.analysis.verdicts import decide
from harness.config import grid
from harness.config.bench import BenchConfig
from harness.config.flags import AUTO
from harness.config.grid import Configuration
from harness.handoff import costs
from harness.launch.bench_run import UNLOCKED, BenchRun, NodeZeroGone, node_zero_watch, own_session
from harness.launch.earlier import planned_configurations
from harness.launch.launcher import run_groups
from harness.results import store
from harness.results.layout import RunFolder


@dataclasses.dataclass
class Decided:
    """Where the verdicts stand after a round."""

    verdicts: list[decide.Verdict]
    repeats: int  # the most repeats any configuration has
    estimate_s: float | None  # the time the open verdicts would need, at this session's pace
    stopped_by: str | None = None  # why the open ones stay open: 'max-repeats', 'budget' or 'out of reach'
    beyond_max: bool = False  # some open verdict needs more than --max-repeats: the estimate runs to it
    budget_left_s: float | None = None  # what is left of --budget when the round was judged (None: no budget)
    beyond_s: float | None = None  # the time every open verdict would need past --max-repeats, given up ones too

    @property
    def open(self) -> list[decide.Verdict]:
        return [v for v in self.verdicts if not v.decided]


def until_decided(
    config: BenchConfig,
    plan: BenchRun,
    *,
    began: float,
    launched: float | None = None,
    done: int = 0,
    on_round: Callable[[Decided, list[Configuration]], None],
    on_written: Callable[[Configuration], None],
    on_tick: Callable[[], None] | None = None,
) -> Decided | None:
    """Rounds of repeats until every verdict is decided (None when the run is not `--repeats auto`).
    `began`: the session's start, which --budget counts from; `launched`: its first launch (default `began`),
    which the pace counts from, so that the command's own start is not spread over every configuration.
    `on_round` hears each round's standing and the configurations about to run (none: the last word)."""
    if config.repeats != AUTO:
        return None
    if plan.node_rank:
        return _node_zero_rounds(config, plan, known=done + len(plan.configurations), on_round=on_round,
                                 on_written=on_written, on_tick=on_tick)  # fmt: skip
    confidence = decide.look_confidence(config.max_repeats)
    while True:
        pace = _pace(plan, began if launched is None else launched, done)
        with costs.timed(plan.phases_s, "verdicts"):
            standing, next_round = _standing(config, plan, confidence, pace=pace)
        if config.budget_s is not None:
            standing.budget_left_s = max(0.0, config.budget_s - (time.monotonic() - began))
        if next_round and _over_budget(config.budget_s, began, (pace or 0.0) * len(next_round)):
            standing.stopped_by, next_round = "budget", []
        on_round(standing, next_round)
        looked = _add_to_run(plan, next_round) if next_round else None
        if config.nnodes > 1:  # the other nodes run the round node 0 decided, not one of their own
            looked = len(store.read_run_meta(plan.run)["configurations"]) if looked is None else looked
            store.write_json(RunFolder(plan.run).rounds, {"session": own_session(plan.run), "looked": looked,
                                                          "next": [c.config_id for c in next_round]})  # fmt: skip
        if not next_round:
            return standing
        plan.configurations.extend(next_round)  # this session's: its summary counts their steps
        run_groups(config, dataclasses.replace(plan, configurations=next_round), on_written=on_written,
                   on_tick=on_tick)  # fmt: skip


NODE_ZERO_JOIN_S = 300.0
"""How long another node waits for node 0's session to hold the run before its first round (torchrun's join)."""


def _node_zero_rounds(config: BenchConfig, plan: BenchRun, *, known: int, on_round, on_written, on_tick) -> None:
    """Another node's rounds: each one node 0 decided once it had judged every one of the `known` configurations
    (ROUNDS, run.json's), until it decides none (`on_round(None, [])`) or its session ends (NodeZeroGone). Planned
    here, a round of this node's own ran past node 0's (it read run.json after node 0 had added its round), and
    every later launch failed with PlanMismatchError."""
    while added := _node_zero_round(plan, known, on_tick):
        by_id = {c.config_id: c for c in planned_configurations(plan.run)}
        next_round = [by_id[config_id] for config_id in added["next"]]
        on_round(None, next_round)
        known = added["looked"] + len(next_round)
        plan.configurations.extend(next_round)
        run_groups(config, dataclasses.replace(plan, configurations=next_round), on_written=on_written,
                   on_tick=on_tick)  # fmt: skip
    on_round(None, [])


def _node_zero_round(plan: BenchRun, known: int, on_tick) -> dict | None:
    """Node 0's next round once it is decided ({'looked', 'next'}), None where it decided none: a decision counts
    where node 0 made it in the session that holds the run now (not one an earlier session left) after judging
    every configuration this node knows of."""
    watch, since = node_zero_watch(plan.run), time.monotonic()
    while True:
        session = watch.check()  # NodeZeroGone where its session ended
        with contextlib.suppress(OSError, ValueError):
            said = json.loads(RunFolder(plan.run).rounds.read_text())
            if said["looked"] >= known and session is not None and session in (said["session"], UNLOCKED):
                return said if said["next"] else None
        if session is None and time.monotonic() - since > NODE_ZERO_JOIN_S:
            raise NodeZeroGone(f"node 0's absence (no session of it held the run for {NODE_ZERO_JOIN_S:.0f} s)")
        if on_tick is not None:
            on_tick()
        time.sleep(0.2)


def more_to_decide(config: BenchConfig, plan: BenchRun, *, pace: float | None = None) -> tuple[Decided | None, list]:
    """What an auto run whose planned configurations are all written has left to decide (what `--resume` finds to
    do after a stop between rounds): the verdicts now (`pace`: seconds per configuration, for the estimate) and the
    next round's configurations; (None, []) where the run is not `--repeats auto`."""
    if config.repeats != AUTO:
        return None, []
    return _standing(config, plan, decide.look_confidence(config.max_repeats), pace=pace)


def within_max(standing: Decided, max_repeats: int) -> list[decide.Verdict]:
    """The open verdicts a round can still decide: not given up, and needing no more than --max-repeats (the
    others a new run with more decides; rounds.to_decide sends them there), or sized from so few repeats that
    the need is a rough guide (stats.ROUGH_UNDER: 3 repeats once said 5, the 6th 341): the rounds go on with
    those, as the run's own would have."""
    return [v for v in standing.open if not v.given_up and ((v.repeats_needed or 0) <= max_repeats
                                                            or v.repeats < stats.ROUGH_UNDER)]  # fmt: skip


def _over_budget(budget_s: float | None, began: float, next_round_s: float) -> bool:
    """Whether the next round would end past the budget (at this session's pace)."""
    return budget_s is not None and time.monotonic() - began + next_round_s > budget_s


def _standing(config: BenchConfig, plan: BenchRun, confidence: float, *, pace: float | None):
    """The verdicts now, and the configurations the next round runs (each open one up to the next look)."""
    found = decide.verdicts(store.read_configs(plan.run), store.read_steps(plan.run), confidence=confidence,
                            max_repeats=config.max_repeats)  # fmt: skip
    every = planned_configurations(plan.run)
    repeats: dict[str, list[Configuration]] = {}
    for cfg in every:
        repeats.setdefault(grid.identity(cfg), []).append(cfg)
    most = max((len(v) for v in repeats.values()), default=0)
    by_id = {cfg.config_id: grid.identity(cfg) for cfg in every}
    wanted = _with_baselines({by_id[config_id] for config_id in decide.open_config_ids(found) if config_id in by_id},
                             repeats)  # fmt: skip
    needs = _needs(found, by_id)
    for key in wanted - needs.keys():  # a baseline runs as far as the most its setup's open configurations need
        setup = _setup(repeats[key][0])
        needs[key] = max((n for k, n in needs.items() if _setup(repeats[k][0]) == setup), default=0)
    every_need = _needs(found, by_id, given_up=True, reachable=True)  # what a --max-repeats can decide
    advised = _advised(found, every_need, config.max_repeats)  # what a new run's --max-repeats runs them to
    standing = Decided(found, most, _estimate(pace, repeats, needs, config.max_repeats),
                       beyond_max=any(need > config.max_repeats for need in needs.values()),
                       beyond_s=_estimate(pace, repeats, every_need, advised))  # fmt: skip
    next_round: list[tuple[int, int, Configuration]] = []
    for order, (key, members) in enumerate(repeats.items()):
        if key not in wanted:
            continue
        target = decide.next_look(len(members), config.max_repeats)
        if target is None:
            standing.stopped_by = "max-repeats"
            continue
        latest = max(members, key=lambda c: c.repeat)
        first = latest.repeat + 1
        next_round += [(repeat, order, latest) for repeat in range(first, first + target - len(members))]
    if not next_round and standing.stopped_by is None and any(v.given_up for v in standing.open):
        standing.stopped_by = "out of reach"
    start = len(every)
    ordered = _run_order(next_round)
    return standing, [grid.again(cfg, index=start + i, repeat=repeat) for i, (repeat, _, cfg) in enumerate(ordered)]


def _run_order(next_round: list[tuple[int, int, Configuration]]) -> list[tuple[int, int, Configuration]]:
    """(repeat, place in the grid, configuration) in the order they run: interleaved (A B C, then A B C again), world
    sizes ascending within a repeat, each pair of repeats an order then its reverse (`grid.rotated`)."""
    ordered = sorted(next_round, key=lambda item: (item[0], item[2].world_size, item[1]))
    launches = itertools.groupby(ordered, key=lambda item: (item[0], item[2].world_size))
    return [item for (repeat, _), members in launches for item in grid.rotated(list(members), repeat)]


def _with_baselines(wanted: set[str], repeats: dict[str, list[Configuration]]) -> set[str]:
    """The open configurations and, with them, their setup's baseline at the same world size: the floor and
    the 'why slower' split compare each repeat with the baseline's launch of that repeat, so the baseline
    runs as often as what it is compared with (left at two repeats, the floor read 165 ms against
    strategies that ran six and measured 131)."""
    baseline = roles.baseline_name()
    baselines = {_setup(members[0]): key for key, members in repeats.items() if members[0].impl == baseline}
    return wanted | {baselines[setup] for key in wanted if (setup := _setup(repeats[key][0])) in baselines}


def _setup(cfg: Configuration) -> str:
    """What a configuration shares with its setup's baseline at its world size: all but the strategy."""
    strategy = ("config_id", "repeat", "impl", "impl_options", "extra_ranks")
    return json.dumps({k: v for k, v in cfg.to_json().items() if k not in strategy}, sort_keys=True)


def _needs(
    found: list[decide.Verdict], by_id: dict[str, str], *, given_up: bool = False, reachable: bool = False
) -> dict[str, int]:
    """Per configuration, the most repeats an open verdict of it asks for (`given_up`: those out of reach too;
    `reachable`: only the verdicts some number of repeats can decide, `Verdict.reachable`)."""
    needs: dict[str, int] = {}
    for verdict in found:
        if verdict.decided or (verdict.given_up and not given_up) or verdict.repeats_needed is None:
            continue
        if reachable and not verdict.reachable:
            continue
        for config_id in verdict.config_ids:
            key = by_id.get(config_id)
            if key is not None:
                needs[key] = max(needs.get(key, 0), int(verdict.repeats_needed))
    return needs


def _pace(plan: BenchRun, began: float, done: int) -> float | None:
    """Seconds per configuration so far this session (`done` were written before it), launches and all."""
    written = len(store.written_config_ids(plan.run)) - done
    return (time.monotonic() - began) / written if written > 0 else None


def _advised(found: list[decide.Verdict], every_need: dict[str, int], max_repeats: int) -> int:
    """The --max-repeats a new run is advised (decide.sizing: a measuring-only rival's need sets none), else the
    most any open verdict needs: what `beyond_s` runs each configuration up to."""
    return max((v.repeats_needed for v in decide.sizing(found, max_repeats)), default=0) or max(
        every_need.values(), default=0
    )


def _estimate(pace: float | None, repeats: dict, needs: dict[str, int], max_repeats: int) -> float | None:
    """The time the open verdicts need at this session's pace: the repeats they ask for (at most
    --max-repeats), less those they have."""
    if pace is None:
        return None
    more = sum(max(0, min(need, max_repeats) - len(repeats.get(key, []))) for key, need in needs.items())
    return more * pace


def _add_to_run(plan: BenchRun, added: list[Configuration]) -> int:
    """The new repeats into run.json (whole or not at all), before they launch, and how many configurations
    the look that asked for them saw (`look_sizes`: the run page tells from it when each verdict was decided;
    returned)."""
    meta = store.read_run_meta(plan.run)
    looked = len(meta["configurations"])
    meta["look_sizes"] = [*meta.get("look_sizes", []), looked]
    meta["configurations"] = [*meta["configurations"], *(c.to_json() for c in added)]
    store.write_json(RunFolder(plan.run).run_json, meta)
    return looked

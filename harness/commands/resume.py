"""`bench --resume RUN_ID`: the stored run, finished with its own grid and settings.

A flag that would change what the run measures is refused (exit 2, naming it): the run's
configurations are in its run.json, and a resumed part measured otherwise would not belong to it.
The flags that only steer the running (how long a silence may last, whether to stop at the first
failure, where this node joins) apply, and are said to.
"""

from __future__ import annotations

import argparse
import dataclasses

from harness.commands import console
from harness.config.bench import BenchConfig, ConfigError
from harness.config.flags import AUTO, LOCATES, STEERS, flag_name, flags_of, resume_fields
from harness.results.layout import validate_run_id
from harness.results.values import counted

STEERING = resume_fields(BenchConfig, STEERS)
"""The BenchConfig fields whose flags steer a resumed run without changing what it measures."""
RESUME_FLAGS = {"resume", "retry_failed"} | resume_fields(BenchConfig, LOCATES)
"""What finishing a run needs: which run, where it is, whether to retry its failures."""


def resume(args: argparse.Namespace):
    """(config, plan, configurations already written), or None when there is nothing to resume."""
    from harness.launch import bench_run, repeats
    from harness.measure.env import host_facts

    _locate(args)
    validate_run_id(args.resume, flag="--resume")
    steering = _steering(args, _stored_config(args))
    node_rank = steering.get("node_rank") or 0  # only node 0 holds the run: the other nodes share its session
    here = host_facts() if node_rank else None  # run.json's environment is node 0's: this node's plans say its own
    config, plan, done = bench_run.resume_run(
        args.results, args.resume, retry_failed=args.retry_failed, node_rank=node_rank, environment=here
    )
    config = dataclasses.replace(config, **steering)
    pace = _pace(plan.run)
    standing, next_round = repeats.more_to_decide(config, plan, pace=pace) if not plan.configurations else (None, [])
    if next_round and not _can_go_on(args, config, plan, (standing, next_round), pace=pace):
        return None
    if next_round:
        # By design: a run a --budget stopped is complete (all it planned is written) with verdicts still open
        # short of its --max-repeats, and the way on its last line gave is this resume.
        _say_steering(args, steering, config)
        deciding = len(repeats.within_max(standing, config.max_repeats))
        worlds = sorted({c.world_size for c in next_round})
        sizes = f"world size{'s' * (len(worlds) != 1)} {', '.join(map(str, worlds))}"
        console.say(f"ddpbench: resuming run {plan.run_id}: its {counted(done, 'planned configuration')} are "
                    f"written; --repeats auto goes on deciding its {counted(deciding, 'open verdict')} up to its "
                    f"--max-repeats {config.max_repeats}, at {sizes}")  # fmt: skip
        return config, plan, done
    if not plan.configurations and not _ended(plan.run):
        # Stopped after its last configuration was written (a Ctrl-C during its last teardown): only the end is left
        are = "is" if done == 1 else "are"
        console.say(f"ddpbench: resuming run {plan.run_id}: its {counted(done, 'configuration')} {are} written, but "
                    "it stopped before its end: only the end runs (its verdicts, answer and summary.json)")  # fmt: skip
        return config, plan, done
    if not plan.configurations:
        console.say(f"ddpbench: run {plan.run_id} is complete ({counted(done, 'configuration')} written): nothing to "
                    f"resume{_failed_hint(plan) if not args.retry_failed else ''}; nothing was written")  # fmt: skip
        return None
    _say_steering(args, steering, config)  # only now: on a complete run nothing is steered
    retried = " (the failed ones set aside in retried/ to run again)" if args.retry_failed else ""
    console.say(f"ddpbench: resuming run {plan.run_id}: {counted(done, 'finished configuration')} kept, "
                f"{len(plan.configurations)} to run{retried}")  # fmt: skip
    return config, plan, done


def _can_go_on(args: argparse.Namespace, config: BenchConfig, plan, found: tuple, *, pace: float | None) -> bool:
    """Whether a resume that goes on deciding can run a round, else one line on the command that would go on: no
    open verdict within the run's --max-repeats (a new run with more decides them), or a --budget (stored or
    given, from this session's start) that one round at the last session's pace overruns. A resume that ran
    nothing once said it went on deciding, then recorded a session with no configuration."""
    import math
    import time

    from harness.analysis.verdicts import decide
    from harness.commands.console import rounds
    from harness.launch import repeats

    standing, next_round = found
    still = [v for v in standing.open if not v.given_up]
    if not repeats.within_max(standing, config.max_repeats):
        need = max((v.repeats_needed for v in decide.sizing(still, config.max_repeats)), default=0)
        run = rounds.new_run_command(config.command, ("--max-repeats", str(need)))
        way = f": to decide {'it' if len(still) == 1 else 'them'}, {run}"
        console.say(f"ddpbench: run {plan.run_id}: nothing to resume: its {counted(len(still), 'open verdict')} "
                    f"need{'s' * (len(still) == 1)} more repeats than its --max-repeats {config.max_repeats}, which "
                    f"--resume keeps{way if need else ''}; nothing was written")  # fmt: skip
        return False
    round_s = (pace or 0.0) * len(next_round)
    if config.budget_s is None or time.time() - getattr(args, "started_at", time.time()) + round_s <= config.budget_s:
        return True
    given = "--budget" if "budget_s" in getattr(args, "given_flags", {}) else "its stored --budget"
    more = ("--budget", console.time_flag(60 * max(1, math.ceil(max(standing.estimate_s or 0.0, round_s) / 60))))
    hint = console.resume_hint(plan.run_id, plan.run.parent, more=more, nnodes=config.nnodes)
    about = f", about {round_s:.0f} s at the last session's pace" if pace else ""
    console.say(f"ddpbench: run {plan.run_id}: {given} {console.time_flag(config.budget_s)} (from this session's "
                f"start) cannot fit a round of {counted(len(next_round), 'configuration run')}{about}: {hint} goes "
                "on; nothing was written")  # fmt: skip
    return False


def _ended(run) -> bool:
    """Whether a session reached the run's end: its summary.json says complete (a stop writes it marked
    incomplete; a session killed outright writes none)."""
    from harness.commands.summary import earlier_sessions

    return earlier_sessions(run).get("complete") is True


def _pace(run) -> float | None:
    """Seconds per configuration the run's last session took from its first launch (its summary.json), as the
    rounds count it; None before any session is summed up."""
    import json
    from pathlib import Path

    from harness.results.layout import SUMMARY_JSON

    try:
        session = json.loads((Path(run) / SUMMARY_JSON).read_text())["session"]
        return (session["wall_s"] - session["phases_s"].get("start", 0.0)) / session["launched"]
    except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError):
        return None


def _locate(args: argparse.Namespace) -> None:
    """--resume RUN_ID, or a run's folder as compare and predict take it: its name the id, its parent --results."""
    from pathlib import Path

    from harness.results import store

    if "/" not in args.resume:  # an id, inside --results
        return
    folder = Path(args.resume)
    if not store.is_run_folder(folder):
        raise ConfigError(f"--resume {args.resume!r} is not a run folder; give a run's folder, or its id and --results "
                          "the folder it is in")  # fmt: skip
    if "results" in getattr(args, "given_flags", {}) and Path(args.results).resolve() != folder.resolve().parent:
        raise ConfigError(f"--resume {args.resume!r} is not in --results {str(args.results)!r}; give one of them")
    args.results, args.resume = folder.resolve().parent, folder.resolve().name


def record_session(run, command: tuple[str, ...]) -> int:
    """This session into run.json's `sessions` (each: when it started, its command line), the first made from the
    run's own `started_at` and `command` where it has no list yet; how many there are now. A page must not say
    one command made a run that several did (summary.json counts the sessions, but not what each ran). A fault
    injected in this session (DDPBENCH_FAULT) is recorded with it: run.json's environment is the first session's."""
    import datetime
    import os

    from harness.analysis.verdicts.environment import FAULT_VARIABLE
    from harness.results import store
    from harness.results.layout import RunFolder

    meta = store.read_run_meta(run)
    sessions = meta.get("sessions") or [{"started_at": meta.get("started_at"), "command": meta.get("command")}]
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    fault = os.environ.get(FAULT_VARIABLE, "").strip()
    meta["sessions"] = [*sessions, {"started_at": now, "command": list(command), **({"fault": fault} if fault else {})}]
    store.write_json(RunFolder(run).run_json, meta)
    return len(meta["sessions"])


def _stored_config(args: argparse.Namespace) -> dict:
    """The run's own settings as its run.json stores them ({} where there is none: resume_run says why)."""
    from harness.results import store

    run = store.run_dir(args.results, args.resume)
    return (store.read_run_meta(run).get("config") or {}) if store.is_run_folder(run) else {}


def _same(given, stored) -> bool:
    """Whether a flag's parsed value is the stored setting (a tuple of names reads back from JSON as a list)."""
    return (
        list(given) == list(stored) if isinstance(given, tuple | list) and isinstance(stored, list) else given == stored
    )


def _steering(args: argparse.Namespace, stored: dict) -> dict:
    """The BenchConfig fields the steering flags set; ConfigError naming any flag that would change the run
    (one that repeats the run's own setting changes nothing, and passes)."""
    given = getattr(args, "given_flags", {})
    refused = [flag for dest, flag in given.items() if dest not in STEERING and dest not in RESUME_FLAGS
               and not (dest in stored and _same(getattr(args, dest, None), stored[dest]))]  # fmt: skip
    if refused:
        applying = ", ".join(flag_name(name, spec) for name, spec in flags_of(BenchConfig).items() if name in STEERING)
        raise ConfigError(f"--resume runs the stored run's own grid and settings; {', '.join(refused)} would change "
                          f"them: leave {'it' if len(refused) == 1 else 'them'} out, or start a new run "
                          f"(flags that apply: {applying})")  # fmt: skip
    return {dest: getattr(args, dest) for dest in given if dest in STEERING}


def _say_steering(args: argparse.Namespace, steering: dict, config: BenchConfig) -> None:
    """Which steering flags apply to the configurations about to run; and, where --budget is not one, that the run's
    stored --budget does, counted anew from this session's start (a resume given none once said 'more than the 69 s
    left of --budget' with no word of which)."""
    given = getattr(args, "given_flags", {})
    applied = [given[dest] for dest in given if dest in STEERING]
    stored = config.budget_s is not None and config.repeats == AUTO and "budget_s" not in steering
    if stored:
        applied.append(f"its stored --budget {console.time_flag(config.budget_s)} (from this session's start)")
    if applied:
        verb = "applies" if len(applied) == 1 else "apply"
        console.say(f"ddpbench: --resume: {', '.join(applied)} {verb} (steering the running only); "
                    "the grid and every other setting are the run's")  # fmt: skip


def _failed_hint(plan) -> str:
    from harness.results import store

    configs = store.read_configs(plan.run)
    failed = int((configs["status"] == "failed").sum())
    return f" ({failed} failed: {console.retry_words(failed)})" if failed else ""

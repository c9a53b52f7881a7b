"""`summary.json` and the run's last lines: each session's counts, wall time, training steps and where the wall time
went (the phases of harness.handoff.costs, the rest as `other`), added up over the run's sessions."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

from harness.commands import console
from harness.commands.arguments import EXIT_FAILED, EXIT_OK
from harness.commands.console import ending, invoked
from harness.config.bench import RESULTS
from harness.results import contention, layout
from harness.results.invocation import on_every_node
from harness.results.values import counted

# Set by the Makefile's bench, which builds the pages next: the last line does not tell the user to build them.
REPORT_NEXT_ENV = "DDPBENCH_REPORT_NEXT"


def counts_text(counts: dict[str, int], *, parity_failed: int = 0) -> str:
    """'4 ok, 0 failed, 0 skipped (1 of the ok failed parity: …)': a row that trained unlike one process is said
    where a reader of the last lines looks, not only on its own line above."""
    text = ", ".join(f"{counts.get(s, 0)} {s}" for s in ("ok", "failed", "skipped"))
    return text + (f" ({parity_failed} of the ok failed parity: see PARITY FAILED above)" if parity_failed else "")


def pages_hint(folder: Path) -> str:
    """' (its pages: ddpbench report --results FOLDER)', as typed in this shell; nothing where the Makefile builds
    them next (REPORT_NEXT_ENV)."""
    if os.environ.get(REPORT_NEXT_ENV):
        return ""
    results = "" if folder.resolve() == RESULTS.resolve() else f" --results {folder}"  # as report's default reads
    return f" (its pages: {invoked.ddpbench_command()} report{results})"


FIX = re.compile(r"--opt ([A-Za-z_]\w*=[^\s;,)\]]+)")
"""A fix a failure's words name, as a flag ('--opt find_unused_parameters=true lets DDP run such a model')."""


def named_fixes(errors) -> list[str]:
    """Each `--opt KEY=VALUE` the failures' words name as their fix, once each, in the order first named."""
    return list(dict.fromkeys(fix for error in errors for fix in FIX.findall(str(error or ""))))


def fix_words(configs, command: tuple[str, ...]) -> str:
    """'; 4 of them name their fix, which --retry-failed would not apply: a new run with it: ddpbench bench … --opt
    find_unused_parameters=true': the whole bench command with the fix the failures name (a retry runs them with the
    same options, to fail again); '' where none names one."""
    from harness.commands.console.rounds import fresh_run_command

    failed = configs[configs["status"] == "failed"] if "status" in configs else configs.iloc[:0]
    fixes = named_fixes(failed.get("error", ()))
    naming = sum(bool(FIX.search(str(error or ""))) for error in failed.get("error", ()))
    more = tuple(word for fix in fixes for word in ("--opt", fix))
    fresh = fresh_run_command(command, more, options=tuple(fix.split("=")[0] for fix in fixes)) if fixes else ""
    if not fresh:
        return ""
    which = "it names its" if len(failed) == 1 else f"{naming} of them name their"
    it = "it" if len(fixes) == 1 else "them"
    return f"; {which} fix, which --retry-failed would not apply: a new run with {it}: {fresh}"


def summarize(plan, wall_s: float, *, parity_failed: int = 0, run_command: tuple[str, ...] = ()) -> int:
    """The run's counts and wall time on the terminal and in `summary.json`; exit 1 if any failed. `run_command`: the
    run's bench command, which a fix its failures name is given with."""
    from harness.results import store

    totals = write_summary(plan, wall_s, complete=True)  # first: what was measured is summed up whatever follows
    if plan.node_rank:  # node 0 holds the run: the counts, summary.json and the answer are its last lines
        return node_ended(plan, wall_s)
    found = ending.answers(plan.run)  # the last line's answer, beside the sums for a script
    store.write_json(Path(plan.run) / layout.SUMMARY_JSON, {**totals, "answer": ending.summary_record(found)})
    text = counts_text(totals["status_counts"], parity_failed=parity_failed)
    sessions = totals["sessions"]
    wall = console.seconds_text(wall_s)
    total, steps = (console.seconds_text(totals[key]) for key in ("wall_s", "training_step_s"))
    runs = f"; over its {sessions} sessions the run took {total}, {steps} of training steps: summary.json adds them up"
    took = f"(this session: {wall}{runs}); the whole run has" if sessions > 1 else f"in {wall}:"
    folder = Path(plan.run).parent
    failed = totals["status_counts"].get("failed", 0)  # a failure is kept, not run again: how to, where it is counted
    command = invoked.resume_hint(plan.run_id, folder, more=("--retry-failed",))
    again = f"; {failed} failed: {console.retry_words(failed, command)}" if failed else ""
    if failed:
        if any(cfg.nnodes > 1 for cfg in plan.configurations):  # alone, node 0 would wait for the others
            again = _across_nodes(failed, plan, store.written_config_ids(plan.run), command)

        again += fix_words(store.read_configs(plan.run), command=tuple(run_command))
    console.say(f"ddpbench: run {plan.run_id} finished {took} {text}; results in {plan.run}/{pages_hint(folder)}"
                f"{again}")  # fmt: skip  # as typed: pasted in this shell
    session = totals["session"]  # at most one line more: the fixed cost, the steps, where the wall time went
    console.fixed_cost_split(wall_s, session["phases_s"], run=plan.run, step_s=session["training_step_s"])
    said = contention.findings(contention.read(plan.run, plan.launches, plan.session))  # this session's
    if said:
        console.warning(f"not alone on this machine: {'; '.join(said)} (plan/*{contention.SUFFIX})")
    cap = ending.cap_line(plan.run, invoked.ddpbench_command())  # the cap the answer cannot name, and how to
    if cap:
        console.say(f"ddpbench: {cap}")
    console.say(f"ddpbench: {ending.answer_line(plan.run, found)}")  # last: the line a reader of the end looks for
    return EXIT_FAILED if failed else EXIT_OK


def _across_nodes(failed: int, plan, written, command: str) -> str:
    """'; 1 failed and 1 not run (…): COMMAND runs them again on every node, with its own --node-rank': the other
    nodes' launchers cannot follow a relaunch, so a launch across nodes ends at its failure and leaves the rest of it
    unrun."""
    unrun = sum(cfg.config_id not in written for cfg in plan.configurations)
    left = f" and {unrun} not run (a launch across nodes stops at its first failure)" if unrun else ""
    runs = console.retry_words(failed + unrun, command)
    nnodes = max(cfg.nnodes for cfg in plan.configurations)
    return f"; {failed} failed{left}: {runs}{on_every_node(nnodes)}"  # the retry line's one wording across nodes


def node_ended(plan, wall_s: float) -> int:
    """Another node's last line: what its launcher did. Node 0 writes the rows, their verdicts and summary.json, and may
    still be writing them as this node ends: their counts and the answer are its own last lines; its exit status is
    node 0's as its rows say it (`_node_zero_verdict`), or said where this node cannot learn it."""
    code, unlearnt = _node_zero_verdict(plan)
    launches = f"{len(plan.launches)} launch{'es' if len(plan.launches) != 1 else ''}"
    console.say(f"ddpbench: node {plan.node_rank}'s part of run {plan.run_id} ended in {console.seconds_text(wall_s)} "
                f"({launches} of its ranks); node 0 holds the run: its last lines give the counts and the answer, its "
                f"summary.json the run's time; results in {plan.run}/{unlearnt}")  # fmt: skip
    return code


def _node_zero_verdict(plan) -> tuple[int, str]:
    """Node 0's exit status, as another node can learn it: EXIT_FAILED once a row failed, EXIT_OK once every
    configuration this node planned is written and none failed. Node 0 records a failure only after its own launch
    ends, and rank 0 writes a row as its peers end: node 1 read the rows once at its end and said 0 of a run node 0
    said 1 of. Waited for up to NODE_ZERO_WAIT_S; where node 0's rows never came (not on this node's disk, or node 0
    gone), EXIT_FAILED and, in words, why it is node 0's status that counts."""
    from harness.launch.bench_run import NODE_ZERO_WAIT_S
    from harness.results import store

    if not layout.RunFolder(plan.run).run_json.is_file():  # node-local disks: node 0's rows are on its own
        return EXIT_OK, "; its rows are on node 0's disk, not here: node 0's exit status says whether a row failed"
    planned, deadline = {c.config_id for c in plan.configurations}, time.monotonic() + NODE_ZERO_WAIT_S
    while True:
        written = store.written_config_ids(plan.run)
        if written and (store.read_configs(plan.run)["status"] == "failed").any():
            return EXIT_FAILED, ""
        if planned <= written:
            return EXIT_OK, ""
        if time.monotonic() > deadline:
            unwritten = counted(len(planned - written), "configuration")
            return EXIT_FAILED, (f"; exit {EXIT_FAILED}: {unwritten} of its plan not written by node 0 within "
                                 f"{NODE_ZERO_WAIT_S:.0f} s of its end (node 0 stopped or gone?): node 0's exit status "
                                 "is the run's")  # fmt: skip
        time.sleep(0.5)


def earlier_sessions(run: Path) -> dict[str, Any]:
    """What the run's earlier sessions recorded; {} for a new run (or a summary that cannot be read)."""
    from harness.results import store

    try:
        return store.read_json(Path(run) / layout.SUMMARY_JSON)
    except (OSError, ValueError):
        return {}


def write_summary(plan, wall_s: float, *, complete: bool) -> dict[str, Any]:
    """The run's `summary.json`: this session's figures (its counts, wall time, training steps and where the wall
    time went) added to the earlier sessions' (a run stopped and finished with `--resume` is one run; `session`
    keeps the latest session's own), written (by node 0's launcher only: the other nodes' run beside it, in its
    session; on a run across nodes, with every node into run.json), and returned; a finished run's `answer` is added
    after it (summarize)."""
    from harness.analysis import stats
    from harness.results import store

    configs = store.read_configs(plan.run)
    steps = store.read_steps(plan.run)
    ran_now = {c.config_id for c in plan.configurations}  # a resumed session counts only what it ran
    step_s = stats.training_seconds(steps[steps["config_id"].isin(ran_now)])
    # another node's launcher runs beside node 0's, in node 0's session: its time is not one more session's
    before = {} if plan.node_rank else earlier_sessions(plan.run)
    launched = configs["config_id"].isin(ran_now) & configs["status"].ne("skipped")
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
            "launched": int(launched.sum()),
            # of them, first repeats (what parity and the profiles are paid for): this session's, as `launched` is
            "first_repeats": int((launched & configs["repeat"].fillna(0).eq(0)).sum()),
            "launches": len(plan.launches),  # torchrun launches, retries included
        },
    }
    if not plan.node_rank:
        store.write_json(Path(plan.run) / layout.SUMMARY_JSON, totals)
        if any(cfg.nnodes > 1 for cfg in plan.configurations):  # run.json's environment is node 0's: every node's,
            from harness.launch.bench_run import record_nodes  # where the run ended and where it stopped alike

            record_nodes(plan.run)
    return totals

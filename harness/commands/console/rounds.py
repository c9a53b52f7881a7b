"""`--repeats auto` on the console: a line per round that says what changed (verdicts decided, reopened or given up,
what is open, the time to decide it), the last round's every verdict, and what would decide those left open.

On a terminal, a round that changed nothing is no line: the progress bar's description holds the standing and
updates in place. Off a terminal (CI, logs, pipes) every round is a line, the changes first: a cap sweep's rounds
once printed 'repeats auto: 0 of 1 verdicts decided after N repeat(s)' five times, near word for word.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from pathlib import Path
from typing import Protocol

from harness.analysis import stats
from harness.analysis.verdicts import decide
from harness.commands import console
from harness.commands.console import duration_text
from harness.commands.console.invoked import resume_hint
from harness.commands.console.progress import Progress
from harness.results.invocation import on_every_node
from harness.results.values import counted

NAMED_UP_TO = 2
"""Up to this many open verdicts, a round's line names each with its estimate so far: what the round changed."""
OUT_OF_REACH_S = 8 * 3600
"""A fixed run's open verdicts that would take longer than this at its pace get no command, only what would help."""
SECONDS_UNDER = 300
"""A time under this many seconds is said in seconds beside --budget's (duration_text says '4 min' from 90 s)."""


class Standing(Protocol):
    """What a round's progress shows in place (console.progress.Progress, on a terminal)."""

    on_terminal: bool

    def show_standing(self, text: str) -> None: ...


def on_round(progress: Progress, config, plan, standing, more: list) -> None:
    """bench's `on_round` (harness.launch.repeats.until_decided): the round's line, and after the last, what would
    decide the verdicts left open; on another node (no `standing`: node 0 judges), the round node 0 decided."""
    progress.extend(more)
    if standing is None:
        with progress.above():
            runs = counted(len(more), "more configuration run")
            console.say(f"ddpbench: node 0 decided the next round: {runs}" if more
                        else "ddpbench: node 0 decided no more rounds; its last lines give the verdicts")  # fmt: skip
        return
    if not more:  # the last word goes below the bar's last state, not onto its line
        progress.close()
        standing = dataclasses.replace(standing, verdicts=[still_given_up(v, progress.given_up)
                                                           for v in standing.verdicts])  # fmt: skip
    with progress.above():  # a round's line above the bar
        verdict_round(standing, more, decided_before=progress.decided, given_up_before=progress.given_up,
                      progress=progress, said=progress.said)  # fmt: skip
        if not more:  # the last word: how the open ones would be decided
            to_decide(
                standing,
                run_id=plan.run_id,
                results=plan.run.parent,
                max_repeats=config.max_repeats,
                command=config.command,
                nnodes=config.nnodes,
            )
    progress.decided = {v.subject for v in standing.verdicts if v.decided}
    progress.given_up = {v.subject: progress.given_up.get(v.subject, v.repeats) for v in standing.open if v.given_up}


def still_given_up(verdict, given_up: dict[str, int]):
    """The verdict, given up where a round gave it up (`given_up`: at how many repeats) and it has run no repeat
    since: the repeats another verdict asked of its reference can move its out_of_reach after the last round (zero
    vs stock, given up at 8 repeats, read 'open after 8 repeats' once stock ran on to 16 for bucketed's verdict)."""
    if verdict.decided or verdict.given_up or verdict.repeats > given_up.get(verdict.subject, -1):
        return verdict
    return dataclasses.replace(verdict, given_up=True)


def verdict_round(
    standing,
    next_round: list,
    *,
    decided_before: set[str] | frozenset = frozenset(),
    given_up_before: set[str] | frozenset = frozenset(),
    progress: Standing | None = None,
    said: set[str] | None = None,
) -> None:
    """`--repeats auto`'s word after each round. Before the last: one line, what changed since the round before
    (`decided_before`, `given_up_before`: what it found decided and given up), then how many stay open, what runs
    next and how long the rest may take; a round that changed nothing is said in place on a terminal (`progress`).
    After the last: every verdict, the decided ones' words, then the open ones and what they would need. A verdict's
    why (every cap's one bucket, sweep.answer's) is said once, the first time: `said`, the words said in earlier
    rounds (added to)."""
    total, still = len(standing.verdicts), standing.open
    said = set() if said is None else said
    if not total and standing.repeats > 1:  # planned to decide something: what it rests on measured nothing
        console.say("ddpbench: repeats auto: no verdict to decide: every configuration a verdict would rest on "
                    f"failed or was skipped (the lines above say why), after {standing.repeats} repeats")  # fmt: skip
        return
    if not total:
        console.say(
            "ddpbench: repeats auto: nothing to decide (no bucket-cap sweep, no strategy against the reference): "
            "one repeat each"
        )
        return
    if next_round:
        news, count, then = round_words(standing, next_round, decided_before, given_up_before, said)
        running = [v for v in still if not v.given_up]
        if progress is not None and progress.on_terminal:  # a bar's description is short: counts and the time
            progress.show_standing(f"verdicts open {len(running)}/{total}{time_words(standing, short=True)}")
            if not news:
                return
        if 0 < len(running) <= NAMED_UP_TO:  # each named, as it forms (its estimate has brackets of its own)
            count = f"{count}: " + "; ".join(v.subject + (f", so far {one_clause(v.so_far)}" if v.so_far else "")
                                             for v in running)  # fmt: skip
        after = stats.repeats_text(standing.repeats)
        console.say(f"ddpbench: repeats auto after {after}: {news + '; ' if news else ''}{count}; {then}")
        return
    decided = total - len(still)
    head = f"ddpbench: repeats auto: {decided} of {total} verdicts decided after {stats.repeats_text(standing.repeats)}"
    if reopened := [v for v in still if v.subject in decided_before]:  # more repeats, asked for by another verdict
        head += f" ({len(reopened)} reopened: the repeats another verdict asked for widened the interval)"
    why = {"budget": "the next round would end past --budget", "max-repeats": "--max-repeats reached",
           "out of reach": "out of reach within --max-repeats"}.get(standing.stopped_by or "", "")  # fmt: skip
    console.say(f"{head}; {len(still)} left open{f' ({why})' if why else ''}. Every verdict:" if still
                else f"{head}: every verdict decided:")  # fmt: skip
    for verdict in [*(v for v in standing.verdicts if v.decided), *still]:
        console.say(f"  {verdict.line(said)}")


def one_clause(text: str) -> str:
    """`text` with its own '; ' outside brackets as ', ': a verdict's estimate in a list whose '; ' parts verdicts (a
    cap sweep's 'fastest 1 MiB; 25 MiB takes 1.04× as long' read as two verdicts of a round's line once)."""
    out, depth = [], 0
    for k, char in enumerate(text):
        depth += (char == "(") - (char == ")")
        out.append("," if char == ";" and depth == 0 and text[k + 1 : k + 2] == " " else char)
    return "".join(out)


def round_words(standing, next_round: list, decided_before, given_up_before, said: set[str]) -> tuple[str, str, str]:
    """What changed this round against the round before ('' for nothing: decided, reopened, given up), how many
    stay open ('1 of 2 open', '1 given up, 1 of 2 open') and what runs next ('3 more configuration run(s), about 53 s to
    decide them at the spread seen')."""
    still = standing.open
    news = []
    if newly := [v for v in standing.verdicts if v.decided and v.subject not in decided_before]:
        news.append("decided " + ", ".join(f"{v.subject} ({v.said(said).split(', at ')[0]})" for v in newly))
    if reopened := [v for v in still if v.subject in decided_before]:  # more repeats, asked for by another verdict
        news.append(f"reopened {', '.join(v.subject for v in reopened)} (the repeats another verdict asked for "
                    "widened the interval)")  # fmt: skip
    if gave_up := [v for v in still if v.given_up and v.subject not in given_up_before]:
        news.append(f"given up as out of reach within --max-repeats: {', '.join(v.subject for v in gave_up)}")
    running = [v for v in still if not v.given_up]
    count = f"{len(running)} of {len(standing.verdicts)} open"  # last: the open ones are named after it
    count = (f"{len(still) - len(running)} given up, " if len(running) < len(still) else "") + count
    return "; ".join(news), count, f"{counted(len(next_round), 'more configuration run')}{time_words(standing)}"


def time_words(standing, *, short: bool = False) -> str:
    """', about 6 min to reach --max-repeats (some need more) at the spread seen, more than the 4 min left of
    --budget': the time the open verdicts need, what it runs to, and the budget where it ends first; `short`, for
    the bar: ', ~6 min to --max-repeats (4 min of --budget left)'. '' before a pace is known."""
    if not standing.estimate_s:
        return ""
    left = standing.budget_left_s if standing.budget_left_s is not None else float("inf")
    need, short_of = apart(standing.estimate_s, left)
    if short:
        until = "to --max-repeats" if standing.beyond_max else "to decide"
        return f", ~{need} {until}" + (f" ({short_of} of --budget left)" if left < standing.estimate_s else "")
    until = "to reach --max-repeats (some need more)" if standing.beyond_max else "to decide them"
    # Few repeats give a spread as unsure as the time it predicts (2 repeats: 89 s said, 81 repeats needed).
    said = f", about {need} {until} at the spread seen{stats.rough_guide(standing.repeats)}"
    return said + (f", more than the {short_of} left of --budget" if left < standing.estimate_s else "")


def apart(seconds: float, other: float) -> tuple[str, str]:
    """Two times said side by side, seconds under SECONDS_UNDER, and finer where they would read the same: 'about 4
    min to reach --max-repeats …, more than the 4 min left of --budget' read as a contradiction."""
    said = ("", "")
    for words in (_span, lambda s: f"{s / 60:.1f} min", lambda s: f"{s:.0f} s"):
        said = (words(seconds), words(other) if other != float("inf") else "")
        if said[0] != said[1]:
            break
    return said


def _span(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < SECONDS_UNDER else duration_text(seconds)


def to_decide(standing, *, run_id: str, results: Path | str, max_repeats: int, command: tuple[str, ...] = (),
              nnodes: int = 1) -> None:  # fmt: skip
    """After the last round, where verdicts stay open: what would decide them, and only what can. A budget that
    stopped it is steering (`--resume` takes a new one), but a resume goes only as far as the run's --max-repeats:
    it is offered for the verdicts that need no more. Repeats past --max-repeats need a new run, as the look
    confidence rests on it; a budget stop whose open verdicts all need more is told so, not sent to resume. Each
    command is one to paste: the resume's --budget the estimate, rounded up to the minute; the new run the run's
    first command (`command`, run.json's) with the --max-repeats it needs, whatever session says it; across `nnodes`
    nodes, each run on every node."""
    still = standing.open
    if not still:
        return
    rough = stats.rough_guide(standing.repeats)
    beyond = [v for v in still if v.given_up or (v.repeats_needed or 0) > max_repeats]
    if standing.stopped_by == "budget" and len(beyond) < len(still):
        more = (
            [f"about {duration_text(standing.estimate_s)} more at the spread seen{rough}"]
            if standing.estimate_s
            else []
        )
        which = "the rest" if not beyond else f"the {len(still) - len(beyond)} open within --max-repeats {max_repeats}"
        more += ["some need more"] if beyond else []  # a resume runs them to --max-repeats too: not far enough
        said = f" ({'; '.join(more)})" if more else ""
        budget = (
            ("--budget", console.time_flag(60 * math.ceil(standing.estimate_s / 60))) if standing.estimate_s else ()
        )
        console.say(f"ddpbench: to decide {which}: {resume_hint(run_id, results, more=budget, nnodes=nnodes)}{said}")
    sizing = decide.sizing(still, max_repeats)
    need = max((v.repeats_needed for v in sizing), default=0)
    if need > max_repeats:
        took = f", about {duration_text(standing.beyond_s)} at this session's pace" if standing.beyond_s else ""
        counted = sum(1 for v in beyond if v.reachable and v.repeats_needed <= need)
        head = "to decide the rest" if counted == len(still) else f"to decide the {counted} that need more"
        measuring = all(v.instrument for v in sizing)  # no strategy to deploy left open: theirs size it, said so
        whose = " of a strategy to deploy" if not measuring and any(v.instrument for v in beyond if v.reachable) else ""
        only = "; only verdicts of strategies that measure, none to deploy, are open" if measuring else ""
        run = new_run_command(command, ("--max-repeats", str(need))) + on_every_node(nnodes, new_run=True)
        console.say(f"ddpbench: {head}: {run} (the most an open verdict{whose} "
            f"needs at the spread and ratio seen{took}{rough}{only}{_measuring_only(beyond, need)}; the verdicts "
            "decided here stop early again); --resume "
            f"keeps this run's --max-repeats {max_repeats}, on which its verdicts' error rate rests")  # fmt: skip
    say_unreachable([v for v in still if not v.given_up])  # a given-up one's line said so: 'need more than …'


def _measuring_only(beyond: list, need: int) -> str:
    """'; naive vs stock, bucketed vs stock need up to 318: their rivals measure, not strategies to deploy, so
    they size no run': the open verdicts that need more than the `need` advised, which the advice leaves out."""
    left = [v for v in beyond if v.reachable and v.repeats_needed > need]
    if not left:
        return ""
    most = max(v.repeats_needed for v in left)
    needs = f"needs {most}" if len(left) == 1 else f"need up to {most}"
    return (f"; {', '.join(v.subject for v in left)} {needs}: measuring only, not "
            f"{'a strategy' if len(left) == 1 else 'strategies'} to deploy, so left out of it")  # fmt: skip


DROPPED = {"--max-repeats": 1, "--budget": 1, "--run-id": 1, "--resume": 1, "--retry-failed": 0, "--node-rank": 1}
"""The flags of a run's command that a new run with more repeats replaces or must not repeat (a --run-id is taken;
one node's --node-rank, on every node, joins two node 0s), and how many values each takes."""


def new_run_command(command: tuple[str, ...], more: tuple[str, ...], *, drop: dict[str, int] | None = None) -> str:
    """'a new run: ddpbench bench … MORE' (fresh_run_command's: the run's command with `more`, as ddpbench was called
    here; a resume refuses a new --max-repeats, or --repeats: the error rate its looks keep rests on them), 'the same
    command with MORE' where the run's command is not known."""
    said = fresh_run_command(command, more, drop=drop)
    return f"a new run: {said}" if said else f"the same command with {' '.join(more)}"


def fresh_run_command(
    command: tuple[str, ...],
    more: tuple[str, ...],
    *,
    options: tuple[str, ...] = (),
    drop: dict[str, int] | None = None,
) -> str:
    """The run's bench command as a new run (DROPPED's flags left out, and `drop`'s, each with as many values as it
    takes there: {"--repeats": 1, "--largest-only": 0}; the --opt of each of `options`' keys too, which `more` sets
    again) with `more` after it, as ddpbench was called here; '' where the run's command is not known."""
    import shlex

    from harness.commands.console.invoked import ddpbench_command

    if not known_command(command):
        return ""
    full = _full_names(command[2:]) if command[1] == "bench" else {}
    dropped = {**DROPPED, **(drop or {})}
    words, skip = [], 0
    for k, word in enumerate(command[1:], start=1):
        if skip:
            skip -= 1
        elif (name := full.get(word.split("=")[0], word.split("=")[0])) in dropped:
            skip = dropped[name] if "=" not in word else 0
        elif name == "--opt" and _sets(word.partition("=")[2] or _at(command, k + 1), options):
            skip = 0 if "=" in word else 1  # an option `more` gives anew: its old value would be run beside it
        else:
            words.append(word)
    return f"{ddpbench_command()} {shlex.join([*words, *more])}"


def with_timeline(note: str, command: tuple[str, ...]) -> str:
    """A strategy's `comm_note` with its closing '--bucket-timeline measures it' as the run's own bench `command`
    with that flag, to paste (the flag named alone left the rest of the command to rebuild); `note` as it is where
    it does not end so or the command is not known."""
    from harness.results.values import UNHOOKED

    again = fresh_run_command(command, ("--bucket-timeline",)) if command else ""  # the run was without it
    return f"{note.removesuffix(UNHOOKED)}{again} measures it" if again and note.endswith(UNHOOKED) else note


def known_command(command: tuple[str, ...]) -> bool:
    """Whether the run recorded its command (a program and its subcommand at least)."""
    return len(command) >= 2


def _at(command: tuple[str, ...], k: int) -> str:
    return command[k] if k < len(command) else ""


def _sets(assignment: str, options: tuple[str, ...]) -> bool:
    return assignment.split("=")[0] in options


def _full_names(words: tuple[str, ...]) -> dict[str, str]:
    """Each flag of `words` that bench's parser took as an abbreviation ('--max-rep'), to its full name: argparse
    accepts a unique prefix, and a new run that kept '--max-rep 4' beside its '--max-repeats 9' kept both."""
    from harness import cli

    parser = cli.build_parser()
    bench = next(a.choices["bench"] for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    names = [name for name in bench._option_string_actions if name.startswith("--")]
    full = {}
    for word in words:
        flag = word.split("=")[0]
        if flag.startswith("--") and flag not in names and len(found := [n for n in names if n.startswith(flag)]) == 1:
            full[flag] = found[0]
    return full


def say_unreachable(still: list) -> None:
    """The open verdicts no number of repeats decides at their ratio so far, said as such rather than sized into a
    --max-repeats: what they wait on is a narrower spread between launches, the machine's noise (docs/statistics.md).
    Only at that ratio: the need is sized from it, and two identical runs (0.96× and 0.77×, intervals 0.52–1.78 and
    0.52–1.14) once read 'will not decide' and 'need about 86'."""
    from harness.analysis.stats import MAX_REPEATS

    if capped := _capped(still):
        which = capped[0].subject if len(capped) == 1 else f"{len(capped)} open verdicts"
        it, its = ("it", "its") if len(capped) == 1 else ("them", "their")
        console.say(f"ddpbench: {which}: more repeats will not decide {it} if {its} ratio so far holds (need more "
                    f"than {MAX_REPEATS} at it): the spread between launches must narrow first; run with nothing "
                    "else on the machine")  # fmt: skip


def _capped(still: list) -> list:
    """The open verdicts that say 'need more than stats.MAX_REPEATS' (one whose need is unknown is not one)."""
    return [v for v in still if v.repeats_needed and not v.reachable]


def to_decide_fixed(found: list, *, repeats: int, max_repeats: int, repeat_s: float | None = None,
                    command: tuple[str, ...] = (), nnodes: int = 1) -> None:  # fmt: skip
    """After a run of a fixed `--repeats N` whose verdicts stay open ('open after 1 repeats (need about 2)'): the
    command that decides them (across `nnodes` nodes, run on every node). Not --resume (it runs no repeat beyond the
    run's own --repeats, and refuses a new one): the run's own `command` as a new run with --repeats auto, which
    repeats only what the open ones rest on (with the --max-repeats the neediest asks), or with --repeats M, every
    configuration M times, and how long that takes at this run's pace (`repeat_s`: the seconds one repeat of every
    configuration took). The run's command, not 'the same command': after `--resume RUN` that one refuses --repeats.
    Where that is past OUT_OF_REACH_S, no command: a run said '--repeats 626' where that took 48 h, and what helps is
    a narrower spread."""
    still = [v for v in found if not v.decided]
    if not still:
        return
    if reach := [v for v in still if v not in _capped(still)]:
        need = max((int(v.repeats_needed) for v in reach if v.reachable), default=0)
        which = "the open verdict" if len(still) == 1 else f"the {len(still)} open verdicts"
        which = which if len(reach) == len(still) else f"the {len(reach)} of {len(still)} open verdicts within reach"
        took = need * repeat_s if repeat_s and need > repeats else None
        pace = f", about {duration_text(took)} at this run's pace" if took else ""
        if took and took > OUT_OF_REACH_S:
            console.say(f"ddpbench: {which} need about {need} repeats of a configuration{pace}: out of reach "
                        "here; more --steps a repeat and a quieter machine narrow the spread between launches they "
                        "wait on")  # fmt: skip
        else:
            most = ("--max-repeats", str(need)) if need > max_repeats else ()
            pace += "; auto, less" if pace else ""
            again = ("--repeats", "auto", *most)
            way = new_run_command(command, again, drop={"--repeats": 1}) + on_every_node(nnodes, new_run=True)
            instead = " in place of auto" if known_command(command) else ""  # the command shown has it
            every = (
                f", or with --repeats {need}{instead} (every configuration {need} times{pace})"
                if need > repeats
                else ""
            )
            console.say(f"ddpbench: to decide {which}: {way} (it repeats only "
                        f"the configurations they rest on, until each is decided){every}; "
                        "--resume adds no repeats to a finished run")  # fmt: skip
    say_unreachable(still)

"""The terminal: every line ddpbench prints goes through here. The commands compute and decide;
this module formats and writes. Results on stdout; errors and warnings on stderr, one line each.
A run's progress (a line per finished configuration, a bar on a terminal) is in `progress`; what
`collectives` and `predict` print is in `predictions`.
"""

from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING, TextIO

from harness.commands.console.invoked import resume_hint as resume_hint  # console.resume_hint
from harness.config import accumulation
from harness.results.invocation import retry_words as retry_words  # console.retry_words
from harness.results.values import (
    casts_counted_part,
    configuration_label,
    counted,
    failed_parity_words,
    judging_repeat_in,
    message_words,
    options_words,
    parity_words,
    samples_text,
)

if (
    TYPE_CHECKING
):  # pandas (the analysis, the grid) is imported where it is used: `list`, `--help` and errors stay quick
    import pandas as pd


BEFORE_NEXT_LINE: list = []
"""What ends before the next line is printed: `progress.Status`'s transient line, which stands for the silence it
ends."""


def _print(line: str = "", *, file: TextIO | None = None) -> None:
    """Every line goes out here, flushed at once (a long run's lines must show as they happen). When the
    reader has gone (`ddpbench bench … | head -3`), the rest is dropped quietly: the run goes on and
    writes its results and summary, it only stops talking."""
    stream = file if file is not None else sys.stdout
    if _HELD is not None and stream in _HELD[1:]:  # kept for later (`held`), on the stream it was said on
        _HELD[0].append((line, stream is _HELD[2]))
        return
    while BEFORE_NEXT_LINE:  # a line kept stands for no silence's end: the transient line stays
        BEFORE_NEXT_LINE.pop()()
    try:
        print(line, file=stream, flush=True)
    except BrokenPipeError:
        _reader_gone(stream)


def _reader_gone(stream: TextIO) -> None:
    """Point the stream's descriptor at /dev/null: later lines, and the interpreter's last flush, go nowhere."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, stream.fileno())
    finally:
        os.close(devnull)


def say(line: str) -> None:
    """One line on stdout."""
    _print(line)


_HELD: tuple[list[tuple[str, bool]], TextIO, TextIO] | None = None  # inside `held`: its lines, stdout, stderr
_AHEAD_OF: tuple[list[tuple[str, bool]], TextIO, TextIO] | None = None  # inside `ahead`: the `held` it is ahead of


@contextlib.contextmanager
def held():
    """Inside, what goes to stdout and stderr is kept, in order, and said on leaving (before an error that ends it),
    after what `ahead` says inside: an answer worked out last said first (`predict --cluster A,B`'s bookings). What
    `quiet` hides stays hidden."""
    global _HELD
    before, _HELD = _HELD, ([], sys.stdout, sys.stderr)
    try:
        yield
    finally:
        kept, _HELD = _HELD[0], before
        for line, err in kept:
            _print(line, file=sys.stderr if err else None)


@contextlib.contextmanager
def ahead():
    """Inside `held`, said at once: ahead of what it keeps, where a `say_once` line said ahead is not said again."""
    global _HELD, _AHEAD_OF
    before, _HELD, _AHEAD_OF = _HELD, None, _HELD
    try:
        yield
    finally:
        _HELD, _AHEAD_OF = before, None


def drop_held() -> int:
    """Inside `ahead`: the stdout lines `held` kept, left unsaid, its stderr's (warnings) kept; how many were left
    (predict --cluster A,B's short form: the bookings, without each cluster's prediction under them)."""
    kept = _AHEAD_OF[0]
    left = sum(not err for _, err in kept)
    kept[:] = [(line, err) for line, err in kept if err]
    return left


def said_ahead() -> bool:
    """Inside `ahead`: what is said now reads before what `held` keeps, so it points to those lines as below."""
    return _AHEAD_OF is not None


_ONCE: set[str] | None = None  # inside `said_once`: what was said already (say_once's lines, every warning)


@contextlib.contextmanager
def said_once():
    """Inside, a warning or a `say_once` line is said the first time only (several clusters: the run's words once)."""
    global _ONCE
    before, _ONCE = _ONCE, set()
    try:
        yield
    finally:
        _ONCE = before


def _first_time(line: str) -> bool:
    said = _ONCE is not None and line in _ONCE
    if _ONCE is not None:
        _ONCE.add(line)
    return not said


def say_once(line: str) -> None:
    if _first_time(line):
        say(line)
        if _AHEAD_OF is not None:  # said ahead: not again where `held` kept it
            _AHEAD_OF[0][:] = [kept for kept in _AHEAD_OF[0] if kept != (line, False)]


def once(words: str) -> str:
    """`words` the first time inside `said_once` (and always outside it), '' after: a line's legend, which several
    clusters' lines share, said with the first of them."""
    return words if _first_time(words) else ""


@contextlib.contextmanager
def quiet():
    """Nothing said inside is shown, nor counts as said for `said_once`."""
    import io

    kept = set(_ONCE or ())
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        yield
    if _ONCE is not None:
        _ONCE.intersection_update(kept)


def say_err(line: str) -> None:
    _print(line, file=sys.stderr)


def error(message: str) -> None:
    say_err(f"ddpbench: error: {message}")


def warning(message: str) -> None:
    if _first_time(f"warning: {message}"):
        say_err(f"ddpbench: warning: {message}")


def note_repeated(flag: str, typed: str, kept: list) -> None:
    """A list flag of `predict` whose values repeat (`--nodes 1,1,2`) is taken once each, and said so, as bench
    says it of its own lists."""
    if len([item for item in typed.split(",") if item.strip()]) > len(kept):
        say(f"ddpbench predict: note: {flag} {typed!r} repeats a value: each is predicted once")


def bytes_text(count: float) -> str:
    """'64 KiB', '28.0664 MiB': powers of 1024, named so (as every other line writes sizes)."""
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if count >= scale:
            return f"{count / scale:g} {unit}"
    return f"{count:g} B"


def options_text(options_json: str | None) -> str:
    words = options_words(options_json)
    return f" {words}" if words else ""


# --- bench --------------------------------------------------------------------------------------


def describe_row(row: dict) -> str:
    """A finished configuration in one line: its time and parity, or why it did not run. Its samples/s are the
    median step's (`samples_per_s`), said so: the page's throughput chart is the measured window's, which a user read
    as the same figure (0.393 here, 0.34 there)."""
    strategy = configuration_label(row["impl"], row["impl_options"])
    label = f"w{row['world_size']} {row['workload']}/{row['size']} {strategy}{accumulation.row_words(row)}"
    if row.get("repeat"):  # counted from 1, as "after 3 repeats" counts them (config ids and logs: r0, r1, …)
        label += f" (repeat {row['repeat'] + 1})"
    if row["status"] != "ok":
        kind = f" ({row['error_kind']})" if row.get("error_kind") else ""
        where = f" [traceback in the run folder: {row['error_file']}]" if row.get("error_file") else ""
        return f"{label}: {row['status'].upper()}{kind} {row['error']}{where}"
    from harness.analysis import roles

    parity = parity_words(row, why=row["impl"] != roles.baseline_name())  # a lossy hook: why, by how much
    if row["parity_ok"] is None and judging_repeat_in(row.get("parity_note")):
        parity = f"parity judged on repeat {judging_repeat_in(row.get('parity_note'))}"
    if row["parity_ok"] is False and row.get("parity_note"):
        parity += f" ({failed_parity_words(row)})"  # by how much, where: or the loss that sums
    return (
        f"{label}: {row['step_ms_median']:.2f} ms/step median (p10 {row['step_ms_p10']:.2f}, "
        f"p90 {row['step_ms_p90']:.2f}), "
        f"{samples_text(row['samples_per_s'])} samples/s at the median{communication_text(row)}, {parity}"
    )


def communication_text(row: dict) -> str:
    """', comm 40.6 ms/step mean over ranks (27.4 exposed, 33% hidden, 8.09 MiB of messages)' where the strategy's
    collectives were timed: means over the measured steps and ranks (comm_ms, exposed_comm_ms, comm_bytes), where the
    step before is a median. 'over ranks': beside a slow rank, the rank that waits for it exposes about twice this
    mean, and the why lines quote that rank's wait (a walkthrough read 16.4 exposed beside 29.8 ms waiting)."""
    comm, exposed, hidden = (row.get(k) for k in ("comm_ms", "exposed_comm_ms", "overlap_efficiency"))
    if comm is None or comm != comm or not comm > 0:  # not measured (None/NaN), or no communication
        return ""
    share = f", {hidden:.0%} hidden" if hidden is not None and hidden == hidden else ""
    sent = (
        f", {message_words(row.get('comm_bytes'))}" if message_words(row.get("comm_bytes")) else ""
    )  # a hook's saving
    return f", comm {comm:.1f} ms/step mean over ranks ({exposed:.1f} exposed{share}{sent}{casts_counted(row)})"


def casts_counted(row: dict) -> str:
    """', the bf16 hook's casts counted in flight': where a compression hook's casts are inside its timed window
    (`comm_note`), said beside its time: a walkthrough read bf16's 304 ms for 16 MiB beside stock's 247 ms for 32.1."""
    said = casts_counted_part(row.get("comm_note"))
    return f", {said.split(':')[0]}" if said else ""


def duration_text(seconds: float) -> str:
    """'45 s', '12 min', '1.5 h': the time a run's progress and its rounds (console.rounds) say is left."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def time_flag(seconds: float) -> str:
    """A time as --budget takes it ('3m', '95s'): a value printed for the user to paste (flags.duration reads it)."""
    return f"{seconds / 60:g}m" if seconds % 60 == 0 else f"{seconds:.0f}s"


def fixed_cost_split(wall_s: float, seconds: dict[str, float], *, run, step_s: float = 0.0) -> None:
    """One line: the fixed cost split as a dry run of it splits it (handoff.fixed_cost, from summary.json): its
    launches, its configurations launched (a skipped one launches nothing) and their first repeats at their cost, and
    what it paid once; the training steps (`step_s`, warm-up included) against the wall time; and where the wall time
    went, phase by phase (harness.handoff.costs), the rest as `other` (summary.json's session `phases_s`, which holds
    it). Four lines said these once, overlapping (558 s, 353 s of steps, where the 558 s went, 224 s fixed)."""
    from harness.handoff.costs import PHASES
    from harness.handoff.fixed_cost import session_split

    steps = (f"{seconds_text(step_s)} of training steps (warm-up included): the wall time {wall_s / step_s:.2f}× "
             "theirs") if step_s else ""  # fmt: skip  # what the harness costs around the steps it measures
    if not set(seconds) - {"other"}:
        if steps:
            say(f"ddpbench: {steps}")
        return
    found = session_split(run)
    each = f": {fixed_cost_parts(*found)}" if found else ""
    parts = [f"{phase} {seconds[phase]:.1f}" for phase in PHASES if seconds.get(phase, 0.0) >= 0.05]
    said = [f"fixed cost {seconds_text(wall_s - seconds.get('steps', 0.0))} beyond the timed steps{each}", steps,
            f"where the {seconds_text(wall_s)} went (s): {', '.join(parts)}, other {seconds['other']:.1f}"]  # fmt: skip
    say(f"ddpbench: {'; '.join(part for part in said if part)}")


def fixed_cost_parts(measured, shape) -> str:
    """'2 launches at 1.6 s, 6 configurations at 0.13 s, 3.6 s once': a fixed cost split (handoff.fixed_cost's
    Measured) over a run's `shape` (its Shape): where not every configuration run is a first repeat, the runs
    ('12 configuration runs at 0.1 s (0.3 s more for the first run of each of 6 configurations: …)'), a round of
    verdicts' within once. It once said '5 configurations at 0.09 s and 0.018 s more for each of their 10 first
    repeats' of 5 run once, the first repeats counted over the run's every session."""
    each, first, runs = measured.configuration_s, "", counted(shape.configurations, "configuration")
    if shape.firsts == shape.configurations:  # every one a first repeat: one cost a configuration
        each += measured.first_s
    elif shape.firsts and measured.first_s:  # runs of configurations, the first of each paying more
        runs = counted(shape.configurations, "configuration run")
        of = f"{'each of ' * (shape.firsts > 1)}{counted(shape.firsts, 'configuration')}"
        first = f" ({measured.first_s:.2g} s more for the first run of {of}: parity, model info, gradient profile)"
    once = measured.once_s + shape.rounds * measured.round_s
    return (f"{shape.launches} launch{'es' * (shape.launches != 1)} at {measured.launch_s:.2g} s, "
            f"{runs} at {each:.2g} s{first}, {once:.2g} s once")  # fmt: skip


def saved_text(statuses: list[str], total: int) -> str:
    """'2 of 6 configurations saved, none measured: 2 rows recording a failure (…)': what a stopped run kept, by
    its rows' status (a row that records a failure, a configuration killed by the stop included, measured nothing)."""
    counts = {status: statuses.count(status) for status in dict.fromkeys(statuses)}
    ok, failed = counts.pop("ok", 0), counts.pop("failed", 0)
    text = f"{len(statuses)} of {total} configurations saved"
    if not statuses:
        return text
    text += ", all measured" if ok == len(statuses) else f", {ok or 'none'} measured"
    parts = [f"{failed} row{'s' * (failed != 1)} recording a failure ({retry_words(failed)})"] if failed else []
    return text + (
        f": {', '.join([*parts, *(f'{n} {status}' for status, n in counts.items())])}" if ok < len(statuses) else ""
    )


def recommendations(frame: pd.DataFrame, *, verdicts_said: bool = False) -> None:
    """Each sweep's verdict, a line each; the buckets every cap made and why (sweep.answer's `why`) said once, where
    the same words would stand on the next strategy's line (the run page says them once too). `verdicts_said`
    (`--repeats auto`, whose last round said every verdict): only what that did not say, the fastest cap's step."""
    from harness.analysis import stats
    from harness.analysis.verdicts import sweep

    if verdicts_said:
        say("ddpbench: bucket caps, the fastest cap's step (which cap to use: the verdicts above; docs/statistics.md):")
        for _, row in frame.iterrows():
            _print(f"  {_fastest_cap(row)}")
        return
    without = sweep.without_reference(frame)  # the rule where 25 MiB is not swept, and why no command adds it
    say(f"ddpbench: bucket caps (a cap is recommended only when it beats the {stats.REFERENCE_CAP_MB:g} MiB cap "
        f"significantly over repeats and by at least {stats.DEFAULT_THRESHOLD:.0%}{'; ' * bool(without)}{without}; "
        "docs/statistics.md):")  # fmt: skip
    said = set()
    for _, row in frame.iterrows():
        words = sweep.answer(row)
        _print(f"  {sweep.describe(row, why=words not in said)}")
        said.add(words)


def _fastest_cap(row: pd.Series) -> str:
    """sweep.describe less what `--repeats auto`'s verdict line says: the decision, the repeats and, for an open
    sweep, 25 MiB's ratio (its 'so far'); a decided one says no ratio there, so it stays."""
    from harness.analysis import stats
    from harness.analysis.verdicts import sweep

    decided = row["decision"] != stats.TOO_FEW
    versus = sweep.versus_reference(row) if decided else ""
    bounds = sweep.interval_text(row["best_ci_low_ms"], row["best_ci_high_ms"])
    said = [f"{row['best_step_ms']:.2f} ms" + (f", its step's 95% CI {bounds}" if bounds else ""), versus]
    noise = f" [noisy: {row['noise']}]" if row.get("noise") else ""
    where = f"w{row['world_size']} {row['workload']}/{row['size']} {sweep.label(row)}"
    return f"{where}: {sweep.best_words(row)}: {'; '.join(w for w in said if w)}{noise}"


def strategy_verdicts(verdicts: list) -> None:
    """Each strategy's step against the reference's at its world size (harness.analysis.verdicts.decide's verdicts,
    as the run page and `--repeats auto` judge them), with what an open one would need."""
    from harness.analysis import roles, stats

    if verdicts:
        say(
            f"ddpbench: each strategy against {roles.reference_name()} at its world size (the ratio of their "
            f"steps, significant over repeats and by at least {stats.DEFAULT_THRESHOLD:.0%}; docs/statistics.md):"
        )
        for verdict in verdicts:
            _print(f"  {verdict.line()}")


def seconds_text(seconds: float) -> str:
    """'0.2 s' or '703 s': tenths under 10 s, where whole seconds would read '0 s' beside a 36× ratio."""
    return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"


def why_slower(lines: list[str], heading: str = "") -> None:
    """Each configuration's cost over the baseline, taken apart (harness.analysis.why), at the largest world size,
    under `heading` (why.heading: 'why each is slower than local', or 'how each differs from local' where one is
    not)."""
    from harness.analysis import roles

    if lines:
        said = heading or f"why each is slower than {roles.baseline_name()}"
        say(f"ddpbench: {said} at its world size, which communicates nothing (measured parts of the "
            "gap: what data parallelism costs it; docs/output.md):")  # fmt: skip
        for line in lines:
            _print(f"  {line}")


def drifting(lines: list[str]) -> None:
    """The configurations whose steps moved within their measured window: their median is of neither level."""
    if lines:
        say("ddpbench: steps that drift within the measured window (the median is of neither level; "
            "docs/statistics.md):")  # fmt: skip
        for line in lines:
            _print(f"  {line}")

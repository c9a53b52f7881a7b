"""The verdicts `--repeats auto` decides (harness.analysis.verdicts.decide) on constructed rows, and what the console
says after a round."""

from __future__ import annotations

import dataclasses
import io

import pandas as pd
from test_sweep import sweep_rows

from harness.analysis import stats
from harness.analysis.verdicts import decide, sweep
from harness.analysis.verdicts import history as answer_history
from harness.commands import console
from harness.commands.console import invoked, rounds
from harness.launch.repeats import Decided

CONFIDENCE = decide.look_confidence(decide.DEFAULT_MAX_REPEATS)


def with_medians(configs: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """The rows' step_ms_median as the store records it: per configuration, the median of its slowest-rank steps."""
    medians = steps.groupby(["config_id", "step"])["step_ms"].max().groupby("config_id").median()
    return configs.assign(step_ms_median=configs["config_id"].map(medians))


def rows(curve: dict[float, float], *, repeats: int, impl: str = "stock"):
    configs, steps = sweep_rows(curve, world_sizes=(1, 2), repeats=repeats, impl=impl)
    configs["config_id"] = impl + "-" + configs["config_id"]
    steps["config_id"] = impl + "-" + steps["config_id"]
    return with_medians(configs, steps), steps


def test_a_plain_cap_is_decided_and_an_even_one_stays_open_at_two_repeats():
    configs, steps = rows({1.0: 150.0, 25.0: 100.0}, repeats=3)
    (verdict,) = decide.verdicts(configs, steps, confidence=CONFIDENCE)
    assert verdict.kind == decide.CAP and verdict.subject == "w2 gpt2/tiny stock" and verdict.decided
    assert verdict.word == "use bucket_cap_mb=25" and decide.open_config_ids([verdict]) == set()
    even, even_steps = rows({1.0: 100.0, 25.0: 100.5}, repeats=2)
    (still,) = decide.verdicts(even, even_steps, confidence=CONFIDENCE)
    assert not still.decided and still.repeats == 2
    assert decide.open_config_ids([still]) == set(even.loc[even["world_size"] == 2, "config_id"])  # every cap of it


def test_a_strategy_is_held_against_the_reference_at_world_sizes_that_communicate():
    stock, stock_steps = rows({25.0: 100.0}, repeats=3)
    naive, naive_steps = rows({25.0: 180.0}, repeats=3, impl="naive")
    naive["impl_options"], naive["bucket_cap_mb"] = "{}", None
    found = decide.verdicts(pd.concat([stock, naive]), pd.concat([stock_steps, naive_steps]), confidence=CONFIDENCE)
    (verdict,) = found  # none at world size 1; one cap each: no cap verdict
    assert verdict.kind == decide.STRATEGY and verdict.subject == "w2 gpt2/tiny naive vs stock bucket_cap_mb=25"
    assert verdict.decided and verdict.word.startswith("slower, at 1.8")
    assert len(verdict.config_ids) == 6  # three repeats a side


def test_an_open_ratio_says_its_estimate_and_interval_so_far():
    stock, stock_steps = rows({25.0: 100.0}, repeats=2)
    naive, naive_steps = rows({25.0: 103.0}, repeats=2, impl="naive")
    naive["impl_options"], naive["bucket_cap_mb"] = "{}", None
    both, both_steps = pd.concat([stock, naive]), pd.concat([stock_steps, naive_steps])
    (verdict,) = decide.verdicts(both, both_steps, confidence=CONFIDENCE)
    assert not verdict.decided
    at_w2 = [list(frame.loc[frame["world_size"] == 2, "step_ms_median"]) for frame in (stock, naive)]
    judged = stats.ratio_interval(*at_w2, confidence=CONFIDENCE)
    assert judged["low"] < judged["ratio"] < judged["high"]
    assert verdict.line().startswith(
        f"w2 gpt2/tiny naive vs stock bucket_cap_mb=25: open after 2 repeats; so far {judged['ratio']:.2f}× the "
        f"step of stock bucket_cap_mb=25 ({CONFIDENCE * 100:.3g}% interval {judged['low']:.2f}–{judged['high']:.2f}); "
        "need"
    )


def test_an_open_ratio_of_two_noisy_repeats_says_its_interval_is_unbounded_not_a_figure():
    """make bench's two repeats at 99.5 % once printed 'interval 0.00–83191606.53'."""
    judged = {"ratio": 0.72, "low": 3e-9, "high": 83191606.53}
    assert decide._ratio_so_far(judged, 0.995, "stock") == (
        f"0.72× stock's step (1.39× faster; 99.5% interval {sweep.TOO_WIDE})"
    )  # one rule and one wording for every ratio's interval: a gpt2 sweep's read '0.01–183' a line from '<0.01–>1000'
    assert sweep.ratio_interval_text(0.0105, 183.0) == sweep.TOO_WIDE
    assert sweep.ratio_interval_text(0.11, 8.41) == "0.11–8.41"


def test_the_console_says_how_many_are_decided_what_runs_next_and_what_stayed_open(monkeypatch):
    configs, steps = rows({1.0: 100.0, 25.0: 100.5}, repeats=2)
    found = decide.verdicts(configs, steps, confidence=CONFIDENCE)
    out = io.StringIO()
    monkeypatch.setattr(console, "say", lambda line: out.write(line + "\n"))
    rounds.verdict_round(Decided(found, 2, 75.0), next_round=[object(), object()])
    rounds.verdict_round(Decided(found, 20, None, stopped_by="max-repeats"), next_round=[])
    rounds.verdict_round(Decided(found, 2, 75.0, budget_left_s=30.0), next_round=[object()])  # the budget ends first
    said = out.getvalue().splitlines()
    versus = sweep.versus_reference(sweep.recommendations(configs, steps, confidence=CONFIDENCE).iloc[0])
    assert said[0] == (
        f"ddpbench: repeats auto after 2 repeats: 1 of 1 open: w2 gpt2/tiny stock, so far fastest 1 "
        f"MiB, {versus}; 2 more configuration runs, about 75 s to decide them at the spread seen, a "
        "rough guide from 2 repeats"
    )  # the verdict named, with its estimate as it forms (one clause: '; ' parts verdicts), no bracket in a bracket
    two = rounds.one_clause(f"fastest 1 MiB; {versus}")  # two sweeps open: once read as three verdicts
    assert two == f"fastest 1 MiB, {versus}" and ";" not in two.split("(")[0]
    assert "((" not in said[0] and max(_depth(said[0])) == 1
    assert said[-1].endswith("at the spread seen, a rough guide from 2 repeats, more than the 30 s left of "
                             "--budget")  # fmt: skip
    said = said[:-1]
    assert said[1] == ("ddpbench: repeats auto: 0 of 1 verdicts decided after 20 repeats; 1 left open "
                       "(--max-repeats reached). Every verdict:")  # fmt: skip
    # Open, it still says what the evidence bounds: the fastest cap so far and 25 MiB's ratio to it, interval and all.
    assert "% interval" in versus
    assert said[2].startswith(f"  w2 gpt2/tiny stock: open after 2 repeats; so far fastest 1 MiB; {versus}; need about")
    assert said[2].endswith(", a rough guide from 2 repeats")  # its count, sized from 2 repeats' spread
    plain, plain_steps = rows({1.0: 150.0, 25.0: 100.0}, repeats=3)
    out.truncate(0), out.seek(0)
    rounds.verdict_round(Decided(decide.verdicts(plain, plain_steps, confidence=CONFIDENCE), 3, None), next_round=[])
    assert out.getvalue().splitlines() == [
        "ddpbench: repeats auto: 1 of 1 verdicts decided after 3 repeats: every verdict decided:",
        "  w2 gpt2/tiny stock: use bucket_cap_mb=25",
    ]


class Bar:
    """console.progress.Progress on a terminal, as console.rounds sees it: what it shows in place."""

    on_terminal = True

    def __init__(self):
        self.shown: list[str] = []

    def show_standing(self, text: str) -> None:
        self.shown.append(text)


def test_each_round_says_what_changed_once_and_a_terminal_shows_the_rest_in_place(monkeypatch):
    """A cap sweep once printed 'repeats auto: 0 of 1 verdicts decided after N repeat(s)' five times, near word for
    word. A round now leads with what changed; a decided verdict is named in the round that decided it, not again;
    on a terminal a round that changed nothing is no line, its standing shown in place."""
    cap = decide.Verdict(decide.CAP, "w2 mlp/tiny stock", "too few repeats to tell", False, 2, 9, frozenset({"a"}))
    ratio = decide.Verdict(decide.STRATEGY, "w2 mlp/tiny fsdp vs stock", "too few repeats to tell", False, 2, 5,
                           frozenset({"b"}))  # fmt: skip
    fsdp = dataclasses.replace(ratio, word="slower, at 6.45× stock's step", decided=True)
    looks = [([cap, ratio], 2, 80.0), ([cap, ratio], 3, 60.0), ([cap, fsdp], 4, 40.0), ([cap, fsdp], 5, 20.0)]
    for progress in (None, Bar()):
        out = io.StringIO()
        monkeypatch.setattr(console, "say", lambda line, out=out: out.write(line + "\n"))
        decided: set[str] = set()
        for found, repeats, eta in looks:
            found = [
                dataclasses.replace(v, so_far="" if v.decided else f"fastest 1 MiB after {repeats}") for v in found
            ]
            rounds.verdict_round(Decided(found, repeats, eta), next_round=[object()] * 3, decided_before=decided,
                                 progress=progress)  # fmt: skip
            decided = {v.subject for v in found if v.decided}
        said = out.getvalue().splitlines()
        decided_line = ("ddpbench: repeats auto after 4 repeats: decided w2 mlp/tiny fsdp vs stock (slower); 1 of 2 "
                        "open: w2 mlp/tiny stock, so far fastest 1 MiB after 4; 3 more configuration runs, about "
                        "40 s to decide them at the spread seen, a rough guide from 4 repeats")  # fmt: skip
        if progress is None:  # a log: a line a round, each with the estimates as they form, the decision said once
            assert len(said) == 4 and said[2] == decided_line
            assert said[1] == ("ddpbench: repeats auto after 3 repeats: 2 of 2 open: w2 mlp/tiny stock, so "
                               "far fastest 1 MiB after 3; w2 mlp/tiny fsdp vs stock, so far fastest 1 MiB after 3; "
                               "3 more configuration runs, about 60 s to decide them at the spread seen, a rough "
                               "guide from 3 repeats")  # fmt: skip
            assert sum("fsdp" in line for line in said[2:]) == 1
        else:  # a terminal: only the round that decided something is a line; the bar shows every round's standing
            assert said == [decided_line]
            assert progress.shown == [
                "verdicts open 2/2, ~80 s to decide",
                "verdicts open 2/2, ~60 s to decide",
                "verdicts open 1/2, ~40 s to decide",
                "verdicts open 1/2, ~20 s to decide",
            ]


def test_a_ratio_is_out_of_reach_only_from_8_repeats_when_no_repeats_up_to_the_maximum_could_decide_it():
    import numpy as np

    rng = np.random.default_rng(2)
    base, same = (list(100 * rng.lognormal(0, 0.10, 8)) for _ in range(2))  # launches spread 10 %: 20 cannot settle it
    assert abs(np.log(same).mean() - np.log(base).mean()) < 0.01  # and the draw shows no effect
    kwargs = {"max_repeats": 20, "confidence": CONFIDENCE, "paired": False}
    assert decide.out_of_reach(base, same, **kwargs)
    assert not decide.out_of_reach(base[:7], same[:7], **kwargs)  # before 8 repeats the spread is too uncertain
    assert not decide.out_of_reach(base, same, **{**kwargs, "max_repeats": None})  # no --max-repeats: never
    assert not decide.out_of_reach(base, [1.5 * ms for ms in same], **kwargs)  # an effect past the threshold: reachable
    quiet = list(100 * rng.lognormal(0, 0.01, 8))
    assert not decide.out_of_reach(quiet, list(100 * rng.lognormal(0, 0.01, 8)), **kwargs)  # 'no change' reachable


def test_a_verdict_given_up_runs_no_more_and_says_why(monkeypatch):
    hopeless = decide.Verdict(decide.CAP, "w2 mlp/small stock", "too few repeats to tell", False, 8, 167,
                              frozenset({"a", "b"}), given_up=True)  # fmt: skip
    still = decide.Verdict(decide.STRATEGY, "w2 mlp/small naive vs stock", "too few repeats to tell", False, 8, 30,
                           frozenset({"b", "c"}))  # fmt: skip
    assert decide.open_config_ids([hopeless, still]) == {"b", "c"}  # "b" runs again for the other verdict
    assert hopeless.line() == ("w2 mlp/small stock: open after 8 repeats; need about 167; out of reach within "
                               "--max-repeats at this spread, so given up")  # fmt: skip
    out = io.StringIO()
    monkeypatch.setattr(console, "say", lambda line: out.write(line + "\n"))
    rounds.verdict_round(Decided([hopeless], 8, None, stopped_by="out of reach"), next_round=[])
    first = out.getvalue().splitlines()[0]
    assert first == ("ddpbench: repeats auto: 0 of 1 verdicts decided after 8 repeats; "
                     "1 left open (out of reach within --max-repeats). Every verdict:")  # fmt: skip
    out.truncate(0), out.seek(0)  # one given up while another runs on: the count of open ones runs says so
    rounds.verdict_round(Decided([hopeless, still], 8, None), next_round=[object()])
    assert out.getvalue().splitlines()[0] == ("ddpbench: repeats auto after 8 repeats: given up as out of reach "
                                              "within --max-repeats: w2 mlp/small stock; 1 given up, 1 of 2 open: w2 "
                                              "mlp/small naive vs stock; 1 more configuration run")  # fmt: skip


def test_the_last_word_on_open_verdicts_says_what_would_decide_them(monkeypatch):
    """A walkthrough's sweep ended 'need about 41' after 20 repeats, and --resume refused --max-repeats: the way on
    is a new run with more, with its time; a run stopped by --budget goes on with --resume and a new one."""
    hopeless = decide.Verdict(decide.CAP, "w2 mlp/small bucketed", "too few repeats to tell", False, 20, 189,
                              frozenset({"a"}), given_up=True)  # fmt: skip
    short = decide.Verdict(decide.CAP, "w2 mlp/small stock", "too few repeats to tell", False, 20, 41, frozenset({"b"}))
    out = io.StringIO()
    monkeypatch.setattr(console, "say", lambda line: out.write(line + "\n"))
    monkeypatch.setattr(invoked, "ddpbench_command", lambda: "ddpbench")  # as the console script was called
    rounds.to_decide(Decided([hopeless, short], 20, None, stopped_by="max-repeats", beyond_s=1500.0), run_id="r1",
                      results="res", max_repeats=20)  # fmt: skip
    assert out.getvalue() == (
        "ddpbench: to decide the rest: the same command with --max-repeats 189 (the most an open verdict needs at "
        "the spread and ratio seen, about 25 min at this session's pace; the verdicts decided here stop early "
        "again); --resume keeps this run's --max-repeats 20, on which its verdicts' error rate rests\n"
    )
    out.truncate(0), out.seek(0)  # said in a resumed session too: the run's first command, a new run, to paste
    first = ("/x/.venv/bin/ddpbench", "bench", "--impls", "stock,zero", "--max-repeats=20", "--budget", "3m",
             "--run-id", "r1", "--results", "res")  # fmt: skip
    rounds.to_decide(Decided([hopeless, short], 20, None, stopped_by="max-repeats"), run_id="r1", results="res",
                     max_repeats=20, command=first)  # fmt: skip
    assert out.getvalue().startswith("ddpbench: to decide the rest: a new run: ddpbench bench --impls stock,zero "
                                     "--results res --max-repeats 189 (the most")  # fmt: skip
    out.truncate(0), out.seek(0)
    rounds.to_decide(Decided([short], 6, 90.0, stopped_by="budget"), run_id="r1", results="res", max_repeats=41)
    assert out.getvalue() == ("ddpbench: to decide the rest: ddpbench bench --resume r1 --results res --budget 2m "
                              "(about 2 min more at the spread seen)\n")  # fmt: skip  # 90 s, rounded up: pasteable
    out.truncate(0), out.seek(0)  # after 3 repeats the estimate is as rough as the counts
    rounds.to_decide(Decided([short], 3, 150.0, stopped_by="budget"), run_id="r1", results="res", max_repeats=41)
    assert out.getvalue() == ("ddpbench: to decide the rest: ddpbench bench --resume r1 --results res --budget 3m "
                              "(about 2 min more at the spread seen, a rough guide from 3 repeats)\n")  # fmt: skip
    out.truncate(0), out.seek(0)
    decided = decide.Verdict(decide.CAP, "w2 mlp/small stock", "use bucket_cap_mb=25", True, 4, None, frozenset())
    rounds.to_decide(Decided([decided], 4, None), run_id="r1", results="res", max_repeats=20)
    assert out.getvalue() == ""  # nothing open: nothing to say


def test_a_verdict_no_number_of_repeats_decides_is_not_sized_into_a_max_repeats(monkeypatch):
    """A walkthrough's verdict said 'need more than 1000: the repeats differ far beyond the threshold', then the
    last line offered --max-repeats 1000 (about 26.9 h), a command that could not decide it."""
    capped = decide.Verdict(decide.STRATEGY, "w2 convnext_tiny/tiny fsdp vs stock", "too few repeats to tell", False,
                            8, 1000, frozenset({"a"}), given_up=True)  # fmt: skip
    short = decide.Verdict(decide.CAP, "w2 mlp/small stock", "too few repeats to tell", False, 20, 41, frozenset({"b"}))
    out = io.StringIO()
    monkeypatch.setattr(console, "say", lambda line: out.write(line + "\n"))
    rounds.to_decide(Decided([capped, short], 20, None, stopped_by="max-repeats"), run_id="r1", results="res",
                     max_repeats=20)  # fmt: skip
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("ddpbench: to decide the 1 that need more: the same command with --max-repeats 41 (")
    assert len(lines) == 1  # given up, its own line says why and what would decide it
    assert capped.line().endswith("need more than 1000 at the ratio so far: the repeats differ far beyond the "
                                  "threshold; given up: the spread between launches must narrow first, with nothing "
                                  "else on the machine")  # fmt: skip
    out.truncate(0), out.seek(0)  # that one alone: no command sized for it
    rounds.to_decide(Decided([capped], 8, None, stopped_by="out of reach"), run_id="r1", results="res", max_repeats=20)
    assert out.getvalue() == ""
    out.truncate(0), out.seek(0)  # a fixed --repeats run says the same
    rounds.to_decide_fixed([capped, short], repeats=3, max_repeats=20)
    assert out.getvalue().startswith("ddpbench: to decide the 1 of 2 open verdicts within reach: the same command "
                                     "with --repeats auto --max-repeats 41 (")  # fmt: skip
    assert "more repeats will not decide it" in out.getvalue()
    out.truncate(0), out.seek(0)  # the capped one alone: no command offered for it, only why not
    rounds.to_decide_fixed([capped], repeats=3, max_repeats=20)
    assert "to decide" not in out.getvalue() and out.getvalue().count("\n") == 1
    from harness.launch import repeats

    by_id = {"a": "A", "b": "B"}  # the time the command takes (beyond_s) is sized for what it can decide
    assert not capped.reachable and short.reachable
    assert repeats._needs([capped, short], by_id, given_up=True, reachable=True) == {"B": 41}


def test_a_fixed_repeats_run_names_the_command_that_decides_its_open_verdicts(monkeypatch):
    """'open after 1 repeats (need about 2)' ended a `--repeats 1` run with no way on: --resume refuses --repeats
    and has nothing to resume, so the way is the same command with --repeats auto (or enough fixed repeats)."""
    short = decide.Verdict(decide.STRATEGY, "w2 mlp/tiny naive vs stock", "too few repeats to tell", False, 1, 2,
                           frozenset({"a"}))  # fmt: skip
    far = decide.Verdict(decide.CAP, "w2 mlp/tiny stock", "too few repeats to tell", False, 3, 41, frozenset({"b"}))
    decided = decide.Verdict(decide.CAP, "w2 mlp/tiny stock", "use bucket_cap_mb=25", True, 3, None, frozenset())
    out = io.StringIO()
    monkeypatch.setattr(console, "say", lambda line: out.write(line + "\n"))
    rounds.to_decide_fixed([short, decided], repeats=1, max_repeats=20)
    assert out.getvalue() == (
        "ddpbench: to decide the open verdict: the same command with --repeats auto (it repeats only the "
        "configurations they rest on, until each is decided), or with --repeats 2 (every configuration 2 times); "
        "--resume adds no repeats to a finished run\n"
    )
    out.truncate(0), out.seek(0)  # the run's own command, not the one typed: after `--resume r` that refuses --repeats
    monkeypatch.setattr("harness.commands.console.invoked.ddpbench_command", lambda: "ddpbench")
    run = ("/v/bin/ddpbench", "bench", "--impls", "naive,stock", "--repeats", "1", "--run-id", "r", "--results", "R")
    rounds.to_decide_fixed([short, decided], repeats=1, max_repeats=20, command=run)
    assert out.getvalue().startswith(
        "ddpbench: to decide the open verdict: a new run: ddpbench bench --impls naive,stock --results R --repeats "
        "auto (it repeats only the configurations they rest on, until each is decided), or with --repeats 2 in place "
        "of auto (every configuration 2 times); --resume adds no repeats to a finished run"
    ), out.getvalue()
    out.truncate(0), out.seek(0)  # one needs more than --max-repeats gives auto: it says how many
    rounds.to_decide_fixed([short, far], repeats=3, max_repeats=20)
    assert "the 2 open verdicts: the same command with --repeats auto --max-repeats 41 (" in out.getvalue()
    assert "or with --repeats 41 (every configuration 41 times)" in out.getvalue()
    out.truncate(0), out.seek(0)  # at this run's pace: 41 repeats of 90 s each
    rounds.to_decide_fixed([short, far], repeats=3, max_repeats=20, repeat_s=90.0)
    assert "(every configuration 41 times, about 62 min at this run's pace; auto, less)" in out.getvalue()
    out.truncate(0), out.seek(0)  # 626 repeats of a 270 s round: 47 h, no command to run, what helps instead
    needy = dataclasses.replace(far, repeats_needed=626)
    rounds.to_decide_fixed([short, needy], repeats=2, max_repeats=20, repeat_s=270.0)
    assert out.getvalue() == (
        "ddpbench: the 2 open verdicts need about 626 repeats of a configuration, about 47.0 h at this run's pace: out "
        "of reach here; more --steps a repeat and a quieter machine narrow the spread between launches they wait on\n"
    )
    out.truncate(0), out.seek(0)
    rounds.to_decide_fixed([decided], repeats=3, max_repeats=20)
    assert out.getvalue() == ""  # nothing open: nothing to say


def test_a_budget_stop_sends_to_resume_only_the_verdicts_a_resume_can_decide(monkeypatch):
    """Seen: --budget 4m --max-repeats 4, every verdict 'need about 864', and the last line said resume with a
    budget, which reaches 4 repeats and decides nothing. A resume goes only as far as the run's --max-repeats."""
    far = [decide.Verdict(decide.STRATEGY, f"w2 mlp/small {impl} vs stock", "too few repeats to tell", False, 3, 864,
                          frozenset({impl})) for impl in ("naive", "flat")]  # fmt: skip
    near = decide.Verdict(decide.STRATEGY, "w2 mlp/small zero vs stock", "too few repeats to tell", False, 3, 4,
                          frozenset({"zero"}))  # fmt: skip
    out = io.StringIO()
    monkeypatch.setattr(console, "say", lambda line: out.write(line + "\n"))
    monkeypatch.setattr(invoked, "ddpbench_command", lambda: "python -m harness")  # how the user called it
    rounds.to_decide(Decided(far, 3, 100.0, stopped_by="budget", beyond_max=True, beyond_s=7200.0), run_id="knobs1",
                      results="res", max_repeats=4)  # fmt: skip
    assert out.getvalue() == (  # every open one needs more than a resume reaches: no resume offered
        "ddpbench: to decide the rest: the same command with --max-repeats 864 (the most an open verdict needs at "
        "the spread and ratio seen, about 2.0 h at this session's pace, a rough guide from 3 repeats; the verdicts "
        "decided here stop early again); --resume keeps this run's --max-repeats 4, on which its verdicts' error rate "
        "rests\n"
    )
    out.truncate(0), out.seek(0)  # some within reach, some beyond: each way on for its own
    rounds.to_decide(Decided([*far, near], 3, 100.0, stopped_by="budget", beyond_max=True, beyond_s=7200.0),
                      run_id="knobs1", results="res", max_repeats=4)  # fmt: skip
    assert out.getvalue().splitlines() == [
        "ddpbench: to decide the 1 open within --max-repeats 4: python -m harness bench --resume knobs1 --results res "
        "--budget 2m (about 2 min more at the spread seen, a rough guide from 3 repeats; some need more)",
        "ddpbench: to decide the 2 that need more: the same command with --max-repeats 864 (the most an open verdict "
        "needs at the spread and ratio seen, about 2.0 h at this session's pace, a rough guide from 3 repeats; the "
        "verdicts decided here stop early again); --resume keeps this run's --max-repeats 4, on which its verdicts' "
        "error rate rests",
    ]
    out.truncate(0), out.seek(0)  # --max-repeats reached with every one within it: nothing a command would decide
    rounds.to_decide(Decided([near], 4, None, stopped_by="max-repeats"), run_id="knobs1", results="res",
                      max_repeats=4)  # fmt: skip
    assert out.getvalue() == ""


def test_a_verdict_reopened_by_another_verdicts_repeats_is_said_and_nothing_to_decide_is_said_plainly(monkeypatch):
    reopened = decide.Verdict(decide.STRATEGY, "w2 mlp/small bucketed vs stock", "too few repeats to tell", False, 4,
                              6, frozenset({"a"}))  # fmt: skip
    out = io.StringIO()
    monkeypatch.setattr(console, "say", lambda line: out.write(line + "\n"))
    rounds.verdict_round(Decided([reopened], 4, None), next_round=[object()], decided_before={reopened.subject})
    assert out.getvalue() == ("ddpbench: repeats auto after 4 repeats: reopened w2 mlp/small bucketed vs stock (the "
                              "repeats another verdict asked for widened the interval); 1 of 1 open: w2 "
                              "mlp/small bucketed vs stock; 1 more configuration run\n")  # fmt: skip
    out.truncate(0), out.seek(0)
    rounds.verdict_round(Decided([], 1, None), next_round=[])
    said = out.getvalue().splitlines()
    assert said == ["ddpbench: repeats auto: nothing to decide (no bucket-cap sweep, no strategy against the "
                    "reference): one repeat each"]  # fmt: skip
    out.truncate(0), out.seek(0)
    rounds.verdict_round(Decided([], 2, None), next_round=[])  # two repeats planned, every rival failed
    assert out.getvalue().startswith("ddpbench: repeats auto: no verdict to decide: every configuration a verdict "
                                     "would rest on failed or was skipped")  # fmt: skip


def test_verdicts_mark_open_ones_given_up_only_when_asked_with_max_repeats(monkeypatch):
    configs, steps = rows({1.0: 100.0, 25.0: 100.5}, repeats=2)
    monkeypatch.setattr(decide, "out_of_reach", lambda *a, max_repeats, **k: max_repeats is not None)
    (plain,) = decide.verdicts(configs, steps, confidence=CONFIDENCE)
    (marked,) = decide.verdicts(configs, steps, confidence=CONFIDENCE, max_repeats=20)
    assert not plain.decided and not plain.given_up and marked.given_up


def test_a_sweep_with_25_mib_is_out_of_reach_when_no_cap_can_be_judged_against_25_mib(monkeypatch):
    """A lead between two other caps decides nothing (the decision is the fastest against 25 MiB): only the
    comparisons with 25 MiB are asked whether they are out of reach, and not a cap already slower than it."""
    configs, steps = rows({1.0: 100.0, 5.0: 100.2, 25.0: 110.0, 100.0: 150.0}, repeats=8)
    judged = decide.sweep.recommend
    monkeypatch.setattr(decide.sweep, "recommend", lambda *a, **k: {**judged(*a, **k), "decision": stats.TOO_FEW})
    asked: list[float] = []
    monkeypatch.setattr(decide, "out_of_reach", lambda base, new, **k: asked.append(round(max(new), 3)) is None)
    (verdict,) = decide.verdicts(configs, steps, confidence=CONFIDENCE, max_repeats=20)
    assert verdict.given_up
    medians = configs[configs["world_size"] == 2].groupby("bucket_cap_mb")["step_ms_median"].max().round(3)
    # 1 and 5 MiB, each against 25 MiB; never 1 against 5, nor 100 MiB, surely slower than 25 and so done with
    assert sorted(asked) == [medians[25.0]] * 2


def test_the_pace_of_the_rounds_counts_from_the_first_launch_and_the_budget_from_the_start(monkeypatch):
    """The command's own start (interpreter, imports, planning) is paid once: spread over every configuration
    it would inflate the estimate of each round; the budget still counts the whole wait."""
    import types

    from harness.launch import repeats

    seen = {}
    monkeypatch.setattr(repeats, "_pace", lambda plan, since, done: seen.setdefault("pace", since) and 2.0)
    monkeypatch.setattr(repeats, "_standing", lambda *a, **k: (Decided([], 1, None), [object()]))
    monkeypatch.setattr(repeats, "_over_budget", lambda budget, since, next_s: seen.setdefault("budget", since) > 0)
    config = types.SimpleNamespace(repeats=decide.AUTO, max_repeats=20, budget_s=60.0, nnodes=1)
    plan = types.SimpleNamespace(phases_s={}, node_rank=0)  # the launcher's own phases: the judging's time goes there
    repeats.until_decided(config, plan, began=100.0, launched=103.0, on_round=lambda *a: None,
                          on_written=lambda c: None)  # fmt: skip
    assert seen == {"pace": 103.0, "budget": 100.0} and set(plan.phases_s) == {"verdicts"}


def test_the_history_names_the_look_at_which_the_run_itself_decided():
    stock, stock_steps = rows({25.0: 100.0}, repeats=8)
    naive, naive_steps = rows({25.0: 180.0}, repeats=8, impl="naive")
    naive["impl_options"], naive["bucket_cap_mb"] = "{}", None
    both, both_steps = pd.concat([stock, naive]), pd.concat([stock_steps, naive_steps])
    subject = "w2 gpt2/tiny naive vs stock bucket_cap_mb=25"
    replayed = answer_history.history(both, both_steps, max_repeats=20).set_index("subject")
    assert replayed.loc[subject, "decided_after"] == 2  # every configuration cut to its first 2 repeats
    # The run itself ran stock 8 times before naive's 8 repeats came in one round: its one look before that saw
    # no naive row, so it decided naive at 8 repeats, and the run's own looks say so.
    meta = {"configurations": [{"config_id": c} for c in both["config_id"]], "look_sizes": [len(stock)]}
    live = answer_history.live_looks(meta, both)
    assert [len(seen) for seen in live] == [len(stock), len(both)]
    lived = answer_history.history(both, both_steps, max_repeats=20, seen_by_look=live).set_index("subject")
    assert lived.loc[subject, "decided_after"] == 8
    assert answer_history.live_looks({"configurations": meta["configurations"]}, both) is None  # an older run: replayed


def test_two_nodes_verdicts_name_the_world_size_once_and_an_older_rows_null_node_count_is_one():
    configs, steps = rows({1.0: 150.0, 25.0: 100.0}, repeats=3)
    two_nodes = configs.assign(world_size=configs["world_size"] * 2, nnodes=2)  # world_size: every node's ranks
    subjects = [v.subject for v in decide.verdicts(two_nodes, steps, confidence=CONFIDENCE)]
    assert subjects == ["w2 gpt2/tiny stock", "w4 gpt2/tiny stock"]  # once w4 and w8: the nodes counted twice
    (older,) = decide.verdicts(configs.assign(nnodes=None), steps, confidence=CONFIDENCE)  # once a ValueError
    assert older.subject == "w2 gpt2/tiny stock" and older.decided


def test_a_faster_strategy_reads_as_the_run_page_reads_it():
    """A walkthrough cross-checked the console's 'faster (0.55× the reference's step)' against the page's '1.81×
    faster', and a team lead the console's '0.81× … interval 0.56–1.17' against the page's 'takes 1.24× its time
    (interval 0.86–1.79)': both now say the strategy's step over stock's first, as decide.versus words it."""
    judged = {"verdict": stats.FASTER, "ratio": 0.55}
    assert decide._ratio_words(judged, "stock") == "faster, at 0.55× stock's step (1.82× faster)"
    assert decide._ratio_words({"verdict": stats.SLOWER, "ratio": 1.3}, "stock") == "slower, at 1.30× stock's step"
    assert decide.versus(0.81, decide.step_of("stock"), interval="99.5% interval 0.56–1.17") == (
        "0.81× stock's step (1.23× faster; 99.5% interval 0.56–1.17)"
    )
    assert decide.step_of("stock bucket_cap_mb=25") == "the step of stock bucket_cap_mb=25"


def test_the_reference_at_another_option_is_held_against_it_as_asked_at_its_defaults():
    """A walkthrough swept static_graph=false,true to ask whether DDP's defaults matter: every stock row had an
    option, so none was the reference and no verdict was made. static_graph=False is DDP as it ships."""
    shipped, shipped_steps = rows({25.0: 100.0}, repeats=3)
    graph, graph_steps = rows({25.0: 140.0}, repeats=3)
    graph["config_id"], graph_steps["config_id"] = "g" + graph["config_id"], "g" + graph_steps["config_id"]
    shipped["impl_options"] = '{"bucket_cap_mb": 25.0, "static_graph": false}'
    graph["impl_options"] = '{"bucket_cap_mb": 25.0, "static_graph": true}'
    found = decide.verdicts(pd.concat([shipped, graph]), pd.concat([shipped_steps, graph_steps]), confidence=CONFIDENCE)
    (verdict,) = found
    assert verdict.kind == decide.STRATEGY and verdict.decided and verdict.word.startswith("slower, at 1.4")
    # each named by what it sets away from DDP as shipped: static_graph=False is no such option
    assert verdict.subject == "w2 gpt2/tiny stock bucket_cap_mb=25 static_graph=True vs stock bucket_cap_mb=25"


def test_every_stock_row_setting_an_option_the_model_needs_is_the_reference_the_verdicts_hold_against():
    """The run page compares with stock find_unused_parameters=True where every stock row set it; the verdicts (and
    --repeats auto) hold the others against the same rows, or the page's column and the console would differ."""
    stock, stock_steps = rows({25.0: 100.0}, repeats=3)
    zero, zero_steps = rows({25.0: 140.0}, repeats=3, impl="zero")
    for frame in (stock, zero):
        frame["impl_options"] = '{"find_unused_parameters": true}'
    found = decide.verdicts(pd.concat([stock, zero]), pd.concat([stock_steps, zero_steps]), confidence=CONFIDENCE)
    (verdict,) = found
    assert verdict.kind == decide.STRATEGY and verdict.word.startswith("slower, at 1.4")
    assert verdict.subject.endswith("vs stock find_unused_parameters=True")


def test_under_auto_the_bucket_caps_block_adds_only_what_the_last_word_did_not_say(monkeypatch, capsys):
    """Under auto the console said a cap sweep's verdict twice: 'open after 8 repeats (so far fastest 2 MiB; 25 MiB
    takes 1.20× as long (99.5% interval 0.56–2.54); need about 236…)', then 'too few repeats to tell (have 8, need
    about 236) (leading so far 2 MiB … 25 MiB takes 1.20× as long (99.5% interval 0.56–2.54)…)'."""
    for curve, decided in (({1.0: 100.0, 25.0: 100.5}, False), ({1.0: 100.0, 25.0: 150.0}, True)):
        configs, steps = rows(curve, repeats=3)
        found = decide.verdicts(configs, steps, confidence=CONFIDENCE)
        rounds.verdict_round(Decided(found, 3, None, stopped_by="max-repeats"), next_round=[])
        frame = sweep.recommendations(configs, steps, confidence=CONFIDENCE)
        console.recommendations(frame, verdicts_said=True)
        said = capsys.readouterr().out
        row = frame.iloc[0]
        assert said.count(sweep.versus_reference(row)) == 1  # said once: in the verdict where open, else below
        assert said.count("need about") == (0 if decided else 1) and "too few repeats" not in said
        caps = said.splitlines()[-1]
        assert caps.startswith(f"  w2 gpt2/tiny stock: {'fastest' if decided else 'leading so far'} 1 MiB: "
                               f"{row['best_step_ms']:.2f} ms, its step's 95% CI ")  # fmt: skip
        assert ("use bucket_cap_mb" in caps) is False and (sweep.versus_reference(row) in caps) is decided


def test_a_sharded_lead_on_a_cpus_optimizer_step_is_said_after_the_verdicts():
    """A recommender's CPU run said 'zero bucket_cap_mb=25 vs stock bucket_cap_mb=25: … 2.19× faster' where Adam was
    most of the step and predict ranked ZeRO behind stock on an H100 cluster. Where a sharding strategy's lead over
    stock is mostly its optimizer step, in the steps' own phase columns, one line after the verdicts says so on a CPU
    run; not on a GPU run, nor where the lead is elsewhere."""
    from harness.analysis import optimizer_lead

    stock, stock_steps = rows({25.0: 1100.0}, repeats=3)
    zero, zero_steps = rows({25.0: 550.0}, repeats=3, impl="zero")
    steps = pd.concat([stock_steps.assign(optimizer_ms=stock_steps["step_ms"] * 0.67),
                       zero_steps.assign(optimizer_ms=zero_steps["step_ms"] * 0.52)])  # fmt: skip
    configs = with_medians(pd.concat([stock, zero]), steps).assign(device="cpu")
    said = optimizer_lead.cpu_verdict_words(configs, steps, confidence=CONFIDENCE)
    lead = (1100 * 0.67 - 550 * 0.52) / 550
    assert said.startswith(
        f"w2 gpt2/tiny zero bucket_cap_mb=25 vs stock bucket_cap_mb=25: {lead:.0%} of its lead over stock "
        "bucket_cap_mb=25 is the optimizer step (7"  # its slowest rank's mean: about 1,100 × 0.67 ms
    ) and said.endswith(" ms as timed, any broadcast in it; 67% of stock bucket_cap_mb=25's step)"), said
    assert optimizer_lead.cpu_verdict_words(configs.assign(device="cuda"), steps, confidence=CONFIDENCE) == ""
    elsewhere = steps.assign(optimizer_ms=steps["step_ms"] * 0.1)  # the optimizer a tenth of each: the lead is not it
    assert optimizer_lead.cpu_verdict_words(configs, elsewhere, confidence=CONFIDENCE) == ""


def _depth(line: str):
    """How deep each character of `line` sits in brackets."""
    depth = 0
    for ch in line:
        depth += (ch == "(") - (ch == ")")
        yield depth


def test_a_one_layout_verdicts_why_is_said_once_over_the_rounds(monkeypatch):
    """A resnet50 sweep's round line said "flat: any of 1, 5, 25, 100 MiB (every cap makes one bucket of 0.131 MiB,
    every gradient: a cap splits buckets only between parameters, …)" for stock and again for bucketed, and the last
    word listed both in full again: the why once, the first time, then 'every cap makes the same buckets'."""
    found = []
    for impl in ("stock", "bucketed"):
        configs, steps = rows({1.0: 100.0, 25.0: 100.5}, repeats=3, impl=impl)
        configs["bucket_sizes_mb"] = [[0.131]] * len(configs)
        found += decide.verdicts(configs, steps, confidence=CONFIDENCE)
    assert len(found) == 2 and all(v.decided for v in found)
    out = io.StringIO()
    monkeypatch.setattr(console, "say", lambda line: out.write(line + "\n"))
    said: set[str] = set()
    rounds.verdict_round(Decided(found, 3, 75.0), next_round=[object()], said=said)
    rounds.verdict_round(Decided(found, 3, None), next_round=[], decided_before={v.subject for v in found}, said=said)
    assert out.getvalue().count(sweep.ONLY_BETWEEN) == 1, out.getvalue()
    assert out.getvalue().count("(every cap makes the same buckets)") == 3, out.getvalue()


def test_a_given_up_verdict_is_not_said_again_under_its_line(monkeypatch):
    """A resnet50 run's last word said 'need more than 1000 at the ratio so far: …; out of reach within --max-repeats
    at this spread, so given up', and the next line 'more repeats will not decide it if its ratio so far holds (need
    more than 1000 at it)': the same twice."""
    hopeless = decide.Verdict(decide.STRATEGY, "w2 mlp/small bucketed vs stock", "too few repeats to tell", False, 8,
                              stats.MAX_REPEATS, frozenset({"a"}), given_up=True)  # fmt: skip
    out = io.StringIO()
    monkeypatch.setattr(console, "say", lambda line: out.write(line + "\n"))
    rounds.verdict_round(Decided([hopeless], 8, None, stopped_by="out of reach"), next_round=[])
    rounds.to_decide(Decided([hopeless], 8, None, stopped_by="out of reach"), run_id="r1", results="res",
                     max_repeats=20)  # fmt: skip
    assert out.getvalue().count(f"need more than {stats.MAX_REPEATS}") == 1, out.getvalue()
    rounds.to_decide(Decided([dataclasses.replace(hopeless, given_up=False)], 8, None, stopped_by="budget"),
                     run_id="r1", results="res", max_repeats=20)  # fmt: skip
    assert "more repeats will not decide it" in out.getvalue()  # not given up: its line did not say so


def test_k1_and_k4_of_one_setup_are_named_apart():
    """`bench --grad-accum 1,4`: each K is its own setup, and its verdicts say which (both read 'w2 gpt2/tiny naive vs
    stock bucket_cap_mb=25' before); K=1 reads as a run without accumulation always did."""
    sides = []
    for accum, naive_ms in ((1, 180.0), (4, 700.0)):
        stock, stock_steps = rows({1.0: 150.0 * accum, 25.0: 100.0 * accum}, repeats=3)
        naive, naive_steps = rows({25.0: naive_ms}, repeats=3, impl="naive")
        naive["impl_options"], naive["bucket_cap_mb"] = "{}", None
        for frame in (stock, stock_steps, naive, naive_steps):
            frame["config_id"] = frame["config_id"] + f"-k{accum}"
        sides.append((pd.concat([stock, naive]).assign(grad_accum=accum), pd.concat([stock_steps, naive_steps])))
    found = decide.verdicts(*(pd.concat(frames) for frames in zip(*sides, strict=True)), confidence=CONFIDENCE)
    subjects = sorted(v.subject for v in found)
    versus = "w2 gpt2/tiny naive vs stock bucket_cap_mb=25"
    assert subjects == [versus, f"{versus} K=4", "w2 gpt2/tiny stock", "w2 gpt2/tiny stock K=4"]

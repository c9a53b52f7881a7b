"""`--repeats auto` on a terminal and in its last word (harness.commands.console.rounds with console.progress's bar),
on a terminal stand-in and constructed verdicts: no launch."""

from __future__ import annotations

import contextlib
import dataclasses
import types

from terminal import Terminal

from harness.analysis.verdicts import decide
from harness.commands.console import rounds
from harness.commands.console.progress import Progress
from harness.config.grid import Configuration
from harness.launch.repeats import Decided


def planned(repeat: int) -> Configuration:
    return Configuration(config_id=f"w2-stock-r{repeat}", impl="stock", impl_options={}, workload="mlp", size="small",
                         world_size=2, nnodes=1, batch_size=8, steps=6, warmup=2, dtype="fp32", device="cpu",
                         backend="gloo", seed=0, parity=True, repeat=repeat)  # fmt: skip


def open_verdict(subject: str = "w2 mlp/small zero vs stock", *, repeats: int = 8, needed: int = 226, **kw):
    return decide.Verdict(decide.STRATEGY, subject, "too few repeats to tell", False, repeats, needed,
                          frozenset({subject}), **kw)  # fmt: skip


def on_round(progress: Progress, standing: Decided, more: list, screen: Terminal) -> None:
    config = types.SimpleNamespace(max_repeats=20, command=(), nnodes=1)
    plan = types.SimpleNamespace(run_id="r1", run=types.SimpleNamespace(parent="res"))
    with contextlib.redirect_stdout(screen):  # console.say's stdout is the terminal the bar is drawn on
        rounds.on_round(progress, config, plan, standing, more)


def test_a_rounds_line_and_the_last_word_go_above_the_bar_not_onto_its_line(tmp_path):
    """On a terminal the last word once read '…50/50 [03:53<00:00, 4.14s/config, step 6/6]ddpbench: repeats auto: 0
    of 1 verdicts decided…': said while the bar stood, onto its line."""
    screen = Terminal()
    progress = Progress(tmp_path, [planned(0)], stream=screen)
    decided = dataclasses.replace(open_verdict("w2 mlp/small bucketed vs stock"), decided=True, word="slower, at 2×")
    on_round(progress, Decided([decided, open_verdict()], 2, 60.0), [planned(1)], screen)  # news: a line
    on_round(progress, Decided([decided, open_verdict()], 3, None, stopped_by="max-repeats"), [], screen)  # the last
    shown = screen.getvalue()
    for said in ("ddpbench: repeats auto after 2 repeats: decided", "ddpbench: repeats auto: 1 of 2"):
        before = shown[: shown.index(said)]
        assert before.endswith(("\r", "\n")), repr(before[-80:])  # at a line's start: the bar wiped, or closed
    assert "\r" not in shown[shown.index("ddpbench: repeats auto: 1 of 2") :]  # the bar closed, not drawn again


def test_the_bar_says_what_its_time_runs_to_and_the_budget_left_with_no_second_eta(tmp_path):
    """At 1:26 into a 6 min budget the bar read 'verdicts open 1/1, about 6 min more · … 80%| 20/25 [01:26<00:20':
    the time to reach --max-repeats, said as the run's, beside tqdm's time to the round's end; the run ended at 3:53."""
    screen = Terminal()
    progress = Progress(tmp_path, [planned(0)], stream=screen, grows=True)
    standing = Decided([open_verdict(needed=226)], 8, 360.0, beyond_max=True, budget_left_s=240.0)
    on_round(progress, standing, [planned(1)], screen)  # nothing changed: said in place
    progress.close()
    bar = screen.getvalue().split("\r")[-1]
    assert bar.startswith("verdicts open 1/1, ~6 min to --max-repeats (240 s of --budget left) · launching")
    assert "<" not in screen.getvalue()  # no ETA of tqdm's own


def test_the_time_to_decide_and_the_budget_left_never_read_the_same():
    """'about 4 min to reach --max-repeats … more than the 4 min left of --budget' read as a contradiction."""
    for estimate, left, said in ((260.0, 230.0, ("260 s", "230 s")), (370.0, 340.0, ("6.2 min", "5.7 min")),
                                 (6000.0, 5950.0, ("100.0 min", "99.2 min"))):  # fmt: skip
        assert rounds.apart(estimate, left) == said
        standing = Decided([open_verdict()], 8, estimate, beyond_max=True, budget_left_s=left)
        tail = f"about {said[0]} to reach --max-repeats (some need more) at the spread seen, more than the {said[1]} "
        assert rounds.time_words(standing).endswith(tail + "left of --budget")
        assert rounds.time_words(standing, short=True) == f", ~{said[0]} to --max-repeats ({said[1]} of --budget left)"


def test_the_last_word_keeps_a_verdict_given_up_whose_reference_ran_on_for_another(tmp_path):
    """zero vs stock was given up at 8 repeats, then stock ran on to 16 for bucketed's verdict: on the final rows
    out_of_reach no longer held, and the last word said 'zero vs stock: open after 8 repeats; … need about 226'."""
    screen = Terminal()
    progress = Progress(tmp_path, [planned(0)], stream=screen)
    bucketed = open_verdict("w2 mlp/small bucketed vs stock", needed=40)
    on_round(progress, Decided([open_verdict(given_up=True), bucketed], 8, 60.0), [planned(8)], screen)
    final = [open_verdict(), dataclasses.replace(bucketed, repeats=16)]  # zero ran no repeat since
    on_round(progress, Decided(final, 16, None, stopped_by="max-repeats"), [], screen)
    said = screen.getvalue().splitlines()
    (zero,) = [line for line in said if line.startswith("  w2 mlp/small zero vs stock")]
    assert zero.endswith("need about 226; out of reach within --max-repeats at this spread, so given up")
    (bucketed_line,) = [line for line in said if line.startswith("  w2 mlp/small bucketed vs stock")]
    assert "given up" not in bucketed_line
    rerun = Progress(tmp_path, [planned(0)], stream=Terminal())  # given up, then run again for its own sake: open
    on_round(rerun, Decided([open_verdict(given_up=True)], 8, 60.0), [planned(8)], screen)
    screen.truncate(0), screen.seek(0)
    on_round(rerun, Decided([open_verdict(repeats=10)], 10, None, stopped_by="max-repeats"), [], screen)
    assert "given up" not in screen.getvalue()


def test_the_new_run_drops_the_flags_it_replaces_however_abbreviated():
    """argparse takes a unique prefix: '--max-rep 4 --budg 1m' stayed in the new run beside its --max-repeats 9."""
    command = ("ddpbench", "bench", "--max-rep", "4", "--budg=1m", "--run-i", "a", "--impls", "stock", "--steps", "3")
    said = rounds.new_run_command(command, ("--max-repeats", "9"))
    assert said.endswith(" bench --impls stock --steps 3 --max-repeats 9"), said
    assert rounds.new_run_command((), ("--max-repeats", "9")) == "the same command with --max-repeats 9"


def test_a_dropped_flag_that_takes_no_value_keeps_the_flag_after_it():
    """--largest-only takes no value: dropped as a one-value flag, the --gpus after it went too."""
    command = ("ddpbench", "bench", "--impls", "zero", "--largest", "--gpus", "2", "--run-id", "a1")
    said = rounds.fresh_run_command(command, (), drop={"--largest-only": 0})
    assert said.endswith(" bench --impls zero --gpus 2"), said


def test_a_measuring_only_strategys_need_sets_no_new_runs_max_repeats(capsys):
    """A walkthrough advised '--max-repeats 318 (… about 10.3 h …)': bucketed's need, a strategy the pages call
    not one to deploy, where zero's (the deployable rival's) was 242. The advice is sized by zero; bucketed's
    need is said apart, and flat's 78, within 242, is decided by the same run."""
    found = [open_verdict("w2 gpt2/small bucketed vs stock", repeats=2, needed=318, instrument=True),
             open_verdict("w2 gpt2/small flat vs stock", repeats=2, needed=78, instrument=True),
             open_verdict("w2 gpt2/small zero vs stock", repeats=2, needed=242)]  # fmt: skip
    assert decide.sizing(found, 20) == found[2:]
    rounds.to_decide(Decided(found, 2, None, beyond_s=3600.0), run_id="r1", results="res", max_repeats=20)
    said = capsys.readouterr().out
    assert "to decide the 2 that need more: the same command with --max-repeats 242 (the most an open verdict " \
           "of a strategy to deploy needs" in said, said  # fmt: skip
    assert "; w2 gpt2/small bucketed vs stock needs 318: measuring only, not a strategy to deploy" in said, said
    # where only measuring-only verdicts are open, they size it: there is nothing else to decide, and it says so
    assert decide.sizing(found[:2], 20) == found[:2]
    rounds.to_decide(Decided(found[:2], 2, None, beyond_s=3600.0), run_id="r1", results="res", max_repeats=20)
    said = capsys.readouterr().out
    assert "--max-repeats 318 (the most an open verdict needs" in said and "of a strategy to deploy needs" not in said
    assert "; only verdicts of strategies that measure, none to deploy, are open" in said, said


def test_what_decides_a_run_across_nodes_is_run_on_every_node(capsys):
    """A run across 2 nodes stopped by its budget was told one node's resume, and one node's new run: every node
    must run them, each with its own --node-rank (and a new run's nodes join by one new --run-id)."""
    found = [open_verdict("w2 gpt2/small zero vs stock", repeats=2, needed=8),
             open_verdict("w2 gpt2/small flat vs stock", repeats=2, needed=242)]  # fmt: skip
    standing = Decided(found, 2, 600.0, stopped_by="budget", beyond_s=3600.0)
    rounds.to_decide(standing, run_id="r1", results="res", max_repeats=20, nnodes=2)
    said = capsys.readouterr().out
    assert "--resume r1 --results res --budget 10m on every node, with its own --node-rank" in said, said
    assert "--max-repeats 242 on every node, with its own --node-rank and one new --run-id (" in said, said
    rounds.to_decide(standing, run_id="r1", results="res", max_repeats=20)
    assert "every node" not in capsys.readouterr().out


def test_a_fixed_runs_new_run_across_nodes_drops_node_rank_and_is_run_on_every_node(capsys):
    """Node 0 of a two-node `--repeats 1` run said 'to decide the open verdict: a new run: … --node-rank 0 …
    --repeats auto …': node 1 pasting it would join as a second node 0, and nothing said to run it on every node."""
    command = ("ddpbench", "bench", "--gpus", "1", "--nnodes", "2", "--node-rank", "0", "--rdzv-endpoint", "h:29500",
               "--run-id", "job", "--repeats", "1")  # fmt: skip
    found = [open_verdict("w2 mlp/small zero vs stock", repeats=1, needed=4)]
    rounds.to_decide_fixed(found, repeats=1, max_repeats=20, command=command, nnodes=2)
    said = capsys.readouterr().out
    assert "--node-rank" not in said.replace("with its own --node-rank", ""), said
    assert ("--rdzv-endpoint h:29500 --repeats auto on every node, with its own --node-rank and one new --run-id "
            "(it repeats only") in said, said  # fmt: skip
    standing = Decided(found, 1, 600.0, beyond_s=3600.0)  # the auto run's new run, which kept --node-rank 0 too
    rounds.to_decide(standing, run_id="job", results="res", max_repeats=2, command=command, nnodes=2)
    said = capsys.readouterr().out
    assert "--node-rank 0" not in said and "--max-repeats 4 on every node, with its own --node-rank" in said, said
    rounds.to_decide_fixed(found, repeats=1, max_repeats=20, command=command[:4])
    assert "every node" not in capsys.readouterr().out

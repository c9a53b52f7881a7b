"""bench's exit codes, as its --help and docs/usage.md say them, are the ones the code returns."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness import cli
from harness.commands import arguments, bench, summary
from harness.commands.console import invoked

USAGE = Path(__file__).resolve().parents[2] / "docs" / "usage.md"


def said_codes(text: str) -> dict[int, str]:
    """{code: its first words} from an 'exit codes:' block."""
    block = text[text.index("exit codes:") :]
    return {int(code): words for code, words in re.findall(r"^  (\d+) +(\S.*)$", block, flags=re.MULTILINE)}


def test_bench_help_and_usage_say_every_exit_code_the_code_returns(capsys):
    with pytest.raises(SystemExit):
        cli.main(["bench", "--help"])
    helped = said_codes(capsys.readouterr().out)
    returned = {arguments.EXIT_OK, arguments.EXIT_FAILED, arguments.EXIT_BAD_INPUT, *arguments.EXIT_SIGNAL.values()}
    assert set(helped) == returned == {0, 1, 2, 130, 143}
    assert said_codes(USAGE.read_text()) == helped  # the docs' block is --help's
    assert f"```text\n{arguments.BENCH_EXIT_CODES}\n```" in USAGE.read_text()  # word for word, every line
    assert bench.EXIT_SIGNAL is arguments.EXIT_SIGNAL and arguments.EXIT_SIGNAL["SIGINT"] == cli.EXIT_SIGINT
    assert "failed" in helped[arguments.EXIT_FAILED] and "SIGTERM" in helped[arguments.EXIT_SIGNAL["SIGTERM"]]


def quiet_summary(monkeypatch, totals: dict) -> None:
    """summarize with `totals` as written, and every line but the counts' stubbed."""
    monkeypatch.setattr(summary, "write_summary", lambda *a, **k: totals)
    monkeypatch.setattr(summary, "fix_words", lambda *a, **k: "")
    monkeypatch.setattr("harness.results.store.read_configs", lambda run: None)
    monkeypatch.setattr(summary.console, "fixed_cost_split", lambda *a, **k: None)
    monkeypatch.setattr(summary.contention, "read", lambda *a, **k: None)
    monkeypatch.setattr(summary.ending, "answers", lambda run: [])
    monkeypatch.setattr(summary.ending, "answer_line", lambda run, found=None: "the answer: …")
    monkeypatch.setattr(summary.ending, "cap_line", lambda run, program: "")


def totals_of(counts: dict) -> dict:
    return {"status_counts": counts, "sessions": 1, "wall_s": 1.0, "training_step_s": 0.5,
            "session": {"phases_s": {}, "training_step_s": 0.5}}  # fmt: skip


def test_a_failed_configuration_is_the_failed_exit_code(tmp_path, monkeypatch):
    """summarize's code: EXIT_FAILED where a row failed, EXIT_OK where none did (a skipped one included)."""
    for counts, code in (({"ok": 3, "failed": 1}, arguments.EXIT_FAILED), ({"ok": 3, "skipped": 1}, arguments.EXIT_OK)):
        quiet_summary(monkeypatch, totals_of(counts))
        plan = SimpleNamespace(run=tmp_path / "r", run_id="r", launches=[], session="", node_rank=0, configurations=[])
        assert summary.summarize(plan, 1.0) == code


def test_a_failed_several_node_run_counts_what_it_left_unrun_and_resumes_on_every_node(tmp_path, capsys, monkeypatch):
    """Node 1 killed mid-run: node 0's line said "1 ok, 1 failed, 0 skipped" of 3 (the third never ran: the nodes
    cannot relaunch) and gave `bench --resume … --retry-failed`, which alone waits for node 1."""
    quiet_summary(monkeypatch, totals_of({"ok": 1, "failed": 1}))
    monkeypatch.setattr("harness.results.store.written_config_ids", lambda run: {"a", "b"})
    for nnodes, said in ((2, True), (1, False)):
        planned = [SimpleNamespace(nnodes=nnodes, config_id=i) for i in ("a", "b", "c")]
        plan = SimpleNamespace(run=tmp_path / "job", run_id="job", launches=[], session="", node_rank=0,
                               configurations=planned)  # fmt: skip
        assert summary.summarize(plan, 1.0) == arguments.EXIT_FAILED
        out = capsys.readouterr().out
        hint = ("; 1 failed and 1 not run (a launch across nodes stops at its first failure): "
                f"{invoked.resume_hint('job', tmp_path, more=('--retry-failed',))} runs them again on every node, "
                "with its own --node-rank")  # fmt: skip  # the one wording: the stopped line's, a failure's
        assert (hint in out) is said, out

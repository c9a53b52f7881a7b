"""How a printed command names a run and the site: runnable as printed from the folders the user gave."""

from __future__ import annotations

import shlex
from pathlib import Path

from harness.results import invocation


def test_a_run_in_the_default_folder_is_named_by_its_id_alone_elsewhere_with_its_folder():
    assert invocation.run_words("r1") == "r1"
    assert invocation.run_words("r1", Path("results")) == invocation.run_words("r1", "./results") == "r1"
    # a run id resolves only in results/: anywhere else the folder goes with it, quoted for the shell
    assert invocation.run_words("r1", "mine") == "r1 --results mine"
    assert shlex.split(invocation.run_words("r1", "my runs")) == ["r1", "--results", "my runs"]


def test_a_page_names_its_run_by_folder_and_results_folder():
    """A copied run (`cp -r results/X results/X-base`) keeps its id in run.json: --run resolves by folder."""
    meta = {"run_id": "X", "page": "X-base", "results_folder": "mine"}
    assert invocation.page_run_words(meta) == "X-base --results mine"
    assert invocation.page_run_words({"run_id": "X"}) == "X"  # a page drawn from data alone
    assert invocation.page_run_words({}) == "RUN"


def test_the_report_command_carries_only_the_folders_that_are_not_the_defaults():
    assert invocation.report_command("results", "reports/site") == "ddpbench report"
    assert invocation.report_command(None, None) == "ddpbench report"
    assert invocation.report_command("mine", "elsewhere/site") == "ddpbench report --results mine --out elsewhere/site"
    assert invocation.report_command("results", "site", program="x") == "x report --out site"


def test_a_pages_words_said_on_the_terminal_name_ddpbench_as_it_was_invoked():
    words = "none; `ddpbench predict --run r1` measures one, then `ddpbench report` writes it"
    said = invocation.as_invoked(words, ".venv/bin/ddpbench")
    assert said == "none; `.venv/bin/ddpbench predict --run r1` measures one, then `.venv/bin/ddpbench report` writes it"

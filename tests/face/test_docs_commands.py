"""Every `ddpbench …` command a reader can copy from README.md, docs/ or a command's --help parses with the real
parser, and names only strategies and cluster profiles that exist: a renamed flag or profile fails here, not in
a reader's shell. Parsing only: the commands themselves are run by hand (their sizes are a GPU's)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

import impls
from harness import cli
from harness.commands import arguments
from harness.perfmodel.clusters.cluster import builtin_names

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
HELP_EXAMPLES = {
    "bench --help": cli.BENCH_EXAMPLES,
    "predict --help": arguments.PREDICT_EXAMPLES,
    "compare --help": arguments.COMPARE_EPILOG,
    "collectives --help": arguments.COLLECTIVES_EXAMPLES,
}
# A command line, not a line of output ("ddpbench predict: …"): the command, then a space or the line's end.
COMMAND = re.compile(r"^\s*(?:\$ )?(?:\S*/)?ddpbench ((?:list|env|bench|compare|collectives|predict|report)(?:\s.*)?)$")
# What a reader replaces before running a command: the run it names, the step on the reader's GPU.
PLACEHOLDERS = {"MS": "100"}


def commands_in(text: str, fenced: bool) -> list[str]:
    """The commands of a Markdown page's code blocks (fenced) or of a --help text, continuation lines joined."""
    found, inside = [], not fenced
    for line in text.replace("\\\n", " ").splitlines():
        if fenced and line.lstrip().startswith("```"):
            inside = not inside
        elif inside and (match := COMMAND.match(line)):
            found.append(match.group(1))
    return found


def argv_of(command: str) -> list[str]:
    """The words a shell passes, without the comment or a redirection (`list dgx-h100 > ours.toml`)."""
    words = shlex.split(command, comments=True)
    if ">" in words:
        words = words[: words.index(">")]
    return [PLACEHOLDERS.get(word, word) for word in words]


def documented_commands() -> list[tuple[str, str]]:
    found = [(f"{doc.relative_to(ROOT)}", command) for doc in DOCS for command in commands_in(doc.read_text(), True)]
    found += [(where, command) for where, text in HELP_EXAMPLES.items() for command in commands_in(text, False)]
    return found


def test_the_docs_show_commands_from_every_page_that_has_them():
    """The extraction itself can fail: README's and the help's commands are found."""
    where = {place for place, _ in documented_commands()}
    assert {"README.md", "docs/usage.md", "docs/clusters.md", "bench --help", "predict --help"} <= where


def what_is_wrong(command: str) -> str | None:
    """Why `ddpbench COMMAND` would not run as printed, as far as parsing tells; None where nothing is."""
    try:
        args, unknown = cli.build_parser().parse_known_args(argv_of(command))
    except SystemExit as stop:
        return None if stop.code == 0 else "refused by the parser"  # 0: --help
    if unknown:
        return f"unknown {unknown}"
    clusters = (getattr(args, "cluster", None) or "").split(",")
    if missing := [c for c in clusters if c and not c.endswith(".toml") and c not in (*builtin_names(), "NAME")]:
        return f"no cluster profile {missing}"
    if missing := [name for name in getattr(args, "impls", None) or () if name not in impls.names()]:
        return f"no strategy {missing}"
    return None


@pytest.mark.parametrize(("where", "command"), documented_commands(), ids=lambda value: value[:60])
def test_every_documented_command_parses_and_names_what_exists(where, command, capsys):
    wrong = what_is_wrong(command)
    assert wrong is None, f"{where}: `ddpbench {command}`: {wrong}: {capsys.readouterr().err.strip()}"


@pytest.mark.parametrize(
    "command", ["bench --bucket-caps 1,25", "predict --run R --cluster dgx-h300", "bench --impls ddp"]
)
def test_a_renamed_flag_profile_or_strategy_in_a_doc_would_fail_the_check(command):
    assert what_is_wrong(command) is not None

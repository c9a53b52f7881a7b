"""How ddpbench names itself in a command it prints, in one place. A page built later, perhaps on another
machine, names it as the README does (`ddpbench`), since the path that ran it there means nothing here; a run's
recorded argv reads back the README's way too. A line on this terminal names it as it was invoked, so that the
user can paste it into the same shell: the face reads that from the command line
(`harness.commands.console.invoked.ddpbench_command`, with MODULES) and passes it here as `program`. It lives in the
results layer because both the face (the terminal) and the reports (the pages) print it, and the launcher a failure's
record (`retry_words`).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

NAME = "ddpbench"
"""The console script `make setup` installs: the README's name for the command, and the pages'."""

MODULES = {("harness", "__main__.py"): "harness", ("harness", "cli.py"): "harness.cli"}
"""The files that run ddpbench's command line when it is not called by its script's name, and the module that
`python -m` was given to run each."""


def as_typed(words: list[str]) -> list[str]:
    """`ddpbench …` (the README's command), not the script path run.json records as argv[0]
    (`…/.venv/bin/ddpbench`, or `…/harness/__main__.py` under `python -m harness`): a path on another machine."""
    script = Path(words[0]) if words else None
    ours = script is not None and (script.name == NAME or script.parts[-2:] in MODULES)
    return [NAME, *words[1:]] if ours else words


def resume_command(run_id: str, results: Path | str, *, program: str = NAME, more: Sequence[str] = ()) -> str:
    """`<program> bench --resume RUN_ID --results RESULTS [more…]`: the command that goes on with a stored run.
    `program`: how ddpbench is named (a page's NAME; the terminal's as it was invoked)."""
    return f"{program} {shlex.join(['bench', '--resume', run_id, '--results', str(results), *more])}"


def retry_words(failed: int, command: str = "--retry-failed") -> str:
    """'--retry-failed runs them again' ('it' for one): the one wording of what runs a run's failed configurations
    again, after the count each line gives its own way ('1 failed: …', '2 rows recording a failure (…)');
    `command`: the flag, or the whole command where a line gives it (bench's finished line; a failure's record)."""
    return f"{command} runs {'it' if failed == 1 else 'them'} again"

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
from collections.abc import Mapping, Sequence
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


DEFAULT_RESULTS = Path("results")
"""The folder every command reads runs from without --results (config.bench.RESULTS, which this layer cannot import):
a run id alone resolves only there."""

DEFAULT_SITE = Path("reports/site")
"""The folder `report` builds the site into without --out."""


def run_words(run: str, results: Path | str | None = None) -> str:
    """'RUN' where the run's folder is in the default results/, where its name alone resolves, else 'RUN --results
    DIR': what follows `--run` or `--resume` in a command printed for the run. `run`: its folder's name (a copied
    run's id is not its folder's); `results`: the folder it is in (None: the default)."""
    if results is None or Path(results) == DEFAULT_RESULTS:
        return shlex.quote(run)
    return shlex.join([run, "--results", str(results)])


def page_run_words(meta: Mapping) -> str:
    """run_words for a run a page is of: `meta`'s folder name (`page`) and results folder (`results_folder`), which
    the site sets as it reads the run ('RUN' where a page is drawn from data alone)."""
    return run_words(str(meta.get("page") or meta.get("run_id") or "RUN"), meta.get("results_folder"))


def report_command(results: Path | str | None, out: Path | str | None, *, program: str = NAME) -> str:
    """`ddpbench report [--results DIR] [--out SITE]`: what rebuilds the site in `out` from `results`, each flag only
    where its folder is not the default."""
    flags = [] if results is None or Path(results) == DEFAULT_RESULTS else ["--results", str(results)]
    flags += [] if out is None or Path(out) == DEFAULT_SITE else ["--out", str(out)]
    return shlex.join([program, "report", *flags])


def as_invoked(words: str, program: str) -> str:
    """A page's `words` said on this terminal: each `ddpbench …` command in them named as `program` (how ddpbench
    was invoked here), so that it runs from the same shell."""
    return words.replace(f"`{NAME} ", f"`{program} ")


def resume_command(run_id: str, results: Path | str, *, program: str = NAME, more: Sequence[str] = ()) -> str:
    """`<program> bench --resume RUN_ID --results RESULTS [more…]`: the command that goes on with a stored run.
    `program`: how ddpbench is named (a page's NAME; the terminal's as it was invoked)."""
    return f"{program} {shlex.join(['bench', '--resume', run_id, '--results', str(results), *more])}"


def on_every_node(nnodes: int, *, new_run: bool = False) -> str:
    """What a command for a run across nodes needs said with it: ' on every node, with its own --node-rank' (a
    `new_run`'s nodes join by one new --run-id: theirs)."""
    if nnodes <= 1:
        return ""
    return " on every node, with its own --node-rank" + (" and one new --run-id" if new_run else "")


def retry_words(failed: int, command: str = "--retry-failed") -> str:
    """'--retry-failed runs them again' ('it' for one): the one wording of what runs a run's failed configurations
    again, after the count each line gives its own way ('1 failed: …', '2 rows recording a failure (…)');
    `command`: the flag, or the whole command where a line gives it (bench's finished line; a failure's record)."""
    return f"{command} runs {'it' if failed == 1 else 'them'} again"

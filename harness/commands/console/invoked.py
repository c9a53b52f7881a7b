"""How this process was called, as ddpbench names itself in a command it prints on the terminal (after Ctrl-C,
after --budget): a hint the user pastes into the same shell must run there. Pages name it as the README does
(harness.results.invocation, whose resume command this fills with the name)."""

from __future__ import annotations

import sys
from pathlib import Path


def ddpbench_command() -> str:
    """How this process was called, as a command to call it again from this shell: `ddpbench` when that is on
    PATH and is this one, else the script that is running (`.venv/bin/ddpbench`, relative to the working
    directory); under `python -m harness` (or `harness.cli`) that module, with the interpreter named as PATH
    finds it where it is this one, else by its path. A hint the user copies must be a command that works."""
    import shutil

    from harness.results.invocation import MODULES, NAME

    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    on_path = shutil.which(NAME)
    if script is not None and script.name == NAME and script.is_file():
        if on_path and Path(on_path).resolve() == script.resolve():
            return NAME
        return _relative(script)
    if script is not None and (module := MODULES.get(script.parts[-2:])):
        return f"{_interpreter()} -m {module}"
    if on_path and Path(on_path).absolute().parent == Path(sys.executable).absolute().parent:
        return NAME  # this interpreter's own script (an activated venv), not another install's
    return f"{_interpreter()} -m harness"  # called from Python (a test, a notebook): the documented module


def _interpreter() -> str:
    """This interpreter as the shell would find it: its bare name where PATH finds this very one (an activated
    venv's `python`), else its path (`/work/.venv/bin/python` is not the `python` on PATH, and has other
    packages)."""
    import shutil

    executable = Path(sys.executable).absolute()
    for name in dict.fromkeys((executable.name, "python3", "python")):
        found = shutil.which(name)
        if (
            found
            and Path(found).absolute().parent == executable.parent
            and Path(found).resolve() == executable.resolve()
        ):
            return name
    return _relative(executable)


def _relative(path: Path) -> str:
    import os

    try:
        return str(Path(path).absolute().relative_to(Path(os.getcwd())))
    except ValueError:
        return str(Path(path).absolute())


def resume_hint(run_id: str, results: Path | str, *, more: tuple[str, ...] = (), nnodes: int = 1) -> str:
    """The command that goes on with a stored run, naming ddpbench as this process was invoked; a run across
    `nnodes` nodes goes on across them all (its --nnodes and --rdzv-endpoint are stored with it)."""
    from harness.results.invocation import on_every_node, resume_command

    return resume_command(run_id, results, program=ddpbench_command(), more=more) + on_every_node(nnodes)

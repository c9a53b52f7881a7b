"""torchrun, as `python -m torch.distributed.run` runs it, that leaves without the interpreter's
finalisation once every rank has finished well; on the CPU, with every rank forked from it.

    python -m harness.launch.agent [--fork-ranks] TORCHRUN_ARGS... -m MODULE ARGS...

torchrun's agent imports torch; tearing that down after the launch took 0.5–0.6 s a launch here (a
launch whose ranks exit at once ended 0.63–0.74 s after them, and 0.13–0.16 s this way), paid again by
every world size, repeat and retry. A launch that fails ends as torchrun ends it: its @record error
file and exit code are what the launcher reads.

`--fork-ranks` (on a GPU only from a zygote that has not initialised CUDA: a process forked after CUDA
started cannot use it; `harness.launch.zygote`) imports MODULE once, in the agent, and has torchrun fork every
rank from it (its `start_method="fork"` for a function entrypoint: the module's `main(argv)`), so
that torch, its compiler and the plug-ins are imported once a launch instead of once a rank (once a run
when the agent itself is forked from the run's zygote, `harness.launch.zygote`). A forked
rank resets the agent's signal handlers and exit handlers, and leaves on failure a moment late
(`harness.rank.dist.leave_on_failure`): torchrun's summary of a function launch names only the first
rank it saw fail, which must be one killed without a word rather than its peers' echo of it.
"""

from __future__ import annotations

import atexit
import importlib
import os
import signal
import sys
import uuid

from torch.distributed.elastic.multiprocessing.errors import record
from torch.distributed.launcher.api import elastic_launch
from torch.distributed.run import config_from_args, parse_args
from torch.distributed.run import main as torchrun_main

from harness.config.ranks import FORK_RANKS, FORKED_RANK_ENV
from harness.launch.rendezvous import register_one_node

register_one_node()  # before torchrun reads --rdzv-backend, in this agent and in the zygote it may be forked from


@record  # as torchrun's own main: a failed rank's summary (signal, error file) printed, then raised
def launch_forked(argv: list[str]) -> None:
    args = parse_args(argv)
    if not args.module:
        raise SystemExit(f"{FORK_RANKS} runs a module (-m MODULE), not {args.training_script!r}")
    importlib.import_module(args.training_script)  # torch and everything the ranks import, once
    if args.standalone:  # as torchrun's run() reads --standalone: one node, a fresh c10d rendezvous
        args.rdzv_backend, args.rdzv_endpoint, args.rdzv_id = "c10d", "localhost:0", str(uuid.uuid4())
    config, _, _ = config_from_args(args)
    config.start_method = "fork"
    elastic_launch(config, entrypoint=forked_rank)(args.training_script, *args.training_script_args)


def forked_rank(module: str, *argv: str) -> int:
    """One rank, in a process torchrun forked from the agent: the module's `main(argv)`, as a fresh
    interpreter would run it."""
    for handled in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(handled, signal.SIG_DFL)  # torchrun's agent turns them into exceptions
    signal.signal(signal.SIGINT, signal.default_int_handler)
    atexit._clear()  # the agent's exit handlers are the agent's; the rank registers its own
    os.environ[FORKED_RANK_ENV] = "1"
    code = sys.modules[module].main(list(argv))
    atexit._run_exitfuncs()  # the rank's own (e.g. the parity cache's removal), as at a fresh exit
    sys.stdout.flush()
    sys.stderr.flush()
    if code:
        os._exit(code)  # as a fresh interpreter's exit code; torchrun's join reads it
    return code


def run(argv: list[str]) -> None:
    """The agent's whole work: returns once every rank finished well; a failed rank raises through
    torchrun's @record (ChildFailedError, after its summary)."""
    if argv[:1] == [FORK_RANKS]:
        launch_forked(argv[1:])
    else:
        torchrun_main(argv)  # parses argv as torchrun does


if __name__ == "__main__":
    run(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)

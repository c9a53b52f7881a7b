"""One process per run and rank module that imported torch, torchrun and the module once, and forks every
launch's torchrun agent from itself.

    python -m harness.launch.zygote MODULE [--cuda]   (started by `for_launch`; one request a line on stdin)

A CPU launch paid 2.5-3 s of imports in its agent before any rank ran (torch, its compiler, the
plug-ins), again for every world size, repeat, round of `--repeats auto` and retry. Forked from the
zygote, a launch starts with them done. Each launch stays a launch of its own: a fresh agent process
in a session of its own, with its own rendezvous, its ranks forked from it (`harness.launch.agent
--fork-ranks`), its own process group. What it shares with the run's other launches is what importing
built: the zygote runs no model, no tensor work and no process group, and it is single-threaded when it
forks, so a child inherits no lock another thread held.

The supervisor follows a forked launch as it follows a Popen (`ForkedLaunch`): the zygote is the agent's
parent and reports its exit status. A zygote that cannot start or dies leaves the launch to the usual
`python -m harness.launch.agent` (`start` returns None), which then says in the log what failed.

On a GPU (`--cuda`; only with DDPBENCH_GPU_ZYGOTE=1, until a GPU check has measured it) the same, for as long as
the zygote has not initialised CUDA: a child forked from a process that did cannot use the GPU. It imports with
PYTORCH_NVML_BASED_CUDA_CHECK=1 (torch then answers `is_available` and `device_count` from NVML, without starting
CUDA), and so do its agents and their ranks; each rank starts CUDA itself when it picks its GPU
(`harness.rank.dist`). Before every fork it asks torch whether CUDA is initialised (`fork_refusal`): if something
it imported did, it forks nothing, the run says so once, and each launch starts fresh interpreters
(`harness.launch.torchrun`). torch's own check sees only its own initialisation: a module that called the CUDA
runtime directly would go unseen.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import json
import logging
import os
import select
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from harness.launch import supervise

AGENT = "harness.launch.agent"  # torchrun itself (torch.distributed.run), leaving without finalisation
READY_S = 300.0  # the zygote's imports before its first fork: as long as a launch's own start may take
NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"  # torch's switch: CUDA's availability and GPU count asked of NVML
CUDA_FLAG = "--cuda"


class Zygote:
    """The parent's handle on one zygote process: requests down its stdin, replies up its stdout."""

    def __init__(self, module: str, env: dict[str, str], *, cuda: bool = False) -> None:
        self.module, self.env, self.cuda = module, env, cuda
        self.refused: str | None = None  # why a GPU zygote forks nothing (`fork_refusal`)
        self.process = subprocess.Popen(
            [sys.executable, "-m", __name__, module, *([CUDA_FLAG] if cuda else [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # a failure to import shows again in the fallback launch's log
            env={**env, NVML_CHECK: "1"} if cuda else env,
            start_new_session=True,  # Ctrl-C reaches ddpbench, which stops the launch, not the zygote
            preexec_fn=supervise.die_with_parent,
        )
        self._unread = b""

    def alive(self) -> bool:
        return self.process.poll() is None

    def start(self, agent_args: list[str], *, log: Path, env: dict[str, str]) -> ForkedLaunch | None:
        """Fork an agent that runs `python -m harness.launch.agent AGENT_ARGS` with its output appended
        to `log`, in `env` and this directory; None when the zygote is gone, never got ready, or refused
        (`refused`: CUDA initialised in it)."""
        request = {"argv": agent_args, "log": str(log), "env": env, "cwd": os.getcwd()}
        try:
            self.process.stdin.write(json.dumps(request).encode() + b"\n")
            self.process.stdin.flush()
        except OSError:
            return None
        reply = self.reply(timeout=READY_S)
        if reply is None or "pid" not in reply:
            self.refused = (reply or {}).get("refused")
            self.close()
            if self.refused and self.module not in _refused:  # said once; no other zygote for the module
                _refused[self.module] = self.refused
                logging.getLogger("ddpbench").warning("%s; each GPU launch starts its ranks as fresh interpreters",
                                                      self.refused)  # fmt: skip
            return None
        return ForkedLaunch(self, reply["pid"])

    def reply(self, *, timeout: float | None) -> dict[str, Any] | None:
        """The zygote's next reply line; None if none came within `timeout`; {"gone": True} at its end."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._unread:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            readable, _, _ = select.select([self.process.stdout], [], [], left)
            if not readable:
                return None
            chunk = os.read(self.process.stdout.fileno(), 65536)
            if not chunk:
                return {"gone": True}
            self._unread += chunk
        line, self._unread = self._unread.split(b"\n", 1)
        return json.loads(line)

    def close(self) -> None:
        """End the zygote. No launch is in flight (launch_ranks ends its own before it returns), and a
        zygote holds nothing to finish: it is killed, not asked (one still importing would take seconds)."""
        if self.process.stdin and not self.process.stdin.closed:
            self.process.stdin.close()
        self.process.kill()
        self.process.wait()


class ForkedLaunch:
    """An agent the zygote forked, with as much of `subprocess.Popen` as the supervisor uses."""

    def __init__(self, zygote: Zygote, pid: int) -> None:
        self.pid, self.returncode, self._zygote = pid, None, zygote

    def poll(self) -> int | None:
        return self._ended(timeout=0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._ended(timeout=timeout)
        if code is None:
            raise subprocess.TimeoutExpired(AGENT, timeout)
        return code

    def _ended(self, *, timeout: float | None) -> int | None:
        if self.returncode is None:
            reply = self._zygote.reply(timeout=timeout)
            if reply is not None:
                # A zygote gone mid-launch took the agent with it (its parent-death signal).
                self.returncode = -signal.SIGTERM if reply.get("gone") else reply["returncode"]
        return self.returncode


_running: dict[str, Zygote] = {}
_refused: dict[str, str] = {}  # per module, why its GPU zygote forked nothing: no other is started for it

# Written into this process's environment by torch itself, the first time anything asks where its compile cache is
# (a torchvision model's import does): the default a fresh interpreter computes too, so it changes no import.
SET_BY_TORCH = frozenset({"TORCHINDUCTOR_CACHE_DIR"})


def _imports_alike(a: dict[str, str], b: dict[str, str]) -> bool:
    return {k: v for k, v in a.items() if k not in SET_BY_TORCH} == {
        k: v for k, v in b.items() if k not in SET_BY_TORCH
    }


def for_launch(module: str, env: dict[str, str], *, cuda: bool = False) -> Zygote | None:
    """The zygote for `module`'s launches in `env` (the one already running, or a new one: a changed
    environment may change what importing does, so it is not reused across one). Each launch still gets
    `env` itself (`Zygote.start`). On a GPU (`cuda`), None once a zygote of the module found CUDA initialised."""
    if cuda and module in _refused:
        return None
    zygote = _running.get(module)
    if zygote is not None and (zygote.cuda != cuda or not _imports_alike(zygote.env, env) or not zygote.alive()):
        zygote.close()
        zygote = None
    if zygote is None:
        zygote = _running[module] = Zygote(module, env, cuda=cuda)
    return zygote


@atexit.register
def close_all() -> None:
    while _running:
        _running.popitem()[1].close()


def fork_refusal(module: str) -> str | None:
    """Why a GPU zygote must not fork, or None: CUDA initialised in it (by importing `module` or torchrun's agent),
    which a forked rank could not start again."""
    import torch

    if torch.cuda.is_initialized():
        return f"CUDA was initialised in the GPU ranks' zygote by importing {module} or the agent"
    return None


def serve(module: str, *, cuda: bool = False) -> None:
    """The zygote process: import, then fork one agent per request and report its pid and exit status (on a GPU,
    unless CUDA is initialised here: then each request is answered with why, and nothing forked)."""
    importlib.import_module(module)  # first: a module that does not import fails before torch is loaded
    agent = importlib.import_module(AGENT)
    # What importing made is every child's: frozen, a rank's collections skip it (its freeze_survivors
    # found 330,000 objects to walk, 0.15 s a launch) and never write to those pages shared with the zygote.
    gc.collect()
    gc.freeze()
    requests, replies = sys.stdin.buffer, sys.stdout.buffer
    for line in requests:
        request = json.loads(line)
        if cuda and (why := fork_refusal(module)):
            replies.write(json.dumps({"refused": why}).encode() + b"\n")
            replies.flush()
            continue
        if cuda:  # the agent, and the ranks it forks, ask NVML too: only a rank starts CUDA, after its fork
            request["env"][NVML_CHECK] = "1"
        pid = os.fork()
        if pid == 0:
            _become_agent(agent, request)
        replies.write(json.dumps({"pid": pid}).encode() + b"\n")
        replies.flush()
        _, status = os.waitpid(pid, 0)
        replies.write(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
        replies.flush()
    os._exit(0)  # nothing to finalise: tearing torch down would hold ddpbench's exit 1.5 s


def _become_agent(agent: Any, request: dict[str, Any]) -> None:
    """In the forked child: become what `python -m harness.launch.agent ARGS` would be (its own session,
    its output into the launch's log, the launch's environment and directory), run, and exit as it would."""
    code = 1
    try:
        os.setsid()
        supervise.die_with_parent()  # the zygote's end (ddpbench's) ends the launch
        log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        nothing = os.open(os.devnull, os.O_RDONLY)
        for fd, target in ((0, nothing), (1, log), (2, log)):
            os.dup2(target, fd)
        os.close(log)
        os.close(nothing)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        sys.argv = [agent.__file__, *request["argv"]]
        agent.run(request["argv"])
        code = 0
    except SystemExit as exc:
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    except BaseException:
        traceback.print_exc()  # as the interpreter prints an uncaught exception (torchrun's summary before it)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


if __name__ == "__main__":
    serve(sys.argv[1], cuda=sys.argv[2:] == [CUDA_FLAG])

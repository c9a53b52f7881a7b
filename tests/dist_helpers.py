"""Run a function on every rank of a gloo process group of N CPU processes and collect what each returns.

Starting a rank costs seconds (importing torch, then torch._dynamo on the first optimizer), so
the ranks of each world size are started once per test session and kept: every test module
sends its work to the same ranks, and a module sends a whole matrix of cases in one call,
caching the results in a module-scoped fixture. World size 1 runs in the test process itself.
The ranks exit when the test session does (they are daemons, and an atexit hook stops them).

The function must be picklable: defined at module level in an importable module.
`TinyClassification` turns any small model class into a workload for such tests.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import datetime
import multiprocessing
import os
import pickle
import queue
import socket
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from harness.protocols import WorkloadDefaults

COLLECTIVE_TIMEOUT_S = 60.0
"""A rank stuck in a collective (another rank failed) gives up after this long."""
DEFAULT_TIMEOUT_S = 180.0


FEATURES = 8
CLASSES = 4


class SometimesExtra(nn.Module):
    """`extra` joins the output only while `use_extra` is set (a mixture-of-experts' idle expert, in small): the
    bucketed tests set it per micro-batch or per rank and step."""

    def __init__(self) -> None:
        super().__init__()
        self.main = nn.Linear(FEATURES, CLASSES)
        self.extra = nn.Linear(FEATURES, CLASSES)
        self.use_extra = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.main(x)
        return out + self.extra(x) if self.use_extra else out


@dataclasses.dataclass(kw_only=True)
class TinyClassification(WorkloadDefaults):
    """A workload around any model class taking FEATURES inputs to CLASSES logits: random data, cross-entropy."""

    model: type[nn.Module]
    size: str = "tiny"

    def build_model(self) -> nn.Module:
        return self.model()

    def make_batch(self, batch_size: int, *, device: torch.device, generator: torch.Generator):
        features = torch.randn(batch_size, FEATURES, device=device, generator=generator)
        labels = torch.randint(0, CLASSES, (batch_size,), device=device, generator=generator)
        return features, labels

    def loss(self, model: nn.Module, batch) -> torch.Tensor:
        features, labels = batch
        return F.cross_entropy(model(features), labels)


class RankFailed(RuntimeError):
    """A rank raised, or did not answer in time; the message carries its traceback."""


def run_in_process_group(
    fn: Callable[..., Any],
    *,
    world_size: int,
    args: tuple[Any, ...] = (),
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> list[Any]:
    """`fn(*args)` on every rank of a gloo group of `world_size`; the results in rank order.

    Inside `fn`, `torch.distributed.get_rank()` gives the rank. Raises RankFailed when any rank fails.
    """
    if world_size == 1:
        return [_run_in_this_process(fn, args)]
    return _pool(world_size).run(fn, args, timeout_s=timeout_s)


def _run_in_this_process(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """World size 1 needs no second process: an in-memory store and a one-rank gloo group here."""
    import torch.distributed as dist

    dist.init_process_group(
        "gloo",
        store=dist.HashStore(),
        rank=0,
        world_size=1,
        timeout=datetime.timedelta(seconds=COLLECTIVE_TIMEOUT_S),
    )
    try:
        return fn(*args)
    finally:
        dist.destroy_process_group()


class _RankPool:
    """`world_size` spawned processes in one gloo group, each running the tasks it is sent."""

    def __init__(self, world_size: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.world_size = world_size
        self.results = context.Queue()
        self.tasks = [context.Queue() for _ in range(world_size)]
        port = _free_port()
        self.processes = [
            context.Process(
                target=_rank_main, args=(rank, world_size, port, self.tasks[rank], self.results), daemon=True
            )
            for rank in range(world_size)
        ]
        for process in self.processes:
            process.start()
        self.broken = False

    def run(self, fn: Callable[..., Any], args: tuple[Any, ...], *, timeout_s: float) -> list[Any]:
        if self.broken:
            raise RankFailed(f"the ranks of world size {self.world_size} are gone after an earlier failure")
        for tasks in self.tasks:
            tasks.put((fn, args))
        try:
            return self._collect(timeout_s)
        except RankFailed:
            self.stop()  # a group with a failed rank may be stuck in a collective: start afresh next time
            raise

    def _collect(self, timeout_s: float) -> list[Any]:
        answers: dict[int, Any] = {}
        failures: list[str] = []
        deadline = time.monotonic() + timeout_s
        while len(answers) + len(failures) < self.world_size:
            try:
                rank, ok, value = self.results.get(timeout=1.0)
            except queue.Empty:
                self._raise_if_gone_or_late(answers, deadline, timeout_s)
                continue
            if ok:
                answers[rank] = pickle.loads(value)
            else:
                failures.append(f"rank {rank} failed:\n{value}")
                # The others give up once their collective times out.
                deadline = min(deadline, time.monotonic() + COLLECTIVE_TIMEOUT_S + 10)
        if failures:
            raise RankFailed("\n".join(failures))
        return [answers[rank] for rank in range(self.world_size)]

    def _raise_if_gone_or_late(self, answers: dict[int, Any], deadline: float, timeout_s: float) -> None:
        gone = [f"rank {rank} exited with {p.exitcode}" for rank, p in enumerate(self.processes) if not p.is_alive()]
        if gone:
            raise RankFailed("; ".join(gone))
        if time.monotonic() > deadline:
            missing = sorted(set(range(self.world_size)) - set(answers))
            raise RankFailed(f"rank(s) {missing} gave no answer within {timeout_s:.0f} s")

    def stop(self) -> None:
        """Ask each rank to leave; kill only this pool's processes that do not."""
        self.broken = True
        _POOLS.pop(self.world_size, None)
        for process, tasks in zip(self.processes, self.tasks, strict=True):
            if process.is_alive():
                tasks.put(None)
        for process in self.processes:
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
                process.join()


_POOLS: dict[int, _RankPool] = {}


def _pool(world_size: int) -> _RankPool:
    if world_size not in _POOLS:
        _POOLS[world_size] = _RankPool(world_size)
    return _POOLS[world_size]


def stop_ranks(world_size: int) -> None:
    """Let the ranks of `world_size` go now (a module that alone uses this size frees their memory)."""
    if world_size in _POOLS:
        _POOLS[world_size].stop()


@atexit.register
def _stop_all_pools() -> None:
    for pool in list(_POOLS.values()):
        pool.stop()


def _free_port() -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _rank_main(rank: int, world_size: int, port: int, tasks, results) -> None:
    import torch
    import torch.distributed as dist

    # One thread per rank: several ranks share a small machine, as in the real CPU runs.
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group(
        "gloo", rank=rank, world_size=world_size, timeout=datetime.timedelta(seconds=COLLECTIVE_TIMEOUT_S)
    )
    try:
        while (task := tasks.get()) is not None:
            fn, args = task
            try:
                # Plain pickle copies tensors into the message; the queue's own pickler would
                # share them through file descriptors that die with this process.
                results.put((rank, True, pickle.dumps(fn(*args))))
            except BaseException:
                results.put((rank, False, traceback.format_exc()))
    finally:
        dist.destroy_process_group()


def _output_files(entry: Path) -> str:
    """Where a process's stdout and stderr go."""
    targets = []
    for fd in ("1", "2"):
        with contextlib.suppress(OSError):
            targets.append(os.readlink(entry / "fd" / fd))
    return " ".join(targets)


def processes_of(run) -> list[str]:
    """Live processes of the run, as 'pid: command': whose command line names the run folder (a fresh
    agent's and rank's does: the plan's path), or whose output goes into it (an agent the zygote forked,
    and its ranks, carry the zygote's command line; they write into the launch's log). Zombies (already
    dead) are left out."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if (str(run) in command or str(run) in _output_files(entry)) and state != "Z":
            found.append(f"{entry.name}: {command}")
    return found

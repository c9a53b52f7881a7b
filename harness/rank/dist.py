"""Distributed plumbing, once: read what torchrun set, pick the device, init, tear down.

This is the only module that reads torchrun's environment variables (RANK, WORLD_SIZE,
LOCAL_RANK); everything else gets a `Session`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.distributed as dist

from harness.config.ranks import FORK_GRACE_S, forked_rank


@dataclasses.dataclass(frozen=True)
class Session:
    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    backend: str
    records_group: Any = None
    """The group records are gathered over: a gloo group beside an NCCL one when a rank will wait for
    rank 0 (dataparallel's idle ranks, while rank 0 drives every GPU), so it waits on the CPU: an NCCL
    gather on cuda:k would spin on a GPU the measured rank computes on. None otherwise (the default
    group)."""

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def gather_to_main(self, obj: Any) -> list[Any] | None:
        """Every rank's `obj`, in rank order, on rank 0 (None elsewhere)."""
        gathered: list[Any] | None = [None] * self.world_size if self.is_main else None
        dist.gather_object(obj, gathered, dst=0, group=self.records_group)
        return gathered

    def barrier(self) -> None:
        dist.barrier()


@contextlib.contextmanager
def distributed_session(
    *, device_kind: str, timeout_s: float, backend: str | None = None, idle_ranks_wait: bool = False
) -> Iterator[Session]:
    """One process group for the life of the worker: NCCL on GPUs, gloo on the CPU by default.

    `idle_ranks_wait`: some configuration leaves ranks idle while rank 0 computes (a `single_process`
    strategy); every rank must pass the same value, since creating a group is a collective."""
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    if device_kind == "cuda":
        # One GPU per rank, set before init so NCCL's communicator binds to it; with gloo, ranks beyond the GPU
        # count share them round-robin.
        index = local_rank % _visible_gpus(rank)
        torch.cuda.set_device(index)
        device, backend = torch.device("cuda", index), backend or "nccl"
    else:
        device, backend = torch.device("cpu"), backend or "gloo"
    timeout = datetime.timedelta(seconds=timeout_s)
    dist.init_process_group(backend=backend, rank=rank, world_size=world_size, timeout=timeout)
    records_group = None
    if _wants_cpu_gather(backend, idle_ranks_wait=idle_ranks_wait, world_size=world_size):
        # Created once, by every rank alike (creating a group is a collective of its own).
        records_group = dist.new_group(backend="gloo", timeout=timeout)
    yield Session(rank, world_size, local_rank, device, backend, records_group)
    # Not on an exception: peers may be blocked in a collective, and the teardown would wait.
    dist.destroy_process_group()


def _visible_gpus(rank: int) -> int:
    """The GPUs this process sees; none is an error that says so (the launcher saw some: this rank's driver or
    CUDA_VISIBLE_DEVICES differs), not a modulo by zero."""
    visible = torch.cuda.device_count()
    if visible == 0:
        shown = os.environ.get("CUDA_VISIBLE_DEVICES")
        raise RuntimeError(f"--device cuda: rank {rank} sees no CUDA GPU (CUDA_VISIBLE_DEVICES="
                           f"{'unset' if shown is None else repr(shown)})")  # fmt: skip
    return visible


def _wants_cpu_gather(backend: str, *, idle_ranks_wait: bool, world_size: int) -> bool:
    """A gloo group beside NCCL only where it helps: idle ranks on one node. Across nodes gloo must
    reach the other hosts on its own (GLOO_SOCKET_IFNAME), and there it runs the default group's way."""
    one_node = int(os.environ.get("LOCAL_WORLD_SIZE", world_size)) == world_size
    return backend != "gloo" and idle_ranks_wait and one_node


def leave_on_failure(body: Callable[[], int]) -> int:
    """Run a rank's body; a rank that fails leaves at once (exit 1; a forked rank FORK_GRACE_S later),
    without a teardown that would wait on peers blocked in a collective: torchrun's teardown of the
    launch frees them."""
    try:
        return body()
    except BaseException:
        if forked_rank():
            time.sleep(FORK_GRACE_S)  # a peer killed without a word is seen dead first (config.ranks)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)

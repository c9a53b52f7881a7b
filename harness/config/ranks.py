"""What every rank process of a launch gets: its share of the cores and the environment it starts in.

Both launches (`bench`'s worker, `collectives`' measurement) and the benchmark scripts under
benchmarks/ start ranks; they share the cores by this one rule, so that their numbers compare.
"""

from __future__ import annotations

import os


def threads_per_rank(*, device: str, max_local_ranks: int, cpu_count: int | None) -> int:
    """On the CPU every simulated GPU gets the same share of cores at every world size,
    so that weak scaling compares like with like (1 rank must not get all the cores)."""
    if device != "cpu":
        return 1
    return max(1, (cpu_count or 1) // max_local_ranks)


def available_cpus() -> int:
    """The cores this process may run on (a container's or taskset's share, not the machine's)."""
    return len(os.sched_getaffinity(0))


def child_environment(threads: int) -> dict[str, str]:
    """The environment of a launch: ours, with the thread count and unbuffered output (a rank's
    last words reach the log even when it is killed)."""
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(threads))  # a user's own setting wins (and is recorded)
    env["PYTHONUNBUFFERED"] = "1"
    return env


FORK_RANKS = "--fork-ranks"
"""The agent's flag (`harness.launch.agent`): import the rank module once, fork every rank from it."""

FORKED_RANK_ENV = "DDPBENCH_FORKED_RANK"
"""Set in a rank that torchrun forked from the agent (`harness.launch.agent --fork-ranks`)."""

FORK_GRACE_S = 0.5
"""How long a forked rank that fails waits before it leaves. torchrun's summary of a forked launch
names only the first rank its monitor (every 0.1 s) sees fail: a rank killed without a word must be
seen before its peers, whose "connection reset" is only the echo of its death."""


GPU_ZYGOTE_ENV = "DDPBENCH_GPU_ZYGOTE"
"""`1` forks a GPU launch's ranks as on the CPU, from an agent forked from the run's zygote, none of which has
initialised CUDA (`harness.launch.zygote`); `0` (or unset) starts them as fresh interpreters. Off by default until a
GPU check has measured it: a GPU run must not be the first to try a launch no GPU has run."""
GPU_ZYGOTE_VALUES = ("0", "1")


def check_gpu_zygote_switch() -> None:
    """DDPBENCH_GPU_ZYGOTE read before anything is written: ValueError with one line naming it and its choices."""
    value = os.environ.get(GPU_ZYGOTE_ENV)
    if value is not None and value not in GPU_ZYGOTE_VALUES:
        raise ValueError(f"{GPU_ZYGOTE_ENV}={value!r} is not valid; choose one of {', '.join(GPU_ZYGOTE_VALUES)}")


def forks_ranks(device: str) -> bool:
    """Whether a launch forks its ranks from the agent, which imported their module once: on the CPU, and on a
    GPU with DDPBENCH_GPU_ZYGOTE=1. A CUDA rank can be forked only from a process that never initialised CUDA:
    the zygote checks that before each fork, and where it finds CUDA initialised the launch's ranks start as
    fresh interpreters (`harness.launch.torchrun`)."""
    return device == "cpu" or (device == "cuda" and os.environ.get(GPU_ZYGOTE_ENV) == "1")


def forked_rank() -> bool:
    return os.environ.get(FORKED_RANK_ENV) == "1"

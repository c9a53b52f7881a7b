"""Benchmarks run themselves under torchrun: the script re-launches itself with `--worker`."""

from __future__ import annotations

import os
import subprocess
import sys

from harness.config.ranks import available_cpus, threads_per_rank


def relaunch(script: str, *, ranks: int) -> int:
    """Run `script --worker <same arguments>` in `ranks` CPU processes, cores shared as `ddpbench` shares them."""
    threads = threads_per_rank(device="cpu", max_local_ranks=ranks, cpu_count=available_cpus())
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}",
               script, "--worker", *sys.argv[1:]]  # fmt: skip
    return subprocess.call(command, env=env)

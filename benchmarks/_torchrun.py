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


def main(script: str, args, run_worker) -> None:
    """A benchmark's entry: `run_worker(args)` where torchrun started this process (`--worker`), else the script
    re-launched in `args.ranks` processes, exiting with their status."""
    if args.worker:
        run_worker(args)
        return
    sys.exit(relaunch(script, ranks=args.ranks))

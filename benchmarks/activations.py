"""What each workload's forward keeps for backward (`activation_mb`), who keeps it, and what counting it costs.

    .venv/bin/python benchmarks/activations.py                     # every workload at its full size, ~30 s
    .venv/bin/python benchmarks/activations.py --workloads gpt2 --size full --batch-size 1

The count the runs record (harness.measure.activations.activations_by_module), per workload: MiB per sample
at `--batch-size` (default 1: a full GPT-2 sample keeps over 1 GiB), where it was counted (the meta device,
else this CPU), the seconds it took, and the kinds of module that keep the most. Beside it, for the
transformers, the same count with SDPA left to its math backend (what the meta device runs unasked):
the T x T attention weights that a flash kernel never keeps.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

import workloads
from harness.measure import activations

CPU = torch.device("cpu")
MIB = 2**20


def counted(workload, *, batch_size: int, flash: bool) -> tuple[dict[str, int], str, float]:
    """(bytes by keeper, where it was counted, seconds) as a run counts them; `flash=False`: SDPA's math backend."""
    began = time.perf_counter()
    where = "meta"
    with contextlib.ExitStack() as stack:
        if not flash:  # the math backend everywhere: the meta device runs nothing else, the CPU is told to
            stack.enter_context(mock.patch.object(activations, "_flash_attention_kept", contextlib.nullcontext))
            stack.enter_context(sdpa_kernel(SDPBackend.MATH))
        try:
            kept = activations._saved_bytes(workload, batch_size=batch_size, device=torch.device("meta"), dtype="fp32")
        except Exception:  # a value read: counted on the CPU, as activations_by_module does
            where = "cpu"
            kept = activations._saved_bytes(workload, batch_size=batch_size, device=CPU, dtype="fp32")
    return kept, where, time.perf_counter() - began


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default=",".join(workloads.names()))
    parser.add_argument("--size", default="full")
    parser.add_argument("--batch-size", type=int, default=1)
    args = parser.parse_args(argv)
    print(f"activations per sample at batch {args.batch_size}, fp32, --size {args.size} (torch {torch.__version__})")
    print(f"{'workload':10} {'MiB/sample':>10} {'math SDPA':>10} {'where':>5} {'s':>5}  kept most by")
    for name in args.workloads.split(","):
        workload = workloads.create(name, size=args.size)
        kept, where, seconds = counted(workload, batch_size=args.batch_size, flash=True)
        math, _, _ = counted(workload, batch_size=args.batch_size, flash=False)
        per_sample, math_per_sample = (sum(k.values()) / MIB / args.batch_size for k in (kept, math))
        print(f"{name:10} {per_sample:10.1f} {math_per_sample:10.1f} {where:>5} {seconds:5.1f}  "
              f"{activations.largest_keepers(kept)}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

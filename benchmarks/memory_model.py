"""What a rank needs at a step's peak, measured on the CPU, against what ddpbench's memory model counts.

The model (harness/perfmodel/memory.py) says a rank needs its model state (parameters, gradients, optimizer
state, as held after a step), the activations its forward keeps for backward (counted once per setup), the
gradient buckets its strategy keeps beside the gradients, what FSDP holds whole beside its shards and the
optimizer's temporaries; it leaves out buffers and the kernels' working memory. This script measures the whole:
the heap a rank's process holds, as glibc counts it (`mallinfo2`: bytes in use in every arena, the mapped
large blocks included), polled from a thread every 0.2 ms and sampled at every module's forward start and
end, as each module's output gradient is computed in backward, around the gradients' sync and after the
optimizer step, over one step after a warm-up (Adam, as `--optimizer adam`, stepping every tensor at once as
it does on a GPU: `foreach`); the process's heap before the
model was built is taken off (a first strategy runs untallied, so that one-time allocations fall on none).
What the model leaves out is the difference.

    .venv/bin/python benchmarks/memory_model.py                       # mlp and gpt2 small, 2 CPU ranks, ~1 min
    .venv/bin/python benchmarks/memory_model.py --workloads gpt2:small --impls stock,fsdp

Polled, not traced: an allocation freed within 0.2 ms can be missed, so the peak can only read low. Glibc only
(Linux): another allocator's heap is not counted. On a GPU the run's own allocator peak
(`mem_peak_allocated_mb`) measures this directly.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import os
import threading
import time

import _torchrun

IMPLS = ("stock", "stock/gradient_as_bucket_view=true", "zero", "fsdp", "fsdp/reshard_after_forward=false", "flat",
         "bucketed", "naive")  # fmt: skip
MIB = 2**20
POLL_S = 0.0002
WARMUP = 3  # DDP rebuilds its buckets after its first step; Adam's state exists after the first


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                      "fsmblks", "uordblks", "fordblks", "keepcost")]  # fmt: skip


_LIBC = ctypes.CDLL("libc.so.6")
_LIBC.mallinfo2.restype = _MallInfo2


def heap_mb() -> float:
    """Bytes the process's allocations hold now: in use in the heap plus the large blocks mapped on their own."""
    info = _LIBC.mallinfo2()
    return (info.uordblks + info.hblkhd) / MIB


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="mlp:small,gpt2:small", help="comma-separated name:size")
    parser.add_argument(
        "--impls", default=",".join(IMPLS), help="comma-separated strategies, options as name/key=value"
    )
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


class PeakSampler:
    """The heap's most over one step: polled from a thread every POLL_S (inside modules and the optimizer too, as
    torch's kernels let go of the interpreter), and sampled at module boundaries in forward and backward."""

    def __init__(self, model) -> None:
        self.peak_mb = 0.0
        self.on = False
        self.handles = []
        for module in model.modules():
            self.handles.append(module.register_forward_pre_hook(lambda *_: self.sample()))
            self.handles.append(module.register_forward_hook(self._after_forward))
        self._running = True
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while self._running:
            self.sample()
            time.sleep(POLL_S)

    def sample(self, *_) -> None:
        if self.on:
            self.peak_mb = max(self.peak_mb, heap_mb())

    def _after_forward(self, _module, _inputs, output) -> None:
        self.sample()
        import torch

        if self.on and isinstance(output, torch.Tensor) and output.requires_grad:
            output.register_hook(self.sample)  # in backward, as this module's output gradient is computed

    def close(self) -> None:
        self._running = False
        self._thread.join()
        for handle in self.handles:
            handle.remove()


def measure(spec: str, workload, batches, *, session, units: dict) -> dict:
    """One strategy's measured peak and the model's count of it, on this rank."""
    import json

    import pandas as pd
    import torch
    from strategies import create_strategy

    from harness.measure.held import held_bytes
    from harness.measure.timing import StepTimer
    from harness.measure.training import OPTIMIZERS, build_model, train_step
    from harness.perfmodel.memory import TEMPORARY_SHARE, hook_copies_mb, hook_state_mb, unsharded_mb

    gc.collect()
    _LIBC.malloc_trim(0)
    before = heap_mb()
    strategy = create_strategy(spec, bucket_cap_mb=None)
    model = strategy.wrap(build_model(workload, seed=0, device=session.device))
    adam, learning_rate = OPTIMIZERS["adam"]
    # as a GPU's default Adam steps: every tensor at once (foreach), which the CPU's default does one by one
    optimizer = strategy.make_optimizer(model.parameters(), adam, lr=learning_rate, foreach=True)
    sampler, held = PeakSampler(model), {}
    sync = strategy.sync_gradients  # sampled on both sides: every gradient exists as it begins
    strategy.sync_gradients = lambda: (sampler.sample(), sync(), sampler.sample())
    for step, batch in enumerate(batches):
        last = step == len(batches) - 1
        sampler.on = last
        sampler.sample()
        train_step(model=model, workload=workload, strategy=strategy, optimizer=optimizer, batch=batch,
                   timer=StepTimer(), step=step, before_backward=sampler.sample,
                   after_optimizer_step=(lambda: (sampler.sample(), held.update(held_bytes(model, optimizer))))
                   if last else None)  # fmt: skip
    sampler.close()
    layout = strategy.layout() or {}
    views = "gradient_as_bucket_view=true" in spec
    buckets_mb = 0.0 if views else sum(layout.get("bucket_sizes_mb") or [])
    kept = getattr(strategy, "reshard_after_forward", True) is False
    sharded = strategy.gradient_traffic == "sharded"  # FSDP: what it holds whole beside its shards
    unsharded = unsharded_mb(**units, kept=kept) if sharded else 0.0
    state = held["param_bytes"] + held["grad_bytes"] + held["optimizer_state_bytes"]
    at_step = max(buckets_mb - held["grad_view_bytes"] / MIB, 0.0)  # the gradients in their buckets by then
    laid_out = pd.DataFrame([{"bucket_sizes_mb": layout.get("bucket_sizes_mb")}])  # as a run's rows record it
    hook = json.dumps({"comm_hook": getattr(strategy, "comm_hook", "none")})  # PowerSGD's kept error and copies
    result = {"impl": spec, "peak_mb": sampler.peak_mb - before, "state_mb": state / MIB, "step_buckets_mb": at_step,
              "buckets_mb": buckets_mb, "unsharded_mb": unsharded,
              "sync_temp_mb": held["grad_bytes"] / MIB * strategy.sync_temporaries,  # as its class declares them
              "optimizer_temp_mb": held["optimizer_state_bytes"] / MIB * TEMPORARY_SHARE["adam"],
              "hook_state_mb": hook_state_mb(laid_out, hook),
              "hook_copies_mb": hook_copies_mb(laid_out, hook)}  # fmt: skip
    torch.distributed.barrier()
    return result  # the strategy, model and optimizer go with this frame


def benchmark_workload(impls: list[str], session, name: str, size: str) -> None:
    import pandas as pd
    import torch

    import workloads
    from harness.measure.activations import activations_by_module
    from harness.measure.modelinfo import shard_units
    from harness.measure.training import build_model, make_batch
    from harness.perfmodel.memory import need_mb

    workload = workloads.create(name, size=size)
    batch_size = workload.default_batch_size()
    activations_mb = sum(activations_by_module(workload, batch_size=batch_size, device=session.device,
                                               dtype="fp32").values()) / MIB  # fmt: skip
    batches = [make_batch(workload, batch_size=batch_size, seed=0, rank=session.rank, step=s, device=session.device)
               for s in range(WARMUP + 1)]  # fmt: skip
    units = shard_units(workload, build_model(workload, seed=0, device=session.device))
    measure(impls[0], workload, batches, session=session, units=units)  # a first, not kept: one-time allocations
    rows = [measure(spec, workload, batches, session=session, units=units) for spec in impls]
    peaks = torch.tensor([[r["peak_mb"], r["state_mb"]] for r in rows], dtype=torch.float64)
    torch.distributed.all_reduce(peaks, op=torch.distributed.ReduceOp.MAX)  # the rank that needs the most
    if not session.is_main:
        return
    frame = pd.DataFrame(rows).assign(peak_mb=peaks[:, 0].numpy(), state_mb=peaks[:, 1].numpy(),
                                      activations_mb=activations_mb)  # fmt: skip
    counted = frame.rename(columns={"state_mb": "total_mb", "activations_mb": "activation_mb"})
    frame["model_mb"] = need_mb(counted)  # as predict counts it, from what this script measured
    frame["left_out_mb"] = frame["peak_mb"] - frame["model_mb"]
    frame["left_out_share"] = frame["left_out_mb"] / frame["peak_mb"]
    print(f"\n{name}/{size}: {session.world_size} CPU ranks (gloo), batch {batch_size} a rank, fp32, Adam; MiB a "
          "rank (the most of any rank)")  # fmt: skip
    print(frame.round(2).to_string(index=False), flush=True)


def run_worker(args) -> None:
    import torch

    from harness.rank.dist import distributed_session

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    with distributed_session(device_kind="cpu", timeout_s=600) as session:
        for spec in args.workloads.split(","):
            name, _, size = spec.partition(":")
            benchmark_workload(args.impls.split(","), session, name, size or "small")


if __name__ == "__main__":
    _torchrun.main(__file__, parse_args(), run_worker)

"""The GPU acceptance: on a machine with a CUDA GPU, check that ddpbench's numbers are real and its
goals are met, in one run under 6 minutes on an H200, from a plain checkout with the machine's torch:

    PYTHONPATH=. python3 benchmarks/gpu_check.py OUT_DIR        (or: make gpu-check OUT=OUT_DIR)
    python benchmarks/gpu_check.py OUT_DIR --quick              (the CPU subset, for a machine without one)
    PYTHONPATH=. python3 benchmarks/gpu_check.py OUT_DIR --overlap  (the profiled run's lines alone)

Lines (each ok or FAIL; exit 1 on any FAIL, 2 on bad usage):
- every strategy at world size 1 with NCCL on gpt2/full and resnet50/full in bf16, stock and
  bucketed in fp32, and stock, zero and fsdp on mlp/small in fp16 (its grad scaler): ok or skipped with a
  reason, parity ok where judged;
- two ranks sharing the GPU with gloo (mlp and resnet50 small);
- a profiled run (stock and bucketed, gpt2/full, two ranks over NCCL; on one GPU one rank over
  gloo, shown but not judged): HTA's TraceAnalysis reads its traces (without HTA: the traces hold
  compute kernels), and per configuration the overlap the bucket timeline measured
  over the traced steps is within 10 points of the communication/compute overlap read from the
  trace itself, and their communication times within 25 % (benchmarks/trace_overlap.py; on the
  CPU too, with two ranks);
- CUDA events against a synchronised wall clock (within 5 %); NVML ≥ allocator reserved, NVML filled, and no
  rank's mem_note (ranks/: configs/ keeps rank 0's) naming an NVML query that failed or NVML unread;
- the NVML sampler's cost (benchmarks/overhead.py with and without it, side by side): ≤ 1 %;
- what timing DDP's buckets costs stock and zero at one rank (benchmarks/hook_cost.py: two pairs of
  launches with and without `--bucket-timeline`): shown, to decide whether it can be on by default on GPUs;
- no configuration's steps drift within the measured window (a warm-up long enough for each strategy);
- the activations counted (`activation_mb`) against CUDA's allocator after one forward and loss (within 5 %),
  and, with the held state, within the allocator's peak;
- bucketed/stock ≤ 1.00 per workload; the fixed cost: wall / timed steps ≤ 1.5 for the default bench
  (every strategy, 20 steps) of gpt2/full and resnet50/full;
- the GPU zygote: one bench of one gpt2/full configuration with the ranks forked from the run's zygote
  (DDPBENCH_GPU_ZYGOTE=1), then the same with fresh interpreters (the default until this pair has run), each's
  wall and split: shown;
- which GPU NVML reads for cuda:0 and the topology's pairs, in a process that sees the GPUs last first
  (benchmarks/gpu_mapping.py): the UUID of NVML's last GPU, n(n-1)/2 pairs of the n visible, each read;
- provenance (driver, CUDA, NCCL, topology); what a process can use of the GPU against the built-in profile's
  `gpu_memory_gib` (shown);
- DDP's own cost on this GPU, carried to dgx1-v100: ResNet-50's predicted step at 8 and 16 GPUs
  against pytorch's published timings (benchmarks/ddp_published.py: within 3 %, 1 MiB slower).

`--quick` runs the same code paths that need no GPU on the CPU (small sizes, gloo) and says which
lines need CUDA. Results under OUT_DIR/results, the table in OUT_DIR/gpu_check.json.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import ddp_published  # sibling modules: the script's folder is on sys.path
import gpu_mapping
import hook_cost
import trace_overlap

from harness.results import layout

HERE = Path(__file__).resolve().parent
NVML_FIELDS = ("mem_peak_nvml_mb", "mem_nvml_struct", "gpu_util_mean_pct", "sm_clock_mean_mhz", "power_mean_w")
TIMING_TOLERANCE = 0.05
OVERLAP_POINTS = 0.10
COMM_AGREEMENT = 0.25
"""The trace's communication time / the timeline's, within 1 ± this."""
SAMPLER_COST = 1.01
FIXED_COST_RATIO = 1.5
RATIO_GOAL = 1.00


@dataclasses.dataclass
class Line:
    check: str
    value: str
    ok: bool | None  # None: not judged here
    unjudged: str = "needs CUDA"
    """The verdict shown when `ok` is None: why the line is not judged."""

    @property
    def verdict(self) -> str:
        return {True: "ok", False: "FAIL"}.get(self.ok, self.unjudged)


@dataclasses.dataclass(frozen=True)
class Setup:
    """What the check runs: the GPU's real sizes, or the CPU's quick stand-ins."""

    quick: bool

    @property
    def device(self) -> str:
        return "cpu" if self.quick else "cuda"

    @property
    def big(self) -> tuple[str, str]:  # (workloads, size) of the acceptance runs
        return ("mlp,resnet50", "tiny") if self.quick else ("gpt2,resnet50", "full")

    @property
    def shared(self) -> tuple[str, str]:
        return ("mlp", "tiny") if self.quick else ("mlp,resnet50", "small")

    @property
    def profiled(self) -> tuple[str, ...]:
        """The profiled run: stock and bucketed. With two GPUs or more, two ranks over NCCL, the
        path that is judged. On one GPU NCCL has nothing to time (a one-rank in-place sum is a
        no-op, and two NCCL ranks cannot share a GPU), so one rank runs over gloo, which stages
        CUDA tensors through host memory: shown, not judged, since gloo completes CUDA work on
        the compute stream and its completion stamps are upper bounds. On the CPU, two ranks."""
        if self.quick:
            return ("--gpus", "2", "--workloads", "mlp", "--size", "small", "--backend", "gloo", "--impls", IMPLS)
        import torch

        ranks, backend = ("2", "nccl") if torch.cuda.device_count() >= 2 else ("1", "gloo")
        return ("--gpus", ranks, "--workloads", "gpt2", "--size", "full", "--backend", backend, "--impls", IMPLS)


IMPLS = "stock,bucketed"
"""The strategies whose bucket timeline the profiled run checks."""

ONE_LAUNCH = ("--repeats", "1")
"""Each configuration launched once: `--repeats auto` (bench's default where strategies are compared)
would add rounds of launches until every ratio is decided, up to 20, past this check's few minutes;
the lines judge one launch's figures (its steps, its fixed cost, its trace), not a verdict."""

SHORT = ("--steps", "10", *ONE_LAUNCH)  # the default warm-up: torch DDP needs 11 steps on CUDA
"""The runs other than the default one: enough steps for a median, no more."""


FP16 = ("--gpus", "1", "--dtype", "fp16", "--impls", "stock,zero,fsdp", "--workloads", "mlp", "--size", "small")
"""fp16 through the grad scaler in a strategy of each kind (replicated, sharded state, sharded parameters), at a size
whose steps take seconds: every row's parity, as in any run's line."""


def bench(results: Path, run_id: str, setup: Setup, *flags: str, env: dict[str, str] | None = None) -> int:
    where = ["--device", setup.device, "--no-baseline", "--results", str(results), "--run-id", run_id]
    command = [sys.executable, "-m", "harness", "bench", *where, *flags]
    said = " ".join(f"{k}={v}" for k, v in (env or {}).items())
    print("$", *([said] if said else []), " ".join(command), flush=True)
    return subprocess.call(command, env={**os.environ, **env} if env else None)


def run_benches(results: Path, setup: Setup) -> dict[str, int]:
    workloads, size = setup.big
    one = ["--gpus", "1", "--backend", "gloo" if setup.quick else "nccl", "--size", size, "--workloads", workloads]
    dtype = "fp32" if setup.quick else "bf16"
    return {  # w1-bf16 is a default bench (every strategy, default steps): its fixed cost is the goal's
        "w1-bf16": bench(results, "w1-bf16", setup, *one, *ONE_LAUNCH, "--dtype", dtype),
        "w1-fp32": bench(results, "w1-fp32", setup, *one, *SHORT, "--dtype", "fp32", "--impls", "stock,bucketed"),
        "w1-fp16": bench(results, "w1-fp16", setup, *SHORT, *FP16),
        "shared-gloo": bench(
            results,
            "shared-gloo",
            setup,
            *SHORT,
            "--gpus",
            "2",
            "--backend",
            "gloo",
            "--impls",
            "stock",
            "--workloads",
            setup.shared[0],
            "--size",
            setup.shared[1],
        ),
        "profiled": profiled_bench(results, setup),
    }


def profiled_bench(results: Path, setup: Setup) -> int:
    return bench(results, "profiled", setup, *SHORT, *setup.profiled, "--profile", "--bucket-timeline")


def configs(results: Path, run_id: str):
    from harness.results import store

    return store.read_configs(results / run_id)


def strategy_lines(results: Path, codes: dict[str, int]) -> list[Line]:
    """Every row ok (or skipped with its reason), parity ok where judged; one line per run."""
    lines = []
    for run_id, code in codes.items():
        frame = configs(results, run_id)
        bad = [
            f"{r.impl} {r.workload}: {r.status} {r.error or ''}".strip()
            for r in frame.itertuples()
            if r.status not in ("ok", "skipped") or (r.status == "skipped" and not r.error)
        ]
        parity = [
            f"{r.impl} {r.workload} parity {r.parity_max_abs_diff}"
            for r in frame.itertuples()
            if r.status == "ok" and r.parity_ok is False
        ]
        counts = frame["status"].value_counts().to_dict()
        value = f"exit {code}; " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        lines.append(
            Line(
                f"bench {run_id}", value + "".join(f"; {p}" for p in bad + parity), code == 0 and not bad and not parity
            )
        )
    return lines


def nvml_refusals(ranks) -> dict[str, str]:
    """Each configuration's NVML queries that failed (or NVML not read at all), on any rank: config_id → 'rank N: its
    note'. configs/ keeps rank 0's note alone, and its peaks the largest rank's: a rank whose NVML failed shows only
    in ranks/."""
    refused: dict[str, list[str]] = {}
    for row in ranks.itertuples():
        if isinstance(row.mem_note, str) and (" failed: " in row.mem_note or "NVML unavailable" in row.mem_note):
            refused.setdefault(row.config_id, []).append(f"rank {row.rank}: {row.mem_note}")
    return {config_id: "; ".join(notes) for config_id, notes in refused.items()}


def nvml_lines(results: Path, setup: Setup) -> list[Line]:
    import pandas as pd

    from harness.results import store

    failing, rows = [], 0
    for run in sorted(p for p in results.iterdir() if (p / "configs").is_dir()):
        refusals = nvml_refusals(store.read_ranks(run))
        for row in configs(results, run.name).itertuples():
            if row.status != "ok":
                continue
            rows += 1
            missing = [f for f in NVML_FIELDS if pd.isna(getattr(row, f))]
            refused = refusals.get(row.config_id, "")
            if missing or refused or not row.mem_peak_nvml_mb >= row.mem_peak_reserved_mb:
                failing.append(
                    f"{run.name}/{row.config_id}: nvml {row.mem_peak_nvml_mb} reserved "
                    f"{row.mem_peak_reserved_mb} missing {missing} {refused}".rstrip()
                )
    if setup.quick:
        return [Line("NVML ≥ reserved, NVML filled", f"{rows} rows on the CPU: no NVML", None)]
    return [Line("NVML ≥ reserved, NVML filled", "; ".join(failing) or f"all {rows} rows", not failing)]


def ratio_lines(results: Path, setup: Setup) -> list[Line]:
    """bucketed / stock per workload and dtype, both at DDP's default layout (judged on GPUs only:
    the quick run's tiny models measure noise)."""
    lines = []
    for run_id in ("w1-bf16", "w1-fp32"):
        frame = configs(results, run_id).query("status == 'ok'")
        for (workload, dtype), group in frame.groupby(["workload", "dtype"]):
            ms = dict(zip(group["impl"], group["step_ms_median"], strict=True))
            if "stock" in ms and "bucketed" in ms:
                ratio, value = ms["bucketed"] / ms["stock"], f"{ms['bucketed']:.2f} / {ms['stock']:.2f} ms"
                judged = None if setup.quick else ratio <= RATIO_GOAL
                lines.append(Line(f"bucketed/stock {workload} {dtype}", f"{value} = {ratio:.3f}", judged))
    return lines


def activation_lines(results: Path, setup: Setup) -> list[Line]:
    """The activations counted (`activation_mb`) against what the GPU's allocator peaked at, per stock row at one
    rank: parameters, gradients and optimizer state held plus the activations cannot exceed that peak (the rest
    is DDP's buckets and the kernels' working memory, printed, not judged). A count above it is wrong: e.g.
    attention counted with the math backend's T×T weights where the GPU ran flash."""
    import pandas as pd

    lines = []
    for run_id in ("w1-bf16", "w1-fp32"):
        for row in configs(results, run_id).query("status == 'ok' and impl == 'stock'").itertuples():
            held = row.held_param_mb + row.held_grad_mb + row.held_optimizer_state_mb
            peak, counted = row.mem_peak_allocated_mb, held + row.activation_mb
            value = f"{row.activation_mb:.0f} MiB activations + {held:.0f} MiB held"
            on_cuda = not pd.isna(peak)
            if on_cuda:  # the fit adds DDP's buckets (and nothing else of the rest): how much of the rest they are
                buckets = sum(row.bucket_sizes_mb) if row.bucket_sizes_mb is not None else float("nan")
                rest = peak - counted
                value += f" of {peak:.0f} MiB peak allocated; the rest {rest:.0f} MiB, DDP's buckets {buckets:.0f} MiB"
            judged = None if setup.quick or not on_cuda else counted <= peak
            lines.append(Line(f"activations counted within the peak: {run_id} stock {row.workload}", value, judged))
    return lines


ALLOCATOR_BATCH = 2


def activation_allocator_lines(setup: Setup) -> list[Line]:
    """The activation count against CUDA's allocator, per big workload and dtype: after a warm-up step (cuBLAS's
    workspace and autocast's first casts allocated), what one forward and loss leave allocated
    (memory_allocated after less before: the saved tensors, and the loss) over `activation_bytes` counted on
    the same GPU. Within 0.95-1.05 or FAIL: a storage the count misses shows as a ratio above, one it counts twice
    below. A review asked for it: the peak line alone passes a count that is too low."""
    if setup.quick:
        return [Line("activations counted against CUDA's allocator", "", None)]
    import torch

    import workloads
    from harness.measure import activations
    from harness.measure.training import build_model, forward_precision

    cuda, lines = torch.device("cuda"), []
    for name in setup.big[0].split(","):
        for dtype in ("fp32", "bf16"):
            workload = workloads.create(name, size=setup.big[1])
            model = build_model(workload, seed=0, device=cuda)
            batch = workload.make_batch(ALLOCATOR_BATCH, device=cuda, generator=torch.Generator(device=cuda))
            with forward_precision(dtype, cuda):
                workload.loss(model, batch).backward()  # the warm-up: workspaces, first casts
            model.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            before = torch.cuda.memory_allocated()
            with forward_precision(dtype, cuda):
                loss = workload.loss(model, batch)
            torch.cuda.synchronize()
            left = torch.cuda.memory_allocated() - before
            del loss, model, batch
            torch.cuda.empty_cache()
            counted = activations.activation_bytes(workload, batch_size=ALLOCATOR_BATCH, device=cuda, dtype=dtype)
            ratio = left / counted if counted else float("nan")
            value = (
                f"allocated {left / 2**20:.1f} MiB after forward and loss, counted {counted / 2**20:.1f}: {ratio:.3f}"
            )
            lines.append(Line(f"activations counted against CUDA's allocator: {name}/{setup.big[1]} {dtype} batch "
                              f"{ALLOCATOR_BATCH}", value, 0.95 <= ratio <= 1.05))  # fmt: skip
    return lines


def steady_line(results: Path, setup: Setup) -> Line:
    """The warm-up each strategy declares is enough: no configuration of a strategy that declares one on this
    device (torch DDP's 11 timed forwards on CUDA) drifts within its measured window (drift.drift_flagged).
    Others' drifts are listed, not judged: with 30 configurations some iid noise is flagged (1-3 % each),
    and wandering steps more. Judged on GPUs: a CPU's steps wander."""
    from harness.analysis import drift
    from harness.config.grid import warmup_needed

    rows = [(run_id, r) for run_id in ("w1-bf16", "w1-fp32") for r in configs(results, run_id).itertuples()]
    drifting = [(run_id, r, bool(warmup_needed(r.impl, r.device))) for run_id, r in rows
                if r.status == "ok" and drift.drift_flagged(r.step_ms_drift, r.step_ms_drift_se)]  # fmt: skip
    said = [f"{run_id}/{r.impl} {r.workload} {r.step_ms_drift:+.1%}" + ("" if judged else " (not judged)")
            for run_id, r, judged in drifting]  # fmt: skip
    value = "; ".join(said) or "no configuration drifts within its measured window"
    failed = any(judged for _, _, judged in drifting)
    return Line("steady steps of strategies with a declared warm-up (w1-bf16, w1-fp32)", value,
                None if setup.quick else not failed)  # fmt: skip


def split(summary: dict, *always: str, largest: int = 5) -> str:
    """A run's phases beyond its steps, the `largest` first, then `always` where not among them: 'parity 49.0, …'."""
    phases = summary.get("phases_s") or summary.get("fixed_cost_s", {})
    beyond = [k for _, k in sorted(((v, k) for k, v in phases.items() if k != "steps"), reverse=True)][:largest]
    return ", ".join(f"{k} {phases.get(k, 0.0):.1f}" for k in [*beyond, *(k for k in always if k not in beyond)])


def fixed_cost_line(results: Path, setup: Setup) -> Line:
    summary = json.loads((results / "w1-bf16" / layout.SUMMARY_JSON).read_text())
    ratio = summary["wall_s"] / summary["training_step_s"]
    value = (
        f"{summary['wall_s']:.1f} s / {summary['training_step_s']:.1f} s of steps = {ratio:.2f}× "
        f"(largest: {split(summary)})"
    )
    judged = None if setup.quick else ratio <= FIXED_COST_RATIO
    return Line(f"fixed cost: wall / steps of w1-bf16 ({' '.join(setup.big)})", value, judged)


ZYGOTE_RUNS = {"zygote-on": {"DDPBENCH_GPU_ZYGOTE": "1"}, "zygote-off": {"DDPBENCH_GPU_ZYGOTE": "0"}}
"""The GPU zygote's pair, in this order: ranks forked from the run's zygote (DDPBENCH_GPU_ZYGOTE=1), then fresh
interpreters (the default).
One launch each (its fixed cost is what the zygote changes: the ranks' imports, 6.0-6.3 s a launch on the H200
before it), of a bench short enough that the pair adds well under a minute to the check (about 20 s each, going
by the H200's split of a gpt2/full launch: start, launch, imports, model info, parity)."""


def zygote_benches(results: Path, setup: Setup) -> dict[str, int]:
    workload, size = ("mlp", "tiny") if setup.quick else ("gpt2", "full")
    one = ("--gpus", "1", "--workloads", workload, "--size", size, "--impls", "stock", *SHORT)
    dtype = ("--dtype", "fp32" if setup.quick else "bf16")
    return {run_id: bench(results, run_id, setup, *one, *dtype, env=env) for run_id, env in ZYGOTE_RUNS.items()}


def zygote_line(results: Path, codes: dict[str, int], setup: Setup) -> Line:
    """Each run of the pair: its exit, wall, steps and split (imports always): shown. Judged nowhere: one pair is
    one launch each, and on the CPU both fork (the switch is the GPU's)."""
    said = []
    for run_id, code in codes.items():
        path = results / run_id / layout.SUMMARY_JSON
        if code != 0 or not path.is_file():
            said.append(f"{run_id}: exit {code}")
            continue
        summary = json.loads(path.read_text())
        said.append(f"{run_id} {summary['wall_s']:.1f} s ({summary['training_step_s']:.1f} s of steps; "
                    f"{split(summary, 'imports', 'launch', largest=3)})")  # fmt: skip
    failed = any(code != 0 for code in codes.values())
    return Line("GPU zygote: wall with forked ranks, then fresh", "; ".join(said), False if failed else None,
                unjudged="needs CUDA" if setup.quick else "shown")  # fmt: skip


def trace_lines(results: Path, setup: Setup) -> list[Line]:
    """HTA reads the traces; per profiled configuration, the bucket timeline's overlap over the
    traced steps agrees with the overlap read from the trace itself (benchmarks/trace_overlap.py)."""
    frame = configs(results, "profiled")
    lines = [hta_line(results / "profiled" / frame.iloc[0]["trace_dir"], setup)]
    compared = trace_overlap.compared(results / "profiled")
    largest = max((row["world_size"] for row in compared), default=0)
    for row in compared:
        timeline, trace = row["timeline"], row["trace"]
        value = (
            f"timeline {trace_overlap.figure(timeline)}, trace {trace_overlap.figure(trace)} over the traced steps "
            f"({trace_overlap.figure(row['timeline_comm_ms'], 'ms')} / {row['trace_comm_ms']:.1f} ms of "
            f"communication); row {row['row']:.2f}"
        )
        # Both the shares and what they are shares of: the communication times agree too.
        comm_ratio = row["trace_comm_ms"] / row["timeline_comm_ms"] if row["timeline_comm_ms"] else float("nan")
        close = (
            timeline is not None
            and trace is not None
            and abs(timeline - trace) <= OVERLAP_POINTS
            and abs(comm_ratio - 1) <= COMM_AGREEMENT
        )
        # Judged where there is communication to hide (on the CPU, one rank's all-reduce is a no-op
        # whose figures are the worker thread's wake-up latency) and where completions are exact.
        upper_bound = row["backend"] == "gloo" and not setup.quick
        judged = close if row["world_size"] == largest and not upper_bound else None
        why = "gloo on CUDA" if upper_bound else "one rank"
        lines.append(Line(f"overlap: bucket timeline vs trace, {row['config']}", value, judged, why))
    if len(lines) == 1:
        lines.append(Line("overlap: bucket timeline vs trace", "no profiled row with a measured overlap", False))
    return lines


def hta_line(trace_dir: Path, setup: Setup) -> Line:
    try:
        from hta.trace_analysis import TraceAnalysis

        TraceAnalysis(trace_dir=str(trace_dir))
        return Line("profile trace read by HTA's TraceAnalysis", str(trace_dir), True)
    except ImportError:  # without HTA, the trace must at least hold the device's kernels
        traces = [json.loads(path.read_text()) for path in trace_dir.glob("rank*.json")]
        kernels = sum(len(trace_overlap.trace_intervals(trace)[1]) for trace in traces)
        judged = None if setup.quick else kernels > 0
        return Line("profile trace (HTA not installed): compute events", f"{kernels} in {trace_dir.name}", judged)
    except Exception as exc:  # HTA present but refused the trace
        return Line("profile trace read by HTA's TraceAnalysis", f"{type(exc).__name__}: {exc}", False)


def sampler_line(out: Path, setup: Setup) -> Line:
    """benchmarks/overhead.py with and without the sampler, interleaved, in its own launch."""
    path = out / "overhead.json"
    args = (
        ["--device", "cpu", "--ranks", "1", "--workload", "mlp", "--size", "tiny", "--steps", "5", "--repeats", "1"]
        if setup.quick
        else [
            "--device",
            "cuda",
            "--ranks",
            "1",
            "--workload",
            "gpt2",
            "--size",
            "full",
            "--dtype",
            "bf16",
            "--steps",
            "20",
            "--repeats",
            "3",
        ]
    )
    code = subprocess.call([sys.executable, str(HERE / "overhead.py"), *args, "--json", str(path)])
    if code != 0 or not path.is_file():
        return Line("NVML sampler cost", f"overhead.py exit {code}", False)
    measured = json.loads(path.read_text())
    ms = measured["median_step_ms"]
    value = (
        f"harness {ms['harness']:.2f} / no sampler {ms['no-sampler']:.2f} ms = "
        f"{measured['harness_over_no_sampler']:.4f}; harness/bare {measured['harness_over_bare']:.4f}"
    )
    return Line(
        "NVML sampler cost", value, None if setup.quick else measured["harness_over_no_sampler"] <= SAMPLER_COST
    )


def event_vs_wall_clock(steps: int = 20) -> Line:
    """The same steps timed by StepTimer on CUDA events and by a wall clock synchronised at each step."""
    import torch

    import workloads
    from harness.clock import Clock
    from harness.measure.timing import StepTimer
    from harness.measure.training import build_model, make_batch

    device = torch.device("cuda", 0)
    workload = workloads.create("mlp", size="small")
    model = build_model(workload, seed=0, device=device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    timer, wall = StepTimer(Clock(device)), []
    for step in range(steps + 3):
        batch = make_batch(workload, batch_size=workload.default_batch_size(), seed=0, rank=0, step=step, device=device)
        torch.cuda.synchronize(device)
        began = time.perf_counter()
        timer.start()
        workload.loss(model, batch).backward()
        timer.lap("forward")
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        timer.lap("optimizer")
        torch.cuda.synchronize(device)
        wall.append((time.perf_counter() - began) * 1e3)
    events = statistics.median(row["step_ms"] for row in timer.collect()[3:])
    clock = statistics.median(wall[3:])
    ratio = events / clock
    return Line(
        "CUDA events vs synchronised wall clock",
        f"{events:.3f} / {clock:.3f} ms = {ratio:.4f}",
        abs(ratio - 1) <= TIMING_TOLERANCE,
    )


def usable_memory_line() -> Line:
    """What a process can use of this GPU (torch's CUDA total, `mem_get_info()[1]`: what an out-of-memory error
    reports), against `total_memory` and the built-in profile's `gpu_memory_gib` for this GPU (H200's is an upper
    bound until this line is read on one): shown, not judged."""
    import torch

    from harness.perfmodel.clusters import cluster, nccltests

    usable, total = torch.cuda.mem_get_info()[1] / 2**30, torch.cuda.get_device_properties(0).total_memory / 2**30
    name = torch.cuda.get_device_name(0)
    profile = nccltests.profile_for_gpu(name)
    said = f"; {profile}'s gpu_memory_gib {cluster.load(profile).gpu_memory_gib:g}" if profile else ""
    value = f"{name}: {usable:.2f} GiB usable (mem_get_info), total_memory {total:.2f} GiB{said}"
    return Line("usable GPU memory against the built-in profile", value, None, unjudged="shown")


def provenance_line(results: Path, setup: Setup) -> Line:
    env = json.loads((results / "w1-bf16" / layout.RUN_JSON).read_text())["environment"]
    gpus = env.get("gpu_count") or 0
    filled = {key: env.get(key) for key in ("driver_version", "cuda_driver_version", "nccl_version", "gpu_name")}
    topology_ok = isinstance(env.get("topology"), list) and len(env["topology"]) == gpus * (gpus - 1) // 2
    value = ", ".join(f"{k} {v}" for k, v in filled.items())
    return Line("provenance", value, None if setup.quick else all(filled.values()) and topology_ok)


def mapping_line() -> Line:
    """The memory sampler's GPU and run.json's topology, read in a process that sees the GPUs renumbered
    (benchmarks/gpu_mapping.py)."""
    import torch

    value, ok = gpu_mapping.judge(gpu_mapping.probe(torch.cuda.device_count()))
    return Line("NVML's GPU and topology under CUDA_VISIBLE_DEVICES", value, ok)


def print_table(lines: list[Line]) -> None:
    width = max(len(line.check) for line in lines)
    print(f"\n{'check':<{width}}  {'verdict':<10}  value")
    for line in lines:
        print(f"{line.check:<{width}}  {line.verdict:<10}  {line.value}")


def all_lines(out: Path, results: Path, setup: Setup) -> list[Line]:
    published = ddp_published_line(out, setup)  # first: the open issue's line, printed before the rest can stall
    print(f"{published.check}: {published.verdict}: {published.value}", flush=True)
    codes = run_benches(results, setup)
    zygote_codes = zygote_benches(results, setup)
    lines = strategy_lines(results, codes) + nvml_lines(results, setup) + ratio_lines(results, setup)
    lines.append(steady_line(results, setup))
    lines += activation_lines(results, setup)
    lines += activation_allocator_lines(setup)
    lines += [fixed_cost_line(results, setup), zygote_line(results, zygote_codes, setup)]
    lines += [*trace_lines(results, setup), sampler_line(out, setup)]
    lines.append(hook_cost_line(out, setup))
    quick = setup.quick
    lines.append(event_vs_wall_clock() if not quick else Line("CUDA events vs synchronised wall clock", "", None))
    lines.append(
        usable_memory_line() if not quick else Line("usable GPU memory against the built-in profile", "", None)
    )
    lines.append(provenance_line(results, setup))
    lines.append(mapping_line() if not quick else Line("NVML's GPU and topology under CUDA_VISIBLE_DEVICES", "", None))
    lines.append(published)
    return lines


def hook_cost_line(out: Path, setup: Setup) -> Line:
    """What timing stock's and zero's buckets costs their step at one rank (benchmarks/hook_cost.py): shown, not
    judged; within the launches' spread on a GPU, `--bucket-timeline` could be on by default there."""
    text, _ = hook_cost.check(out / "hook-cost", setup.device, quick=setup.quick)
    return Line("timing DDP's buckets: hooked / plain step at one rank", text, None, unjudged="shown")


def ddp_published_line(out: Path, setup: Setup) -> Line:
    """#27's DDP check: this GPU's one-rank rows (DDP's own cost) carried to dgx1-v100 (judged on GPUs)."""
    text, ok = ddp_published.check(out / "ddp-published", setup.device, quick=setup.quick)
    return Line("DDP ResNet-50 on dgx1-v100 vs pytorch's published (3 %)", text, None if setup.quick else ok)


def overlap_check(results: Path, setup: Setup) -> list[Line]:
    """`--overlap`: the profiled run and its lines alone (a minute on an H200)."""
    codes = {"profiled": profiled_bench(results, setup)}
    return strategy_lines(results, codes) + trace_lines(results, setup)


def main(argv: list[str]) -> int:
    flags = {"--quick", "--overlap"}
    quick, overlap_only = "--quick" in argv, "--overlap" in argv
    positional = [a for a in argv if a not in flags]
    if len(positional) != 1 or positional[0].startswith("-"):
        print("usage: python benchmarks/gpu_check.py OUT_DIR [--quick] [--overlap]", file=sys.stderr)
        return 2
    import torch

    if not quick and not torch.cuda.is_available():
        print(
            "gpu_check: error: no CUDA GPU is visible; this check needs one (--quick runs the CPU subset)",
            file=sys.stderr,
        )
        return 2
    out, setup = Path(positional[0]), Setup(quick=quick)
    results = out / "results"
    began = time.monotonic()
    lines = overlap_check(results, setup) if overlap_only else all_lines(out, results, setup)
    wall_s = time.monotonic() - began
    passed = all(line.ok is not False for line in lines)
    out.mkdir(parents=True, exist_ok=True)
    summary = {"quick": quick, "ok": passed, "wall_s": wall_s, "lines": [dataclasses.asdict(line) for line in lines]}
    (out / "gpu_check.json").write_text(json.dumps(summary, indent=2, default=str))
    print_table(lines)
    mode = "quick (CPU subset)" if quick else "GPU"
    print(f"gpu_check {mode}: {'PASS' if passed else 'FAIL'} in {wall_s:.0f} s; details in {out / 'gpu_check.json'}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

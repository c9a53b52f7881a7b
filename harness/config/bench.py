"""What `ddpbench bench` was asked to do (`BenchConfig`): typed, validated, each field the one
declaration of its flag (harness.config.flags). The grid it expands into is harness.config.grid.

The CLI parses text into these objects at the edge; everything inside reads only them.
Every check raises `ConfigError` with one line naming the bad value and the valid choices,
before anything is written.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import re
from pathlib import Path
from typing import Any

from harness.config.accumulation import accumulation_counts
from harness.config.flags import AUTO, LOCATES, STEERS, duration, finite, flag, key_values, names, repeat_count, whole
from harness.config.precision import DTYPES
from harness.config.units import parse_bandwidth, parse_latency
from harness.protocols import SIZES, ConfigError
from harness.results.layout import check_results_folder, new_run_id, validate_run_id  # noqa: F401 (the config's API)
from harness.results.values import counted

DEVICES = ("auto", "cpu", "cuda")
BACKENDS = ("auto", "nccl", "gloo")
OPTIMIZER_CHOICES = ("sgd", "adam", "adamw")
SIZE_CHOICES = ("auto", *SIZES)
DEFAULT_WORKLOADS = ("mlp",)
RESULTS = Path("results")
MAX_SEED = 2**62  # a 64-bit seed with room for what each rank, step and batch adds to it
DEFAULT_WARMUP = 3
"""Warm-up steps where no strategy asks for more (StrategyDefaults.warmup_needed): DDP rebuilds its buckets
in the second step."""
MIN_AUTO_REPEATS = 2  # a verdict's interval needs two repeats a side (harness.analysis.stats.MIN_REPEATS)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class BenchConfig:
    """Everything `ddpbench bench` was asked to do; each field is a flag (`ddpbench bench --help`)."""

    gpus: int = flag(
        dataclasses.MISSING,
        "ranks per node (one per GPU; CPU processes without GPUs); world "
        "sizes run as the ladder 1, 2, 4, … up to it, and it",
        parse=whole("--gpus", "4 (it runs the world sizes 1, 2 and 4)"),
        default_text="the GPUs visible, or 2 simulated on the CPU",
    )
    impls: tuple[str, ...] = flag(
        dataclasses.MISSING, "comma-separated strategies (see `ddpbench list`)", parse=names, default_text="all"
    )
    workloads: tuple[str, ...] = flag(
        DEFAULT_WORKLOADS,
        "comma-separated workloads: registered names (`ddpbench list`), your own FILE.py:NAME or package.module:NAME, "
        "torchvision:NAME, hf:MODEL_TYPE, hf:config.json, timm:NAME (docs/your-model.md)",
        parse=names,
    )
    workload_options: tuple[tuple[str, tuple[str, ...]], ...] = flag(
        (),
        "a workload option; several values sweep it (repeatable): a registered workload's (`ddpbench list`); "
        "hf: seq_len, task or any configuration field; torchvision:/timm: image_size, num_classes or a keyword of "
        "the model's class; your class's keyword arguments (docs/your-model.md)",
        name="--wopt",
        parse=key_values("--wopt", deferred=True),
        metavar="KEY=V[,V…]",
        repeatable=True,
    )
    options: tuple[tuple[str, tuple[str, ...]], ...] = flag(
        (),
        "a strategy option (`ddpbench list IMPL`: its options, defaults and choices); several values sweep it, and "
        "repeated --opt flags combine every value with every other (--bucket-cap-mb A,B is --opt bucket_cap_mb=A,B)",
        name="--opt",
        parse=key_values("--opt"),
        metavar="KEY=V[,V…]",
        repeatable=True,
    )
    size: str = flag(
        "auto",
        f"{'|'.join(SIZE_CHOICES)}: tiny for tests, small for CPU benchmarks, full for GPUs",
        default_text="auto: small on the CPU, full on GPUs",
    )
    steps: int = flag(20, "measured steps per configuration", parse=whole("--steps"))
    warmup: int | None = flag(
        None,
        "unmeasured steps before them",
        parse=whole("--warmup"),
        default_text=f"{DEFAULT_WARMUP}, or what a strategy needs on its device where more: those built on torch DDP "
        "wait for the device in their first 11 forwards on CUDA",
    )
    batch_size: int | None = flag(
        None, "samples per rank per step", parse=whole("--batch-size"), default_text="the workload's"
    )
    grad_accum: tuple[int, ...] = flag(
        (1,),
        "gradient accumulation: micro-batches of --batch-size per rank in each step, synchronised after the last only "
        "(the strategy's no_sync); several values sweep it: global batch = world size × K × --batch-size",
        parse=accumulation_counts,
        metavar="K[,K…]",
    )
    optimizer: str = flag(
        "sgd", "sgd|adam|adamw (Adam and AdamW keep two moments per parameter: the state ZeRO and FSDP shard)"
    )
    dtype: str = flag(
        "auto",
        "auto|fp32|bf16|fp16: autocast dtype of the forward (fp16 with a grad scaler); parameters stay fp32",
        default_text="auto: bf16 on GPUs that support it natively, fp32 elsewhere",
    )
    tf32: bool = flag(
        False,
        "TF32 tensor cores for fp32 matmuls and convolutions (in fp32 runs, and outside "
        "autocast); without it no TF32 at all, cuDNN's included",
    )
    device: str = flag("auto", f"{'|'.join(DEVICES)}")
    backend: str = flag(
        "auto", "auto|nccl|gloo; gloo on GPUs lets ranks share a GPU", default_text="NCCL on GPUs, gloo on the CPU"
    )
    results: Path = flag(RESULTS, "folder that holds one sub-folder per run", parse=Path, on_resume=LOCATES)  # noqa: RUF009
    run_id: str = flag("", "name of this run's folder", default_text="a timestamp plus a random suffix")
    nnodes: int = flag(1, "nodes in the job; above 1, torchrun's c10d rendezvous joins them", parse=whole("--nnodes"))
    node_rank: int = flag(0, "this node's rank among --nnodes", parse=whole("--node-rank"), on_resume=STEERS)
    rdzv_endpoint: str | None = flag(
        None, "HOST[:PORT] of torchrun's c10d rendezvous (several nodes; PORT 29400 when left out)", on_resume=STEERS
    )
    baseline: bool = flag(
        True,
        "leave out the `local` (no communication) configuration each world size gets, the reference for "
        "speedup_vs_local, scaling_efficiency_vs_local and the gap_* columns (without it they are null)",
        negative=True,
    )
    ladder: bool = flag(
        True,
        "run --gpus ranks only (per node), not the ladder 1, 2, 4, … below it: --gpus 2 makes half as many "
        "configurations in half as many launches; then nothing measures one rank, so scaling_efficiency and "
        "scaling_efficiency_vs_local are null, and predict has no memory per rank, which it fits from two world "
        "sizes (parity, speedup_vs_local and the gap_* columns need no other world size)",
        name="--largest-only",
        negative=True,
    )
    parity: bool = flag(
        True, "skip the check of every configuration against the single-process reference", negative=True
    )
    profile: bool = flag(False, "capture a torch.profiler trace per rank after each configuration's measured steps")
    bucket_timeline: bool = flag(
        False,
        "time DDP's buckets too (stock, zero) through a communication hook, for "
        "their comm_ms, overlap and bucket timeline; it costs 1-12% of a CPU step, so it "
        "is off by default (naive, flat and bucketed are always timed: it costs them "
        "nothing)",
    )
    mem_period_ms: float = flag(
        20.0, "memory sampling period in ms, 0 = off", parse=finite("--mem-period-ms", "a period in milliseconds")
    )
    repeats: int | str = flag(
        AUTO,
        "run every configuration N times, interleaved, each a launch of its own, every second one the order "
        "before it backwards (A B C, C B A, B C A, A C B, …); each repeat is one "
        "piece of evidence for compare, the recommended cap and the ratios to the reference. 'auto' "
        "repeats, in launches of their own, only the configurations whose verdicts are still open, "
        "until every one is decided or out of reach, --max-repeats or --budget (docs/statistics.md)",
        parse=repeat_count,
        metavar="N|auto",
        default_text="auto when the run sweeps a bucket cap or compares strategies, else 1",
    )
    max_repeats: int = flag(
        20, "with --repeats auto: the most repeats any configuration gets", parse=whole("--max-repeats")
    )
    budget_s: float | None = flag(
        None,
        "with --repeats auto: after the first two repeats (a verdict needs them), start no round of repeats that "
        "would end past this much wall time (e.g. 90s, 20m, 1h)",
        name="--budget",
        parse=duration("--budget"),
        default_text="none: --max-repeats alone",
        on_resume=STEERS,
    )
    seed: int = flag(0, "base seed for model weights and synthetic batches", parse=whole("--seed"))
    timeout_s: float | None = flag(
        None,
        "how long a configuration may go without progress before it is declared hung and its launch ended "
        "(seconds, or e.g. 90s, 5m; before the configuration's first step, at least 30 s)",
        name="--timeout",
        parse=duration("--timeout"),
        default_text="ten times its slowest step so far, at least 60 s; 10 minutes before its first step",
        on_resume=STEERS,
    )
    fail_fast: bool = flag(False, "stop at the first failed configuration (exit 1)", on_resume=STEERS)
    busbw: str | None = flag(
        None,
        "all-reduce bus bandwidth of the cluster (e.g. 90GB/s) for the report's "
        "communication floor; stored in run.json",
        default_text="fitted from a `ddpbench collectives` run of this machine in --results",
    )
    latency: str | None = flag(None, "all-reduce latency that goes with --busbw (e.g. 30us)", default_text="0")
    command: tuple[str, ...] = ()
    """The command line, recorded with the run (not a flag)."""

    def __post_init__(self) -> None:
        _require_positive_int("--gpus", self.gpus)
        _require_positive_int("--steps", self.steps)
        if self.repeats != AUTO:
            _require_positive_int("--repeats", self.repeats)
        too_few = isinstance(self.max_repeats, int) and self.max_repeats < MIN_AUTO_REPEATS
        if not isinstance(self.max_repeats, int) or isinstance(self.max_repeats, bool) or too_few:
            raise ConfigError(f"--max-repeats {self.max_repeats!r} is not valid; give a whole number ≥ "
                              f"{MIN_AUTO_REPEATS} (a verdict needs two repeats a side)")  # fmt: skip
        if self.budget_s is not None and self.budget_s <= 0:
            raise ConfigError(f"--budget {self.budget_s:g}s is not valid; give a positive time, e.g. 20m")
        if self.warmup is not None and (not isinstance(self.warmup, int) or self.warmup < 0):
            raise ConfigError(f"--warmup {self.warmup} is not valid; give a whole number ≥ 0")
        if self.batch_size is not None:
            _require_positive_int("--batch-size", self.batch_size)
        if self.size not in SIZE_CHOICES:
            raise ConfigError(f"--size {self.size!r} is not valid; choose one of {', '.join(SIZE_CHOICES)}")
        if not 0 <= self.seed <= MAX_SEED:
            raise ConfigError(f"--seed {self.seed} is not valid; give a whole number from 0 to {MAX_SEED} (torch's "
                              "generators take 64-bit seeds, and each rank and batch adds to it)")  # fmt: skip
        if self.optimizer not in OPTIMIZER_CHOICES:
            raise ConfigError(
                f"--optimizer {self.optimizer!r} is not valid; choose one of {', '.join(OPTIMIZER_CHOICES)}"
            )
        if self.dtype not in DTYPES:
            raise ConfigError(f"--dtype {self.dtype!r} is not valid; choose one of {', '.join(DTYPES)}")
        if self.backend not in BACKENDS:
            raise ConfigError(f"--backend {self.backend!r} is not valid; choose one of {', '.join(BACKENDS)}")
        if self.device not in DEVICES:
            raise ConfigError(f"--device {self.device!r} is not valid; choose one of {', '.join(DEVICES)}")
        if not self.impls:
            raise ConfigError("--impls is empty; give at least one strategy (see `ddpbench list`)")
        if not self.workloads:
            raise ConfigError("--workloads is empty; give at least one workload (see `ddpbench list`)")
        check_nodes(self.nnodes, self.node_rank, self.rdzv_endpoint, self.run_id)
        if not math.isfinite(self.mem_period_ms) or self.mem_period_ms < 0:
            raise ConfigError(f"--mem-period-ms {self.mem_period_ms} is not valid; give milliseconds ≥ 0 (0: off)")
        if self.timeout_s is not None and not (math.isfinite(self.timeout_s) and self.timeout_s > 0):
            raise ConfigError(f"--timeout {self.timeout_s} is not valid; give seconds > 0 (or leave it out: automatic)")
        validate_run_id(self.run_id)
        for flag_text, axes in (("--opt", self.options), ("--wopt", self.workload_options)):
            keys = [key for key, _ in axes]
            if len(set(keys)) < len(keys):
                twice = next(key for key in keys if keys.count(key) > 1)
                raise ConfigError(f"option {twice!r} is given twice; give it once with every value, e.g. "
                                  f"{flag_text} {twice}=A,B")  # fmt: skip
        self._check_network()

    def _check_network(self) -> None:
        if self.busbw is not None:
            parse_bandwidth(self.busbw)
        if self.latency is not None:
            if self.busbw is None:
                raise ConfigError("--latency needs --busbw too")
            parse_latency(self.latency)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BenchConfig:
        """The inverse of dataclasses.asdict after a JSON round trip (tuples came back as lists)."""
        fields = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in fields}
        for key in ("impls", "workloads", "command", "grad_accum"):
            if key in values:
                values[key] = tuple(values[key])
        for key in ("options", "workload_options"):
            values[key] = tuple((name, tuple(texts)) for name, texts in values.get(key, ()))
        values["results"] = Path(values.get("results", "results"))
        return cls(**values)

    @property
    def world_sizes(self) -> list[int]:
        return [self.nnodes * ranks for ranks in (rank_ladder(self.gpus) if self.ladder else [self.gpus])]


ENDPOINT = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])(?::(\d{1,5}))?$")


def check_nodes(nnodes: int, node_rank: int, endpoint: str | None, run_id: str) -> None:
    """--nnodes, --node-rank, --rdzv-endpoint and --run-id together, as `bench` and `collectives` take them."""
    _require_positive_int("--nnodes", nnodes)
    if not 0 <= node_rank < nnodes:
        nodes = "0 (one node)" if nnodes == 1 else f"0 to {nnodes - 1}"
        raise ConfigError(f"--node-rank {node_rank} is not valid with --nnodes {nnodes}; give {nodes}")
    if nnodes > 1 and not endpoint:
        raise ConfigError("--nnodes above 1 needs --rdzv-endpoint HOST:PORT")
    if endpoint is not None:
        check_endpoint(endpoint)
        if nnodes == 1:  # one node never meets there: the user most likely forgot --nnodes
            raise ConfigError(f"--rdzv-endpoint {endpoint} is for several nodes; give --nnodes N (N ≥ 2, with "
                              "--node-rank and --run-id on each node), or leave it out on one node")  # fmt: skip
    if nnodes > 1 and not run_id:
        raise ConfigError("--nnodes above 1 needs --run-id: every node's launcher must name the same run")


def check_endpoint(endpoint: str) -> None:
    """HOST[:PORT] as torchrun's c10d rendezvous takes it (a host name, an IPv4 or a [bracketed] IPv6 address)."""
    match = ENDPOINT.match(endpoint)
    if match is None or (match.group(1) is not None and not 1 <= int(match.group(1)) <= 65535):
        raise ConfigError(f"--rdzv-endpoint {endpoint!r} is not valid; give HOST[:PORT] (e.g. node0:29500; PORT "
                          "1-65535, torchrun's default 29400)")  # fmt: skip


def _require_positive_int(flag: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        auto = " or auto" if flag == "--repeats" else ""
        raise ConfigError(f"{flag} {value!r} is not valid; give a whole number ≥ 1{auto}")


def rank_ladder(gpus: int) -> list[int]:
    """1, 2, 4, … below `gpus`, then `gpus` itself: the world sizes of a scaling run."""
    ladder = [1]
    while ladder[-1] * 2 < gpus:
        ladder.append(ladder[-1] * 2)
    if gpus > 1:
        ladder.append(gpus)
    return ladder


GPU_DEVICE_NODES = (
    "/dev/nvidiactl",
    "/dev/nvidia0",
    "/dev/kfd",
    "/dev/dxg",
    "/proc/driver/nvidia",
    "/sys/module/nvidia",
)
"""Files a GPU driver makes (NVIDIA's, ROCm's, WSL's)."""


def gpu_driver_files() -> bool:
    """Whether a GPU driver's file is here (GPU_DEVICE_NODES): asked without importing torch."""
    return any(os.path.exists(node) for node in GPU_DEVICE_NODES)


def likely_cpu(requested: str) -> bool:
    """A guess, without importing torch, that `--device requested` will run on the CPU: `cpu`, or `auto` where no
    GPU driver's file exists. Only for starting the CPU ranks' imports early (`torchrun.start_early`); the device
    itself is torch's answer (`cuda_available`), since a driver may make its device files only when CUDA is first
    used."""
    return requested == "cpu" or (requested == "auto" and not gpu_driver_files())


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def cuda_here() -> bool:
    """torch's `cuda_available`, asked of torch only where a GPU may be: no GPU driver's file (GPU_DEVICE_NODES) and
    no nvidia-modprobe, which loads NVIDIA's driver at CUDA's first use, say none without torch's import (2 to 12 s
    of a warm `list gpt2`, which builds no model); torch already imported answers itself."""
    import shutil
    import sys

    if "torch" in sys.modules or shutil.which("nvidia-modprobe") or gpu_driver_files():
        return cuda_available()
    return False


class HereDevice:
    """This machine's device (`cuda` where torch sees a GPU, else `cpu`), asked (`cuda_here`) at the first read of
    its `type`: `predict` over a run's stored profile needs none, and torch's import is seconds of a user's wait."""

    @functools.cached_property
    def type(self) -> str:
        return "cuda" if cuda_here() else "cpu"


def gpu_count() -> int:
    """The CUDA GPUs torch sees (CUDA_VISIBLE_DEVICES applied)."""
    import torch

    return torch.cuda.device_count()


def resolve_device(requested: str, *, cuda_available: bool) -> str:
    if requested == "auto":
        return "cuda" if cuda_available else "cpu"
    if requested == "cuda" and not cuda_available:
        raise ConfigError("--device cuda is not valid here: no CUDA GPU is visible; use --device cpu or auto")
    return requested


def resolve_backend(requested: str, *, device: str) -> str:
    if requested == "auto":
        return "nccl" if device == "cuda" else "gloo"
    if requested == "nccl" and device != "cuda":
        raise ConfigError("--backend nccl needs CUDA GPUs; use gloo (or auto) on the CPU")
    return requested


def check_gpu_count(*, gpus: int, available: int, backend: str) -> None:
    """NCCL needs a GPU per rank; gloo lets several ranks share one (a GPU check, not a benchmark)."""
    if gpus > available and backend != "gloo":
        raise ConfigError(
            f"--gpus {gpus} is more than the {counted(available, 'GPU')} visible here; "
            "give at most that, or --backend gloo to let ranks share GPUs"
        )

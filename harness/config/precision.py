"""Precision: the compute dtype a run uses (`--dtype auto` resolved once, in the launcher) and the
dense peak each known GPU reaches in it, for model FLOPs utilisation (`mfu`); and each known GPU's memory
bandwidth, which a memory-bound step (the optimizer's) cannot beat.

The peaks are NVIDIA's datasheet figures per GPU, in TFLOP/s, **dense** (no 2:4 sparsity): where a
datasheet gives only the "with sparsity" figure (marked * there), the dense one is half of it. A GPU
not in the table, a MIG slice of one, or a dtype a GPU has no tensor-core path for, has no peak:
its `mfu` is null, never a guess.
"""

from __future__ import annotations

import dataclasses
import math
import re

from harness.protocols import ConfigError

COMPUTE_DTYPES = ("fp32", "bf16", "fp16")
DTYPES = ("auto", *COMPUTE_DTYPES)


def resolve_dtype(requested: str, *, device: str, bf16_supported: bool) -> str:
    """The compute dtype every rank runs: auto is bf16 autocast where the GPU supports bf16
    natively, fp32 elsewhere (the CPU, older GPUs). fp16 (autocast with a grad scaler) on the CPU needs FP16_TORCH."""
    if requested not in DTYPES:
        raise ConfigError(f"--dtype {requested!r} is not valid; choose one of {', '.join(DTYPES)}")
    if requested == "auto":
        return "bf16" if device == "cuda" and bf16_supported else "fp32"
    if requested == "fp16" and device != "cuda" and torch_below(FP16_TORCH):
        raise ConfigError(
            f"--dtype fp16 on the CPU needs torch >= {'.'.join(map(str, FP16_TORCH))} (its float16 "
            f"autocast and grad scaler there); this is torch {torch_version()}: use bf16, fp32 or auto"
        )
    return requested


FP16_TORCH = (2, 5)
"""The torch fp16 runs need: on the CPU its float16 autocast and `GradScaler('cpu')`; with FSDP2 anywhere the grad
scaler's inf check all-reduced over DTensor shards (torch's PR 132816, in 2.5), without which ranks skip apart."""


def torch_version() -> str:
    import torch

    return torch.__version__


def torch_below(release: tuple[int, int]) -> bool:
    """Whether the installed torch is older than `release` (major, minor)."""
    found = re.match(r"(\d+)\.(\d+)", torch_version())
    return found is not None and (int(found[1]), int(found[2])) < release


def peak_dtype(dtype: str, *, tf32: bool) -> str:
    """Which peak a run can reach: its autocast dtype's, or for fp32 the TF32 tensor cores' (with
    `--tf32`) or plain fp32's."""
    if dtype == "fp32":
        return "tf32" if tf32 else "fp32"
    return dtype


# (pattern on torch's device name, {dtype: dense peak TFLOP/s}). First match wins: the more specific
# names (NVL, PCIe) come before the family. Sources, NVIDIA datasheets:
_H100_SXM = {"fp32": 67.0, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5}
# H100 SXM5 (nvidia.com/en-us/data-center/h100, "H100 SXM"): FP32 67, TF32 989*, BF16 1,979*, FP16 1,979*
_H100_NVL = {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5}
# H100 NVL (same datasheet): FP32 60, TF32 835*, BF16 1,671*, FP16 1,671*
_H100_PCIE = {"fp32": 51.0, "tf32": 378.0, "bf16": 756.5, "fp16": 756.5}
# H100 PCIe (H100 datasheet, 2022): FP32 51, TF32 756*, BF16 1,513*, FP16 1,513*
# H200 SXM (nvidia.com/en-us/data-center/h200): FP32 67, TF32 989*, BF16 1,979*, FP16 1,979*: the H100
# SXM's compute; H200 NVL: FP32 60, TF32 835*, BF16 1,671*, FP16 1,671*, the H100 NVL's.
_A100 = {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}
# A100 40/80 GB, PCIe and SXM alike (A100 datasheet): FP32 19.5, TF32 156 (312*), BF16 312 (624*), FP16 312 (624*)
_L40S = {"fp32": 91.6, "tf32": 183.0, "bf16": 366.5, "fp16": 366.5}
# L40S (L40S datasheet): FP32 91.6, TF32 366*, BF16 733*, FP16 733*
_L4 = {"fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp16": 121.0}
# L4 (L4 datasheet): FP32 30.3, TF32 120*, BF16 242*, FP16 242*
_A10 = {"fp32": 31.2, "tf32": 62.5, "bf16": 125.0, "fp16": 125.0}
# A10 (A10 datasheet): FP32 31.2, TF32 62.5 (125*), BF16 125 (250*), FP16 125 (250*)
_V100_SXM2 = {"fp32": 15.7, "fp16": 125.0}
_V100_PCIE = {"fp32": 14.0, "fp16": 112.0}
# V100 (V100 datasheet): SXM2 FP32 15.7, tensor (FP16) 125; PCIe FP32 14, tensor 112. No BF16, no TF32.
_T4 = {"fp32": 8.1, "fp16": 65.0}
# T4 (T4 datasheet): FP32 8.1, mixed precision (FP16/FP32) 65. No BF16, no TF32.

PEAK_TFLOPS: tuple[tuple[str, dict[str, float]], ...] = (
    (r"\bH200 NVL\b", _H100_NVL),
    (r"\bH200\b", _H100_SXM),
    (r"\bH100 NVL\b", _H100_NVL),
    (r"\bH100 PCIE\b", _H100_PCIE),
    (r"\bH100\b", _H100_SXM),  # "NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM5 …"
    (r"\bA100\b", _A100),  # "NVIDIA A100-SXM4-80GB", "NVIDIA A100-PCIE-40GB", "NVIDIA A100 80GB PCIe"
    (r"\bL40S\b", _L40S),
    (r"\bL4\b", _L4),
    (r"\bA10\b", _A10),  # not the A10G, whose clocks differ
    (r"\bV100[- ]SXM2\b", _V100_SXM2),  # torch's "Tesla V100-SXM2-32GB"; a profile's "V100 SXM2"
    (r"\bV100[- ]PCIE\b", _V100_PCIE),
    (r"\bT4\b", _T4),
)


def peak_tflops(gpu_name: str | None, dtype: str, *, tf32: bool) -> float | None:
    """Dense peak TFLOP/s of one `gpu_name` GPU for a run in `dtype`; None where it is not known."""
    if not gpu_name or "MIG" in gpu_name.upper().split():  # a MIG slice has a share of the GPU
        return None
    name = gpu_name.upper()
    for pattern, peaks in PEAK_TFLOPS:
        if re.search(pattern, name):
            return peaks.get(peak_dtype(dtype, tf32=tf32))
    return None


def mfu(achieved_tflops: float | None, *, gpu_name: str | None, dtype: str, tf32: bool, gpus: int) -> float | None:
    """Model FLOPs utilisation: achieved TFLOP/s over the `gpus` GPUs' dense peak; None where the
    peak or the achieved figure is not known (the CPU, an unlisted GPU)."""
    peak = peak_tflops(gpu_name, dtype, tf32=tf32)
    if achieved_tflops is None or peak is None or gpus < 1:
        return None
    return achieved_tflops / (peak * gpus)


# (pattern on the device name, memory bandwidth GB/s), NVIDIA's datasheets; first match wins. H200 SXM 4.8 TB/s
# (H200 NVL 4.8 as well); H100 SXM5 3.35 TB/s, H100 NVL 3.9, H100 PCIe 2.0; A100 80GB SXM 2,039 GB/s, 80GB PCIe 1,935,
# 40GB 1,555; V100 SXM2 and PCIe 900 GB/s (32 GB and 16 GB alike); L40S 864 GB/s, L4 300, A10 600, T4 320.
MEMORY_GBPS: tuple[tuple[str, float], ...] = (
    (r"\bH200\b", 4800.0),
    (r"\bH100 NVL\b", 3900.0),
    (r"\bH100 PCIE\b", 2000.0),
    (r"\bH100\b", 3350.0),
    (r"\bA100\b.*\bPCIE\b.*\b80\s?GB\b|\bA100\b.*\b80\s?GB\b.*\bPCIE\b", 1935.0),
    (r"\bA100\b.*\b80\s?GB\b", 2039.0),  # "NVIDIA A100-SXM4-80GB"; a profile's "A100 SXM4 80GB"
    (r"\bA100\b", 1555.0),  # the 40 GB boards
    (r"\bV100\b", 900.0),
    (r"\bL40S\b", 864.0),
    (r"\bL4\b", 300.0),
    (r"\bA10\b", 600.0),
    (r"\bT4\b", 320.0),
)


def memory_gbps(gpu_name: str | None) -> float | None:
    """One `gpu_name` GPU's memory bandwidth, GB/s (datasheet); None where it is not known or a MIG slice's."""
    if not gpu_name or "MIG" in gpu_name.upper().split():
        return None
    name = gpu_name.upper()
    return next((gbps for pattern, gbps in MEMORY_GBPS if re.search(pattern, name)), None)


BYTES_A_PARAMETER = {"sgd": 12, "adam": 28, "adamw": 28}
"""What one optimizer step reads and writes per fp32 parameter (its moments in fp32 too): SGD as
harness.measure.training builds it (no momentum) reads the parameter and its gradient and writes the parameter; Adam
reads those and two moments and writes three."""


GPUS = {"h200-sxm": "H200 SXM", "h200-nvl": "H200 NVL", "h100-sxm": "H100 SXM5", "h100-nvl": "H100 NVL",
        "h100-pcie": "H100 PCIE", "a100-sxm4-80gb": "A100 SXM4 80GB", "a100-pcie-80gb": "A100 PCIE 80GB",
        "a100-40gb": "A100 40GB", "l40s": "L40S", "l4": "L4", "a10": "A10", "v100-sxm2": "V100 SXM2",
        "v100-pcie": "V100 PCIE", "t4": "T4"}  # fmt: skip
"""`predict --local-step-gpu`'s names: each GPU both tables above know, and the device name they match it by (the
A100 40GB's SXM4 and PCIe boards share their figures)."""


GPU_FAMILIES = ("H200", "H100", "A100", "L40S", "L4", "A10", "V100", "T4")
"""The GPUs the tables above know, as a device name or a profile's description names them (A10 is not A100's)."""


def gpu_family(text: str) -> str | None:
    """The GPU a device name or a profile's description names ('NVIDIA A100-SXM4-80GB' → A100, '8x L40S 48GB on
    PCIe' → L40S); None where it names none the tables know."""
    upper = text.upper()
    return next((family for family in GPU_FAMILIES if re.search(rf"\b{family}\b", upper)), None)


@dataclasses.dataclass(frozen=True)
class StepBounds:
    """A step measured on one GPU, on another: not known, only bounded. A memory-bound step scales with the memory
    bandwidths, a compute-bound one with the dense peaks (in the dtype trained: gpu_step_dtype); a step that scales
    as either lies between the two (one far below the peak, bound by kernel launches or the host, may not)."""

    compute_ms: float  # the step were it compute-bound (a known optimizer part still memory-bound)
    memory_ms: float  # the step were it memory-bound
    peak_ratio: float  # the measured GPU's dense peak over the other's: a compute-bound step's factor
    memory_ratio: float  # its memory bandwidth over the other's: a memory-bound step's factor
    peak_dtype: str  # the peak's dtype ("bf16", "tf32", …)
    optimizer_ms: float | None = None  # an optimizer part given, on the other GPU: memory-bound at either end
    assumed: bool = False  # peak_dtype assumed (gpu_step_dtype: a CPU run's fp32 is not the GPU's), not the run's
    target_peak_dtype: str = ""  # the other GPU's peak's dtype, where it trains in another (a V100: no bf16)
    optimizer_estimated: bool = False  # optimizer_ms estimated (its memory traffic), not given: each end estimates it

    @property
    def same(self) -> bool:
        """The two GPUs have the same datasheet figures: the step is the other's too."""
        return self.peak_ratio == 1 and self.memory_ratio == 1

    def ends(self) -> list[tuple[str, float]]:
        """[(end, step ms)], the shorter step first; one end where both give the same step."""
        ends = sorted((("compute-bound", self.compute_ms), ("memory-bound", self.memory_ms)), key=lambda end: end[1])
        return ends[:1] if math.isclose(self.compute_ms, self.memory_ms, rel_tol=1e-9) else ends


def gpu_name(name: str) -> str:
    """A --local-step-gpu name's device text (GPUS), or ConfigError naming the valid ones."""
    if name not in GPUS:
        raise ConfigError(f"--local-step-gpu {name!r} is not valid; choose one of {', '.join(GPUS)}")
    return GPUS[name]


def trains_in(dtype: str, gpu: str | None) -> str:
    """The autocast dtype a run of `dtype` takes on `gpu` (a device name): a GPU the tables know with an fp16 peak and
    no bf16 one (a V100, a T4: no bf16 tensor cores; --dtype auto trains in fp32 there) autocasts in fp16, with a grad
    scaler, where bf16 was asked for; else `dtype`."""
    if dtype == "bf16" and not peak_tflops(gpu, "bf16", tf32=False) and peak_tflops(gpu, "fp16", tf32=False):
        return "fp16"
    return dtype


def bench_in(dtype: str) -> str:
    """'bench --dtype bf16': how a run counts its model in `dtype`."""
    return f"bench --dtype {dtype}"


def gpu_step_dtype(run_dtype: str, *, device: str, requested: str | None, gpu: str) -> tuple[str, bool]:
    """(dtype, assumed): the precision a one-GPU step of the run's model is taken in on `gpu` (`step_bounds`' peaks). A
    GPU run's own; a CPU run's where its --dtype asked for one (bf16's on a GPU without it: fp16, `trains_in`); where
    `auto` left a CPU run in fp32, what auto trains in on `gpu` (bf16 where it has a bf16 peak, else fp32), assumed
    where it is not the run's: the CPU's fp32 is no choice of the user's."""
    if device == "cpu" and requested in (None, "auto"):
        dtype = resolve_dtype("auto", device="cuda", bf16_supported=peak_tflops(gpu, "bf16", tf32=False) is not None)
        return dtype, dtype != run_dtype  # a GPU without bf16 trains in fp32 too: nothing assumed
    return trains_in(run_dtype, gpu), False


def step_bounds(step_ms: float, *, measured_on: str, target: str, dtype: str, tf32: bool,
                optimizer_ms: float | None = None, target_dtype: str | None = None,
                target_gbps: float | None = None) -> StepBounds:  # fmt: skip
    """`step_ms` measured on `measured_on` (a device name, as the tables match it) in `dtype`, on `target` (a cluster
    profile's description) in `target_dtype` (default: `dtype`; another where the target GPU trains otherwise, a V100
    without bf16; `target_gbps`: its memory bandwidth where the profile gives it): between its compute-bound and
    memory-bound steps. An optimizer part given is memory-bound at both
    ends, so the compute-bound step scales the rest alone. ConfigError where a figure is not known."""
    figures = {}
    for role, gpu, in_dtype, given in (("--local-step-gpu's", measured_on, dtype, None),
                                       ("the cluster's", target, target_dtype or dtype, target_gbps)):  # fmt: skip
        peak, gbps = peak_tflops(gpu, in_dtype, tf32=tf32), given or memory_gbps(gpu)
        if peak is None or gbps is None:
            missing = f"dense {peak_dtype(in_dtype, tf32=tf32)} peak" if peak is None else "memory bandwidth"
            raise ConfigError(f"--local-step-gpu: {role} GPU ({gpu}) has no {missing} in ddpbench's datasheet tables, "
                              "so the step cannot be carried to the cluster; give the step measured on the "
                              "cluster's GPU without --local-step-gpu")  # fmt: skip
        figures[role] = (peak, gbps)
    (peak_from, gbps_from), (peak_to, gbps_to) = figures.values()
    peak_ratio, memory_ratio = peak_from / peak_to, gbps_from / gbps_to
    optimizer = optimizer_ms or 0.0
    scaled = None if optimizer_ms is None else float(f"{optimizer_ms * memory_ratio:.4g}")
    return StepBounds(compute_ms=(step_ms - optimizer) * peak_ratio + optimizer * memory_ratio,
                      memory_ms=step_ms * memory_ratio, peak_ratio=peak_ratio, memory_ratio=memory_ratio,
                      peak_dtype=peak_dtype(dtype, tf32=tf32), optimizer_ms=scaled,
                      target_peak_dtype=peak_dtype(target_dtype or dtype, tf32=tf32))  # fmt: skip

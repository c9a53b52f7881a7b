"""The dense peak per GPU and dtype (NVIDIA's datasheets) and model FLOPs utilisation."""

from __future__ import annotations

import pytest

from harness.config.precision import (
    GPUS,
    PEAK_TFLOPS,
    gpu_name,
    gpu_step_dtype,
    memory_gbps,
    mfu,
    peak_dtype,
    peak_tflops,
    step_bounds,
    trains_in,
)
from harness.protocols import ConfigError

# torch.cuda.get_device_name() as these GPUs report it.
NAMES_AND_BF16_PEAKS = [
    ("NVIDIA H200", 989.5),
    ("NVIDIA H200 NVL", 835.5),
    ("NVIDIA H100 80GB HBM3", 989.5),
    ("NVIDIA H100 PCIe", 756.5),
    ("NVIDIA H100 NVL", 835.5),
    ("NVIDIA A100-SXM4-80GB", 312.0),
    ("NVIDIA A100-SXM4-40GB", 312.0),
    ("NVIDIA A100-PCIE-40GB", 312.0),
    ("NVIDIA A100 80GB PCIe", 312.0),
    ("NVIDIA L4", 121.0),
    ("NVIDIA L40S", 366.5),
    ("NVIDIA A10", 125.0),
]


@pytest.mark.parametrize(("name", "bf16"), NAMES_AND_BF16_PEAKS)
def test_each_known_gpu_has_its_dense_bf16_peak(name, bf16):
    assert peak_tflops(name, "bf16", tf32=False) == bf16


def test_fp32_uses_tf32s_peak_only_with_tf32():
    assert peak_tflops("NVIDIA H200", "fp32", tf32=False) == 67.0
    assert peak_tflops("NVIDIA H200", "fp32", tf32=True) == 494.5
    assert peak_tflops("NVIDIA A100-SXM4-80GB", "fp32", tf32=True) == 156.0
    assert peak_dtype("bf16", tf32=True) == "bf16"  # autocast's peak, whatever --tf32 says


def test_dense_peaks_are_half_the_sparse_datasheet_figures_and_ordered_by_precision():
    for _, peaks in PEAK_TFLOPS:
        rising = [peaks[dtype] for dtype in ("fp32", "tf32", "fp16") if dtype in peaks]
        assert rising == sorted(set(rising))  # each step down in precision is strictly faster
        assert peaks.get("bf16", peaks["fp16"]) == peaks["fp16"]  # one tensor-core rate for both, where bf16 exists
    assert peak_tflops("NVIDIA H100 80GB HBM3", "fp16", tf32=False) == 1979 / 2


def test_unknown_gpus_mig_slices_missing_dtypes_and_the_cpu_have_no_peak():
    assert peak_tflops(None, "fp32", tf32=False) is None  # the CPU: no gpu_name
    assert peak_tflops("NVIDIA GeForce RTX 4090", "bf16", tf32=False) is None
    assert peak_tflops("NVIDIA A10G", "bf16", tf32=False) is None  # not the A10
    assert peak_tflops("NVIDIA L40", "bf16", tf32=False) is None  # not the L40S, not the L4
    assert peak_tflops("NVIDIA H100 80GB HBM3 MIG 1g.10gb", "bf16", tf32=False) is None
    assert peak_tflops("Tesla V100-SXM2-16GB", "bf16", tf32=False) is None  # no bf16 tensor cores
    assert peak_tflops("Tesla V100-SXM2-16GB", "fp16", tf32=False) == 125.0


def test_mfu_is_achieved_over_the_peak_of_every_gpu():
    assert mfu(126.0, gpu_name="NVIDIA H200", dtype="bf16", tf32=False, gpus=1) == pytest.approx(126.0 / 989.5)
    assert mfu(252.0, gpu_name="NVIDIA H200", dtype="bf16", tf32=False, gpus=2) == pytest.approx(252.0 / 1979.0)
    assert mfu(41.0, gpu_name="NVIDIA H200", dtype="fp32", tf32=False, gpus=1) == pytest.approx(41.0 / 67.0)


def test_mfu_is_null_without_a_peak_or_an_achieved_figure():
    assert mfu(0.05, gpu_name=None, dtype="fp32", tf32=False, gpus=2) is None
    assert mfu(None, gpu_name="NVIDIA H200", dtype="bf16", tf32=False, gpus=1) is None
    assert mfu(10.0, gpu_name="NVIDIA GeForce RTX 4090", dtype="bf16", tf32=False, gpus=1) is None


def test_every_local_step_gpu_name_has_a_bandwidth_and_a_peak_and_a_bad_name_is_refused_with_them():
    for name, text in GPUS.items():
        assert memory_gbps(text) and peak_tflops(text, "fp32", tf32=False), name
    assert memory_gbps(GPUS["a100-sxm4-80gb"]) == 2039 and memory_gbps(GPUS["a100-40gb"]) == 1555
    assert memory_gbps(GPUS["h200-nvl"]) == 4800 and peak_tflops(GPUS["h200-nvl"], "bf16", tf32=False) == 835.5
    with pytest.raises(ConfigError, match=r"--local-step-gpu 'a100' is not valid; choose one of h200-sxm, .*a100-40gb"):
        gpu_name("a100")


def test_a_step_on_another_gpu_is_bounded_by_the_bandwidth_and_the_peak_ratios():
    """310 ms on an A100 80GB, on a DGX H100: ×312/989.5 if compute-bound (bf16), ×2039/3350 if memory-bound."""
    h100 = "DGX H100: 8× H100 SXM5, NVLink 4 through NVSwitch (NVLS), 8× ConnectX-7 400 Gb/s"
    bounds = step_bounds(310, measured_on=gpu_name("a100-sxm4-80gb"), target=h100, dtype="bf16", tf32=False)
    assert bounds.compute_ms == pytest.approx(310 * 312 / 989.5) and bounds.memory_ms == pytest.approx(
        310 * 2039 / 3350
    )
    assert [end for end, _ in bounds.ends()] == ["compute-bound", "memory-bound"] and not bounds.same
    assert bounds.peak_dtype == "bf16" and bounds.optimizer_ms is None
    fp32 = step_bounds(310, measured_on=gpu_name("a100-sxm4-80gb"), target=h100, dtype="fp32", tf32=True)
    assert fp32.peak_dtype == "tf32" and fp32.compute_ms == pytest.approx(310 * 156 / 494.5)
    # an optimizer part given is memory-bound at both ends: the compute-bound step scales the rest alone
    split = step_bounds(310, measured_on=gpu_name("a100-sxm4-80gb"), target=h100, dtype="bf16", tf32=False,
                        optimizer_ms=20)  # fmt: skip
    assert split.compute_ms == pytest.approx(290 * 312 / 989.5 + 20 * 2039 / 3350)
    assert split.optimizer_ms == pytest.approx(20 * 2039 / 3350, rel=1e-3) and split.memory_ms == bounds.memory_ms
    # the other way, onto a slower GPU: the memory-bound end is the shorter step
    back = step_bounds(100, measured_on=gpu_name("h100-sxm"), target="DGX A100: 8× A100 SXM4 80GB", dtype="bf16",
                       tf32=False)  # fmt: skip
    assert back.ends() == [("memory-bound", pytest.approx(100 * 3350 / 2039)),
                           ("compute-bound", pytest.approx(100 * 989.5 / 312))]  # fmt: skip


def test_a_step_on_the_clusters_own_gpu_has_one_end_and_an_unknown_figure_is_refused():
    same = step_bounds(310, measured_on=gpu_name("a100-sxm4-80gb"), target="DGX A100: 8× A100 SXM4 80GB",
                       dtype="bf16", tf32=False)  # fmt: skip
    assert same.same and same.ends() == [("compute-bound", pytest.approx(310))]
    with pytest.raises(ConfigError, match=r"--local-step-gpu's GPU \(V100 SXM2\) has no dense bf16 peak"):
        step_bounds(310, measured_on=gpu_name("v100-sxm2"), target="DGX A100", dtype="bf16", tf32=False)
    with pytest.raises(ConfigError, match="the cluster's GPU"):
        step_bounds(310, measured_on=gpu_name("a100-40gb"), target="8× MI300X", dtype="bf16", tf32=False)


def test_a_cpu_runs_auto_fp32_is_not_the_dtype_a_gpu_step_was_trained_in():
    """A CPU run's fp32 from --dtype auto bounded a GPU step by fp32's peaks (A100 → H100 ×0.291) where the user's step
    was bf16's (×0.315): auto's GPU dtype is assumed (and said); a dtype the run asked for, or a GPU run's, is kept."""
    a100, v100 = gpu_name("a100-sxm4-80gb"), gpu_name("v100-sxm2")
    assert gpu_step_dtype("fp32", device="cpu", requested="auto", gpu=a100) == ("bf16", True)
    assert gpu_step_dtype("fp32", device="cpu", requested=None, gpu=a100) == ("bf16", True)  # a run from before
    # no bf16 on a V100: auto's fp32 there is the run's own, nothing assumed (the bounds' line read "fp32 assumed:
    # --dtype auto's on a GPU, not the CPU run's fp32")
    assert gpu_step_dtype("fp32", device="cpu", requested="auto", gpu=v100) == ("fp32", False)
    assert gpu_step_dtype("fp32", device="cpu", requested="fp32", gpu=a100) == ("fp32", False)
    assert gpu_step_dtype("fp32", device="cuda", requested="auto", gpu=a100) == ("fp32", False)


def test_a_gpu_without_bf16_trains_a_bf16_step_in_fp16_and_auto_in_fp32(monkeypatch, capsys):
    """A step measured on an A100 (in bf16: --dtype auto's there) was refused on dgx1-v100 ('the cluster's GPU has no
    dense bf16 peak'): a V100 has no bf16, so its autocast is fp16, with a grad scaler, and --dtype auto trains in
    fp32 there. The cluster's end is bounded in that dtype and said so; dgx-h100's stays bf16's."""
    from types import SimpleNamespace

    import pandas as pd

    from harness.commands.console.predict import gpu_ends, scaling
    from harness.perfmodel.clusters import cluster

    v100, h100, a100 = cluster.load("dgx1-v100"), cluster.load("dgx-h100"), gpu_name("a100-sxm4-80gb")
    assert trains_in("bf16", v100.description) == "fp16" and trains_in("fp32", v100.description) == "fp32"
    assert trains_in("bf16", h100.description) == "bf16" and trains_in("bf16", "8× MI300X") == "bf16"  # not known
    assert gpu_step_dtype("bf16", device="cpu", requested="bf16", gpu=v100.description) == ("fp16", False)
    assert gpu_step_dtype("bf16", device="cuda", requested="auto", gpu=h100.description) == ("bf16", False)
    args = SimpleNamespace(local_step_gpu="a100-sxm4-80gb", local_step_ms=300.0, local_optimizer_ms=None, run=None)
    cpu = pd.DataFrame({"device": ["cpu"]})
    v100_said = {"fp32": "bf16 → fp32 assumed: --dtype auto's on each GPU (dgx1-v100's has no bf16; in fp16, its "
                         "autocast with a grad scaler, ×2.5), not the CPU run's fp32",
                 "bf16": "dgx1-v100's GPU has no bf16: its autocast is fp16, with a grad scaler"}  # fmt: skip
    for dtype, there, peak in (("fp32", "fp32", 15.7), ("bf16", "fp16", 125.0)):  # a CPU run of auto; of bf16
        monkeypatch.setattr(scaling, "requested_dtype", lambda args, asked=dtype: "auto" if asked == "fp32" else asked)
        bounds = gpu_ends.local_step_bounds(args, v100, cpu, {"dtype": dtype})
        assert (bounds.peak_dtype, bounds.target_peak_dtype) == ("bf16", there)
        assert bounds.compute_ms == pytest.approx(300 * 312 / peak) and bounds.assumed == (dtype == "fp32")
        gpu_ends.say_step_bounds(args, v100, bounds, bounds.ends())
        said = capsys.readouterr().out
        assert f"(×{312 / peak:.3g}: dense bf16 312 → {there} {peak:g} TFLOP/s, {v100_said[dtype]}" in said, said
    assert step_bounds(300, measured_on=a100, target=v100.description, dtype="bf16", tf32=False,
                       target_dtype="fp16").compute_ms == pytest.approx(300 * 312 / 125)  # fmt: skip
    monkeypatch.setattr(scaling, "requested_dtype", lambda args: "auto")
    bounds = gpu_ends.local_step_bounds(args, h100, cpu, {"dtype": "fp32"})
    assert (bounds.peak_dtype, bounds.target_peak_dtype) == ("bf16", "bf16")
    gpu_ends.say_step_bounds(args, h100, bounds, bounds.ends())
    said = capsys.readouterr().out
    assert "dense bf16 312 → 989.5 TFLOP/s, bf16 assumed: --dtype auto's on each GPU, not" in said
    assert "no bf16" not in said and "fp16" not in said
    # measured on a V100 (auto's fp32 there, the run's), onto dgx-h100: auto's bf16 there, assumed and said
    from_v100 = gpu_ends.local_step_bounds(SimpleNamespace(**{**vars(args), "local_step_gpu": "v100-sxm2"}), h100, cpu,
                                          {"dtype": "fp32"})  # fmt: skip
    assert (from_v100.peak_dtype, from_v100.target_peak_dtype, from_v100.assumed) == ("fp32", "bf16", True)
    assert from_v100.compute_ms == pytest.approx(300 * 15.7 / 989.5)


def test_fp16_on_the_cpu_needs_the_torch_whose_cpu_autocasts_and_scales_in_float16(monkeypatch):
    """fp16 trains through a grad scaler; the CPU's float16 autocast and GradScaler('cpu') came with FP16_TORCH."""
    from harness.config import precision

    monkeypatch.setattr(precision, "torch_version", lambda: "2.4.1+cpu")
    assert precision.resolve_dtype("fp16", device="cuda", bf16_supported=False) == "fp16"
    with pytest.raises(ConfigError, match=r"^--dtype fp16 on the CPU needs torch >= 2\.5 .*this is torch 2\.4\.1\+cpu"):
        precision.resolve_dtype("fp16", device="cpu", bf16_supported=False)
    monkeypatch.setattr(precision, "torch_version", lambda: "2.14.1+cu130")
    assert precision.resolve_dtype("fp16", device="cpu", bf16_supported=False) == "fp16"

"""The dense peak per GPU and dtype (NVIDIA's datasheets) and model FLOPs utilisation."""

from __future__ import annotations

import pytest

from harness.config.precision import PEAK_TFLOPS, mfu, peak_dtype, peak_tflops

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

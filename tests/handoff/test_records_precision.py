"""Every row says what precision it ran in (`dtype` as resolved, `tf32`) and how close it came to
the GPUs' dense peak (`mfu`); null on the CPU."""

from __future__ import annotations

import pandas as pd
import pytest
from test_records import configuration as records_configuration

from harness.config.grid import Configuration
from harness.handoff import records
from harness.handoff.rank_result import RankResult

INFO = {"flops_per_sample": 2e12, "samples_per_batch": 8, "tokens_per_batch": None}


def configuration(**overrides) -> Configuration:
    """test_records' configuration, on a GPU in bf16."""
    return records_configuration(**{"dtype": "bf16", "device": "cuda", "backend": "nccl", **overrides})


def test_mfu_is_achieved_tflops_over_world_size_times_the_gpus_dense_peak():
    row = records.model_columns(INFO, samples_per_s=100.0, cfg=configuration(), gpu_name="NVIDIA H200")
    assert row["achieved_tflops"] == pytest.approx(200.0)  # 2e12 FLOP × 100 samples/s, in TFLOP/s
    assert row["mfu"] == pytest.approx(200.0 / (989.5 * 2))


def test_fp32_rows_are_judged_against_tf32s_peak_only_when_tf32_was_on():
    plain = records.model_columns(INFO, samples_per_s=10.0, cfg=configuration(dtype="fp32"), gpu_name="NVIDIA H200")
    tf32 = records.model_columns(
        INFO, samples_per_s=10.0, cfg=configuration(dtype="fp32", tf32=True), gpu_name="NVIDIA H200"
    )
    assert plain["mfu"] == pytest.approx(20.0 / (67.0 * 2))
    assert tf32["mfu"] == pytest.approx(20.0 / (494.5 * 2))


def test_mfu_is_null_on_the_cpu_and_on_an_unknown_gpu():
    cpu = configuration(dtype="fp32", device="cpu", backend="gloo")
    assert records.model_columns(INFO, samples_per_s=10.0, cfg=cpu, gpu_name=None)["mfu"] is None
    unknown = records.model_columns(INFO, samples_per_s=10.0, cfg=configuration(), gpu_name="NVIDIA GeForce GTX 1080")
    assert unknown["mfu"] is None and unknown["achieved_tflops"] == pytest.approx(20.0)


def test_the_row_records_tf32_and_the_resolved_dtype():
    result = RankResult("ok", steps=[{"step_ms": 10.0} for _ in range(4)])
    context = {"run_id": "r", "gpu_name": "NVIDIA H200"}
    for tf32 in (False, True):
        cfg = configuration(tf32=tf32)
        row = records.assemble(cfg, [result, result], run_context=context, written=pd.DataFrame(),
                               model_info=INFO)[0]  # fmt: skip
        assert row["tf32"] is tf32 and row["dtype"] == "bf16"
        assert row["mfu"] == pytest.approx(row["achieved_tflops"] / (989.5 * 2))


def test_ranks_sharing_a_gpu_are_judged_against_that_gpus_peak_not_one_per_rank():
    shared = configuration(world_size=2, backend="gloo")  # gpu_check's two ranks on one GPU
    assert records.gpus_in_use(shared, 1) == 1
    assert records.gpus_in_use(configuration(world_size=8, nnodes=2), 4) == 8  # 4 per node, one each
    assert records.gpus_in_use(configuration(world_size=2), None) == 2  # a plan written before gpu_count
    row = records.model_columns(INFO, samples_per_s=100.0, cfg=shared, gpu_name="NVIDIA H200", gpu_count=1)
    assert row["mfu"] == pytest.approx(200.0 / 989.5)

"""The run page's GPU section: what each configuration's measured steps did with the GPU (FLOP/s, MFU, NVML's
kernel-busy time, clock and power), said first in one sentence; absent on the CPU, which records none of it."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pandas as pd

import impls
from reports.pages.html import FigureList
from reports.pages.run import run_page

BASELINE, REFERENCE = impls.baseline_name(), impls.reference_name()


def config(impl: str, repeat: int, *, mfu: float, clock: float = 1980.0, world: int = 1) -> dict:
    return {"config_id": f"{impl}-r{repeat}", "status": "ok", "impl": impl, "impl_options": json.dumps({}),
            "workload": "gpt2", "size": "full", "world_size": world, "repeat": repeat, "step_ms_median": 50.0 / mfu,
            "achieved_tflops": 1000 * mfu, "mfu": mfu, "gpu_util_mean_pct": 90.0, "sm_clock_mean_mhz": clock,
            "power_mean_w": 400.0, "power_peak_w": 560.0}  # fmt: skip


def section(configs: list[dict]) -> str:
    return run_page.gpu_work_section(SimpleNamespace(configs=pd.DataFrame(configs)), ["gpt2"], FigureList())


def test_each_configuration_is_one_row_over_its_repeats_with_the_floors_mfu_said_first():
    html = section([config(BASELINE, 0, mfu=0.134), config(BASELINE, 1, mfu=0.136),
                    config(REFERENCE, 0, mfu=0.120), config(REFERENCE, 1, mfu=0.124)])  # fmt: skip
    assert "<h2 id=gpu>" in html and "kernel busy %" in html and "SM clock MHz" in html
    assert html.count(f"<td>{BASELINE} · w1</td>") == 1 and html.count(f"<td>{REFERENCE} · w1</td>") == 1
    assert "<td>13.5</td>" in html and "MFU %" in html  # the baseline's MFU, median of its two repeats, in %
    # the step as the answer pools it: the geometric mean of the repeats' medians (50/0.134 and 50/0.136 ms)
    assert f"<td>{(50 / 0.134 * 50 / 0.136) ** 0.5:.2f}</td>" in html
    assert f"With nothing communicated ({BASELINE} · w1) the model reaches 13.5% MFU" in html
    assert f"the least, {REFERENCE} · w1, 12.2% MFU." in html and "not comparable" not in html


def test_clocks_that_moved_between_configurations_are_said():
    html = section([config(BASELINE, 0, mfu=0.13), config(REFERENCE, 0, mfu=0.12, clock=1755.0)])
    assert "the SM clock ran at 1755–1980 MHz across configurations (power or heat)" in html


def test_a_cpu_run_has_no_gpu_section_and_no_link_to_one():
    unrecorded = dict.fromkeys(column for column, _, _ in run_page.GPU_WORK[1:])
    cpu = [{**config(BASELINE, 0, mfu=0.1), **unrecorded}]
    assert section(cpu) == ""
    assert not run_page._gpu_work_columns(pd.DataFrame(cpu))
    # a CPU run counts its FLOP rate too (0.012 TFLOP/s read "0.0 TFLOP/s ... from the GPU"): still no section
    counted = [{**config(BASELINE, 0, mfu=0.1), **unrecorded, "achieved_tflops": 0.012, "device": "cpu"}]
    assert section(counted) == "" and not run_page._gpu_work_columns(pd.DataFrame(counted))
    assert section([{**counted[0], "device": "cuda"}]) != ""


def test_options_and_world_sizes_are_rows_of_their_own_and_a_missing_column_is_left_out():
    rows = [config(REFERENCE, 0, mfu=0.12) | {"impl_options": json.dumps({"bucket_cap_mb": 1.0})},
            config(REFERENCE, 0, mfu=0.11, world=2), config(BASELINE, 0, mfu=0.13)]  # fmt: skip
    frame = pd.DataFrame(rows).drop(columns="power_peak_w")
    html = run_page.gpu_work_section(SimpleNamespace(configs=frame), ["gpt2"], FigureList())
    assert f"<td>{REFERENCE} bucket_cap_mb=1 · w1</td>" in html and f"<td>{REFERENCE} · w2</td>" in html
    assert "peak W" not in html and "power W" in html

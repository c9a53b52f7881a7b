"""benchmarks/gpu_check.py's usage (its overlap arithmetic: tests/test_trace_overlap.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import gpu_check


def test_bad_usage_exits_2_without_running_anything(capsys):
    assert gpu_check.main([]) == 2
    assert gpu_check.main(["--quick"]) == 2
    assert "usage: python benchmarks/gpu_check.py OUT_DIR [--quick] [--overlap]" in capsys.readouterr().err


def test_the_ddp_check_reads_pytorchs_published_points_and_holds_the_3_percent_and_the_order():
    import ddp_published

    truth = ddp_published.published()
    assert truth == {(8, 25.0): 104.0, (16, 25.0): 104.0, (8, 1.0): 107.0, (16, 1.0): 108.0}
    close = {key: ms * 1.02 for key, ms in truth.items()}
    assert ddp_published.compare(close)[1]
    assert not ddp_published.compare({key: ms * 0.96 for key, ms in truth.items()})[1]  # 4 % fast
    flat = {**close, (8, 1.0): close[(8, 25.0)] - 0.1}  # within 3 %, but 1 MiB no slower than 25 MiB
    text, ok = ddp_published.compare(flat)
    assert not ok and "1 MiB slower than 25 MiB: no" in text


def test_the_zygote_pair_line_gives_each_runs_wall_and_split_with_its_imports_and_fails_on_a_failed_run(tmp_path):
    from harness.results import layout

    phases = {
        "zygote-on": {"steps": 0.7, "start": 4.1, "launch": 3.2, "imports": 0.2, "parity": 1.8, "model info": 3.5},
        "zygote-off": {"steps": 0.7, "start": 4.0, "launch": 3.0, "imports": 6.1, "parity": 1.7, "model info": 3.4},
    }
    for run_id, split in phases.items():
        (tmp_path / run_id).mkdir()
        summary = {"wall_s": sum(split.values()) + 1, "training_step_s": split["steps"], "phases_s": split}
        (tmp_path / run_id / layout.SUMMARY_JSON).write_text(json.dumps(summary))
    line = gpu_check.zygote_line(tmp_path, {"zygote-on": 0, "zygote-off": 0}, gpu_check.Setup(quick=False))
    assert line.ok is None and line.verdict == "shown"
    assert line.value == (
        "zygote-on 14.5 s (0.7 s of steps; start 4.1, model info 3.5, launch 3.2, imports 0.2); "
        "zygote-off 19.9 s (0.7 s of steps; imports 6.1, start 4.0, model info 3.4, launch 3.0)"
    )
    failed = gpu_check.zygote_line(tmp_path, {"zygote-on": 0, "zygote-off": 1}, gpu_check.Setup(quick=False))
    assert failed.ok is False and failed.value.endswith("; zygote-off: exit 1")


def test_the_mapping_line_holds_only_where_cuda0_is_nvmls_gpu_and_every_visible_pair_is_read():
    import gpu_mapping

    pair = {"gpu_a": 0, "gpu_b": 1, "common_ancestor": "same board", "nvlink_p2p": True}
    seen = {"expected": "GPU-b", "found": "GPU-b", "visible": 2, "topology": [pair]}
    assert gpu_mapping.judge(seen) == (
        "cuda:0 read as GPU-b (NVML's last GPU: GPU-b); 1 topology pairs of 2 visible GPUs",
        True,
    )
    assert not gpu_mapping.judge({**seen, "found": "GPU-a"})[1]  # the sampler read another GPU than cuda:0
    physical = [pair, {**pair, "gpu_b": 2}, {**pair, "gpu_a": 1, "gpu_b": 2}]
    assert not gpu_mapping.judge({**seen, "topology": physical})[1]  # pairs of every GPU, not the visible
    assert not gpu_mapping.judge({**seen, "topology": [{**pair, "nvlink_p2p": None}]})[1]
    assert gpu_mapping.judge({"error": "ModuleNotFoundError: No module named 'pynvml'"}) == (
        "probe failed: ModuleNotFoundError: No module named 'pynvml'",
        False,
    )


def test_the_nvml_line_fails_on_a_query_refused_on_any_rank_not_rank_0s_alone(tmp_path, monkeypatch):
    """configs/ keeps rank 0's mem_note and the largest rank's peaks: a process list refused on rank 1 alone left
    that row's NVML fields filled and its note empty, and the line read ok."""
    import pandas as pd

    from harness.results import store

    (tmp_path / "r" / "configs").mkdir(parents=True)
    row = {"config_id": "c0", "status": "ok", "mem_peak_nvml_mb": 900.0, "mem_nvml_struct": "v2",
           "gpu_util_mean_pct": 80.0, "sm_clock_mean_mhz": 1900.0, "power_mean_w": 500.0,
           "mem_peak_reserved_mb": 800.0, "mem_note": None}  # fmt: skip
    refused = "NVML processes failed: NVMLError_NoPermission: Insufficient Permissions"
    ranks = pd.DataFrame([{"config_id": "c0", "rank": 0, "mem_note": None},
                          {"config_id": "c0", "rank": 1, "mem_note": refused}])  # fmt: skip
    monkeypatch.setattr(gpu_check, "configs", lambda results, run_id: pd.DataFrame([row]))
    monkeypatch.setattr(store, "read_ranks", lambda run: ranks)
    [line] = gpu_check.nvml_lines(tmp_path, gpu_check.Setup(quick=False))
    assert line.ok is False and line.value.startswith("r/c0: ") and f"rank 1: {refused}" in line.value
    monkeypatch.setattr(store, "read_ranks", lambda run: ranks.assign(mem_note=[None, "NVML unavailable: Not Found"]))
    [line] = gpu_check.nvml_lines(tmp_path, gpu_check.Setup(quick=False))
    assert line.ok is False and "rank 1: NVML unavailable: Not Found" in line.value
    monkeypatch.setattr(store, "read_ranks", lambda run: ranks.assign(mem_note=None))
    [line] = gpu_check.nvml_lines(tmp_path, gpu_check.Setup(quick=False))
    assert line.ok is True and line.value == "all 1 rows"

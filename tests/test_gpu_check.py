"""benchmarks/gpu_check.py's usage (its overlap arithmetic: tests/test_trace_overlap.py)."""

from __future__ import annotations

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

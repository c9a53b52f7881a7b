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

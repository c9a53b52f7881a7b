"""A model checked over several launches on this machine: each launch makes its own runs, the model's errors
are read from them, and every launch's rows are printed as they come (launches differ by 15-30 % here)."""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pandas as pd


def ddpbench(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "harness", *args], check=True, stdout=subprocess.DEVNULL)


def over_launches(doc: str, prefix: str, errors_of_launch: Callable[[Path, str, str], list[dict]]) -> pd.DataFrame:
    """Parse --launches, --workloads and --results (`doc`: the script's description), call
    `errors_of_launch(results, run_id, workloads)` once a launch (run ids `<prefix>-<k>`), print the rows so far
    after each, and return them all."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--launches", type=int, default=3)
    parser.add_argument("--workloads", default="mlp,gpt2")
    parser.add_argument("--results", type=Path, default=None, help="keep the runs here (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        results = args.results or Path(scratch)
        rows = []
        for k in range(args.launches):
            rows += errors_of_launch(results, f"{prefix}-{k}", args.workloads)
            print(pd.DataFrame(rows).round(3).to_string(index=False), flush=True)
    return pd.DataFrame(rows)

"""Regenerates the README's screenshots (docs/img/*.png): two tiny CPU runs, the site built from them,
and the top screen of each run page taken by headless Chromium.

    .venv/bin/python benchmarks/screenshots.py            # about a minute on 2 cores

- docs/img/run-page.png       a bucket-cap sweep of naive, stock and bucketed on mlp/small, 2 ranks
- docs/img/run-failure.png    the same strategies with a fault injected into stock (DDPBENCH_FAULT, as the tests do)
- docs/img/index.png          the index of both runs

Chromium: /usr/bin/chromium, or the path in $DDPBENCH_CHROMIUM.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "docs" / "img"
DDPBENCH = Path(sys.executable).parent / "ddpbench"
CHROMIUM = os.environ.get("DDPBENCH_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
COMMON = ["--gpus", "2", "--impls", "naive,stock,bucketed", "--workloads", "mlp", "--size", "small",
          "--steps", "20", "--no-parity"]  # fmt: skip


def bench(results: Path, run_id: str, *extra: str, fault: str | None = None) -> None:
    env = {**os.environ, **({"DDPBENCH_FAULT": fault} if fault else {})}
    command = [str(DDPBENCH), "bench", *COMMON, "--results", str(results), "--run-id", run_id, *extra]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1):  # 1: a configuration failed, which the failure screenshot wants
        sys.exit(f"screenshots: {' '.join(command)} exited {done.returncode}:\n{done.stderr[-2000:]}")


def screenshot(page: Path, image: Path, *, height: int) -> None:
    """The top `height` pixels of the page at a laptop's width, after its scripts ran."""
    subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--virtual-time-budget=8000",
         f"--window-size=1280,{height}", f"--screenshot={image}", page.as_uri()],
        check=True, capture_output=True,
    )  # fmt: skip
    print(f"screenshots: {image.relative_to(ROOT)}")


def main() -> None:
    if not Path(CHROMIUM).is_file():
        sys.exit(f"screenshots: no chromium at {CHROMIUM} (apt-get install chromium, or set DDPBENCH_CHROMIUM)")
    IMAGES.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        results, site = Path(scratch) / "results", Path(scratch) / "site"
        bench(results, "cpu-sweep", "--bucket-cap-mb", "1,25")
        bench(results, "with-a-failure", fault="raise:impl=stock,world=2,rank=1,step=2")
        subprocess.run([str(DDPBENCH), "report", "--results", str(results), "--out", str(site)], check=True,
                       capture_output=True)  # fmt: skip
        screenshot(site / "runs" / "cpu-sweep.html", IMAGES / "run-page.png", height=1100)
        screenshot(site / "runs" / "with-a-failure.html", IMAGES / "run-failure.png", height=1100)
        screenshot(site / "index.html", IMAGES / "index.png", height=420)


if __name__ == "__main__":
    main()

"""How long does `ddpbench report` take over a large results folder?

Writes a synthetic results folder of about 1,000,000 step rows through `harness.results.store` (so the
format is the real one: several runs, world sizes 1-8, a bucket sweep), then times
`reports.site.build_site` over it and prints the build time and the site's size.
Target: ≤ 10 s for 1 M rows.

    python benchmarks/report_build.py [--rows 1000000] [--runs 4] [--results DIR] [--out DIR]
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT / "tests" / "data"))  # the golden-data synthesiser, shared with the tests

from make_golden import Spec, synthetic_run  # noqa: E402

from harness.results import store  # noqa: E402
from reports import site  # noqa: E402

WORLD_SIZES = (1, 2, 4, 8)
STRATEGIES = (
    ("local", {}, 8.0),
    ("naive", {}, 14.0),
    ("flat", {}, 11.0),
    ("bucketed", {}, 10.0),
    ("stock", {"bucket_cap_mb": 1.0}, 11.5),
    ("stock", {"bucket_cap_mb": 5.0}, 10.0),
    ("stock", {"bucket_cap_mb": 25.0}, 9.5),
)
WARMUP = 5


def specs() -> list[Spec]:
    return [
        Spec(impl=impl, world_size=w, options=options, step_ms=ms * (1 + 0.1 * math.log2(w)))
        for w in WORLD_SIZES
        for impl, options, ms in STRATEGIES
    ]


def generate(results: Path, *, rows: int, runs: int) -> int:
    """`runs` runs whose steps tables add up to at least `rows` rows; returns the exact count."""
    rank_series = runs * sum(spec.world_size for spec in specs())
    steps = math.ceil(rows / rank_series) - WARMUP
    for index in range(runs):
        started = f"2026-02-{index + 1:02d}T00:00:00+00:00"
        synthetic_run(results, f"bench-{index}", specs(), steps=steps, warmup=WARMUP, started_at=started, seed=index)
    return rank_series * (steps + WARMUP)


def folder_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="step rows to generate (default 1,000,000)")
    parser.add_argument("--runs", type=int, default=4, help="runs to spread them over")
    parser.add_argument("--results", type=Path, help="reuse or keep the generated results here")
    parser.add_argument("--out", type=Path, help="write the site here (default: a temporary folder)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        results = args.results or Path(scratch) / "results"
        if store.list_runs(results):
            count = sum(len(store.read_steps(run)) for run in store.list_runs(results))
            print(f"reusing {results}: {count:,} step rows")
        else:
            began = time.perf_counter()
            count = generate(results, rows=args.rows, runs=args.runs)
            print(f"generated {count:,} step rows in {args.runs} runs in {time.perf_counter() - began:.1f} s")
        out = args.out or Path(scratch) / "site"
        for attempt in ("first build", "rebuild"):
            began, began_cpu = time.perf_counter(), time.process_time()
            built = site.build_site(results=results, out=out)
            elapsed, cpu = time.perf_counter() - began, time.process_time() - began_cpu
            # CPU time too: on a shared machine the wall clock also measures the neighbours.
            print(
                f"{attempt}: {elapsed:.2f} s wall, {cpu:.2f} s CPU for {len(built.run_pages)} run pages (target ≤ 10 s)"
            )
        pages = sorted(p.stat().st_size for p in built.run_pages.values())
        print(f"site size: {folder_size(out) / 2**20:.1f} MiB (largest run page {pages[-1] / 2**10:.0f} KiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

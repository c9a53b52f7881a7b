"""Time to a decided answer: `--repeats auto` against a fixed `--repeats 5`, on the same sweep.

    .venv/bin/python benchmarks/time_to_decide.py                  # bucketed, mlp/small, caps 1 and 25, 3 pairs
    .venv/bin/python benchmarks/time_to_decide.py --pairs 2 --sweep "--impls stock --workloads mlp --size small"

Each pair runs the sweep through the real command line twice, back to back, once `--repeats auto` and once
`--repeats N` (which first alternates pair by pair, so that the machine's drift favours neither), at world
sizes 1 and 2 (`--gpus 2`). Per run it reads back: the launches it made (one per repeat and world size),
the configurations, the wall time and the time in training steps (the run's summary.json), and every
verdict the run exists for, judged as the run judges it (`--repeats auto`: at its look confidence; a
fixed count: at 95 %). It prints a row per run and, per pair, whether the two runs say the same and how
many launches auto used against the fixed count.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.analysis.verdicts import decide
from harness.config.flags import AUTO
from harness.results import store

SWEEP = "--impls bucketed --workloads mlp --size small --bucket-cap-mb 1,25"


def run_sweep(sweep: list[str], repeats: str, *, results: Path, run_id: str) -> dict:
    """One `ddpbench bench` of the sweep; what it cost and what it decided."""
    command = [sys.executable, "-m", "harness", "bench", *sweep, "--gpus", "2", "--repeats", repeats,
               "--results", str(results), "--run-id", run_id]  # fmt: skip
    began = time.monotonic()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    wall = time.monotonic() - began
    run = results / run_id
    configs, summary = store.read_configs(run), json.loads((run / "summary.json").read_text())
    max_repeats = int(store.read_run_meta(run)["config"].get("max_repeats") or decide.DEFAULT_MAX_REPEATS)
    found = decide.verdicts(configs, store.read_steps(run), confidence=decide.confidence_for(repeats, max_repeats))
    return {
        "repeats": repeats,
        "launches": len(configs.groupby(["repeat", "world_size"])),
        "configurations": len(configs),
        "command_s": wall,
        "steps_s": summary["training_step_s"],
        "verdicts": {v.subject: (v.word if v.decided else "open") for v in found},
    }


def words(verdicts: dict[str, str]) -> str:
    return "; ".join(f"{subject}: {word}" for subject, word in sorted(verdicts.items()))


def same_answer(a: dict[str, str], b: dict[str, str]) -> bool:
    """Both decided alike: the same verdict word for every subject (the figures in brackets may differ)."""
    return a.keys() == b.keys() and all(a[s].split(" (")[0] == b[s].split(" (")[0] for s in a)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", default=SWEEP, help=f"bench flags of the sweep (default: {SWEEP!r})")
    parser.add_argument("--pairs", type=int, default=3, help="pairs of runs (default: 3)")
    parser.add_argument("--fixed", default="5", help="the fixed --repeats auto is measured against (default: 5)")
    parser.add_argument("--results", type=Path, help="results folder (default: a new temporary one)")
    args = parser.parse_args()
    results = args.results or Path(tempfile.mkdtemp(prefix="ddpbench-time-to-decide-"))
    sweep = shlex.split(args.sweep)
    print(f"time_to_decide: {args.sweep} --gpus 2, {args.pairs} pair(s) of --repeats auto and {args.fixed}; "
          f"results in {results}")  # fmt: skip
    print("| pair | --repeats | launches | configurations | command s | steps s | verdicts |")
    print("|---:|---|---:|---:|---:|---:|---|")
    fewer, agreed = 0, 0
    for pair in range(args.pairs):
        order = (AUTO, args.fixed) if pair % 2 == 0 else (args.fixed, AUTO)
        runs = {r: run_sweep(sweep, r, results=results, run_id=f"p{pair}-{r}") for r in order}
        for r in order:
            row = runs[r]
            print(f"| {pair + 1} | {r} | {row['launches']} | {row['configurations']} | {row['command_s']:.0f} | "
                  f"{row['steps_s']:.0f} | {words(row['verdicts'])} |")  # fmt: skip
        fewer += runs[AUTO]["launches"] < runs[args.fixed]["launches"]
        agreed += same_answer(runs[AUTO]["verdicts"], runs[args.fixed]["verdicts"])
    print(f"\nauto used fewer launches than --repeats {args.fixed} in {fewer} of {args.pairs} pair(s) and said the "
          f"same in {agreed} of {args.pairs}")  # fmt: skip


if __name__ == "__main__":
    main()

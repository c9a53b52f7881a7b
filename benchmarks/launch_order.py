"""Whether a configuration's place in its launch changes its step: the same configuration twice in one launch
(A A), and two in both orders (A B, B A), each launch through bench's own launcher and worker, interleaved over
several launches; per arrangement, each place's median step over the launches' and the later/first ratio's median
and spread.

    PYTHONPATH=. .venv/bin/python benchmarks/launch_order.py OUT_DIR --launches 5 --impls local,stock
    PYTHONPATH=. .venv/bin/python benchmarks/launch_order.py OUT_DIR --variants plain,no-freeze,no-trim

A variant changes one thing in every rank, to test one suspected cause at a time: `plain` (as bench runs),
`dynamic-heap` (glibc's thresholds left dynamic, as before `housekeeping.keep_freed_heap`), `no-freeze` (no
gc.freeze of what survives a collection), `no-trim` (no malloc_trim after a configuration), `gc-off` (no
collection while a configuration trains).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

VARIANT_ENV = "LAUNCH_ORDER_VARIANT"
VARIANTS = ("plain", "dynamic-heap", "no-freeze", "no-trim", "gc-off")


# ---- the rank side: bench's worker, with the variant's one change --------------------------------------------


def main(argv: list[str]) -> int:
    """A rank (torchrun's `-m benchmarks.launch_order PLAN`): the variant applied, then bench's worker."""
    from harness.rank import housekeeping, worker

    variant = os.environ.get(VARIANT_ENV, "plain")
    if variant == "dynamic-heap":
        worker.keep_freed_heap = lambda: None
    if variant == "no-freeze":
        housekeeping.freeze_survivors = lambda: None
        worker.freeze_survivors = lambda: None
    if variant == "no-trim":
        housekeeping.trim_heap = lambda: None
    if variant == "gc-off":
        gc.disable()  # release_memory's explicit collections still run between configurations
    _count_faults(json.loads(Path(argv[0]).read_text())["run_dir"])
    return worker.main(argv)


def _count_faults(run_dir: str) -> None:
    """Each measured step's minor page faults and process CPU time (what a loaded host does not stretch), into
    `<run>/faults-<rank>.jsonl`: one line a step, with its configuration's id."""
    from harness.rank import configuration

    trained = configuration.train_step
    path = Path(run_dir) / f"faults-{os.environ.get('RANK', '0')}.jsonl"

    def counted(*, timer, step: int = 0, **parts):
        before, cpu = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.process_time()
        skipped = trained(timer=timer, step=step, **parts)
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
        with path.open("a") as out:
            out.write(json.dumps({"id": id(parts["model"]), "step": step, "faults": faults,
                                  "cpu_ms": (time.process_time() - cpu) * 1e3}) + "\n")  # fmt: skip
        return skipped

    configuration.train_step = counted


# ---- the launcher side --------------------------------------------------------------------------------------


def launch(args: argparse.Namespace, arrangement: str, variant: str, run_id: str) -> list[dict]:
    """One launch running `arrangement` (letters: A the first of --impls, B the second), through bench's launcher;
    each configuration's place, strategy and median step."""
    from harness.config import grid
    from harness.config.bench import BenchConfig
    from harness.launch import bench_run, launcher
    from harness.results import store

    impls = tuple(args.impls.split(","))
    config = BenchConfig(gpus=args.ranks, impls=impls, workloads=(args.workload,), size=args.size, steps=args.steps,
                         warmup=args.warmup, repeats=1, parity=args.parity, results=args.out, run_id=run_id,
                         device="cpu", ladder=False, baseline=False)  # fmt: skip
    by_impl = {cfg.impl: cfg for cfg in grid.expand(config, device="cpu")}
    planned = [
        grid.again(by_impl[impls["AB".index(letter)]], index=k, repeat=0) for k, letter in enumerate(arrangement)
    ]
    plan = bench_run.create_run(config, planned, run_id=run_id, device="cpu", environment={})
    os.environ[VARIANT_ENV] = variant  # the ranks' environment is the launcher's
    launcher.run_groups(config, plan, on_written=lambda cfg: None)
    rows = store.read_configs(plan.run).set_index("config_id")
    counted = _counted(plan.run, warmup=planned[0].warmup)
    return [{"variant": variant, "arrangement": arrangement, "run": run_id, "place": k, "impl": cfg.impl,
             "status": rows.loc[cfg.config_id, "status"], "step_ms": rows.loc[cfg.config_id, "step_ms_median"],
             **(counted[k] if k < len(counted) else {})}
            for k, cfg in enumerate(planned)]  # fmt: skip


def _counted(run: Path, *, warmup: int) -> list[dict]:
    """Rank 0's measured steps, per place in the launch (its trained models in order, the parity replay's none on
    the CPU): the median minor faults and CPU ms a step."""
    path = run / "faults-0.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []
    models = list(dict.fromkeys(line["id"] for line in lines))
    places = [[line for line in lines if line["id"] == model and line["step"] >= warmup] for model in models]
    return [{"faults": statistics.median(x["faults"] for x in place), "cpu_ms": statistics.median(x["cpu_ms"] for x in
             place)} for place in places if place]  # fmt: skip


def summary(rows: list[dict]) -> list[str]:
    """Per variant and arrangement: each place's median step, and the later place over the first, launch by
    launch (median, min-max, how many launches read it slower)."""
    lines = []
    keys = dict.fromkeys((r["variant"], r["arrangement"]) for r in rows)
    for variant, arrangement in keys:
        mine = [r for r in rows if (r["variant"], r["arrangement"]) == (variant, arrangement) and r["status"] == "ok"]
        runs = dict.fromkeys(r["run"] for r in mine)
        steps = {run: {r["place"]: r["step_ms"] for r in mine if r["run"] == run} for run in runs}
        ratios = [s[1] / s[0] for s in steps.values() if 0 in s and 1 in s]
        cpu = {run: {r["place"]: r.get("cpu_ms") for r in mine if r["run"] == run} for run in runs}
        cpu_ratios = [c[1] / c[0] for c in cpu.values() if c.get(0) and c.get(1)]
        faults = [statistics.median(r["faults"] for r in mine if r["place"] == p and "faults" in r)
                  for p in range(len(arrangement)) if any(r["place"] == p and "faults" in r for r in mine)]  # fmt: skip
        medians = [statistics.median(s[p] for s in steps.values() if p in s) for p in range(len(arrangement))]
        if not ratios:
            continue
        lines.append(
            f"{variant:10} {arrangement:4} launches {len(ratios):2}  place medians "
            + " ".join(f"{m:7.1f}" for m in medians)
            + f" ms   2nd/1st median {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f};"
            f" slower in {sum(r > 1 for r in ratios)}/{len(ratios)})"
            + (
                f"; CPU 2nd/1st median {statistics.median(cpu_ratios):.3f} (min {min(cpu_ratios):.3f}, max "
                f"{max(cpu_ratios):.3f}); faults a step by place " + " ".join(f"{f:.0f}" for f in faults)
                if cpu_ratios
                else ""
            )
        )
    return lines


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="the runs' folder (a scratch folder)")
    parser.add_argument("--launches", type=int, default=5, help="launches of each arrangement and variant")
    parser.add_argument("--arrangements", default="AA,AB,BA", help="letters: A, B the first, second of --impls")
    parser.add_argument("--variants", default="plain", help=f"comma-separated, of {', '.join(VARIANTS)}")
    parser.add_argument("--impls", default="local,stock")
    parser.add_argument("--workload", default="mlp")
    parser.add_argument("--size", default="small")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--parity", action=argparse.BooleanOptionalAction, default=True)
    args = parser.parse_args(argv)
    if unknown := [v for v in args.variants.split(",") if v not in VARIANTS]:
        parser.error(f"unknown variant {unknown[0]!r}; choose from {', '.join(VARIANTS)}")
    return args


def run(argv: list[str]) -> None:
    from harness.launch import launcher

    args = parse(argv)
    launcher.WORKER = "benchmarks.launch_order"  # every rank runs `main` above: bench's worker, the variant applied
    rows: list[dict] = []
    variants, arrangements = args.variants.split(","), args.arrangements.split(",")
    stamp = os.getpid()
    for k in range(
        args.launches
    ):  # interleaved: every variant and arrangement once a round, the machine's drift shared
        for variant in variants:
            for arrangement in arrangements:
                rows += launch(args, arrangement, variant, f"order-{stamp}-{variant}-{arrangement}-{k}")
                done = rows[-len(arrangement) :]
                print(
                    f"round {k} {variant} {arrangement}: " + " ".join(f"{r['impl']} {r['step_ms']:.1f}" for r in done)
                )
        print("\n".join(summary(rows)), flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1].endswith(".json"):  # a rank, started as a fresh interpreter
        sys.exit(main(sys.argv[1:]))
    run(sys.argv[1:])

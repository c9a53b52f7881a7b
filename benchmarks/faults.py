"""How long does each fault take to be noticed and recorded?

For each fault, a run of three configurations on 2 CPU ranks (mlp/tiny, world size 2 only,
through the launcher's API) in which the second configuration meets the fault at step 3:

- kill:      SIGKILL to rank 1 from outside;
- stop:      rank 1 freezes itself (SIGSTOP): a hang, found by --timeout;
- raise:     an exception in rank 1;
- oom:       a real allocation of 1 PiB on rank 0's device;

and Ctrl-C (SIGINT) to a real `ddpbench bench`, timed from the signal to its exit. It prints,
per fault, the time from the fault to the failed row on disk, the row's `error_kind` and
`error`, and whether the third configuration still ran.

    python benchmarks/faults.py [--timeout 5]
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from harness.config.bench import BenchConfig
from harness.config.grid import expand
from harness.handoff.liveness import registered_ranks
from harness.handoff.progress import read_step_progress
from harness.launch import bench_run
from harness.launch import launcher as launch
from harness.results import layout, store

PROJECT = Path(__file__).resolve().parent.parent
IMPLS = ("naive", "stock", "flat")  # the fault meets stock
FIRED = re.compile(r"DDPBENCH_FAULT \w+ fired at ([0-9.]+)")


def plan_run(results: Path, name: str, timeout_s: float | None, steps: int):
    config = BenchConfig(gpus=2, impls=IMPLS, size="tiny", steps=steps, warmup=1, baseline=False, parity=False,
                         results=results, timeout_s=timeout_s)  # fmt: skip
    configurations = [c for c in expand(config, device="cpu") if c.world_size == 2]
    return config, bench_run.create_run(config, configurations, run_id=name, device="cpu", environment={})


def fault_time(run: Path) -> float:
    """When the injected fault fired (wall clock), from the launch's log."""
    for log in sorted((run / layout.LOGS).glob("*.log")):
        match = FIRED.search(log.read_text(errors="replace"))
        if match:
            return float(match.group(1))
    raise RuntimeError(f"no fault fired in {run}/logs")


def measure_injected(results: Path, kind: str, timeout_s: float) -> dict:
    rank = 0 if kind == "oom" else 1
    os.environ["DDPBENCH_FAULT"] = f"{kind}:impl=stock,world=2,rank={rank},step=3"
    config, plan = plan_run(results, kind, timeout_s, steps=20)
    recorded: dict[str, float] = {}
    try:
        launch.run_groups(config, plan, on_written=lambda cfg: recorded.setdefault(cfg.config_id, time.time()))
    finally:
        del os.environ["DDPBENCH_FAULT"]
    victim = plan.configurations[1].config_id
    return outcome(plan.run, victim, recorded[victim] - fault_time(plan.run))


def measure_kill(results: Path, timeout_s: float) -> dict:
    config, plan = plan_run(results, "kill", timeout_s, steps=200)
    victim = plan.configurations[1].config_id
    recorded: dict[str, float] = {}
    runner = threading.Thread(
        target=launch.run_groups,
        args=(config, plan),
        kwargs={"on_written": lambda cfg: recorded.setdefault(cfg.config_id, time.time())},
    )
    runner.start()
    while (read_step_progress(plan.run) or {}).get("config_id") != victim or read_step_progress(plan.run)["step"] < 3:
        time.sleep(0.01)
    os.kill(registered_ranks(plan.run)[1]["pid"], signal.SIGKILL)
    killed_at = time.time()
    runner.join()
    return outcome(plan.run, victim, recorded[victim] - killed_at)


def outcome(run: Path, victim: str, detect_s: float) -> dict:
    rows = store.read_configs(run).set_index("config_id")
    return {
        "detect_s": detect_s,
        "kind": rows.loc[victim, "error_kind"],
        "error": rows.loc[victim, "error"],
        "rest_ok": int((rows["status"] == "ok").sum()),
    }


def measure_sigint(results: Path) -> dict:
    command = [sys.executable, "-m", "harness", "bench", "--gpus", "2", "--impls", "naive", "--no-baseline",
               "--size", "tiny", "--steps", "5000", "--no-parity", "--results", str(results),
               "--run-id", "sigint"]  # fmt: skip
    process = subprocess.Popen(command, cwd=PROJECT, stdout=subprocess.PIPE, text=True, start_new_session=True)
    run = results / "sigint"
    while (read_step_progress(run) or {}).get("step", 0) < 3:
        time.sleep(0.01)
    os.killpg(process.pid, signal.SIGINT)
    signalled = time.time()
    out, _ = process.communicate()
    return {"detect_s": time.time() - signalled, "kind": f"exit {process.returncode}",
            "error": out.strip().splitlines()[-1], "rest_ok": len(store.written_config_ids(run))}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=5.0, help="--timeout for the hang (default: 5 s)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        results = Path(folder)
        measured = {"kill -9 rank 1": measure_kill(results, args.timeout)}
        for kind, label in (("stop", f"rank 1 frozen (--timeout {args.timeout:g})"), ("raise", "exception, rank 1"),
                            ("oom", "out of memory, rank 0")):  # fmt: skip
            measured[label] = measure_injected(results, kind, args.timeout)
        measured["Ctrl-C to ddpbench"] = measure_sigint(results)
    print(f"{'fault':<32} {'detected in':>11}  {'recorded as':<12} {'ok after':>8}  error")
    for label, m in measured.items():
        print(f"{label:<32} {m['detect_s']:>9.2f} s  {m['kind']:<12} {m['rest_ok']:>8}  {m['error'][:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

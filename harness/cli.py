"""`ddpbench`: the command line. Thin: it parses text into `harness.config` objects and calls
the launcher or the reporter. Bad input is one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import signal
import sys
import time
from pathlib import Path
from typing import NoReturn

from harness.config import DEVICES, SIZE_CHOICES, BenchConfig, ConfigError
from harness.protocols import SIZES

EXIT_BAD_INPUT = 2


class OneLineParser(argparse.ArgumentParser):
    """argparse prints the usage block before an error; we print the error alone, on one line."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see --help)\n")


def _int(flag: str):
    def parse(text: str) -> int:
        try:
            return int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} {text!r} is not a whole number") from None

    return parse


def _seconds(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--timeout {text!r} is not a number of seconds") from None


def _names(text: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in text.split(",") if name.strip())


def _option(text: str) -> tuple[str, tuple[str, ...]]:
    key, sep, values = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"--opt {text!r} is not key=value[,value…]")
    return key.strip(), _names(values)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="ddpbench", description="Benchmark data-parallel training strategies in PyTorch.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)

    commands.add_parser("list", help="strategies and workloads, one per line")
    commands.add_parser("env", help="the environment, as JSON")

    bench = commands.add_parser(
        "bench",
        help="run the grid and write results/<run_id>/",
        description="Run every strategy × workload × world size × option value, one torchrun launch "
        "per world size. Without GPUs, every rank is a CPU process with the gloo backend.",
    )
    bench.add_argument(
        "--gpus",
        type=_int("--gpus"),
        help="ranks per node; world sizes run as 1, 2, 4, … up to it "
        "(default: the GPUs visible, or 2 simulated on the CPU)",
    )
    bench.add_argument("--impls", type=_names, help="comma-separated strategies (default: all; see `ddpbench list`)")
    bench.add_argument("--workloads", type=_names, default=("mlp",), help="comma-separated workloads (default: mlp)")
    bench.add_argument("--bucket-cap-mb", type=_names, help="shorthand for --opt bucket_cap_mb=A,B,…")
    bench.add_argument(
        "--opt",
        type=_option,
        action="append",
        default=[],
        metavar="KEY=V[,V…]",
        help="a strategy option; several values sweep it (repeatable)",
    )
    bench.add_argument(
        "--size", default="auto", help=f"{'|'.join(SIZE_CHOICES)} (auto: small on the CPU, full on GPUs)"
    )
    bench.add_argument("--steps", type=_int("--steps"), default=20, help="measured steps (default: 20)")
    bench.add_argument("--warmup", type=_int("--warmup"), default=3, help="warm-up steps (default: 3)")
    bench.add_argument("--batch-size", type=_int("--batch-size"), help="samples per rank (default: the workload's)")
    bench.add_argument("--optimizer", default="sgd", help="sgd|adam (default: sgd)")
    bench.add_argument("--dtype", default="fp32", help="fp32|bf16|fp16: autocast dtype of the forward (default: fp32)")
    bench.add_argument("--device", default="auto", help=f"{'|'.join(DEVICES)} (default: auto)")
    bench.add_argument("--backend", default="auto", help="auto|nccl|gloo (default: NCCL on GPUs, gloo on the CPU)")
    bench.add_argument("--results", type=Path, default=Path("results"), help="results folder (default: results)")
    bench.add_argument("--run-id", default="", help="run folder name (default: timestamp plus random suffix)")
    bench.add_argument("--nnodes", type=_int("--nnodes"), default=1, help="nodes in the job (default: 1)")
    bench.add_argument("--node-rank", type=_int("--node-rank"), default=0, help="this node's rank (default: 0)")
    bench.add_argument("--rdzv-endpoint", help="HOST:PORT of torchrun's c10d rendezvous (several nodes)")
    bench.add_argument("--no-baseline", action="store_true", help="do not add the `local` no-communication baseline")
    bench.add_argument("--no-parity", action="store_true", help="skip the gradient-parity check")
    bench.add_argument("--profile", action="store_true", help="write a torch.profiler trace per rank and configuration")
    bench.add_argument(
        "--mem-period-ms", type=float, default=20.0, help="memory sampling period, 0 = off (default: 20)"
    )
    bench.add_argument("--repeats", type=_int("--repeats"), default=1,
                       help="run every configuration R times, interleaved (default: 1)")  # fmt: skip
    bench.add_argument("--resume", metavar="RUN_ID", help="finish an interrupted run: skip what it wrote, run the rest")
    bench.add_argument("--seed", type=_int("--seed"), default=0, help="base seed (default: 0)")
    bench.add_argument(
        "--timeout",
        type=_seconds,
        help="seconds a configuration may go without progress before it is declared hung and its launch "
        "ended (default: ten times its slowest step so far, at least 60)",
    )
    bench.add_argument("--fail-fast", action="store_true", help="stop at the first failed configuration (exit 1)")

    compare = commands.add_parser(
        "compare",
        help="did NEW get significantly slower than BASE? (exit 1 if so)",
        description="Match the configurations of two runs and judge each: slower/faster only when the ratio of "
        "medians is beyond --threshold AND Mann-Whitney U gives p < 0.002. Exit 1 when any is slower.",
    )
    compare.add_argument("base", help="run id of the baseline")
    compare.add_argument("new", help="run id to judge")
    compare.add_argument("--threshold", default="5%", help="smallest change that counts (default: 5%%)")
    compare.add_argument("--results", type=Path, default=Path("results"), help="results folder (default: results)")
    compare.add_argument(
        "--across-strategies",
        action="store_true",
        help="match configurations whatever their strategy (e.g. a naive run against a bucketed one)",
    )
    compare.add_argument("--out", type=Path, default=Path("reports/site"), help="site folder (default: reports/site)")

    report = commands.add_parser("report", help="build the HTML site from results/")
    report.add_argument("--results", type=Path, default=Path("results"), help="results folder (default: results)")
    report.add_argument("--out", type=Path, default=Path("reports/site"), help="site folder (default: reports/site)")
    return parser


def bench_config(args: argparse.Namespace, *, default_gpus: int, all_impls: list[str]) -> BenchConfig:
    options = list(args.opt)
    if args.bucket_cap_mb:
        options.append(("bucket_cap_mb", args.bucket_cap_mb))
    return BenchConfig(
        gpus=args.gpus if args.gpus is not None else default_gpus,
        impls=args.impls if args.impls is not None else tuple(all_impls),
        workloads=args.workloads,
        options=tuple(options),
        size=args.size,
        steps=args.steps,
        warmup=args.warmup,
        batch_size=args.batch_size,
        dtype=args.dtype,
        optimizer=args.optimizer,
        device=args.device,
        backend=args.backend,
        results=args.results,
        run_id=args.run_id,
        nnodes=args.nnodes,
        node_rank=args.node_rank,
        rdzv_endpoint=args.rdzv_endpoint,
        baseline=not args.no_baseline,
        parity=not args.no_parity,
        profile=args.profile,
        mem_period_ms=args.mem_period_ms,
        seed=args.seed,
        repeats=args.repeats,
        timeout_s=args.timeout,
        fail_fast=args.fail_fast,
        command=tuple(sys.argv),
    )


def cmd_list() -> int:
    import impls
    import workloads

    print("strategies:")
    for entry in impls.REGISTRY.entries():
        options = ", ".join(f"{o.name}={o.default}" for o in entry.options().values())
        print(f"  {entry.name:<14} {entry.description}" + (f"  [options: {options}]" if options else ""))
    print("workloads (parameters per size):")
    for entry in workloads.REGISTRY.entries():
        print(f"  {entry.name:<14} {entry.description}")
        print(f"  {'':<14} {_sizes_line(entry.name)}")
    return 0


def _sizes_line(name: str) -> str:
    import workloads
    from harness.modelinfo import parameter_count_on_meta

    parts = []
    for size in SIZES:
        workload = workloads.create(name, size=size)
        reason = workload.unavailable_reason(device="cpu")
        count = f"unavailable ({reason})" if reason else _human_count(parameter_count_on_meta(workload))
        parts.append(f"{size} {count}")
    return ", ".join(parts)


def _human_count(count: int) -> str:
    for unit, scale in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f}{unit}"
    return str(count)


def cmd_env() -> int:
    from harness import env

    print(json.dumps(env.capture(sys.argv), indent=2, default=str))
    return 0


def new_run(args: argparse.Namespace):
    """Validate everything, then create the run folder: (config, plan)."""
    import torch

    import impls
    from harness import config as cfgmod
    from harness import env, launch

    # Default: every visible GPU, or 2 simulated ranks on the CPU.
    uses_cuda = args.device in ("auto", "cuda") and torch.cuda.is_available()
    default_gpus = torch.cuda.device_count() if uses_cuda else 2
    config = bench_config(args, default_gpus=default_gpus, all_impls=impls.names())
    device = cfgmod.resolve_device(config.device, cuda_available=torch.cuda.is_available())
    configurations = cfgmod.expand(config, device=device)
    if device == "cuda":
        backend = cfgmod.resolve_backend(config.backend, device=device)
        cfgmod.check_gpu_count(gpus=config.gpus, available=torch.cuda.device_count(), backend=backend)
    run_id = config.run_id or cfgmod.new_run_id()
    if config.node_rank == 0:  # the other nodes join the folder node 0 makes
        cfgmod.check_results_folder(config.results, run_id)
    environment = env.capture(config.command)
    for _ in range(10):
        try:
            return config, launch.create_run(
                config, configurations, run_id=run_id, device=device, environment=environment
            )
        except ConfigError:
            if config.run_id:
                raise  # the user's own name is taken (another run made it since the check)
            run_id = cfgmod.new_run_id()  # a run started in the same second drew the same suffix
    raise ConfigError(f"no free run id in {config.results} after 10 tries; give --run-id")


def cmd_bench(args: argparse.Namespace) -> int:
    from harness import launch
    from harness.progress import Progress

    if args.resume:
        config, plan, done = launch.resume_run(args.results, args.resume)
        print(f"ddpbench: resuming run {plan.run_id}: {done} finished configuration(s) kept, "
              f"{len(plan.configurations)} to run", flush=True)  # fmt: skip
    else:
        (config, plan), done = new_run(args), 0
    _say_where(plan, config)
    began = time.monotonic()
    progress = Progress(plan.run, plan.configurations, done=done)
    try:
        with _sigterm_as_exception():
            launch.run_groups(config, plan, on_written=progress.written, on_tick=progress.tick)
    except (KeyboardInterrupt, Terminated) as stop:
        progress.close()
        return _stopped(plan, "SIGTERM" if isinstance(stop, Terminated) else "SIGINT", EXIT_SIGNAL[type(stop)])
    except launch.FailFast as failure:
        progress.close()
        print(f"ddpbench: --fail-fast: stopping at the first failure: {failure}", file=sys.stderr)
        return _stopped(plan, "--fail-fast", 1)
    except OSError as exc:  # the results cannot be written (a full disk): nothing more can be kept
        progress.close()
        print(f"ddpbench: error: cannot write results in {plan.run}/: {exc}", file=sys.stderr)
        return _stopped(plan, "a write error", 1)
    finally:
        progress.close()
    _recommend(plan.run)
    return _summarize(plan, time.monotonic() - began)


class Terminated(Exception):
    """SIGTERM, raised in the main thread like KeyboardInterrupt is for SIGINT."""


EXIT_SIGNAL = {KeyboardInterrupt: 130, Terminated: 143}  # 128 + the signal's number, as shells do


@contextlib.contextmanager
def _sigterm_as_exception():
    def raise_terminated(signum, frame):
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _stopped(plan, why: str, code: int) -> int:
    """One line: what was saved, and the command that finishes the run."""
    from harness import store

    saved = len(store.written_config_ids(plan.run))
    total = len(store.read_json(plan.run / "run.json")["configurations"])
    results = plan.run.parent
    print(
        f"ddpbench: stopped by {why}: {saved} of {total} configurations saved in {plan.run}/; "
        f"finish with: ddpbench bench --resume {plan.run_id} --results {results}",
        flush=True,
    )
    return code


def _recommend(run: Path) -> None:
    """After a sweep over bucket caps: the recommended cap per strategy and world size."""
    from harness import store, sweep

    frame = sweep.recommendations(store.read_configs(run), store.read_steps(run))
    if frame.empty:
        return
    store.write_recommendations(run, frame)
    print("ddpbench: recommended bucket caps (fastest; 'as good' = not significantly slower, Mann-Whitney p ≥ 0.002):")
    for _, row in frame.iterrows():
        print(f"  {sweep.describe(row)}")


def _say_where(plan, config: BenchConfig) -> None:
    worlds = sorted({c.world_size for c in plan.configurations})
    if plan.device == "cpu":
        print(
            f"ddpbench: no GPU in use: running on the CPU with the gloo backend, one process per simulated GPU "
            f"({plan.threads_per_rank} thread(s) each), world sizes {worlds}",
            flush=True,
        )
    else:
        backend = plan.configurations[0].backend.upper() if plan.configurations else "?"
        print(f"ddpbench: running on CUDA with {backend}, world sizes {worlds}", flush=True)
    print(f"ddpbench: run {plan.run_id}: {len(plan.configurations)} configurations -> {plan.run}/", flush=True)


def _summarize(plan, wall_s: float) -> int:
    from harness import stats, store

    configs = store.read_configs(plan.run)
    counts = configs["status"].value_counts().to_dict()
    summary = ", ".join(f"{counts.get(s, 0)} {s}" for s in ("ok", "failed", "skipped"))
    print(f"ddpbench: run {plan.run_id} finished in {wall_s:.0f} s: {summary}; results in {plan.run}/")
    steps = store.read_steps(plan.run)
    ran_now = {c.config_id for c in plan.configurations}  # a resumed run counts only what it ran
    step_s = stats.training_seconds(steps[steps["config_id"].isin(ran_now)])
    if step_s:
        # What the harness costs around the steps it measures: launches, builds, parity, writes.
        print(
            f"ddpbench: {step_s:.0f} s of that was training steps (warm-up included): {wall_s / step_s:.2f}× overhead"
        )
    store.write_json(
        plan.run / "summary.json",
        {"wall_s": wall_s, "training_step_s": step_s, "status_counts": counts, "configurations": len(configs)},
    )
    return 1 if counts.get("failed", 0) else 0


def cmd_compare(args: argparse.Namespace) -> int:
    from harness import compare
    from reports.compare import write_comparison_page

    threshold = compare.parse_threshold(args.threshold)
    frame, warnings = compare.compare(
        args.results, args.base, args.new, threshold=threshold, across_strategies=args.across_strategies
    )
    for warning in warnings:
        print(f"ddpbench: warning: {warning}", file=sys.stderr)
    for r in frame.itertuples():
        options = "".join(f" {k}={v}" for k, v in json.loads(r.impl_options or "{}").items())
        interval = f"95% CI {r.ratio_ci_low:.3f}-{r.ratio_ci_high:.3f}"
        print(f"w{r.world_size} {r.workload}/{r.size} {r.impl}{options}: {r.base_ms:.2f} -> {r.new_ms:.2f} ms, "
              f"ratio {r.ratio:.3f} ({interval}), p={r.p_value:.2g}: {r.verdict}")  # fmt: skip
    page = write_comparison_page(args.out, args.base, args.new, frame, warnings, threshold=threshold)
    slower = int((frame["verdict"] == "slower").sum()) if not frame.empty else 0
    print(f"compare: {len(frame)} configuration(s) matched, {slower} significantly slower; page: {page}")
    return 1 if slower else 0


def cmd_report(args: argparse.Namespace) -> int:
    from reports import site

    built = site.build_site(results=args.results, out=args.out)
    print(f"report: {built.index}")
    for run_id, page in built.run_pages.items():
        print(f"  run {run_id}: {page}")
    return 0


def main(argv: list[str] | None = None) -> int:
    # The library's warnings (a skipped results file, say) as one line each on stderr.
    logging.basicConfig(format="ddpbench: warning: %(message)s", level=logging.WARNING, stream=sys.stderr)
    args = build_parser().parse_args(argv)
    try:
        if args.command == "list":
            return cmd_list()
        if args.command == "env":
            return cmd_env()
        if args.command == "bench":
            return cmd_bench(args)
        if args.command == "compare":
            return cmd_compare(args)
        if args.command == "report":
            return cmd_report(args)
    except ConfigError as exc:
        print(f"ddpbench: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    raise AssertionError(f"unhandled command {args.command}")


if __name__ == "__main__":
    sys.exit(main())

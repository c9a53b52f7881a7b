"""`ddpbench`: the command line. Thin: it parses text into `harness.plan.config` objects and calls
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

from harness.plan.config import DEVICES, SIZE_CHOICES, BenchConfig, ConfigError
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
    bench.add_argument("--busbw", help="all-reduce bus bandwidth (e.g. 90GB/s) for the report's communication floor "
                       "(default: fitted from a `ddpbench collectives` run of this machine in --results)")  # fmt: skip
    bench.add_argument("--latency", help="all-reduce latency that goes with --busbw (e.g. 30us; default: 0)")

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

    add_collectives_parser(commands)
    add_predict_parser(commands)

    report = commands.add_parser("report", help="build the HTML site from results/")
    report.add_argument("--results", type=Path, default=Path("results"), help="results folder (default: results)")
    report.add_argument("--out", type=Path, default=Path("reports/site"), help="site folder (default: reports/site)")
    return parser


def add_collectives_parser(commands) -> None:
    from harness.rank.collectives import DEFAULT_ITERS, DEFAULT_SIZES, DEFAULT_WARMUP, OPS

    collectives = commands.add_parser(
        "collectives",
        help="nccl-tests-style bandwidth of each collective, per message size and world size",
        description="Measure each collective over doubling message sizes at world sizes 2, 4, … up to --gpus "
        "(warm-up, timed iterations, a correctness check), with algorithm and bus bandwidth "
        "(all_reduce × 2(n-1)/n, all_gather and reduce_scatter × (n-1)/n, broadcast × 1), and how much "
        "communication and compute slow each other down when they overlap. Writes results/<run_id>/collectives/; "
        "exits 1 if a result was wrong.",
    )
    collectives.add_argument(
        "--gpus", type=_int("--gpus"), help="ranks; world sizes 2, 4, … up to it (default: the GPUs visible, or 2)"
    )
    collectives.add_argument("--ops", default=",".join(OPS), help=f"comma-separated (default: {','.join(OPS)})")
    collectives.add_argument(
        "--sizes",
        help=f"MIN:MAX message bytes, doubling; KB/MB/GB are powers of 1024 "
        f"(default: {DEFAULT_SIZES['cuda']} on GPUs, {DEFAULT_SIZES['cpu']} on the CPU)",
    )
    collectives.add_argument(
        "--iters",
        type=_int("--iters"),
        help=f"timed iterations per size (default: {DEFAULT_ITERS['cuda']} on GPUs, {DEFAULT_ITERS['cpu']} on the CPU)",
    )
    collectives.add_argument(
        "--warmup",
        type=_int("--warmup"),
        help=f"warm-up iterations (default: {DEFAULT_WARMUP['cuda']} on GPUs, {DEFAULT_WARMUP['cpu']} on the CPU)",
    )
    collectives.add_argument("--device", default="auto", help=f"{'|'.join(DEVICES)} (default: auto)")
    collectives.add_argument(
        "--backend", default="auto", help="auto|nccl|gloo (default: NCCL on GPUs, gloo on the CPU)"
    )
    collectives.add_argument("--results", type=Path, default=Path("results"), help="results folder (default: results)")
    collectives.add_argument("--run-id", default="", help="run folder name (default: timestamp plus random suffix)")


def add_predict_parser(commands) -> None:
    predict = commands.add_parser(
        "predict",
        help="predicted step time and scaling efficiency per bucket cap, at world sizes you cannot run",
        description="Simulate DDP's bucketed all-reduce over a gradient-ready profile (when each gradient is "
        "ready in backward, at world size 1) and a network model t(S) = latency + S × 2(n-1)/n / busbw. "
        "With --results RUN: the profile and the network (fitted from a `ddpbench collectives` run on the same "
        "machine in the same results folder) measured there, and the error against the run's bucket sweeps. "
        "Without: the profile is measured now, in this process, on this machine, and --busbw is needed.",
    )
    predict.add_argument("--results", metavar="RUN", help="a bench run: its folder, or its id in --results-dir")
    predict.add_argument("--results-dir", type=Path, default=Path("results"), help="results folder (default: results)")
    predict.add_argument("--workload", help="workload to profile (default: gpt2, or the run's)")
    predict.add_argument("--size", help=f"{'|'.join(SIZE_CHOICES)} (default: auto: small on the CPU, full on GPUs; "
                         "or the run's)")  # fmt: skip
    predict.add_argument("--batch-size", type=_int("--batch-size"), help="samples per rank (default: the workload's)")
    predict.add_argument("--gpus", type=_int("--gpus"), help="world size to predict (default: 8, or the run's)")
    predict.add_argument("--busbw", help="all-reduce bus bandwidth, e.g. 90GB/s (default: fitted from collectives)")
    predict.add_argument("--latency", help="all-reduce latency α, e.g. 30us (default: fitted; 0 with --busbw alone)")
    predict.add_argument("--caps", help="bucket caps in MiB (default: 1,5,10,25,50,100, or the run's sweep)")
    predict.add_argument(
        "--profile-steps",
        type=_int("--profile-steps"),
        default=5,
        help="steps profiled when the profile is measured now, after 2 warm-up steps (default: 5)",
    )


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
        busbw=args.busbw,
        latency=args.latency,
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
    from harness.rank.modelinfo import parameter_count_on_meta

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
    from harness.rank import env

    print(json.dumps(env.capture(sys.argv), indent=2, default=str))
    return 0


def new_run(args: argparse.Namespace):
    """Validate everything, then create the run folder: (config, plan)."""
    import torch

    import impls
    from harness.launch import launcher as launch
    from harness.plan import config as cfgmod
    from harness.rank import env

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
    from harness.launch import launcher as launch
    from harness.rank.progress import Progress

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
    from harness.results import store

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
    from harness.analysis import sweep
    from harness.results import store

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
    from harness.analysis import stats
    from harness.results import store

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
    from harness.analysis import compare
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


DEFAULT_PREDICT_CAPS = "1,5,10,25,50,100"


def cmd_predict(args: argparse.Namespace) -> int:
    import pandas as pd
    import torch

    from harness.model import predict
    from harness.results import store

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    given = _given_network(args)
    caps = predict.parse_caps(args.caps) if args.caps else None
    for flag, value in (("--gpus", args.gpus), ("--profile-steps", args.profile_steps)):
        if value is not None and value < 1:
            raise ConfigError(f"{flag} {value} is not valid; give a whole number ≥ 1")
    if args.results:
        run = predict.resolve_run(args.results, args.results_dir)
        setup = _run_setup(run, args)
        network = given or predict.network_for_run(args.results_dir, run)
        if network is None:
            raise ConfigError(f"no `ddpbench collectives` run from this run's machine in {str(args.results_dir)!r}; "
                              "run one there, or give --busbw (and --latency)")  # fmt: skip
        profile, profile_source = predict.profile_for_run(run, setup, device=device)
        configs = store.read_configs(run)
        worlds = [args.gpus] if args.gpus else sorted({int(n) for n in configs["world_size"] if n > 1}) or [8]
        caps = caps or sorted({float(c) for c in configs["bucket_cap_mb"].dropna()}) or None
    else:
        setup = _fresh_setup(args, device)
        network = given or _this_machine_network(args.results_dir, device=device.type)
        if network is None:
            raise ConfigError("--busbw is needed (e.g. --busbw 90GB/s --latency 30us), or --results RUN, "
                              "or a `ddpbench collectives` run of this machine in --results-dir")  # fmt: skip
        print(f"ddpbench predict: profiling {setup['workload']}/{setup['size']} (batch {setup['batch_size']}) "
              f"here on {device.type} with {torch.get_num_threads()} thread(s)…", flush=True)  # fmt: skip
        rows = predict.measure_profile(setup, device=device, steps=args.profile_steps)
        profile = predict.profile_from_rows(pd.DataFrame(rows))
        profile_source, run, worlds = f"profile measured now on {device.type}", None, [args.gpus or 8]
    caps = caps or predict.parse_caps(DEFAULT_PREDICT_CAPS)
    _print_profile(setup, profile, profile_source)
    for world in worlds:
        _print_predictions(predict, profile, network, world=world, caps=caps)
    if run is not None:
        if given is None:  # the run's own network: its floor and model tables are (re)written for the report
            rows = predict.update_model_tables(args.results_dir, run, network)[0]
        else:  # a hypothetical network is printed against the run, never stored with it
            rows = predict.sweep_predictions(store.read_configs(run), store.read_gradprofiles(run), network)
        _print_validation(rows, store.read_recommendations(run))
    return 0


def _given_network(args: argparse.Namespace):
    from harness.model import predict

    if args.latency and not args.busbw:
        raise ConfigError("--latency needs --busbw too (or neither: both fitted from collectives)")
    if not args.busbw:
        return None
    latency = predict.parse_latency(args.latency) if args.latency else 0.0
    return predict.given_network(busbw_bytes_per_s=predict.parse_bandwidth(args.busbw), latency_s=latency)


def _this_machine_network(results: Path, *, device: str):
    import socket

    from harness.model import predict

    backend = "nccl" if device == "cuda" else "gloo"
    meta = {"environment": {"hostname": socket.gethostname()}, "device": device, "backend": backend}
    run = predict.matching_collectives(results, meta) if Path(results).is_dir() else None
    return predict.measured_network(run) if run is not None else None


def _run_setup(run: Path, args: argparse.Namespace) -> dict:
    from harness.model import predict

    setups = predict.run_setups(run)
    chosen = [s for s in setups if (not args.workload or s["workload"] == args.workload)
              and (not args.size or s["size"] == args.size)
              and (not args.batch_size or s["batch_size"] == args.batch_size)]  # fmt: skip
    if not chosen:
        have = ", ".join(f"{s['workload']}/{s['size']} batch {s['batch_size']}" for s in setups) or "nothing ok"
        raise ConfigError(
            f"run {run.name} has no measured setup matching --workload/--size/--batch-size (it has: {have})"
        )
    return chosen[0]


def _fresh_setup(args: argparse.Namespace, device) -> dict:
    import workloads

    name = args.workload or "gpt2"
    workload_entry = workloads.entry(name)  # raises ConfigError naming the valid workloads
    size = args.size or "auto"
    if size not in SIZE_CHOICES:
        raise ConfigError(f"--size {size!r} is not valid; choose one of {', '.join(SIZE_CHOICES)}")
    size = size if size != "auto" else ("full" if device.type == "cuda" else "small")
    batch = args.batch_size or workloads.create(workload_entry.name, size=size).default_batch_size()
    return {"workload": name, "size": size, "batch_size": batch, "dtype": "fp32", "optimizer": "sgd"}


def _print_profile(setup: dict, profile, source: str) -> None:
    print(f"ddpbench predict: {setup['workload']}/{setup['size']}, batch {setup['batch_size']} per rank; {source}: "
          f"forward {profile.forward_s * 1e3:.2f} ms, backward {profile.backward_s * 1e3:.2f} ms, optimizer "
          f"{profile.optimizer_s * 1e3:.2f} ms, {profile.grad_bytes / 2**20:.2f} MiB of gradients "
          f"in {len(profile.grads)} tensors")  # fmt: skip


def _print_predictions(predict, profile, network, *, world: int, caps: list[float]) -> None:
    link = predict.network_link(network, world)
    contention = network.contention.get(world, predict.NO_CONTENTION)
    print(f"w{world}: all-reduce α {link.alpha_s * 1e6:.1f} µs, busbw {link.busbw_bytes_per_s / 1e9:.3f} GB/s "
          f"({link.source}); contention: compute ×{contention.compute_slowdown:.2f}, "
          f"all-reduce ×{contention.comm_slowdown:.2f} while overlapped")  # fmt: skip
    frame = predict.predict_caps(profile, caps_mb=caps, link=link, world_size=world, contention=contention)
    print(f"  {'cap MiB':>8} {'buckets':>8} {'step ms':>9} {'exposed comm ms':>16} {'scaling eff.':>13}")
    for r in frame.itertuples():
        print(f"  {r.bucket_cap_mb:>8g} {r.buckets:>8} {r.step_ms:>9.2f} {r.exposed_comm_ms:>16.2f} "
              f"{r.scaling_efficiency:>13.3f}")  # fmt: skip
    best = frame.loc[frame["step_ms"].idxmin()]
    print(f"  predicted best cap at w{world}: {best['bucket_cap_mb']:g} MiB ({best['step_ms']:.2f} ms, "
          f"scaling efficiency {best['scaling_efficiency']:.3f})")  # fmt: skip


def _print_validation(rows: list[dict], recommendations) -> None:
    import pandas as pd

    from harness.analysis import stats
    from harness.model import predict

    if not rows:
        print("validation: this run has no stock bucket-cap sweep at world size ≥ 2 to check the model against")
        return
    frame = pd.DataFrame(rows)
    for (workload, size, world), group in frame.groupby(["workload", "size", "world_size"]):
        print(f"validation w{world} {workload}/{size}, measured in the run against predicted "
              f"(raw / calibrated / calibrated + contention):")  # fmt: skip
        for r in group.itertuples():
            variants = (r.predicted_raw_ms, r.predicted_ms, r.predicted_contention_ms)
            predicted = " / ".join("—" if pd.isna(v) else f"{v:.2f}" for v in variants)
            print(f"  cap {r.bucket_cap_mb:g} MiB: measured {r.measured_ms:.2f} ms, predicted {predicted} ms "
                  f"(compute ×{r.compute_scale:.2f}, DDP's own {r.reducer_ms:.1f} ms)")  # fmt: skip
        as_good = _as_good(recommendations, workload=workload, size=size, world=world)
        if as_good is not None:
            print(f"  measured caps not significantly slower than the best (Mann-Whitney p ≥ 0.002): "
                  f"{', '.join(f'{c:g}' for c in as_good)} MiB")  # fmt: skip
        for column, label in predict.VARIANTS:
            if group[column].notna().all() and len(group) > 1:
                error = stats.prediction_error(group["bucket_cap_mb"], group["measured_ms"], group[column])
                print(f"  {label}: MAPE {error['mape']:.1%}, best cap measured {error['best_measured_cap_mb']:g} "
                      f"vs predicted {error['best_predicted_cap_mb']:g} MiB "
                      f"({error['best_cap_grid_steps']} grid step(s) apart)")  # fmt: skip


def _as_good(recommendations, *, workload: str, size: str, world: int) -> list[float] | None:
    if recommendations.empty:
        return None
    rows = recommendations[(recommendations["impl"] == "stock") & (recommendations["workload"] == workload)
                           & (recommendations["size"] == size) & (recommendations["world_size"] == world)]  # fmt: skip
    return json.loads(rows["equivalent_caps_mb"].iloc[0]) if len(rows) == 1 else None


def cmd_report(args: argparse.Namespace) -> int:
    from harness.model import predict
    from reports import site

    # The floor and the model's curves depend on collectives runs that may have come after a bench run.
    predict.update_all_model_tables(args.results)
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
        if args.command == "collectives":
            from harness.commands import collectives

            return collectives.run(args, command=tuple(sys.argv))
        if args.command == "predict":
            return cmd_predict(args)
    except ConfigError as exc:
        print(f"ddpbench: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    raise AssertionError(f"unhandled command {args.command}")


if __name__ == "__main__":
    sys.exit(main())

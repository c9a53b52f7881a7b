"""`ddpbench`: the command line. Thin: the parser and the dispatch; each command's orchestration
is a module of `harness.commands`, and `harness.commands.console` does the printing. Bad input is
one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import math
import sys
import textwrap
from pathlib import Path
from typing import NoReturn

from harness.config.bench import DEVICES, SIZE_CHOICES, ConfigError

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


def _finite(flag: str, what: str):
    """A float flag: a finite number (float() takes 'inf' and 'nan', which no setting means)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{flag} {text!r} is not {what} (a finite number)")
        return value

    return parse


def _names(text: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in text.split(",") if name.strip())


def _option(text: str) -> tuple[str, tuple[str, ...]]:
    key, sep, values = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"--opt {text!r} is not key=value[,value…]")
    return key.strip(), _names(values)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="ddpbench", description="Benchmark data-parallel training strategies in PyTorch.")
    parser.add_argument("--version", action="version", version=f"ddpbench {version()}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)

    commands.add_parser("list", help="strategies and workloads, one per line")
    commands.add_parser("env", help="the environment, as JSON")
    add_bench_parser(commands)
    add_compare_parser(commands)
    add_collectives_parser(commands)
    add_predict_parser(commands)
    report = commands.add_parser("report", help="build the HTML site from results/")
    report.add_argument("--results", type=Path, default=Path("results"), help="results folder (default: results)")
    report.add_argument("--out", type=Path, default=Path("reports/site"), help="site folder (default: reports/site)")
    return parser


# The help is raw text (the examples keep their lines), so the description is wrapped here.
BENCH_DESCRIPTION = textwrap.fill(
    "Run every strategy × workload × world size × option value, one torchrun launch per world size. "
    "Without GPUs, every rank is a CPU process with the gloo backend."
)
BENCH_EXAMPLES = """examples:
  ddpbench bench                          # every strategy on mlp (CPU: 2 simulated GPUs)
  ddpbench bench --impls stock,bucketed --workloads gpt2 --size small --bucket-cap-mb 1,5,25,100
  ddpbench bench --gpus 8 --workloads resnet50,gpt2 --repeats 3 --profile
  ddpbench bench --resume RUN_ID          # finish a run stopped by Ctrl-C
  ddpbench report                         # then open reports/site/index.html

After `make setup` the command is .venv/bin/ddpbench (or `source .venv/bin/activate` first)."""


def add_bench_parser(commands) -> None:
    bench = commands.add_parser(
        "bench",
        help="run the grid and write results/<run_id>/",
        description=BENCH_DESCRIPTION,
        epilog=BENCH_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
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
    bench.add_argument("--dtype", default="auto", help="auto|fp32|bf16|fp16: autocast dtype of the forward "
                       "(default: auto, bf16 on GPUs that support it, fp32 elsewhere)")  # fmt: skip
    bench.add_argument("--tf32", action="store_true", help="TF32 tensor cores for fp32 matmuls and convolutions "
                       "(default: off, cuDNN's too)")  # fmt: skip
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
        "--bucket-timeline",
        action="store_true",
        help="time DDP's buckets too (stock, zero) through a communication hook, for their comm_ms, overlap and "
        "bucket timeline; it costs 3-6%% of a CPU step, so it is off by default (naive, flat and bucketed are "
        "always timed: it costs them nothing)",
    )
    bench.add_argument(
        "--mem-period-ms",
        type=_finite("--mem-period-ms", "a period in milliseconds"),
        default=20.0,
        help="memory sampling period, 0 = off (default: 20)",
    )
    bench.add_argument("--repeats", type=_int("--repeats"), default=1,
                       help="run every configuration R times, interleaved; each repeat is one piece of evidence "
                       "for compare and the recommended cap (default: 1; 5 for runs meant to be compared)")  # fmt: skip
    bench.add_argument("--resume", metavar="RUN_ID",
                       help="finish an interrupted run in --results: skip what it wrote, run the rest with the run's "
                       "own grid and settings (flags that would change them are refused; --timeout, --fail-fast, "
                       "--node-rank and --rdzv-endpoint apply: they only steer the running)")  # fmt: skip
    bench.add_argument("--retry-failed", action="store_true",
                       help="with --resume: run the configurations that failed again (each failed row is kept "
                       "in retried/<config_id>/ of the run folder)")  # fmt: skip
    bench.add_argument("--seed", type=_int("--seed"), default=0, help="base seed (default: 0)")
    bench.add_argument(
        "--timeout",
        type=_finite("--timeout", "a number of seconds"),
        help="seconds a configuration may go without progress before it is declared hung and its launch "
        "ended (default: ten times its slowest step so far, at least 60)",
    )
    bench.add_argument("--fail-fast", action="store_true", help="stop at the first failed configuration (exit 1)")
    bench.add_argument("--busbw", help="all-reduce bus bandwidth (e.g. 90GB/s) for the report's communication floor "
                       "(default: fitted from a `ddpbench collectives` run of this machine in --results)")  # fmt: skip
    bench.add_argument("--latency", help="all-reduce latency that goes with --busbw (e.g. 30us; default: 0)")


def add_compare_parser(commands) -> None:
    compare = commands.add_parser(
        "compare",
        help="did NEW get significantly slower than BASE? (exit 1 if so, 3 if the evidence cannot tell)",
        description="Match the configurations of two runs and judge each on its repeats (each repeat's median "
        "step is one piece of evidence): slower/faster only when the 95% interval of the ratio excludes 1 and "
        "the ratio is beyond --threshold. When the repeats cannot decide (fewer than 2 per run, or an interval "
        "wider than ±threshold) the verdict is 'too few repeats to tell (have N, need about M)'. Configurations "
        "that differ in threads_per_rank, backend, tf32 or first_bucket_cap_mb are different measurements: "
        "not judged, named in a warning.",
        epilog="exit codes: 0 every ok configuration of BASE matched and none slower; 1 some significantly "
        "slower, or failed in NEW where BASE measured it; 2 bad input; 3 none slower, but the evidence is short: "
        "too few repeats to tell, a setting differs, no ok result in NEW, or nothing matched at all; 4 compare "
        "itself could not finish. Runs meant to be compared: bench --repeats 5 "
        "(decides 5% when launches agree within about 2.5%). See docs/statistics.md.",
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


def add_collectives_parser(commands) -> None:
    from harness.config.collectives import BATCHES, DEFAULT_ITERS, DEFAULT_SIZES, DEFAULT_WARMUP, OPS

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
        help=f"timed iterations per batch, {BATCHES} batches per size, each queued back to back and synchronised "
        f"once, as nccl-tests does (default: {DEFAULT_ITERS['cuda']} on GPUs, {DEFAULT_ITERS['cpu']} on the CPU)",
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
        "With --run RUN: the profile and the network (fitted from a `ddpbench collectives` run on the same "
        "machine in the same results folder) measured there, and the error against the run's bucket sweeps. "
        "Without: the profile is measured now, in this process, on this machine, and --busbw is needed "
        "(or a collectives run of this machine in --results).",
    )
    predict.add_argument("--run", metavar="RUN", help="a bench run: its id in --results, or its folder")
    predict.add_argument(
        "--results",
        metavar="DIR",
        help="results folder (default: results); a run given here is taken as --run RUN (deprecated spelling)",
    )
    predict.add_argument("--results-dir", type=Path, help=argparse.SUPPRESS)  # deprecated: --results DIR
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


COMMANDS = {  # command -> (module in harness.commands, its function): imported only when chosen
    "list": ("info", "run_list"),
    "env": ("info", "run_env"),
    "bench": ("bench", "run"),
    "compare": ("compare", "run"),
    "report": ("report", "run"),
    "collectives": ("collectives", "run"),
    "predict": ("predict", "run"),
}


def given_bench_flags(argv: list[str]) -> dict[str, str]:
    """The `bench` flags typed on the command line, {dest: flag}, whatever their value (a flag typed with
    its default value is given too): the parser again, with every default suppressed."""
    probe = OneLineParser(prog="ddpbench")
    add_bench_parser(probe.add_subparsers(dest="command", parser_class=OneLineParser))
    bench = probe._subparsers._group_actions[0].choices["bench"]
    flags = {}
    for action in bench._actions:
        action.default = argparse.SUPPRESS
        if action.option_strings:
            flags[action.dest] = action.option_strings[-1]
    typed = vars(probe.parse_args(argv))
    return {dest: flag for dest, flag in flags.items() if dest in typed}


def version() -> str:
    """The installed package's version; "unknown" when running from a tree that was never installed."""
    from importlib import metadata

    try:
        return metadata.version("ddpbench")
    except metadata.PackageNotFoundError:
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    # The library's warnings (a skipped results file, say) as one line each on stderr.
    logging.basicConfig(format="ddpbench: warning: %(message)s", level=logging.WARNING, stream=sys.stderr)
    args = build_parser().parse_args(argv)
    if args.command == "bench":  # --resume refuses the flags that would change the stored run
        args.given_flags = given_bench_flags(sys.argv[1:] if argv is None else argv)
    module_name, function = COMMANDS[args.command]
    module = importlib.import_module(f"harness.commands.{module_name}")
    try:
        return getattr(module, function)(args, command=tuple(sys.argv))
    except ConfigError as exc:
        from harness.commands import console

        console.error(str(exc))
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())

"""`ddpbench`: the command line. Thin: the parser and the dispatch; each command's orchestration
is a module of `harness.commands`, and `harness.commands.console` does the printing. Bad input is
one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import textwrap
import time
from pathlib import Path

from harness.commands import arguments
from harness.commands.arguments import EXIT_BAD_INPUT, EXIT_SIGNAL, OneLineParser, add_flags, names, refuse_empty, whole
from harness.config.bench import DEVICES, BenchConfig, ConfigError
from harness.config.flags import STEERS, flag_name, flags_of, key_values
from harness.handoff.costs import process_started_at
from harness.results.invocation import NAME

EXIT_SIGINT = EXIT_SIGNAL["SIGINT"]


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="ddpbench", description="Benchmark data-parallel training strategies in PyTorch.")
    parser.add_argument("--version", action="version", version=f"ddpbench {version()}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)

    listing = commands.add_parser("list", help="strategies, workloads and cluster profiles, one per line")
    listing.add_argument("names", nargs="*", metavar="NAME",
                         help="say one in full: a strategy, a workload or spec (hf:llama, FILE.py:NAME), a cluster "
                              "profile or .toml file")  # fmt: skip
    listing.add_argument("--wopt", action="append", metavar="KEY=VALUE",
                         type=arguments.argument_type(key_values("--wopt", deferred=True)),
                         help="a workload NAME's option, as bench takes it (repeat it for several: --wopt "
                              "hidden_size=2048 --wopt num_hidden_layers=24): its parameters counted so")  # fmt: skip
    commands.add_parser("env", help="the environment, as JSON")
    add_bench_parser(commands)
    add_compare_parser(commands)
    add_collectives_parser(commands)
    arguments.add_predict_parser(commands)
    report = commands.add_parser(
        "report",
        help="build the HTML site from results/",
        description="Build the site from every run in --results: an index of runs, a page per run that opens with "
        "its answer (strategies ranked against stock, the bucket cap to use, parity, noise), its what-if page on "
        "--cluster, each collectives run's page, and the model tables `predict` checks against (refreshed). "
        "Plotly is shipped once in the site: it opens offline. `make publish` packs it as a tarball.",
    )
    report.add_argument("--results", type=Path, default=Path("results"), help="results folder (default: results)")
    report.add_argument("--out", type=Path, default=Path("reports/site"), help="site folder (default: reports/site)")
    report.add_argument("--cluster", metavar="NAME|FILE",
                        help="the cluster of each run's what-if page: its profile from one node to 1,024 GPUs there, "
                        "a CPU run's communication and memory alone (predict --local-step-ms MS --page for the rest) "
                        "(default: the one the site in --out was last built with, kept in its index.json, else "
                        "dgx-h100; '' for none; `ddpbench list` shows the built-ins)")  # fmt: skip
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
  ddpbench bench --gpus 8 --bucket-cap-mb 1,25 --dry-run   # what it would run, nothing run
  ddpbench bench --resume RUN_ID          # finish a run stopped by Ctrl-C
  ddpbench report                         # then open reports/site/index.html

After `make setup` the command is .venv/bin/ddpbench (or `source .venv/bin/activate` first)."""


def add_bench_parser(commands) -> None:
    """`bench`: a flag per BenchConfig field (harness.config.flags), and the flags that are no setting of
    the run: a shorthand for a sweep, and what finishes a stored run."""
    bench = commands.add_parser(
        "bench",
        help="run the grid and write results/<run_id>/",
        description=BENCH_DESCRIPTION,
        epilog=f"{BENCH_EXAMPLES}\n\n{arguments.BENCH_EXIT_CODES}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_flags(bench, BenchConfig)
    bench.add_argument("--bucket-cap-mb", type=names, help="shorthand for --opt bucket_cap_mb=A,B,…")
    steering = ", ".join(flag_name(name, spec) for name, spec in flags_of(BenchConfig).items()
                         if spec.on_resume == STEERS)  # fmt: skip
    bench.add_argument("--resume", metavar="RUN_ID",
                       help="finish an interrupted run in --results (or give its folder): skip what it wrote, run "
                       "the rest with the run's "
                       f"own grid and settings (flags that would change them are refused; {steering} apply: they "
                       "only steer the running; without --budget, the run's own applies again)")  # fmt: skip
    bench.add_argument("--dry-run", action="store_true", help="check every flag, print the configurations the run "
                       "would launch and how long it would take here (from the steps the results folder measured of "
                       "them before; those never measured, their FLOPs' time at this machine's best times what earlier "
                       "steps like theirs here ran over it, or at least that; plus the fixed cost a launch and a "
                       "configuration as its earlier runs of as many GPUs here measured it; under --repeats auto, from "
                       "two repeats to --max-repeats or --budget, and as an earlier auto run here took them), run "
                       "nothing")  # fmt: skip
    bench.add_argument("--retry-failed", action="store_true",
                       help="with --resume: run the configurations that failed again (each failed row is kept "
                       "in retried/<config_id>/ of the run folder)")  # fmt: skip


def add_compare_parser(commands) -> None:
    compare = commands.add_parser(
        "compare",
        help="did NEW get significantly slower than BASE, or need more memory? (exit 1 if so, 3 if the evidence "
        "cannot tell)",
        description=arguments.COMPARE_DESCRIPTION,
        epilog=arguments.COMPARE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    compare.add_argument("base", help="the baseline: a run id in --results, or a run folder")
    compare.add_argument("new", help="the run to judge: a run id in --results, or a run folder")
    compare.add_argument(
        "--threshold", default="5%", help="smallest change that counts, above 0%% and below 100%% (default: 5%%)"
    )
    compare.add_argument("--memory-threshold", default="5%", help="smallest growth of a rank's peak memory (GPU: "
                         "peak reserved; CPU: peak RSS) that counts, as --threshold (default: 5%%)")  # fmt: skip
    compare.add_argument("--results", type=Path, default=Path("results"), help="results folder (default: results)")
    compare.add_argument(
        "--across-strategies",
        action="store_true",
        help="match configurations whatever their strategy (e.g. a naive run against a bucketed one); their memory "
        "is said where it differs, but fails the gate only between one strategy's runs (options or not)",
    )
    compare.add_argument("--out", type=Path, default=Path("reports/site"), help="site folder (default: reports/site)")


def add_collectives_parser(commands) -> None:
    from harness.config.collectives import BATCHES, DEFAULT_ITERS, DEFAULT_SIZES, DEFAULT_WARMUP, OPS

    collectives = commands.add_parser(
        "collectives",
        help="nccl-tests-style bandwidth of each collective, per message size and world size",
        description=arguments.COLLECTIVES_DESCRIPTION,
        epilog=arguments.COLLECTIVES_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    collectives.add_argument(
        "--gpus", type=whole("--gpus"), help="ranks; world sizes 2, 4, … up to it (default: the GPUs visible, or 2)"
    )
    collectives.add_argument("--ops", default=",".join(OPS), help=f"comma-separated (default: {','.join(OPS)})")
    collectives.add_argument(
        "--sizes",
        help=f"MIN:MAX message bytes, doubling; KB/MB/GB are powers of 1024 "
        f"(default: {DEFAULT_SIZES['cuda']} on GPUs, {DEFAULT_SIZES['cpu']} on the CPU)",
    )
    collectives.add_argument(
        "--iters",
        type=whole("--iters"),
        help=f"timed iterations per batch, {BATCHES} batches per size, each queued back to back and synchronised "
        f"once, as nccl-tests does (default: {DEFAULT_ITERS['cuda']} on GPUs, {DEFAULT_ITERS['cpu']} on the CPU)",
    )
    collectives.add_argument(
        "--warmup",
        type=whole("--warmup"),
        help=f"warm-up iterations (default: {DEFAULT_WARMUP['cuda']} on GPUs, {DEFAULT_WARMUP['cpu']} on the CPU)",
    )
    collectives.add_argument("--device", default="auto", help=f"{'|'.join(DEVICES)} (default: auto)")
    collectives.add_argument(
        "--backend", default="auto", help="auto|nccl|gloo (default: NCCL on GPUs, gloo on the CPU)"
    )
    collectives.add_argument("--results", type=Path, default=Path("results"), help="results folder (default: results)")
    collectives.add_argument("--run-id", default="", help="run folder name (default: timestamp plus random suffix)")
    add_flags(collectives, BenchConfig, only=arguments.NODE_FLAGS)  # the network between nodes, as bench joins them


COMMANDS = {  # command -> (module in harness.commands, its function): imported only when chosen
    "list": ("info", "run_list"),
    "env": ("info", "run_env"),
    "bench": ("bench", "run"),
    "compare": ("compare", "run"),
    "report": ("report", "run"),
    "collectives": ("collectives", "run"),
    "predict": ("predict.command", "run"),
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


def refuse_unknown(parser: argparse.ArgumentParser, command: str, unknown: list[str]) -> None:
    """'--bucket-cap 1' names the nearest flag; any other stray argument is named with the command's flags."""
    import difflib

    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    flags = sorted({o for a in commands.choices[command]._actions for o in a.option_strings if o.startswith("--")})
    typed = unknown[0].split("=")[0]
    near = difflib.get_close_matches(typed, flags, n=1, cutoff=0.75) if typed.startswith("--") else []
    hint = f"did you mean {near[0]}?" if near else f"{command}'s flags are {', '.join(flags)}"
    options = [flag for flag in ("--wopt", "--train-wopt", "--opt") if flag in flags]  # one KEY=VALUE a flag
    if options and all("=" in word and not word.startswith("-") for word in unknown):  # '--wopt a=1 b=2'
        others = f" (or {', '.join(options[1:])})" if len(options) > 1 else ""
        hint = f"each KEY=VALUE takes a flag of its own: {' '.join(f'{options[0]} {word}' for word in unknown)}{others}"
    parser.exit(
        EXIT_BAD_INPUT,
        f"ddpbench: error: unrecognized argument{'s' * (len(unknown) != 1)} {' '.join(unknown)}; {hint}\n",
    )


def refuse_unfindable(parser: argparse.ArgumentParser, specs) -> None:
    """A workload module found nowhere (`tv:vit`) is refused before the command's imports (torch's: 20 s on a busy
    CPU), in the words the command itself would say it with."""
    from workloads._zoo import unfindable

    for spec in specs:
        if why := unfindable(spec):
            parser.exit(EXIT_BAD_INPUT, f"ddpbench: error: {why}\n")


def refuse_bad_caps(parser: argparse.ArgumentParser, caps) -> None:
    """A bucket cap that is no number > 0 is refused before the command's imports (the strategies', and torch with
    them: 10-16 s on a busy CPU), in the words the strategies' own option says it with."""
    from harness.config.units import check_cap

    for text in caps:
        try:
            check_cap(text, typed=f"--bucket-cap-mb {text!r}")
        except ValueError as exc:
            parser.exit(EXIT_BAD_INPUT, f"ddpbench: error: {exc}\n")


def start_ranks_early(args: argparse.Namespace) -> None:
    """`bench` on the CPU (a new run, not --resume or --dry-run): the ranks' imports (the run's zygote, 3-11 s here)
    begin now, before this process imports the command's own modules (pandas, the launcher: 1.5-3 s here), which
    would otherwise come first; bench's own call (`_planned`) then finds the zygote running."""
    from harness.config.bench import likely_cpu

    if args.command == "bench" and not args.resume and not args.dry_run and likely_cpu(args.device):
        from harness.launch.torchrun import start_worker_early

        start_worker_early(local_ranks=args.gpus or 2)


def main(argv: list[str] | None = None) -> int:
    # The library's warnings (a skipped results file, say) as one line each on stderr.
    logging.basicConfig(format="ddpbench: warning: %(message)s", level=logging.WARNING, stream=sys.stderr)
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        refuse_unknown(parser, args.command, unknown)
    given = sys.argv[1:] if argv is None else argv
    refuse_empty(parser, given)
    if args.command == "bench":  # --resume refuses the flags that would change the stored run
        args.given_flags = given_bench_flags(given)
        refuse_bad_caps(parser, args.bucket_cap_mb or ())
    if args.command in ("bench", "list"):
        refuse_unfindable(parser, getattr(args, "workloads", None) or getattr(args, "names", None) or ())
    # the command line a run records: called with flags (a test, a script), those flags, not the caller's own argv
    command = tuple(sys.argv) if argv is None else (NAME, *argv)
    # When this process is the command (its flags from the command line), its time starts with the process: the
    # interpreter and the imports above are the user's wait too. Called with flags (a test, a script), at the call.
    args.started_at = (process_started_at() if argv is None else None) or time.time()
    start_ranks_early(args)
    module_name, function = COMMANDS[args.command]
    module = importlib.import_module(f"harness.commands.{module_name}")
    try:
        return getattr(module, function)(args, command=command)
    except ConfigError as exc:
        from harness.commands import console

        console.error(str(exc))
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:  # bench and collectives say what they kept; the rest write whole files or nothing
        from harness.commands import console

        console.say_err(f"ddpbench {args.command}: stopped by SIGINT")
        return EXIT_SIGINT


if __name__ == "__main__":
    sys.exit(main())

"""How a flag becomes an argparse argument: one-line errors, the config's text parsers as argparse types,
and a config's flagged fields (harness.config.flags) as arguments. The command tree is harness.cli's.
"""

from __future__ import annotations

import argparse
import dataclasses
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from harness.config import flags
from harness.config.bench import OPTIMIZER_CHOICES, SIZE_CHOICES, ConfigError
from harness.config.flags import flag_name, help_text

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_SIGNAL = {"SIGINT": 130, "SIGTERM": 143}  # 128 + the signal's number, as shells do

BENCH_EXIT_CODES = f"""exit codes:
  {EXIT_OK}    every configuration ran: ok, or skipped on this device (a parity failure is an ok row's, said
       on the console and the pages, and leaves the code 0)
  {EXIT_FAILED}    a configuration failed (kept; --resume RUN_ID --retry-failed runs it again), --fail-fast or a
       write error stopped the run, or an unexpected error (Python's traceback)
  {EXIT_BAD_INPUT}    bad input: one line naming the bad value and the valid ones; nothing written
  {EXIT_SIGNAL["SIGINT"]}  stopped by SIGINT (Ctrl-C): what finished is kept; --resume RUN_ID runs the rest
  {EXIT_SIGNAL["SIGTERM"]}  stopped by SIGTERM, likewise"""
"""`bench --help`'s last words, and docs/usage.md's (tests/face/test_exit_codes.py holds them to the constants)."""


class OneLineParser(argparse.ArgumentParser):
    """argparse prints the usage block before an error; we print the error alone, on one line."""

    def error(self, message: str) -> NoReturn:
        flag, _, problem = message.removeprefix("argument ").partition(": ")
        if problem.startswith(flag.split("/")[-1] + " ") and flag.startswith("--"):  # our own words (ConfigError)
            self.exit(EXIT_BAD_INPUT, f"ddpbench: error: {problem}\n")  # as every other bad value reads
        if problem == "expected one argument" and flag.startswith("--"):  # '--budget -10s' reads -10s as a flag
            message += f" (a value that starts with '-' is given as {flag.split('/')[-1]}=VALUE)"
        self.exit(EXIT_BAD_INPUT, f"ddpbench: error: {message} (see {self.prog} --help)\n")  # as every error reads


def argument_type(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """A harness.config.flags parser as argparse takes it: its ConfigError is argparse's one-line error."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


def whole(flag: str) -> Callable[[str], int]:
    return argument_type(flags.whole(flag))


def finite(flag: str, what: str) -> Callable[[str], float]:
    return argument_type(flags.finite(flag, what))


def value_or_each(one: Callable[[str], Any]) -> Callable[[str], Any]:
    """`one`'s value, or NAME=VALUE,… (each cluster's) kept as text: predict.each_cluster reads it."""
    return lambda text: text if "=" in text else one(text)


names = argument_type(flags.names)


NODE_FLAGS = ("nnodes", "node_rank", "rdzv_endpoint")
"""`bench`'s flags that make a job of several nodes: `collectives` takes them as they are."""


def add_flags(parser: argparse.ArgumentParser, config: type, *, only: tuple[str, ...] | None = None) -> None:
    """One argument per flagged field of `config` (harness.config.flags), its dest the field's name; `only`:
    just these fields'."""
    for field in dataclasses.fields(config):
        spec = field.metadata.get("flag")
        if spec is None or (only is not None and field.name not in only):
            continue
        kwargs: dict[str, Any] = {"dest": field.name, "help": help_text(field, spec)}
        if field.type in (bool, "bool") and not spec.parse:
            kwargs["action"] = "store_false" if spec.negative else "store_true"
        else:
            shown = flag_name(field.name, spec).lstrip("-").upper().replace("-", "_")
            kwargs.update(type=spec.parse and argument_type(spec.parse), metavar=spec.metavar or shown)
            if spec.repeatable:
                kwargs.update(action="append", default=[])
            else:
                kwargs["default"] = None if field.default is dataclasses.MISSING else field.default
        parser.add_argument(flag_name(field.name, spec), **kwargs)


EMPTY_MEANS_NONE = {"--cluster"}  # report --cluster '': no what-if page


def refuse_empty(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """A flag given '' ('--results ""', '--resume=') is a slip, never a choice: an empty path is the working
    folder, an empty run id started a new run, an empty list read as the default."""
    for index, token in enumerate(argv):
        flag, equals, value = token.partition("=")
        if not flag.startswith("--") or flag in EMPTY_MEANS_NONE:
            continue
        if (equals and not value) or (not equals and index + 1 < len(argv) and argv[index + 1] == ""):
            parser.exit(EXIT_BAD_INPUT, f"ddpbench: error: {flag} is empty; give it a value (see --help), or leave "
                                        "it out for its default\n")  # fmt: skip


PREDICT_DESCRIPTION = textwrap.fill(
    "Simulate DDP's bucketed all-reduce over a gradient-ready profile (when each gradient is ready in backward, "
    "at world size 1) and a network t(S) = latency + S × 2(n-1)/n / busbw, then ZeRO-1's and FSDP2's steps on "
    "it. With --run RUN: the run's profile and network (its machine's `ddpbench collectives` run in the same "
    "results folder), the model state per rank, what fits a GPU run's GPU, and the error against the run's "
    "sweeps. Without: the profile is measured now, here, and --busbw (or this machine's collectives run) gives "
    "the network. With --cluster NAME|FILE (or --nccl-tests LOG): NCCL's algorithms on a cluster profile, per "
    "node count (docs/clusters.md); with --cluster A,B, their bookings compared first, then each."
)
PREDICT_EXAMPLES = """examples:
  ddpbench predict --run RUN --gpus 64                      # the run's profile on its machine's network
  ddpbench predict --run RUN --cluster dgx-h100 --nodes 1,2,8,64 --out steps.csv
  ddpbench predict --run RUN --cluster dgx-h100 --local-step-ms 120 --page h100.html   # your GPU's step
  ddpbench predict --run RUN --cluster dgx-h100 --local-step-ms 310 --local-step-gpu a100-sxm4-80gb  # another's
  ddpbench predict --run RUN --cluster dgx-a100,dgx-h100 --local-step-ms 420 --local-step-gpu a100-sxm4-80gb  # compared
  ddpbench predict --run RUN --cluster dgx-a100,dgx-h100 --local-step-ms dgx-a100=420,dgx-h100=250 --train-samples 6.4M
  ddpbench predict --run RUN --cluster dgx-h100 --gpus 8,32 --local-step-ms 120 --train-samples 6.4M --gpu-hour-price 4
  ddpbench predict --cluster dgx-h200 --nodes 1,2,4 --sizes 1KiB:16GiB                 # NCCL's collectives
  ddpbench predict --nccl-tests node1.txt two-nodes.json --save-profile ours.toml      # fitted to your logs
  ddpbench predict --workload gpt2 --size small --busbw 90GB/s --latency 30us          # profiled here
  ddpbench predict --run RUN --cluster dgx-a100,dgx-h100 --local-step-ms 420 --local-step-gpu a100-sxm4-80gb \\
    --json answer.json   # the answer for a script: docs/output.md

exit codes:
  0    predicted, the answer decided or open alike (--json's `decided` says which; the console's last line too)
  1    an unexpected error (Python's traceback)
  2    bad input: one line naming the bad value and the valid ones; nothing written"""

COMPARE_DESCRIPTION = textwrap.fill(
    "Match the configurations of two runs and judge each on its repeats (each repeat's median step is one piece of "
    "evidence): slower/faster only when the interval of the ratio lies beyond 1 ± --threshold, or is narrower "
    "than ±threshold, excludes 1 and has the ratio beyond it; each interval at 1 − 5%/N for N configurations judged "
    "(Bonferroni), so that identical code fails the gate at most 5% of the time however many it shares. When the "
    "repeats cannot decide (fewer than 2 per run, "
    "or an interval wider than ±threshold) the verdict is 'too few repeats to tell (have N, need about M)'. "
    "Configurations that differ in threads_per_rank, backend, tf32, first_bucket_cap_mb or whether DDP's buckets "
    "were timed (--bucket-timeline) are different measurements: not judged, named in a warning. Stock as shipped "
    "is matched with stock bucket_cap_mb=25, its stand-in, where the other run has only that (the row names both); a "
    "strategy each run measured at one option setting is paired with itself ('stock -> stock "
    "gradient_as_bucket_view=True': one DDP option's change, its memory gated too)."
)
COMPARE_EPILOG = (
    textwrap.fill(
        "exit codes: 0 every ok configuration of BASE matched and none slower; 1 some significantly slower, or with "
        "its peak memory per rank significantly beyond --memory-threshold (GPU: peak reserved; CPU: peak RSS), or "
        "failed in NEW where BASE measured it; 2 bad input (two runs of different models, or a BASE configuration "
        "none of whose steps can be read, too); 3 none slower, but "
        "the evidence is short: too few repeats to tell, a setting differs, no ok result in NEW, or nothing matched "
        "at all; 4 compare itself could "
        "not finish. Runs meant to be compared: bench --repeats 5 or more (five decide 5% for one configuration when "
        "launches agree within about 2.5%; a gate of many asks more of each, and 'need about M' says how many). "
        "--repeats auto decides a run's own verdicts, and runs a world size with none to decide (one rank) twice. "
        "See docs/statistics.md."
    )
    + """

examples:
  ddpbench compare RUN_A RUN_B                            # before and after a change: anything slower?
  ddpbench compare RUN_A RUN_A_OPT                        # RUN_A_OPT: bench ... --opt gradient_as_bucket_view=True
  ddpbench compare RUN_A RUN_B --threshold 2%             # a smaller change counts (needs more repeats)
  ddpbench compare NAIVE_RUN BUCKETED_RUN --across-strategies   # one strategy against another
  ddpbench compare results/RUN_A ../other/results/RUN_B   # runs as folders, from anywhere"""
)

COLLECTIVES_DESCRIPTION = textwrap.fill(
    "Measure each collective over doubling message sizes at world sizes 2, 4, … up to --gpus (warm-up, timed "
    "iterations, a correctness check), with algorithm and bus bandwidth (all_reduce × 2(n-1)/n, all_gather and "
    "reduce_scatter × (n-1)/n, broadcast × 1), and how much communication and compute slow each other down when "
    "they overlap. Across nodes (--nnodes, the same command on every node with its own --node-rank) --gpus is "
    "each node's ranks and every world size spans the nodes: the network between them. "
    "Writes results/<run_id>/collectives/; exits 1 if a result was wrong."
)
COLLECTIVES_EXAMPLES = """examples:
  ddpbench collectives                                    # every collective, this machine's GPUs (CPU: 2 ranks)
  ddpbench collectives --gpus 8 --ops all_reduce --sizes 1MB:1GB
  ddpbench collectives --gpus 8 --nnodes 2 --node-rank 0 --rdzv-endpoint node0:29500 --run-id net2  # node1: 1
  ddpbench predict --run RUN --gpus 64                    # then: a bench run priced on this network"""


def add_predict_parser(commands) -> None:
    from harness.commands import predict as predict_cluster  # its defaults only: no module of predict imported

    predict = commands.add_parser(
        "predict",
        help="predicted step time and scaling efficiency per bucket cap, at world sizes you cannot run",
        description=PREDICT_DESCRIPTION,
        epilog=PREDICT_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
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
                         "or the run's); with --workload and --cluster on the CPU, full profiles the small size and "
                         "counts the full size's gradients on the meta device (each step's floor)")  # fmt: skip
    predict.add_argument(
        "--optimizer",
        choices=OPTIMIZER_CHOICES,
        metavar="OPTIMIZER",
        help=f"{'|'.join(OPTIMIZER_CHOICES)}: the optimizer a profile measured now steps (default: "
        "sgd), or with --run the run's setup of it (Adam's state is what ZeRO-1 and FSDP2 shard)",
    )
    predict.add_argument("--batch-size", type=value_or_each(whole("--batch-size")), metavar="N|NAME=N,…",
                         help="samples per rank (default: the workload's; "
                         "with --run, its setup at it; with --cluster and --local-step-ms, a batch the run did not "
                         "measure: memory is counted there on the meta device); with several --cluster, NAME=N,… "
                         "gives each its own (every one named; unlike batches need each one's --local-step-ms at "
                         "it): dgx-h100=2,dgx-h200=4")  # fmt: skip
    predict.add_argument("--train-wopt", action="append", type=argument_type(flags.key_values("--train-wopt")),
                         metavar="KEY=VALUE",
                         help="with --cluster and --run (or --workload): the model you will train is the run's "
                         "workload (--workload's) at its full size (a file of yours: as written) with the run's --wopt "
                         "options (--workload: its defaults) and this one instead "
                         "(repeat it for several: --train-wopt d_model=4096 --train-wopt n_heads=32): its memory, and "
                         "each step's floor, are counted on the meta device from it: a model of your own benched "
                         "smaller with --wopt, or a zoo model benched at a shorter sequence (--train-wopt "
                         "seq_len=2048: the activations grow with it) (docs/your-model.md); the steps and own "
                         "costs stay the benched model's (--workload's: the size profiled here)")  # fmt: skip
    predict.add_argument("--gpus", type=_gpu_counts, metavar="N,…",
                         help="world size to predict (default: 8, or the run's); several with --run (2,3,4); "
                         "with --cluster and --run (or --workload), GPU counts, several if you like, each within one "
                         "node (2,4 on 8-GPU nodes) or of whole nodes, priced beside --nodes' (without --nodes: these "
                         "alone)")  # fmt: skip
    predict.add_argument("--busbw", help="all-reduce bus bandwidth, e.g. 90GB/s (default: fitted from collectives)")
    predict.add_argument("--latency", help="all-reduce latency α, e.g. 30us (default: fitted; 0 with --busbw alone)")
    predict.add_argument("--caps", help="bucket caps in MiB (default: 1,5,10,25,50,100, and the run's sweep)")
    predict.add_argument("--cluster", metavar="NAME|FILE",
                         help="a cluster profile: a built-in (`ddpbench list` shows them) or your .toml; predicts "
                         "NCCL's collectives there, or with --run/--workload the step per cap at --nodes; several, "
                         "comma-separated (with --run/--workload; not with --page or --nccl-tests): each predicted, "
                         "then every booking (cluster × GPU count) compared: its pick, step, samples (tokens) a "
                         "second, GPU-hours, the fastest and the fewest GPU-hours (where the GPUs differ, under what "
                         "ratio of their hours' prices the fewest cost least)")  # fmt: skip
    predict.add_argument("--gpu-hour-price", metavar="PRICE|NAME=PRICE,…",
                         help="with several --cluster: what a GPU-hour costs you on each (every one compared, in "
                         "your own currency, e.g. dgx-a100=1.8,dgx-h100=3.2): the bookings gain their cost a million "
                         "samples (a billion tokens) in those price units, and the cheapest is ranked by it instead "
                         "of the fewest GPU-hours; with one --cluster and --train-samples, its price alone (3.9): "
                         "the whole run's cost at each GPU count")  # fmt: skip
    predict.add_argument("--train-samples", metavar="N",
                         help="with --cluster: the samples your whole training run takes (100,000 steps at a global "
                         "batch of 64: 6.4M; K, M, B a billion): each booking (a cluster × a GPU count) gains the "
                         "hours that run takes on it (its steps there × its step, a range where the step is one), "
                         "its GPU-hours (one cluster) and, with --gpu-hour-price, what it costs (price × GPUs × "
                         "hours), and the fastest is set against the cheapest: the hours it saves, what it costs "
                         "more; with --page, the what-if page's choice gains them too")  # fmt: skip
    predict.add_argument("--nccl-tests", nargs="+", metavar="FILE",
                         help="nccl-tests logs (text or -J JSON), or `ddpbench collectives` run folders, to fit the "
                         "profile's bandwidths to (the profile: --cluster, else the built-in of the logs' GPU); the "
                         "fit's error is printed")  # fmt: skip
    predict.add_argument("--save-profile", metavar="FILE.toml",
                         help="with --nccl-tests: save the fitted profile, with its fit's logs and error, so that "
                         "--cluster FILE.toml (predict, report) uses it without fitting again; refused where the "
                         "fit's mean busbw error passes 25 %% or the logs' GPU is not the profile's")  # fmt: skip
    predict.add_argument(
        "--save-anyway",
        action="store_true",
        help="with --save-profile: save a fit that is refused as poor or as another GPU's",
    )
    predict.add_argument("--detail", action="store_true",
                         help="with several --cluster and a step: each cluster's prediction too (its busbw checked, "
                         "memory per rank, the step per bucket cap, its answer), under the bookings compared; "
                         "without it, the bookings, the choice and the warnings")  # fmt: skip
    predict.add_argument("--nodes", metavar="N,…|NAME=N,…",
                         help=f"node counts to predict on every --cluster (default: 1,2,4 for collectives, "
                         f"{predict_cluster.DEFAULT_NODES} for steps); with several, NAME=N,… gives each its own "
                         "(every one named, as --gpu-hour-price; a name's counts run to the next NAME=): "
                         "dgx-a100=2,dgx-h200=1 compares those two bookings alone, "
                         "dgx-a100=1,2,dgx-h200=1 three")  # fmt: skip
    predict.add_argument("--collective", default="all_reduce",
                         help="all_reduce|all_gather|reduce_scatter (default: all_reduce)")  # fmt: skip
    predict.add_argument("--sizes", help="message sizes as nccl-tests counts them (all_gather's whole output, "
                         "reduce_scatter's whole input): MIN:MAX[:FACTOR] or a list; K/M/G are powers of 1024 "
                         f"(default: {predict_cluster.DEFAULT_SIZES}, each power of two)")  # fmt: skip
    predict.add_argument("--out", metavar="FILE", help="also write the rows: .csv or .parquet")
    predict.add_argument("--json", metavar="FILE.json",
                         help="with --cluster and --run (or --workload): also write the answer for a script: every "
                         "booking (cluster × GPU count) with what it books (strategies, bucket cap), its step, "
                         "peak, throughput, GPU-hours, run hours and cost, then the fastest, the fewest GPU-hours "
                         "and the cheapest, each decided or open (fields and units: docs/output.md)")  # fmt: skip
    predict.add_argument("--against", metavar="RUN",
                         help="with --run: a later run on the same machine (its id in --results, or its folder) whose "
                         "measured DDP steps at world size 2 or more the forecast is held against, per configuration: "
                         "the forecast, the measured step, the error")  # fmt: skip
    predict.add_argument("--page", metavar="FILE.html",
                         help="with --run and --cluster: also write the run's what-if page (its tables and choice at "
                         "--nodes' GPU counts, its figures one node to 1,024 GPUs), calibrated and scaled as "
                         "here, in one file to share, in a folder that exists (a CPU "
                         "run's without --local-step-ms: its communication and memory, no step); written beside a "
                         "site's index.html (reports/site/NAME.html), the index and the run's pages link "
                         "it, and it loads the site's plotly.js instead of its own")  # fmt: skip
    predict.add_argument("--local-step-ms", type=value_or_each(finite("--local-step-ms", "the one-GPU step in ms")),
                         metavar="MS|NAME=MS,…",
                         help="one GPU's step (without DDP) of the model you will train, at your batch per GPU, on the "
                         "cluster's GPU (measured on another: --local-step-gpu): "
                         "the profile's compute (measured on another device, e.g. this CPU) is scaled to it, split "
                         "as the profile splits it (memory is counted at the run's batch, or at --batch-size's); "
                         "without it, a CPU's profile names no step, strategy or cap, only collectives and memory. "
                         "A profile of a smaller size keeps its own parameters: predict warns, puts a floor under "
                         "each strategy's step from the full size's (counted on the meta device), and chooses by "
                         "those floors where they are higher (ZeRO-1 by its floor: its prediction shards the smaller "
                         "model). With several --cluster, NAME=MS,… gives each its own step (at its --batch-size), "
                         "on its own GPU or on --local-step-gpu's")  # fmt: skip
    predict.add_argument("--local-step-gpu", metavar="NAME",
                         help="with --local-step-ms: the GPU that step was measured on, where it is not the "
                         "cluster's (a100-sxm4-80gb, h100-sxm, …; a bad name is refused with the list; needed with "
                         "several --cluster of different GPUs: one step is not each one's). On the "
                         "cluster's GPU the step is then not known, only bounded: between the memory-bandwidth "
                         "ratio of the two datasheets (a memory-bound step) and their dense-peak ratio in the dtype "
                         "each trains in (a compute-bound one: the run's, fp16 for bf16 on a GPU without it, a V100; "
                         "a CPU run of --dtype auto: auto's on each GPU, bf16, or fp32 on a V100, said). "
                         "Predicted at both ends, the shorter printed; a cap or a "
                         "strategy is decided only where both ends agree (docs/clusters.md)")  # fmt: skip
    predict.add_argument("--local-optimizer-ms", type=finite("--local-optimizer-ms", "the optimizer's step in ms"),
                         help="with --local-step-ms: the optimizer's part of that step on your GPU, where you know "
                         "it (a profiler's optimizer.step); forward and backward take the rest. Without it: one "
                         "memory-bound pass of the run's optimizer over the model you will train at the cluster "
                         "GPU's memory bandwidth (SGD 12 B, Adam 28 B a parameter), said; a CPU's optimizer share "
                         "is far larger than a GPU's, and ZeRO-1's and FSDP2's leads rest on it")  # fmt: skip
    predict.add_argument("--local-ddp-ms", type=finite("--local-ddp-ms", "DDP's own cost in ms"),
                         help="with --local-step-ms: DDP's own cost on your GPU at one rank (its step with DDP "
                         "minus without: gradient copies into buckets, hooks), added to backward as a GPU run's "
                         "one-rank rows add theirs. Without it, a CPU run's is left out (no GPU's), and the "
                         "steps and efficiencies are said to be before it")  # fmt: skip
    predict.add_argument(
        "--profile-steps",
        type=whole("--profile-steps"),
        default=5,
        help="steps profiled when the profile is measured now, after 2 warm-up steps (default: 5)",
    )


def _gpu_counts(text: str) -> list[int]:
    """predict's --gpus: world sizes, '4' or '2,4' (whole numbers ≥ 1, each once, in order)."""
    from harness.config.units import parse_counts

    try:
        return parse_counts(text, flag="--gpus")
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--gpus ")) from None

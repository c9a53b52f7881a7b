"""`ddpbench bench`: from flags to a finished run. Validate everything, make the run folder (drawing
a fresh run id if another run took this one), launch the groups with a progress line per finished
configuration, then write the sweep's recommendations and `summary.json` and say where it all is.
Ctrl-C, SIGTERM, --fail-fast and a write error stop the run with one line saying how to finish it.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import os
import shlex
import shutil
import signal
import time

from harness.commands import console
from harness.commands.arguments import EXIT_FAILED, EXIT_SIGNAL
from harness.commands.console import rounds
from harness.commands.console.forecast import Auto
from harness.commands.console.plan import say_nodes_wait, say_plan
from harness.commands.console.progress import Progress, Status
from harness.commands.resume import record_session, resume
from harness.commands.summary import summarize, write_summary
from harness.config.bench import BenchConfig, ConfigError, check_results_folder
from harness.config.flags import AUTO, Unsplit, from_args
from harness.handoff import costs
from harness.results import contention
from harness.results.layout import RunFolder
from harness.results.values import row_label

RUN_ID_TRIES = 10


class Terminated(Exception):
    """SIGTERM, raised in the main thread like KeyboardInterrupt is for SIGINT."""


class StopSignals:
    """Ctrl-C and SIGTERM, raised in the main thread (KeyboardInterrupt, Terminated) and remembered: a library
    the signal interrupts may turn that exception into one of its own (pyarrow, stopped while it imports
    zoneinfo to read a timestamp, raises ArrowInvalid), and the run must still stop as asked, keeping what
    finished and saying how to resume."""

    def __init__(self) -> None:
        self.received: str | None = None

    def _raise(self, signum, frame):
        self.received = signal.Signals(signum).name
        raise KeyboardInterrupt() if signum == signal.SIGINT else Terminated()

    @contextlib.contextmanager
    def caught(self):
        handled = [signal.SIGTERM]
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # ignored (a background job): it stays so
            handled.append(signal.SIGINT)
        previous = {signum: signal.signal(signum, self._raise) for signum in handled}
        try:
            yield self
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)


def bench_config(
    args: argparse.Namespace, *, default_gpus: int, all_impls: list[str], command: tuple[str, ...]
) -> BenchConfig:
    """The config from the parsed flags (one per field); what the flags leave to the command filled in."""
    given = getattr(args, "given_flags", {})
    for dest, flag in (("max_repeats", "--max-repeats"), ("budget_s", "--budget")):  # a new run's, not a resumed one's
        if dest in given and args.repeats not in (None, AUTO):
            raise ConfigError(f"{flag} applies only with --repeats auto (here --repeats {args.repeats}): leave it "
                              "out, or give --repeats auto")  # fmt: skip
    return from_args(
        BenchConfig,
        args,
        gpus=args.gpus if args.gpus is not None else default_gpus,
        impls=_once("--impls", args.impls) if args.impls is not None else tuple(all_impls),
        workloads=_once("--workloads", args.workloads),
        options=_options(args),
        workload_options=tuple(
            item if isinstance(item, Unsplit) else (item[0], _once(f"--wopt {item[0]}=", item[1]))
            for item in args.workload_options
        ),  # an Unsplit kept as given: workload_grid refuses it, naming the workloads' keys
        command=command,
    )


def _once(flag: str, values: tuple[str, ...]) -> tuple[str, ...]:
    """The values in order, each once; a repeated one is run once, and said so."""
    unique = tuple(dict.fromkeys(values))
    if len(unique) < len(values):
        repeated = sorted({v for v in values if values.count(v) > 1}, key=values.index)
        console.say(f"ddpbench: note: {flag} repeats {', '.join(repeated)}: each runs once")
    return unique


def _options(args: argparse.Namespace) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """--opt and --bucket-cap-mb as (key, values): a key given twice is refused (which one was meant?)."""
    given = [(f"--opt {key}=", key, values) for key, values in args.options]
    if args.bucket_cap_mb is not None:
        if not args.bucket_cap_mb:
            raise ConfigError("--bucket-cap-mb is empty; give at least one cap in MiB (e.g. --bucket-cap-mb 25)")
        import impls  # each cap checked as the strategies check it, the flag and the text named as given

        cap = next(found for name in impls.names() if (found := impls.entry(name).options().get("bucket_cap_mb")))
        for text in args.bucket_cap_mb:
            cap.coerce(text, typed=f"--bucket-cap-mb {text!r}")
        given.append(("--bucket-cap-mb ", "bucket_cap_mb", args.bucket_cap_mb))
    options, seen = [], {}
    for flag, key, values in given:
        if key in seen:
            raise ConfigError(f"option {key!r} is given twice ({seen[key]} and {flag}{','.join(values)}); give it "
                              f"once with every value, e.g. --opt {key}=A,B")  # fmt: skip
        seen[key] = f"{flag}{','.join(values)}"
        options.append((key, _once(flag.strip(), values)))
    return tuple(options)


def new_run(args: argparse.Namespace, *, command: tuple[str, ...]):
    """Validate everything, then create the run folder: (config, plan)."""
    from harness.config import bench as cfgmod
    from harness.launch import bench_run

    config, device, configurations = _planned(args, command=command)  # starts the ranks' imports first
    from harness.measure import env  # imports torch

    run_id = config.run_id or cfgmod.new_run_id()
    if config.node_rank == 0:  # the other nodes join the folder node 0 makes
        cfgmod.check_results_folder(config.results, run_id)
    environment = env.capture(config.command, tf32=config.tf32)  # the math flags the ranks will run with
    for _ in range(RUN_ID_TRIES):
        try:
            return config, bench_run.create_run(
                config, configurations, run_id=run_id, device=device, environment=environment
            )
        except bench_run.RunIdTaken:
            if config.run_id:
                raise  # the user's own name is taken (another run made it since the check)
            run_id = cfgmod.new_run_id()  # a run started in the same second drew the same suffix
    raise ConfigError(f"no free run id in {config.results} after {RUN_ID_TRIES} tries; give --run-id")


def _planned(args: argparse.Namespace, *, command: tuple[str, ...]):
    """Every flag checked and the grid expanded, nothing written: (config, device, configurations)."""
    from harness.config import bench as cfgmod
    from harness.config import grid
    from harness.config.ranks import forks_ranks
    from harness.launch.torchrun import end_early, start_worker_early

    # Default: every visible GPU, or 2 simulated ranks on the CPU.
    if cfgmod.likely_cpu(args.device) and not getattr(args, "dry_run", False):  # a dry run launches nothing
        start_worker_early(local_ranks=args.gpus or 2)  # the ranks' imports begin (or began, harness.cli)
    import impls  # its names() imports every strategy's module, and with them torch (1.1 s here)

    uses_cuda = args.device in ("auto", "cuda") and cfgmod.cuda_available()
    default_gpus = cfgmod.gpu_count() if uses_cuda else 2
    config = bench_config(args, default_gpus=default_gpus, all_impls=impls.names(), command=command)
    device = cfgmod.resolve_device(config.device, cuda_available=cfgmod.cuda_available())
    if device != "cpu":
        end_early()  # the CPU's guess; a GPU's own zygote (unless switched off) begins its imports now
        if forks_ranks(device) and not getattr(args, "dry_run", False):
            start_worker_early(local_ranks=config.gpus, device=device)
    configurations = grid.expand(config, device=device, bf16_supported=device == "cuda" and _native_bf16())
    if device == "cuda":
        backend = cfgmod.resolve_backend(config.backend, device=device)
        cfgmod.check_gpu_count(gpus=config.gpus, available=cfgmod.gpu_count(), backend=backend)
    return config, device, configurations


def _dry_run(args: argparse.Namespace, *, command: tuple[str, ...]) -> int:
    """--dry-run: what the run would launch, every flag checked as for a run; nothing launched or written."""
    from harness.launch.bench_run import BenchRun, run_threads
    from harness.launch.torchrun import end_early

    if args.resume or getattr(args, "retry_failed", False):
        raise ConfigError("--dry-run plans a new run; --resume (and --retry-failed) finish a stored one (its plan is "
                          "in its run.json)")  # fmt: skip
    # torch's import, before the flags are checked: on a terminal only (a CI user's sat 30 s silent, loaded)
    Status("bench").show("importing torch", checked=False)
    config, device, configurations = _planned(args, command=command)
    end_early()  # the ranks' early imports: nothing will be launched
    if config.node_rank == 0:  # as a run checks it: a --run-id taken, a folder that cannot be written (a probe, gone)
        check_results_folder(config.results, config.run_id or "(dry run)")
    threads = run_threads(config, configurations, device=device)
    plan = BenchRun("(dry run)", config.results, device, threads, configurations, context={})
    say_dtypes_ignored(configurations)

    def narrowed(names: list[str]):  # the same plan with only these strategies, as bench would plan it
        from harness.config import grid

        narrower = dataclasses.replace(config, impls=tuple(names))
        return grid.expand(narrower, device=device, bf16_supported=device == "cuda" and _native_bf16())

    say_plan(plan, requested_dtype=config.dtype, grows=config.repeats == AUTO, dry=True,
             auto=Auto(config.max_repeats, config.budget_s), expand=narrowed)  # fmt: skip
    return 0


def say_dtypes_ignored(configurations) -> None:
    """Once a workload, the dtype its configuration names that it is not built in (`hf:`'s config.json with a
    torch_dtype: fp32 parameters whatever it says), before the plan, whose precision line is --dtype's."""
    said = set()
    for cfg in configurations:
        if cfg.workload not in said:
            said.add(cfg.workload)
            if ignored := getattr(cfg.make_workload(), "dtype_ignored", None):
                console.say(f"ddpbench: {cfg.workload}: {ignored} ignored: parameters fp32, --dtype picks the compute")


def _native_bf16() -> bool:
    """Whether the GPU computes bf16 natively (Ampere on): older GPUs emulate it, slower than fp32."""
    import torch

    try:
        return torch.cuda.is_bf16_supported(including_emulation=False)
    except TypeError:  # torch before 2.3 has no such argument and counts native support only
        return torch.cuda.is_bf16_supported()


def run(args: argparse.Namespace, *, command: tuple[str, ...]) -> int:
    from harness.launch import bench_run

    try:
        return _session(args, command=command)
    finally:
        bench_run.release_runs()  # its run's lock ends with it, though the process (a script, a test) goes on


def _session(args: argparse.Namespace, *, command: tuple[str, ...]) -> int:
    from harness.analysis.verdicts.environment import fault_words, injected_fault
    from harness.launch import launcher as launch
    from harness.launch import repeats
    from harness.launch.torchrun import check_switches

    check_switches()
    if getattr(args, "dry_run", False):
        return _dry_run(args, command=command)
    if args.resume:
        resumed = resume(args)
        if resumed is None:
            return 0
        config, plan, done = resumed
        plan = dataclasses.replace(plan, session=contention.session_mark(args.started_at))  # its own records
        if config.node_rank == 0:  # which wrote run.json
            record_session(plan.run, command)
    else:
        if getattr(args, "retry_failed", False):
            raise ConfigError("--retry-failed needs --resume RUN_ID: it runs a stopped run's failed configurations")
        (config, plan), done = new_run(args, command=command), 0
        say_dtypes_ignored(plan.configurations)  # a resume's said at its start (a file of its run may have moved)
    if fault := injected_fault({"environment": {"env_vars": os.environ}}):  # as run.json records it; input good
        console.warning(f"a fault is injected on purpose, and this run's pages say so: {fault_words(fault)}")
    say_plan(plan, requested_dtype=config.dtype, grows=config.repeats == AUTO and not args.resume,
             auto=Auto(config.max_repeats, config.budget_s))  # fmt: skip
    if config.nnodes > 1:  # torchrun's rendezvous says nothing while it waits (up to its join timeout)
        say_nodes_wait(config.nnodes, config.rdzv_endpoint, plan.run_id, timeout_s=config.timeout_s)
    # The session's clock starts with the command (the process, or the call): the budget, the wall time and its
    # split count what the user waited for, the start included.
    began = time.monotonic() - max(time.time() - args.started_at, 0.0)
    launched = time.monotonic()
    costs.add_into(plan.phases_s, {"start": launched - began})
    budget = config.budget_s if config.repeats == AUTO else None
    ends = None if budget is None else began + budget
    progress = Progress(plan.run, plan.configurations, done=done, budget_ends=ends, grows=config.repeats == AUTO)
    stops = StopSignals()
    try:
        with stops.caught():
            launch.run_groups(config, plan, on_written=progress.written, on_tick=progress.tick)
            repeats.until_decided(config, plan, began=began, launched=launched, done=done, on_written=progress.written,
                                  on_tick=progress.tick,
                                  on_round=functools.partial(rounds.on_round, progress, config, plan))  # fmt: skip
    except BaseException as stop:
        progress.close()
        return _ended_early(plan, stop, stops.received, began=began, progress=progress)
    finally:
        progress.close()
    from harness.results import store

    written = len(store.written_config_ids(plan.run)) if config.repeats != AUTO else 0  # this run's pace, for
    repeat_s = (time.monotonic() - launched) * written / (written - done) / config.repeats if written > done else None
    with costs.timed(plan.phases_s, "verdicts"):
        configs = _verdicts(config, plan, repeat_s=repeat_s)  # the time more repeats would take
    failed_parity = int((~configs["parity_ok"].fillna(True).astype(bool)).sum()) if "parity_ok" in configs else 0
    return summarize(plan, time.monotonic() - began, parity_failed=failed_parity, run_command=config.command)


def _verdicts(config: BenchConfig, plan, *, repeat_s: float | None = None):
    """The run's end: its rows read once, the cap recommendations written, the verdicts and sentences said (with
    `repeat_s`, the seconds one repeat of every configuration took: what more would take); the rows returned."""
    from harness.analysis import optimizer_lead
    from harness.analysis.verdicts import decide, sweep
    from harness.commands.console import invoked
    from harness.results import store

    if plan.node_rank:  # node 0 judges the rows, as rank 0 writes them: here some may not be written yet
        return store.read_configs(plan.run)
    shutil.rmtree(RunFolder(plan.run).cached(""), ignore_errors=True)  # the run is over: nothing reuses its cache
    confidence = decide.confidence_for(config.repeats, config.max_repeats)  # auto's looks are paid for
    configs = store.read_configs(plan.run)  # every row written, read once for all four
    recommended = sweep.write_run_recommendations(plan.run, confidence=confidence, configs=configs)  # a cap sweep's
    if not recommended.empty:
        console.recommendations(recommended, verdicts_said=config.repeats == AUTO)
    steps, strategies = store.read_steps(plan.run), None
    if config.repeats != AUTO:  # (auto said every verdict in its last round)
        found = decide.verdicts(configs, steps, confidence=confidence)
        strategies = [v for v in found if v.kind == decide.STRATEGY]
        console.strategy_verdicts(strategies)
        rounds.to_decide_fixed(found, repeats=config.repeats, max_repeats=config.max_repeats, repeat_s=repeat_s,
                               command=config.command, nnodes=config.nnodes)  # fmt: skip
    lead = optimizer_lead.cpu_verdict_words(configs, steps, confidence=confidence, verdicts=strategies)
    if lead:  # a CPU optimizer's lead
        where = shlex.join(["--run", plan.run.name, "--results", str(plan.run.parent)])
        command = f"`{invoked.ddpbench_command()} predict {where} --cluster NAME --local-step-ms MS`"
        console.say(f"ddpbench: on this CPU, {lead}: {optimizer_lead.GPU_ANSWER.format(command=command)}")
    console.why_slower(*_why_lines(configs, confidence=confidence, command=config.command))
    console.drifting(_drift_lines(configs))
    return configs


def _drift_lines(configs) -> list[str]:
    """'w1 gpt2/full stock: steps drift -4.4% within the window (more --warmup)' for each configuration whose
    repeats mostly drift (harness.analysis.drift.drift_note, as the report's noise column says it)."""
    from harness.analysis import drift, why

    if "step_ms_drift" not in configs:
        return []
    ok = configs[configs["status"] == "ok"]
    lines = []
    for _, group in ok.groupby([k for k in why.SAME_CONFIGURATION if k in ok], dropna=False, sort=False):
        if note := drift.drift_note(group["step_ms_drift"].tolist(), group["step_ms_drift_se"].tolist()):
            row = group.iloc[0]
            strategy = row_label(row)
            lines.append(f"w{row['world_size']} {row['workload']}/{row['size']} {strategy}: {note}")
    return lines


def _why_lines(configs, *, confidence: float, command: tuple[str, ...] = ()) -> tuple[list[str], str]:
    """The sentences of the configurations at the run's largest world size that have a measured gap, the slow rank
    where one was found, and which strategies' gaps could not be taken apart, why and what measures them; heading."""
    from harness.analysis import why
    from harness.config.ranks import available_cpus
    from reports.pages.notes.offset import said_once

    ok = configs[(configs["status"] == "ok") & (configs["world_size"] > 1)]
    largest = ok[ok["world_size"] == ok["world_size"].max()] if not ok.empty else ok
    typical = why.typical_repeats(largest)  # one per configuration, however many repeats
    said = [why.lines(row, configs, cores=available_cpus(), confidence=confidence) for _, row in typical.iterrows()]
    # rows whose launches cannot tell their cost: one sentence a workload, as its page says it
    lines = said_once(typical, said, named=configs["workload"].nunique() > 1)
    untimed = largest[largest["gap_ms"].isna() & ~largest["baseline"].astype(bool) & largest["comm_note"].notna()]
    by_note: dict[str, list[str]] = {}  # stock and zero share DDP's reason, 330 characters: said once for both
    for impl, notes in untimed.groupby("impl")["comm_note"]:
        by_note.setdefault(notes.iloc[0], []).append(impl)
    lines += [f"{', '.join(impls)}: not taken apart: {rounds.with_timeline(note, command)}"
              for note, impls in by_note.items()]  # fmt: skip
    return lines, why.heading(why.typical_repeats(largest))


def _ended_early(plan, stop: BaseException, received: str | None, *, began: float, progress) -> int:
    """How a run stopped before its end: by a signal (whatever exception it became on its way up), by
    --fail-fast, or by a write error (a full disk: nothing more can be kept); anything else propagates."""
    from harness.launch import launcher as launch

    if received or isinstance(stop, (KeyboardInterrupt, Terminated, launch.NodeZeroGone)):  # another node's: node 0's
        why = received or getattr(stop, "why", None) or ("SIGINT" if isinstance(stop, KeyboardInterrupt) else "SIGTERM")
        progress.catch_up()  # a configuration written as the signal came: its line, before the count
        return _stopped(plan, why, EXIT_SIGNAL.get(why, EXIT_FAILED), wall_s=time.monotonic() - began)
    if isinstance(stop, launch.FailFast):
        progress.catch_up()  # as for a signal: the failed row's line, and any written before it, before the count
        console.say_err(f"ddpbench: --fail-fast: stopping at the first failure: {stop}")
        return _stopped(plan, "--fail-fast", EXIT_FAILED, wall_s=time.monotonic() - began)
    if isinstance(stop, OSError):
        console.error(f"cannot write results in {plan.run}/: {stop}")
        return _stopped(plan, "a write error", EXIT_FAILED, wall_s=None)
    raise stop


def _nodes(plan) -> int:
    return max((cfg.nnodes for cfg in plan.configurations), default=1)


def _stopped(plan, why: str, code: int, *, wall_s: float | None) -> int:
    """One line: what was saved, and the command that finishes the run. The session's figures go into
    summary.json (marked incomplete), for --resume to add its own to (not after a write error)."""
    from harness.launch import launcher as launch
    from harness.results import store

    if wall_s is not None:
        launch.pair_written(plan)  # a row written before its baseline, which came before the stop
        write_summary(plan, wall_s, complete=False)
    written = store.read_configs(plan.run) if store.written_config_ids(plan.run) else None
    statuses = [] if written is None else written["status"].tolist()  # a failed row is saved too, but measured nothing
    total = len(store.read_run_meta(plan.run)["configurations"])
    console.say(f"ddpbench: stopped by {why}: {console.saved_text(statuses, total)} in {plan.run}/; "
                f"finish with: {console.resume_hint(plan.run_id, plan.run.parent, nnodes=_nodes(plan))}")  # fmt: skip
    return code

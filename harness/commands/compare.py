"""`ddpbench compare BASE NEW`: judge each matched configuration, write the comparison page, and
exit 1 when any got significantly slower, needs significantly more peak memory per rank
(analysis.verdicts.memory_compare) or failed in NEW where BASE measured it; 3 when none did
but the evidence is short: some could not be told apart with the repeats at hand, could not be
compared because a setting differed (threads per rank, backend, TF32, first bucket, a timing hook:
a different measurement, never counted as slower; docs/statistics.md), have no ok counterpart in
NEW, or no configuration matched at all. A gate never passes on no evidence."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands import console
from harness.commands.console import compare as compared
from harness.config.bench import ConfigError
from harness.results.layout import check_output_folder, check_runs_folder
from harness.results.values import counted

EXIT_SLOWER = 1
"""Some configuration significantly slower or higher in peak memory, or failed in NEW where BASE measured it."""
EXIT_TOO_FEW = 3
"""Not 0 (that would pass a CI gate on no evidence), not 1 (nothing was found slower), not 2 (bad input):
too few repeats to tell, a setting that differs, a configuration NEW has no ok result for, nothing matched."""
EXIT_CRASHED = 4
"""compare itself could not finish (an unexpected error): neither a verdict nor bad input."""


def run(args: argparse.Namespace, *, command: tuple[str, ...]) -> int:
    threshold = parse_threshold(args.threshold)
    memory_threshold = parse_threshold(args.memory_threshold, flag="--memory-threshold")
    runs = run_folder(args.base, args.results), run_folder(args.new, args.results)
    if runs[0].resolve() == runs[1].resolve():  # every ratio 1 by construction: a gate would pass on nothing
        raise ConfigError(f"BASE and NEW are the same run {runs[0].name!r}; compare judges two separate runs")
    check_output_folder("--out", args.out)
    check_one_model(*runs)
    try:
        return _compare(args, *runs, threshold=threshold, memory_threshold=memory_threshold, command=command)
    except ConfigError:
        raise
    except Exception as exc:  # a gate must not read a crash as "slower" (exit 1): a code of its own
        said = (str(exc).splitlines() or [""])[0][:300]
        console.error(f"compare could not finish ({type(exc).__name__}: {said}); exit {EXIT_CRASHED}, no verdict")
        return EXIT_CRASHED


def check_one_model(base_run: Path, new_run: Path) -> None:
    """Two runs of different models (workload or size), no configuration of which could match: bad input (exit 2,
    nothing written), where it was exit 3 and a page. NEW's planned configurations count (a run still going, or one
    whose model failed: a failure, judged); a BASE without an ok configuration, or a NEW with nothing yet, is not
    refused: the gate's 'no evidence' says so."""
    from harness.results import store

    planned = store.read_run_meta(new_run).get("configurations") or []
    new = [*planned, *store.read_configs(new_run).to_dict("records")]
    setups = [{(row.get("workload"), row.get("size")) for row in rows if row.get("workload")}
              for rows in (_ok_configs(base_run).to_dict("records"), new)]  # fmt: skip
    if setups[0] and setups[1] and not setups[0] & setups[1]:
        said = [", ".join(sorted(f"{w}/{z}" for w, z in setup)) for setup in setups]
        raise ConfigError(f"BASE {base_run.name!r} measured {said[0]} and NEW {new_run.name!r} {said[1]}: no "
                          f"configuration can match; give a NEW run of {said[0]} (compare judges two runs of one "
                          "model: the same workload and size)")  # fmt: skip


def parse_threshold(text: str, *, flag: str = "--threshold") -> float:
    """'5%' or '0.05' → 0.05; `flag` names it in the error."""
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        value = -1.0
    if 1 <= value < 100 and not text.endswith("%"):  # '5' meant as 5 % would be 500 %: say which was meant
        raise ConfigError(f"{flag} {text!r} would be {value:.0%}; give {text}% for {text} per cent (or a "
                          f"fraction, {value / 100:g})")  # fmt: skip
    if not 0 < value < 1:  # 0 could never call two runs the same, 100 % would call 1.9× no change
        raise ConfigError(f"{flag} {text!r} is not valid; give a percentage above 0% and below 100%, such as 5% "
                          "(or a fraction, 0.05)")  # fmt: skip
    return value


def run_folder(text: str, results: Path) -> Path:
    """BASE or NEW: a run folder given as a path, or a run id in --results."""
    from harness.results import store

    found = store.find_run(text, results)
    if found is not None and store.read_run_meta(found).get("kind") == store.COLLECTIVES_KIND:
        raise ConfigError(f"run {found.name!r} is a `ddpbench collectives` run; compare judges two bench runs")
    if found is not None:
        return found
    check_runs_folder(results)  # said rather than "unknown run id" in a folder that is not one of runs
    known = store.newest_runs(results)
    raise ConfigError(
        f"unknown run {text!r}: not a run folder, nor a run id in {str(results)!r} (newest runs: {known})"
    )


SHOWN_MISSING = 3
"""Lines of 'no ok result in NEW' the console prints before '… and N more' (the page lists them all)."""


def _compare(
    args: argparse.Namespace,
    base_run: Path,
    new_run: Path,
    *,
    threshold: float,
    memory_threshold: float,
    command: tuple[str, ...] = (),
) -> int:
    from harness.analysis.verdicts import compare
    from reports.pages.compare import write_comparison_page
    from reports.site import refresh_index

    across = args.across_strategies
    frame, environment, not_compared = compare.compare(base_run, new_run, threshold=threshold, across_strategies=across,
                                                       memory_threshold=memory_threshold)  # fmt: skip
    shared = [*_not_alone(base_run, "BASE"), *_not_alone(new_run, "NEW")]
    environment += shared
    environment += [*_unfinished(base_run, "BASE"), *_unfinished(new_run, "NEW")]
    failed, missing = compare.without_counterpart(base_run, new_run, across_strategies=across)
    for warning in [*environment, *not_compared, *_shortened(missing), *failed, *_added(base_run, new_run, across)]:
        console.warning(warning)
    compared.comparison(frame, threshold=threshold)
    compared.memory_regressions(frame)
    judged = compare.outcome(frame, failed=failed, missing=missing, not_compared=not_compared)
    if frame.empty:  # why nothing matched: the setting that keeps them apart, what each run measured
        apart = differing(base_run, new_run, across_strategies=across)
        judged["sentence"] += (f"; {f'the runs differ in {apart}; ' if apart else ''}{base_run.name} measured "
                               f"{measured(base_run)}, {new_run.name} {measured(new_run)}")  # fmt: skip
        if "threads_per_rank" in apart and (rerun := at_base_gpus(base_run, new_run)):
            judged["sentence"] += f"; threads per rank follow --gpus, so NEW run at BASE's would match: {rerun}"
    slower = "significantly slower"  # which, by how much, how sure: before any 'failed in NEW' that follows
    judged["sentence"] = judged["sentence"].replace(slower, slower + compared.slower_named(frame), 1)
    if judged["outcome"] == compare.UNDECIDED:  # what would decide those left open, and which lean slower already
        too_few = "with too few repeats to tell"
        judged["sentence"] = judged["sentence"].replace(too_few, too_few + compared.open_named(frame), 1)
        judged["sentence"] += _noise_first(judged["too_few"], [line.split(" (")[0] for line in shared])
    code = (
        EXIT_SLOWER
        if compare.regressed(judged["outcome"])
        else {compare.UNDECIDED: EXIT_TOO_FEW}.get(judged["outcome"], 0)
    )
    judged["exit_code"] = code  # the page says what the gate read, and what each run ran
    said = {"environment": environment, "not_judged": [*failed, *not_compared, *missing], "threshold": threshold,
            "commands": {run.name: _command_of(run) for run in (base_run, new_run)},
            "compared_by": _typed(command)}  # fmt: skip
    # Named by the runs' ids (their folders' names), whether given as ids or as paths.
    page = write_comparison_page(args.out, base_run.name, new_run.name, frame, judged, **said)
    kept = _keep(base_run.parent, base_run.name, new_run.name, frame, judged, **said)  # beside BASE, as given
    listed = refresh_index(args.out)
    name = compare.comparison_name(base_run.name, new_run.name)  # as the page and the index name it
    console.say(  # the matched counts add up to them (nightC → nightB2's left its 2 faster out)
        f"compare {name}: {counted(judged['matched'], 'configuration')} matched ({judged['slower']} significantly "
        f"slower, {judged['faster']} faster, {judged['unchanged']} with no significant change, {judged['too_few']} "
        f"with too few repeats to tell); {judged['not_compared']} not compared (a setting differs), "
        f"{judged['failed']} failed in NEW, {judged['missing']} with no ok result in NEW"
    )
    # where it is: the page (and the site listing it), and the copy beside BASE that `ddpbench report` builds again
    # into the site it makes, linked from both runs' pages (docs/usage.md): said apart, a CI log's line stays short
    console.say(f"compare: page {page}" + (f" (listed in {listed})" if listed else f" (no site built in {args.out} "
                "lists it)") + f"; kept in {kept} (ddpbench report links it from both runs' pages)")  # fmt: skip
    console.say(f"compare: {judged['sentence']} (exit {code})")
    return code


def _not_alone(run: Path, which: str) -> list[str]:
    """'NEW (id) was not alone on its machine: the 1-minute load average reached …': a run whose launches shared
    their cores or GPUs with other work (its plan/*.contention.json), as `bench` warned at its end. No setting
    tells it apart and no confidence level undoes it (docs/statistics.md): a verdict may be the load's."""
    from harness.results import contention

    said = contention.findings(contention.read(run))
    return [f"{which} ({run.name}) was not alone on its machine: {'; '.join(said)}"] if said else []


def _noise_first(too_few: int, loaded: list[str]) -> str:
    """'; BASE and NEW shared their machine: …': where repeats left configurations open on a loaded machine, the
    repeats 'need about M' counts are the load's spread; as `bench` says, more repeats wait on its noise falling."""
    if not too_few or not loaded:
        return ""
    return (
        f"; {' and '.join(loaded)} shared {'their' if len(loaded) > 1 else 'its'} machine with other work: its "
        "noise must fall before more repeats can decide (a quieter machine, more --steps a repeat)"
    )


def _unfinished(run: Path, which: str) -> list[str]:
    """'NEW (id) has no summary.json: still running, …': a run compared before its end (a CI job that compared
    against a run still going read its first configurations as the whole run, and nothing said so)."""
    from harness.commands.console.invoked import resume_hint
    from harness.commands.summary import earlier_sessions
    from harness.results.layout import SUMMARY_JSON

    summary = earlier_sessions(run)  # {}: none written (or unreadable)
    if not summary:
        return [f"{which} ({run.name}) has no {SUMMARY_JSON}: still running, or stopped before its end; only what "
                "it had written is compared"]  # fmt: skip
    if summary.get("complete") is False:
        return [f"{which} ({run.name}) was stopped before its end ({resume_hint(run.name, run.parent)} finishes it); "
                "only what it measured is compared"]  # fmt: skip
    return []


def _command_of(run: Path) -> str:
    """The command line a run recorded (run.json's environment), as a shell reads it; '' where it kept none."""
    import shlex

    from harness.results import store
    from harness.results.invocation import as_typed  # as the run page's Reproduce section names it

    command = (store.read_run_meta(run).get("environment") or {}).get("command")
    return shlex.join(as_typed([str(word) for word in command])) if isinstance(command, list) and command else ""


def _typed(command: tuple[str, ...]) -> str:
    """This compare's command line as a shell reads it (the next compare of the pair overwrites its page: the page
    says which flags made it)."""
    import shlex

    from harness.results.invocation import as_typed

    return shlex.join(as_typed([str(word) for word in command])) if command else ""


def _keep(results: Path, base: str, new: str, frame, judged: dict, **page) -> Path:
    """The comparison beside the runs (layout.COMPARISONS): what its page is made from, for `report` to make it again
    in any site; JSON through pandas, whose numbers are plain and whose NaN are null."""
    import json

    from harness.results import store
    from harness.results.layout import COMPARISONS

    path = results / COMPARISONS / f"{base}_vs_{new}.json"
    rows = json.loads(frame.to_json(orient="records")) if not frame.empty else []
    store.write_json(path, {"base": base, "new": new, "judged": judged, "rows": rows, **page})
    return path


def _added(base_run: Path, new_run: Path, across_strategies: bool) -> list[str]:
    """'NEW adds 2 configurations BASE has no ok result for, not judged: …': what NEW measured beyond BASE, in one
    line (no gate's concern: nothing to be slower than, said so that it is not read as judged)."""
    from harness.analysis.verdicts import compare

    added = compare.only_in_new(base_run, new_run, across_strategies=across_strategies)
    more = f" and {len(added) - SHOWN_MISSING} more" if len(added) > SHOWN_MISSING else ""
    return [f"NEW adds {counted(len(added), 'configuration')} BASE has no ok result for, not judged: "
            f"{', '.join(added[:SHOWN_MISSING])}{more}"] if added else []  # fmt: skip


def _shortened(lines: list[str]) -> list[str]:
    if len(lines) <= SHOWN_MISSING + 1:
        return lines
    return [
        *lines[:SHOWN_MISSING],
        f"… and {len(lines) - SHOWN_MISSING} more with no ok result in NEW (the page lists all)",
    ]


def measured(run: Path) -> str:
    """'mlp/tiny fp32 adam batch 8 (stock, bucketed)': what a run's ok configurations measured, per setup, for a
    comparison that matched nothing to say why."""
    from harness.analysis.verdicts import compare

    ok = _ok_configs(run)
    setup = [k for k in ("workload", "size", "dtype", "optimizer", "batch_size") if k in ok]
    said = [f"{compare.setup_words(dict(zip(setup, key, strict=True)))} ({', '.join(dict.fromkeys(group['impl']))})"
            for key, group in ok.groupby(setup, sort=False, dropna=False)]  # fmt: skip
    return "; ".join(said) or "no ok configuration"


def differing(base_run: Path, new_run: Path, *, across_strategies: bool = False) -> str:
    """'optimizer (adam in BASE, sgd in NEW)': the match keys and settings (compare.SETTING_KEYS: 'threads_per_rank
    (2 in BASE, 1 in NEW)', which --gpus sets) whose values the two runs' ok configurations share none of, for a
    comparison that matched nothing to name what keeps them apart ('' if none)."""
    from harness.analysis.verdicts import compare

    base, new = _ok_configs(base_run), _ok_configs(new_run)
    said = []
    keys = [
        *compare.match_keys(across_strategies=across_strategies),
        *compare.setting_keys(across_strategies=across_strategies),
    ]
    for key in keys:
        if key in ("impl_options", "world_size", "nnodes") or key not in base or key not in new:
            continue  # several world sizes or options in one run: a partial overlap, said by `measured`
        before, after = set(base[key].dropna().astype(str)), set(new[key].dropna().astype(str))
        if before and after and not before & after:
            said.append(f"{key} ({', '.join(sorted(before))} in BASE, {', '.join(sorted(after))} in NEW)")
    return "; ".join(said)


def _ok_configs(run: Path):
    from harness.results import store

    configs = store.read_configs(run)
    return configs[configs["status"] == "ok"] if "status" in configs else configs


def at_base_gpus(base_run: Path, new_run: Path) -> str:
    """NEW's recorded bench command at BASE's --gpus (its --run-id dropped: a new run), the command whose ranks get
    BASE's threads (config.ranks.threads_per_rank); '' where either kept no command, BASE gave no --gpus, or both
    gave the same (then the machines' cores differ, and no flag makes them match)."""
    import shlex

    base, new = (shlex.split(_command_of(run)) for run in (base_run, new_run))
    gpus = _flag_value(base, "--gpus")
    if not base or not new or gpus is None or gpus == _flag_value(new, "--gpus"):
        return ""
    words, skip = [], False
    for word in new:  # NEW's words, without --gpus and --run-id (each with its value)
        if not skip and word.split("=")[0] not in ("--gpus", "--run-id"):
            words.append(word)
        skip = word in ("--gpus", "--run-id")
    return shlex.join([*words, "--gpus", gpus])


def _flag_value(words: list[str], flag: str) -> str | None:
    for i, word in enumerate(words):
        if word == flag and i + 1 < len(words):
            return words[i + 1]
        if word.startswith(flag + "="):
            return word.split("=", 1)[1]
    return None

"""`ddpbench compare BASE NEW`: judge each matched configuration, write the comparison page, and
exit 1 when any got significantly slower or failed in NEW where BASE measured it; 3 when none did
but the evidence is short: some could not be told apart with the repeats at hand, could not be
compared because a setting differed (threads per rank, backend, TF32, first bucket: a different
measurement, never counted as slower; docs/statistics.md), have no ok counterpart in NEW, or no
configuration matched at all. A gate never passes on no evidence."""

from __future__ import annotations

import argparse

from harness.commands import console
from harness.config.bench import ConfigError
from harness.results.layout import check_output_folder

EXIT_SLOWER = 1
"""Some configuration significantly slower, or failed in NEW where BASE measured it."""
EXIT_TOO_FEW = 3
"""Not 0 (that would pass a CI gate on no evidence), not 1 (nothing was found slower), not 2 (bad input):
too few repeats to tell, a setting that differs, a configuration NEW has no ok result for, nothing matched."""
EXIT_CRASHED = 4
"""compare itself could not finish (an unexpected error): neither a verdict nor bad input."""


def run(args: argparse.Namespace, *, command: tuple[str, ...]) -> int:
    from harness.analysis import compare

    threshold = compare.parse_threshold(args.threshold)
    if not args.results.is_dir():  # said before the run ids, which would only be "unknown" there
        raise ConfigError(f"--results {str(args.results)!r} is not a results folder (it does not exist or is a file)")
    check_output_folder("--out", args.out)
    try:
        return _compare(args, threshold)
    except ConfigError:
        raise
    except Exception as exc:  # a gate must not read a crash as "slower" (exit 1): a code of its own
        said = (str(exc).splitlines() or [""])[0][:300]
        console.error(f"compare could not finish ({type(exc).__name__}: {said}); exit {EXIT_CRASHED}, no verdict")
        return EXIT_CRASHED


def _compare(args: argparse.Namespace, threshold: float) -> int:
    from harness.analysis import compare, stats
    from reports.pages.compare import write_comparison_page

    frame, warnings, not_compared = compare.compare(
        args.results, args.base, args.new, threshold=threshold, across_strategies=args.across_strategies
    )
    failed, missing = compare.without_counterpart(
        args.results, args.base, args.new, across_strategies=args.across_strategies
    )
    warnings = [*warnings, *not_compared, *missing, *failed]
    for warning in warnings:
        console.warning(warning)
    console.comparison(frame, threshold=threshold)
    page = write_comparison_page(args.out, args.base, args.new, frame, warnings, threshold=threshold)
    counts = frame["verdict"].value_counts().to_dict() if not frame.empty else {}
    slower, too_few = counts.get(stats.SLOWER, 0), counts.get(stats.TOO_FEW, 0)
    console.say(f"compare: {len(frame)} configuration(s) matched, {slower} significantly slower, "
                f"{too_few} with too few repeats to tell, {len(not_compared)} not compared (a setting differs), "
                f"{len(failed)} failed in NEW, {len(missing)} with no ok result in NEW; page: {page}")  # fmt: skip
    if frame.empty:
        why = "see the warnings above" if failed or missing or not_compared else f"{args.base} has no ok configuration"
        console.say(f"compare: no evidence: no configuration of {args.base} was matched by an ok one of "
                    f"{args.new} ({why})")  # fmt: skip
    if slower or failed:
        return EXIT_SLOWER
    return EXIT_TOO_FEW if frame.empty or too_few or not_compared or missing else 0

"""`ddpbench compare BASE NEW`: judge each matched configuration, write the comparison page, and
exit 1 when any got significantly slower, 3 when none did but some could not be told apart with
the repeats at hand or could not be compared because a setting differed (threads per rank,
backend, TF32, first bucket: a different measurement, never counted as slower; docs/statistics.md)."""

from __future__ import annotations

import argparse

from harness.commands import console
from harness.plan.config import ConfigError

EXIT_SLOWER = 1
EXIT_TOO_FEW = 3
"""Not 0 (that would pass a CI gate on no evidence), not 1 (nothing was found slower), not 2 (bad input).
Also when a configuration could not be compared because a setting differed: no evidence either way."""


def run(args: argparse.Namespace, *, command: tuple[str, ...]) -> int:
    from harness.analysis import compare, stats
    from reports.compare import write_comparison_page

    threshold = compare.parse_threshold(args.threshold)
    if not args.results.is_dir():  # said before the run ids, which would only be "unknown" there
        raise ConfigError(f"--results {str(args.results)!r} is not a results folder (it does not exist or is a file)")
    frame, warnings, not_compared = compare.compare(
        args.results, args.base, args.new, threshold=threshold, across_strategies=args.across_strategies
    )
    warnings = [*warnings, *not_compared]
    for warning in warnings:
        console.warning(warning)
    console.comparison(frame, threshold=threshold)
    page = write_comparison_page(args.out, args.base, args.new, frame, warnings, threshold=threshold)
    counts = frame["verdict"].value_counts().to_dict() if not frame.empty else {}
    slower, too_few = counts.get(stats.SLOWER, 0), counts.get(stats.TOO_FEW, 0)
    console.say(f"compare: {len(frame)} configuration(s) matched, {slower} significantly slower, "
                f"{too_few} with too few repeats to tell, {len(not_compared)} not compared (a setting differs); "
                f"page: {page}")  # fmt: skip
    return EXIT_SLOWER if slower else EXIT_TOO_FEW if too_few or not_compared else 0

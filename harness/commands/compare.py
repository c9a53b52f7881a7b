"""`ddpbench compare BASE NEW`: judge each matched configuration, write the comparison page, and
exit 1 when any got significantly slower."""

from __future__ import annotations

import argparse

from harness.commands import console
from harness.plan.config import ConfigError


def run(args: argparse.Namespace, *, command: tuple[str, ...]) -> int:
    from harness.analysis import compare
    from reports.compare import write_comparison_page

    threshold = compare.parse_threshold(args.threshold)
    if not args.results.is_dir():  # said before the run ids, which would only be "unknown" there
        raise ConfigError(f"--results {str(args.results)!r} is not a results folder (it does not exist or is a file)")
    frame, warnings = compare.compare(
        args.results, args.base, args.new, threshold=threshold, across_strategies=args.across_strategies
    )
    for warning in warnings:
        console.warning(warning)
    console.comparison(frame)
    page = write_comparison_page(args.out, args.base, args.new, frame, warnings, threshold=threshold)
    slower = int((frame["verdict"] == "slower").sum()) if not frame.empty else 0
    console.say(f"compare: {len(frame)} configuration(s) matched, {slower} significantly slower; page: {page}")
    return 1 if slower else 0

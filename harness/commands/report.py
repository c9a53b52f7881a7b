"""`ddpbench report`: refresh each run's model tables, then build the HTML site from the results."""

from __future__ import annotations

import argparse

from harness.commands import console


def run(args: argparse.Namespace, *, command: tuple[str, ...]) -> int:
    from harness.model import predict
    from reports import site

    # The floor and the model's curves depend on collectives runs that may have come after a bench run.
    predict.update_all_model_tables(args.results)
    built = site.build_site(results=args.results, out=args.out)
    console.say(f"report: {built.index}")
    for run_id, page in built.run_pages.items():
        console.say(f"  run {run_id}: {page}")
    return 0

"""The terminal: every line ddpbench prints goes through here. The commands compute and decide;
this module formats and writes. Results on stdout; errors and warnings on stderr, one line each.
"""

from __future__ import annotations

import sys


def say(line: str) -> None:
    """One line on stdout, flushed at once (a long run's lines must show as they happen)."""
    print(line, flush=True)


def error(message: str) -> None:
    print(f"ddpbench: error: {message}", file=sys.stderr)


def warning(message: str) -> None:
    print(f"ddpbench: warning: {message}", file=sys.stderr)


def bytes_text(count: float) -> str:
    for unit, scale in (("GB", 1024**3), ("MB", 1024**2), ("KB", 1024)):
        if count >= scale:
            return f"{count / scale:g} {unit}"
    return f"{count:g} B"


def collectives_table(frame, contention) -> None:
    """Per world size and collective: bus bandwidth at the largest size, the peak, and correctness;
    then how much compute and all-reduce slow each other down when they overlap."""
    for (world, op), rows in frame.groupby(["world_size", "op"], sort=True):
        best = rows.loc[rows["busbw_gbps"].idxmax()]
        largest = rows.loc[rows["bytes"].idxmax()]
        verdict = (
            "all correct"
            if rows["correct"].all()
            else "WRONG RESULTS at " + ", ".join(bytes_text(b) for b in rows.loc[~rows["correct"], "bytes"])
        )
        say(f"  w{world} {op:<14} busbw {largest['busbw_gbps']:.3f} GB/s at {bytes_text(largest['bytes'])} "
            f"(peak {best['busbw_gbps']:.3f} at {bytes_text(best['bytes'])}); {verdict}")  # fmt: skip
    for row in contention.itertuples():
        say(f"  w{row.world_size} overlap: compute {row.compute_slowdown:.2f}× slower, all-reduce "
            f"{row.comm_slowdown:.2f}× slower while the other runs")  # fmt: skip

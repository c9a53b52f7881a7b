"""Why a predicted step is what it is, in words (a row of the step-time model, per cap or on a cluster): compute,
the network's bandwidth or the gradients ready last, the bucket that exposes most, and DDP's own work beside them.
`predict` and the what-if page say these; harness.analysis.why says the measured steps'. Pure: rows in, text out.
"""

from __future__ import annotations

from typing import Any

from harness.results.values import ms_text


def _last_bucket_words(row: Any) -> str:
    """'; of that, 1.9 ms is transformer.wte.weight's bucket (148 MiB, ready as backward ends)': the bucket whose
    all-reduce runs longest past backward's end in the schedule simulated, by its largest gradient, where the row
    names it; a row from before those columns, the bucket ready last and what its all-reduce alone takes; '' else."""
    name = row.get("exposing_largest")
    if isinstance(name, str) and name and row["exposing_ms"] > 0:
        share = row["exposing_ready"]
        when = "as backward ends" if share >= 0.9995 else f"at {share:.0%} of backward"
        return (f"; of that, {ms_text(row['exposing_ms'])} ms is {name}'s bucket ({row['exposing_bucket_mb']:.3g} MiB, "
                f"ready {when})")  # fmt: skip
    name = row.get("last_bucket_largest")
    if not isinstance(name, str) or not name:
        return ""
    more = int(row["last_bucket_tensors"]) - 1
    held = f"{name} and {more} more" if more > 0 else name
    alone = ms_text(row["last_allreduce_ms"])
    return f"; the last bucket, {row['last_bucket_mb']:.3g} MiB ({held}), alone takes {alone} ms"


def one_bucket_at_every_cap(frames: Any) -> str:
    """'big.weight's bucket, ready at 99% of backward, is most of what is exposed at every cap': where, in each
    frame of predictions per cap, one gradient's bucket exposes over half the exposed communication at every cap
    (why no cap does better than another); '' else."""
    rows = [row for frame in frames for _, row in frame.iterrows()]
    if not rows or any("exposing_largest" not in row for row in rows):
        return ""
    names = {row["exposing_largest"] for row in rows}
    if (
        len(names) != 1
        or not next(iter(names))
        or any(row["exposing_ms"] <= row["exposed_comm_ms"] / 2 for row in rows)
    ):
        return ""
    share = min(row["exposing_ready"] for row in rows)
    when = "as backward ends" if share >= 0.9995 else f"at {share:.0%} of backward"
    return f"{names.pop()}'s bucket, ready {when}, is most of what is exposed at every cap"


def predicted_step(row: Any, *, backward_ms: float, own_ms: float = 0.0, backward_said: bool = False) -> str:
    """Which predicted part makes a step what it is (a row of the step-time model: step_ms, exposed_comm_ms,
    comm_ms, bucket_cap_mb; on a cluster comm_algorithms, NCCL's pick, said beside their cost): compute
    (communication hidden but for a trace), the network's bandwidth (all-reduces longer than the backward that could
    hide them), or the gradients ready last (their all-reduces run after backward); and DDP's own work (`own_ms`,
    measured at one rank) where it costs more than what is exposed. `backward_said`: the line said backward's ms
    already, so a hidden step's words leave them out."""
    exposed, comm, step = row["exposed_comm_ms"], row["comm_ms"], row["step_ms"]
    at = f" at {row['bucket_cap_mb']:g} MiB" if "bucket_cap_mb" in row else ""
    run_as = row.get("comm_algorithms") if "comm_algorithms" in row else None  # a cluster's: NCCL's algorithm
    at += f", {run_as}" if isinstance(run_as, str) and run_as else ""
    if exposed < 0.01 * step:
        behind = "" if backward_said else f" ({ms_text(backward_ms)} ms)"
        part = (f"compute: the all-reduces ({ms_text(comm)} ms a step{at}) hide behind backward{behind} but for "
                f"{ms_text(exposed)} ms")  # fmt: skip
    elif comm > backward_ms:
        part = (f"bandwidth: the all-reduces take {ms_text(comm)} ms a step{at}, more than the backward "
                f"({ms_text(backward_ms)} ms) that can hide them: {ms_text(exposed)} ms exposed "
                f"({exposed / step:.0%} of the step)")  # fmt: skip
    else:
        part = (f"the gradients ready last: their all-reduces run after backward ends, {ms_text(exposed)} ms exposed "
                f"({exposed / step:.0%} of the step; all-reduces {ms_text(comm)} ms{at} against backward's "
                f"{ms_text(backward_ms)}){_last_bucket_words(row)}")  # fmt: skip
    if own_ms > exposed:  # the step over the no-communication baseline is then mostly DDP's own work
        part += f"; DDP's own work ({ms_text(own_ms)} ms a step, from its cost at one rank) costs more than that"
    return part

"""The terminal: every line ddpbench prints goes through here. The commands compute and decide;
this module formats and writes. Results on stdout; errors and warnings on stderr, one line each.
A run's progress is a line per finished configuration, always; on a terminal also a bar with the
current configuration and an ETA (tqdm). Off a terminal (CI, logs, pipes) the bar stays away, so
logs hold only the lines.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from harness.analysis import agreement, stats
from harness.config.grid import Configuration
from harness.results.values import options_words

if TYPE_CHECKING:  # pandas is imported where a table is printed: `--help` and errors stay quick
    import pandas as pd


def _print(line: str = "", *, file: TextIO | None = None) -> None:
    """Every line goes out here, flushed at once (a long run's lines must show as they happen). When the
    reader has gone (`ddpbench bench … | head -3`), the rest is dropped quietly: the run goes on and
    writes its results and summary, it only stops talking."""
    stream = file if file is not None else sys.stdout
    try:
        print(line, file=stream, flush=True)
    except BrokenPipeError:
        _reader_gone(stream)


def _reader_gone(stream: TextIO) -> None:
    """Point the stream's descriptor at /dev/null: later lines, and the interpreter's last flush, go nowhere."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, stream.fileno())
    finally:
        os.close(devnull)


def say(line: str) -> None:
    """One line on stdout."""
    _print(line)


def say_err(line: str) -> None:
    _print(line, file=sys.stderr)


def error(message: str) -> None:
    say_err(f"ddpbench: error: {message}")


def warning(message: str) -> None:
    say_err(f"ddpbench: warning: {message}")


def ddpbench_command() -> str:
    """How to call ddpbench again from this shell: `ddpbench` when that is on PATH and is this one, else
    the script that is running (e.g. `.venv/bin/ddpbench`, relative to the working directory), else
    `python -m harness.cli` with this interpreter. A hint the user copies must be a command that works."""
    import os
    import shutil

    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    on_path = shutil.which("ddpbench")
    if script is not None and script.name == "ddpbench" and script.is_file():
        if on_path and Path(on_path).resolve() == script.resolve():
            return "ddpbench"
        return _relative(script, Path(os.getcwd()))
    if on_path:
        return "ddpbench"
    return f"{_relative(Path(sys.executable), Path(os.getcwd()))} -m harness.cli"


def _relative(path: Path, cwd: Path) -> str:
    try:
        return str(Path(path).absolute().relative_to(cwd))
    except ValueError:
        return str(Path(path).absolute())


def resume_hint(run_id: str, results: Path) -> str:
    return f"{ddpbench_command()} bench --resume {run_id} --results {results}"


def bytes_text(count: float) -> str:
    for unit, scale in (("GB", 1024**3), ("MB", 1024**2), ("KB", 1024)):
        if count >= scale:
            return f"{count / scale:g} {unit}"
    return f"{count:g} B"


def options_text(options_json: str | None) -> str:
    words = options_words(options_json)
    return f" {words}" if words else ""


# --- bench --------------------------------------------------------------------------------------


def describe_row(row: dict) -> str:
    """A finished configuration in one line: its time and parity, or why it did not run."""
    label = f"w{row['world_size']} {row['workload']}/{row['size']} {row['impl']}{options_text(row['impl_options'])}"
    if row.get("repeat"):  # counted from 1, as "after 3 repeat(s)" counts them (config ids and logs: r0, r1, …)
        label += f" (repeat {row['repeat'] + 1})"
    if row["status"] != "ok":
        kind = f" ({row['error_kind']})" if row.get("error_kind") else ""
        return f"{label}: {row['status'].upper()}{kind} {row['error']}"
    parity = {True: "parity ok", False: "PARITY FAILED", None: "parity not judged"}[row["parity_ok"]]
    return (
        f"{label}: {row['step_ms_median']:.2f} ms/step (p10 {row['step_ms_p10']:.2f}, p90 {row['step_ms_p90']:.2f}), "
        f"{row['samples_per_s']:.0f} samples/s{communication_text(row)}, {parity}"
    )


def communication_text(row: dict) -> str:
    """', comm 40.6 ms/step mean (27.4 exposed, 33% hidden)' where the strategy's collectives were timed: means
    over the measured steps (comm_ms, exposed_comm_ms), where the step time before it is a median."""
    comm, exposed, hidden = (row.get(k) for k in ("comm_ms", "exposed_comm_ms", "overlap_efficiency"))
    if comm is None or comm != comm or not comm > 0:  # not measured (None/NaN), or no communication
        return ""
    share = f", {hidden:.0%} hidden" if hidden is not None and hidden == hidden else ""
    return f", comm {comm:.1f} ms/step mean ({exposed:.1f} exposed{share})"


class Progress:
    """The launcher's callbacks: `written` when a configuration is on disk, `tick` while one runs."""

    def __init__(self, run: Path, pending: list[Configuration], *, done: int = 0, stream: TextIO | None = None):
        self._run = run
        self._pending = list(pending)
        self._done = done
        self._total = done + len(pending)
        self._stream = stream if stream is not None else sys.stdout
        self._bar = None
        self.decided: set[str] = set()  # under --repeats auto, the verdicts the last round found decided
        if self._stream.isatty() and pending:
            from tqdm import tqdm

            self._bar = tqdm(total=self._total, initial=done, unit="config", file=self._stream, dynamic_ncols=True)
            self._show_current()

    def _show_current(self) -> None:
        if self._bar is not None and self._pending:
            self._bar.set_description_str(f"running {self._pending[0].label()}")

    def written(self, cfg: Configuration) -> None:
        from harness.results import store

        self._done += 1
        self._pending = [c for c in self._pending if c.config_id != cfg.config_id]
        line = f"[{self._done}/{self._total}] {describe_row(store.read_config_row(self._run, cfg.config_id))}"
        if self._bar is None:
            _print(line, file=self._stream)
            return
        self._bar.write(line, file=self._stream)
        self._bar.update(1)
        self._show_current()

    def extend(self, more: list[Configuration]) -> None:
        """More configurations to come (a round of `--repeats auto`)."""
        self._pending += list(more)
        self._total += len(more)
        if self._bar is not None:
            self._bar.total = self._total
            self._bar.refresh()
            self._show_current()

    def tick(self) -> None:
        """Show how far the current configuration is (steps done), on a terminal only."""
        from harness.handoff.progress import read_step_progress

        if self._bar is None or not self._pending:
            return
        state = read_step_progress(self._run)
        if state and state.get("config_id") == self._pending[0].config_id and state.get("total"):
            what = "parity reference step" if state.get("phase") == "parity" else "step"
            self._bar.set_postfix_str(f"{what} {state['step']}/{state['total']}")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def fixed_cost_split(wall_s: float, seconds: dict[str, float], *, configurations: int) -> None:
    """Where the run's wall time went, phase by phase (harness.handoff.costs), the rest as `other`."""
    from harness.handoff.costs import PHASES

    if not seconds:
        return
    other = wall_s - sum(seconds.values())  # the launcher between launches, polling, the last read
    parts = [f"{phase} {seconds[phase]:.1f}" for phase in PHASES if seconds.get(phase, 0.0) >= 0.05]
    say(f"ddpbench: where the {wall_s:.0f} s went (s): {', '.join(parts)}, other {max(other, 0.0):.1f}")
    fixed = wall_s - seconds.get("steps", 0.0)
    if configurations:
        say(f"ddpbench: fixed cost {fixed:.0f} s beyond the timed steps: {fixed / configurations:.1f} s per "
            f"configuration ({configurations})")  # fmt: skip


def recommendations(frame: pd.DataFrame) -> None:
    from harness.analysis import sweep

    say(f"ddpbench: bucket caps (a cap is recommended only when it beats the {stats.REFERENCE_CAP_MB:g} MiB cap "
        f"significantly over repeats and by at least {stats.DEFAULT_THRESHOLD:.0%}; docs/statistics.md):")  # fmt: skip
    for _, row in frame.iterrows():
        _print(f"  {sweep.describe(row)}")


def duration_text(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def verdict_round(standing, next_round: list, *, decided_before: set[str] | frozenset = frozenset()) -> None:
    """`--repeats auto`'s word after each round: how many verdicts are decided (and reopened: `decided_before`
    holds those decided a round earlier), what runs next and how long the rest may take; after the last,
    every verdict: the decided ones' words, then the open ones and what they would need."""
    total, still = len(standing.verdicts), standing.open
    if not total:
        say("ddpbench: repeats auto: nothing to decide (no bucket-cap sweep, no strategy against the reference)")
        return
    decided = total - len(still)
    head = f"ddpbench: repeats auto: {decided} of {total} verdicts decided after {standing.repeats} repeat(s)"
    if reopened := [v for v in still if v.subject in decided_before]:  # more repeats, asked for by another verdict
        head += f" ({len(reopened)} reopened: the repeats another verdict asked for widened the interval)"
    if next_round:
        running = [v for v in still if not v.given_up]
        given_up = f", {len(still) - len(running)} given up as out of reach" if len(running) < len(still) else ""
        until = "to reach --max-repeats (some need more)" if standing.beyond_max else "to decide the rest"
        eta = f"; about {duration_text(standing.estimate_s)} {until} at the spread seen" if standing.estimate_s else ""
        say(f"{head}; {len(next_round)} more configuration run(s) for the {len(running)} open{given_up}{eta}")
        return
    why = {"budget": "the next round would end past --budget", "max-repeats": "--max-repeats reached",
           "out of reach": "out of reach within --max-repeats"}.get(standing.stopped_by or "", "")  # fmt: skip
    say(f"{head}; {len(still)} left open{f' ({why})' if why else ''}. Every verdict:" if still
        else f"{head}: every verdict decided:")  # fmt: skip
    for verdict in [*(v for v in standing.verdicts if v.decided), *still]:
        say(f"  {verdict.line()}")


def why_slower(lines: list[str]) -> None:
    """Each configuration's cost over the baseline, taken apart (harness.analysis.why), at the largest world size."""
    if lines:
        say("ddpbench: why each is slower than one rank alone (measured parts of the gap; docs/output.md):")
        for line in lines:
            _print(f"  {line}")


# --- compare ------------------------------------------------------------------------------------


def comparison(frame: pd.DataFrame, *, threshold: float) -> None:
    """A line per matched configuration: the ratio, its interval, the verdict, how many repeats a
    decision at the threshold needs when the runs had fewer, and any noise behind it."""
    for r in frame.itertuples():
        interval = "no interval: one repeat" if r.ratio_ci_low != r.ratio_ci_low else (
            f"95% CI {r.ratio_ci_low:.3f}-{r.ratio_ci_high:.3f}")  # fmt: skip
        verdict = r.verdict
        if verdict == "too few repeats to tell":
            have = min(r.base_repeats, r.new_repeats)
            verdict += f" (have {have}, {stats.needed_text(r.repeats_needed)} at {threshold:.0%})"
        noise = f" [{r.noise}]" if r.noise else ""
        _print(f"w{r.world_size} {r.workload}/{r.size} {r.impl}{options_text(r.impl_options)}: {r.base_ms:.2f} -> "
              f"{r.new_ms:.2f} ms, ratio {r.ratio:.3f} ({interval}): {verdict}{noise}")  # fmt: skip


# --- collectives --------------------------------------------------------------------------------


def collectives_table(frame: pd.DataFrame, contention: pd.DataFrame) -> None:
    """Per world size and collective: bus bandwidth at the largest size, the peak, and correctness;
    then how much compute and all-reduce slow each other down when they overlap."""
    for (world, op), rows in frame.groupby(["world_size", "op"], sort=True):
        best = rows.loc[rows["busbw_gbps"].idxmax()]
        largest = rows.loc[rows["bytes"].idxmax()]
        wrong = ", ".join(bytes_text(b) for b in rows.loc[~rows["correct"], "bytes"])
        verdict = f"WRONG RESULTS at {wrong}" if wrong else "all correct"
        say(f"  w{world} {op:<14} busbw {largest['busbw_gbps']:.3f} GB/s at {bytes_text(largest['bytes'])} "
            f"(peak {best['busbw_gbps']:.3f} at {bytes_text(best['bytes'])}); {verdict}")  # fmt: skip
    for row in contention.itertuples():
        say(f"  w{row.world_size} overlap: compute {row.compute_slowdown:.2f}× slower, all-reduce "
            f"{row.comm_slowdown:.2f}× (4 KiB: {row.latency_slowdown:.2f}×) slower while the other runs")  # fmt: skip


# --- predict ------------------------------------------------------------------------------------


def predict_profile(setup: dict, profile, source: str) -> None:
    _print(f"ddpbench predict: {setup['workload']}/{setup['size']}, batch {setup['batch_size']} per rank; {source}: "
          f"forward {profile.forward_s * 1e3:.2f} ms, backward {profile.backward_s * 1e3:.2f} ms, optimizer "
          f"{profile.optimizer_s * 1e3:.2f} ms, {profile.grad_bytes / 2**20:.2f} MiB of gradients "
          f"in {len(profile.grads)} tensors")  # fmt: skip


def contention_text(contention) -> str:
    if contention is None:
        return "contention: not measured"
    latency = f" (latency ×{contention.latency_slowdown:.2f})" if contention.latency_slowdown else ""
    return (f"contention: compute ×{contention.compute_slowdown:.2f}, all-reduce ×{contention.comm_slowdown:.2f}"
            f"{latency} while overlapped")  # fmt: skip


def caps_text(caps: list[float]) -> str:
    """'25 MiB', or 'any of 1, 25 MiB (tied)' when the figures cannot tell them apart."""
    listed = ", ".join(f"{c:g}" for c in caps)
    return f"{listed} MiB" if len(caps) == 1 else f"any of {listed} MiB (tied)"


def predict_table(frame: pd.DataFrame, *, world: int, link, contention) -> None:
    """The network at this world size, then one row per bucket cap and the predicted best (caps within
    agreement.TIE_TOLERANCE of the fastest are tied). `contention` None: none was measured."""
    _print(f"w{world}: all-reduce α {link.alpha_s * 1e6:.1f} µs, busbw {link.busbw_bytes_per_s / 1e9:.3f} GB/s "
          f"({link.source}); {contention_text(contention)}")  # fmt: skip
    _cap_rows(frame, decimals=2)
    best = frame.loc[frame["step_ms"].idxmin()]
    tied = agreement.tied_best(frame["bucket_cap_mb"], frame["step_ms"])
    _print(f"  predicted best cap at w{world}: {caps_text(tied)} ({best['step_ms']:.2f} ms, "
          f"scaling efficiency {best['scaling_efficiency']:.3f})")  # fmt: skip


def _cap_rows(frame: pd.DataFrame, *, decimals: int) -> None:
    _print(f"  {'cap MiB':>8} {'buckets':>8} {'step ms':>9} {'exposed comm ms':>16} {'scaling eff.':>13}")
    for r in frame.itertuples():
        _print(f"  {r.bucket_cap_mb:>8g} {r.buckets:>8} {r.step_ms:>9.{decimals}f} "
              f"{r.exposed_comm_ms:>16.{decimals}f} {r.scaling_efficiency:>13.3f}")  # fmt: skip


def no_validation() -> None:
    _print("validation: this run has no stock bucket-cap sweep at world size ≥ 2 to check the model against")


def validation(key: tuple, group: pd.DataFrame, as_good: list[float] | None, errors: list[tuple[str, dict]]) -> None:
    """One (workload, size, world size) of a run: measured against predicted per cap, the caps the
    sweep found as good as the best, and each model variant's error."""
    import pandas as pd

    workload, size, world = key
    _print(f"validation w{world} {workload}/{size}, measured in the run against predicted "
          f"(raw / raw + contention / calibrated / calibrated + contention):")  # fmt: skip
    for r in group.itertuples():
        variants = (r.predicted_raw_ms, getattr(r, "predicted_raw_contention_ms", None), r.predicted_ms,
                    r.predicted_contention_ms)  # fmt: skip
        predicted = " / ".join("—" if pd.isna(v) else f"{v:.2f}" for v in variants)
        _print(f"  cap {r.bucket_cap_mb:g} MiB: measured {r.measured_ms:.2f} ms, predicted {predicted} ms "
              f"(compute ×{r.compute_scale:.2f}, DDP's own {r.reducer_ms:.1f} ms)")  # fmt: skip
    if as_good is not None:
        _print(f"  measured caps the best does not beat by {stats.DEFAULT_THRESHOLD:.0%} over repeats: "
              f"{', '.join(f'{c:g}' for c in as_good)} MiB")  # fmt: skip
    for label, error in errors:
        apart = error["best_cap_grid_steps"]
        said = ("agrees" if apart == 0 else "agrees: a cap the sweep calls as good" if agreement.agrees(error, as_good)
                else f"{apart} grid step(s) apart")  # fmt: skip
        _print(f"  {label}: MAPE {error['mape']:.1%}, best cap measured {caps_text(error['best_measured_caps_mb'])} "
              f"vs predicted {caps_text(error['best_predicted_caps_mb'])} ({said})")  # fmt: skip


# --- predict on a cluster -------------------------------------------------------------------------


def nccl_fit(fit, logs) -> None:
    """What the fit read, what it moved, and its error on the rows it used."""
    for log in logs:
        _print(f"ddpbench predict: nccl-tests log {log.path}: {log.collective}, {log.ranks} ranks on {log.nodes} "
              f"node(s), {len(log.rows)} rows")  # fmt: skip
    moved = ", ".join(f"{field} {value:.4g}" for field, value in fit.fitted.items())
    worst = max(fit.errors, key=lambda e: abs(e[2]))
    size = f"{worst[1] / 2**20:g} MiB" if worst[1] >= 2**20 else f"{worst[1] / 2**10:g} KiB"
    _print(f"ddpbench predict: fitted {moved}; busbw error on the {len(fit.errors)} rows ≥ 64 KiB: mean "
          f"{fit.mean_abs:.1%}, worst {worst[2]:+.1%} ({size} in {worst[0]})")  # fmt: skip


def cluster_collectives(cluster, choices) -> None:
    """One node count's predictions as nccl-tests prints its table, with NCCL's algorithm and protocol."""
    first = choices[0]
    _print(f"# {cluster.name}: {first.collective} on {first.nodes} node(s) × {cluster.gpus_per_node} GPUs = "
          f"{first.ranks} ranks (predicted: NCCL's algorithms on the profile's bandwidths)")  # fmt: skip
    _print(f"# {'size':>10s}  {'count':>12s}  {'type':>8s}  {'time':>9s}  {'algbw':>7s}  {'busbw':>7s}  "
          "algorithm  protocol")  # fmt: skip
    _print(f"# {'(B)':>10s}  {'(elements)':>12s}  {'':>8s}  {'(us)':>9s}  {'(GB/s)':>7s}  {'(GB/s)':>7s}")
    for c in choices:
        _print(f"{c.nbytes:12d}  {c.nbytes // 4:12d}  {'float':>8s}  {c.time_us:9.2f}  {c.algbw_gbps:7.2f}  "
              f"{c.busbw_gbps:7.2f}  {c.algorithm:<9s}  {c.protocol}")  # fmt: skip


def cluster_steps(cluster, frame: pd.DataFrame, *, world: int, nodes: int, tied: list[float],
                  margin: float | None) -> None:  # fmt: skip
    """Step time per cap on `nodes` nodes, and the best caps (`tied`) with their margin over the fastest cap
    not tied with them (None: every cap is tied)."""
    _print(f"w{world} = {nodes} node(s) of {cluster.name} (NCCL's algorithms on the profile's bandwidths):")
    _cap_rows(frame, decimals=3)
    best = frame.loc[frame["step_ms"].idxmin()]
    ahead = ", every cap tied" if margin is None else f", {margin:.1%} ahead of the next cap"
    _print(f"  predicted best cap at w{world}: {caps_text(tied)} ({best['step_ms']:.3f} ms, scaling "
          f"efficiency {best['scaling_efficiency']:.3f}{ahead})")  # fmt: skip

"""nccl-tests logs in and out: its text table and its JSON (`-J FILE.json`), and a cluster profile fitted to them.

A log says the collective (`# Collective test starting: all_reduce_perf`, or the program in the
JSON's `args`), the ranks and their hosts (`#  Rank  3 Group  0 Pid … on host-1 device …`), and one
row per size with time, algbw and busbw, out of place then in place. The ranks are read from
busbw/algbw where a row has both (nccl-tests' own factor), else from the rank lines; the nodes
from the distinct hosts. The fit moves only the profile's levels (one node: the ring's and NVLS's
bandwidths and one scale on NCCL's latencies; several: the network's bandwidth and latency), pulls
each weakly towards the profile's value, and reports its own error on the rows it used.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path

from harness.perfmodel.clusters import nccl
from harness.perfmodel.clusters.cluster import Cluster
from harness.protocols import ConfigError

PRIOR_WEIGHT = 0.01  # per level's log, against each row's log ratio: see `fit`
FIT_MIN_BYTES = 64 * 1024  # below this a collective is all latency: bandwidths cannot be read from it
FIT_BOUNDS = (0.01, 1e5)  # each fitted level's range (GB/s, µs, a scale): one at its edge was not pinned by the rows
PROGRAMS = {"all_reduce_perf": "all_reduce", "all_gather_perf": "all_gather", "reduce_scatter_perf": "reduce_scatter"}
GPU_PROFILES = (("H200", "dgx-h200"), ("H100", "dgx-h100"), ("A100", "dgx-a100"), ("V100", "dgx1-v100"))


@dataclasses.dataclass(frozen=True)
class Row:
    nbytes: int
    time_us: float
    algbw_gbps: float
    busbw_gbps: float


@dataclasses.dataclass(frozen=True)
class Log:
    path: str
    collective: str
    ranks: int
    nodes: int
    gpu: str  # the device name of its first rank line, "" when it has none
    rows: tuple[Row, ...]
    named: bool = True  # whether the log (or its file's name) says its collective; else it was given


# ---------------------------------------------------------------- reading


def read(path: Path, *, nodes: int | None = None, collective: str | None = None) -> Log:
    """A text or JSON nccl-tests log; a file that is neither raises ConfigError naming it. `collective`:
    what a log that names none is taken for (older nccl-tests and pasted tables print no
    `# Collective test starting:` line); without it such a log is refused."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"--nccl-tests {str(path)!r}: {getattr(error, 'strerror', None) or error}") from None
    log = _from_json(text, str(path)) if text.lstrip().startswith("{") else _from_text(text, str(path))
    if not log.rows:
        raise ConfigError(f"--nccl-tests {str(path)!r} has no result rows; give nccl-tests' output "
                          "(its table, or its -J JSON)")  # fmt: skip
    if not log.collective:
        if collective is None:
            raise ConfigError(f"--nccl-tests {str(path)!r} does not say its collective (no '# Collective test "
                              f"starting:' line, and its name holds none of {', '.join(PROGRAMS)}); "
                              "give it with --collective")  # fmt: skip
        ranks = _ranks_from_rows(collective, log.rows) or log.ranks
        log = dataclasses.replace(log, collective=collective, ranks=ranks, named=False)
    return dataclasses.replace(log, nodes=nodes) if nodes else log


RANK_LINE = re.compile(r"#\s+Rank\s+\d+\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]\s*(.*)")


def _refuse_other_programs(program: str, path: str) -> None:
    """A log that names its program, one ddpbench does not read (sendrecv_perf, alltoall_perf …): taken for the
    collective --collective names, it was fitted as an all-reduce."""
    if program.endswith("_perf") and not any(name in program for name in PROGRAMS):
        raise ConfigError(f"--nccl-tests {path!r} is {program}'s log; ddpbench reads {', '.join(PROGRAMS)}")


def _from_text(text: str, path: str) -> Log:
    program = re.search(r"Collective test starting:\s*(\S+)", text)
    if program:
        _refuse_other_programs(program.group(1), path)
    hosts, gpu, rows, layout = [], "", [], None
    for number, line in enumerate(text.splitlines(), start=1):
        if match := RANK_LINE.match(line):
            hosts.append(match.group(1))
            gpu = gpu or match.group(2).strip()
        elif line.lstrip().startswith("#"):  # a table's header sets the layout; its footer ends it
            layout = None if TABLE_END.match(line) else _header_layout(line) or layout
        elif line.strip() and line.split()[0].isdigit():
            rows.append(_row_from_tokens(line.split(), f"--nccl-tests {path!r} line {number}", layout))
    return _log(path, program.group(1) if program else Path(path).name, hosts, gpu, rows)


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where a row's values are, from the table's header (`#  size count type redop root time algbw busbw #wrong
    …`): nccl-tests adds columns by its flags (a timestamp, per-iteration times, `cputime` for `time`), and
    older versions have no root column."""

    start: int  # the out-of-place time's column
    wrong: tuple[int, ...]  # every #wrong column
    width: int  # the header's columns: a row has as many, or one more (a timestamp is a date and a time)


TIME_COLUMNS = ("time", "cputime")
TABLE_END = re.compile(r"#\s*(Avg bus bandwidth|Out of bounds values|Collective test)")


def _header_layout(line: str) -> Layout | None:
    names = line.lstrip("# ").split()
    if names[:1] != ["size"] or "busbw" not in names or not any(t in names for t in TIME_COLUMNS):
        return None
    start = next(i for i, name in enumerate(names) if name in TIME_COLUMNS)
    return Layout(start, tuple(i for i, name in enumerate(names) if name == "#wrong"), len(names))


def _row_from_tokens(tokens: list[str], where: str, layout: Layout | None = None) -> Row:
    """A result row: its out-of-place `time algbw busbw`, where the header's `layout` puts them (columns after
    them, a timestamp or per-iteration times, are not read); without a header (a pasted table), `size count type
    [redop [root]]` then `time algbw busbw #wrong` out of place and in place (a pasted table may hold the first
    four alone; nccl-tests before 2.10 had no root column, older all-gather rows no redop). A row cut short or
    garbled (a log truncated mid-row, a time that is not a number), or as wide as no row under its header is, is
    refused by its line: read by its last columns, it gave a time of −1 (the root column) or vanished unsaid."""
    start = layout.start if layout else _start_without_header(tokens)
    if layout is not None and not layout.width <= len(tokens) <= layout.width + 1:
        raise ConfigError(f"{where} has {len(tokens)} columns where its table's header has {layout.width}: "
                          f"{' '.join(tokens)[:80]}; give each table with its own header")  # fmt: skip
    if len(tokens) - start < 4 or (layout is None and len(tokens) - start not in (4, 8)):
        raise ConfigError(f"{where} is not an nccl-tests result row (size count type redop root, then time algbw "
                          f"busbw #wrong once or twice): {' '.join(tokens)[:80]}")  # fmt: skip
    block = tokens[start : start + 3]
    columns = layout.wrong if layout else (start + 3, start + 7)  # out of place, in place ('N/A': -c 0)
    wrong = [tokens[i] for i in columns if i < len(tokens)]
    if any(_count(w) >= 1 for w in wrong):
        raise ConfigError(f"{where}: nccl-tests counted wrong results there (#wrong {', '.join(wrong)}): the "
                          "collective did not compute right; give a log whose checks passed")  # fmt: skip
    try:
        row = Row(int(tokens[0]), *(float(value) for value in block))
    except ValueError:
        row = None
    if row is None or not (row.time_us > 0 and row.algbw_gbps >= 0 and row.busbw_gbps >= 0):
        raise ConfigError(f"{where}: time, algbw and busbw must be numbers (time > 0): {' '.join(block)}")
    return row


def _count(wrong: str) -> float:
    """A #wrong cell: nccl-tests prints it with %g (0, 1024, 1e+06), 'N/A' where it did not check (-c 0); before
    2.13 the column held the largest error instead, within its tolerance (1e-07): no count, so none wrong."""
    try:
        return float(wrong)
    except ValueError:
        return 0.0


def _start_without_header(tokens: list[str]) -> int:
    """The out-of-place time's column of a row with no header above it: after `size count type`, the reduction
    op where one is, and the root, an integer, where one more column than a result needs follows the op (a time
    of 10 ms or more is printed without a point too; older logs have no root column)."""
    start = 3
    if len(tokens) > start and tokens[start].isalpha():  # the reduction op (sum, none …)
        start += 1
        if re.fullmatch(r"-?\d+", tokens[start] if len(tokens) > start else "") and len(tokens) - start in (5, 9):
            start += 1
    return start


def _from_json(text: str, path: str) -> Log:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(f"--nccl-tests {path!r} is not valid JSON: {error}") from None
    program = Path(str((data.get("args") or [path])[0])).name
    _refuse_other_programs(program, path)
    devices = (data.get("config") or {}).get("devices") or data.get("devices") or []  # -J writes them in config
    rows = []
    for index, result in enumerate(data.get("results") or []):
        block = result.get("out_of_place") or result.get("in_place")
        if not block:
            continue
        counted = [b["nwrong"] for b in (result.get("out_of_place"), result.get("in_place"))
                   if isinstance(b, dict) and isinstance(b.get("nwrong"), (int, float))]  # fmt: skip
        if any(n > 0 for n in counted):  # as the text's #wrong columns, out of place and in place
            raise ConfigError(f"--nccl-tests {path!r}: results[{index}]: nccl-tests counted wrong results there "
                              f"(nwrong {', '.join(f'{n:g}' for n in counted)}); give a log whose checks "
                              "passed")  # fmt: skip
        time = block.get("time", block.get("cpu_time"))  # cpu_time: its -C 1 (the host's time, not the GPU's)
        try:
            rows.append(Row(int(result["size"]), float(time), float(block["alg_bw"]), float(block["bus_bw"])))
        except (KeyError, TypeError, ValueError) as error:
            raise ConfigError(f"--nccl-tests {path!r}: results[{index}] is not an nccl-tests result "
                              f"(size, out_of_place time, alg_bw, bus_bw): {error!r}") from None  # fmt: skip
    hosts = [str(d.get("hostname", "")) for d in devices]
    return _log(path, program, hosts, str(devices[0].get("device_info", "")) if devices else "", rows)


def _log(path: str, program: str, hosts: list[str], gpu: str, rows: list[Row]) -> Log:
    """The log's fields; its collective "" when the program (or, failing it, the file's name) names none."""
    collective = next((c for name, c in PROGRAMS.items() if name in program), "")
    ranks = (_ranks_from_rows(collective, rows) if collective else 0) or len(hosts)
    return Log(path, collective, ranks, max(1, len(set(hosts))), gpu, tuple(rows))


def _ranks_from_rows(collective: str, rows: Sequence[Row]) -> int:
    """n from busbw/algbw = 2(n−1)/n (all-reduce) or (n−1)/n, on the largest row (its ratio is the
    least rounded)."""
    usable = [r for r in rows if r.algbw_gbps > 0 and r.busbw_gbps > 0]
    if not usable:
        return 0
    ratio = max(usable, key=lambda r: r.nbytes)
    factor = ratio.busbw_gbps / ratio.algbw_gbps / (2 if collective == "all_reduce" else 1)
    return round(1 / (1 - factor)) if factor < 1 else 0


def logs_from_collectives(run: Path) -> list[Log]:
    """A `ddpbench collectives` run read as nccl-tests logs: one per collective and world size, its
    rows that passed their check; one node (the command measures the machine it runs on)."""
    from harness.results import model_tables

    frame = model_tables.read_collectives(run)
    frame = frame[frame["correct"].astype(bool) & frame["op"].isin(PROGRAMS.values())]
    meta = model_tables.read_collectives_meta(run)
    logs = []
    for (op, world), group in frame.groupby(["op", "world_size"]):
        rows = tuple(Row(int(r.bytes), float(r.time_us), float(r.algbw_gbps), float(r.busbw_gbps))
                     for r in group.sort_values("bytes").itertuples())  # fmt: skip
        logs.append(Log(f"{run.name}/{op}-w{world}", str(op), int(world), 1, str(meta.get("gpu_name", "")), rows))
    return logs


def profile_for_gpu(gpu: str) -> str | None:
    """The built-in profile for a log's device name (NVIDIA H100 80GB HBM3 → dgx-h100); None for a PCIe card (H100
    PCIe, A100-PCIE-40GB, H100 NVL): the built-ins are SXM boards on NVLink, whose NVLS a PCIe node has not."""
    return None if is_pcie_card(gpu) else next((name for model, name in GPU_PROFILES if model in gpu.upper()), None)


def is_pcie_card(gpu: str) -> bool:
    return "PCIE" in gpu.upper() or re.search(r"\bNVL\b", gpu.upper()) is not None


# ---------------------------------------------------------------- writing


def write_text(choices: Sequence[nccl.Choice]) -> str:
    """Rows as nccl-tests prints them (out of place; in place the same), so that its readers read them."""
    first = choices[0]
    program = {c: p for p, c in PROGRAMS.items()}[first.collective]
    lines = [f"# Collective test starting: {program}",
             f"# predicted by ddpbench: {first.ranks} ranks on {first.nodes} node(s)",
             "#", "# Using devices"]  # fmt: skip
    per_node = max(1, first.ranks // max(1, first.nodes))
    for rank in range(first.ranks):
        lines.append(f"#  Rank {rank:2d} Group  0 Pid {rank:6d} on {f'node-{rank // per_node}':>10s} device "
                     f"{rank % per_node:2d} [0000:00:00] model")  # fmt: skip
    block = f"{'time':>7s}  {'algbw':>6s}  {'busbw':>6s}  {'#wrong':>6s}"
    columns = f"# {'size':>10s}  {'count':>12s}  {'type':>8s}  {'redop':>6s}  {'root':>6s}  {block}  {block}"
    lines += ["#", f"# {'':>48s}           out-of-place                       in-place", columns]
    for c in choices:
        body = f"{_field(c.time_us, 7)}  {_field(c.algbw_gbps, 6)}  {_field(c.busbw_gbps, 6)}  {'N/A':>6s}"
        lines.append(f"{c.nbytes:12d}  {c.nbytes // 4:12d}  {'float':>8s}  {'sum':>6s}  {-1:6d}  {body}  {body}")
    average = sum(c.busbw_gbps for c in choices) / len(choices)
    lines += [f"# {'Avg bus bandwidth':<20s} : {average:g}", "#"]
    return "\n".join(lines) + "\n"


def _field(value: float, width: int) -> str:
    """nccl-tests' getFloatStr: two decimals, fewer when the number is wide."""
    for decimals in (2, 1, 0):
        text = f"{value:{width}.{decimals}f}"
        if len(text) <= width:
            return text
    return f"{value:{width}.1e}"


# ---------------------------------------------------------------- the fit


@dataclasses.dataclass(frozen=True)
class Fit:
    cluster: Cluster
    fitted: dict[str, float]  # profile field → fitted value (GB/s, µs; latency_scale: × NCCL's latencies)
    errors: tuple[tuple[str, int, float], ...]  # (log, bytes, predicted/measured − 1) on the rows used

    @property
    def worst(self) -> float:
        return max((abs(e) for *_, e in self.errors), default=0.0)

    @property
    def mean_abs(self) -> float:
        return sum(abs(e) for *_, e in self.errors) / len(self.errors) if self.errors else 0.0


def _fields_for(logs: Sequence[Log], base: Cluster) -> list[str]:
    """One node's logs move NCCL's latencies (by one factor) and the node's bandwidths; several
    nodes' logs the network's latency (NCCL's latencyInter) and bandwidth."""
    fields = []
    if any(log.nodes == 1 for log in logs):
        fields += ["latency_scale", "intra_busbw_gbps"]
        if base.nvls_busbw_gbps > 0 and "nvls" in base.algorithms:
            fields.append("nvls_busbw_gbps")
    if any(log.nodes > 1 for log in logs):
        fields += ["inter_latency_us", "inter_busbw_gbps"]
    return fields


def _search_start(base: Cluster, field: str) -> float:
    """The base's value of a level, lifted off 0 (the search runs in log space): 1 µs of latency."""
    return max(getattr(base, field), 1.0 if field == "inter_latency_us" else 0.01)


def predicted(cluster: Cluster, log: Log, nbytes: int) -> nccl.Choice:
    return nccl.choose(cluster, log.collective, nbytes, nodes=log.nodes, ranks=log.ranks)


def fit(base: Cluster, logs: Sequence[Log], *, name: str) -> Fit:
    """The base profile's bandwidth levels that make the model closest to the logs' busbw (least
    squares on log ratios, every row ≥ 64 KiB alike, with a weak pull of each level towards the
    base's value), and the error on those rows."""
    from scipy.optimize import least_squares

    points = [(log, row) for log in logs for row in log.rows if row.nbytes >= FIT_MIN_BYTES and row.busbw_gbps > 0]
    if not points:
        raise ConfigError(f"--nccl-tests: no rows of {FIT_MIN_BYTES // 1024} KiB or more to fit bandwidths to")
    fields = _fields_for(logs, base)

    def cluster_at(log_values) -> Cluster:
        values = {f: float(math.exp(v)) for f, v in zip(fields, log_values, strict=True)}
        return dataclasses.replace(base, name=name, **values)

    # A weak pull towards the base profile: a level no row is limited by (a ring under NVLS, say)
    # stays at the profile's value instead of drifting wherever the search leaves it, while a level
    # the rows pin barely feels it (a 1 % misfit on one row weighs as much as moving a level 2.7×).
    # A base of 0 (InfiniBand's added latency) has no scale to pull towards in log space: no pull.
    start = {f: _search_start(base, f) for f in fields}
    pulled = [(i, math.log(start[f])) for i, f in enumerate(fields) if getattr(base, f) > 0]

    def residuals(log_values):
        cluster = cluster_at(log_values)
        misfit = [math.log(predicted(cluster, log, row.nbytes).busbw_gbps / row.busbw_gbps) for log, row in points]
        return misfit + [PRIOR_WEIGHT * (log_values[i] - anchor) for i, anchor in pulled]

    # Starts: the base profile's values; its bandwidths halved below the logs' peak (a level that does
    # not limit the model at the base value is flat there: the search would not leave it); and, with
    # logs of one node and of several, the node fitted to its own logs first and the network to the
    # rest (below). The solution that fits best wins.
    peak = max(row.busbw_gbps for _, row in points)
    starts = [start, {f: (min(v, peak) / 2 if f.endswith("_gbps") else v) for f, v in start.items()}]
    starts += _staged_start(base, logs, name=name)
    cap = {"intra_busbw_gbps": base.link_gbps or FIT_BOUNDS[1]}  # a ring no faster than its links: else refused
    low, high = math.log(FIT_BOUNDS[0]), [math.log(cap.get(f, FIT_BOUNDS[1])) for f in fields]
    solutions = [least_squares(residuals, [min(max(math.log(start[f]), low), high[k]) for k, f in enumerate(fields)],
                               bounds=([low] * len(fields), high)) for start in starts]  # fmt: skip
    cluster = cluster_at(min(solutions, key=lambda solution: solution.cost).x)
    errors = tuple(
        (Path(log.path).name, row.nbytes, predicted(cluster, log, row.nbytes).busbw_gbps / row.busbw_gbps - 1)
        for log, row in points
    )
    found = Fit(cluster, {f: getattr(cluster, f) for f in fields}, errors)
    return dataclasses.replace(found, cluster=_said_fitted(cluster, logs, found))


SOURCE_KEYS = {"intra_busbw_gbps": "intra.busbw_gbps", "nvls_busbw_gbps": "intra.nvls_busbw_gbps",
               "inter_busbw_gbps": "inter.busbw_gbps", "inter_latency_us": "inter.latency_us",
               "latency_scale": "latency_scale"}  # fmt: skip
"""A fitted field's key in a profile's [sources]: where its number now comes from."""


def _said_fitted(cluster: Cluster, logs: Sequence[Log], found: Fit) -> Cluster:
    """The fitted profile with each fitted number's source the logs (and the fit's error), not the base
    profile's datasheet: a page that shows the profile says where its numbers came from."""
    names = ", ".join(dict.fromkeys(Path(log.path).name for log in logs))
    said = (
        f"{len(logs)} nccl-tests log(s) of up to {max(log.nodes for log in logs)} node(s) ({names}): busbw "
        f"error on their rows ≥ {FIT_MIN_BYTES // 1024} KiB mean {found.mean_abs:.1%}, worst {found.worst:.1%}"
    )
    sources = {**cluster.sources, **{SOURCE_KEYS[f]: f"fitted to {said}" for f in found.fitted}}
    return dataclasses.replace(cluster, sources=sources, fitted_to=said, fitted_nodes=max(log.nodes for log in logs))


def _staged_start(base: Cluster, logs: Sequence[Log], *, name: str) -> list[dict[str, float]]:
    """The node's levels fitted to the one-node logs alone, then the network's to the others with the
    node's held: one start, when there are logs of both kinds. Fitted together from the base, a slow
    network can be read as a slow ring inside the node (the ring is what crosses nodes, and under NVLS
    no one-node row pins it), which fits the multi-node rows about as well and predicts wrongly."""
    one_node = [log for log in logs if log.nodes == 1]
    if not one_node or len(one_node) == len(logs):
        return []
    try:  # each part needs rows of its own to fit; without them the joint starts are all there is
        node = fit(base, one_node, name=name).fitted
        network = fit(dataclasses.replace(base, **node), [log for log in logs if log.nodes > 1], name=name).fitted
    except ConfigError:
        return []
    return [{**node, **network}]

"""nccl-tests logs in and out: its text table and its JSON (`-J FILE.json`).

A log says the collective (`# Collective test starting: all_reduce_perf`, or the program in the
JSON's `args`), the ranks and their hosts (`#  Rank  3 Group  0 Pid … on host-1 device …`), and one
row per size with time, algbw and busbw, out of place then in place. The ranks are counted from the
rank lines, else (a pasted table) read from busbw/algbw (nccl-tests' own factor, rounded as printed: a
log that stops at 1 MiB read 33 for 32); the nodes from the distinct hosts. A profile fitted to the logs:
`nccltests_fit`.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from pathlib import Path

from harness.perfmodel.clusters import nccl
from harness.protocols import ConfigError

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
        ranks = log.ranks or _ranks_from_rows(collective, log.rows)  # its rank lines, where it has them
        log = dataclasses.replace(log, collective=collective, ranks=ranks, named=False)
    return dataclasses.replace(log, nodes=nodes) if nodes else log


PREDICTED_TITLE = re.compile(rf"#\s*\S.*: ({'|'.join(PROGRAMS.values())}) on (\d+) node\(s\) × \d+ GPUs = (\d+) ranks")
"""`predict --cluster`'s title above each node count's table (console.predictions.cluster_collectives)."""
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
    hosts, gpu, rows, layout, unended, titles = [], "", [], None, False, []
    for number, line in enumerate(text.splitlines(), start=1):
        if match := PREDICTED_TITLE.match(line):
            titles.append((match.group(1), int(match.group(2)), int(match.group(3))))
        elif match := RANK_LINE.match(line):
            hosts.append(match.group(1))
            gpu = gpu or match.group(2).strip()
        elif line.lstrip().startswith("#"):  # a table's header sets the layout; its footer ends it
            layout = None if TABLE_END.match(line) else _header_layout(line) or layout
            unended = unended and "Avg bus bandwidth" not in line
        elif line.strip() and line.split()[0].isdigit():
            rows.append(_row_from_tokens(line.split(), f"--nccl-tests {path!r} line {number}", layout))
            unended = layout is not None  # under nccl-tests' header: its footer must follow (a pasted table has none)
    if titles and not hosts:  # `ddpbench predict --cluster`'s own table: its title says the ranks and nodes
        if len(set(titles)) > 1:
            raise ConfigError(f"--nccl-tests {path!r} holds predict's tables of {len(set(titles))} cases "
                              f"({', '.join(f'{c} on {n} node(s)' for c, n, _ in dict.fromkeys(titles))}): give "
                              "one a file (predict --nodes N)")  # fmt: skip
        collective, nodes, ranks = titles[0]
        hosts = [f"node-{rank * nodes // ranks}" for rank in range(ranks)]
        if not program:
            return _log(path, {c: p for p, c in PROGRAMS.items()}[collective], hosts, gpu, rows)
    elif unended:  # cut at a row's end (`head`, a job killed mid-run): its largest sizes are missing, unsaid
        raise ConfigError(f"--nccl-tests {path!r} looks truncated: no '# Avg bus bandwidth' line after its rows; "
                          "give the whole log")  # fmt: skip
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
    ranks = len(hosts) or (_ranks_from_rows(collective, rows) if collective else 0)
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
    rows that passed their check; on the nodes its rows say they spanned (`--nnodes`; one in runs made before
    the rows said), so that a run across nodes is fitted as the network between them."""
    from harness.results import model_tables

    frame = model_tables.read_collectives(run)
    frame = frame[frame["correct"].astype(bool) & frame["op"].isin(PROGRAMS.values())]
    meta = model_tables.read_collectives_meta(run)
    logs = []
    for (op, world), group in frame.groupby(["op", "world_size"]):
        rows = tuple(Row(int(r.bytes), float(r.time_us), float(r.algbw_gbps), float(r.busbw_gbps))
                     for r in group.sort_values("bytes").itertuples())  # fmt: skip
        nodes = int(group["nnodes"].fillna(1).max())
        logs.append(Log(f"{run.name}/{op}-w{world}", str(op), int(world), nodes, str(meta.get("gpu_name", "")), rows))
    return logs


def profile_for_gpu(gpu: str) -> str | None:
    """The built-in profile for a log's device name (NVIDIA H100 80GB HBM3 → dgx-h100); None for a PCIe card (H100
    PCIe, A100-PCIE-40GB, H100 NVL): the built-ins are SXM boards on NVLink, whose NVLS a PCIe node has not."""
    return None if is_pcie_card(gpu) else next((name for model, name in GPU_PROFILES if model in gpu.upper()), None)


PCIE_ONLY = ("L40S", "L4", "A10", "T4")
"""GPUs made as PCIe cards alone (no SXM board, no NVLink): their device names do not say PCIe."""


def is_pcie_card(gpu: str) -> bool:
    from harness.config.precision import gpu_family

    upper = gpu.upper()
    return "PCIE" in upper or re.search(r"\bNVL\b", upper) is not None or gpu_family(gpu) in PCIE_ONLY


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

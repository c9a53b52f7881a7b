"""nccl-tests logs in (text and -J JSON) and out, the fit of a profile to them, and `predict --cluster`."""

from __future__ import annotations

import dataclasses
import html
import json
import random
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from harness import cli
from harness.analysis import agreement
from harness.perfmodel import measured, predict
from harness.perfmodel.clusters import cluster, nccl, nccltests, nccltests_fit
from harness.perfmodel.pick import ranked
from harness.protocols import ConfigError
from harness.results import model_tables, store
from harness.results.values import ms_text

MIB, GIB = 2**20, 2**30
PUBLISHED = Path(__file__).resolve().parent.parent / "data" / "published"
SIZES = [2**k for k in range(10, 34)]  # 1 KiB … 8 GiB


def a_log(profile: cluster.Cluster, *, nodes: int, collective: str = "all_reduce") -> list[nccl.Choice]:
    return [nccl.choose(profile, collective, size, nodes=nodes) for size in SIZES]


def nccl_tests_json(
    choices: list[nccl.Choice], gpu: str = "NVIDIA H100 80GB HBM3", *, nwrong: int = 0, time_key: str = "time"
) -> str:
    """The JSON nccl-tests writes with -J (its src/util.cu, version 3: the devices inside `config`, `nwrong`,
    `cpu_time` for `time` with -C 1): one device per process."""
    per_node = choices[0].ranks // choices[0].nodes
    devices = [{"rank": r, "group": 0, "pid": r, "hostname": f"host-{r // per_node}", "device": r % per_node,
                "device_hex": "0000:00:00", "device_info": gpu} for r in range(choices[0].ranks)]  # fmt: skip
    results = [{"size": c.nbytes, "count": c.nbytes // 4, "type": "float", "redop": "sum", "root": "    -1",
                "out_of_place": {time_key: c.time_us, "alg_bw": c.algbw_gbps, "bus_bw": c.busbw_gbps,
                                 "nwrong": nwrong if c is choices[-1] else 0},
                "in_place": {time_key: c.time_us, "alg_bw": c.algbw_gbps, "bus_bw": c.busbw_gbps, "nwrong": 0},
                "actual_iterations": 20, "experiment_name": ""} for c in choices]  # fmt: skip
    config = {"nthreads": 1, "ngpus": 1, "minimum_bytes": 1024, "maximum_bytes": 8 * GIB, "devices": devices}
    return json.dumps({"version": 3, "args": ["./build/all_reduce_perf", "-b", "1K", "-e", "8G", "-f", "2"],
                       "env": [], "nccl_version": 22105, "config": config, "results": results})  # fmt: skip


def published_as_text(csv: Path, *, ranks: int) -> str:
    """A published table (copied numbers, tests/data/published) printed back in nccl-tests' text form."""
    rows = [line.split(",") for line in csv.read_text().splitlines() if line[:1].isdigit()]
    lines = ["# Collective test starting: all_reduce_perf", "# Using devices"]
    lines += [f"#  Rank {r:2d} Group  0 Pid {r:6d} on     host-0 device {r:2d} [0x1b] NVIDIA H100 80GB HBM3"
              for r in range(ranks)]  # fmt: skip
    lines += [f"{s:>12} {int(s) // 4:>12} float sum -1 {t} {a} {b} 0 {t} {a} {b} 0" for s, t, a, b in rows]
    return "\n".join(lines) + "\n"


def test_a_text_log_reads_back_its_rows_ranks_nodes_and_collective(tmp_path):
    choices = a_log(cluster.load("dgx-a100"), nodes=2)
    (tmp_path / "log.txt").write_text(nccltests.write_text(choices))
    log = nccltests.read(tmp_path / "log.txt")
    assert (log.collective, log.ranks, log.nodes, len(log.rows)) == ("all_reduce", 16, 2, len(SIZES))
    for row, choice in zip(log.rows, choices, strict=True):
        assert row.nbytes == choice.nbytes
        assert row.busbw_gbps == pytest.approx(choice.busbw_gbps, abs=0.006, rel=0.001)  # printed to 2 decimals


def test_a_json_log_reads_like_the_text_one_and_names_its_gpu(tmp_path):
    choices = a_log(cluster.load("dgx-h100"), nodes=1)
    (tmp_path / "log.json").write_text(nccl_tests_json(choices))
    log = nccltests.read(tmp_path / "log.json")
    assert (log.collective, log.ranks, log.nodes) == ("all_reduce", 8, 1)
    assert [r.busbw_gbps for r in log.rows] == pytest.approx([c.busbw_gbps for c in choices])
    assert nccltests.profile_for_gpu(log.gpu) == "dgx-h100"


def test_a_two_node_json_log_names_its_nodes_and_its_wrong_results_are_refused(tmp_path):
    """nccl-tests -J writes its devices inside `config` and its counts of wrong results as `nwrong` (src/util.cu):
    read from elsewhere, a two-node log was fitted as one node's and a failed check was fitted too."""
    choices = a_log(cluster.load("dgx-h100"), nodes=2)
    (tmp_path / "log.json").write_text(nccl_tests_json(choices, time_key="cpu_time"))
    log = nccltests.read(tmp_path / "log.json")
    assert (log.ranks, log.nodes, log.gpu) == (16, 2, "NVIDIA H100 80GB HBM3")
    assert [r.time_us for r in log.rows] == pytest.approx([c.time_us for c in choices])
    (tmp_path / "wrong.json").write_text(nccl_tests_json(choices, nwrong=1024))
    with pytest.raises(ConfigError, match=r"results\[23\]: nccl-tests counted wrong results there \(nwrong 1024, 0\)"):
        nccltests.read(tmp_path / "wrong.json")
    in_place = json.loads(nccl_tests_json(choices))  # wrong in place alone: refused too, as the text's column is
    in_place["results"][3]["in_place"]["nwrong"] = 7
    (tmp_path / "in_place.json").write_text(json.dumps(in_place))
    with pytest.raises(ConfigError, match=r"results\[3\]: nccl-tests counted wrong results there \(nwrong 0, 7\)"):
        nccltests.read(tmp_path / "in_place.json")


HEADERS = {
    "timestamps": ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   "
                   "algbw   busbw #wrong           timestamp", " 2025-11-20 10:14:04"),
    "per-iteration": ("#       size   count  type   redop    root     time   algbw   busbw #wrong    i_min    i_max    "
                      "i_p99    i_cv%     time   algbw   busbw #wrong    i_min    i_max    i_p99    i_cv%", ""),
    "cputime": ("#       size         count      type   redop    root  cputime   algbw   busbw #wrong  cputime   "
                "algbw   busbw #wrong", ""),
}  # fmt: skip


@pytest.mark.parametrize("flags", list(HEADERS))
def test_rows_are_read_where_the_header_puts_their_columns(tmp_path, flags):
    """nccl-tests adds columns by its flags (a timestamp, per-iteration times, cputime): refused as 'not a result
    row' before, though each is its real output."""
    header, after = HEADERS[flags]
    names = header.lstrip("# ").split()
    values = {"size": "1048576", "count": "262144", "type": "float", "redop": "sum", "root": "-1", "time": "61.20",
              "cputime": "61.20", "algbw": "17.13", "busbw": "32.12", "#wrong": "0"}  # fmt: skip
    row = " ".join(values.get(name, "7.5") for name in names if name != "timestamp") + after  # a date and a time
    lines = ["# Collective test starting: all_reduce_perf", "#", header, row]
    (tmp_path / "log.txt").write_text("\n".join([*lines, "# Avg bus bandwidth    : 32.12"]) + "\n")
    log = nccltests.read(tmp_path / "log.txt")
    assert [(r.nbytes, r.time_us, r.algbw_gbps, r.busbw_gbps) for r in log.rows] == [(1048576, 61.20, 17.13, 32.12)]
    wrong = row.replace(" 0 ", " 1e+03 ", 1)  # 1000 wrong results out of place, as %g prints them
    (tmp_path / "wrong.txt").write_text("\n".join([*lines, wrong]) + "\n")
    with pytest.raises(ConfigError, match=r"line 5: nccl-tests counted wrong results there \(#wrong 1e\+03"):
        nccltests.read(tmp_path / "wrong.txt")


def test_a_table_ends_at_its_footer_and_an_older_tables_error_column_is_no_count(tmp_path):
    """A review's: a header's layout read the rows of a later pasted table without one (its in-place time taken for
    #wrong); and before nccl-tests 2.13 the column held the largest error (1e-07), which was refused as wrong."""
    header = HEADERS["timestamps"][0].rsplit(" ", 1)[0].rstrip()  # without the timestamp
    new = "1048576 262144 float sum -1 61.20 17.13 32.12 0 60.10 17.45 32.71 0"
    old = "2097152 524288 float sum 91.20 23.00 43.10 1e-07 90.10 23.28 43.63 1e-07"  # pre-2.10: no root
    text = "\n".join(["# Collective test starting: all_reduce_perf", header, new, "# Out of bounds values : 0 OK",
                      "# Avg bus bandwidth    : 32.4", old]) + "\n"  # fmt: skip
    (tmp_path / "two.txt").write_text(text)
    log = nccltests.read(tmp_path / "two.txt")
    assert [(r.nbytes, r.time_us, r.busbw_gbps) for r in log.rows] == [(1048576, 61.20, 32.12), (2097152, 91.20, 43.10)]
    (tmp_path / "shifted.txt").write_text("\n".join(["# Collective test starting: all_reduce_perf", header, new, old]))
    with pytest.raises(ConfigError, match=r"line 4 has 12 columns where its table's header has 13"):
        nccltests.read(tmp_path / "shifted.txt")


def test_a_pcie_card_is_no_built_in_dgx_profile():
    """An H100 PCIe log fitted from dgx-h100 predicted NVLS on a box without NVLink, at 8 GPUs a node."""
    for gpu in ("NVIDIA H100 PCIe", "NVIDIA A100-PCIE-40GB", "NVIDIA H100 NVL", "Tesla V100-PCIE-16GB"):
        assert nccltests.profile_for_gpu(gpu) is None, gpu
    for gpu, name in (("NVIDIA A100-SXM4-80GB", "dgx-a100"), ("Tesla V100-SXM2-32GB", "dgx1-v100")):
        assert nccltests.profile_for_gpu(gpu) == name


def test_rows_without_redop_and_root_and_with_na_errors_are_read():
    older = "     1048576        262144     float    61.20   17.13   32.12    N/A    60.10   17.45   32.71    N/A"
    row = nccltests._row_from_tokens(older.split(), "line 1")
    assert (row.nbytes, row.time_us, row.algbw_gbps, row.busbw_gbps) == (1048576, 61.20, 17.13, 32.12)
    # nccl-tests prints 10 ms or more without a decimal point: in the layout without a root column, such a
    # time is not the root, in place and out of place, or out of place alone (-z)
    large = "1073741824 268435456 float sum 22415 47.90 89.82 0e+00 22639 47.43 88.93 0e+00"
    for tokens in (large.split(), large.split()[:8]):
        row = nccltests._row_from_tokens(tokens, "line 1")
        assert (row.time_us, row.algbw_gbps, row.busbw_gbps) == (22415, 47.90, 89.82)
    rooted_row = "1073741824 268435456 float sum -1 22415 47.90 89.82 0"
    rooted = nccltests._row_from_tokens(rooted_row.split(), "line 1")
    assert rooted.time_us == 22415


@pytest.mark.parametrize("nodes", [1, 2])
def test_the_fit_finds_the_bandwidths_a_log_was_made_with_and_reproduces_it(tmp_path, nodes):
    """A log made from a profile the base does not know (slower links, a slower network): the fit moves
    the base's levels until the log's busbw is reproduced within 10 % at every size ≥ 64 KiB."""
    base = cluster.load("dgx-h100")
    truth = dataclasses.replace(base, intra_busbw_gbps=300.0, nvls_busbw_gbps=400.0, inter_busbw_gbps=150.0,
                                inter_latency_us=20.0)  # fmt: skip
    (tmp_path / "log.txt").write_text(nccltests.write_text(a_log(truth, nodes=nodes)))
    log = nccltests.read(tmp_path / "log.txt")
    unfitted = max(abs(nccltests_fit.predicted(base, log, r.nbytes).busbw_gbps / r.busbw_gbps - 1)
                   for r in log.rows if r.nbytes >= 64 * 1024)  # fmt: skip
    fit = nccltests_fit.fit(base, [log], name="fitted")
    assert unfitted > 0.15  # the base alone misses the log: there was something to fit
    assert fit.worst <= 0.10 and len(fit.errors) == sum(s >= 64 * 1024 for s in SIZES)
    moved = "nvls_busbw_gbps" if nodes == 1 else "inter_busbw_gbps"
    assert fit.fitted[moved] == pytest.approx(getattr(truth, moved), rel=0.05)


@pytest.mark.parametrize(
    "changed",
    [
        {"nvls_busbw_gbps": 420.0, "inter_busbw_gbps": 120.0, "inter_latency_us": 12.0},
        {"inter_busbw_gbps": 150.0},  # the node as built in: fitted together, a slow ring took the blame
        {"inter_busbw_gbps": 250.0},
    ],
)
def test_logs_at_one_and_two_nodes_fit_the_node_and_the_network_together(tmp_path, changed):
    base = cluster.load("dgx-h100")
    truth = dataclasses.replace(base, **changed)
    logs = []
    for nodes in (1, 2):
        (tmp_path / f"n{nodes}.txt").write_text(nccltests.write_text(a_log(truth, nodes=nodes)))
        logs.append(nccltests.read(tmp_path / f"n{nodes}.txt"))
    fit = nccltests_fit.fit(base, logs, name="both")
    # the fitted profile says where its numbers now come from: the logs, with the fit's error, to 2 nodes
    assert fit.cluster.fitted_nodes == 2 and "2 nccl-tests logs of up to 2 nodes (n1.txt, n2.txt)" in (
        fit.cluster.fitted_to
    )
    assert fit.cluster.sources["inter.busbw_gbps"].startswith("fitted to 2 nccl-tests logs")
    assert fit.cluster.sources["gpus_per_node"] == base.sources["gpus_per_node"]  # what was not fitted keeps its own
    assert set(fit.fitted) >= {"intra_busbw_gbps", "nvls_busbw_gbps", "inter_busbw_gbps", "inter_latency_us"}
    for field in ("intra_busbw_gbps", "nvls_busbw_gbps", "inter_busbw_gbps"):  # each level where it was made
        assert fit.fitted[field] == pytest.approx(getattr(truth, field), rel=0.05), field
    assert fit.worst <= 0.10


def test_the_ranks_are_the_rank_lines_not_busbw_over_algbw_as_rounded():
    """A user's: a 4-node log that stops at 1 MiB read 33 ranks from its rounded busbw/algbw (and was warned of as
    8.25 a node) though its 32 rank lines name 4 hosts; a table without rank lines has only the ratio to read."""
    rows = [c for c in a_log(cluster.load("dgx-h100"), nodes=4) if c.nbytes < MIB]
    rows.append(nccl.Choice("all_reduce", MIB, 32, 4, "", "", 118.70))  # the user's row: 8.83 and 17.12 GB/s
    text = nccltests.write_text(rows)
    log = nccltests._from_text(text, "small.txt")
    assert (log.ranks, log.nodes) == (32, 4)
    pasted = nccltests._from_text("\n".join(line for line in text.splitlines() if "Rank" not in line), "p.txt")
    assert (pasted.ranks, pasted.nodes) == (33, 1)  # the fallback: the ratio as printed, 17.12 / 8.83


def test_a_log_cut_at_a_rows_end_is_refused_and_nothing_is_saved(tmp_path, capsys):
    """A user's `head -50` of a log: whole rows under nccl-tests' header, no footer, its large sizes gone unsaid."""
    lines = nccltests.write_text(a_log(cluster.load("dgx-h100"), nodes=1)).splitlines()
    (tmp_path / "cut.txt").write_text("\n".join(lines[:-8]) + "\n")
    saved = tmp_path / "x.toml"
    assert cli.main(["predict", "--nccl-tests", str(tmp_path / "cut.txt"), "--save-profile", str(saved)]) == 2
    err = capsys.readouterr().err
    assert "looks truncated: no '# Avg bus bandwidth' line after its rows" in err and not saved.exists()


def test_a_log_given_twice_is_refused_and_two_of_one_case_are_warned_of(tmp_path, monkeypatch, capsys):
    """A user's `--nccl-tests A A B` counted A's rows twice, unsaid; two logs of one case weigh it twice too."""
    base = cluster.load("dgx-h100")
    for name, nodes in (("a.txt", 1), ("b.txt", 2), ("c.txt", 2)):
        (tmp_path / name).write_text(nccltests.write_text(a_log(base, nodes=nodes)))
    monkeypatch.chdir(tmp_path)
    sizes = ["--cluster", "dgx-h100", "--nodes", "1", "--sizes", "1GiB"]
    assert cli.main(["predict", "--nccl-tests", "a.txt", "./a.txt", "b.txt", *sizes]) == 2
    assert "--nccl-tests './a.txt' is given twice (as 'a.txt' too)" in capsys.readouterr().err
    assert cli.main(["predict", "--nccl-tests", "a.txt", "b.txt", "c.txt", *sizes]) == 0
    err = capsys.readouterr().err
    assert "logs b.txt, c.txt are each all_reduce on 2 nodes: the fit weighs that case 2×" in err and "a.txt" not in err


@pytest.mark.parametrize("collective", ["all_reduce", "all_gather"])
def test_the_table_predict_prints_reads_back_as_the_same_cluster(tmp_path, capsys, collective):
    """A user's `predict --cluster dgx-h100 --nodes 4 … > t.txt` could not be fed back: its preamble's "  4 nodes:"
    line was refused as a row, and stripped, the table read as 32 ranks on one node (it has no '# Rank' lines)."""
    flags = ["--cluster", "dgx-h100", "--nodes", "4", "--sizes", "1KiB:8GiB", "--collective", collective]
    assert cli.main(["predict", *flags]) == 0
    (tmp_path / "t.txt").write_text(capsys.readouterr().out)
    log = nccltests.read(tmp_path / "t.txt")
    assert (log.collective, log.ranks, log.nodes, len(log.rows)) == (collective, 32, 4, len(SIZES))
    fit = nccltests_fit.fit(cluster.load("dgx-h100"), [log], name="back")
    assert fit.fitted["inter_busbw_gbps"] == pytest.approx(380, rel=0.01) and fit.worst < 0.01
    assert cli.main(["predict", *flags[:2], "--nodes", "1,2", "--sizes", "1MiB"]) == 0
    (tmp_path / "two.txt").write_text(capsys.readouterr().out)
    with pytest.raises(ConfigError, match=r"holds predict's tables of 2 cases \(all_reduce on 1 node\(s\), all_red"):
        nccltests.read(tmp_path / "two.txt")


def test_noise_on_rows_a_level_does_not_limit_leaves_that_level_where_it_was(tmp_path, capsys):
    """A user's: ±3 % noise on a DGX H100's one-node log moved the ring (under NVLS, LL's cap below it) from 370 to
    265 GB/s, and with a 4-node log 0.7× as fast fitted together, to 191: the node's levels now come from the one-node
    log alone, and a level no row is limited by stays the profile's, said so."""
    base, rng = cluster.load("dgx-h100"), random.Random(7)
    noisy = [dataclasses.replace(c, time_us=c.time_us * (1 + rng.uniform(-0.03, 0.03))) for c in a_log(base, nodes=1)]
    slow = [dataclasses.replace(c, time_us=c.time_us / 0.7) for c in a_log(base, nodes=4)]
    (tmp_path / "n1.txt").write_text(nccltests.write_text(noisy))
    (tmp_path / "n4.txt").write_text(nccltests.write_text(slow))
    logs = [nccltests.read(tmp_path / "n1.txt"), nccltests.read(tmp_path / "n4.txt")]
    for fit in (nccltests_fit.fit(base, logs[:1], name="one"), nccltests_fit.fit(base, logs, name="both")):
        assert fit.fitted["intra_busbw_gbps"] == pytest.approx(370, rel=0.03) and fit.worst < 0.5
        assert fit.fitted["nvls_busbw_gbps"] == pytest.approx(480, rel=0.03)
    assert fit.fitted["inter_busbw_gbps"] == pytest.approx(380 * 0.7, rel=0.1)
    # what a saved fit says of itself: its description the logs and the base, a held level's source its own and why
    assert fit.cluster.description == f"{base.description}; fitted from dgx-h100 to nccl-tests logs n1.txt, n4.txt"
    held = fit.cluster.sources["intra.busbw_gbps"]
    assert held.startswith(base.sources["intra.busbw_gbps"]) and held.endswith("n4.txt: no row limited by it")
    cli.main(["predict", "--nccl-tests", *map(str, [tmp_path / "n1.txt"]), "--cluster", "dgx-h100", "--nodes", "1",
              "--sizes", "1MiB"])  # fmt: skip
    assert "intra_busbw_gbps 370 held (no row limited by it), nvls_busbw_gbps 480 → 4" in capsys.readouterr().out


def test_a_published_h100_log_is_reproduced_as_closely_as_docs_clusters_says():
    """AWS p5, 8 × H100 (tests/data/published), fitted: mean 4.9 %, within 11 % from 2 MiB up, 17 % from
    64 KiB (docs/clusters.md: between 64 KiB and 1 MiB NCCL's LL runs faster than its tuner's limits, so
    the 10 % the issue asks of every size ≥ 64 KiB is missed there on this real log)."""
    csv = PUBLISHED / "h100_1node_aws_p5_batch_allreduce.csv"
    log = nccltests._from_text(published_as_text(csv, ranks=8), str(csv))
    assert (log.ranks, log.nodes) == (8, 1)
    fit = nccltests_fit.fit(cluster.load("dgx-h100"), [log], name="p5")
    large = [abs(error) for _, nbytes, error in fit.errors if nbytes >= 2 * MIB]
    assert max(large) <= 0.11 and fit.worst <= 0.17 and fit.mean_abs <= 0.06


def test_predict_cluster_prints_nccl_tests_rows_and_writes_them(tmp_path, capsys):
    out = tmp_path / "h200.parquet"
    code = cli.main(["predict", "--cluster", "dgx-h200", "--nodes", "1,2", "--sizes", "1MiB:8GiB", "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0
    assert "# dgx-h200: all_reduce on 2 node(s) × 8 GPUs = 16 ranks" in printed
    assert "docs/measured/cluster-model.md):\n#   1 node: 1 table, 14 of 14 sizes within 25 %" in printed  # how sure
    assert cli.main(["predict", "--cluster", "dgx-h100", "--nodes", "1,2", "--sizes", "1MiB"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = next(k for k, line in enumerate(lines) if "against published nccl-tests" in line)
    phrases = lines[at + 1 : at + 4]  # a line each: the node counts asked, then the others (behind '#': a log)
    assert [phrase.split()[1] for phrase in phrases[:2]] == ["1", "2"] and not lines[at + 4].startswith("#   ")
    assert phrases[2] == "#   tables of 4, 8, 128 nodes too: without --nodes"
    mine = tmp_path / "mine.toml"  # a user's own profile says it was not checked
    mine.write_text((cluster.BUILTIN_FOLDER / "dgx-h200.toml").read_text())
    assert cli.main(["predict", "--cluster", str(mine), "--nodes", "1", "--sizes", "1MiB"]) == 0
    assert "a profile of your own, not checked against published tables" in capsys.readouterr().out
    frame = pd.read_parquet(out)
    assert list(frame.columns) == ["cluster", "cluster_source", "collective", "nodes", "ranks", "bytes", "time_us",
                                   "algbw_gbps", "busbw_gbps", "algorithm", "protocol"]  # fmt: skip
    assert len(frame) == 2 * 14 and set(frame["nodes"]) == {1, 2}
    largest = frame[(frame["nodes"] == 1) & (frame["bytes"] == 8 * GIB)].iloc[0]
    assert f"{8 * GIB:12d}" in printed and f"{largest['busbw_gbps']:7.2f}" in printed


def test_a_fit_that_does_not_describe_its_logs_is_warned_of(tmp_path, capsys):
    """A walkthrough's 2-node log with its bandwidths in Gb/s (×8) fitted to a mean error of 90 % and was used
    as a fit without a word."""
    slipped = [dataclasses.replace(c, time_us=c.time_us / 8) for c in a_log(cluster.load("dgx-h100"), nodes=2)]
    (tmp_path / "gbit.json").write_text(nccl_tests_json(slipped))
    assert cli.main(["predict", "--nccl-tests", str(tmp_path / "gbit.json"), "--nodes", "2", "--sizes", "1GiB"]) == 0
    err = capsys.readouterr().err
    assert "the fit does not describe these logs (mean busbw error" in err and "check their units (GB/s)" in err


def test_the_what_if_page_of_a_fitted_profile_names_the_logs_and_how_far_they_reach(tmp_path):
    from harness.perfmodel.own_check import OwnCheck
    from reports.pages.whatif import profile

    base = cluster.load("dgx-h100")
    (tmp_path / "n1.txt").write_text(nccltests.write_text(a_log(base, nodes=1)))
    (tmp_path / "n2.txt").write_text(nccltests.write_text(a_log(base, nodes=2)))
    logs = [nccltests.read(tmp_path / name) for name in ("n1.txt", "n2.txt")]
    fitted = nccltests_fit.fit(base, logs, name="mine").cluster
    section = profile.published_section(fitted)
    assert "<h2>Against your logs</h2>" in section and "2 nccl-tests logs of up to 2 nodes (n1.txt, n2" in section
    assert "Beyond 2 nodes, the predictions carry the fitted network past what your logs measured" in section
    best = pd.DataFrame({"nodes": [1, 2, 4, 128]})
    assert "on 4 to 128 nodes the fitted network is carried past what they measured" in profile.unchecked(fitted, best)
    # How sure leads with the fit's own error and how far past the logs it is carried (the answer then leaves it),
    # before the step models' check on the run's own steps
    sure = html.unescape(profile.how_sure(OwnCheck("not checked against this run's own steps: …"), fitted, best))
    assert sure.startswith(f"<p class=takeaway><b>How sure</b>: The network is fitted to {fitted.fitted_to}; on 4 "
                           "to 128 nodes it is carried past what they measured (2 nodes). Not checked against this "
                           "run's own steps")  # fmt: skip
    assert "error on their rows" in fitted.fitted_to and profile.unchecked(fitted, best, fitted=False) == ""
    assert "every node count here is within what they measured" in profile.how_sure(None, fitted, best.head(2))
    assert profile.how_sure(None, base, best) == ""  # a built-in's: its published checks say how sure, below
    # the profile's table gives every fitted number with its source: the latency scale the fit moved, NCCL's
    # algorithms; no NCCL version, which nothing read (the tuner's constants are NCCL master's, said over the table)
    table = html.unescape(profile.sources_section(fitted))
    assert f"<td>latency_scale</td><td>{fitted.latency_scale:g}</td><td>fitted to {fitted.fitted_to}</td>" in table
    assert "<td>nccl</td>" not in table and "NCCL master's constants (2026)" in table
    assert "<td>algorithms</td><td>ring, tree, nvls, nvlstree</td><td>ring and tree, and NVLS" in table
    assert f"<td>latency_scale</td><td>1</td><td>{profile.NOT_FITTED}</td>" in html.unescape(
        profile.sources_section(base)
    )


def test_a_fit_saved_once_is_used_by_name_with_what_it_rests_on(tmp_path, capsys):
    """A user fits their cluster's logs once (--save-profile) and predicts from the file after: the same rows,
    the same fit's sources, and the warning past the nodes its logs measured, without the logs."""
    slower = dataclasses.replace(cluster.load("dgx-h100"), inter_busbw_gbps=250.0)
    (tmp_path / "n2.json").write_text(nccl_tests_json(a_log(slower, nodes=2)))
    saved = tmp_path / "ours.toml"
    asked = ["--nodes", "2,4", "--sizes", "64MiB,1GiB"]
    assert cli.main(["predict", "--nccl-tests", str(tmp_path / "n2.json"), *asked, "--save-profile", str(saved)]) == 0
    fitting = capsys.readouterr().out
    assert f"the fitted profile is saved in {saved}: --cluster {saved} uses it" in fitting
    assert cli.main(["predict", "--cluster", str(saved), *asked]) == 0
    captured = capsys.readouterr()
    rows = [line for line in captured.out.splitlines() if line.strip()[:1].isdigit()]
    assert len(rows) == 4 and rows == [line for line in fitting.splitlines() if line.strip()[:1].isdigit()]
    fitted = nccltests_fit.fit(cluster.load("dgx-h100"), [nccltests.read(tmp_path / "n2.json")], name="x").cluster
    loaded = cluster.load(str(saved))
    assert loaded.inter_busbw_gbps == fitted.inter_busbw_gbps and loaded.sources == fitted.sources
    assert (loaded.fitted_to, loaded.fitted_nodes) == (fitted.fitted_to, 2) and not cluster.is_builtin(loaded)
    assert loaded.name == "ours"  # its file's stem: what --cluster ours.toml,dgx-h200's tables and prices name it
    assert f"{saved}: a profile fitted to 1 nccl-tests log of up to 2 nodes (n2.json): busbw error" in captured.out
    assert "a profile of your own" not in captured.out  # not 'not checked …; --nccl-tests fits it': it was
    assert "on 4 nodes the fitted network is carried past what was measured" in captured.err


def test_predict_nccl_tests_fits_and_says_its_error(tmp_path, capsys):
    slower = dataclasses.replace(cluster.load("dgx-a100"), intra_busbw_gbps=180.0)
    (tmp_path / "mine.json").write_text(nccl_tests_json(a_log(slower, nodes=1), gpu="NVIDIA A100-SXM4-80GB"))
    code = cli.main(["predict", "--nccl-tests", str(tmp_path / "mine.json"), "--nodes", "1", "--sizes", "1GiB"])
    printed = capsys.readouterr().out
    assert code == 0
    assert "starting from the built-in dgx-a100" in printed and "intra_busbw_gbps 232 → 18" in printed
    assert "busbw error on the 18 rows ≥ 64 KiB" in printed
    assert "; on the 9 rows of 1–256 MiB, DDP's bucket sizes: mean " in printed  # where the buckets are


def _evenly_ready(run: Path, into: Path) -> Path:
    """A copy of `run` whose profile has a fixed shape: its measured step split 1:2:5 (forward, backward, optimizer)
    and its gradients ready at even steps through backward, in their measured order. Whether a cap leads at w16
    turns on the measured shape (a busy machine's squeezed ready times tied every cap, and the w16 line a test
    reads was joined into w8's)."""
    import pyarrow.parquet as pq

    shutil.copytree(run, into / run.name)
    for path in (into / run.name / "gradprofile").glob("*.parquet"):
        table = pq.read_table(path)
        rows = table.to_pandas()
        total = float((rows["forward_ms"] + rows["backward_ms"] + rows["optimizer_ms"]).iloc[0])
        rows["forward_ms"], rows["backward_ms"], rows["optimizer_ms"] = total / 8, total * 2 / 8, total * 5 / 8
        order = rows["ready_ms"].rank(method="first").astype(int)  # 1 … n, as measured
        rows["ready_ms"] = total * 2 / 8 * order / len(rows)
        pq.write_table(pa.Table.from_pandas(rows, schema=table.schema, preserve_index=False), path)
    return into / run.name


def test_predict_on_a_cluster_gives_the_step_per_cap_of_a_runs_profile(small_run, tmp_path, capsys):
    run = _evenly_ready(small_run, tmp_path / "results")
    out = tmp_path / "steps.csv"
    flags = ["--cluster", "dgx-h100", "--nodes", "1,2", "--caps", "0.001,25", "--local-step-ms", "0.2"]
    flags += ["--out", str(out), "--page", str(tmp_path / "whatif.html")]  # 1 KiB buckets against one, 0.2 ms steps
    code = cli.main(["predict", "--run", run.name, "--results", str(run.parent), *flags])
    said = capsys.readouterr()
    printed = said.out
    assert code == 0
    assert "rests on that scaling" in printed and "predicted fastest cap at w16 for the tiny size:" in printed
    # a cap chosen on 2 nodes rests on sizes the published 2-node tables found off by more than 25 %: said there,
    # referring to the misses said above, a line a node count with the networks they were measured on
    w8, w16 = (line for line in printed.splitlines() if "predicted fastest cap at w" in line)
    assert "off by more than 25 %" not in w8 and "the sizes off by more than 25 % at 2 nodes (above): " in w16
    assert re.search(
        r"\n  2 nodes: \d+ tables?, \d+ of \d+ sizes within 25 %, worst \S+ \([^)]+\); off: \d+ on ", printed
    )
    assert "published sizes" not in printed  # the misses' figures once, above
    lines = printed.strip().splitlines()
    # the choice's table first, read from the top, ahead of the memory it counted and the steps it rests on
    table, at = lines[0], next(k for k, line in enumerate(lines) if line.startswith("ddpbench predict: answer for DDP"))
    assert table.startswith("ddpbench predict: the answer on dgx-h100, the fastest step of what fits 79.11 GiB a GPU"
                            " as counted below")  # fmt: skip
    memory = next(k for k, line in enumerate(lines) if line.startswith("ddpbench predict: memory per rank"))
    assert 0 < memory < at  # the full size's answer (its floors bind), the tiny size's under it, ZeRO-1's, FSDP2's
    answer, answer_tiny, zero, sharded = lines[at : at + 4]
    booked_rows = lines[2:4]  # under its header, a row per GPU count: stock, ranked by its full-size floor
    booked = [re.match(r"\s*(\d+)\s+stock at ([\d.]+) MiB\s+≥([\d.]+)\s", row) for row in booked_rows]
    assert all(booked) and [int(m.group(1)) for m in booked] == [8, 16]
    # at the cap where its ranked figure (its prediction or floor, the higher) is least, as --out's rows give it
    frame = pd.read_csv(out)
    ranked_ms = frame[["step_ms", "full_size_step_floor_ms"]].max(axis=1)
    for m in booked:
        at_world = ranked_ms[frame["world_size"] == int(m.group(1))]
        assert float(m.group(3)) == pytest.approx(at_world.min(), rel=1e-3)
        assert float(m.group(2)) in set(frame.loc[at_world.index[at_world <= at_world.min() * (1 + 1e-9)],
                                                   "bucket_cap_mb"])  # fmt: skip
    # the run measured no zero: of what it measured only stock has a step model, and the rest fit untimed
    chosen = "\n".join(lines[4:memory])  # under the table: what the choice leaves out, and its caveats
    assert "fit too, with no step model" in chosen
    page_text = html.unescape((tmp_path / "whatif.html").read_text())
    on_page = page_text.split("<b>The choice</b>: ")[1]
    # the page's table before it, as the console's: a row per GPU count, stock ranked by its full-size floor
    page_table = page_text.split("<b>The choice</b>: ")[0].rsplit("<table>", 1)[1]
    # the console's columns: none blank on every row (nothing else fits here, nothing rests on the pick)
    # the pick's peak a rank beside its step (the memory question in the first table, as the console's memory table)
    assert re.search(r"<th>book</th><th>step ms</th><th>peak GiB a rank \(of [\d.]+\)</th><th>GPU-h per 1M samples"
                     r"</th></tr>", page_table)  # fmt: skip
    assert page_text.index("<th>book</th>") < page_text.index('<p class="headline">')  # the choice first (README)
    lead, headline = page_text.split('<p class="headline">')[1:3]  # the full size's bound first, then the profile's
    assert lead.startswith("<b>The full size</b>") and headline.startswith("<b>The tiny size's profile</b>")
    bound = float(re.search(r"and at most ([\d.]+) at \d+ GPUs with the full size's gradients", lead).group(1))
    before = r"\(before DDP's own cost, left out\)"  # a CPU's, beside the GPU step given: not in the figures
    assert bound <= float(  # at most the profiled size's: the floors only add (at three decimals, maybe equal)
        re.search(rf"Efficiency {before} [\d.]+ on one node \(\d+ GPUs\), ([\d.]+) at", headline).group(1)
    )
    # and a figure of each modelled strategy's step and floor against GPUs, not DDP's caps alone
    assert "Predicted step per strategy on dgx-h100" in page_text and "FSDP2, full-size floor" in page_text
    for m in booked:  # the page books each at the console's cap and figure
        assert f"<td>{m.group(1)}</td><td>stock at {m.group(2)} MiB</td><td>≥{m.group(3)}" in page_table
    # and its head says what it books at its most GPUs, as its table does, which a site's index gives beside its link
    from reports import site
    from reports.pages.html import shared_link

    most = booked[-1]
    [shared] = site.read_shared_pages(tmp_path)
    assert shared["book"] == f"stock at {most.group(2)} MiB, ≥{most.group(3)} ms at 16 GPUs"
    books = f"</a>: books stock at {most.group(2)} MiB, ≥{most.group(3)} ms at 16 GPUs"
    assert shared_link(shared).endswith(books)
    # and the run's page and its what-if page link it so too, from the site's runs/ (they gave its title alone)
    from reports.pages import legend
    from reports.pages.whatif import memory

    linked = html.unescape(shared_link(shared, up="../"))
    assert linked.startswith('<a href="../whatif.html">') and linked.endswith(books)
    assert html.unescape(legend.predict_links({"predict_pages": [shared, shared]})).endswith(f"{linked}; {linked}.</p>")
    assert html.unescape(memory._given({"predict_pages": [shared]})) == f": {linked}"
    assert linked in html.unescape(legend.not_a_gpu_booking({"device": "cpu", "predict_pages": [shared]}))  # above
    # the page gives the full size's floor beside each answer, at the cap the choice ranks it at
    assert "<th>DDP's step at the full size, at least (ms), at the cap it is ranked at</th>" in page_text
    assert "<th>ZeRO-1's, at least (ms), at the cap it is ranked at</th>" in page_text
    assert "<th>FSDP2's, at least (ms)</th>" in page_text
    assert "The table's last three columns are the least each step can take with the full size's " in page_text
    assert "(full-size floor; " in on_page  # the page's choice ranks by the floors as the console's
    # the site's what-if page (report --cluster) counts as predict does: memory at the full size, word for word, and
    # the full size's floors, which its choice ranks by (a walkthrough found the site's choice without them)
    from harness.commands.report import as_predict_counts

    configs = store.read_configs(small_run)
    (tmp_path / "site" / "runs").mkdir(parents=True)
    h100 = cluster.load("dgx-h100")
    name = site.write_whatif_page(small_run, store.read_run_meta(small_run), configs, h100, tmp_path / "site",
                                  **as_predict_counts(small_run, configs, cluster=h100))  # fmt: skip
    on_site = html.unescape((tmp_path / "site" / "runs" / name).read_text())
    # a CPU run with no GPU step: no step ranked, but the full size's collectives, as the rows above (the scaled
    # run's: they rest on no compute) hold them
    assert "<b>The choice</b>" not in on_site and "the full size's " in on_site.split('<p class="headline">')[1]
    site_table = on_site.split("FSDP2's reduce-scatters</th>")[1].split("</table>")[0]
    for world, rows in frame.groupby("world_size"):
        at_25 = rows[rows["bucket_cap_mb"] == 25].iloc[0]  # 25 MiB: a cap of the run's sweep and of --caps
        assert (
            f"<td>{world}</td><td>{world // 8}</td>" in site_table
            and f"<td>{at_25.full_size_comm_ms:.4g} ({at_25.full_size_last_ms:.3g})</td>"
            in site_table.split(f"<td>{world}</td>")[1].split("</tr>")[0]
        )
        assert f"<td>{at_25.zero_full_size_broadcast_ms:.4g}</td>" in site_table
    memory = "<h2>Model state per rank</h2>"
    assert "at the full size" in page_text.split(memory)[1].split("<h2>")[0]
    # at another batch than the run's (--batch-size with --local-step-ms): activations counted there, on the meta device
    from harness.commands.predict.full_size import memory_rows

    setup = predict.run_setups(small_run)[0]
    rows, note = memory_rows(small_run, configs, setup, batch_size=4 * int(setup["batch_size"]))
    same, _ = memory_rows(small_run, configs, setup)
    assert f"at batch {4 * int(setup['batch_size'])} a rank (the run measured batch {int(setup['batch_size'])})" in note
    assert (rows["batch_size"] == 4 * setup["batch_size"]).all()
    # counted in fp32: what bf16 autocast keeps is counted too, never assumed half (a tester's 1.3B llama kept 8.63 GiB
    # in bf16 at one sample against fp32's 8.08: its bf16 copies of the weights, kept once, and RMSNorm's fp32)
    # (no GPU named: the fit, if any, is judged in the run's dtype, and bf16's said beside it)
    bf16_note = re.search(r"the same forward keeps ([\d.]+) MiB at (\d+) samples a rank against fp32's ([\d.]+) MiB: "
                          r"([\d.]+) MiB kept once at any batch, the bf16 copies of the weights autocast keeps for "
                          r"backward, and each further sample adds ([\d.]+) MiB \(([\d.]+)× fp32's ([\d.]+) MiB\)",
                          note)  # fmt: skip
    assert bf16_note and "half the bytes" not in note, note
    in_bf16, samples, fp32, once, added, ratio, fp32_added = (float(x) for x in bf16_note.groups())
    assert fp32 == pytest.approx(rows["activation_mb"].iloc[0], rel=0.01)
    assert ratio == pytest.approx(added / fp32_added, rel=0.02)  # a sample's against a sample's, not the totals'
    assert once == pytest.approx(in_bf16 - samples * added, rel=0.02, abs=0.5) and once > 0  # its weights in bf16
    assert rows["activation_mb"].iloc[0] == pytest.approx(4 * same["activation_mb"].iloc[0], rel=0.05)
    # a strategy computing in bf16 (FSDP2's param_dtype on a GPU; its option alone says so, here on naive's rows):
    # its own activations, counted at the full size
    in_bf16 = configs["impl_options"].where(configs["impl"] != "naive", '{"param_dtype": "bf16"}')
    mixed, _ = memory_rows(small_run, configs.assign(impl_options=in_bf16), setup)
    bf16, others = mixed[mixed["impl"] == "naive"], mixed[mixed["impl"] != "naive"]
    assert len(bf16) and (bf16["size"] == "full").all() and others["compute_activation_mb"].isna().all()
    assert (bf16["compute_activation_mb"] / bf16["activation_mb"]).between(0.4, 0.75).all()  # fp32's, about half
    # word for word at the GPU counts both give: the page at those --nodes asked (8, 16), the site's 8 to 1,024
    site_cells, page_cells = (_memory_cells(text.split(memory)[1].split("<h2>")[0]) for text in (on_site, page_text))
    assert page_cells.items() <= site_cells.items() and {head for _, head in page_cells} >= {"8 GPUs", "16 GPUs"}
    assert "32 GPUs" not in {head for _, head in page_cells} and "1024 GPUs" in {head for _, head in site_cells}
    opening = page_text.split(memory)[1].split(" each rank holds ")[0].rsplit("At ", 1)[0]  # the fit at 8 GPUs
    assert "At 8 GPUs, in a GPU of 79.11 GiB (dgx-h100): " in opening and opening in on_site
    for row in booked_rows:  # the page says the same choice at the console's GPU counts, and more
        gpus, book, step = re.match(r"\s*(\d+)\s+(\S+(?: at \S+ MiB)?)\s+(\S+)", row).groups()
        assert f"<td>{gpus}</td><td>{book}</td><td>{step}</td>" in page_table
    # and its caveats, under the table in sight: the CPU optimizer's share, as the console's (the published tables'
    # caveat at 2 nodes, the most GPUs', is the headline's: it stood in both); the same choice in words folded after
    # them (700 words that said the table again)
    page_bracket = page_text.split("<b>Caveats</b>: ", 1)[1].split("</p>")[0]
    assert page_text.split("<b>The choice</b>: ")[0].endswith("<details><summary>The choice in words, GPU count by "
                                                               'GPU count</summary><p class="takeaway">')  # fmt: skip
    assert "<i>At 2 nodes this profile is off by more than 25 % on " in headline and "25 %" not in page_bracket
    # the run stepped SGD (the default): the caveat names its optimizer, not Adam
    assert "of the step is the CPU's, scaled: a GPU's SGD, one memory-bound pass" in page_bracket
    assert printed.count("of the step is the CPU's, scaled") == 1 and "Adam" not in page_bracket + printed
    assert answer.startswith("ddpbench predict: answer for DDP on dgx-h100 (ZeRO-1's and FSDP2's steps follow)")
    assert "by its floors: bucket_cap_mb " in answer and "w8 to w16: step " in answer
    assert "Why at w16: " in answer
    # the run measured mlp/tiny: the step is the user's model's, the gradients are tiny's, and that is said
    assert "--local-step-ms is one GPU's step of the whole model, but this profile is mlp's tiny size" in said.err
    assert "the full size's are " in said.err and "its communication stays the tiny model's" in said.err
    # where it is read: in full on the first line that rests on it, above the answer, and only there
    assert printed.count("the tiny size's gradients, not your model's: a cap named is theirs, the floors yours") == 1
    assert "the tiny size's gradients, not your model's" not in answer + answer_tiny  # said once is enough
    configs = store.read_configs(small_run)
    setup = predict.run_setups(small_run)[0]
    own, baseline = measured.ddp_own_cost_s(configs, setup), measured.one_rank_baseline_s(configs, setup)
    assert own is not None  # the run has stock and local at one rank: DDP's own cost is measured and used
    # the profile is scaled to the baseline's step first, which --local-step-ms then scales from: the step given's
    # scale is said, not the run's on the way to it
    assert f"to the run's baseline step at one rank ({baseline * 1e3:.4g} ms over every repeat" not in printed
    # measured on this CPU, it is no GPU's share of the step: said, and left out of the GPU step given
    assert f"DDP's own cost {own * 1e3:.3g} ms a step at one rank" in printed
    assert "a CPU's, left out of the GPU step given" in printed and "scaled with the compute" not in printed
    assert pd.read_csv(out)["ddp_own_ms"].isna().all()  # left out: not a measured 0
    frame = pd.read_csv(out)
    assert {"world_size", "nodes", "bucket_cap_mb", "step_ms", "exposed_comm_ms", "best"} <= set(frame.columns)
    rests_on = frame[["cluster", "cluster_source", "run", "workload", "size", "local_step_ms"]].drop_duplicates()
    assert rests_on.values.tolist() == [["dgx-h100", "built-in", small_run.name, "mlp", "tiny", 0.2]]
    assert frame[["batch_size", "dtype", "optimizer"]].drop_duplicates().values.tolist() == [
        [setup["batch_size"], setup["dtype"], setup["optimizer"]]
    ]  # the rest of the setup the prediction rests on
    assert list(frame["world_size"]) == [8, 8, 16, 16]
    for _, group in frame.groupby("world_size"):  # the fastest rows: the fastest and any cap within the tie tolerance
        fastest = group["step_ms"].min()
        assert group["fastest"].any() and (group.loc[group["fastest"], "step_ms"] <= fastest * 1.005).all()
        assert (group.loc[~group["fastest"], "step_ms"] > fastest * 1.005).all()
        named = agreement.cap_answer(group["bucket_cap_mb"], group["step_ms"]).named  # best: what the answer names
        assert sorted(group.loc[group["best"], "bucket_cap_mb"]) == sorted(named)
    # ZeRO-1 at every cap: DDP's step with the optimizer on the largest shard, then one broadcast a parameter
    trainable = model_tables.read_gradprofiles(small_run).query("requires_grad")
    assert (frame["zero_broadcasts"] == len(trainable)).all() and (frame["zero_largest_share"] < 1).all()
    whole_optimizer = frame["zero_optimizer_ms"] / frame["zero_largest_share"]
    rebuilt = frame["step_ms"] - whole_optimizer + frame["zero_optimizer_ms"] + frame["zero_broadcast_ms"]
    assert np.allclose(frame["zero_step_ms"], rebuilt)
    by_world = frame.groupby("world_size")["zero_broadcast_ms"].first()
    assert 0 < by_world[8] < by_world[16]  # across two nodes each broadcast pays the network's latency
    assert zero.startswith("ddpbench predict: and ZeRO-1 (DDP + torch's ZeroRedundancyOptimizer, its defaults")
    # the full size's floors were put under it: its why is the model to train's, its broadcasts those of the
    # full size's parameters; the small size's prediction, below its floor at every cap, is no figure a booking
    # rests on: left to --out's rows (and the page)
    full_count = int(frame["zero_full_size_broadcasts"].iloc[0])
    assert full_count > len(trainable) and "for the full size, at least w8 " in zero
    # its why in full (its largest shard, its broadcasts at each GPU count) is the what-if page's, at 1,024 GPUs
    assert "ZeRO-1's, its optimizer steps the largest shard, " in page_text
    floors_why = page_text.split("Why the floors at")[1]  # each collective as NCCL runs it, named with its cost
    assert re.search(
        rf": {full_count} broadcasts \((NVLS|ring|tree)[^)]*\), one a parameter, take at least ", floors_why
    )
    assert re.search(r"the gathers \([^)]+\) take at least [\d.]+ ms and the reduce-scatters \([^)]+\) ", floors_why)
    assert (frame["zero_step_ms"] <= frame["zero_full_size_step_floor_ms"]).all() and "own prediction" not in zero
    floor_w8 = float(re.search(r"at least w8 ([\d.]+),", zero).group(1))  # the least of w8's caps' floors
    assert floor_w8 == pytest.approx(frame.loc[frame["world_size"] == 8, "zero_full_size_step_floor_ms"].min(), 1e-3)
    # FSDP2: the same at every cap; mlp's blocks are its Linear layers, the root holds nothing and gathers nothing
    assert (frame.groupby("world_size")["fsdp_step_ms"].nunique() == 1).all()
    assert (frame["fsdp_kept_step_ms"] < frame["fsdp_step_ms"]).all()  # kept: no block gathered for backward
    # the run has no FSDP step at one rank: its own cost is not measured (null), and none is added
    assert (frame["fsdp_gathers"] == 2 * frame["fsdp_units"]).all() and frame["fsdp_own_ms"].isna().all()
    compute = frame["fsdp_step_ms"] - frame["fsdp_exposed_ms"] - frame["fsdp_optimizer_ms"]
    assert (frame["fsdp_exposed_ms"] >= 0).all() and np.allclose(compute, compute.iloc[0])  # the same compute
    assert compute.iloc[0] < 0.2 and np.allclose(
        frame["fsdp_optimizer_ms"] * frame["world_size"], frame["fsdp_optimizer_ms"].iloc[0] * 8
    )  # forward and backward of the 0.2 ms; the optimizer on 1/n
    assert 0 < frame.groupby("world_size")["fsdp_gather_ms"].first()[8] < frame["fsdp_gather_ms"].max()
    assert sharded.startswith("ddpbench predict: and FSDP2 (fully_shard on each block and the root, its defaults)")
    assert "the gathers in fp32 (FSDP2's default; --opt param_dtype=bf16 would halve their bytes)" in sharded
    fsdp_w16 = frame[frame["world_size"] == 16].iloc[0]  # the full size's gathers, whose floor ranks it
    gathers_as, scatters_as = (fsdp_w16[f"fsdp_full_size_{op}_algorithms"] for op in ("gather", "scatter"))
    assert gathers_as and scatters_as  # how NCCL runs them, as the tuner picked each, named with their cost
    assert (f"Why at w16: its {int(fsdp_w16['fsdp_full_size_gathers'])} gathers ({gathers_as}) take at least "
            f"{ms_text(fsdp_w16['fsdp_full_size_gather_ms'])} ms and its reduce-scatters ({scatters_as}) "
            f"{ms_text(fsdp_w16['fsdp_full_size_scatter_ms'])} ms, one at a time, at least "
            f"{ms_text(fsdp_w16['fsdp_full_size_exposed_ms'])} ms of them exposed") in sharded  # fmt: skip
    fsdp_w8 = frame[frame["world_size"] == 8].iloc[0]  # NVLS inside one node, another across two: said where
    pairs = {op: (fsdp_w8[f"fsdp_full_size_{op}_algorithm"], fsdp_w16[f"fsdp_full_size_{op}_algorithm"])
             for op in ("gather", "scatter")}  # fmt: skip
    assert all(w8.startswith("NVLS/") and w8 != w16 for w8, w16 in pairs.values()), pairs
    said = [f"run mostly as {w8} from w8, {w16} from w16" for w8, w16 in pairs.values()]
    assert (f"; its gathers and reduce-scatters {said[0]}" if said[0] == said[1]
            else f"; its gathers {said[0]}; its reduce-scatters {said[1]}") in sharded  # fmt: skip
    floor = fsdp_w16[["fsdp_full_size_step_floor_ms", "fsdp_full_size_exposed_ms", "fsdp_optimizer_ms"]]
    assert 0 <= floor.iloc[1] < floor.iloc[0] - floor.iloc[2]  # the floor's part beyond forward and backward
    assert (  # over its units (a tester read the small size's beside its model): the page says them
        f"({int(frame['fsdp_full_size_gathers'].iloc[0])} gathers a step over "
        f"{int(frame['fsdp_full_size_units'].iloc[0])} units)" in page_text.split("Why the floors at")[1]
    )
    assert frame["fsdp_full_size_units"].iloc[0] > frame["fsdp_units"].iloc[0]
    # every efficiency is against one rank's step: the 0.2 ms given (DDP's own cost a CPU's, left out)
    one_rank = frame["scaling_efficiency"] * frame["step_ms"]
    assert one_rank.to_numpy() == pytest.approx([0.2] * len(frame))
    assert "one rank's step without DDP is 0.2 ms (" in printed  # the step every efficiency divides, said once
    assert "each predicted step, both before DDP's own cost (--local-ddp-ms MS adds your GPU's)" in printed
    tiny, default = frame[frame["bucket_cap_mb"] == 0.001], frame[frame["bucket_cap_mb"] == 25]
    assert (tiny["buckets"].to_numpy() > default["buckets"].to_numpy()).all()
    assert (frame["step_ms"] >= 0.2).all()  # the scaled one-rank step, plus what is exposed
    # and mlp/full's gradients, counted on the meta device, put a floor under each step, said as the tiny's are not
    assert (
        "ddpbench predict: the full size puts floors under each step, right of | below (≥; left of it "
        "the tiny size's): mlp's " in printed
    )  # what they are, once, above the table that shows them
    assert (frame["full_size_step_floor_ms"] >= 0.2 - 1e-9).all()  # never below the step's compute
    assert (frame["full_size_comm_ms"] > frame["comm_ms"]).all()  # the full size's all-reduces outweigh tiny's
    assert (frame["full_size_step_floor_ms"] >= frame["full_size_comm_ms"]).all()  # none before backward begins
    # the floors bind: the answer leads with the full size's (its cap, its least step, why), the tiny's after
    last = frame[frame["world_size"] == frame["world_size"].max()]
    row = ranked.ddp_ranked_row(last)
    least = max(row["step_ms"], row["full_size_step_floor_ms"])
    assert answer.startswith("ddpbench predict: answer for DDP on dgx-h100 (ZeRO-1's and FSDP2's steps follow): for "
                             f"the full size, by its floors: bucket_cap_mb {row['bucket_cap_mb']:g} MiB, the cap its "
                             "floors favour; w8 to w16: step at least ")  # fmt: skip
    assert f"→ {least:.4g} ms, scaling efficiency at most " in answer
    # how NCCL runs them, named once where their cost is said, and where that changes along the GPU counts (here
    # NVLS inside one node, another algorithm across two): the rows' own algorithms, as the tuner picked them
    run_as = row["full_size_algorithms"]
    assert f"Why at w16: at {row['bucket_cap_mb']:g} MiB its all-reduces ({run_as}) take at least " in answer
    w8 = ranked.ddp_ranked_row(frame[frame["world_size"] == 8])["full_size_algorithm"]
    assert w8.startswith("NVLS/") and w8 != row["full_size_algorithm"]
    assert answer.endswith(f"; its all-reduces run mostly as {w8} from w8, {row['full_size_algorithm']} from w16")
    # the tiny size's own answer on the line under it: its figures, of its own buckets; not its cap again, which the
    # fastest cap's line under the table gave ('predicted fastest cap at w8, w16: any …', then '… bucket_cap_mb any')
    assert answer_tiny.startswith("ddpbench predict:   for the tiny size: w8 to w16: step ")
    assert "Why at w16: " in answer_tiny and "bucket_cap_mb" not in answer_tiny and "fastest cap at w" in printed
    # ZeRO-1's and FSDP2's lines each lead with their own floor and why, the full size's; the small size's after
    assert "for the full size, at least w8 " in zero and "the tiny size's gradients" not in zero
    zero_row = ranked.ranked_row(last, *ranked.ZERO_COLUMNS, "ZeRO-1")
    if zero_row["zero_full_size_broadcast_ms"] >= zero_row["zero_full_size_optimizer_ms"]:  # the reason that weighs
        sent_as = zero_row["zero_full_size_broadcast_algorithms"]  # as the all-gathers they are priced as run
        assert (f"Why at w16: each rank broadcasts what it updated, overlapping nothing: {full_count} broadcasts "
                f"({sent_as}), one a parameter") in zero  # fmt: skip
        w8_row = ranked.ranked_row(frame[frame["world_size"] == 8], *ranked.ZERO_COLUMNS, "ZeRO-1")
        sent = f"{ms_text(w8_row['zero_full_size_broadcast_ms'])} → {ms_text(zero_row['zero_full_size_broadcast_ms'])}"
        changes = ranked.algorithm_changes([w8_row, zero_row], "zero_full_size_broadcast_algorithm", what="they")
        assert f"take at least {sent} ms (w8 → w16){changes}" in zero
    else:
        assert (
            f"Why at w16: its optimizer steps the largest shard, {zero_row['zero_full_size_largest_share']:.1%} "
            f"of the elements"
            in zero
            and f"{ms_text(zero_row['zero_full_size_optimizer_ms'])} ms)" in zero
        )
    assert ranked.zero_floor_why([zero_row]).startswith(  # the whole why, as the page says it: the shard, then these
        f"its optimizer steps the largest shard, {zero_row['zero_full_size_largest_share']:.1%} of the elements ("
        f"{ms_text(zero_row['zero_full_size_optimizer_ms'])} ms")  # fmt: skip
    assert "for the full size, at least w8 " in sharded and "DDP's step is at least" not in sharded
    # ZeRO-1's and FSDP2's too: the whole model's broadcasts, gathers and reduce-scatters, each above the tiny's
    assert (frame["zero_full_size_broadcast_ms"] > frame["zero_broadcast_ms"]).all()
    assert (frame["fsdp_full_size_gather_ms"] > frame["fsdp_gather_ms"]).all()
    assert (frame["fsdp_kept_full_size_step_floor_ms"] < frame["fsdp_full_size_step_floor_ms"]).all()
    # and the choice ranks stock by its floor, far above the 0.2 ms the tiny size's gradients gave
    floor_w16 = frame.loc[frame["world_size"] == 16, "full_size_step_floor_ms"]
    w16 = booked_rows[1].split()
    assert w16[:3] == ["16", "stock", "at"]
    assert float(w16[5].removeprefix("≥")) in {float(f"{v:.4g}") for v in floor_w16}
    # a run benched at the size it will train (no floors) says its own profile's ZeRO-1 and FSDP2 why: each of their
    # collectives named as NCCL runs it there too, from the rows' own picks
    from harness.commands.console import predictions

    capsys.readouterr()
    own = [f.drop(columns=[c for c in f if "full_size" in c]) for _, f in frame.groupby("world_size", sort=True)]
    predictions.zero_answer(own, optimizer_ms=0.01, largest=(None, 0.0))
    predictions.fsdp_answer(own)
    zero_own, fsdp_own = capsys.readouterr().out.splitlines()
    last = agreement.answer_row(own[-1])
    broadcasts, gathers, scatters = (last[f"{c}_algorithms"] for c in ("zero_broadcast", "fsdp_gather", "fsdp_scatter"))
    assert (
        broadcasts and f"{int(last['zero_broadcasts'])} broadcasts ({broadcasts}), one a parameter, take " in zero_own
    )
    assert (
        f"the gathers ({gathers}) take {ms_text(last['fsdp_gather_ms'])} ms and the reduce-scatters ({scatters}) "
        in fsdp_own
    )


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--cluster", "dgx-h9"], "'dgx-h9'"),
        (["--cluster", "dgx-h100", "--sizes", "1Mx"], "'1Mx'"),
        (["--cluster", "dgx-h100", "--sizes", "8G:1K"], "'8G:1K'"),
        (["--cluster", "dgx-h100", "--sizes", "1KiB:"], "--sizes '1KiB:' is not valid: '' is not a size; give MIN:MAX"),
        (["--cluster", "dgx-h100", "--sizes", "0:1K"], "--sizes '0:1K' is not valid: '0' is not a size"),
        (["--cluster", "dgx-h100", "--nodes", "0,2"], "'0,2'"),
        (["--cluster", "dgx-h100", "--collective", "broadcast"], "'broadcast'"),
        (["--cluster", "dgx-h100", "--out", "rows.txt"], "'rows.txt'"),
        (["--nodes", "2"], "--nodes needs --cluster"),
        (["--workload", "mlp", "--busbw", "9GB/s", "--collective", "all_gather"], "--collective needs --cluster"),
        (["--cluster", "dgx-h100", "--busbw", "90GB/s"], "--busbw"),
        (["--nccl-tests", "no-such-log.txt"], "'no-such-log.txt'"),
        (["--cluster", "dgx-h100", "--nccl-tests", "log.json"], "results[0] is not an nccl-tests result"),
        (["--cluster", "dgx-h100", "--nccl-tests", "cut.txt"], "'cut.txt' line 2 is not an nccl-tests result row"),
        (["--cluster", "dgx-h100", "--nccl-tests", "garbled.txt"], "'garbled.txt' line 1: time, algbw and busbw"),
        # a review's: another program's log was fitted as an all-reduce, rows that failed nccl-tests' check used
        (["--cluster", "dgx-h100", "--nccl-tests", "sendrecv.txt"], "is sendrecv_perf's log; ddpbench reads"),
        (["--cluster", "dgx-h100", "--nccl-tests", "wrong.txt"], "line 1: nccl-tests counted wrong results"),
        (["--nccl-tests", "pcie.txt"], "the logs' GPU 'NVIDIA H100 PCIe' is a PCIe card, and the built-in profiles"),
        (["--cluster", "fast.toml"], "intra.busbw_gbps = 4000 GB/s is more than the GPU's links carry"),
        (["--cluster", "nvls.toml"], "has nvls, nvlstree, which needs NVSwitch (NVLink SHARP), but intra.fabric is"),
        (["--cluster", "scale.toml"], "latency_scale = 'fast' is not valid; give a number > 0"),
        (["--cluster", "bps.toml"], "inter.busbw_gbps = 1.92e+11 GB/s is more than 8 NICs of 200 Gb/s can carry"),
        (["--cluster", "alone.toml", "--nodes", "1,2"], "--nodes 1,2: cluster profile alone.toml has no network"),
        (["--cluster", "fitted.toml"], "fitted_nodes = 1.5 is not valid"),
        (["--cluster", "dgx-h100", "--save-profile", "fit.toml"], "--save-profile 'fit.toml' needs --nccl-tests"),
        (["--nccl-tests", "cut.txt", "--save-profile", "fit.txt"], "'fit.txt': a cluster profile is a .toml file"),
        (["--cluster", "dgx-h100", "--save-anyway"], "--save-anyway needs --save-profile FILE.toml"),
        (["--cluster", "dgx-h100", "--sizes", "3"], "'3' is not valid; a message holds at least one float"),
        (["--cluster", "dgx-h100", "--sizes", "8,6"], "'8,6' is not valid: 6 B is not a whole number of 4-byte"),
        (["--cluster", "dgx-h100", "--out", "log.json/rows.csv"], "'log.json/rows.csv'"),
        # a mistyped folder was made without a word (as --page's was refused), and the file lost in it
        (["--cluster", "dgx-h100", "--out", "rsults/rows.csv"], "no folder 'rsults'; give a .csv or .parquet file in"),
        (["--nccl-tests", "cut.txt", "--save-profile", "fits/a.toml"], "no folder 'fits'; give a .toml file in a"),
        (["--cluster", "dgx-h100", "--local-step-ms", "97"], "--local-step-ms does not apply to a collectives table"),
        (["--cluster", "dgx-h100", "--caps", "1,25"], "--caps does not apply to a collectives table"),
        (["--cluster", "dgx-h100", "--gpus", "16"], "--gpus does not apply"),
        (["--run", "no-run", "--cluster", "dgx-h100", "--sizes", "1MiB"], "--sizes does not apply to a DDP step"),
        (["--run", "no-run", "--cluster", "dgx-h100", "--caps", "nan"], "'nan'"),
        (["--run", "no-run", "--cluster", "dgx-h100"], "'no-run'"),
        (["--run", "coll", "--cluster", "dgx-h100"], "--run 'coll' is a `ddpbench collectives` run; --run takes a"),
        (["--nccl-tests", "."], "is a folder but not a `ddpbench collectives` run"),
        (["--cluster", ""], "--cluster '' is neither a built-in profile"),
        (["--cluster", "dgx-h100", "--workload", "nope"], "unknown workload 'nope'"),  # before the published check
        (["--cluster", "dgx-h100", "--workload", "mlp", "--size", "huge"], "--size 'huge' is not valid"),
    ],
)
def test_bad_cluster_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, monkeypatch, flags, named):
    logs = tmp_path / "logs"  # a JSON log whose result has no size
    logs.mkdir()
    (logs / "log.json").write_text('{"args": ["all_reduce_perf"], "results": [{"out_of_place": {"time": 1}}]}')
    whole = "1048576 262144 float sum -1 66.8 15.69 29.41 0 67.5 15.53 29.12 0"
    (logs / "cut.txt").write_text(f"{whole}\n{whole[:-12]}\n")  # a log cut off mid-row
    (logs / "garbled.txt").write_text(whole.replace("66.8", "abc") + "\n")
    (logs / "sendrecv.txt").write_text(f"# Collective test starting: sendrecv_perf\n{whole}\n")
    (logs / "wrong.txt").write_text(whole.replace("29.41 0", "29.41 3") + "\n")
    rank = "#  Rank  0 Group  0 Pid  1 on gpu-a01 device  0 [0000:18:00] NVIDIA H100 PCIe"
    (logs / "pcie.txt").write_text(f"# Collective test starting: all_reduce_perf\n{rank}\n{whole}\n")
    a100 = (cluster.BUILTIN_FOLDER / "dgx-a100.toml").read_text()
    (logs / "scale.toml").write_text('latency_scale = "fast"\n' + a100)
    (logs / "bps.toml").write_text(a100.replace("busbw_gbps = 192 ", "busbw_gbps = 192e9 "))  # B/s for GB/s
    (logs / "alone.toml").write_text(a100.replace("nics = 8", "nics = 0"))
    (logs / "fitted.toml").write_text("fitted_nodes = 1.5\n" + a100)
    h100 = (cluster.BUILTIN_FOLDER / "dgx-h100.toml").read_text()
    (logs / "fast.toml").write_text(h100.replace("busbw_gbps = 370 ", "busbw_gbps = 4000 "))  # a zero too many
    (logs / "nvls.toml").write_text(h100.replace('fabric = "nvswitch"', 'fabric = "pcie"'))
    store.write_json(logs / "results" / "coll" / "run.json", {"run_id": "coll", "kind": store.COLLECTIVES_KIND})
    written = sorted(p.relative_to(logs) for p in logs.rglob("*"))
    monkeypatch.chdir(logs)
    assert cli.main(["predict", *flags]) == 2
    captured = capsys.readouterr()
    err = captured.err
    assert named in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert captured.out == ""  # refused before a word of prediction, or of the profile's published check
    assert sorted(p.relative_to(logs) for p in logs.rglob("*")) == written  # nothing written


def test_a_log_that_names_no_collective_is_read_as_the_one_given_and_said(tmp_path, capsys):
    """Older nccl-tests and pasted tables print no `# Collective test starting:` line."""
    text = nccltests.write_text(a_log(cluster.load("dgx-h100"), nodes=1))
    (tmp_path / "node1.txt").write_text("\n".join(x for x in text.splitlines() if "Collective test" not in x))
    with pytest.raises(ConfigError, match="does not say its collective"):
        nccltests.read(tmp_path / "node1.txt")
    assert nccltests.read(tmp_path / "node1.txt", collective="all_reduce").ranks == 8
    flags = ["--cluster", "dgx-h100", "--nodes", "1", "--sizes", "1GiB"]
    assert cli.main(["predict", "--nccl-tests", str(tmp_path / "node1.txt"), *flags]) == 0
    said = capsys.readouterr().err
    assert "no '# Collective test starting:' line and its name no program's: read as all_reduce's" in said
    (tmp_path / "hello.txt").write_text("hello world\n")
    with pytest.raises(ConfigError, match="has no result rows"):
        nccltests.read(tmp_path / "hello.txt", collective="all_reduce")


def test_logs_of_two_kinds_of_gpu_are_refused(tmp_path, capsys):
    (tmp_path / "h100.json").write_text(nccl_tests_json(a_log(cluster.load("dgx-h100"), nodes=1)))
    a100 = nccl_tests_json(a_log(cluster.load("dgx-a100"), nodes=1), gpu="NVIDIA A100-SXM4-80GB")
    (tmp_path / "a100.json").write_text(a100)
    assert cli.main(["predict", "--nccl-tests", str(tmp_path / "h100.json"), str(tmp_path / "a100.json")]) == 2
    assert "the logs are of different GPUs" in capsys.readouterr().err


def test_a_profile_file_with_a_bad_value_is_refused_naming_it(tmp_path, capsys):
    text = (cluster.BUILTIN_FOLDER / "dgx-a100.toml").read_text().replace('generation = "ampere"', 'generation = "x"')
    (tmp_path / "mine.toml").write_text(text)
    assert cli.main(["predict", "--cluster", str(tmp_path / "mine.toml")]) == 2
    assert "generation = 'x' is not valid; choose one of volta" in capsys.readouterr().err


def test_a_collectives_run_is_fitted_like_a_log(tmp_path, capsys):
    """`ddpbench collectives` on one node of the cluster: its all-reduce rows fit the profile as a log does."""
    from harness.results import model_tables

    slower = dataclasses.replace(cluster.load("dgx-h100"), nvls_busbw_gbps=400.0)
    run = tmp_path / "coll"
    store.write_json(run / "run.json", {"kind": "collectives", "run_id": "coll", "started_at": "2026-12-01",
                                        "hostname": "gpu-node", "device": "cuda", "backend": "nccl"})  # fmt: skip
    rows = [{"run_id": "coll", "op": "all_reduce", "world_size": 8, "bytes": c.nbytes, "dtype": "float32", "iters": 20,
             "warmup": 5, "time_us": c.time_us, "algbw_gbps": c.algbw_gbps, "busbw_gbps": c.busbw_gbps,
             "correct": True, "device": "cuda", "backend": "nccl", "hostname": "gpu-node"}
            for c in a_log(slower, nodes=1)]  # fmt: skip
    store.write_parquet(run / "collectives" / "w8.parquet", rows, model_tables.COLLECTIVE_SCHEMA)
    code = cli.main(["predict", "--cluster", "dgx-h100", "--nccl-tests", str(run), "--nodes", "1", "--sizes", "8GiB"])
    printed, warned = capsys.readouterr()
    assert code == 0 and "CPU processes" not in warned
    assert "coll/all_reduce-w8: all_reduce, 8 ranks on 1 node," in printed
    assert "nvls_busbw_gbps 480 → 40" in printed  # 400, fitted from the built-in's 480
    assert "worst +0.0%" in printed or "worst -0.0%" in printed
    meta = json.loads((run / "run.json").read_text())
    store.write_json(run / "run.json", {**meta, "device": "cpu", "backend": "gloo", "config": {"gpus": 8}})
    cli.main(["predict", "--cluster", "dgx-h100", "--nccl-tests", str(run), "--nodes", "1", "--sizes", "8GiB"])
    assert "measured 8 CPU processes over gloo, not GPUs over NCCL" in capsys.readouterr().err  # a CPU's bandwidths


def test_a_users_profile_without_sources_is_used_and_warned_about(tmp_path, capsys):
    text = (cluster.BUILTIN_FOLDER / "dgx-a100.toml").read_text().split("\n[sources]")[0]  # its numbers alone
    (tmp_path / "ours.toml").write_text(text.replace('name = "dgx-a100"', 'name = "ours"'))
    assert cli.main(["predict", "--cluster", str(tmp_path / "ours.toml"), "--nodes", "1", "--sizes", "1GiB"]) == 0
    captured = capsys.readouterr()
    assert "# ours: all_reduce on 1 node(s)" in captured.out
    assert "no source for gpus_per_node, generation, cpu, algorithms, intra.nvlinks" in captured.err
    assert cli.main(["predict", "--cluster", "dgx-a100", "--nodes", "1", "--sizes", "1GiB"]) == 0
    assert "no source" not in capsys.readouterr().err  # a built-in says where every number came from


def test_a_one_node_log_of_small_sizes_still_fits_with_a_multi_node_log(tmp_path):
    """The staged start needs rows ≥ 64 KiB in each part; without them the joint fit goes on alone."""
    base = cluster.load("dgx-h100")
    small = [nccl.choose(base, "all_reduce", size, nodes=1) for size in SIZES if size <= 32 * 1024]
    (tmp_path / "n1.txt").write_text(nccltests.write_text(small))
    (tmp_path / "n2.txt").write_text(nccltests.write_text(a_log(base, nodes=2)))
    logs = [nccltests.read(tmp_path / "n1.txt"), nccltests.read(tmp_path / "n2.txt")]
    assert nccltests_fit.fit(base, logs, name="both").worst <= 0.10


def test_predictions_past_what_was_checked_or_fitted_say_so(tmp_path, capsys):
    """Past the largest published table of a built-in; past the logs' node count (one node's logs fit nothing
    of the network, and the fitted profile's name says which nodes it was fitted on); a log of another
    generation's GPU fitted to this profile."""
    assert cli.main(["predict", "--cluster", "dgx-h100", "--nodes", "1,128,1024", "--sizes", "1MiB"]) == 0
    err = capsys.readouterr().err
    assert "dgx-h100's largest published table is of 128 nodes: its predictions on 1024 nodes are unchecked" in err
    (tmp_path / "n1.json").write_text(nccl_tests_json(a_log(cluster.load("dgx-h100"), nodes=1)))
    assert cli.main(["predict", "--nccl-tests", str(tmp_path / "n1.json"), "--nodes", "1,2", "--sizes", "1MiB"]) == 0
    captured = capsys.readouterr()
    assert "the logs are of one node: on 2 nodes the network between nodes is dgx-h100's own values" in captured.err
    assert "# dgx-h100 fitted to 1 nccl-tests log of 1 node: all_reduce on 2 node(s)" in captured.out
    a100 = nccl_tests_json(a_log(cluster.load("dgx-a100"), nodes=1), gpu="NVIDIA A100-SXM4-80GB")
    (tmp_path / "a100.json").write_text(a100)
    flags = ["--nodes", "1", "--sizes", "1MiB"]
    assert cli.main(["predict", "--cluster", "dgx-h100", "--nccl-tests", str(tmp_path / "a100.json"), *flags]) == 0
    err = capsys.readouterr().err
    assert "are of 'NVIDIA A100-SXM4-80GB' (ampere; ddpbench's profile dgx-a100) and are fitted to dgx-h100" in err
    assert cli.main(["predict", "--cluster", "dgx-a100", "--nccl-tests", str(tmp_path / "a100.json"), *flags]) == 0
    assert capsys.readouterr().err == ""  # the logs' own profile, inside the logs' node count: nothing to warn of


def test_a_model_whose_size_does_not_change_its_gradients_is_not_told_to_profile_the_full_size(tmp_path, capsys):
    """Your own file's model is the model you train whatever --size says: the warning is for a smaller size."""
    import shutil
    import types

    from harness.commands.console.predict import steps
    from harness.commands.predict import full_size as predict_full_size

    shutil.copy(Path(__file__).parents[2] / "examples" / "my_workload.py", tmp_path / "my_workload.py")
    spec = f"{tmp_path / 'my_workload.py'}:MyModel"
    whole = predict_full_size.full_size_counts({"workload": spec, "size": "small"})["grad_bytes"]
    predict_full_size.warn_not_whole_model({"workload": spec, "size": "small"}, types.SimpleNamespace(grad_bytes=whole))
    assert capsys.readouterr().err == ""
    smaller = types.SimpleNamespace(grad_bytes=whole // 2)
    predict_full_size.warn_not_whole_model({"workload": spec, "size": "small"}, smaller)
    err = capsys.readouterr().err
    assert "its communication stays the small model's" in err
    assert err.rstrip().endswith(
        "or give the options it differs by, --train-wopt KEY=VALUE, to count it on the meta device"
    )
    # benched small, counted with --train-wopt, as docs/your-model.md advises: once told to bench the whole model
    predict_full_size.warn_not_whole_model({"workload": spec, "size": "small"}, smaller, options={"width": 512})
    err = capsys.readouterr().err
    assert "this profile is " in err and "the model you will train's are " in err
    assert "Profile the model" not in err and "--wopt" not in err
    # no run (predict --workload): the size profiled here, no 'benched model', in the warning and the floors' line
    assert "this profile is my_workload.py:MyModel's small size (" in err.replace(str(tmp_path) + "/", "")
    assert "stays the small model's" in err and "benched" not in err
    steps.say_floors("its parameters", trained=True, size="small", benched=False)
    assert "left of it the small size's): its parameters" in capsys.readouterr().out


def test_a_log_whose_nodes_are_not_the_profiles_is_warned_of(tmp_path, capsys):
    """A walkthrough's 2-node log with its '# Rank' lines on one host read as 16 ranks on 1 node and was fitted
    into one 8-GPU NVLink node without a word."""
    text = nccltests.write_text(a_log(cluster.load("dgx-h100"), nodes=2)).replace("node-1", "node-0")
    (tmp_path / "onehost.txt").write_text(text)
    asked = ["--cluster", "dgx-h100", "--sizes", "1GiB"]
    assert cli.main(["predict", "--nccl-tests", str(tmp_path / "onehost.txt"), "--nodes", "1", *asked]) == 0
    err = capsys.readouterr().err
    assert "onehost.txt: 16 ranks on 1 node, 16 a node, where dgx-h100 has 8 GPUs a node" in err
    assert "its '# Rank' lines must name their hosts" in err
    (tmp_path / "fine.txt").write_text(nccltests.write_text(a_log(cluster.load("dgx-h100"), nodes=2)))
    assert cli.main(["predict", "--nccl-tests", str(tmp_path / "fine.txt"), "--nodes", "2", *asked]) == 0
    assert "GPUs a node" not in capsys.readouterr().err


def test_a_level_fitted_far_from_the_profiles_value_is_warned_of(tmp_path, capsys):
    """A walkthrough's fit put the ring inside a DGX H100 at 24-56 GB/s (370 built in), from one 64 KiB row, and
    the page printed it as the cluster's figure."""
    slow = dataclasses.replace(cluster.load("dgx-a100"), intra_busbw_gbps=40.0)
    (tmp_path / "slow.json").write_text(nccl_tests_json(a_log(slow, nodes=1), gpu="NVIDIA A100-SXM4-80GB"))
    assert cli.main(["predict", "--nccl-tests", str(tmp_path / "slow.json"), "--nodes", "1", "--sizes", "1GiB"]) == 0
    err = capsys.readouterr().err
    assert "the fit moved intra_busbw_gbps from 232 to 4" in err and "check those rows before planning by it" in err


def test_a_repeated_node_count_is_predicted_once_and_said_so(capsys):
    """A walkthrough's --nodes 1,1,2 was taken as 1,2 without a word; bench says it of its lists."""
    from harness import cli

    assert cli.main(["predict", "--cluster", "dgx-h100", "--nodes", "1,1,2", "--sizes", "1MiB:2MiB"]) == 0
    out = capsys.readouterr().out
    assert "ddpbench predict: note: --nodes '1,1,2' repeats a value: each is predicted once" in out
    assert out.count("# dgx-h100: all_reduce on 1 node(s)") == 1


def test_a_level_the_fit_pushed_to_the_edge_of_its_search_is_warned_of_but_no_latency_at_none(capsys):
    """A bandwidth at the search's edge was pinned by no row; a network latency at its lower edge is none, as NCCL's
    IB plugin reports and as a log made with 0 fits (a walkthrough read 0.014 µs as unphysical)."""
    from harness.commands.predict import nccl_logs

    base = cluster.load("dgx-h100")
    nccl_logs.warn_far_moved(base, {"inter_latency_us": 0.0100001, "inter_busbw_gbps": 150.0})
    assert capsys.readouterr().err == ""
    nccl_logs.warn_far_moved(base, {"nvls_busbw_gbps": 99999.0, "inter_latency_us": 1e5})
    err = capsys.readouterr().err
    assert "the fit pushed nvls_busbw_gbps to 1e+05, the edge of its search" in err
    assert "nor do the small messages across nodes predicted with it" in err  # the latency's, at its upper edge


def test_a_fitted_ring_stays_within_the_profiles_links_so_the_saved_profile_loads():
    """A review's: an H100 log (ring 370 GB/s) fitted from dgx1-v100 (links 300 GB/s) was saved at 354.8 and refused
    when read back; the fit now keeps the ring within the links, and its error says how far that misses the log."""
    import tomllib

    h100 = dataclasses.replace(cluster.load("dgx-h100"), algorithms=("ring", "tree"))
    log = nccltests._from_text(nccltests.write_text(a_log(h100, nodes=1)), "h100.txt")
    fit = nccltests_fit.fit(cluster.load("dgx1-v100"), [log], name="v100 from h100")
    assert fit.fitted["intra_busbw_gbps"] == pytest.approx(300.0) and fit.worst > 0.10
    assert cluster.from_mapping(tomllib.loads(cluster.to_toml(fit.cluster))).intra_busbw_gbps == pytest.approx(300.0)


def _memory_cells(section: str) -> dict[tuple[str, str], str]:
    """The what-if page's memory tables: (strategy, column heading) → cell."""
    cells = {}
    for body in section.split("<table>")[1:]:
        heads = re.findall(r"<th>(.*?)</th>", body.split("</thead>")[0])
        for row in body.split("</thead>")[1].split("<tr")[1:]:
            row_cells = re.findall(r"<td>(.*?)</td>", row)
            cells.update({(row_cells[0], head): cell for head, cell in zip(heads, row_cells, strict=True)})
    return cells


def test_a_smaller_size_with_the_full_sizes_tensors_and_nearly_its_bytes_is_said_in_a_clause(tmp_path, capsys):
    """vit_b_16's tiny profile (152 tensors, 327 MiB) was warned of as another model than its full size (152 tensors,
    330 MiB: the head and position embedding alone differ), and every cap it named hedged as 'theirs': as many
    tensors within ALIKE_BYTES of the bytes is a clause in the profile's line, no warning, no floors."""
    import shutil
    import types

    from harness.commands.predict import full_size as predict_full_size
    from harness.perfmodel.schedule import parameters_of

    shutil.copy(Path(__file__).parents[2] / "examples" / "my_workload.py", tmp_path / "my_workload.py")
    setup = {"workload": f"{tmp_path / 'my_workload.py'}:MyModel", "size": "small"}
    counts = predict_full_size.full_size_counts(setup)
    whole, tensors = counts["grad_bytes"], len(parameters_of(counts["parameters"]).trained)
    near = types.SimpleNamespace(grad_bytes=int(whole * 0.98), grads=tuple(range(tensors)))
    assert predict_full_size.warn_not_whole_model(setup, near) is False
    assert capsys.readouterr().err == ""
    assert predict_full_size.alike_words(setup, near).startswith(", as many as the full size's (")
    for other in (types.SimpleNamespace(grad_bytes=int(whole * 0.9), grads=near.grads),  # 10 % fewer bytes
                  types.SimpleNamespace(grad_bytes=near.grad_bytes, grads=tuple(range(tensors + 1)))):  # fmt: skip
        assert predict_full_size.alike_words(setup, other) == ""
        assert predict_full_size.warn_not_whole_model(setup, other) is True
        assert "this profile is " in capsys.readouterr().err


def _pcie_node() -> cluster.Cluster:
    """An L40S PCIe profile as docs/clusters.md's 'A PCIe node' gives it."""
    text = Path(__file__).resolve().parents[2].joinpath("docs", "clusters.md").read_text()
    toml = text.split("### A PCIe node", 1)[1].split("```toml\n", 1)[1].split("```", 1)[0]
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        (path := Path(folder) / "l40s-pcie.toml").write_text(toml)
        return cluster.load(str(path))


def test_the_docs_pcie_example_loads_with_ada_read_as_nccls_ampere():
    """The profile keeps the generation it gives (what `list` shows, a saved copy writes); the tuner's is Ampere."""
    profile = _pcie_node()
    assert (profile.fabric, profile.generation, profile.algorithms) == ("pcie", "ada", ("ring", "tree"))
    assert profile.tuner_generation == "ampere"
    assert 'generation = "ada"' in cluster.to_toml(profile)
    assert profile.sources["gpu_memory_gbps"].startswith("NVIDIA L40S datasheet")


def test_rows_across_nodes_above_the_nodes_ring_are_said_to_be_beyond_the_model(tmp_path, capsys):
    """A walkthrough's L40S logs: 2 nodes at 42 GB/s, one node's ring at 22.9; the fit held the network ('no row
    limited by it') and blamed the logs' units. The rows above the node's ring are named, with why."""
    base = dataclasses.replace(_pcie_node(), inter_busbw_gbps=42.0)  # the walkthrough's network
    faster_across = dataclasses.replace(base, intra_busbw_gbps=44.0, inter_busbw_gbps=44.0)  # what the 2-node log read
    (tmp_path / "n1.txt").write_text(nccltests.write_text(a_log(base, nodes=1)))
    (tmp_path / "n2.txt").write_text(nccltests.write_text(a_log(faster_across, nodes=2)))
    logs = [nccltests.read(tmp_path / "n1.txt"), nccltests.read(tmp_path / "n2.txt")]
    fit = nccltests_fit.fit(base, logs, name="pcie")
    beyond = nccltests_fit.beyond_reach(fit.cluster, logs)
    assert beyond and {b.log for b in beyond} == {"n2.txt"} and max(b.nbytes for b in beyond) == 8 * GIB
    assert all(b.measured_gbps > b.ceiling_gbps * 1.05 for b in beyond)
    text = nccltests_fit.reach_text(beyond, fit.cluster)
    assert f"above the node's ring's {fit.cluster.intra_busbw_gbps:.4g} GB/s" in text and "'The model' 2" in text
    assert text in fit.cluster.fitted_to  # the saved profile and the page's How sure say it too
    # a 2-node log the model can reach has no such rows
    (tmp_path / "same.txt").write_text(nccltests.write_text(a_log(base, nodes=2)))
    same = [logs[0], nccltests.read(tmp_path / "same.txt")]
    assert nccltests_fit.beyond_reach(nccltests_fit.fit(base, same, name="pcie").cluster, same) == []
    # on the console: the network held with that reason, the line in place of the generic causes, rows beside
    profile = tmp_path / "pcie.toml"
    profile.write_text(cluster.to_toml(base))
    args = ["predict", "--cluster", str(profile), "--nccl-tests", str(tmp_path / "n1.txt"), str(tmp_path / "n2.txt"),
            "--nodes", "2", "--sizes", "1GiB"]  # fmt: skip
    assert cli.main(args) == 0
    err = "".join(capsys.readouterr())
    assert "inter_busbw_gbps 42 held (no row limited by it: the node's ring bounds every row across nodes" in err, err
    assert "which the model takes as the bound across nodes" in err and "check their units" not in err
    assert re.search(r"n2\.txt +8 GiB +\d+\.\d\d +\d+\.\d\d +-\d+\.\d%", err), err


def test_save_profile_refuses_a_poor_fit_or_another_gpus_logs_unless_told(tmp_path, capsys):
    """An A100 log fitted into an L40S profile was saved with exit 0 at a mean error of 70 %."""
    base = _pcie_node()
    profile = tmp_path / "pcie.toml"
    profile.write_text(cluster.to_toml(base))
    (tmp_path / "a100.json").write_text(
        nccl_tests_json(a_log(cluster.load("dgx-a100"), nodes=1), "NVIDIA A100-SXM4-80GB")
    )
    saved = tmp_path / "fit.toml"
    args = ["predict", "--cluster", str(profile), "--nccl-tests", str(tmp_path / "a100.json"), "--nodes", "1",
            "--sizes", "1GiB", "--save-profile", str(saved)]  # fmt: skip
    assert cli.main(args) == 2 and not saved.exists()
    err = capsys.readouterr().err
    assert "is an A100, l40s-pcie's an L40S" in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("ddpbench: error: --save-profile") and "over 25%" in last and "--save-anyway" in last
    assert cli.main([*args, "--save-anyway"]) == 0 and saved.exists()


def test_an_ada_card_is_a_pcie_card_and_the_gpus_names_are_compared_by_family():
    from harness.commands.predict import nccl_logs
    from harness.config.precision import gpu_family

    assert nccltests.is_pcie_card("NVIDIA L40S") and nccltests.profile_for_gpu("NVIDIA L4") is None
    assert not nccltests.is_pcie_card("NVIDIA A100-SXM4-80GB")
    assert [gpu_family(name) for name in ("NVIDIA A100-SXM4-80GB", "8x L40S 48GB", "NVIDIA A10", "B200")] == [
        "A100", "L40S", "A10", None]  # fmt: skip
    a100 = nccltests.Log("a.txt", "all_reduce", 8, 1, "NVIDIA A100-SXM4-80GB", ())
    assert nccl_logs.other_gpu(cluster.load("dgx-a100-40gb"), [a100]) == ""
    assert "is an A100, dgx-h100's an H100" in nccl_logs.other_gpu(cluster.load("dgx-h100"), [a100])

"""`predict --cluster A,B`: each cluster predicted as one is, what is the run's said once, --out's rows of both in one
file, and one comparison of the bookings last; several clusters refused where a flag is one cluster's."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from harness import cli

DATA = Path(__file__).resolve().parent.parent / "data"


def _comparison(said: str) -> tuple[list[list[str]], str]:
    """The bookings' table (its rows' cells) and the verdict line after it, which begin the output: the answer first,
    each cluster's prediction it rests on after."""
    lines = said.strip().splitlines()
    assert lines[0].startswith("ddpbench predict: the bookings compared (the fastest each cluster's answer below")
    assert lines[1].split()[:3] == ["cluster", "GPUs", "nodes"]
    end = next(k for k, line in enumerate(lines) if k > 1 and line.startswith("ddpbench predict: "))
    notes = ("a GPU's samples a step: ",)  # under the table: what its throughput rests on
    rows = [re.split(r"\s{2,}", line.strip()) for line in lines[2:end] if not line.strip().startswith(notes)]
    header = re.split(r"\s{2,}", lines[1].strip())
    if BOUND in header:  # its own test (test_bookings): left out here, so that the figures keep their columns
        rows = [row[: header.index(BOUND)] + row[header.index(BOUND) + 1 :] for row in rows]
    return rows, lines[end]


BOUND = "bound: exposed comm"


def test_two_clusters_one_bounded_are_compared_after_each_ones_prediction(tmp_path, capsys):
    """A step measured on an A100 is the A100 cluster's own and only bounded on the H100 one: the A100's bookings have
    one step, the H100's a range, and the verdict says whether the ranking holds at both ends."""
    shutil.copytree(DATA / "cpu_run", tmp_path / "cpu_run")
    out = tmp_path / "both.csv"
    assert cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path), "--cluster", "dgx-a100,dgx-h100",
                     "--detail", "--nodes", "1,2", "--local-step-ms", "310", "--local-step-gpu", "a100-sxm4-80gb",
                     "--out", str(out)]) == 0  # fmt: skip
    said, warned = capsys.readouterr()
    for cluster in ("dgx-a100", "dgx-h100"):  # each cluster's own prediction, in the order given
        assert said.count(f"the step per bucket cap on {cluster} ") == 1
    assert said.index("on dgx-a100 (8 GPUs a node") < said.index("on dgx-h100 (8 GPUs a node")
    assert said.count("compute scaled so that one rank's step") == 2  # each cluster's scaling to its GPU's step
    assert said.count("ddpbench predict: caps: the default list") == 1  # the run's own words, said once
    assert len(re.findall(r"DDP's own cost [\d.]+ ms a step at one rank", said)) == 1
    assert warned.count("but this profile is mlp's tiny size") == 1  # the run's caveat, not a cluster's
    # the cap line's step and efficiency are the tiny size's, named so: unnamed, they read as the model to train's
    caps = [line for line in said.splitlines() if "predicted fastest cap at w" in line]
    assert caps and all(" for the tiny size: " in line for line in caps)
    rows = pd.read_csv(out)  # one file, both clusters' rows, each saying its cluster and end
    assert set(rows["cluster"]) == {"dgx-a100", "dgx-h100"}
    assert rows.loc[rows["cluster"] == "dgx-a100", "local_step_end"].isna().all()
    assert set(rows.loc[rows["cluster"] == "dgx-h100", "local_step_end"]) == {"compute-bound", "memory-bound"}
    assert BOUND in said.splitlines()[1]  # DDP's booking without a choice: its exposed all-reduces' share too
    table, verdict = _comparison(said)
    assert [(row[0], row[1]) for row in table] == [("dgx-a100", "8"), ("dgx-a100", "16"), ("dgx-h100", "8"),
                                                   ("dgx-h100", "16")]  # fmt: skip
    for row in table:  # no choice (one world size: no memory per rank): DDP at its answer's cap, by its floor
        cluster, gpus, book, step = row[0], int(row[1]), row[3], row[4]
        at = rows[(rows["cluster"] == cluster) & (rows["world_size"] == gpus)]
        cap = float(re.fullmatch(r"DDP at ([\d.]+) MiB", book).group(1))
        ranked = at[["step_ms", "full_size_step_floor_ms"]].max(axis=1)[at["bucket_cap_mb"] == cap]
        expected = sorted({f"{ms:.4g}" for ms in ranked}, key=float)  # an end each: one figure, or a range
        assert step.lstrip("≥") == "–".join(expected)
        assert ("–" in step) == (cluster == "dgx-h100")
        samples = _rate(row[5].lstrip("≤").split("–")[-1])  # the most a second: the shorter step
        assert samples == pytest.approx(gpus * 8 / (ranked.min() / 1e3), rel=5e-3)  # the run's batch, 8 a GPU
    # the H100's longest step is shorter than the A100's 310 ms: ahead at both ends, a decided ranking; but 310 ms is
    # far below an A100's peak for mlp (warned), so the ends bound it only as they assume, and the step that turns it
    # is said (its 16 GPUs against the A100's 16: about its 310 ms, the GPU step alone, nothing exposed)
    assert verdict.startswith(
        "ddpbench predict: fastest: dgx-h100 × 16 GPUs at both ends, if its step scales as "
        "memory bandwidth or peak (far below the peak, it may not); fewest GPU-hours per sample: "
    )
    assert "open until" not in verdict
    assert verdict.endswith(
        "; dgx-h100 is fastest while its GPU's step is under about 310 ms, fewest GPU-hours under "
        "about 310 ms (bounded 98.21–188.7 ms): one step measured on dgx-h100's GPU settles it"
    )  # 98.21: SGD's estimated 1.58 ms on the A100 memory-bound at the compute-bound end too (0.96 ms, not 0.5)
    # the step given may have been timed at another batch than the run's 8, which the throughput divides it by: the
    # run's words, said once where they first apply (no memory per rank here: no answer table, under the bookings')
    assert said.count("  a GPU's samples a step: 8, the run's batch; a step given timed at another: "
                      "--batch-size N") == 1  # fmt: skip


def test_several_clusters_say_the_bookings_and_the_choice_and_leave_each_ones_lines_to_detail(tmp_path, capsys):
    """Three clusters' predictions printed 239 lines under the bookings (each one's busbw checks, memory, the step per
    cap, its answer): the short form says the bookings, the choice and the warnings, and what --detail adds."""
    shutil.copytree(DATA / "cpu_run", tmp_path / "cpu_run")
    flags = ["predict", "--run", "cpu_run", "--results", str(tmp_path), "--cluster", "dgx-a100,dgx-h100", "--nodes",
             "1,2", "--local-step-ms", "310", "--local-step-gpu", "a100-sxm4-80gb"]  # fmt: skip
    assert cli.main(flags) == 0
    short = capsys.readouterr()
    assert cli.main([*flags, "--detail"]) == 0
    detail = capsys.readouterr()
    rows, verdict = _comparison(short.out)
    assert verdict.startswith("ddpbench predict: fastest: ") and rows == _comparison(detail.out)[0]
    last = short.out.strip().splitlines()[-1]
    left = int(re.search(r"\((\d+) lines: ", last).group(1))
    assert last.endswith("printed with --detail") and "the step per bucket cap on" not in short.out
    assert len(detail.out.splitlines()) == len(short.out.splitlines()) - 1 + left  # all of it, but the pointer
    assert short.err.count("ddpbench: warning: ") >= 3  # the warnings kept: no state per rank, the size, the peak


def test_a_batch_asked_is_the_one_the_throughput_counts(tmp_path, capsys):
    """--batch-size: the step given was timed at that batch, so a booking's samples a second count it and the run's
    batch is no longer said to be the one they rest on."""
    shutil.copytree(DATA / "cpu_run", tmp_path / "cpu_run")
    assert cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path), "--cluster", "dgx-a100,dgx-h100",
                     "--detail", "--nodes", "1", "--local-step-ms", "310", "--local-step-gpu", "a100-sxm4-80gb",
                     "--batch-size", "32"]) == 0  # fmt: skip
    said = capsys.readouterr().out
    assert "the run's batch" not in said
    table, _ = _comparison(said)
    a100 = next(row for row in table if row[0] == "dgx-a100")
    assert _rate(a100[5]) == pytest.approx(8 * 32 / (float(a100[4].lstrip("≥")) / 1e3), rel=5e-3)


def test_a_batch_given_even_the_runs_own_is_not_asked_for(small_run, capsys):
    """`--batch-size` at the run's own batch (4 here: mlp's), one value or each cluster's, was asked for again under
    the answer ('a step given timed at another: --batch-size N'): the caveat is for a step given without it."""
    base = ["predict", "--run", small_run.name, "--results", str(small_run.parent), "--nodes", "1"]
    caveat = "a step given timed at another: --batch-size N"
    assert cli.main([*base, "--cluster", "dgx-h100", "--local-step-ms", "0.2"]) == 0
    said = capsys.readouterr().out
    assert caveat in said  # without --batch-size: the run's batch, said so
    batch = re.search(r"a GPU's samples a step: (\d+), the run's batch", said)[1]
    for flags in (["--cluster", "dgx-h100", "--local-step-ms", "0.2", "--batch-size", batch],
                  ["--cluster", "dgx-h100,dgx-h200", "--detail", "--local-step-ms", "dgx-h100=0.2,dgx-h200=0.15",
                   "--batch-size", f"dgx-h100={batch},dgx-h200={batch}"]):  # fmt: skip
        assert cli.main([*base, *flags]) == 0
        assert caveat not in capsys.readouterr().out, flags


def test_the_steps_words_are_said_once_not_a_clusters(tmp_path, capsys):
    """A step measured on an A100 is the same claim whichever cluster is weighed: its FLOPs against the A100's peak and
    what the full size's floors are were said once per cluster, word for word."""
    shutil.copytree(DATA / "cpu_run", tmp_path / "cpu_run")
    assert cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path), "--cluster", "dgx-a100,dgx-h200",
                     "--detail", "--nodes", "1", "--local-step-ms", "1",
                     "--local-step-gpu", "a100-sxm4-80gb"]) == 0  # fmt: skip
    said = capsys.readouterr().out
    assert said.count("the step per bucket cap on ") == 2  # each cluster's table, under the one line of floors
    assert said.count("ddpbench predict: --local-step-ms 1 for mlp's full size (8 samples a GPU) is ") == 1
    assert said.count(" of one a100-sxm4-80gb's dense peak in bf16 (312 TFLOP/s)") == 1  # not warned: below 100 %
    assert said.count("ddpbench predict: the full size puts floors under each step, right of | below") == 1
    # a legend the clusters' tables share: said with the first, 'as above' with the other
    assert said.count("NCCL's algorithms on the profile's bandwidths; ms; blank: as above") == 1
    assert "the step per bucket cap on dgx-h200 (8 GPUs a node; as above):" in said
    assert said.count("(+: predicted faster; docs/measured/cluster-model.md)") == 1
    assert said.count("a cap named is theirs, the floors yours") == 1


def test_a_fitted_profiles_file_is_named_by_its_stem_and_priced_by_it(tmp_path, capsys):
    """A fit saved by --save-profile was named 'dgx-a100 fitted to 1 nccl-tests log(s) of 2 nodes': the cluster column,
    the prose ('…of 2 nodes's GPU') and --gpu-hour-price (which wanted the file's path) all had that sentence. A saved
    fit (one saved before so too) is its file's stem, priced by the stem or the path."""
    import dataclasses

    from harness.perfmodel.clusters import cluster

    shutil.copytree(DATA / "cpu_run", tmp_path / "cpu_run")
    saved_so = "dgx-a100 fitted to 1 nccl-tests log(s) of 2 nodes"  # as a fit was saved before
    fitted = dataclasses.replace(cluster.load("dgx-a100"), name=saved_so, fitted_to="1 nccl-tests log(s) of up to 2 "
                                 "node(s) (n2.txt)", fitted_nodes=2)  # fmt: skip
    (tmp_path / "A100FIT.toml").write_text(cluster.to_toml(fitted), encoding="utf-8")
    path = str(tmp_path / "A100FIT.toml")
    for key in ("A100FIT", path):
        assert cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path), "--cluster", f"{path},dgx-h200",
                         "--detail", "--nodes", "1", "--local-step-ms", "310", "--local-step-gpu", "a100-sxm4-80gb",
                         "--gpu-hour-price", f"{key}=1.9,dgx-h200=3.6"]) == 0  # fmt: skip
        said = capsys.readouterr().out
        table, _ = _comparison(said)
        assert [row[0] for row in table] == ["A100FIT", "dgx-h200"] and "fitted to 1 nccl-tests log(s) of 2" not in said
        assert float(table[0][7]) == pytest.approx(1.9 * float(table[0][6]), rel=2e-2)  # its price, by either key
    (tmp_path / "dgx-h200.toml").write_text(cluster.to_toml(cluster.load("dgx-h200")), encoding="utf-8")
    assert cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path), "--cluster",
                     f"{tmp_path / 'dgx-h200.toml'},dgx-h200", "--local-step-ms", "310"]) == 2  # fmt: skip
    assert f"{tmp_path / 'dgx-h200.toml'} and dgx-h200 are both named 'dgx-h200'; give one" in capsys.readouterr().err


def test_the_bookings_are_what_each_clusters_answer_books(small_run, tmp_path, capsys):
    """With memory per rank (a run at two world sizes) each booking is its cluster's choice: the strategy its answer's
    table books and that table's step (on the H200, whose step a step timed on an H100 bounds, the shorter end, the
    one its answer's table is printed at, first in the booking's range; its answer's table spans the same range to the
    other end: it once said the shorter end alone, 'fsdp ≥54.64' for a step at 43 % of its peak, likelier long)."""
    flags = [
        "--cluster",
        "dgx-h100,dgx-h200",
        "--detail",
        "--nodes",
        "1,2",
        "--caps",
        "0.001,25",
        "--local-step-ms",
        "0.2",
        "--local-step-gpu",
        "h100-sxm",
    ]
    assert cli.main(["predict", "--run", small_run.name, "--results", str(small_run.parent), *flags]) == 0
    said = capsys.readouterr().out
    table, verdict = _comparison(said)
    # the memory tables' legend and notes, the same on both clusters but for its name: said with the first
    assert said.count("model state (parameters + gradients + optimizer state, at the most GPUs) as held at") == 1
    above = re.search(
        r"ddpbench predict: memory per rank(?: at|, alike at) w8 / w16 on dgx-h200, as above(.*):\n", said
    )
    assert above and "with room (8% of the count) up to a batch a rank of" in above[1]  # its own GPU's batches
    assert said.count("what fits judged in bf16 (autocast), --dtype auto's on ") == 1
    for cluster in ("dgx-h100", "dgx-h200"):
        answer = said.split(f"the answer on {cluster}, ")[1].splitlines()[2:4]  # under its header: w8, w16
        booked = [re.split(r"\s{2,}", line.strip())[:3] for line in answer]
        rows = [row for row in table if row[0] == cluster]
        assert [[row[1], row[3], row[4]] for row in rows] == booked
        assert all(("–" in row[4]) == (cluster == "dgx-h200") for row in rows)
    assert "a range: the step's memory-bound end to its compute-bound end, the rest at the memory-bound end" in said
    assert verdict.startswith("ddpbench predict: fastest: ") and "fewest GPU-hours per sample: " in verdict
    # the batch the GPU-hours divide the step by is the run's: said under the bookings, first, not again under each
    # cluster's answer table (it was three times, word for word)
    note = "a GPU's samples a step: "
    assert said.count(note) == 1 and said.index(note) < said.index(verdict) < said.index("the answer on dgx-h100")


def test_each_clusters_own_nodes_are_the_bookings_and_the_verdicts_compared(tmp_path, capsys):
    """2 A100 nodes or 1 H200 node: `--nodes 1,2` booked every cluster at both, so the verdicts ranked the H200's 16
    GPUs, asked of no one, and the pair asked had no verdict of its own. `--nodes dgx-a100=2,dgx-h200=1`: those two
    bookings alone, in the table, the rows and every verdict, the turn where the H200's 8 GPUs meet the A100's 16."""
    shutil.copytree(DATA / "cpu_run", tmp_path / "cpu_run")
    out = tmp_path / "pair.csv"
    assert cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path), "--cluster", "dgx-a100,dgx-h200",
                     "--detail", "--nodes", "dgx-a100=2,dgx-h200=1", "--gpu-hour-price", "dgx-a100=1.9,dgx-h200=3.6",
                     "--local-step-ms", "310", "--local-step-gpu", "a100-sxm4-80gb", "--batch-size", "128",
                     "--out", str(out)]) == 0  # fmt: skip
    said = capsys.readouterr().out
    table, verdict = _comparison(said)
    assert [row[:3] for row in table] == [["dgx-a100", "16", "2"], ["dgx-h200", "8", "1"]]
    rows = pd.read_csv(out)
    assert {c: sorted(set(rows.loc[rows["cluster"] == c, "world_size"])) for c in ("dgx-a100", "dgx-h200")} == {
        "dgx-a100": [16], "dgx-h200": [8]}  # fmt: skip
    assert "dgx-h200 × 16" not in said and "dgx-a100 × 8 " not in said
    # the H200's 8 GPUs (its step its GPU's: nothing exposed at one node) match the A100's 16 at a step of
    # 8 × 128 over the A100s' samples a second
    turn = 8 * 128 / _rate(table[0][5]) * 1e3
    assert "samples a step" in said.splitlines()[1]  # 16 GPUs at 128 a GPU against 8: not one footing, said
    assert [row[-1] for row in table] == ["2,048", "1,024"]
    assert verdict.startswith("ddpbench predict: fastest: dgx-h200 × 8 GPUs at both ends, ")
    assert "; cheapest per sample (at the prices given): dgx-h200 × 8 GPUs at both ends; " in verdict
    assert f"dgx-h200 is fastest while its GPU's step is under about {turn:.3g} ms, cheapest under " in verdict


def test_each_clusters_node_counts_run_to_the_next_name_and_either_name_names_it():
    from harness.commands.predict.bookings import nodes_of_each

    named = {"a100.toml": "a100", "dgx-h200": "dgx-h200"}  # as --cluster gives it: its profile's name
    assert nodes_of_each("a100=4,1,2, dgx-h200=1,1", named) == {"a100.toml": "1,2,4", "dgx-h200": "1"}
    assert nodes_of_each("dgx-h200=2,a100.toml=1", named) == {"a100.toml": "1", "dgx-h200": "2"}


def test_gpu_counts_within_one_node_or_of_whole_nodes_are_priced_beside_the_nodes_asked():
    """A user asked about 4 GPUs; the prediction started at one whole node (8 on dgx-h100)."""
    from harness.config.bench import ConfigError
    from harness.config.units import gpu_counts_on_nodes

    assert gpu_counts_on_nodes([2, 4], [], per_node=8, cluster="dgx-h100") == [2, 4]
    assert gpu_counts_on_nodes([4, 16], [1, 2], per_node=8, cluster="dgx-h100") == [4, 8, 16]  # 16: 2 nodes, once
    for count, why in ((12, "it does not fit dgx-h100's nodes of 8 GPUs"), (1, "one GPU all-reduces nothing")):
        with pytest.raises(ConfigError, match=re.escape(f"--gpus {count}: {why}; give 2 to 8 (in one node) or a "
                                                        "multiple of 8 (whole nodes: 16, 32, …)")):  # fmt: skip
            gpu_counts_on_nodes([4, count], [1], per_node=8, cluster="dgx-h100")


@pytest.mark.parametrize(
    ("flags", "error"),
    [
        (["--cluster", "dgx-h100", "--gpus", "4,12", "--local-step-ms", "310"],
         "--gpus 12: it does not fit dgx-h100's nodes of 8 GPUs; give 2 to 8 (in one node) or a multiple of 8"),
        (["--cluster", "dgx-a100,dgx-h200", "--gpus", "2,20", "--local-step-ms", "310"],
         "--gpus 20: it does not fit dgx-a100's nodes of 8 GPUs"),
    ],
)  # fmt: skip
def test_a_gpu_count_that_fits_no_node_is_refused_in_one_line(tmp_path, capsys, flags, error):
    shutil.copytree(DATA / "cpu_run", tmp_path / "cpu_run")
    out = tmp_path / "x.csv"
    assert cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path), *flags, "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and error in captured.err
    assert not out.exists()


def test_several_world_sizes_with_a_run_are_each_priced_from_its_profile(tmp_path, capsys):
    """predict --run R --gpus 3,4 was refused ("one world size without a cluster") though a run's profile prices any
    world size, as its own ones are priced without --gpus: a user checking scaling on the run's machine asks this."""
    shutil.copytree(DATA / "cpu_run", tmp_path / "cpu_run")
    out = tmp_path / "x.csv"
    flags = ["--run", "cpu_run", "--results", str(tmp_path), "--busbw", "90GB/s", "--gpus", "2,4", "--out", str(out)]
    assert cli.main(["predict", *flags]) == 0
    said = capsys.readouterr().out
    assert said.index("\nw2: all-reduce") < said.index("\nw4: all-reduce")
    assert set(pd.read_csv(out)["world_size"]) == {2, 4}


@pytest.mark.parametrize(
    ("nodes", "error"),
    [
        ("dgx-a100=2,dgx-h100=1", "--nodes 'dgx-a100=2,dgx-h100=1': 'dgx-h100' is not a cluster compared; give "
         "NAME=N,… for each cluster compared (dgx-a100, dgx-h200), e.g. dgx-a100=1,2,dgx-h200=1, or counts alone for "
         "every cluster (1,2)"),
        ("dgx-a100=0,dgx-h200=1", "--nodes 'dgx-a100=0,dgx-h200=1': '0' is not a node count, a whole number from 1 "
         "to 16,384; give NAME=N,… for each cluster compared (dgx-a100, dgx-h200)"),
        ("dgx-a100=2,dgx-h200=1.5", "'1.5' is not a node count"),
        ("dgx-a100=2", "--nodes 'dgx-a100=2' has no node count for dgx-h200; give NAME=N,… for each cluster"),
        ("2,dgx-a100=1,dgx-h200=1", "--nodes '2,dgx-a100=1,dgx-h200=1': '2' comes before any NAME=, so no cluster's"),
        ("dgx-a100=1,dgx-h200=1,dgx-a100=2", "names 'dgx-a100' twice; give NAME=N,…"),
    ],
)  # fmt: skip
def test_a_bad_clusters_node_count_is_refused_in_one_line(tmp_path, capsys, nodes, error):
    shutil.copytree(DATA / "cpu_run", tmp_path / "cpu_run")
    out = tmp_path / "x.csv"
    assert cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path), "--cluster", "dgx-a100,dgx-h200",
                     "--nodes", nodes, "--local-step-ms", "310", "--local-step-gpu", "a100-sxm4-80gb",
                     "--out", str(out)]) == 2  # fmt: skip
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and error in captured.err
    assert not out.exists()


@pytest.mark.parametrize(
    ("flags", "error"),
    [
        (["--page", "x.html"], "--page with --cluster 'dgx-a100,dgx-h100': a what-if page is one cluster's; give one"),
        (["--nccl-tests", "log.txt"], "--nccl-tests with --cluster 'dgx-a100,dgx-h100': its logs are one cluster's"),
        # the way round, in the same line: a fit saved once is a profile like any other
        (
            ["--nccl-tests", "log.txt"],
            "; or fit the logs once to their cluster (--cluster dgx-a100 --nccl-tests LOG… "
            "--save-profile dgx-a100-fit.toml), then compare --cluster dgx-a100-fit.toml,dgx-h100",
        ),
        # a file's profile: its stem names the fit; a --save-profile given is the file suggested
        (
            ["--cluster", "sub/my.toml,dgx-h100", "--nccl-tests", "log.txt"],
            "--save-profile my-fit.toml), then compare --cluster my-fit.toml,dgx-h100",
        ),
        (
            ["--nccl-tests", "log.txt", "--save-profile", "ours.toml"],
            "--save-profile ours.toml), then compare --cluster ours.toml,dgx-h100",
        ),
        (["--cluster", "dgx-a100,dgx-x"], "--cluster 'dgx-x' is neither a built-in profile (dgx-a100, "),
        (["--cluster", "dgx-a100,"], "--cluster 'dgx-a100,' names an empty profile; give names (dgx-a100, "),
        # one step timed on one GPU, taken as an A100's and an H100's alike, tied the two clusters' bookings
        (
            [],
            "--local-step-ms 310 with --cluster 'dgx-a100,dgx-h100', whose GPUs differ: one step cannot be each one's "
            "own; name the GPU that timed it, --local-step-gpu NAME (h200-sxm, ",
        ),
    ],
)
def test_what_is_one_clusters_is_refused_with_several_in_one_line(tmp_path, capsys, flags, error):
    shutil.copytree(DATA / "cpu_run", tmp_path / "cpu_run")
    out = tmp_path / "x.csv"
    args = ["predict", "--run", "cpu_run", "--results", str(tmp_path), "--cluster", "dgx-a100,dgx-h100",
            "--local-step-ms", "310", "--out", str(out), *flags]  # fmt: skip
    assert cli.main(args) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and error in captured.err
    assert not out.exists()


def test_a_collectives_table_is_one_clusters(tmp_path, capsys):
    out = tmp_path / "x.csv"
    assert cli.main(["predict", "--cluster", "dgx-a100,dgx-h100", "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and not out.exists()
    assert "a collectives table is one cluster's; give one (dgx-a100 or dgx-h100), or --run RUN" in captured.err


def test_a_cluster_named_twice_is_predicted_once_as_the_note_says(tmp_path, capsys):
    """--cluster dgx-a100,dgx-a100 said 'each is predicted once', then refused 'dgx-a100,dgx-a100' as no profile."""
    shutil.copytree(DATA / "cpu_run", tmp_path / "cpu_run")
    assert cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path), "--cluster", "dgx-a100,dgx-a100",
                     "--detail", "--nodes", "1", "--local-step-ms", "310"]) == 0  # fmt: skip
    said = capsys.readouterr().out
    assert "--cluster 'dgx-a100,dgx-a100' repeats a value: each is predicted once" in said
    assert said.count("the step per bucket cap on dgx-a100 ") == 1 and "the bookings compared" not in said


@pytest.mark.parametrize("named", ["dgx-a100,dgx-a100,x", "x,x"])
def test_a_cluster_named_twice_beside_a_bad_one_is_refused_in_one_line(tmp_path, capsys, named):
    shutil.copytree(DATA / "cpu_run", tmp_path / "cpu_run")
    assert cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path), "--cluster", named,
                     "--local-step-ms", "310"]) == 2  # fmt: skip
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and "--cluster 'x' is neither" in captured.err


def test_at_the_prices_given_each_booking_costs_its_gpu_hours_times_its_clusters_price(tmp_path, capsys):
    """--gpu-hour-price: a cost column, price × GPU-hours, and the cheapest ranked by it. Without prices the fewest
    GPU-hours say the price ratio under which they cost least, from the table's own figures."""
    shutil.copytree(DATA / "cpu_run", tmp_path / "cpu_run")
    args = ["predict", "--run", "cpu_run", "--results", str(tmp_path), "--cluster", "dgx-a100,dgx-h100", "--nodes",
            "1,2", "--detail", "--local-step-ms", "310", "--local-step-gpu", "a100-sxm4-80gb"]  # fmt: skip
    assert cli.main(args) == 0
    table, verdict = _comparison(capsys.readouterr().out)
    hours = {row[0]: [float(v) for v in row[6].split("–")] for row in table}
    low, high = hours["dgx-a100"][0] / hours["dgx-h100"][1], hours["dgx-a100"][0] / hours["dgx-h100"][0]
    ratio = re.search(r"cheaper while an H100 hour costs under ([\d.]+)–([\d.]+)× an A100's: "
                      r"--gpu-hour-price dgx-a100=P,dgx-h100=Q ranks by cost\); dgx-h100 is ", verdict)  # fmt: skip
    assert ratio and float(ratio[1]) <= low < float(ratio[1]) + 0.1 and high <= float(ratio[2]) < high + 0.1
    prices = {"dgx-a100": 1.8, "dgx-h100": 1.8 * (low + high) / 2}  # inside the ratio's range: open
    assert cli.main([*args, "--gpu-hour-price", ",".join(f"{k}={v}" for k, v in prices.items())]) == 0
    said = capsys.readouterr().out
    assert "price units per 1M samples" in said
    table, verdict = _comparison(said)
    for row in table:
        costs = [float(v) for v in row[7].split("–")]
        assert costs == [pytest.approx(prices[row[0]] * h, rel=5e-3) for h in hours[row[0]]]
    assert "; cheapest per sample (at the prices given): dgx-h100 × 8/16 GPUs at the compute-bound end, dgx-a100 × " \
        "8/16 GPUs at the memory-bound end: open until one step is measured on dgx-h100's GPU" in verdict  # fmt: skip
    assert "GPU-hours" not in verdict
    assert cli.main([*args, "--gpu-hour-price", f"dgx-a100=1.8,dgx-h100={1.7 * low:g}"]) == 0  # under: the H100s
    assert ("cheapest per sample (at the prices given): dgx-h100 × 8/16 GPUs at both ends (tied: within 4% of the "
            "best, more than the model can tell); dgx-h100 is ") in capsys.readouterr().out  # fmt: skip


def test_prices_without_a_step_to_price_are_said_unused(tmp_path, capsys):
    """A CPU run without --local-step-ms has no step, so no bookings table: --gpu-hour-price went unused, unsaid."""
    shutil.copytree(DATA / "cpu_run", tmp_path / "cpu_run")
    assert cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path), "--cluster", "dgx-a100,dgx-h100",
                     "--nodes", "1", "--gpu-hour-price", "dgx-a100=1.8,dgx-h100=3.2"]) == 0  # fmt: skip
    said = capsys.readouterr().out
    assert "the bookings compared (" not in said  # no table: a command that compares them at estimates, below
    first, second = said.splitlines()[:2]  # why no booking, once for both, first; each cluster's prediction after
    assert first.startswith("ddpbench predict: no step, strategy to book or cap on dgx-a100 or dgx-h100: the profile's")
    assert said.count("no step, strategy to book or cap") == 1
    assert second == ("ddpbench predict: --gpu-hour-price not used: no bookings are compared without a "
                      "GPU's step (--local-step-ms MS, the one-GPU step, gives them)")  # fmt: skip


def test_without_a_step_the_clusters_estimates_are_one_command_that_compares_them(tmp_path, capsys, monkeypatch):
    """A user choosing between two built-ins and a .toml of their own got one command per cluster, the .toml's naming
    its profile's name ('--cluster l4-cloud', refused: 'neither a built-in profile … nor a .toml file'), and had to
    merge three commands by hand to see the bookings side by side."""
    import dataclasses
    import shlex

    from harness.commands.console import invoked
    from harness.perfmodel.clusters import cluster

    monkeypatch.setattr(invoked, "ddpbench_command", lambda: "ddpbench")
    shutil.copytree(DATA / "cpu_run", tmp_path / "cpu_run")
    mine = tmp_path / "mine.toml"  # a profile of one's own, its name not its file's
    mine.write_text(cluster.to_toml(dataclasses.replace(cluster.load("dgx-a100"), name="my-a100")), encoding="utf-8")
    assert cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path), "--cluster", f"{mine},dgx-h100",
                     "--nodes", "1", "--gpu-hour-price", "my-a100=1.8,dgx-h100=3.2"]) == 0  # fmt: skip
    said = capsys.readouterr().out.splitlines()
    estimates = [line for line in said if "an estimate to start from, not a measurement" in line]
    assert len(estimates) == 2 and f" --cluster {mine} --nodes 1 --local-step-ms " in estimates[0]
    names = ("my-a100", "dgx-h100")
    steps = {name: float(line.rpartition("--local-step-ms ")[2]) for name, line in zip(names, estimates, strict=True)}
    compared = said[2]  # after why no booking and the prices unused: the side by side, one command away
    assert compared.startswith("ddpbench predict: the bookings compared at each cluster's step estimated from its")
    command = shlex.split(compared.partition(": ddpbench ")[2])
    assert command[command.index("--cluster") + 1] == f"{mine},dgx-h100"
    assert command[command.index("--local-step-ms") + 1] == ",".join(f"{n}={ms:g}" for n, ms in steps.items())
    assert command[command.index("--gpu-hour-price") + 1] == "my-a100=1.8,dgx-h100=3.2"
    assert cli.main(command) == 0  # and it runs: the bookings compared, at the prices given
    rows, _ = _comparison(capsys.readouterr().out)
    assert {row[0] for row in rows} == {"my-a100", "dgx-h100"}


@pytest.mark.parametrize(
    ("cluster", "prices", "error"),
    [
        ("dgx-a100,dgx-h100", "dgx-a100=1.8,dgx-x=2", "--gpu-hour-price 'dgx-a100=1.8,dgx-x=2': 'dgx-x' is not a "
         "cluster compared; give NAME=PRICE a GPU-hour for each cluster compared, comma-separated "
         "(dgx-a100, dgx-h100)"),
        ("dgx-a100,dgx-h100", "dgx-a100=0,dgx-h100=2",
         "--gpu-hour-price 'dgx-a100=0,dgx-h100=2': '0' is not a price, a number above 0"),
        ("dgx-a100,dgx-h100", "dgx-a100=1.8,dgx-h100=$3",
         "--gpu-hour-price 'dgx-a100=1.8,dgx-h100=$3': '$3' is not a price, a number above 0"),
        ("dgx-a100,dgx-h100", "dgx-a100=1.8", "--gpu-hour-price 'dgx-a100=1.8' has no price for dgx-h100; give "),
        ("dgx-a100,dgx-h100", "dgx-a100", "--gpu-hour-price 'dgx-a100': 'dgx-a100' is not NAME=PRICE; give NAME=PRICE"),
        ("dgx-a100", "1.8", "--gpu-hour-price '1.8' with one cluster, 'dgx-a100': the price costs its whole run; "
         "give the run's samples too, --train-samples N, e.g. 6.4M"),
    ],
)  # fmt: skip
def test_a_bad_price_is_refused_in_one_line(tmp_path, capsys, cluster, prices, error):
    _refused_in_one_line(tmp_path, capsys, cluster, ["--gpu-hour-price", prices], error)


@pytest.mark.parametrize(
    ("cluster", "prices", "error"),
    [
        ("dgx-a100", "$3", "--gpu-hour-price '$3': '$3' is not a price, a number above 0; give what a GPU-hour of "
         "dgx-a100 costs you, a number (3.9) or dgx-a100=PRICE"),
        ("dgx-a100", "dgx-h100=1.8", "--gpu-hour-price 'dgx-h100=1.8': 'dgx-h100' is not a cluster compared"),
        ("dgx-a100,dgx-a100", "0", "--gpu-hour-price '0': '0' is not a price, a number above 0"),
    ],
)  # fmt: skip
def test_one_clusters_bad_price_for_its_run_is_refused_in_one_line(tmp_path, capsys, cluster, prices, error):
    _refused_in_one_line(tmp_path, capsys, cluster, ["--train-samples", "6.4M", "--gpu-hour-price", prices], error)


def test_a_run_or_a_price_without_a_cluster_is_refused_in_one_line(tmp_path, capsys):
    """The run's own network books nothing to time a whole run on: refused, naming what is."""
    shutil.copytree(DATA / "cpu_run", tmp_path / "cpu_run")
    assert cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path), "--train-samples", "6.4M",
                     "--gpu-hour-price", "3.9"]) == 2  # fmt: skip
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert "--train-samples and --gpu-hour-price without --cluster: the whole run is timed and priced on a " in (
        captured.err
    )


def _refused_in_one_line(tmp_path, capsys, cluster: str, flags: list[str], error: str) -> None:
    """Bookings of `cluster` with `flags` refused: exit 2, one line naming `error`, nothing printed or written."""
    shutil.copytree(DATA / "cpu_run", tmp_path / "cpu_run")
    out = tmp_path / "x.csv"
    assert cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path), "--cluster", cluster,
                     "--local-step-ms", "310", "--local-step-gpu", "a100-sxm4-80gb", *flags,
                     "--out", str(out)]) == 2  # fmt: skip
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and error in captured.err
    assert not out.exists()


def test_the_samples_a_step_are_a_column_only_where_the_bookings_differ_in_them(capsys):
    """16 H100s and 8 H200s at 2 samples a GPU step 32 and 16 sequences: the table said neither, so the two read as
    one footing. A column of all GPUs' samples a step where a booking's differs from another's; none where alike."""
    from harness.commands.console.predict.bookings import compared
    from harness.perfmodel.clusters.bookings import Booking

    def booked(cluster, gpus, batch):
        return Booking(cluster, gpus // 8, gpus, "fsdp", (), "", (80.0,), False, (gpus * batch / 0.08,), (1.0,),
                       batch=batch)  # fmt: skip

    for bookings, column in (([booked("dgx-h100", 16, 2), booked("dgx-h200", 8, 2)], ["32", "16"]),
                             ([booked("dgx-h100", 8, 4), booked("dgx-h200", 16, 2)], None),
                             ([booked("dgx-h100", 8, 2), booked("dgx-h200", 8, 2)], None)):  # fmt: skip
        compared(bookings, tokens=False, ends=None)
        said = capsys.readouterr().out
        table, _ = _comparison(said)
        assert ("samples a step" in said.splitlines()[1]) == bool(column)
        assert [row[-1] for row in table] == column if column else all(len(row) == 7 for row in table)


def test_each_cluster_is_priced_at_its_own_batch_and_its_step_there(tmp_path, capsys):
    """One --batch-size priced 16 H100s and 8 H200s at one batch a GPU, the H200's memory left unused: NAME=N,… gives
    each its own, with each one's step at it (--local-step-ms NAME=MS,…), as --nodes NAME=N,… gives its counts."""
    shutil.copytree(DATA / "cpu_run", tmp_path / "cpu_run")
    out = tmp_path / "each.csv"
    assert cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path), "--cluster", "dgx-a100,dgx-h200",
                     "--detail", "--nodes", "dgx-a100=2,dgx-h200=1", "--local-step-gpu", "a100-sxm4-80gb",
                     "--batch-size", "dgx-a100=128,dgx-h200=512", "--local-step-ms", "dgx-a100=310,dgx-h200=1200",
                     "--out", str(out)]) == 0  # fmt: skip
    said = capsys.readouterr().out
    rows = pd.read_csv(out)
    each = rows.groupby("cluster")[["batch_size", "local_step_ms"]].agg(set).to_dict("index")
    assert each == {"dgx-a100": {"batch_size": {128}, "local_step_ms": {310.0}},
                    "dgx-h200": {"batch_size": {512}, "local_step_ms": {1200.0}}}  # fmt: skip
    table, _ = _comparison(said)
    assert [row[-1] for row in table] == ["2,048", "4,096"]  # 16 × 128 against 8 × 512: unlike, said
    a100 = table[0]  # its samples a second: its GPUs × its batch over its step
    assert _rate(a100[5].lstrip("≤")) == pytest.approx(16 * 128 / float(a100[4].lstrip("≥")) * 1e3,
                                                                        rel=5e-3)  # fmt: skip
    assert "--local-step-ms 1200 was measured on a100-sxm4-80gb, not dgx-h200's GPU" in said


@pytest.mark.parametrize(
    ("flags", "error"),
    [
        (["--batch-size", "dgx-a100=4"], "--batch-size 'dgx-a100=4' names a cluster's value without --cluster; give "
         "one value, e.g. --batch-size 4, or name the clusters with --cluster dgx-a100"),
        (["--local-step-ms", "dgx-a100=x,dgx-h100=3"], "e.g. --local-step-ms MS, or name the clusters with --cluster "
         "dgx-a100,dgx-h100"),
    ],
)  # fmt: skip
def test_a_clusters_value_without_cluster_names_the_forms_that_are_valid(tmp_path, capsys, flags, error):
    """It read '… give one value (2)': a leftover figure, and no form named to give instead."""
    shutil.copytree(DATA / "cpu_run", tmp_path / "cpu_run")
    assert cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path), *flags]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and error in captured.err


@pytest.mark.parametrize(
    ("flags", "error"),
    [
        (["--batch-size", "dgx-a100=128,dgx-h200=256", "--local-step-ms", "310"],
         "--batch-size 'dgx-a100=128,dgx-h200=256' gives the clusters unlike batches, but --local-step-ms 310 is one "
         "step, timed at one batch: give each cluster's step at its batch, --local-step-ms dgx-a100=MS,dgx-h200=MS"),
        (["--batch-size", "dgx-a100=128,dgx-h100=256", "--local-step-ms", "310"],
         "--batch-size 'dgx-a100=128,dgx-h100=256': 'dgx-h100' is not a cluster compared; give NAME=N for each cluster "
         "compared (dgx-a100, dgx-h200), e.g. dgx-a100=N,dgx-h200=N, or one value"),
        (["--batch-size", "dgx-a100=128,dgx-h200=0.5", "--local-step-ms", "310"], "'0.5' is not a whole number ≥ 1"),
        (["--batch-size", "dgx-a100=128", "--local-step-ms", "310"], "'dgx-a100=128' has no value for dgx-h200"),
        (["--local-step-ms", "dgx-a100=310,dgx-h200=inf"], "'inf' is not the one-GPU step in ms, a finite number > 0"),
        (["--local-step-ms", "dgx-a100=310,dgx-a100=320"], "names 'dgx-a100' twice"),
    ],
)  # fmt: skip
def test_a_bad_clusters_batch_or_step_is_refused_in_one_line(tmp_path, capsys, flags, error):
    shutil.copytree(DATA / "cpu_run", tmp_path / "cpu_run")
    out = tmp_path / "x.csv"
    assert cli.main(["predict", "--run", "cpu_run", "--results", str(tmp_path), "--cluster", "dgx-a100,dgx-h200",
                     "--local-step-gpu", "a100-sxm4-80gb", *flags, "--out", str(out)]) == 2  # fmt: skip
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and error in captured.err
    assert not out.exists()


def test_a_gpu_count_that_fits_no_node_is_refused_before_a_workload_is_profiled(monkeypatch, capsys):
    """A reviewer's `predict --workload mlp --gpus 12 --cluster dgx-h100` measured a profile, then refused."""
    from harness.commands.predict import command

    monkeypatch.setattr(command, "_fresh_setup", lambda *a, **k: pytest.fail("profiled before the refusal"))
    assert cli.main(["predict", "--workload", "mlp", "--size", "tiny", "--gpus", "12", "--cluster", "dgx-h100"]) == 2
    assert "--gpus 12: it does not fit dgx-h100's nodes of 8 GPUs" in capsys.readouterr().err


def test_fsdp_bf16_what_if_counts_the_gathers_and_the_unsharded_blocks_at_half_their_parameters_bytes():
    """predict priced FSDP2 at fp32 (a CPU runs no bf16 FSDP) and said bf16 "would halve their bytes", with no figure:
    the model's counts give it. 8 GiB of parameters, 2 of them the root's, the largest block 1 GiB: the gathers
    assemble 6 × 2 + 2 = 14 GiB a step; held unsharded, the root and the block twice (4 GiB) and their gradients, the
    block's reduce-scatter input beside them (4 GiB), 8 GiB, at bf16 2 + 1.5 + 1 (fp32, its reduce_dtype)."""
    from harness.commands.console.predict.full_size import fsdp_bf16_words

    gib = 2**30
    full = {"param_bytes": 8 * gib, "root_param_bytes": 2 * gib, "root_grad_bytes": 2 * gib,
            "largest_block_bytes": gib, "largest_block_grad_bytes": gib}  # fmt: skip
    said = fsdp_bf16_words(full)
    assert "its all-gathers would assemble 7.0 GiB a step, not 14.0 GiB" in said
    assert "a rank would hold 4.5 GiB unsharded at its peak, not 8.0 GiB" in said
    assert "counted from the model, not measured" in said


def test_a_whole_run_is_timed_and_costed_on_each_booking_and_the_fastest_set_against_the_cheapest(capsys):
    """A manager asked how long 100,000 steps at a global batch of 64 take on each booking and what each costs: the
    table gave a step and a cost a million samples, the multiplying theirs. --train-samples times the run on each
    booking, its cost at the prices given in place of the cost a million samples, and the fastest's premium."""
    import dataclasses

    from harness.commands.console.predict.bookings import compared
    from harness.perfmodel.clusters.bookings import Booking

    def booked(cluster, gpus, step_ms):
        return Booking(cluster, gpus // 8, gpus, "stock", (), "", (step_ms,), False, (gpus * 2 / step_ms * 1e3,),
                       (step_ms * 1e6 / 2 / 3.6e6,), batch=2)  # fmt: skip

    bookings = [booked("dgx-a100", 8, 16.0), booked("dgx-h100", 8, 5.0), booked("dgx-h100", 32, 6.0)]
    compared(bookings, tokens=False, ends=None, prices={"dgx-a100": 2.1, "dgx-h100": 3.9}, samples=6.4e6)
    said = capsys.readouterr().out
    header = said.splitlines()[1].split("  ")
    assert "run h" in said.splitlines()[1] and "run cost" in said.splitlines()[1]
    assert not any("price units per" in cell for cell in header)  # the run's cost in its place, not beside it
    table, verdict = _comparison(said.replace("\n  run: ", "\n  a GPU's samples a step: "))
    hours = {(row[0], row[1]): float(row[-3]) for row in table}  # run h, run cost, samples a step last
    assert hours[("dgx-a100", "8")] == pytest.approx(400_000 * 0.016 / 3600, rel=5e-3)  # 6.4M / 16 a step
    assert hours[("dgx-h100", "32")] == pytest.approx(100_000 * 0.006 / 3600, rel=5e-3)  # 6.4M / 64 a step
    assert [float(row[-2]) for row in table] == pytest.approx(
        [2.1 * 8 * hours[("dgx-a100", "8")], 3.9 * 8 * hours[("dgx-h100", "8")], 3.9 * 32 * hours[("dgx-h100", "32")]],
        rel=5e-3,
    )
    assert "  run: 6.4M samples (--train-samples), 400,000 steps at 16 samples a step, 100,000 at 64; " in said
    assert verdict.endswith(
        "; the run of 6.4M samples: fastest dgx-h100 × 32 GPUs, 0.167 h for 20.8; cheapest "
        "dgx-h100 × 8 GPUs, 0.556 h for 17.3: the fastest saves 0.389 h for 3.47 more (+20%)"
    )
    floored = [dataclasses.replace(b, at_least=True) for b in bookings]  # full-size floors: no bound on a difference
    compared(floored, tokens=False, ends=None, prices={"dgx-a100": 2.1, "dgx-h100": 3.9}, samples=6.4e6)
    floored_said = capsys.readouterr().out
    assert "; ≥: at least, a full-size floor under the step (≤: at most)):" in floored_said.splitlines()[0]
    assert "≥:" not in said.splitlines()[0]  # said only where a floor ranks a booking
    floored_verdict = floored_said.rstrip().splitlines()[-1]
    assert floored_verdict.endswith(
        "fastest dgx-h100 × 32 GPUs, ≥0.167 h for ≥20.8; cheapest dgx-h100 × 8 GPUs, ≥0.556 h for ≥17.3: the "
        "fastest saves 0.389 h for 3.47 more (+20%) (at the full size's floors: the difference is no bound either way)"
    )


@pytest.mark.parametrize(
    ("cluster", "samples", "error"),
    [
        ("dgx-a100,dgx-h100", "6.4X", "--train-samples '6.4X' is not a count above 0; give a number, with K, M, B"),
        ("dgx-a100,dgx-h100", "0", "--train-samples '0' is not a count above 0"),
        ("dgx-a100,dgx-h100", "1e999", "--train-samples '1e999' is not a count above 0"),
        ("dgx-a100", "0", "--train-samples '0' is not a count above 0"),
    ],
)  # fmt: skip
def test_a_bad_run_length_is_refused_in_one_line(tmp_path, capsys, cluster, samples, error):
    _refused_in_one_line(tmp_path, capsys, cluster, ["--train-samples", samples], error)


def _rate(text: str) -> float:
    """A samples-a-second cell as a number: '1.3K' 1,300, '6.61K' 6,610 (values.rate_text: three significant
    digits, so a figure set against it holds to 5e-3)."""
    scale = {"K": 1e3, "M": 1e6, "B": 1e9}.get(text[-1:], 1.0)
    return float(text.rstrip("KMB").replace(",", "")) * scale


def test_one_cluster_times_and_prices_the_whole_run_at_each_gpu_count_and_its_page_says_the_same(
    small_run, tmp_path, capsys
):
    """A budget holder who had chosen dgx-h100 asked what 6.4M samples take at 8, 16 and 32 of its GPUs, and cost:
    refused ('the whole run is timed on the bookings of several; give several'). One cluster's answer now has the run's
    own table, at a plain price, each figure from its booking's step, what they count under it and the fastest set
    against the cheapest; the what-if page of the same predict the same figures beside its choice."""
    import html

    page = tmp_path / "h100.html"
    assert cli.main(["predict", "--run", small_run.name, "--results", str(small_run.parent), "--cluster", "dgx-h100",
                     "--gpus", "8,16,32", "--local-step-ms", "120", "--train-samples", "6.4M", "--gpu-hour-price",
                     "3.9", "--page", str(page)]) == 0  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    at = next(k for k, line in enumerate(lines) if line.startswith("ddpbench predict: the run of 6.4M samples on "))
    assert lines[at].startswith("ddpbench predict: the run of 6.4M samples on dgx-h100, per GPU count (what its")
    assert any(line.startswith("ddpbench predict: the answer on dgx-h100, ") for line in lines[:at])  # under it
    assert re.split(r"\s{2,}", lines[at + 1].strip()) == ["GPUs", "nodes", "book", "step ms", "run h", "run GPU-h",
                                                          "run cost"]  # fmt: skip
    rows = [re.split(r"\s{2,}", line.strip()) for line in lines[at + 2 : at + 5]]
    legend = lines[at + 5]
    assert legend.startswith("  run: 6.4M samples (--train-samples), ") and "run cost: your GPU-hour price" in legend
    a_step = int(re.search(r"steps at ([\d,]+) samples a step", legend)[1].replace(",", "")) // 8  # at 8 GPUs

    def ends(cell: str) -> list[float]:
        return [float(v.replace(",", "")) for v in cell.lstrip("≥").split("–")]

    said = {}
    for row in rows:
        gpus, steps = int(row[0]), ends(row[3])
        hours = [6.4e6 / (gpus * a_step) * ms / 1e3 / 3600 for ms in steps]  # the run's steps × its step, each end
        assert ends(row[4]) == pytest.approx(hours, rel=5e-3)
        assert ends(row[5]) == pytest.approx([h * gpus for h in hours], rel=5e-3)
        assert ends(row[6]) == pytest.approx([3.9 * h * gpus for h in hours], rel=5e-3)
        said[row[0]] = row[4:7]
    assert [row[0] for row in rows] == ["8", "16", "32"]
    assert lines[at + 6].startswith("ddpbench predict: the run of 6.4M samples: fastest dgx-h100 × ")
    text = html.unescape(page.read_text())
    table = next(t for t in text.split("<table")[1:] if "<th>run h</th>" in t).split("</table>")[0]
    heads = re.findall(r"<th>(.*?)</th>", table)
    cells = [re.findall(r"<td>(.*?)</td>", row) for row in table.split("<tr")[2:]]
    shown = {row[0]: [row[heads.index(name)] for name in ("run h", "run GPU-h", "run cost")] for row in cells}
    assert shown == said  # the page's run figures are the console's, GPU count by GPU count
    assert "run: 6.4M samples (--train-samples), " in text


def test_one_clusters_run_and_price_without_a_step_are_said_unused(capsys):
    """Without a GPU's step (a CPU run, no --local-step-ms) one cluster has no booking to time or price: said, not
    dropped silently, as several clusters' are."""
    from harness.commands.console.predict.steps import no_step

    no_step(["dgx-h100"], optimizer="sgd", share=0.1, priced=True, timed=True)
    assert capsys.readouterr().out.splitlines()[-1] == (
        "ddpbench predict: --gpu-hour-price and --train-samples not used: no run is timed or priced without a GPU's "
        "step (--local-step-ms MS, the one-GPU step, gives them)"
    )

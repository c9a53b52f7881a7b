"""A bench run's last words (harness.commands.console.ending; reports.pages.notes.offset's sentence, the run page's
too): the sentences that all say 'runs faster than local … cannot tell what data parallelism costs it' said once, and
the answer line last."""

import json
import shutil
from pathlib import Path

import pandas as pd

from harness.analysis import why
from harness.commands.console import ending
from reports.pages.notes import offset

DATA = Path(__file__).resolve().parents[1] / "data"


def _row(impl: str, step: float, gap: float, exposed: float) -> pd.Series:
    return pd.Series({"impl": impl, "impl_options": None, "world_size": 2, "step_ms_mean": step, "gap_ms": gap,
                      "gap_exposed_comm_ms": exposed, "gap_waiting_ms": 0.0})  # fmt: skip


def test_rows_faster_than_local_though_exposed_are_said_in_one_line_with_their_ranges():
    # a walkthrough's four: each 'runs faster than local (…), though … ms a step is exposed communication'
    rows = [_row("naive", 940.0, -60.0, 369.2), _row("flat", 450.0, -550.0, 149.4)]
    assert all(why.offset_exposed_ms(row) is not None for row in rows)
    line = offset.offset_line(rows)
    assert line.startswith("naive and flat at 2 ranks run at 0.45–0.94× local's mean step, though 149–369 ms")
    assert "cannot tell what data parallelism costs them" in line
    # and what would tell it: one launch a side on a busy CPU read bucketed 0.53-1.56x local's step
    assert "a quieter machine would tell" in line and "--repeats 6" in line
    single = why.sentence({**rows[0], "workload": "mlp"})
    assert single.endswith(line.split("costs them", 1)[1]), single  # one configuration alone is told the same


def test_a_row_slower_than_local_or_with_nothing_exposed_is_no_offset_one():
    assert why.offset_exposed_ms(_row("bucketed", 1300.0, 300.0, 200.0)) is None  # slower: its gap is taken apart
    assert why.offset_exposed_ms(_row("flat", 500.0, -500.0, 0.0)) is None  # faster, nothing exposed: costs nothing


def test_the_answer_line_names_the_leader_to_deploy_and_whether_it_is_decided(tmp_path):
    run = tmp_path / "cpu_run"
    shutil.copytree(DATA / "cpu_run", run)  # read only, but never a command pointed into tests/data
    line = ending.answer_line(run)
    assert line.startswith("the answer (the strategy to deploy, at the largest world size): mlp/")
    assert "<" not in line and "&" not in line  # plain words, not the index's HTML
    record = ending.summary_record(ending.answers(run))  # summary.json's: the same answer, for a script
    assert "; ".join(answer["said"] for answer in record) == line.split("largest world size): ", 1)[1]
    assert all(answer["strategy"] in answer["said"] and answer["step_ms"] > 0 for answer in record)
    json.dumps(record, allow_nan=False)  # plain values, strict JSON


def test_a_run_without_a_cap_sweep_says_before_its_answer_which_bench_sweeps_one(tmp_path):
    """A newcomer asked 'which bucket_cap_mb?' read make bench's last lines and found no cap, nor a word of why: a run
    that swept none says what ran and the bench that sweeps it, named as ddpbench was invoked; a swept run says
    nothing of the kind."""
    run = tmp_path / "cpu_run"
    shutil.copytree(DATA / "cpu_run", run)  # read only, but never a command pointed into tests/data
    line = ending.cap_line(run, ".venv/bin/ddpbench")
    assert line.startswith("no bucket cap swept (DDP ran its default, 25 MiB, a first bucket of 1 MiB: ")
    assert (f".venv/bin/ddpbench bench --impls stock --workloads mlp --size tiny --gpus 2 --bucket-cap-mb "
            f"1,5,10,25,50,100 --results {tmp_path} sweeps it") in line  # fmt: skip
    swept = tmp_path / "bucket_sweep"
    shutil.copytree(DATA / "bucket_sweep", swept)
    assert ending.cap_line(swept, "ddpbench") == ""


def test_a_run_across_nodes_is_given_a_sweep_and_a_resume_across_as_many(tmp_path):
    """A two-node run's end lines gave one-node commands: the sweep keeps --nnodes and its endpoint, and says it
    runs on every node, each with its own --node-rank (and, being a new run, one new --run-id). Its --gpus is the
    run's own GPU a node: two nodes of one already make two ranks ('--gpus 2' was refused on a one-GPU node)."""
    from harness.commands import console
    from harness.results import store

    run = tmp_path / "cpu_run"
    shutil.copytree(DATA / "cpu_run", run)
    meta = store.read_json(run / "run.json")
    config = {**meta.get("config", {}), "gpus": 1, "nnodes": 2, "rdzv_endpoint": "node0:29500"}
    store.write_json(run / "run.json", {**meta, "config": config})
    line = ending.cap_line(run, "ddpbench")
    assert (f"--gpus 1 --bucket-cap-mb 1,5,10,25,50,100 --results {tmp_path} --nnodes 2 --rdzv-endpoint node0:29500 "
            "on every node, with its own --node-rank and one new --run-id sweeps it") in line  # fmt: skip
    one_node = console.resume_hint("job", "results")
    assert one_node.endswith("bench --resume job --results results")
    assert console.resume_hint("job", "results", nnodes=2) == f"{one_node} on every node, with its own --node-rank"


def test_workloads_that_ran_one_cap_at_one_size_get_one_bench_that_sweeps_them_all(tmp_path, monkeypatch):
    """A fresh clone's run of three workloads said "DDP ran its default, 25 MiB, …: CMD; DDP ran its default …: CMD;
    …" three times over: workloads alike in cap and size share one line and one bench."""
    from harness.results import store

    run = tmp_path / "cpu_run"
    shutil.copytree(DATA / "cpu_run", run)
    configs = store.read_configs(run)
    two = pd.concat([configs, configs.assign(workload="gpt2")], ignore_index=True)
    monkeypatch.setattr(store, "read_configs", lambda folder: two)
    line = ending.cap_line(run, "ddpbench")
    assert line.count("DDP ran its default") == 1, line
    assert "--workloads mlp,gpt2 --size tiny --gpus 2 --bucket-cap-mb 1,5,10,25,50,100" in line, line


def test_a_run_with_no_strategy_to_deploy_measured_has_no_answer_yet(tmp_path, monkeypatch):
    from harness.results import store
    from reports.pages import index

    monkeypatch.setattr(store, "read_configs", lambda run: pd.DataFrame())
    monkeypatch.setattr(index, "run_headline", lambda configs, meta: "nothing measured")
    assert (
        ending.answer_line(tmp_path)
        == "no answer yet: nothing measured (the run page says what each configuration did)"
    )


def test_the_run_page_says_the_offset_sentences_once_a_world_size_as_the_console_does():
    """The run page gave 'runs faster than local … cannot tell what data parallelism costs it' once per strategy:
    now one sentence per world size where two or more are offset, in the first one's place, slow ranks kept."""
    rows = pd.DataFrame([{**_row(impl, step, gap, exposed), "workload": "mlp", "world_size": world}
                         for impl, step, gap, exposed, world in (
                             ("naive", 940.0, -60.0, 369.2, 2), ("bucketed", 1300.0, 300.0, 200.0, 2),
                             ("flat", 450.0, -550.0, 149.4, 2), ("flat", 460.0, -540.0, 150.0, 2),  # a slow-rank repeat
                             ("naive", 900.0, -100.0, 300.0, 4))])  # fmt: skip
    lines = [[f"{row['impl']} w{row['world_size']} sentence"] + ["its slow rank"] * (i == 3)
             for i, (_, row) in enumerate(rows.iterrows())]  # fmt: skip
    said = offset.said_once(rows, lines)
    assert said[0].startswith("naive and flat at 2 ranks run at 0.45–0.94× local's mean step")  # flat named once
    assert said[1:] == ["bucketed w2 sentence", "its slow rank", "naive w4 sentence"]  # one offset at 4: its own


def test_the_console_says_the_offset_sentences_once_a_workload_as_each_workload_page_does():
    """bench's last words merged every offset row of the largest world size into one line, across workloads ('naive
    and flat at 2 ranks run at …', naming none), where each workload's page said its own: now one line a workload and
    world size, after the workload's name where the run has several, as why.sentence names it."""
    from harness.commands import bench

    def row(workload: str, impl: str, step: float, gap: float, exposed: float) -> dict:
        return {**_row(impl, step, gap, exposed), "workload": workload, "size": "tiny", "status": "ok",
                "baseline": False, "comm_note": None, "config_id": f"{workload}-{impl}"}  # fmt: skip

    configs = pd.DataFrame([row("mlp", "naive", 940.0, -60.0, 369.2), row("recsys", "flat", 450.0, -550.0, 149.4)])
    lines, _ = bench._why_lines(configs, confidence=0.995)
    assert [line.split(" at 2 ranks")[0] for line in lines] == ["mlp: naive", "recsys: flat"]  # each its own
    both = pd.concat([configs, pd.DataFrame([row("mlp", "flat", 450.0, -550.0, 149.4)])], ignore_index=True)
    lines, _ = bench._why_lines(both, confidence=0.995)
    assert lines[0].startswith("mlp: naive and flat at 2 ranks run at 0.45–0.94× local's mean step")
    assert lines[1].startswith("recsys: flat at 2 ranks") and len(lines) == 2

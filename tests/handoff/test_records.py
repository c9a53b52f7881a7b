"""Rows assembled from every rank's records: status, slowest-rank statistics, parity verdicts."""

from __future__ import annotations

import pandas as pd
import pytest

from harness.config.grid import Configuration
from harness.handoff import records
from harness.handoff.rank_result import ParityVerdict, RankResult, error_line, name_unused
from harness.protocols import StrategyDefaults
from harness.results import store

CONTEXT = {
    "run_id": "r",
    "started_at": "2026-01-01T00:00:00+00:00",
    "threads_per_rank": 1,
    "torch_version": "2.x",
    "hostname": "h",
}


def configuration(**overrides) -> Configuration:
    fields = dict(
        config_id="c", impl="naive", impl_options={}, workload="mlp", size="tiny", world_size=2, nnodes=1,
        batch_size=4, steps=3, warmup=1, dtype="fp32", device="cpu", backend="gloo", seed=0, parity=True,
    )  # fmt: skip
    fields.update(overrides)
    return Configuration(**fields)


def rank_result(step_ms: list[float], *, parity=None, rss=100.0, **fields) -> RankResult:
    steps = [
        {"step_ms": t, "forward_ms": t / 4, "backward_ms": t / 2, "sync_ms": t / 8, "optimizer_ms": t / 8}
        for t in step_ms
    ]
    memory = {"mem_peak_rss_mb": rss, "mem_note": "cpu"}
    return RankResult("ok", steps=steps, memory=memory, parity=parity, wall_s=1.0, **fields)


def assemble(results, cfg=None, written=None):
    cfg = cfg or configuration()
    written = written if written is not None else store.read_configs(store.Path("/nonexistent"))
    return records.assemble(cfg, results, run_context=CONTEXT, written=written)[:3]


def test_step_time_is_the_median_of_the_slowest_rank_per_measured_step():
    # step 0 is warm-up (ignored); measured steps: max(2,9)=9, max(5,3)=5, max(4,4)=4 -> median 5
    row, steps, ranks = assemble([rank_result([100, 2, 5, 4]), rank_result([100, 9, 3, 4])])
    assert row["step_ms_median"] == 5
    assert row["samples_per_s"] == 4 * 2 * 1000 / 5
    assert len(steps) == 8 and sum(s["warmup"] for s in steps) == 2
    assert [r["rank"] for r in ranks] == [0, 1]


def test_memory_is_the_largest_rank_and_unmeasured_memory_stays_null():
    row, _, ranks = assemble([rank_result([1, 1], rss=100), rank_result([1, 1], rss=250)])
    assert row["mem_peak_rss_mb"] == 250
    assert row["mem_peak_nvml_mb"] is None
    assert [r["mem_peak_rss_mb"] for r in ranks] == [100, 250]


def test_one_failed_rank_fails_the_configuration_and_names_the_rank():
    failed = RankResult("failed", "RuntimeError: boom", wall_s=0.1)
    row, _steps, _ = assemble([rank_result([1, 1]), failed])
    assert row["status"] == "failed"
    assert row["error"] == "rank 1: RuntimeError: boom"
    assert row["step_ms_median"] is None


def test_parity_within_tolerance_passes_and_outside_fails():
    ok, bad = ParityVerdict(1e-8, True, "n"), ParityVerdict(0.5, False, "n")
    assert assemble([rank_result([1, 1], parity=ok), rank_result([1, 1])])[0]["parity_ok"] is True
    assert assemble([rank_result([1, 1], parity=bad), rank_result([1, 1])])[0]["parity_ok"] is False


def test_a_lossy_strategy_records_its_difference_but_is_not_judged():
    close = ParityVerdict(1e-3, False, "n")
    row = assemble([rank_result([1, 1], parity=close, parity_exact=False), rank_result([1, 1])])[0]
    assert row["parity_ok"] is None and row["parity_max_abs_diff"] == 1e-3
    assert row["parity_note"] == "not judged: this strategy is not expected to match exactly; n"  # nothing said why
    said = rank_result([1, 1], parity=close, parity_exact=False, parity_inexact_why="comm_hook=bf16 compresses")
    assert assemble([said, rank_result([1, 1])])[0]["parity_note"] == "not judged: comm_hook=bf16 compresses; n"


def test_speedup_vs_local_and_scaling_come_from_rows_already_written():
    written = pd.DataFrame(
        [
            {**assemble([rank_result([9, 10, 10])], cfg=configuration(impl="local", world_size=2))[0]},
            {**assemble([rank_result([9, 4, 4])], cfg=configuration(world_size=1))[0]},
            {**assemble([rank_result([9, 2, 2])], cfg=configuration(impl="local", world_size=1))[0]},
        ]
    )
    row = assemble([rank_result([9, 16, 16]), rank_result([9, 16, 16])], written=written)[0]
    assert row["speedup_vs_local"] == 10 / 16
    assert row["scaling_efficiency"] == (4 * 2 * 1000 / 16) / (2 * (4 * 1000 / 4))
    assert row["scaling_efficiency_vs_local"] == (4 * 2 * 1000 / 16) / (2 * (4 * 1000 / 2))  # local's 2 ms step
    alone = assemble([rank_result([9, 2, 2])], cfg=configuration(impl="local", world_size=1))[0]
    assert alone["scaling_efficiency_vs_local"] == 1.0  # the baseline at one rank is its own
    assert row["comm_ms"] is None and row["overlap_efficiency"] is None  # no timeline: not measured


def test_a_repeat_without_its_own_one_rank_launch_is_held_to_the_pooled_ones_not_to_another_repeats():
    ones = [{**assemble([rank_result([9, t, t])], cfg=configuration(world_size=1, repeat=r))[0], "repeat": r}
            for r, t in enumerate([4, 16])]  # fmt: skip
    written = pd.DataFrame(ones)  # samples/s 1000 and 250: their geometric mean 500
    later = assemble([rank_result([9, 8, 8]), rank_result([9, 8, 8])], cfg=configuration(repeat=5), written=written)
    assert later[0]["scaling_efficiency"] == pytest.approx((4 * 2 * 1000 / 8) / (2 * 500))  # once against 250
    same = assemble([rank_result([9, 8, 8]), rank_result([9, 8, 8])], cfg=configuration(repeat=0), written=written)
    assert same[0]["scaling_efficiency"] == pytest.approx((4 * 2 * 1000 / 8) / (2 * 1000))


def collective(step, launched, done, ready=None):
    ready = launched if ready is None else ready
    return {"step": step, "bucket": 0, "collective": "all_reduce", "bytes": 8, "ready_ms": ready,
            "launched_ms": launched, "done_ms": done}  # fmt: skip


def test_communication_comes_from_the_timeline_step_by_step():
    # steps of 16 ms: forward 0-4, backward 4-12, sync 12-14, optimizer 14-16 (rank_result's split)
    after_backward = rank_result([16, 16, 16], comm=[collective(s, 12, 14) for s in range(3)])
    row, steps, _ = assemble([after_backward, after_backward])
    assert row["comm_ms"] == 2 and row["exposed_comm_ms"] == 2 and row["overlap_efficiency"] == 0
    # overlapped: one bucket hidden by backward, the last one (ready as backward ends) waited for in sync
    hidden = rank_result([16, 16, 16], comm=[collective(s, 5, 9) for s in range(3)] + [
        collective(s, 12, 13) for s in range(3)])  # fmt: skip
    row, steps, _ = assemble([hidden, hidden])
    assert row["comm_ms"] == 5 and row["exposed_comm_ms"] == 1 and row["overlap_efficiency"] == 0.8
    assert [s["exposed_backward_ms"] for s in steps] == [0] * 6
    # DDP: the last bucket ready at 10 ms, backward waits for it until 12: 2 of its 4 ms exposed
    ddp = rank_result([16, 16, 16], comm=[collective(s, 8, 10, ready=8) for s in range(3)] + [
        collective(s, 10, 12, ready=10) for s in range(3)])  # fmt: skip
    row, steps, _ = assemble([ddp, ddp])
    assert row["comm_ms"] == 4 and row["exposed_comm_ms"] == 2 and row["overlap_efficiency"] == 0.5
    assert steps[-1]["exposed_backward_ms"] == 2


def test_the_timeline_rows_name_their_configuration_rank_and_warmup():
    result = rank_result([16, 16, 16], comm=[collective(s, 12, 14) for s in range(3)])
    rows = records.assemble(
        configuration(), [result, result], run_context=CONTEXT,
        written=store.read_configs(store.Path("/nonexistent")),
    )[3]  # fmt: skip
    assert len(rows) == 6 and {r["rank"] for r in rows} == {0, 1}
    assert [r["warmup"] for r in rows if r["rank"] == 0] == [True, False, False]


def test_the_bytes_a_step_sent_are_the_timelines_over_measured_steps():
    """What a compression hook saves (bf16: 8,481,792 bytes a step against 16,963,584) was in the timeline only."""

    def two_buckets(s):
        return [{**collective(s, 8, 10), "bytes": 6}, {**collective(s, 10, 12), "bucket": 1, "bytes": 2}]

    warm = rank_result([16, 16, 16], comm=[{**c, "bytes": 100} for c in two_buckets(0)] + [
        c for s in (1, 2) for c in two_buckets(s)])  # fmt: skip
    row = assemble([warm, warm])[0]
    assert row["comm_bytes"] == 8  # a step's buckets added up; the warm-up step's 200 left out
    assert assemble([rank_result([16, 16, 16]), rank_result([16, 16, 16])])[0]["comm_bytes"] is None  # untimed


def test_error_line_keeps_the_type_and_the_last_line():
    assert error_line(ValueError("context\n\nthe cause ")) == "ValueError: the cause"
    assert error_line(KeyError()) == "KeyError"
    repr_last = ValueError("fully_shard does not support containers: ModuleDict(\n  (blocks): ModuleList()\n)")
    assert error_line(repr_last) == "ValueError: fully_shard does not support containers: ModuleDict("  # not ')'
    ddp = RuntimeError("Expected to have finished reduction in the prior iteration before starting a new one. This "
                       "error indicates that your module has parameters that were not used in producing loss. …\n"
                       "Parameter indices which did not receive grad for rank 0: 37 38\n In addition, you can set "
                       "the environment variable TORCH_DISTRIBUTED_DEBUG to either INFO or DETAIL …")  # fmt: skip
    assert error_line(ddp) == (
        "RuntimeError: DDP: the loss did not use some of the model's parameters (indices 37 38 "
        "of model.parameters()); --opt find_unused_parameters=true lets DDP run such a model"
    )
    names = [f"layer{i}.weight" for i in range(40)]
    name_unused(ddp, names)  # as the rank does, from the model's named parameters that train
    assert error_line(ddp) == (
        "RuntimeError: DDP: the loss did not use some of the model's parameters (layer37.weight, layer38.weight); "
        "--opt find_unused_parameters=true lets DDP run such a model"
    )
    many = RuntimeError(f"{UNUSED}\nParameter indices which did not receive grad for rank 1: 0 1 2 3 4 5")
    name_unused(many, names)
    assert "parameters (layer0.weight, layer1.weight, layer2.weight and 3 more); --opt" in error_line(many)


UNUSED = "This error indicates that your module has parameters that were not used in producing loss."


def test_model_metadata_turns_throughput_into_tokens_and_flops_per_second():
    info = {
        "param_count": 100,
        "grad_bytes": 400,
        "samples_per_batch": 4,
        "tokens_per_batch": 64,
        "flops_per_sample": 1e9,
    }
    row = records.assemble(
        configuration(), [rank_result([9, 10, 10]), rank_result([9, 10, 10])], run_context=CONTEXT,
        written=store.read_configs(store.Path("/nonexistent")), model_info=info,
    )[0]  # fmt: skip
    assert row["samples_per_s"] == 4 * 2 * 1000 / 10
    assert row["tokens_per_s"] == 16 * row["samples_per_s"]
    assert row["achieved_tflops"] == 1e9 * row["samples_per_s"] / 1e12
    assert row["param_count"] == 100 and row["largest_param_name"] is None


def test_without_model_metadata_its_columns_stay_null():
    row = assemble([rank_result([1, 1]), rank_result([1, 1])])[0]
    assert row["param_count"] is None and row["tokens_per_s"] is None and row["achieved_tflops"] is None


def test_an_assembled_row_is_stored_with_typed_options_buckets_and_start(tmp_path):
    result = rank_result([1, 1], layout={"bucket_sizes_mb": [0.25, 1.5]})
    cfg = configuration(impl="stock", impl_options={"bucket_cap_mb": 1.5})
    row, steps, ranks = assemble([result, rank_result([1, 1])], cfg=cfg)
    assert row["bucket_sizes_mb"] == [0.25, 1.5]
    store.write_configuration(tmp_path, "c", row, steps, ranks)
    read = store.read_config_row(tmp_path, "c")
    assert read["impl_options"] == cfg.options_json and read["bucket_sizes_mb"] == [0.25, 1.5]
    assert read["started_at"].isoformat() == "2026-01-01T00:00:00+00:00"


def test_the_drift_is_the_slowest_rank_per_step_in_step_order_and_is_stored(tmp_path):
    """Measured steps 80.8 ms, then the last two at 78 ms on rank 0 only: the slowest rank per step (rank 1
    at 77 ms there) moves from 80.8 to 78.0 ms; warm-up is left out, step order kept; null with too few."""
    cfg = configuration(steps=12, warmup=1)
    fast_end = [200.0, *[80.8] * 10, 78.0, 78.0]
    row, steps, ranks = assemble([rank_result(fast_end), rank_result([1.0, *[80.0] * 10, 77.0, 77.0])], cfg=cfg)
    assert row["step_ms_drift"] == pytest.approx(78.0 / 80.8 - 1) and row["step_ms_drift_se"] is not None
    store.write_configuration(tmp_path, "c", row, steps, ranks)
    read = store.read_config_row(tmp_path, "c")
    assert read["step_ms_drift"] == pytest.approx(78.0 / 80.8 - 1)
    assert read["step_ms_drift_se"] == pytest.approx(row["step_ms_drift_se"])
    few = assemble([rank_result([1, 2, 3, 4]), rank_result([1, 2, 3, 4])])[0]  # three measured steps
    assert few["step_ms_drift"] is None and few["step_ms_drift_se"] is None


class _OwnUnstamped(StrategyDefaults):
    """A strategy of one's own that says nothing of timing (StrategyDefaults' attach_timeline)."""

    def wrap(self, model):
        return model

    def sync_gradients(self):
        pass


def test_a_strategy_whose_timing_costs_something_is_timed_only_when_asked():
    import impls
    from harness.comm_timeline import CommTimeline
    from harness.rank.configuration import attach_timeline as _attach_timeline

    note = _attach_timeline(impls.create("stock"), CommTimeline(), asked=False)
    assert note.startswith("not measured: timing DDP's buckets") and "--bucket-timeline" in note
    assert _attach_timeline(impls.create("stock"), CommTimeline(), asked=True) is None
    assert _attach_timeline(impls.create("bucketed"), CommTimeline(), asked=False) is None  # free: always
    assert "no hook" in _attach_timeline(impls.create("dataparallel"), CommTimeline(), asked=True)
    assert _attach_timeline(_OwnUnstamped(), CommTimeline(), asked=True).startswith(
        "not measured: the strategy stamps none of its collectives"
    )  # a strategy of one's own that declares no attach_timeline is not said to hide in a library
    assert _attach_timeline(impls.create("fsdp"), CommTimeline(), asked=False) is None  # FSDP2 custom collectives
    row = assemble([rank_result([1, 1], comm_note=note), rank_result([1, 1])])[0]
    assert row["comm_ms"] is None and row["comm_note"] == note


def test_a_blocking_collective_inside_forward_is_exposed_a_queued_one_is_not():
    # FSDP on the CPU: the all-gather at 1-3 ms blocks the forward (0-4 ms); on a GPU it would run on
    # its own stream while the forward computes
    blocking = {**collective(0, 1, 3), "blocking": True}
    queued = {**collective(0, 1, 3), "blocking": False}
    row = {"step_ms": 16, "forward_ms": 4, "backward_ms": 8, "sync_ms": 2, "optimizer_ms": 2}
    from harness.analysis import overlap

    assert overlap.step_communication(row, [blocking])["exposed_comm_ms"] == 2
    assert overlap.step_communication(row, [queued])["exposed_comm_ms"] == 0


def _write_in_order(run, launches):
    """Each launch's configurations written as rank 0 writes them (`RowWriter`: each from the rows written before
    it), then that launch's paired columns derived again, as the launcher does after each launch."""
    from harness.handoff import pairing

    for launch in launches:
        for position, (cfg, results) in enumerate(launch):
            rows = records.assemble(cfg, results, run_context=CONTEXT, written=store.read_configs(run),
                                    position=position)  # fmt: skip
            store.write_configuration(run, cfg.config_id, *rows)
        pairing.refresh(run, repeat=launch[0][0].repeat, world_size=launch[0][0].world_size)
    return store.read_configs(run).set_index("config_id")


def test_the_paired_columns_are_the_same_whichever_runs_first_in_its_launch(tmp_path):
    """Two repeats at world sizes 1 and 2; repeat 1's baseline (a slower local: 12 ms at two ranks, not 10) is
    written last in its launches, after the rows it divides, which a row written before it would pair with
    repeat 0's instead. After each launch's refresh every paired column is what it is with the baseline first."""

    def results(impl, world, repeat, ms):
        comm = [] if impl == "local" else [collective(s, 12, 14) for s in range(3)]
        steps = rank_result([ms, ms, ms], comm=comm if world > 1 else None)
        cfg = configuration(config_id=f"{impl}-w{world}-r{repeat}", impl=impl, world_size=world, repeat=repeat)
        return cfg, [steps] * world

    launches = [[results("local", 1, 0, 8), results("naive", 1, 0, 9)],
                [results("local", 2, 0, 10), results("naive", 2, 0, 16)],
                [results("local", 1, 1, 8.5), results("naive", 1, 1, 9.5)],
                [results("local", 2, 1, 12), results("naive", 2, 1, 16)]]  # fmt: skip
    first = _write_in_order(tmp_path / "first", launches)
    last = _write_in_order(tmp_path / "last", [launch if launch[0][0].repeat == 0 else launch[::-1]
                                               for launch in launches])  # fmt: skip
    paired = ["speedup_vs_local", "scaling_efficiency", "scaling_efficiency_vs_local", "gap_ms",
              "gap_slower_compute_ms", "gap_residual_ms"]  # fmt: skip
    pd.testing.assert_frame_equal(first[paired].sort_index(), last[paired].sort_index())
    assert last.loc["naive-w2-r1", "speedup_vs_local"] == 12 / 16  # its own repeat's baseline, not 10 / 16
    assert last.loc["naive-w2-r1", "gap_ms"] == pytest.approx(16 - 12)
    assert last.loc["naive-w1-r1", "scaling_efficiency_vs_local"] == pytest.approx(8.5 / 9.5)
    assert list(last.loc[["naive-w2-r1", "local-w2-r1"], "launch_position"]) == [0, 1]


def test_each_configs_memory_column_is_combined_over_the_ranks_as_its_meaning_says():
    """configs/ holds one figure over the ranks; its meaning (docs/results.md, the Parquet field's metadata)
    must say which: the largest rank's, the mean of the ranks', or rank 0's, as records.memory_columns makes it."""
    from harness.results.dictionary import columns, kinds

    per_rank = [{name: float(rank + 1) for name in kinds.names(columns.MEMORY)} for rank in range(3)]
    combined = records.memory_columns([RankResult("ok", memory=memory) for memory in per_rank])
    expected = {"the largest rank's": 3.0, "the mean of the ranks'": 2.0, "rank 0's": 1.0}
    meanings = {c.name: c.meaning for c in columns.CONFIGS.columns}
    for name in kinds.names(columns.MEMORY):
        said = [words for words in expected if f"in configs/ {words}" in meanings[name]]
        assert len(said) == 1, (name, meanings[name])
        assert combined[name] == expected[said[0]], (name, said[0], combined[name])


def test_a_later_repeat_of_a_strategy_never_judged_says_why_as_its_first_repeat_does():
    """local's (or a lossy hook's) later repeats read "not judged: <why>" like the first's row and the console's
    "parity not judged", not "not checked" (it was checked, on the first); a judged strategy's name the repeat."""
    cfg = configuration(repeat=1, judging_repeat=0)
    baseline = RankResult("ok", parity_exact=False, parity_inexact_why="each rank steps on its own batch")
    judged = RankResult("ok")
    assert records.parity_columns(baseline, cfg)["parity_note"] == "not judged: each rank steps on its own batch"
    assert records.parity_columns(judged, cfg)["parity_note"].startswith("judged on this configuration's repeat 1")
    assert records.parity_columns(judged, configuration(repeat=1, parity=False))["parity_note"] == "not checked"


def test_a_row_a_fault_was_aimed_at_names_it_and_the_others_hold_null(monkeypatch, tmp_path):
    """A reader of the Parquet alone must be able to leave an injected fault's figures out (the pages mark them
    from run.json and the launch records, which the row now carries): the rows it could fire in, no other."""
    fault = "slow:impl=naive,world=2,rank=1,ms=30"
    monkeypatch.setenv("DDPBENCH_FAULT", fault)
    results = [rank_result([1, 2, 3]), rank_result([1, 2, 3])]
    assert assemble(results)[0]["fault"] == fault  # naive at 2 ranks: its rank 1 is held
    assert assemble(results, configuration(impl="flat"))[0]["fault"] is None  # another strategy
    assert assemble(results[:1], configuration(world_size=1))[0]["fault"] is None  # no rank 1 at one rank
    monkeypatch.delenv("DDPBENCH_FAULT")
    row = assemble(results)[0]
    assert row["fault"] is None
    store.write_configuration(tmp_path, "c", row, [], [])  # the column is the dictionary's: written, read back
    assert store.read_configs(tmp_path)["fault"].isna().all()

"""The worker inside one rank: a configuration that raises is recorded and the next one runs."""

from __future__ import annotations

import impls
from harness import store, worker
from harness.config import BenchConfig, expand


def plan_for(tmp_path, configurations) -> dict:
    context = {"run_id": "t", "started_at": "now", "threads_per_rank": 1}
    return {"run_dir": str(tmp_path), "context": context, "configurations": [c.to_json() for c in configurations]}


class ExplodingStrategy(impls.entry("naive").cls):
    def wrap(self, model):
        raise RuntimeError("first line\nthe strategy exploded")


def test_a_failing_configuration_is_recorded_and_the_next_one_runs(tmp_path, single_rank, monkeypatch):
    config = BenchConfig(gpus=1, impls=("naive", "stock"), size="tiny", steps=2, warmup=1, baseline=False)
    configurations = expand(config, device="cpu")
    real_create = impls.create
    monkeypatch.setattr(
        impls, "create", lambda name, **kw: ExplodingStrategy() if name == "naive" else real_create(name, **kw)
    )

    worker.run_plan(plan_for(tmp_path, configurations), single_rank)

    rows = store.read_configs(tmp_path).set_index("impl")
    assert rows.loc["naive", "status"] == "failed"
    assert rows.loc["naive", "error"] == "rank 0: RuntimeError: the strategy exploded"
    assert rows.loc["stock", "status"] == "ok"
    assert rows.loc["stock", "parity_ok"]


def test_an_unavailable_strategy_is_recorded_as_skipped_with_its_reason(tmp_path, single_rank, monkeypatch):
    class NeedsAGpu(impls.entry("naive").cls):
        def unavailable_reason(self, *, device, world_size):
            return "needs CUDA GPUs"

    config = BenchConfig(gpus=1, impls=("naive",), size="tiny", steps=1, warmup=0, baseline=False)
    monkeypatch.setattr(impls, "create", lambda name, **kw: NeedsAGpu())
    worker.run_plan(plan_for(tmp_path, expand(config, device="cpu")), single_rank)
    row = store.read_configs(tmp_path).iloc[0]
    assert (row["status"], row["error"]) == ("skipped", "needs CUDA GPUs")
    assert store.read_steps(tmp_path).empty

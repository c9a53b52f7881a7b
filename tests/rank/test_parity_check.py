"""The worker's parity check: the GPU's deterministic replay, exercised on the CPU."""

from __future__ import annotations

from test_worker import plan_for

from harness.plan.config import BenchConfig, expand
from harness.rank import parity_check, worker
from harness.results import store


def test_a_replayed_check_judges_a_fresh_short_run_against_a_reference_of_the_same_steps(
    tmp_path, single_rank, monkeypatch
):
    monkeypatch.setattr(parity_check, "replays", lambda cfg, device: cfg.parity)  # as on a GPU
    config = BenchConfig(gpus=1, impls=("stock", "bucketed"), size="tiny", steps=2, warmup=1, baseline=False)
    worker.run_plan(plan_for(tmp_path, expand(config, device="cpu")), single_rank)
    rows = store.read_configs(tmp_path)
    assert rows["parity_ok"].tolist() == [True, True]
    assert rows["parity_note"].str.endswith(f"on a deterministic replay of {parity_check.REPLAY_STEPS} steps").all()


def test_a_replay_that_trains_wrong_fails(tmp_path, single_rank, monkeypatch):
    monkeypatch.setattr(parity_check, "replays", lambda cfg, device: cfg.parity)
    real_train = worker._train

    def train_twice_the_rate(cfg, session, **parts):  # a wrong replay: every update doubled
        for group in parts["optimizer"].param_groups:
            group["lr"] *= 2
        return real_train(cfg, session, **parts)

    monkeypatch.setattr(worker, "_train", train_twice_the_rate)
    config = BenchConfig(gpus=1, impls=("stock",), size="tiny", steps=1, warmup=0, baseline=False)
    worker.run_plan(plan_for(tmp_path, expand(config, device="cpu")), single_rank)
    assert store.read_configs(tmp_path)["parity_ok"].tolist() == [False]


def test_the_cached_reference_is_not_held_in_memory_between_verdicts():
    import gc
    import weakref

    import torch

    cfg = configuration_for_cache()
    final, _ = parity_check.reference(cfg, torch.device("cpu"))
    again, _ = parity_check.reference(cfg, torch.device("cpu"))  # from the cache: the same values
    name = next(iter(final))
    assert torch.equal(final[name], again[name])
    alive = weakref.ref(final[name])
    del final, again
    gc.collect()
    assert alive() is None, "the reference stays in the process: it would count in later peak RSS"


def configuration_for_cache():
    from harness.plan.config import Configuration

    return Configuration(
        config_id="c", impl="stock", impl_options={}, workload="mlp", size="tiny", world_size=2, nnodes=1,
        batch_size=2, steps=1, warmup=1, dtype="fp32", device="cpu", backend="gloo", seed=3, parity=True,
    )  # fmt: skip


def test_a_runs_launches_share_one_reference_per_setup_through_its_folder(tmp_path, monkeypatch):
    import torch

    from harness.rank import parity

    cfg = configuration_for_cache()
    calls = []
    real = parity.reference_run
    monkeypatch.setattr(parity, "reference_run", lambda *a, **k: calls.append(1) or real(*a, **k))
    first, _ = parity_check.reference(cfg, torch.device("cpu"), folder=tmp_path)
    parity_check._cache_dir.cache_clear()  # a later launch: a new process, nothing of this one's state
    again, _ = parity_check.reference(cfg, torch.device("cpu"), folder=tmp_path)
    assert len(calls) == 1 and [p.name for p in tmp_path.iterdir() if not p.name.startswith(".")]
    assert all(torch.equal(first[k], again[k]) for k in first)

"""The worker's parity check: the GPU's deterministic replay, exercised on the CPU."""

from __future__ import annotations

from worker_plans import plan_for

from harness.config.bench import BenchConfig
from harness.config.grid import expand
from harness.parity import verdict
from harness.rank import configuration, worker
from harness.results import store


def test_a_replayed_check_judges_a_fresh_short_run_against_a_reference_of_the_same_steps(
    tmp_path, single_rank, monkeypatch
):
    monkeypatch.setattr(verdict, "replays", lambda cfg, device: cfg.parity)  # as on a GPU
    config = BenchConfig(gpus=1, impls=("stock", "bucketed"), size="tiny", steps=2, warmup=1, baseline=False)
    worker.run_configurations(plan_for(tmp_path, expand(config, device="cpu")), single_rank)
    rows = store.read_configs(tmp_path)
    assert rows["parity_ok"].tolist() == [True, True]
    assert rows["parity_note"].str.endswith(f"on a deterministic replay of {verdict.REPLAY_STEPS} steps").all()


def train_at_twice_the_rate(monkeypatch) -> None:
    """Every training of this test wrong from its first step: each update doubled."""
    real_train = configuration.train

    def train_twice_the_rate(cfg, session, **parts):
        for group in parts["optimizer"].param_groups:
            group["lr"] *= 2
        return real_train(cfg, session, **parts)

    monkeypatch.setattr(configuration, "train", train_twice_the_rate)


def test_a_replay_that_trains_wrong_fails(tmp_path, single_rank, monkeypatch):
    monkeypatch.setattr(verdict, "replays", lambda cfg, device: cfg.parity)
    train_at_twice_the_rate(monkeypatch)  # a wrong replay
    config = BenchConfig(gpus=1, impls=("stock",), size="tiny", steps=1, warmup=0, baseline=False)
    worker.run_configurations(plan_for(tmp_path, expand(config, device="cpu")), single_rank)
    assert store.read_configs(tmp_path)["parity_ok"].tolist() == [False]


def test_the_cached_reference_is_not_held_in_memory_between_verdicts():
    import gc
    import weakref

    import torch

    cfg = configuration_for_cache()
    final, *_ = verdict.cached_reference(cfg, torch.device("cpu"))
    again, *_ = verdict.cached_reference(cfg, torch.device("cpu"))  # from the cache: the same values
    name = next(iter(final))
    assert torch.equal(final[name], again[name])
    alive = weakref.ref(final[name])
    del final, again
    gc.collect()
    assert alive() is None, "the reference stays in the process: it would count in later peak RSS"


def configuration_for_cache():
    from harness.config.grid import Configuration

    return Configuration(
        config_id="c", impl="stock", impl_options={}, workload="mlp", size="tiny", world_size=2, nnodes=1,
        batch_size=2, steps=1, warmup=1, dtype="fp32", device="cpu", backend="gloo", seed=3, parity=True,
    )  # fmt: skip


def test_a_runs_launches_share_one_reference_per_setup_through_its_folder(tmp_path, monkeypatch):
    import torch

    from harness.parity import reference

    cfg = configuration_for_cache()
    calls = []
    real = reference.reference_run
    monkeypatch.setattr(
        reference, "reference_run", lambda *a, **k: calls.append(k.get("nudged", False)) or real(*a, **k)
    )
    first, *_ = verdict.cached_reference(cfg, torch.device("cpu"), folder=tmp_path)
    verdict._cache_dir.cache_clear()  # a later launch: a new process, nothing of this one's state
    again, *_ = verdict.cached_reference(cfg, torch.device("cpu"), folder=tmp_path)
    assert calls == [False, True] and [p.name for p in tmp_path.iterdir() if not p.name.startswith(".")]
    assert all(torch.equal(first[k], again[k]) for k in first)


def test_on_the_cpu_parity_judges_the_state_after_the_first_warmup_steps_against_as_many(
    tmp_path, single_rank, monkeypatch
):
    from harness.parity import reference

    trained = []
    real = reference.reference_run
    monkeypatch.setattr(
        reference,
        "reference_run",
        lambda *a, **k: trained.append((k["steps"], k.get("nudged", False))) or real(*a, **k),
    )
    config = BenchConfig(gpus=1, impls=("stock", "bucketed"), size="tiny", steps=4, warmup=3, baseline=False)
    worker.run_configurations(plan_for(tmp_path, expand(config, device="cpu")), single_rank)
    rows = store.read_configs(tmp_path)
    assert rows["parity_ok"].tolist() == [True, True]
    assert rows["parity_note"].str.endswith(f"after the first {verdict.REPLAY_STEPS} warm-up steps").all()
    # one reference for the setup (and its nudged second: SGD), of those steps, not warm-up + steps
    assert trained == [(verdict.REPLAY_STEPS, False), (verdict.REPLAY_STEPS, True)]
    assert not list((tmp_path / "cache" / "parity").glob("*.judged-state.pt"))  # the snapshots are gone


def test_a_strategy_that_trains_wrong_from_the_start_fails_the_early_judgement(tmp_path, single_rank, monkeypatch):
    train_at_twice_the_rate(monkeypatch)
    config = BenchConfig(gpus=1, impls=("stock",), size="tiny", steps=1, warmup=3, baseline=False)
    worker.run_configurations(plan_for(tmp_path, expand(config, device="cpu")), single_rank)
    rows = store.read_configs(tmp_path)
    assert rows["parity_ok"].tolist() == [False] and rows["parity_note"].str.contains("warm-up steps").all()


def test_under_adamw_the_cached_references_allowance_passes_a_right_training_and_fails_a_wrong_one(
    tmp_path, single_rank, monkeypatch
):
    """The sign-like allowance (elements whose gradient was within rounding of zero) travels with the cached
    reference to the verdict, and leaves a training at twice the rate failing."""
    import torch

    from harness.parity import reference

    judged_with, compare = [], reference.compare
    monkeypatch.setattr(
        reference, "compare", lambda *a, **k: judged_with.append(k.get("sign_like")) or compare(*a, **k)
    )
    config = BenchConfig(gpus=1, impls=("stock",), size="tiny", steps=1, warmup=3, baseline=False, optimizer="adamw")
    worker.run_configurations(plan_for(tmp_path / "right", expand(config, device="cpu")), single_rank)
    assert judged_with and all(isinstance(s, reference.SignLike) for s in judged_with)  # the verdict is given it
    train_at_twice_the_rate(monkeypatch)
    worker.run_configurations(plan_for(tmp_path / "wrong", expand(config, device="cpu")), single_rank)
    verdicts = [store.read_configs(tmp_path / run)["parity_ok"].tolist() for run in ("right", "wrong")]
    assert verdicts == [[True], [False]]
    _, _, sign_like, _ = verdict.cached_reference(
        verdict.replayed(expand(config, device="cpu")[0]), torch.device("cpu")
    )
    assert sign_like is not None and sign_like.step_allowance == 2e-3


def test_the_state_after_the_measured_steps_is_judged_where_the_warmup_is_short_or_the_state_sharded():
    import dataclasses

    import torch

    cpu, cfg = torch.device("cpu"), dataclasses.replace(configuration_for_cache(), warmup=verdict.REPLAY_STEPS)
    assert verdict.judged_after_warmup(cfg, cpu, shards_state=False)
    assert not verdict.judged_after_warmup(dataclasses.replace(cfg, warmup=2), cpu, shards_state=False)
    assert not verdict.judged_after_warmup(cfg, cpu, shards_state=True)  # gathering it is a model-sized copy
    assert not verdict.judged_after_warmup(dataclasses.replace(cfg, parity=False), cpu, shards_state=False)


def test_on_the_cpu_the_reference_runs_at_the_ranks_own_thread_count(tmp_path, monkeypatch):
    # A product split over more threads rounds otherwise; ResNet-18/small's BatchNorm grew that to 3e-3
    # in three steps, and every strategy at 2 ranks "failed" parity against a reference on both cores.
    import torch

    from harness.parity import reference

    seen = []
    real = reference.reference_run
    monkeypatch.setattr(
        reference, "reference_run", lambda *a, **k: seen.append(torch.get_num_threads()) or real(*a, **k)
    )
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # a rank's share of this machine's cores
    try:
        verdict.cached_reference(configuration_for_cache(), torch.device("cpu"), folder=tmp_path)
    finally:
        torch.set_num_threads(before)
    assert seen == [1, 1]  # the reference and its nudged second (movement.beyond_rounding)


def test_a_users_loss_that_sums_over_its_batch_fails_parity_naming_why(tmp_path):
    """The reference averages the ranks' gradients as data parallelism does, so a summed loss passed parity,
    though each step was 1/N of one process's on the whole batch (a review's SumLoss, 'parity ok')."""
    import dataclasses

    import torch

    models = tmp_path / "losses.py"
    models.write_text(
        "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n\n"
        "class Mean:\n"
        "    def build_model(self):\n        return nn.Linear(8, 3)\n"
        "    def make_batch(self, batch_size, *, device, generator):\n"
        "        return (torch.randn(batch_size, 8, device=device, generator=generator),\n"
        "                torch.randint(0, 3, (batch_size,), device=device, generator=generator))\n"
        "    def loss(self, model, batch):\n        return F.cross_entropy(model(batch[0]), batch[1])\n\n"
        "class Sum(Mean):\n"
        "    def loss(self, model, batch):\n"
        "        return F.cross_entropy(model(batch[0]), batch[1], reduction='sum')\n"
    )
    config = BenchConfig(gpus=2, impls=("stock",), workloads=(f"{models}:Sum", f"{models}:Mean"), size="tiny",
                         baseline=False)  # fmt: skip
    by_name = {c.workload: c for c in expand(config, device="cpu") if c.world_size == 2}
    cpu = torch.device("cpu")
    said = verdict.summing_loss(by_name["losses.py:Sum"], cpu, folder=tmp_path / "cache")
    assert said.startswith("the loss sums over its batch (two ranks' batches together give 2.00× their mean loss)")
    assert "each step is 1/2 of one process's on the whole batch" in said
    assert verdict.summing_loss(by_name["losses.py:Mean"], cpu, folder=tmp_path / "cache") == ""
    one_rank = dataclasses.replace(by_name["losses.py:Sum"], world_size=1)  # one process: nothing to differ from
    assert verdict.summing_loss(one_rank, cpu, folder=tmp_path / "cache") == ""


def test_a_batch_the_loss_check_cannot_join_leaves_the_comparison_standing(tmp_path, monkeypatch):
    """The summed-loss check runs after the comparison; a failure of its own (a model of one batch size) once
    turned every verdict into 'parity check failed'."""
    import torch

    cfg = configuration_for_cache()
    monkeypatch.setattr(verdict, "summing_loss", lambda *a, **k: (_ for _ in ()).throw(TypeError("no join")))
    final, *_ = verdict.cached_reference(cfg, torch.device("cpu"), folder=tmp_path)
    judged = verdict.verdict(cfg, final, torch.device("cpu"), folder=tmp_path)
    assert judged.within_tolerance is True and judged.max_abs_diff == 0.0


def test_batches_of_named_tuples_join_field_by_field():
    """The check joins two ranks' batches; a namedtuple batch raised TypeError there."""
    from collections import namedtuple

    import torch

    from harness.measure.training import concat_batches

    pair = namedtuple("Pair", "x y")
    joined = concat_batches([pair(torch.ones(1), torch.zeros(1)), pair(torch.ones(2), torch.zeros(2))])
    assert isinstance(joined, pair) and joined.x.shape == (3,) and joined.y.shape == (3,)


def test_parity_is_judged_on_each_configurations_first_repeat_only(tmp_path, single_rank, monkeypatch):
    """Its repeats train alike from the same seed; a later repeat's row says where its verdict is, as the console
    does."""
    from harness.commands import console
    from harness.results.values import judged_on

    judged = []
    real = verdict.verdict
    monkeypatch.setattr(verdict, "verdict", lambda cfg, *a, **k: judged.append(cfg.repeat) or real(cfg, *a, **k))
    config = BenchConfig(gpus=1, impls=("stock",), size="tiny", steps=1, warmup=3, baseline=False, repeats=2)
    worker.run_configurations(plan_for(tmp_path, expand(config, device="cpu")), single_rank)
    rows = store.read_configs(tmp_path).sort_values("repeat")
    assert judged == [0]
    assert rows["parity_ok"].tolist() == [True, None]
    note = "judged on this configuration's repeat 1 (its config_id ends -r0)"
    assert rows["parity_note"].iloc[1] == judged_on(0) == note
    later = rows.iloc[1].to_dict()
    assert console.describe_row({**later, "parity_ok": None}).endswith("parity judged on repeat 1")
    older = {**later, "parity_ok": None, "parity_note": "judged on this configuration's first repeat"}  # older runs
    assert console.describe_row(older).endswith("parity judged on repeat 1")


def test_where_the_first_repeat_failed_the_next_one_judges_and_the_later_ones_point_at_it(tmp_path, single_rank):
    """A configuration whose first launch crashed would otherwise have no verdict on any repeat."""
    from types import SimpleNamespace

    from harness.commands import console
    from harness.launch import bench_run, earlier, launcher
    from harness.results.layout import RunFolder

    config = BenchConfig(gpus=1, impls=("stock",), size="tiny", steps=1, warmup=3, baseline=False, repeats=3)
    planned = expand(config, device="cpu")
    store.write_json(RunFolder(tmp_path).run_json, {"configurations": [c.to_json() for c in planned]})
    plan = bench_run.BenchRun("t", tmp_path, "cpu", 1, planned, plan_for(tmp_path, [])["context"])
    assert [c.judging_repeat for c in earlier.first_to_judge(config, plan.run, planned)] == [0, 1, 2]  # none written
    launcher._record_failure(plan, planned[0], {"error": "killed", "error_kind": "crash"})
    second = earlier.first_to_judge(config, plan.run, [planned[1]])
    assert [c.judges_parity for c in second] == [True]
    several_nodes = SimpleNamespace(nnodes=2)  # one node cannot see another's failures: repeat 0 judges, as before
    assert earlier.first_to_judge(several_nodes, plan.run, [planned[1]]) == [planned[1]]
    worker.run_configurations(plan_for(tmp_path, second), single_rank)
    third = earlier.first_to_judge(config, plan.run, [planned[2]])
    assert [(c.judging_repeat, c.judges_parity) for c in third] == [(1, False)]
    worker.run_configurations(plan_for(tmp_path, third), single_rank)
    rows = store.read_configs(tmp_path).sort_values("repeat")
    assert rows["status"].tolist() == ["failed", "ok", "ok"]
    assert rows["parity_ok"].tolist() == [None, True, None]
    assert rows["parity_note"].iloc[2] == "judged on this configuration's repeat 2 (its config_id ends -r1)"
    assert console.describe_row(rows.iloc[2].to_dict()).endswith("parity judged on repeat 2")
    assert [c.judging_repeat for c in earlier.first_to_judge(config, plan.run, planned)] == [0, 1, 1]  # a resume's view
    assert "judging_repeat" not in planned[0].to_json() and third[0].to_json()["judging_repeat"] == 1


def test_a_later_repeat_of_a_strategy_never_judged_does_not_point_at_the_first():
    """local and lossy hooks are not judged on any repeat: their later rows say why, as the first's does, not
    "judged on this configuration's repeat 1"; a later repeat that did not run says "not checked"."""
    import dataclasses

    from harness.handoff.rank_result import RankResult
    from harness.handoff.records import parity_columns
    from harness.results.values import judged_on

    later = dataclasses.replace(configuration_for_cache(), repeat=1)
    exact = parity_columns(RankResult("ok", parity_exact=True), later)["parity_note"]
    assert exact == judged_on(0)
    never = parity_columns(RankResult("ok", parity_exact=False), later)["parity_note"]
    assert never == "not judged: this strategy is not expected to match exactly"
    assert parity_columns(RankResult("skipped", "needs CUDA", parity_exact=True), later)["parity_note"] == "not checked"


def test_an_autocast_reference_keeps_each_parameters_allowance_not_the_initial_parameters(tmp_path):
    import dataclasses

    import torch

    from harness.parity import reference

    cfg = dataclasses.replace(configuration_for_cache(), dtype="bf16")
    final, allowance, _, _ = verdict.cached_reference(cfg, torch.device("cpu"), folder=tmp_path)
    _, initial = reference.reference_run(cfg.make_workload(), world_size=2, batch_size=2, steps=2, seed=3,
                                         device=torch.device("cpu"), dtype="bf16")  # fmt: skip
    assert set(allowance) == set(final) and all(isinstance(v, float) for v in allowance.values())
    assert allowance == reference.allowances(final, initial, compute_dtype="bf16")


def test_a_replay_trains_after_the_reference_is_made_not_beside_it(tmp_path, single_rank, monkeypatch):
    """On a GPU the replayed state stays on the device for the verdict: the reference trains before it is held."""
    from harness.parity import reference

    monkeypatch.setattr(verdict, "replays", lambda cfg, device: cfg.parity)
    order = []
    real_reference, real_train = reference.reference_run, configuration.train
    monkeypatch.setattr(
        reference,
        "reference_run",
        lambda *a, **k: order.append("nudged" if k.get("nudged") else "reference") or real_reference(*a, **k),
    )
    monkeypatch.setattr(configuration, "train", lambda *a, **k: order.append("train") or real_train(*a, **k))
    config = BenchConfig(gpus=1, impls=("stock",), size="tiny", steps=1, warmup=0, baseline=False)
    worker.run_configurations(plan_for(tmp_path, expand(config, device="cpu")), single_rank)
    assert order == ["train", "reference", "nudged", "train"]  # measured, the reference (and its second), the replay
    assert store.read_configs(tmp_path)["parity_ok"].tolist() == [True]


def test_a_reference_that_fails_before_the_replay_is_said_once_not_trained_again(tmp_path, single_rank, monkeypatch):
    """A broken reference costs neither the measurement nor a second training: its failure is the verdict."""
    from harness.parity import reference

    monkeypatch.setattr(verdict, "replays", lambda cfg, device: cfg.parity)
    tries = []

    def broken(*args, **kwargs):
        tries.append(1)
        raise RuntimeError("reference out of memory")

    monkeypatch.setattr(reference, "reference_run", broken)
    config = BenchConfig(gpus=1, impls=("stock",), size="tiny", steps=1, warmup=0, baseline=False)
    worker.run_configurations(plan_for(tmp_path, expand(config, device="cpu")), single_rank)
    row = store.read_configs(tmp_path).iloc[0]
    assert tries == [1] and row["status"] == "ok" and row["step_ms_median"] > 0
    assert row["parity_note"] == "parity check failed: RuntimeError: reference out of memory"

"""The worker inside one rank: a configuration that raises leaves a record of why; one that cannot run is skipped."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from worker_plans import plan_for

import impls
from harness.config.bench import BenchConfig
from harness.config.grid import expand
from harness.handoff import faults
from harness.rank import configuration, worker
from harness.results import store, values


class ExplodingStrategy(impls.entry("naive").cls):
    def wrap(self, model):
        raise RuntimeError("first line\nthe strategy exploded")


def test_a_failing_configuration_writes_down_why_and_leaves_the_launch(tmp_path, single_rank, monkeypatch):
    """Its peers may wait in a collective it never joins: only ending the launch frees them.
    The record it leaves is what the launcher turns into the failed row."""
    config = BenchConfig(gpus=1, impls=("naive", "stock"), size="tiny", steps=2, warmup=1, baseline=False)
    configurations = expand(config, device="cpu")
    real_create = impls.create
    monkeypatch.setattr(
        impls, "create", lambda name, **kw: ExplodingStrategy() if name == "naive" else real_create(name, **kw)
    )

    with pytest.raises(RuntimeError, match="the strategy exploded"):
        worker.run_configurations(plan_for(tmp_path, configurations), single_rank)

    assert store.read_configs(tmp_path).empty  # nothing half-recorded: the launcher records it
    [failure] = faults.read_rank_failures(tmp_path, configurations[0].config_id)
    assert (failure["rank"], failure["error_kind"]) == (0, "exception")
    assert failure["error"] == "RuntimeError: the strategy exploded"
    assert "Traceback" in (tmp_path / failure["error_file"]).read_text()
    assert failure["memory"]["mem_peak_rss_mb"] > 0  # how far it got, in memory


def test_an_unavailable_strategy_is_recorded_as_skipped_with_its_reason(tmp_path, single_rank, monkeypatch):
    class NeedsAGpu(impls.entry("naive").cls):
        def unavailable_reason(self, *, device, world_size):
            return "needs CUDA GPUs"

    config = BenchConfig(gpus=1, impls=("naive",), size="tiny", steps=1, warmup=0, baseline=False)
    monkeypatch.setattr(impls, "create", lambda name, **kw: NeedsAGpu())
    worker.run_configurations(plan_for(tmp_path, expand(config, device="cpu")), single_rank)
    row = store.read_configs(tmp_path).iloc[0]
    assert (row["status"], row["error"]) == ("skipped", "needs CUDA GPUs")
    assert store.read_steps(tmp_path).empty


def test_the_strategy_is_created_once_per_configuration_and_its_parity_verdict_reaches_the_row(
    tmp_path, single_rank, monkeypatch
):
    """No throwaway strategy to read `parity_exact`: the one that trained says whether it is judged."""
    config = BenchConfig(gpus=1, impls=("naive", "local"), size="tiny", steps=1, warmup=0, baseline=False)
    configurations = expand(config, device="cpu")
    created: list[str] = []
    real_create = impls.create
    monkeypatch.setattr(impls, "create", lambda name, **kw: created.append(name) or real_create(name, **kw))
    worker.run_configurations(plan_for(tmp_path, configurations), single_rank)
    assert created == [c.impl for c in configurations] and sorted(created) == ["local", "naive"]
    rows = store.read_configs(tmp_path).set_index("impl")
    assert rows.loc["naive", "parity_ok"] == True  # noqa: E712 (a numpy bool)
    assert pd.isna(rows.loc["local", "parity_ok"])  # local does not synchronise: recorded, not judged
    assert rows.loc["local", "parity_note"].startswith("not judged: each rank steps on its own batch")  # its why


def test_the_gradient_profile_is_measured_once_a_run_not_again_by_a_later_launch(tmp_path, single_rank, monkeypatch):
    """A repeat's launch at world size 1 finds the setup's profile the first launch stored, and measures none."""
    from harness.measure import gradprofile

    config = BenchConfig(gpus=1, impls=("naive",), size="tiny", steps=1, warmup=0, baseline=False, repeats=2)
    first, second = expand(config, device="cpu")
    measured: list[int] = []
    real_measure = gradprofile.measure
    monkeypatch.setattr(gradprofile, "measure", lambda *a, **kw: measured.append(1) or real_measure(*a, **kw))
    worker.run_configurations(plan_for(tmp_path, [first]), single_rank)
    [stored] = (tmp_path / "gradprofile").glob("*.parquet")
    written = stored.stat().st_mtime_ns
    worker.run_configurations(plan_for(tmp_path, [second]), single_rank)  # the next launch: a worker of its own
    assert measured == [1] and stored.stat().st_mtime_ns == written


def test_gloo_on_cuda_rows_say_their_completions_read_late(monkeypatch):
    """gloo completes CUDA work on the compute stream: measured, but an upper bound, and the row says so."""
    monkeypatch.setattr(torch.distributed, "get_backend", lambda *a, **k: "gloo")
    assert configuration._timeline_caveat(torch.device("cuda", 0)) == configuration.GLOO_ON_CUDA
    assert configuration._timeline_caveat(torch.device("cpu")) is None
    monkeypatch.setattr(torch.distributed, "get_backend", lambda *a, **k: "nccl")
    assert configuration._timeline_caveat(torch.device("cuda", 0)) is None


class _Costly:
    def timeline_cost(self):
        return "a hook's extra pass"

    def timeline_caveat(self, device):
        return None


def test_a_row_timed_through_a_hook_it_paid_for_says_so_and_compare_can_read_it(monkeypatch):
    monkeypatch.setattr(torch.distributed, "get_backend", lambda *a, **k: "gloo")
    cpu, cuda = torch.device("cpu"), torch.device("cuda", 0)
    paid = configuration._caveats(_Costly(), cpu, asked=True)
    assert paid == f"{values.HOOK_TIMED}: a hook's extra pass" and values.timed_by_hook(paid) is True
    assert configuration._caveats(_Costly(), cuda, asked=True) == f"{paid}; {configuration.GLOO_ON_CUDA}"
    assert configuration._caveats(_Costly(), cpu, asked=False) is None  # not asked: attach_timeline's note says why
    unasked = configuration.attach_timeline(_Costly(), None, asked=False)
    assert values.timed_by_hook(unasked) is False and values.timed_by_hook(configuration.GLOO_ON_CUDA) is None


class _WholeState:
    def full_state_dict(self, model):
        return model.state_dict()


def test_the_judged_state_is_copied_only_where_profiled_steps_train_on_before_the_verdict(single_rank):
    """Without --profile nothing changes the state before parity judges it: its tensors are kept, not copied."""
    import dataclasses

    config = BenchConfig(gpus=1, impls=("naive",), size="tiny", steps=1, warmup=0, baseline=False)
    [cfg] = expand(config, device="cpu")
    model = torch.nn.Linear(2, 2)
    built = configuration.Built(model, None, _WholeState(), None)
    kept = configuration._measured_state(cfg, single_rank, built)
    assert kept["weight"].data_ptr() == model.weight.data_ptr() and not kept["weight"].requires_grad
    copied = configuration._measured_state(dataclasses.replace(cfg, profile=True), single_rank, built)
    assert copied["weight"].data_ptr() != model.weight.data_ptr() and torch.equal(copied["weight"], model.weight)


def test_model_info_is_counted_once_per_setup_and_device_not_again_by_a_later_run(tmp_path, monkeypatch):
    """A second run of the same setup reads the count from the user's cache; another device counts it again."""
    import types

    from harness.measure import meta_counts, modelinfo

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    config = BenchConfig(gpus=1, impls=("naive",), size="tiny", steps=1, warmup=0, baseline=False)
    [cfg] = expand(config, device="cpu")
    counted: list[str] = []
    real = modelinfo.describe
    monkeypatch.setattr(modelinfo, "describe", lambda *a, **k: counted.append(str(k["device"])) or real(*a, **k))
    on_cpu = types.SimpleNamespace(device=torch.device("cpu"))
    first = worker.model_info(cfg, on_cpu, {}, tmp_path / "run-a")
    again = worker.model_info(cfg, on_cpu, {}, tmp_path / "run-b")  # another run: a folder of its own
    assert counted == ["cpu"] and again == first and first["param_count"] > 0
    monkeypatch.setattr(worker, "device_name", lambda device: "NVIDIA H200")  # as a GPU's count would be asked
    worker.model_info(cfg, on_cpu, {}, tmp_path / "run-c")
    assert counted == ["cpu", "cpu"] and any(meta_counts.cache_folder().glob("*.json"))


def test_model_info_makes_no_workload_of_its_own_to_count_the_runs(tmp_path, monkeypatch):
    """The rank's count describes the workload the run made: the cache's lookup makes none to throw away."""
    import types

    from harness.measure import meta_counts

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    made = []
    real = meta_counts._made
    monkeypatch.setattr(meta_counts, "_made", lambda *a, **k: made.append(a) or real(*a, **k))
    config = BenchConfig(gpus=1, impls=("naive",), size="tiny", steps=1, warmup=0, baseline=False)
    [cfg] = expand(config, device="cpu")
    info = worker.model_info(cfg, types.SimpleNamespace(device=torch.device("cpu")), {}, tmp_path / "run")
    assert info["param_count"] > 0 and made == []


def test_model_info_whose_activations_failed_is_counted_again_not_kept(tmp_path, monkeypatch):
    """A failed activation count (null: a GPU out of memory while another process held it) may be that moment's
    alone: kept in the user's cache, every later run of the setup would read null."""
    import types

    from harness.measure import activations

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    config = BenchConfig(gpus=1, impls=("naive",), size="tiny", steps=1, warmup=0, baseline=False)
    [cfg] = expand(config, device="cpu")
    real, failures = activations.activations_by_module, [RuntimeError("CUDA out of memory")]

    def once_out_of_memory(*args, **kwargs):
        if failures:
            raise failures.pop()
        return real(*args, **kwargs)

    monkeypatch.setattr(activations, "activations_by_module", once_out_of_memory)
    on_cpu = types.SimpleNamespace(device=torch.device("cpu"))
    assert worker.model_info(cfg, on_cpu, {}, tmp_path / "run-a")["activation_mb"] is None
    assert worker.model_info(cfg, on_cpu, {}, tmp_path / "run-b")["activation_mb"] > 0


def test_model_info_on_a_gpu_is_kept_per_cudnn_too(monkeypatch):
    """What a GPU's forward keeps is cuDNN's choice too (its attention, its batch norm's reserve): another cuDNN
    under the same torch is another count."""
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H200")
    monkeypatch.setattr(torch.backends.cudnn, "version", lambda: 90100)
    before = worker.device_name(torch.device("cuda", 0))
    monkeypatch.setattr(torch.backends.cudnn, "version", lambda: 90300)
    assert worker.device_name(torch.device("cuda", 0)) != before and "NVIDIA H200" in before
    assert worker.device_name(torch.device("cpu")) == "cpu"

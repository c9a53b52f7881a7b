"""The memory sampler: peaks and means per configuration, null (with a reason) when unmeasurable."""

from __future__ import annotations

import dataclasses
import json
import mmap
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from harness.config.bench import BenchConfig
from harness.config.grid import expand
from harness.measure.memory import MemorySampler
from harness.rank import worker
from harness.rank.dist import distributed_session
from harness.rank.housekeeping import freeze_survivors
from harness.results import store


class FakeGpu:
    """Stands in for NVML: memory rises then falls; utilisation and power are readable, clocks are not."""

    memory_struct = "v2"
    gpu_id = "GPU-fake"

    def __init__(self) -> None:
        self.used = iter([100.0, 300.0, 250.0] + [120.0] * 10_000)
        self.reads = 0
        self.busy = 50.0

    def device_used_mb(self) -> float:
        self.reads += 1
        return next(self.used)

    def processes(self) -> dict[int, float | None]:
        return {os.getpid(): 80.0}

    def utilization_pct(self) -> float | None:
        return self.busy

    def sm_clock_mhz(self) -> float | None:
        return None

    def power_w(self) -> float | None:
        return 200.0


def sampled_over_a_window(gpu: FakeGpu, seconds: float = 0.05):
    """The sampler and its peaks, after a measured window of `seconds` with nothing outside it."""
    sampler = MemorySampler(torch.device("cpu"), period_s=0.001, gpu=gpu).start()
    sampler.open_window()
    time.sleep(seconds)
    sampler.close_window()
    return sampler, sampler.stop()  # stop's last sample reads NVML again, in the caller's thread


def test_sampler_keeps_the_peak_and_mean_of_what_the_gpu_reports():
    gpu = FakeGpu()
    _, peaks = sampled_over_a_window(gpu)
    assert peaks.nvml_mb == 300.0 and peaks.nvml_process_mb == 80.0
    assert peaks.nvml_struct == "v2"
    assert peaks.gpu_util_mean_pct == 50.0 and peaks.power_peak_w == 200.0
    assert peaks.sm_clock_mean_mhz is None  # unreadable stays null, not 0
    assert peaks.samples == gpu.reads >= 3


def test_utilisation_clock_and_power_are_averaged_over_the_measured_window_only():
    gpu = FakeGpu()
    sampler = MemorySampler(torch.device("cpu"), period_s=0.001, gpu=gpu).start()
    gpu.busy = 5.0  # building the model, warming up
    time.sleep(0.03)
    gpu.busy = 97.0
    sampler.open_window()
    time.sleep(0.03)
    sampler.close_window()
    gpu.busy = 1.0  # the parity check
    time.sleep(0.03)
    peaks = sampler.stop()
    assert peaks.gpu_util_mean_pct == 97.0 and peaks.gpu_util_peak_pct == 97.0
    assert peaks.nvml_mb == 300.0  # memory peaks still cover the whole configuration


def test_sampler_stops_its_thread_and_samples_no_more():
    gpu = FakeGpu()
    sampler = MemorySampler(torch.device("cpu"), period_s=0.001, gpu=gpu).start()
    sampler.stop()
    reads = gpu.reads
    time.sleep(0.02)
    assert gpu.reads == reads
    assert not sampler._thread.is_alive()


class FailingGpu(FakeGpu):
    """NVML refusing one query mid-run, as a driver may (the process list under MIG or in a container, a GPU
    fallen off the bus): the configuration must survive it and say why the column is null."""

    def processes(self) -> dict[int, float | None]:
        raise RuntimeError("NVMLError_NoPermission: Insufficient Permissions")


def test_an_nvml_query_that_fails_nulls_its_column_with_the_reason_and_the_others_are_kept():
    gpu = FailingGpu()
    sampler, peaks = sampled_over_a_window(gpu)
    assert sampler._thread is not None and not sampler._thread.is_alive()
    assert peaks.nvml_process_mb is None and "NoPermission" in peaks.note and "processes" in peaks.note
    assert peaks.nvml_mb == 300.0 and peaks.gpu_util_mean_pct == 50.0  # the thread went on sampling
    assert peaks.samples == gpu.reads >= 3


def test_on_the_cpu_nvml_columns_are_null_with_the_reason_and_rss_is_measured():
    peaks = MemorySampler(torch.device("cpu")).start().stop()
    assert peaks.nvml_mb is None and peaks.allocated_mb is None and peaks.reserved_mb is None
    assert "CPU" in peaks.note
    assert peaks.rss_mb > 10


def test_period_zero_turns_sampling_off_and_says_so_but_keeps_the_kernel_peak():
    peaks = MemorySampler(torch.device("cpu"), period_s=0, gpu=FakeGpu()).start().stop()
    assert peaks.nvml_mb is None and peaks.samples == 0
    assert peaks.note == "memory sampling off"
    assert peaks.rss_mb > 10


def test_on_the_cpu_no_thread_runs_and_the_rss_peak_is_exact():
    sampler = MemorySampler(torch.device("cpu"), period_s=0.001).start()
    touch_fresh_pages(64 * 1024 * 1024)  # freed before stop(): only a peak can see it
    peaks = sampler.stop()
    assert sampler._thread is None and peaks.samples == 0
    before = MemorySampler(torch.device("cpu")).start().stop().rss_mb
    assert peaks.rss_mb - before > 60


def touch_fresh_pages(size: int) -> None:
    """Make `size` bytes resident, then give them back. An anonymous mapping is fresh pages:
    a malloc'd block may reuse a freed chunk that is already resident, and raise no peak."""
    block = mmap.mmap(-1, size)
    view = torch.frombuffer(block, dtype=torch.uint8)
    view.fill_(1)
    del view
    block.close()


def test_a_reset_the_kernel_ignores_is_not_taken_for_one(monkeypatch):
    from harness.measure import memory

    monkeypatch.setattr(memory, "_status_mb", lambda *keys: (2024.0, 500.0))
    assert not memory.reset_peak_rss()
    monkeypatch.setattr(memory, "_status_mb", lambda *keys: (500.5, 500.0))
    assert memory.reset_peak_rss()


def run_in_order(session, tmp_path, sizes):
    """Run mlp configurations of the given sizes in that order; return each one's RSS peak."""
    configurations = []
    for index, size in enumerate(sizes):
        config = BenchConfig(gpus=1, impls=("stock",), size=size, steps=3, warmup=1, baseline=False, parity=False)
        configurations.append(dataclasses.replace(expand(config, device="cpu")[0], config_id=f"{index}-{size}"))
    plan = {
        "run_dir": str(tmp_path),
        "context": {"run_id": "t", "started_at": "2026-01-01T00:00:00+00:00", "threads_per_rank": 1},
        "configurations": [c.to_json() for c in configurations],
    }
    worker.run_configurations(plan, session)
    return store.read_configs(tmp_path).set_index("size")["mem_peak_rss_mb"].to_dict()


def peaks_in_either_order(folder: Path) -> tuple[dict, dict]:
    """In a fresh process, as a rank is: a one-rank gloo group, then the orders (small first, tiny first)
    after a warm-up that pays the process's one-time costs for both sizes."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    with distributed_session(device_kind="cpu", timeout_s=60) as session:
        store.warm_up()
        freeze_survivors()  # as a rank's main does before its first configuration
        run_in_order(session, folder / "warm", ["tiny", "small"])
        return run_in_order(session, folder / "a", ["small", "tiny"]), run_in_order(
            session, folder / "b", ["tiny", "small"]
        )


def test_memory_peaks_belong_to_their_configuration_in_either_order(tmp_path):
    """Measured in a fresh process: a rank's heap is its own, not a test runner's that ran other tests."""
    code = ("import json, pathlib, test_memory; "
            f"print(json.dumps(test_memory.peaks_in_either_order(pathlib.Path({str(tmp_path)!r}))))")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).parent)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    small_first, tiny_first = json.loads(done.stdout.strip().splitlines()[-1])
    seen = f"small first: {small_first}, tiny first: {tiny_first}"
    assert small_first["small"] - small_first["tiny"] > 60, seen  # the two really differ (~100 MB)
    # Without giving freed heap back between configurations, tiny-after-small read ~50 MB high.
    assert abs(small_first["tiny"] - tiny_first["tiny"]) < 15, seen
    # Small after tiny may keep some of tiny's heap in fragments: 16.3 MB seen once in a full `make test`.
    assert abs(small_first["small"] - tiny_first["small"]) < 25, seen


def test_held_gradients_that_live_in_a_flat_bucket_are_told_from_gradients_of_their_own():
    """What the memory count needs to know at the optimizer step: whether the gradients are views into their
    strategy's buckets (so the buckets hold no second copy of them then) or tensors of their own."""
    from harness.measure.held import held_bytes

    own = torch.nn.Linear(4, 4)
    own(torch.randn(2, 4)).sum().backward()
    optimizer = torch.optim.SGD(own.parameters(), lr=0.1)
    held = held_bytes(own, optimizer)
    assert held["grad_bytes"] == (16 + 4) * 4 and held["grad_view_bytes"] == 0
    bucket = torch.zeros(20)
    own.weight.grad, own.bias.grad = bucket[:16].view(4, 4), bucket[16:]
    assert held_bytes(own, optimizer)["grad_view_bytes"] == held["grad_bytes"]


def test_what_a_rank_holds_is_counted_on_a_torch_without_the_public_dtensor_module(monkeypatch):
    """torch 2.4 (the oldest pyproject allows) has DTensor in torch.distributed._tensor only: held_bytes runs at
    every configuration's last step, so an import of the public module would fail every configuration there."""
    from harness.measure.held import held_bytes

    monkeypatch.setitem(sys.modules, "torch.distributed.tensor", None)  # `import` of it now raises ImportError
    model = torch.nn.Linear(4, 4)
    model(torch.randn(2, 4)).sum().backward()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    assert held_bytes(model, optimizer)["grad_bytes"] == (16 + 4) * 4


def test_without_nvidia_ml_py_the_note_names_the_package_to_install(monkeypatch):
    """pyproject installs nvidia-ml-py, but its module is `pynvml`: a bare 'No module named pynvml' leaves a GPU
    user to guess which package that is (PyPI's `pynvml` is another one)."""
    from harness.measure import env

    monkeypatch.setitem(sys.modules, "pynvml", None)
    sampler = MemorySampler(torch.device("cuda", 0), period_s=0.02)  # the reader is made before any CUDA call
    assert "pip install nvidia-ml-py" in sampler._note and sampler._note.startswith("NVML unavailable: ")
    assert "pip install nvidia-ml-py" in env.nvml_driver()["nvml_note"]


def test_the_sampler_asks_nvml_for_its_gpu_by_the_name_nvml_gives_it(monkeypatch):
    """torch gives a GPU's UUID bare, NVML names it GPU-…, or MIG-… where it is a MIG slice (torch does not say
    which): the slice's NVML columns were null, NVML asked for GPU-<the slice's UUID>. A UUID already given with
    NVML's prefix is that name (never GPU-MIG-…); run.json's GPU settings find each GPU by the same names."""
    import types

    from harness.measure import env
    from harness.measure.memory import NvmlReader

    asked, known = [], {"GPU-1234-abcd": "gpu", "MIG-5678-ef": "slice", "GPU-9": "gpu 9"}
    fake = types.ModuleType("pynvml")
    fake.NVMLError, fake.nvmlMemory_v2 = RuntimeError, 2
    fake.nvmlInit = lambda: None

    def by_uuid(name):
        asked.append(name)
        if name not in known:
            raise fake.NVMLError(f"Not Found: {name}")
        return known[name]

    fake.nvmlDeviceGetHandleByUUID = by_uuid
    fake.nvmlDeviceGetMemoryInfo = lambda handle, version=None: types.SimpleNamespace(used=0)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    for given, named in (("1234-abcd", "GPU-1234-abcd"), ("5678-ef", "MIG-5678-ef"), ("MIG-5678-ef", "MIG-5678-ef"),
                         ("GPU-9", "GPU-9")):  # fmt: skip
        monkeypatch.setattr(
            torch.cuda, "get_device_properties", lambda device, uuid=given: types.SimpleNamespace(uuid=uuid)
        )
        assert NvmlReader(torch.device("cuda", 0)).gpu_id == named and asked[-1] == named
        assert env._nvml_handle(fake, {"index": 0, "uuid": given}) == known[named]
    assert "GPU-MIG-5678-ef" not in asked
    assert env._nvml_handle(fake, {"index": 0, "uuid": "0000-00"}) is None  # neither name: null settings, no failure
    with pytest.raises(fake.NVMLError, match=r"Not Found: GPU-0000-00$"):  # the whole GPU's refusal, not the slice's
        env.nvml_handle_by_uuid(fake, "0000-00")


def test_a_process_driving_several_gpus_resets_and_reads_each_and_empties_the_cache_once(monkeypatch):
    """nn.DataParallel's replicas allocate on cuda:1.. too: each GPU's peak is reset and read (torch's peaks are a
    device's), the one that peaked highest kept and named. The release between configurations empties the cache
    once: torch's empty_cache empties every device's (its caching allocator walks each), not the current one's."""
    from harness.measure import memory
    from harness.rank import housekeeping

    peaks = {0: 100 * memory.MB, 1: 300 * memory.MB}
    reset, emptied = [], []
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda device: reset.append(device.index))
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device: peaks[device.index])
    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda device: peaks[device.index] + memory.MB)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: emptied.append("all"))
    monkeypatch.setattr(housekeeping, "trim_heap", lambda: None)

    devices = memory.driven_devices(torch.device("cuda", 0), 2)
    sampler = memory.MemorySampler(torch.device("cuda", 0), period_s=0, devices=devices)
    monkeypatch.setattr(memory, "reset_peak_rss", lambda: False)
    measured = sampler.start().stop()
    housekeeping.release_memory(*devices)

    assert reset == [0, 1] and emptied == ["all"]
    assert (measured.allocated_mb, measured.reserved_mb) == (300, 301)
    assert "cuda:1's, the largest of 2 GPUs (cuda:0: 100, cuda:1: 300 MiB)" in measured.note
    assert memory.driven_devices(torch.device("cuda", 1), 1) == (torch.device("cuda", 1),)
    housekeeping.release_memory(torch.device("cpu"))
    assert emptied == ["all"]  # a CPU rank has no GPU cache to empty

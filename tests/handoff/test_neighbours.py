"""What else ran beside a launch on CUDA: NVML faked at its boundary (the pynvml module), the rest real: the rank's
sampler sees the GPU's processes, hands them over, the launcher drops the run's own ranks and records the others."""

from __future__ import annotations

import os
import sys
import time
import types

import pytest
import torch

from harness.handoff import neighbours
from harness.measure.memory import MemorySampler, NvmlReader
from harness.results import contention

MIB = 1024 * 1024
PEER_RANK, STRANGER = 777_001, 777_002  # another rank of the run, and a job that is not the run's


def fake_pynvml(listed: dict[int, int | None]) -> types.ModuleType:
    """pynvml with one GPU whose compute processes are `listed` (pid → bytes, None: NVML does not say)."""
    nvml = types.ModuleType("pynvml")

    class NVMLError(Exception):
        pass

    nvml.NVMLError, nvml.nvmlMemory_v2, nvml.NVML_CLOCK_SM = NVMLError, 2, 0
    nvml.nvmlInit = lambda: None
    nvml.nvmlDeviceGetHandleByUUID = lambda uuid: ("handle", uuid)
    nvml.nvmlDeviceGetMemoryInfo = lambda handle, version=None: types.SimpleNamespace(used=4096 * MIB)
    nvml.nvmlDeviceGetComputeRunningProcesses = lambda handle: [
        types.SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in listed.items()
    ]
    nvml.nvmlDeviceGetUtilizationRates = lambda handle: types.SimpleNamespace(gpu=90)
    nvml.nvmlDeviceGetClockInfo = lambda handle, clock: 1980
    nvml.nvmlDeviceGetPowerUsage = lambda handle: 500_000
    return nvml


@pytest.fixture
def fresh_sightings(monkeypatch):
    sightings = neighbours.GpuSightings()
    monkeypatch.setattr(neighbours, "SIGHTINGS", sightings)
    return sightings


def nvml_reader(monkeypatch, listed: dict[int, int | None]) -> NvmlReader:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(listed))
    props = types.SimpleNamespace(uuid="GPU-0000-test")
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: props)
    return NvmlReader(torch.device("cuda", 0))


def sample_briefly(reader: NvmlReader):
    sampler = MemorySampler(torch.device("cpu"), period_s=0.001, gpu=reader).start()  # cpu: no allocator to reset
    time.sleep(0.02)
    return sampler.stop()


def test_a_stranger_on_the_gpu_is_recorded_and_the_runs_own_ranks_are_not(tmp_path, monkeypatch, fresh_sightings):
    me = os.getpid()
    reader = nvml_reader(monkeypatch, {me: 3000 * MIB, PEER_RANK: 500 * MIB, STRANGER: 2048 * MIB})
    peaks = sample_briefly(reader)
    assert peaks.nvml_process_mb == 3000.0  # this process's own, from the same NVML list
    plan_path = tmp_path / "plan" / "world-2.json"
    plan_path.parent.mkdir()
    fresh_sightings.hand_over(plan_path, rank=0)
    peer = neighbours.GpuSightings()  # rank 1, a process of its own, seeing the same GPU
    peer.seen("GPU-0000-test", {PEER_RANK: 500.0, me: 3000.0, STRANGER: 2048.0}, PEER_RANK)
    monkeypatch.setattr(os, "getpid", lambda: PEER_RANK)
    peer.hand_over(plan_path, rank=1)
    monkeypatch.undo()  # os.getpid again, and no fake NVML left behind
    monkeypatch.setattr(os, "getloadavg", lambda: (0.5, 0.5, 0.5))  # a quiet host: the GPU's sentence alone

    record = neighbours.LaunchWatch(run_threads=3, device="cuda").end(plan_path, "world-2", ["a", "b"], ranks=2)

    gpu = record["gpus"]["GPU-0000-test"]
    assert gpu["others"] == {str(STRANGER): 2048.0}  # neither rank, only the stranger
    assert gpu["run_ranks"] == [0, 1] and gpu["pids_comparable"]
    assert not list(plan_path.parent.glob(".*.gpus.rank*.json"))  # the hints folded in and removed
    assert contention.read(tmp_path) == [record]
    said = contention.findings([record])
    assert len(said) == 1 and "another process (up to 2,048 MiB)" in said[0]


def test_a_gpu_with_only_the_run_on_it_is_quiet(tmp_path, monkeypatch, fresh_sightings):
    sample_briefly(nvml_reader(monkeypatch, {os.getpid(): 3000 * MIB}))
    plan_path = tmp_path / "world-1.json"
    fresh_sightings.hand_over(plan_path, rank=0)
    record = neighbours.LaunchWatch(run_threads=2, device="cuda").end(plan_path, "world-1", ["a"], ranks=1)
    assert record["gpus"]["GPU-0000-test"]["others"] == {}
    assert contention.findings([{**record, "load_1m": [0.0, 0.0]}]) == []
    assert "no other process on the run's GPUs" in contention.in_words([record])


def test_pids_of_another_namespace_are_weighed_by_count(tmp_path, monkeypatch, fresh_sightings):
    """In a container NVML lists the host's pids: the rank does not find its own, so its own cannot be told
    from a stranger's by pid; more processes listed than the run's ranks on the GPU is the sign then."""
    sample_briefly(nvml_reader(monkeypatch, {91: 3000 * MIB, 92: None}))  # neither is os.getpid()
    plan_path = tmp_path / "world-1.json"
    fresh_sightings.hand_over(plan_path, rank=0)
    record = neighbours.LaunchWatch(run_threads=2, device="cuda").end(plan_path, "world-1", ["a"], ranks=1)
    gpu = record["gpus"]["GPU-0000-test"]
    assert not gpu["pids_comparable"] and gpu["listed"] == 2
    assert contention.foreign_gpus(record) == {"GPU-0000-test": 1}
    assert "another process in 1 of 1 launches" in contention.findings([record])[-1]  # no MiB: not known whose


def test_a_launch_whose_gpus_nvml_never_read_is_not_recorded_as_quiet(tmp_path):
    record = neighbours.LaunchWatch(run_threads=2, device="cuda").end(tmp_path / "w.json", "w", ["a"], ranks=1)
    assert record["gpus"] is None  # --mem-period-ms 0, or no NVML: nothing seen, not "nothing there"
    said = contention.in_words([record])
    assert "not watched" in said and "no other process" not in said


def test_a_resumed_sessions_launch_keeps_its_record_beside_the_earlier_sessions_of_that_name(tmp_path):
    """`bench --resume` names its launches as the earlier session did: each keeps its own record, the run page reads
    both, and a session's summary its own."""
    plan_path = tmp_path / "plan" / "world-1.json"
    plan_path.parent.mkdir()
    first = neighbours.LaunchWatch(run_threads=2, device="cpu").end(plan_path, "world-1", ["a"], ranks=1)
    mark = contention.session_mark(first["ended_at"] + 86_400)
    resumed = neighbours.LaunchWatch(run_threads=2, device="cpu").end(plan_path, "world-1", ["b"], 1, session=mark)
    assert contention.read(tmp_path) == [first, resumed]
    assert contention.read(tmp_path, ["world-1"], mark) == [resumed] and contention.read(tmp_path, ["world-1"]) == [
        first
    ]

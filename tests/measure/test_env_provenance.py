"""Provenance of what changes GPU numbers: the math flags the ranks ran with, the allocator's and
math libraries' environment, per-GPU clocks, power limit, ECC and MIG (through NVML, faked here),
and the commit of ddpbench's own source."""

from __future__ import annotations

import json
import subprocess
import sys
import types

import pytest
import torch

from harness.measure import env
from harness.measure.training import set_tf32

FLAG_KEYS = (
    "float32_matmul_precision", "tf32_matmul", "tf32_cudnn", "cudnn_benchmark", "cudnn_deterministic", "cudnn_enabled",
)  # fmt: skip
GPU_KEYS = ("gpu_clocks", "gpu_power_limit_w", "gpu_ecc", "gpu_mig")

FRESH_RANK = """
import json, sys
from harness.measure.env import precision_flags
from harness.measure.training import set_tf32
set_tf32(sys.argv[1] == "on")
print(json.dumps(precision_flags()))
"""


@pytest.mark.parametrize("tf32", [False, True], ids=["tf32-off", "tf32-on"])
def test_recorded_math_flags_are_those_a_fresh_rank_process_runs_with(tf32):
    rank = subprocess.run(
        [sys.executable, "-c", FRESH_RANK, "on" if tf32 else "off"],
        capture_output=True, text=True, check=True, cwd=env.PROJECT_ROOT,
    )  # fmt: skip
    in_rank = json.loads(rank.stdout)
    recorded = env.capture(tf32=tf32)
    assert {key: recorded[key] for key in FLAG_KEYS} == in_rank
    assert in_rank["tf32_matmul"] is tf32 and in_rank["tf32_cudnn"] is tf32
    assert in_rank["float32_matmul_precision"] == ("high" if tf32 else "highest")


def test_recording_the_ranks_flags_neither_reads_nor_changes_the_launchers_own():
    # The launcher with TF32 on: the record must still say what `--tf32` off gives the ranks, and
    # the launcher keep its own setting.
    set_tf32(True)
    try:
        launcher_before = env.precision_flags()
        recorded = env.capture(tf32=False)
        assert recorded["tf32_matmul"] is False and recorded["float32_matmul_precision"] == "highest"
        assert env.precision_flags() == launcher_before
    finally:
        set_tf32(False)
        torch.backends.cudnn.allow_tf32 = True  # torch's default, as the suite found it


def test_without_tf32_given_the_flags_are_this_processs():
    assert {key: env.capture()[key] for key in FLAG_KEYS} == env.precision_flags()


def test_allocator_and_math_library_environment_is_recorded(monkeypatch):
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    monkeypatch.setenv("PYTORCH_NO_CUDA_MEMORY_CACHING", "1")
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "0")
    captured = env.capture()
    assert captured["allocator_conf"] == "expandable_segments:True"
    assert captured["env_vars"]["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    assert captured["env_vars"]["PYTORCH_NO_CUDA_MEMORY_CACHING"] == "1"
    assert captured["env_vars"]["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    assert captured["env_vars"]["NVIDIA_TF32_OVERRIDE"] == "0"


def test_an_injected_fault_is_recorded(monkeypatch):
    """A run slowed on purpose (DDPBENCH_FAULT) read as a normal one in run.json, and `compare` did not warn."""
    monkeypatch.setenv("DDPBENCH_FAULT", "slow:rank=1,ms=10")
    assert env.capture()["env_vars"]["DDPBENCH_FAULT"] == "slow:rank=1,ms=10"


def test_allocator_conf_is_null_when_unset(monkeypatch):
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    assert env.capture()["allocator_conf"] is None


class NotSupported(Exception):
    """pynvml's NVMLError_NotSupported, as a query on a GPU without the feature raises it."""


def fake_pynvml(*, init_fails: bool = False) -> types.ModuleType:
    """Two GPUs: an H100-like one that answers everything, and a consumer one that supports
    neither application clocks nor ECC nor MIG."""
    known = {"GPU-aaaa": "full", "GPU-bbbb": "bare"}
    fake = types.ModuleType("pynvml")
    fake.NVML_CLOCK_SM, fake.NVML_CLOCK_MEM = 1, 2
    fake.NVMLError = NotSupported
    fake.shutdowns = 0

    def init():
        if init_fails:
            raise NotSupported("NVML Shared Library Not Found")

    def shutdown():
        fake.shutdowns += 1

    def only_full(value):
        def query(handle, *args):
            if handle != "full":
                raise NotSupported("Not Supported")
            return value(*args) if callable(value) else value

        return query

    fake.nvmlInit, fake.nvmlShutdown = init, shutdown
    fake.nvmlDeviceGetHandleByUUID = lambda uuid: known[uuid]
    fake.nvmlDeviceGetApplicationsClock = only_full(lambda kind: {1: 1755, 2: 2619}[kind])
    fake.nvmlDeviceGetClockInfo = lambda handle, kind: (
        {1: 345, 2: 2619}[kind] if handle == "full" else {1: 210, 2: 405}[kind]
    )
    fake.nvmlDeviceGetEnforcedPowerLimit = lambda handle: 700000 if handle == "full" else 72000
    fake.nvmlDeviceGetEccMode = only_full((1, 1))
    fake.nvmlDeviceGetMigMode = only_full((0, 1))  # MIG off now, pending on after a reset
    return fake


GPUS = [{"index": 0, "uuid": "aaaa"}, {"index": 1, "uuid": "GPU-bbbb"}]


def test_gpu_settings_are_one_entry_per_gpu_with_unsupported_queries_null(monkeypatch):
    fake = fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    settings = env.gpu_settings(GPUS)
    assert settings["gpu_clocks"] == [
        {"sm_app_mhz": 1755, "mem_app_mhz": 2619, "sm_current_mhz": 345, "mem_current_mhz": 2619},
        {"sm_app_mhz": None, "mem_app_mhz": None, "sm_current_mhz": 210, "mem_current_mhz": 405},
    ]
    assert settings["gpu_power_limit_w"] == [700.0, 72.0]
    assert settings["gpu_ecc"] == [True, None]
    assert settings["gpu_mig"] == [False, None]  # the current mode, not the pending one
    assert fake.shutdowns == 1


def test_without_nvml_every_gpus_settings_are_null_not_a_failure(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(init_fails=True))
    settings = env.gpu_settings(GPUS)
    assert settings == {key: [None, None] for key in GPU_KEYS}


def test_a_gpu_nvml_does_not_know_gets_null_entries(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml())
    settings = env.gpu_settings([{"index": 0, "uuid": "GPU-cccc"}])
    assert settings == {key: [None] for key in GPU_KEYS}


def test_on_a_machine_without_gpus_the_gpu_settings_are_empty_lists():
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible here")
    captured = env.capture()
    assert {key: captured[key] for key in GPU_KEYS} == {key: [] for key in GPU_KEYS}


def git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def other_repository(tmp_path):
    """A repository that is not ddpbench's, with an installed copy of ddpbench in a sub-folder."""
    git("init", "-q", cwd=tmp_path)
    (tmp_path / "app.py").write_text("print('their project')\n")
    installed = tmp_path / "site-packages" / "ddpbench"
    installed.mkdir(parents=True)
    (installed / "env.py").write_text("# ddpbench, installed\n")
    git("add", "-A", cwd=tmp_path)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "theirs", cwd=tmp_path)
    return tmp_path


def test_an_installed_copy_inside_another_repository_records_no_sha_but_its_version(other_repository):
    state = env.git_state(other_repository / "site-packages" / "ddpbench")
    assert state["ddpbench_git_sha"] is None and state["git_sha"] is None and state["git_dirty"] is None
    assert state["ddpbench_version"] == env._own_version()


def test_a_checkout_of_its_own_records_its_sha_under_both_names(other_repository):
    state = env.git_state(other_repository)
    head = git("rev-parse", "HEAD", cwd=other_repository)
    assert state["ddpbench_git_sha"] == state["git_sha"] == head
    assert state["git_dirty"] is False
    (other_repository / "app.py").write_text("print('changed')\n")
    assert env.git_state(other_repository)["git_dirty"] is True


@pytest.mark.parametrize("tf32", [True, False], ids=["tf32-on", "tf32-off"])
def test_a_rank_runs_its_configuration_with_the_flags_run_json_records(tmp_path, single_rank, monkeypatch, tf32):
    import impls
    from harness.config.bench import BenchConfig
    from harness.config.grid import expand
    from harness.rank import worker

    seen = []

    class Watching(impls.entry("naive").cls):
        def wrap(self, model):
            seen.append(env.precision_flags())  # the rank's flags once its model is built
            return super().wrap(model)

    config = BenchConfig(gpus=1, impls=("naive",), size="tiny", steps=1, warmup=0, baseline=False, tf32=tf32)
    plan = {
        "run_dir": str(tmp_path),
        "context": {"run_id": "t", "started_at": "2025-01-01T00:00:00+00:00", "threads_per_rank": 1},
        "configurations": [c.to_json() for c in expand(config, device="cpu")],
    }
    monkeypatch.setattr(impls, "create", lambda name, **kw: Watching(**kw))
    set_tf32(not tf32)  # the process starts the other way: the configuration must set them
    try:
        recorded = env.capture(tf32=tf32)
        worker.run_configurations(plan, single_rank)
        assert seen and seen[0] == {key: recorded[key] for key in FLAG_KEYS}
    finally:
        set_tf32(False)
        torch.backends.cudnn.allow_tf32 = True  # torch's default, as the suite found it


def fake_topology_nvml() -> types.ModuleType:
    """Three GPUs as NVML numbers them physically, 0 and 2 on one board, 1 across the NUMA nodes."""
    fake = fake_pynvml()
    fake.NVML_TOPOLOGY_INTERNAL, fake.NVML_TOPOLOGY_SYSTEM = 10, 50
    fake.NVML_P2P_CAPS_INDEX_NVLINK, fake.NVML_P2P_STATUS_OK = 7, 0
    physical = ["GPU-p0", "GPU-p1", "GPU-p2"]
    fake.nvmlDeviceGetCount = lambda: len(physical)
    fake.nvmlDeviceGetHandleByIndex = lambda index: physical[index]
    fake.nvmlDeviceGetHandleByUUID = lambda uuid: physical[physical.index(uuid)]
    board = {"GPU-p0", "GPU-p2"}
    fake.nvmlDeviceGetTopologyCommonAncestor = lambda a, b: 10 if {a, b} == board else 50
    fake.nvmlDeviceGetP2PStatus = lambda a, b, caps: 0 if {a, b} == board else 1
    return fake


def test_topology_pairs_are_of_the_gpus_torch_sees_in_its_numbering(monkeypatch):
    """CUDA_VISIBLE_DEVICES=2,0: torch's cuda:0 is NVML's GPU 2 and cuda:1 its GPU 0, and GPU 1 is not the run's.
    The pairs name torch's indices, as `gpus` does (and gpu_check counts n(n-1)/2 of them for n visible)."""
    monkeypatch.setitem(sys.modules, "pynvml", fake_topology_nvml())
    visible = [{"index": 0, "uuid": "p2"}, {"index": 1, "uuid": "GPU-p0"}]
    monkeypatch.setattr(env, "gpus", lambda: visible)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(visible))
    assert env.gpu_topology() == [{"gpu_a": 0, "gpu_b": 1, "common_ancestor": "same board", "nvlink_p2p": True}]

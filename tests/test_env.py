"""Provenance: what every run records about the machine and software it measured on."""

from __future__ import annotations

from harness.rank import env


def test_environment_names_software_host_devices_and_git_state():
    captured = env.capture(["ddpbench", "bench"])
    for key in ("hostname", "python", "cpu_model", "cpu_count", "torch_version", "nccl_version", "gpus", "topology"):
        assert key in captured, key
    assert captured["command"] == ["ddpbench", "bench"]
    assert captured["libraries"]["torch"] and captured["libraries"]["pyarrow"]
    assert isinstance(captured["git_dirty"], bool) or captured["git_sha"] is None


def test_without_a_gpu_the_driver_fields_are_null_with_a_reason():
    captured = env.capture()
    if captured["cuda_available"]:
        return  # on a GPU machine the fields are filled; the GPU check verifies them
    assert captured["driver_version"] is None and captured["nvml_note"]
    assert captured["gpus"] == [] and captured["topology"] == []


def test_distributed_environment_variables_are_recorded(monkeypatch):
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.setenv("UNRELATED_SECRET", "x")
    recorded = env.distributed_env_vars()
    assert recorded["NCCL_DEBUG"] == "INFO" and recorded["OMP_NUM_THREADS"] == "3"
    assert "UNRELATED_SECRET" not in recorded

"""Provenance: what every run records about the machine and software it measured on."""

from __future__ import annotations

import re
import subprocess

import pytest

from harness.measure import env


def test_environment_names_software_host_devices_and_git_state():
    captured = env.capture(["ddpbench", "bench"])
    for key in ("hostname", "python", "cpu_model", "cpu_count", "torch_version", "nccl_version", "gpus", "topology"):
        assert key in captured, key
    assert captured["command"] == ["ddpbench", "bench"]
    assert captured["libraries"]["torch"] and captured["libraries"]["pyarrow"]


def test_the_cores_the_ranks_may_use_are_recorded_beside_the_machines(monkeypatch):
    """nightB ran under `taskset -c 0` and its run.json said cpu_count 2: its page said '2 ranks share 2 CPU cores'
    and compare, against a run on both cores, saw no difference. The cores the ranks could use are recorded, and
    compare tells two runs apart by them."""
    from harness.analysis.verdicts.environment import environment_differences
    from reports.pages.run.run_page import environment_facts

    monkeypatch.setattr(env, "available_cpus", lambda: 1)
    captured = env.capture()
    assert captured["usable_cpus"] == 1 and captured["cpu_count"] == __import__("os").cpu_count()
    pinned, whole = ({"environment": {"cpu_count": 2, "usable_cpus": n, "cpu_model": "X"}} for n in (1, 2))
    assert environment_differences(whole, pinned) == ["usable_cpus differs: 2 vs 1"]
    assert dict(environment_facts(pinned))["CPU"] == "X (2 cores, 1 usable)"
    assert dict(environment_facts(whole))["CPU"] == "X (2 cores)"


def test_the_git_state_is_that_of_ddpbench_own_checkout_not_the_working_directory(tmp_path, monkeypatch):
    inside_git = subprocess.run(
        ["git", "-C", str(env.PROJECT_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    if inside_git.returncode != 0:
        pytest.skip("ddpbench is not installed from a git checkout here")
    monkeypatch.chdir(tmp_path)  # a directory outside any repository: the state must not come from here
    state = env.git_state()
    assert state["git_sha"] == inside_git.stdout.strip()
    assert re.fullmatch(r"[0-9a-f]{40}", state["git_sha"])
    assert isinstance(state["git_dirty"], bool)


def test_without_a_gpu_the_driver_fields_are_null_with_a_reason():
    captured = env.capture()
    if captured["cuda_available"]:
        pytest.skip("a GPU is visible: the driver fields are filled, and the GPU check verifies them")
    assert captured["driver_version"] is None and captured["nvml_note"]
    assert captured["gpus"] == [] and captured["topology"] == []


def test_distributed_environment_variables_are_recorded(monkeypatch):
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.setenv("UNRELATED_SECRET", "x")
    monkeypatch.setenv("DDPBENCH_GPU_ZYGOTE", "1")  # how a GPU run's ranks started
    recorded = env.distributed_env_vars()
    assert recorded["NCCL_DEBUG"] == "INFO" and recorded["OMP_NUM_THREADS"] == "3"
    assert recorded["DDPBENCH_GPU_ZYGOTE"] == "1"
    assert "UNRELATED_SECRET" not in recorded

"""The environment a run measured on: software versions, devices, host, git state, and the
environment variables that change distributed behaviour. Recorded with every run and shown
by `ddpbench env`.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

PROJECT_ROOT = Path(__file__).resolve().parents[2]  # the checkout ddpbench runs from (harness/rank/env.py)
LIBRARIES = ("torch", "torchvision", "transformers", "numpy", "pandas", "pyarrow", "plotly", "nvidia-ml-py", "scipy")
ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_", "TORCH_DISTRIBUTED", "GLOO_", "TORCHELASTIC_", "CUDA_")
ENV_NAMES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "MASTER_ADDR", "MASTER_PORT", "TORCH_CPP_LOG_LEVEL")


def library_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in LIBRARIES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_state(root: Path = PROJECT_ROOT) -> dict[str, Any]:
    """The commit the harness ran from and whether the checkout had uncommitted changes."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    sha = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"git_sha": sha, "git_dirty": bool(status) if status is not None else None}


def cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def gpus() -> list[dict[str, Any]]:
    if not torch.cuda.is_available():
        return []
    found = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        found.append(
            {
                "index": index,
                "name": props.name,
                "uuid": str(getattr(props, "uuid", "")) or None,
                "memory_mb": props.total_memory / 2**20,
                "capability": f"{props.major}.{props.minor}",
            }
        )
    return found


def nvml_driver() -> dict[str, Any]:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return {
                "driver_version": pynvml.nvmlSystemGetDriverVersion(),
                "cuda_driver_version": pynvml.nvmlSystemGetCudaDriverVersion(),
            }
        finally:
            pynvml.nvmlShutdown()
    except Exception as exc:  # no driver on CPU machines: say why instead of failing
        return {"driver_version": None, "cuda_driver_version": None, "nvml_note": f"{type(exc).__name__}: {exc}"}


TOPOLOGY_LEVELS = {
    "NVML_TOPOLOGY_INTERNAL": "same board",
    "NVML_TOPOLOGY_SINGLE": "single PCIe switch",
    "NVML_TOPOLOGY_MULTIPLE": "multiple PCIe switches",
    "NVML_TOPOLOGY_HOSTBRIDGE": "host bridge",
    "NVML_TOPOLOGY_NODE": "same NUMA node",
    "NVML_TOPOLOGY_SYSTEM": "across NUMA nodes",
}


def gpu_topology() -> list[dict[str, Any]]:
    """For every pair of GPUs: their nearest common ancestor and whether NVLink P2P works."""
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        return []
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return []
    names = {getattr(pynvml, key): label for key, label in TOPOLOGY_LEVELS.items() if hasattr(pynvml, key)}
    try:
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        pairs = []
        for a in range(len(handles)):
            for b in range(a + 1, len(handles)):
                level = pynvml.nvmlDeviceGetTopologyCommonAncestor(handles[a], handles[b])
                nvlink = pynvml.nvmlDeviceGetP2PStatus(handles[a], handles[b], pynvml.NVML_P2P_CAPS_INDEX_NVLINK)
                pairs.append(
                    {
                        "gpu_a": a,
                        "gpu_b": b,
                        "common_ancestor": names.get(level, str(level)),
                        "nvlink_p2p": nvlink == pynvml.NVML_P2P_STATUS_OK,
                    }
                )
        return pairs
    except pynvml.NVMLError:
        return []
    finally:
        pynvml.nvmlShutdown()


def distributed_env_vars() -> dict[str, str]:
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES) or k in ENV_NAMES}


def capture(command: list[str] | tuple[str, ...] | None = None) -> dict[str, Any]:
    nccl = None
    if torch.cuda.is_available():
        try:
            nccl = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception:
            nccl = None
    gpu_list = gpus()
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_version": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "nccl_version": nccl,
        "gloo_available": torch.distributed.is_gloo_available(),
        "nccl_available": torch.distributed.is_nccl_available(),
        "cuda_available": torch.cuda.is_available(),
        "gpu_count": len(gpu_list),
        "gpus": gpu_list,
        "gpu_name": gpu_list[0]["name"] if gpu_list else None,
        "topology": gpu_topology(),
        **nvml_driver(),
        "libraries": library_versions(),
        **git_state(),
        "command": list(command) if command is not None else None,
        "env_vars": distributed_env_vars(),
    }

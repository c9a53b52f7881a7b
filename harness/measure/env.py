"""The environment a run measured on: software versions, devices, host, git state, the
environment variables that change distributed behaviour, and what changes GPU numbers (TF32 and
cuDNN flags, the allocator's settings, clocks, power limit, ECC, MIG). Recorded with every run
(run.json's "environment") and shown by `ddpbench env`.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import itertools
import os
import platform
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.config.ranks import available_cpus
from harness.registry import lazy_module

torch = lazy_module("torch")  # where GPUs or precision are read: the versions alone key `list`'s cached counts

PROJECT_ROOT = Path(__file__).resolve().parents[2]  # the checkout ddpbench runs from (harness/measure/env.py)
LIBRARIES = ("torch", "torchvision", "transformers", "numpy", "pandas", "pyarrow", "plotly", "nvidia-ml-py", "scipy")
ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_", "TORCH_DISTRIBUTED", "GLOO_", "TORCHELASTIC_", "CUDA_")
ENV_NAMES = (
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "MASTER_ADDR", "MASTER_PORT", "TORCH_CPP_LOG_LEVEL",
    # The allocator and the math libraries: each changes GPU time or memory without a code change.
    "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_NO_CUDA_MEMORY_CACHING", "CUBLAS_WORKSPACE_CONFIG", "NVIDIA_TF32_OVERRIDE",
    # A fault injected on purpose (a rank held, a rank killed): a run slowed by one must say so, and compare tell it.
    # The GPU zygote switched on: a GPU run's ranks forked, not fresh interpreters, which its fixed cost shows.
    "DDPBENCH_FAULT", "DDPBENCH_GPU_ZYGOTE",
)  # fmt: skip


def library_versions(names: tuple[str, ...] = LIBRARIES) -> dict[str, str | None]:
    """Each library's installed version, None where it is not installed."""
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_state(root: Path = PROJECT_ROOT) -> dict[str, Any]:
    """The commit ddpbench's own source is at, and whether it had uncommitted changes.

    Only when `root` is itself the top of a git checkout: an installed copy that happens to lie
    inside some other repository (a site-packages in a project's tree) records null rather than
    that repository's commit; `ddpbench_version` then names what ran.
    """

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    top = git("rev-parse", "--show-toplevel")
    if top is None or Path(top).resolve() != Path(root).resolve():
        return {"ddpbench_git_sha": None, "git_sha": None, "git_dirty": None, "ddpbench_version": _own_version()}
    sha = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {
        "ddpbench_git_sha": sha,
        "git_sha": sha,  # the name the rows carry; the same commit
        "git_dirty": bool(status) if status is not None else None,
        "ddpbench_version": _own_version(),
    }


def _own_version() -> str | None:
    try:
        return importlib.metadata.version("ddpbench")
    except importlib.metadata.PackageNotFoundError:
        return None


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


def nvml_failure(exc: BaseException) -> str:
    """Why NVML could not be read, as a user can act on it: a missing library names the package that provides it
    (nvidia-ml-py, whose module is `pynvml`; PyPI's `pynvml` is another package)."""
    if isinstance(exc, ImportError) and exc.name == "pynvml":
        return "nvidia-ml-py is not installed (its module pynvml reads NVML): pip install nvidia-ml-py"
    return f"{type(exc).__name__}: {exc}"


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
        return {"driver_version": None, "cuda_driver_version": None, "nvml_note": nvml_failure(exc)}


@contextlib.contextmanager
def _nvml_session() -> Iterator[Any]:
    """pynvml, initialised; None where there is no NVML (no driver, no library)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        yield None
        return
    try:
        yield pynvml
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def _query(read) -> Any:
    """One NVML query; None where the GPU or the driver does not support it (never a failure)."""
    try:
        return read()
    except Exception:
        return None


def nvml_names(uuid: str) -> tuple[str, ...]:
    """NVML's names for a GPU whose UUID torch gives, to ask in turn. torch gives it bare, whether a whole GPU's
    (NVML's GPU-…) or, on a MIG slice, the slice's own (NVML's MIG-…, drivers from R470), and does not say which:
    both, the whole GPU's first. A UUID that already has NVML's prefix is asked as given."""
    return (uuid,) if uuid.startswith(("GPU-", "MIG-")) else (f"GPU-{uuid}", f"MIG-{uuid}")


def nvml_handle_by_uuid(nvml: Any, uuid: str) -> tuple[str, Any]:
    """(the name NVML knows a GPU torch sees by, its handle); where it knows none of them, NVML's refusal of the
    first raised (a whole GPU's: its reason, such as a permission, not the slice's name's Not Found)."""
    refusals = []
    for name in nvml_names(uuid):
        try:
            return name, nvml.nvmlDeviceGetHandleByUUID(name)
        except nvml.NVMLError as refused:  # not found by this name: a MIG slice's is its next
            refusals.append(refused)
    raise refusals[0]


def _nvml_handle(nvml: Any, gpu: dict[str, Any]) -> Any:
    """The NVML handle of one of torch's visible GPUs: by UUID (CUDA_VISIBLE_DEVICES renumbers)."""
    uuid = gpu.get("uuid")
    if uuid:
        return _query(lambda: nvml_handle_by_uuid(nvml, uuid)[1])
    return _query(lambda: nvml.nvmlDeviceGetHandleByIndex(gpu["index"]))


def _enabled(pair: Any) -> bool | None:
    """NVML's (current, pending) mode pair → whether the current mode is on."""
    return None if pair is None else bool(pair[0])


GPU_SETTINGS = ("gpu_clocks", "gpu_power_limit_w", "gpu_ecc", "gpu_mig")


def _one_gpu_settings(nvml: Any, handle: Any) -> dict[str, Any]:
    if handle is None:
        return dict.fromkeys(GPU_SETTINGS)
    sm, mem = nvml.NVML_CLOCK_SM, nvml.NVML_CLOCK_MEM
    milliwatts = _query(lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(handle))
    return {
        "gpu_clocks": {
            "sm_app_mhz": _query(lambda: nvml.nvmlDeviceGetApplicationsClock(handle, sm)),
            "mem_app_mhz": _query(lambda: nvml.nvmlDeviceGetApplicationsClock(handle, mem)),
            "sm_current_mhz": _query(lambda: nvml.nvmlDeviceGetClockInfo(handle, sm)),
            "mem_current_mhz": _query(lambda: nvml.nvmlDeviceGetClockInfo(handle, mem)),
        },
        "gpu_power_limit_w": milliwatts / 1000.0 if milliwatts is not None else None,
        "gpu_ecc": _enabled(_query(lambda: nvml.nvmlDeviceGetEccMode(handle))),
        "gpu_mig": _enabled(_query(lambda: nvml.nvmlDeviceGetMigMode(handle))),
    }


def gpu_settings(gpu_list: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Per GPU (the order of `gpus`), what changes its numbers without a code change: application
    and current SM/memory clocks, the enforced power limit, ECC and MIG modes (current, not
    pending). Empty lists without GPUs; null where a query is not supported."""
    settings: dict[str, list[Any]] = {key: [] for key in GPU_SETTINGS}
    if not gpu_list:
        return settings
    with _nvml_session() as nvml:
        for gpu in gpu_list:
            handle = _nvml_handle(nvml, gpu) if nvml is not None else None
            for key, value in _one_gpu_settings(nvml, handle).items():
                settings[key].append(value)
    return settings


def precision_flags() -> dict[str, Any]:
    """This process's math settings: which fp32 matmuls and convolutions may use TF32, and cuDNN's
    algorithm choice. Each changes GPU time (TF32 up to 8× on fp32 GEMMs) and results."""
    return {
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        "tf32_cudnn": torch.backends.cudnn.allow_tf32,
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "cudnn_deterministic": torch.backends.cudnn.deterministic,
        "cudnn_enabled": torch.backends.cudnn.enabled,
    }


def ranks_precision_flags(tf32: bool) -> dict[str, Any]:
    """The math settings a rank runs with under `--tf32` (or without): the same setter the ranks
    call (`training.set_tf32`), applied here for the reading and undone."""
    from harness.measure.training import set_tf32

    saved = (
        torch.get_float32_matmul_precision(),
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
    )
    try:
        set_tf32(tf32)
        return precision_flags()
    finally:
        torch.set_float32_matmul_precision(saved[0])
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved[1], saved[2]


TOPOLOGY_LEVELS = {
    "NVML_TOPOLOGY_INTERNAL": "same board",
    "NVML_TOPOLOGY_SINGLE": "single PCIe switch",
    "NVML_TOPOLOGY_MULTIPLE": "multiple PCIe switches",
    "NVML_TOPOLOGY_HOSTBRIDGE": "host bridge",
    "NVML_TOPOLOGY_NODE": "same NUMA node",
    "NVML_TOPOLOGY_SYSTEM": "across NUMA nodes",
}


def gpu_topology(gpu_list: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """For every pair of the GPUs torch sees (`gpus`, default: asked now), in its numbering: their nearest common
    ancestor and whether NVLink P2P works; null where NVML cannot say. Found in NVML by UUID, as `gpu_settings`:
    NVML numbers every GPU of the machine physically, CUDA_VISIBLE_DEVICES only those the run may use."""
    gpu_list = gpus() if gpu_list is None else gpu_list
    if len(gpu_list) < 2:
        return []
    with _nvml_session() as nvml:
        if nvml is None:
            return []
        names = {getattr(nvml, key): label for key, label in TOPOLOGY_LEVELS.items() if hasattr(nvml, key)}
        handles = [_nvml_handle(nvml, gpu) for gpu in gpu_list]
        pairs = itertools.combinations(zip(gpu_list, handles, strict=True), 2)
        return [_gpu_pair(nvml, names, first, second) for first, second in pairs]


def _gpu_pair(nvml: Any, names: dict[Any, str], first: tuple, second: tuple) -> dict[str, Any]:
    (gpu_a, a), (gpu_b, b) = first, second
    level = _query(lambda: nvml.nvmlDeviceGetTopologyCommonAncestor(a, b))
    nvlink = _query(lambda: nvml.nvmlDeviceGetP2PStatus(a, b, nvml.NVML_P2P_CAPS_INDEX_NVLINK))
    return {
        "gpu_a": gpu_a["index"],
        "gpu_b": gpu_b["index"],
        "common_ancestor": None if level is None else names.get(level, str(level)),
        "nvlink_p2p": None if nvlink is None else nvlink == nvml.NVML_P2P_STATUS_OK,
    }


def host_facts() -> dict[str, Any]:
    """What a node's launch plans say of its host (`capture`'s hostname, torch, GPUs and commit), without the rest of
    `capture`: a resumed run's other nodes, whose run.json's environment is node 0's."""
    gpu_list = gpus()
    return {"hostname": socket.gethostname(), "torch_version": torch.__version__, "gpu_count": len(gpu_list),
            "gpu_name": gpu_list[0]["name"] if gpu_list else None, **git_state()}  # fmt: skip


def distributed_env_vars() -> dict[str, str]:
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES) or k in ENV_NAMES}


def capture(command: list[str] | tuple[str, ...] | None = None, *, tf32: bool | None = None) -> dict[str, Any]:
    """The environment, as run.json records it. `tf32`: the ranks' `--tf32`, so that the math flags
    recorded are those the ranks ran with, not this (launcher) process's; None: this process's."""
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
        "usable_cpus": available_cpus(),  # what the ranks may run on: a taskset's or a container's share
        "torch_version": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "nccl_version": nccl,
        "gloo_available": torch.distributed.is_gloo_available(),
        "nccl_available": torch.distributed.is_nccl_available(),
        "cuda_available": torch.cuda.is_available(),
        "gpu_count": len(gpu_list),
        "gpus": gpu_list,
        "gpu_name": gpu_list[0]["name"] if gpu_list else None,
        "topology": gpu_topology(gpu_list),
        **nvml_driver(),
        **gpu_settings(gpu_list),
        **(precision_flags() if tf32 is None else ranks_precision_flags(tf32)),
        "allocator_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
        "libraries": library_versions(),
        **git_state(),
        "command": list(command) if command is not None else None,
        "env_vars": distributed_env_vars(),
    }

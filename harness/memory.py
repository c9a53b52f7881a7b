"""Memory measured per configuration: a background sampler (NVML on GPUs, RSS everywhere)
plus the torch allocator's own peaks.

A figure that cannot be measured here is None (null in Parquet), never 0: no NVML on a CPU
machine means null NVML columns and a note saying why.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from typing import Any

import torch

MB = 1024 * 1024
DEFAULT_PERIOD_S = 0.02


@dataclasses.dataclass
class MemoryPeaks:
    nvml_mb: float | None = None
    """Peak device memory used on this rank's GPU (NVML; all processes on it)."""
    nvml_process_mb: float | None = None
    """Peak device memory NVML attributes to this process."""
    allocated_mb: float | None = None
    """torch.cuda.max_memory_allocated since the configuration began."""
    reserved_mb: float | None = None
    """torch.cuda.max_memory_reserved since the configuration began."""
    rss_mb: float | None = None
    """Peak resident set size of this process, sampled."""
    samples: int = 0
    note: str | None = None


class _Nvml:
    """This rank's GPU through NVML, found by UUID (NVML numbers GPUs physically, CUDA does not)."""

    def __init__(self, device: torch.device) -> None:
        import pynvml

        self._nvml = pynvml
        pynvml.nvmlInit()
        uuid = str(torch.cuda.get_device_properties(device).uuid)
        uuid = uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"
        self._handle = pynvml.nvmlDeviceGetHandleByUUID(uuid)
        self._pid = os.getpid()

    def device_used_mb(self) -> float:
        nvml = self._nvml
        try:  # the v2 struct excludes memory the driver reserves; v1 counts it as used
            info = nvml.nvmlDeviceGetMemoryInfo(self._handle, version=nvml.nvmlMemory_v2)
        except (TypeError, AttributeError, nvml.NVMLError):
            info = nvml.nvmlDeviceGetMemoryInfo(self._handle)
        return info.used / MB

    def process_used_mb(self) -> float | None:
        for proc in self._nvml.nvmlDeviceGetComputeRunningProcesses(self._handle):
            if proc.pid == self._pid and proc.usedGpuMemory is not None:
                return proc.usedGpuMemory / MB
        return None


def _rss_mb() -> float | None:
    try:
        with open("/proc/self/statm") as f:
            resident_pages = int(f.read().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return resident_pages * os.sysconf("SC_PAGE_SIZE") / MB


def _max(current: float | None, value: float | None) -> float | None:
    if value is None:
        return current
    return value if current is None else max(current, value)


class MemorySampler:
    """Samples memory every `period_s` in a daemon thread between `start()` and `stop()`."""

    def __init__(self, device: torch.device, *, period_s: float = DEFAULT_PERIOD_S) -> None:
        self._device = device
        self._period_s = period_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._peaks = MemoryPeaks()
        self._nvml: _Nvml | None = None
        if device.type == "cuda":
            try:
                self._nvml = _Nvml(device)
            except Exception as exc:  # no driver, no library, no such UUID: record why
                self._peaks.note = f"NVML unavailable: {type(exc).__name__}: {exc}"
        else:
            self._peaks.note = "NVML not sampled: the run is on the CPU"

    def _sample(self) -> None:
        peaks = self._peaks
        peaks.rss_mb = _max(peaks.rss_mb, _rss_mb())
        if self._nvml is not None:
            peaks.nvml_mb = _max(peaks.nvml_mb, self._nvml.device_used_mb())
            peaks.nvml_process_mb = _max(peaks.nvml_process_mb, self._nvml.process_used_mb())
        peaks.samples += 1

    def _loop(self) -> None:
        while not self._stop.wait(self._period_s):
            self._sample()

    def start(self) -> MemorySampler:
        if self._device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self._device)
        self._sample()
        self._thread = threading.Thread(target=self._loop, name="memory-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> MemoryPeaks:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()  # one last sample, so a short configuration still has its peak
        if self._device.type == "cuda":
            self._peaks.allocated_mb = torch.cuda.max_memory_allocated(self._device) / MB
            self._peaks.reserved_mb = torch.cuda.max_memory_reserved(self._device) / MB
        return self._peaks


def peaks_as_row(peaks: MemoryPeaks) -> dict[str, Any]:
    return {
        "mem_peak_nvml_mb": peaks.nvml_mb,
        "mem_peak_nvml_process_mb": peaks.nvml_process_mb,
        "mem_peak_allocated_mb": peaks.allocated_mb,
        "mem_peak_reserved_mb": peaks.reserved_mb,
        "mem_peak_rss_mb": peaks.rss_mb,
        "mem_note": peaks.note,
    }

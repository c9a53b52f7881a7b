"""Memory measured per configuration: a background sampler (NVML on GPUs), the kernel's
peak-RSS mark (reset per configuration), and the torch allocator's own peaks.

Memory peaks cover the whole configuration (build, warm-up, steps): what it needs. GPU
utilisation, SM clock and power describe the measured steps only: the sampler averages them
between `open_window()` and `close_window()`, which the training loop calls around its measured
steps (model build and warm-up would otherwise pull the means down).

Peak RSS comes from Linux's high-water mark (VmHWM), reset at the start of each
configuration through /proc/self/clear_refs: exact, and free, so a CPU run needs no sampling
thread at all (a thread waking every 20 ms cost a few per cent of step time on a busy CPU).
Where that reset is not available, RSS is sampled with NVML instead.

NVML's list of the processes on the GPU, read each sample for this process's own memory, also says who else
held the GPU: the launch's contention record (`harness.handoff.neighbours`).

A figure that cannot be measured here is None (null in Parquet), never 0: no NVML on a CPU
machine means null NVML columns and a note saying why.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import torch

from harness.bucketing import MIB as MB  # MiB, as every `_mb` column
from harness.handoff import neighbours
from harness.measure.env import nvml_failure, nvml_handle_by_uuid

DEFAULT_PERIOD_S = 0.02


class GpuReader(Protocol):
    """What the sampler reads from NVML for one GPU; a fake one stands in for it in tests."""

    memory_struct: str
    gpu_id: str  # NVML's UUID (or bus id): the GPU a launch's record names

    def device_used_mb(self) -> float: ...

    def processes(self) -> dict[int, float | None]: ...

    def utilization_pct(self) -> float | None: ...

    def sm_clock_mhz(self) -> float | None: ...

    def power_w(self) -> float | None: ...


class Extremes:
    """Peak and mean of a series of samples, ignoring samples that could not be read."""

    def __init__(self) -> None:
        self.peak: float | None = None
        self.total = 0.0
        self.count = 0

    def add(self, value: float | None) -> None:
        if value is None:
            return
        self.peak = value if self.peak is None else max(self.peak, value)
        self.total += value
        self.count += 1

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None


@dataclasses.dataclass
class MemoryPeaks:
    nvml_mb: float | None = None
    """Peak device memory used on this rank's GPU (NVML; all processes on it)."""
    nvml_process_mb: float | None = None
    """Peak device memory NVML attributes to this process."""
    nvml_struct: str | None = None
    """Which NVML memory struct was read: v2 (excludes driver-reserved memory) or v1."""
    allocated_mb: float | None = None
    """torch.cuda.max_memory_allocated since the configuration began (of the GPU that peaked highest, where the
    process drives several)."""
    reserved_mb: float | None = None
    """torch.cuda.max_memory_reserved since the configuration began, on that same GPU."""
    rss_mb: float | None = None
    """Peak resident set size of this process, sampled."""
    gpu_util_mean_pct: float | None = None
    gpu_util_peak_pct: float | None = None
    sm_clock_mean_mhz: float | None = None
    power_mean_w: float | None = None
    power_peak_w: float | None = None
    samples: int = 0
    note: str | None = None


class NvmlReader:
    """This rank's GPU through NVML, found by UUID (NVML numbers GPUs physically, CUDA does not)."""

    def __init__(self, device: torch.device) -> None:
        import pynvml

        self._nvml = pynvml
        pynvml.nvmlInit()
        self._handle = self._find_handle(device)
        self.memory_struct = "v2"
        try:  # v2 excludes memory the driver reserves for itself, which v1 counts as used
            pynvml.nvmlDeviceGetMemoryInfo(self._handle, version=pynvml.nvmlMemory_v2)
        except (TypeError, AttributeError, pynvml.NVMLError):
            self.memory_struct = "v1"

    def _find_handle(self, device: torch.device):
        props = torch.cuda.get_device_properties(device)
        uuid = str(getattr(props, "uuid", "") or "")
        if uuid:
            self.gpu_id, handle = nvml_handle_by_uuid(self._nvml, uuid)  # a MIG slice's too
            return handle
        self.gpu_id = f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
        return self._nvml.nvmlDeviceGetHandleByPciBusId(self.gpu_id)

    def device_used_mb(self) -> float:
        nvml = self._nvml
        if self.memory_struct == "v2":
            return nvml.nvmlDeviceGetMemoryInfo(self._handle, version=nvml.nvmlMemory_v2).used / MB
        return nvml.nvmlDeviceGetMemoryInfo(self._handle).used / MB

    def processes(self) -> dict[int, float | None]:
        """Every process NVML lists on this GPU, with its memory (None where NVML does not say)."""
        listed = self._nvml.nvmlDeviceGetComputeRunningProcesses(self._handle)
        return {p.pid: p.usedGpuMemory / MB if p.usedGpuMemory is not None else None for p in listed}

    def _optional(self, read) -> float | None:
        try:
            return float(read())
        except self._nvml.NVMLError:
            return None  # not supported on this GPU

    def utilization_pct(self) -> float | None:
        return self._optional(lambda: self._nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu)

    def sm_clock_mhz(self) -> float | None:
        return self._optional(lambda: self._nvml.nvmlDeviceGetClockInfo(self._handle, self._nvml.NVML_CLOCK_SM))

    def power_w(self) -> float | None:
        return self._optional(lambda: self._nvml.nvmlDeviceGetPowerUsage(self._handle) / 1000.0)


# Another thread may free memory between the reset and the read: a few MiB is not a kept mark.
RESET_SLACK_MB = 8.0


def reset_peak_rss() -> bool:
    """Reset this process's peak-RSS mark (Linux ≥ 4.0); False where that is not possible.

    A kernel (or sandbox) may accept the write and keep the old mark: the reset counts only
    if the mark then sits at the resident size, else a "peak per configuration" would be the
    process's lifetime peak.
    """
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    marks = _status_mb("VmHWM", "VmRSS")
    return None not in marks and marks[0] - marks[1] <= RESET_SLACK_MB


def _status_mb(*keys: str) -> tuple[float | None, ...]:
    """Fields of /proc/self/status in MiB (kB there), one read; None for each one missing."""
    found: dict[str, float] = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in keys:
                    found[key] = int(value.split()[0]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return tuple(found.get(key) for key in keys)


def peak_rss_mb() -> float | None:
    """The process's peak RSS since the last reset, as the kernel counts it (VmHWM)."""
    return _status_mb("VmHWM")[0]


def driven_devices(device: torch.device, count: int) -> tuple[torch.device, ...]:
    """The devices this process computes on: `count` GPUs from cuda:0 for a strategy driving every GPU of its
    launch from one process (nn.DataParallel's replicas), else its own device alone."""
    if device.type != "cuda" or count <= 1:
        return (device,)
    return tuple(torch.device("cuda", index) for index in range(count))


def largest_allocator_peaks(devices: Sequence[torch.device]) -> tuple[float, float, str | None]:
    """The allocator's peak allocated and reserved MiB of the device that allocated most, and, where the process
    drives several, a note naming it with every device's peak (a replica's GPU may peak above the first's)."""
    allocated = {device: torch.cuda.max_memory_allocated(device) / MB for device in devices}
    largest = max(devices, key=allocated.__getitem__)
    reserved = torch.cuda.max_memory_reserved(largest) / MB
    if len(devices) == 1:
        return allocated[largest], reserved, None
    each = ", ".join(f"{device}: {mb:.0f}" for device, mb in allocated.items())
    return (
        allocated[largest],
        reserved,
        f"allocator peaks are {largest}'s, the largest of {len(devices)} GPUs ({each} MiB)",
    )


def rss_mb() -> float | None:
    try:
        with open("/proc/self/statm") as f:
            resident_pages = int(f.read().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return resident_pages * os.sysconf("SC_PAGE_SIZE") / MB


class MemorySampler:
    """Measures memory between `start()` and `stop()`: NVML sampled every `period_s` in a daemon
    thread (only where there is a GPU to read), peak RSS from the kernel.

    `period_s=0` turns the sampling thread off (NVML columns are then null, with a note); the
    kernel's and the allocator's peaks are still read.
    """

    def __init__(self, device: torch.device, *, period_s: float = DEFAULT_PERIOD_S, gpu: GpuReader | None = None,
                 devices: Sequence[torch.device] = ()):  # fmt: skip
        self._device = device
        self._allocators = tuple(devices) or (device,)  # every GPU the process allocates on (NVML reads `device`)
        self._period_s = period_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._series = {name: Extremes() for name in ("rss", "nvml", "nvml_process", "util", "clock", "power")}
        self._samples = 0
        self._in_window = threading.Event()
        self._lock = threading.RLock()  # a sample and a window's edge never interleave
        self._kernel_rss = False
        self._gpu, self._note, self._pid = gpu, None, os.getpid()
        if period_s <= 0:
            self._note = "memory sampling off"
        elif gpu is None and device.type == "cuda":
            try:
                self._gpu = NvmlReader(device)
            except Exception as exc:  # no driver, no library, no such UUID: record why
                self._note = f"NVML unavailable: {nvml_failure(exc)}"
        elif gpu is None:
            self._note = "NVML not sampled: the run is on the CPU"

    def _sample(self) -> None:
        with self._lock:
            self._sample_now()

    def _sample_now(self) -> None:
        series = self._series
        if not self._kernel_rss:
            series["rss"].add(rss_mb())
        gpu, read = self._gpu, self._read
        if gpu is not None:
            series["nvml"].add(read(gpu.device_used_mb))
            listed = read(gpu.processes)  # this process's own (absent inside a container's PID namespace)
            if listed is not None:
                series["nvml_process"].add(listed.get(self._pid))
                neighbours.SIGHTINGS.seen(gpu.gpu_id, listed, self._pid)  # the launch's contention record
            if self._in_window.is_set():
                series["util"].add(read(gpu.utilization_pct))
                series["clock"].add(read(gpu.sm_clock_mhz))
                series["power"].add(read(gpu.power_w))
        self._samples += 1

    def _read(self, query: Callable[[], Any]) -> Any:
        """One NVML query; None where it fails (a driver refusing it, a GPU gone), its first failure kept in the
        note: a query that raised would end the sampling thread unseen, or fail the configuration from `stop()`."""
        try:
            return query()
        except Exception as exc:
            said = f"NVML {query.__name__} failed: {type(exc).__name__}: {exc}"
            if said not in (self._note or ""):
                self._note = f"{self._note}; {said}" if self._note else said
            return None

    def open_window(self) -> None:
        """The measured steps begin: from now on utilisation, clock and power count."""
        self._in_window.set()

    def close_window(self) -> None:
        """The measured steps are over (one last sample first, so a short window has one)."""
        with self._lock:
            if self._thread is not None and self._in_window.is_set():
                self._sample_now()
            self._in_window.clear()

    def _loop(self) -> None:
        while not self._stop.wait(self._period_s):
            self._sample()

    @property
    def _threaded(self) -> bool:
        return self._period_s > 0 and (self._gpu is not None or not self._kernel_rss)

    def start(self) -> MemorySampler:
        if self._device.type == "cuda":
            for device in self._allocators:
                torch.cuda.reset_peak_memory_stats(device)
        self._kernel_rss = reset_peak_rss()
        if self._threaded:
            self._sample()
            self._thread = threading.Thread(target=self._loop, name="memory-sampler", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> MemoryPeaks:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._sample()  # one last sample, so a short configuration still has its peak
        s = self._series
        if self._kernel_rss:
            s["rss"].add(peak_rss_mb())
        peaks = MemoryPeaks(
            nvml_mb=s["nvml"].peak,
            nvml_process_mb=s["nvml_process"].peak,
            nvml_struct=self._gpu.memory_struct if self._gpu is not None else None,
            rss_mb=s["rss"].peak,
            gpu_util_mean_pct=s["util"].mean,
            gpu_util_peak_pct=s["util"].peak,
            sm_clock_mean_mhz=s["clock"].mean,
            power_mean_w=s["power"].mean,
            power_peak_w=s["power"].peak,
            samples=self._samples,
            note=self._note,
        )
        if self._device.type == "cuda":
            peaks.allocated_mb, peaks.reserved_mb, which = largest_allocator_peaks(self._allocators)
            if which:
                peaks.note = f"{peaks.note}; {which}" if peaks.note else which
        return peaks


def peaks_as_row(peaks: MemoryPeaks) -> dict[str, Any]:
    return {
        "mem_peak_nvml_mb": peaks.nvml_mb,
        "mem_peak_nvml_process_mb": peaks.nvml_process_mb,
        "mem_nvml_struct": peaks.nvml_struct,
        "mem_peak_allocated_mb": peaks.allocated_mb,
        "mem_peak_reserved_mb": peaks.reserved_mb,
        "mem_peak_rss_mb": peaks.rss_mb,
        "gpu_util_mean_pct": peaks.gpu_util_mean_pct,
        "gpu_util_peak_pct": peaks.gpu_util_peak_pct,
        "sm_clock_mean_mhz": peaks.sm_clock_mean_mhz,
        "power_mean_w": peaks.power_mean_w,
        "power_peak_w": peaks.power_peak_w,
        "mem_samples": peaks.samples,
        "mem_note": peaks.note,
    }

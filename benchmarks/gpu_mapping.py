"""gpu_check's line on which GPU ddpbench reads when CUDA_VISIBLE_DEVICES renumbers them: a probe process sees every
GPU in reverse order (torch's cuda:0 is NVML's last GPU), and the memory sampler's NVML handle for cuda:0 must be
that GPU (by UUID), and run.json's topology must pair the visible GPUs in torch's numbering, every pair read.

On one GPU the renumbering is the identity, but the UUID lookup is still the sampler's. The expected GPU is a whole
one (NVML's index counts whole GPUs): on a MIG slice cuda:0 is the slice (its MIG-… name, env.nvml_names), so the
line reads a mismatch there. CUDA_DEVICE_ORDER=PCI_BUS_ID makes CUDA's order NVML's, so "last" is the same GPU in both.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

PROBE = """
import json, pynvml, torch
from harness.measure.env import gpu_topology, gpus
from harness.measure.memory import NvmlReader
pynvml.nvmlInit()
last = pynvml.nvmlDeviceGetCount() - 1
uuid = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(last))
try:
    found = NvmlReader(torch.device("cuda", 0)).gpu_id
except Exception as exc:
    found = f"{type(exc).__name__}: {exc}"
print(json.dumps({"expected": uuid.decode() if isinstance(uuid, bytes) else uuid, "found": found,
                  "visible": len(gpus()), "topology": gpu_topology()}))
"""


def probe(gpu_count: int) -> dict:
    """What a process whose CUDA_VISIBLE_DEVICES lists the GPUs last first reads."""
    order = ",".join(str(index) for index in reversed(range(gpu_count)))
    environment = {**os.environ, "CUDA_VISIBLE_DEVICES": order, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=environment, timeout=120)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def judge(seen: dict) -> tuple[str, bool]:
    """(what was seen, whether cuda:0's NVML handle is the expected GPU and the topology pairs the visible ones)."""
    if "error" in seen:
        return f"probe failed: {seen['error']}", False
    visible, pairs = seen["visible"], seen["topology"]
    same_gpu = seen["found"] == seen["expected"]
    in_range = all(0 <= p["gpu_a"] < p["gpu_b"] < visible for p in pairs)
    read = all(p["common_ancestor"] is not None and p["nvlink_p2p"] is not None for p in pairs)
    paired = len(pairs) == visible * (visible - 1) // 2 and in_range and read
    text = (f"cuda:0 read as {seen['found']} (NVML's last GPU: {seen['expected']}); "
            f"{len(pairs)} topology pairs of {visible} visible GPUs")  # fmt: skip
    return text, same_gpu and paired

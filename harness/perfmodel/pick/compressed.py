"""DDP with a compression hook (fp16's, bf16's) in the choice: which rows ask one, and what its step rests on (its
share of the bytes all-reduced, its exposed communication before and after, its casts left out), as choice.py ranks
it on DDP's schedule in fewer bytes (compression.with_compressed).
"""

from __future__ import annotations

import json

import pandas as pd

import impls
from harness.analysis import roles
from harness.perfmodel.compression import WIRE_BYTES
from harness.results.values import ms_text, strategy_label


def compressed_rows(state: pd.DataFrame) -> pd.Series:
    """The reference's rows asking a compression hook (compression.WIRE_BYTES: fp16's, bf16's) and nothing else."""
    hooks = [{"comm_hook": hook} for hook in WIRE_BYTES]
    return roles.is_reference(state) & roles.beyond_defaults_of(state).map(hooks.__contains__).astype(bool)


def benched_hooks(configs: pd.DataFrame | None, workload: str | None = None) -> dict[float, str]:
    """Per cap, the run's configurations of `workload` that are DDP as shipped with a 2-byte compression hook alone
    (compression.WIRE_BYTES), named as the run names them ('stock comm_hook=fp16'; 'stock comm_hook=fp16, stock
    comm_hook=bf16' where it benched both): where the network's table sets the hook's all-reduces beside DDP's."""
    if configs is None or configs.empty:
        return {}
    rows = configs[configs["impl"] == impls.reference_name()]  # another strategy's hook is no DDP's column
    rows = rows if workload is None or "workload" not in rows else rows[rows["workload"] == workload]
    named: dict[float, list[str]] = {}
    for impl, options, cap in zip(rows["impl"], rows["impl_options"], rows["bucket_cap_mb"], strict=True):
        acting = {k: v for k, v in roles.beyond_defaults(impl, options).items() if k != "bucket_cap_mb"}
        if acting in [{"comm_hook": hook} for hook in WIRE_BYTES]:
            labels = named.setdefault(round(float(cap), 6), [])
            labels += [label] if (label := strategy_label(impl, json.dumps(acting))) not in labels else []
    return {cap: ", ".join(labels) for cap, labels in sorted(named.items())}


def compressed_note(named: pd.Series, *, full_size: bool = False) -> str:
    """What a compression hook's step rests on, from a cluster frame's row (compression.with_compressed), the full
    size's floors' where they rank it (`full_size`)."""
    share = float(named.get("compressed_share", 1.0))
    if share >= 1.0:
        return "its gradients are 2-byte floats already: the hook sends what DDP sends"
    plain, hooked = ("full_size_exposed_ms", "compressed_full_size_exposed_ms") if full_size else (
        "exposed_comm_ms", "compressed_exposed_comm_ms")  # fmt: skip
    exposed = f"{ms_text(named.get(plain, 0.0))} → {ms_text(named.get(hooked, 0.0))} ms"
    return f"{share:.0%} of the bytes all-reduced{EXPOSED}{exposed}{' at least' * full_size}; {LOSSY}"


EXPOSED = ", exposed communication "
LOSSY = "lossy (the run's parity says how far), its casts left out"
"""compressed_note's words: before the exposed communication's figures, and what every hook's step leaves out."""

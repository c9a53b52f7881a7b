"""DDP with a compression hook (fp16's, bf16's) in the choice: which rows ask one, and what its step rests on (its
share of the bytes all-reduced, its exposed communication before and after, its casts left out), as choice.py ranks
it on DDP's schedule in fewer bytes (compression.with_compressed).
"""

from __future__ import annotations

import pandas as pd

from harness.analysis import roles
from harness.perfmodel.compression import WIRE_BYTES
from harness.results.values import ms_text


def compressed_rows(state: pd.DataFrame) -> pd.Series:
    """The reference's rows asking a compression hook (compression.WIRE_BYTES: fp16's, bf16's) and nothing else."""
    hooks = [{"comm_hook": hook} for hook in WIRE_BYTES]
    return roles.is_reference(state) & roles.beyond_defaults_of(state).map(hooks.__contains__).astype(bool)


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

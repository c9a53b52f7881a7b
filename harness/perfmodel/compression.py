"""DDP under a compression hook (fp16's, bf16's): the bytes an element crosses the network in, the share of a
model's gradient bytes that sends (`wire_share`), a link carrying that share (`Compressed`), and DDP's schedule
predicted on it (`with_compressed`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pandas as pd

from harness.perfmodel.network import NO_CONTENTION, Contention, Link
from harness.perfmodel.schedule import Grad, Profile, predict_caps

WIRE_BYTES = {"fp16": 2, "bf16": 2}
"""The bytes an element crosses the network in under each of stock's compression hooks (torch's fp16/bf16
compress hooks cast each bucket to a 2-byte float, all-reduce it and cast it back): the one change the hook
makes to DDP's schedule that a cluster's network prices. PowerSGD's is not here: what it sends depends on each
bucket's shapes and its rank, and it runs only on NCCL."""
ELEMENT_BYTES = {"float64": 8, "float32": 4, "bfloat16": 2, "float16": 2}


def wire_share(grads: Sequence[Grad], comm_hook: str) -> float:
    """The share of the gradients' bytes that `comm_hook` sends (1 where it sends them as they are: gradients
    already in 2-byte floats, or no hook in WIRE_BYTES)."""
    wire = WIRE_BYTES.get(comm_hook)
    total = sum(g.nbytes for g in grads)
    if wire is None or not total:
        return 1.0
    element = {g.dtype: ELEMENT_BYTES.get(g.dtype.removeprefix("torch."), wire) for g in grads}  # unknown: as sent
    sent = sum(min(g.nbytes, g.nbytes // element[g.dtype] * wire) for g in grads)
    return sent / total


@dataclasses.dataclass(frozen=True)
class Compressed:
    """`link` with each all-reduce carrying `share` of the bucket's bytes (`wire_share`): the buckets are laid out
    by the gradients' own bytes, as DDP lays them; a hook sends each in fewer. The cast before and after, a pass
    over the bucket on the GPU, is left out."""

    link: Link
    share: float

    def allreduce_s(self, nbytes: float, world_size: int) -> float:
        return self.link.allreduce_s(nbytes * self.share, world_size)

    def __getattr__(self, name: str):
        return getattr(self.link, name)  # its source, its nodes: the link's


def with_compressed(frame: pd.DataFrame, profile: Profile, *, link: Link, world_size: int, comm_hook: str = "fp16",
                    contention: Contention = NO_CONTENTION) -> pd.DataFrame:  # fmt: skip
    """`predict_caps`' frame with DDP's step at each of its caps under `comm_hook` (`compressed_step_ms`,
    `compressed_exposed_comm_ms`, `compressed_comm_ms` and `compressed_last_allreduce_ms`: its all-reduces and the
    last of them, `compressed_share`: the share of the bytes it sends); fp16's and bf16's alike."""
    share = wire_share(profile.grads, comm_hook)
    hooked = predict_caps(profile, caps_mb=list(frame["bucket_cap_mb"]), link=Compressed(link, share),
                          world_size=world_size, contention=contention)  # fmt: skip
    return frame.assign(
        compressed_step_ms=hooked["step_ms"].to_numpy(),
        compressed_exposed_comm_ms=hooked["exposed_comm_ms"].to_numpy(),
        compressed_comm_ms=hooked["comm_ms"].to_numpy(),
        compressed_last_allreduce_ms=hooked["last_allreduce_ms"].to_numpy(),
        compressed_share=share,
    )

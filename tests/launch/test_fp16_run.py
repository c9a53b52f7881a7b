"""fp16 end to end: one launch of stock and fsdp at two ranks, whose loss overflows in one rank's batch of one
measured step. Every rank skips that step through its grad scaler (fsdp's inf check agreeing across its shards), the
one-process reference skips it too, so parity holds, and the row records the skip."""

from __future__ import annotations

import torch

from harness.config.bench import BenchConfig
from harness.config.grid import expand
from harness.launch import bench_run
from harness.launch import launcher as launch
from harness.measure.training import make_batch
from harness.results import store

OVERFLOWS = """
import torch
import torch.nn.functional as F
from torch import nn

MARK = {mark!r}  # the first feature of rank 1's batch at step 2: its loss, and so its gradients, overflow


class Overflows:
    def build_model(self):
        return nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4))

    def make_batch(self, batch_size, *, device, generator):
        return (torch.randn(batch_size, 8, device=device, generator=generator),
                torch.randint(0, 4, (batch_size,), device=device, generator=generator))

    def loss(self, model, batch):
        features, labels = batch
        loss = F.cross_entropy(model(features), labels)
        return loss * float("inf") if float(features[0, 0]) == MARK else loss
"""


def test_an_fp16_overflow_in_one_rank_is_skipped_by_every_rank_and_the_reference_and_recorded(tmp_path):
    path = tmp_path / "overflows.py"
    path.write_text(OVERFLOWS.format(mark=None))
    config = BenchConfig(gpus=2, impls=("stock", "fsdp"), workloads=(f"{path}:Overflows",), size="tiny", steps=3,
                         warmup=1, batch_size=4, dtype="fp16", baseline=False, results=tmp_path / "results",
                         repeats=1)  # fmt: skip
    workload = next(c for c in expand(config, device="cpu")).make_workload()
    batch = make_batch(workload, batch_size=4, seed=config.seed, rank=1, step=2, device=torch.device("cpu"))
    path.write_text(OVERFLOWS.format(mark=float(batch[0][0, 0])))
    configurations = [c for c in expand(config, device="cpu") if c.world_size == 2]
    plan = bench_run.create_run(config, configurations, run_id="fp16", device="cpu", environment={})
    launch.run_groups(config, plan, on_written=lambda cfg: None)
    rows = store.read_configs(plan.run).set_index("impl")
    assert sorted(rows.index) == ["fsdp", "stock"]
    assert (rows["status"] == "ok").all(), rows["error"].to_dict()
    assert rows["parity_ok"].tolist() == [True, True], rows["parity_note"].to_dict()
    assert rows["scaler_skipped_steps"].tolist() == [1, 1]  # step 2 of the measured 1-3, on both
    assert (rows["dtype"] == "fp16").all()
    print(rows[["parity_max_abs_diff", "parity_tolerance", "scaler_skipped_steps"]].to_string())

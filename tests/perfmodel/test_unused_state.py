"""A mixture of experts benched small: its idle experts got no gradient (nor Adam's moments), and predict carried that
share to the full size, where every expert may get tokens. Its forward routes on values, which the meta device cannot
run: its activations are counted on the CPU instead, at batches that fit here, carried to the batch asked."""

from __future__ import annotations

import json
import textwrap

import pandas as pd
import pytest
import torch

import workloads
from harness.commands.predict import counted_here, full_size
from harness.measure import activations, meta_counts
from harness.perfmodel import memory, sharded, unused_state

MIB = 2**20
SMALL = {"param_bytes": 18.64 * MIB, "grad_bytes": 18.64 * MIB, "largest_param_bytes": 2 * MIB}
FULL = {"param_bytes": 1280 * MIB, "grad_bytes": 1280 * MIB, "largest_param_bytes": 125 * MIB, "root_param_bytes": 0,
        "root_grad_bytes": 0, "largest_block_bytes": 0, "largest_block_grad_bytes": 0, "activation_mb": 100.0,
        "activation_top": "Linear 50%"}  # fmt: skip


def held(impl: str, world: int, grad: float, state: float, param: float = 18.64, **extra) -> dict:
    return {"workload": "moe.py:MoE", "size": "small", "batch_size": 1, "dtype": "fp32", "optimizer": "adam",
            "impl": impl, "impl_options": "{}", "world_size": world, "status": "ok", "held_param_mb": param,
            "held_grad_mb": grad, "held_optimizer_state_mb": state, **SMALL, **extra}  # fmt: skip


# As the walkthrough's moe_fu run held them (gradients for 5.56 and 8.33 of 18.64 MiB: its idle experts got none).
MOE_RUN = pd.DataFrame([held("stock", 1, 5.56, 26.72), held("stock", 2, 8.33, 35.27),
                        held("zero", 1, 5.56, 26.72), held("zero", 2, 8.33, 17.63),
                        held("fsdp", 1, 5.56, 26.72), held("fsdp", 2, 3.0, 12.0, param=9.32)])  # fmt: skip


def test_idle_experts_gradients_and_optimizer_state_are_counted_whole_at_the_full_size():
    """Predicted 'stock 3.8 GiB = 1.25 GiB+478 MiB+2.08 GiB' for a model whose full size trains every expert: its
    gradients (1.25 GiB) and Adam's moments (2.5 GiB) are counted whole, each strategy's share of them as it splits."""
    before = memory.state_per_rank(sharded.at_full_size(MOE_RUN, FULL), [8]).set_index(["impl", "world_size"])
    assert before.loc[("stock", 8), "held_grad_mb"] < 1280 / 2  # the bug: the small run's share carried on
    bounded, note = unused_state.whole_where_unused(sharded.at_full_size(MOE_RUN, FULL), MOE_RUN)
    state = memory.state_per_rank(bounded, [8]).set_index(["impl", "world_size"])
    kinds = ["held_param_mb", "held_grad_mb", "held_optimizer_state_mb"]
    assert state.loc[("stock", 8), kinds].tolist() == pytest.approx([1280.0, 1280.0, 2560.0])
    assert state.loc[("zero", 8), "held_grad_mb"] == pytest.approx(1280.0)  # gradients whole, its state its share
    assert 2560.0 / 8 <= state.loc[("zero", 8), "held_optimizer_state_mb"] < 2560.0 / 2
    assert state.loc[("fsdp", 8), "held_grad_mb"] == pytest.approx(1280.0 / 8, rel=0.05)  # its shard, not below
    assert state.loc[("fsdp", 8), "held_optimizer_state_mb"] >= 2560.0 / 8
    assert "held gradients for 5.56 of its 18.64 MiB of trained parameters" in note and "counted whole" in note


def test_a_run_that_held_every_gradient_is_left_as_it_was():
    full = MOE_RUN.assign(held_grad_mb=MOE_RUN["held_grad_mb"].where(MOE_RUN["world_size"] == 1, 18.64))
    whole = full.assign(held_grad_mb=[18.64, 18.64, 18.64, 18.64, 18.64, 9.32])  # fsdp at 2: half, its shard
    scaled = sharded.at_full_size(whole, FULL)
    same, note = unused_state.whole_where_unused(scaled, whole)
    assert note == "" and same is scaled
    assert unused_state.short_of(full) == pytest.approx((5.56, 18.64))


TOY = textwrap.dedent("""
    import torch
    import torch.nn.functional as F
    from torch import nn


    class Routed(nn.Module):
        def __init__(self, d, experts):
            super().__init__()
            self.gate = nn.Linear(d, experts)
            self.experts = nn.ModuleList(nn.Linear(d, d) for _ in range(experts))

        def forward(self, x):
            idx = self.gate(x).argmax(-1)
            out = torch.zeros_like(x)
            for e, expert in enumerate(self.experts):
                sel = idx == e
                if sel.any():  # a value read: the meta device cannot say whether
                    out[sel] = expert(x[sel])
            return out


    class Toy:
        def __init__(self, width: int = 16, experts: int = 4):
            self.width = width
            self.model = lambda: nn.Sequential(nn.Linear(width, width), nn.Tanh(), Routed(width, experts),
                                               nn.Linear(width, 3))

        def build_model(self):
            return self.model()

        def make_batch(self, batch_size, *, device, generator):
            return (torch.randn(batch_size, self.width, device=device, generator=generator),
                    torch.randint(0, 3, (batch_size,), device=device, generator=generator))

        def loss(self, model, batch):
            return F.cross_entropy(model(batch[0]), batch[1])
""")


@pytest.fixture
def toy(tmp_path):
    path = tmp_path / "toy.py"
    path.write_text(TOY)
    return f"{path}:Toy"


def test_a_forward_that_reads_a_value_is_counted_on_the_cpu_and_said_why_not_on_meta(toy):
    counted = meta_counts.counts(toy, "full", {"width": 64}, batch_size=32, dtype="fp32")
    assert counted["activation_mb"] is None and "meta" in counted["activation_meta_error"]
    full = counted_here.with_cpu_activations(counted, toy, {"width": 64}, 32, "fp32")
    workload = workloads.resolve(toy).create(size="full", options={"width": 64})
    real = activations.activation_bytes(workload, batch_size=32, device=torch.device("cpu"), dtype="fp32") / MIB
    assert full["activation_cpu_batches"] == [1, 2] and full["activation_mb"] == pytest.approx(real, rel=0.1)
    words = counted_here.counted_words(full, 32)
    assert words.startswith("; its activations on this CPU instead, at batch 1 and 2, carried to batch 32 by what ")
    assert words.endswith(f"the meta device cannot run its forward ({counted['activation_meta_error']})")
    assert counted_here.counted_words(FULL, 32) == ""  # counted on the meta device: nothing to add


def test_counting_on_the_cpu_says_so_while_it_runs(monkeypatch):
    """A first predict of such a model was silent ~100 s behind 'predicting on dgx-h100…': a status line says why."""
    from harness.commands.console import progress

    said = []

    class Seen:
        def __init__(self, command: str) -> None:
            said.append(command)

        def show(self, what: str, **_) -> None:
            said.append(what)

        def end(self) -> None:
            said.append("ended")

    def counting(*_, **__) -> dict:
        said.append("counting")
        return {"activation_mb": 5.0, "activation_cpu_batches": [1, 2]}

    monkeypatch.setattr(progress, "Status", Seen)
    monkeypatch.setattr(meta_counts, "activations_on_cpu", counting)
    meta = {"activation_mb": None, "activation_meta_error": "Tensor.item()", "param_bytes": 1024}
    assert counted_here.with_cpu_activations(meta, "toy.py:Toy", {}, 8, "fp32")["activation_mb"] == 5.0
    assert said == ["predict", "counting its activations on this CPU at batch 1 and 2 (the meta device cannot run its "
                    "forward)", "counting", "ended"]  # fmt: skip
    assert counted_here.cpu_batches_text(1) == "batch 1"  # the first batch alone: all it runs
    said.clear()
    assert counted_here.with_cpu_activations(FULL, "toy.py:Toy", {}, 8, "fp32") is FULL and said == []  # on meta


def test_a_model_too_large_to_run_here_is_not_counted_on_the_cpu_and_says_why(toy):
    refused = meta_counts.activations_on_cpu(toy, "full", {}, batch_size=8, dtype="fp32", param_bytes=2**30,
                                             room=2**31)  # fmt: skip
    assert refused["activation_mb"] is None and "this machine has available" in refused["activation_cpu_error"]
    words = counted_here.counted_words({**refused, "activation_meta_error": "Tensor.item() cannot be called"}, 8)
    assert words == (f"; its activations could not be counted there (Tensor.item() cannot be called), nor on this "
                     f"CPU ({refused['activation_cpu_error']})")  # fmt: skip


def test_predicts_memory_of_a_routed_model_is_counted_whole_and_on_the_cpu(toy, tmp_path):
    """The two together, as predict --train-wopt counts the model you will train from a small run's rows."""
    small = {"param_bytes": 4000.0, "grad_bytes": 4000.0, "largest_param_bytes": 1024.0}
    rows = pd.DataFrame([held(impl, world, 0.002, 0.004, param=0.0038, **small, workload="toy.py:Toy",
                              workload_spec=toy, workload_options=json.dumps({"width": 16}))
                         for impl in ("local", "stock") for world in (1, 2)])  # fmt: skip
    setup = {key: rows[key].iloc[0] for key in ("workload", "size", "batch_size", "dtype", "optimizer")}
    scaled, note = full_size.memory_rows(tmp_path, rows, setup, batch_size=8, options={"width": 64})
    full = meta_counts.counts(toy, "full", {"width": 64}, batch_size=8, dtype="fp32")
    stock = scaled[(scaled["impl"] == "stock")]
    assert stock["held_grad_mb"].tolist() == pytest.approx([full["grad_bytes"] / MIB] * 2)
    assert stock["held_optimizer_state_mb"].tolist() == pytest.approx([2 * full["grad_bytes"] / MIB] * 2)
    assert stock["activation_mb"].notna().all() and "on this CPU instead, at batch 1 and 2" in note
    assert "gradients and their optimizer state counted whole" in note


def test_zero_1s_fullest_rank_keeps_the_state_of_what_torchs_partition_gives_it_not_an_even_share():
    """ZeRO-1's shards are uneven: torch gives each parameter, largest first, to the rank with the fewest elements. At
    the full size counted whole, its fullest rank's Adam state is that rank's parameters' two moments, by hand."""
    experts = [(int(144.375 * MIB), "float32", True, k, f"experts.{k}.weight") for k in range(8)]
    table = [(125 * MIB, "float32", True, None, "embed.weight"), *experts, (4096, "float32", True, None, "gate")]
    full = {**FULL, "parameters": table}
    bounded, _ = unused_state.whole_where_unused(sharded.at_full_size(MOE_RUN, full), MOE_RUN)
    state = memory.state_per_rank(bounded, [4, 8]).set_index(["impl", "world_size"])
    # By hand, largest first to the emptiest rank, Adam's two moments of what it owns: at 2 ranks 4 experts and the
    # embedding (2 x 702.5 MiB), at 4 two experts and the embedding (2 x 413.75), at 8 an expert and the embedding
    # (2 x 269.375); an even split of the 2560 MiB of state would be 1280 / 640 / 320.
    for world, fullest in ((2, 1405.0), (4, 827.5), (8, 538.75)):
        assert state.loc[("zero", world), "held_optimizer_state_mb"] == pytest.approx(fullest, rel=1e-4)
        assert fullest > 2 * 1280.0 / world  # uneven: an even split would understate it


def test_a_routed_model_predicted_at_its_own_size_and_batch_is_counted_whole_too(toy, tmp_path):
    """`predict --run moe2 --cluster dgx-h100` of a file benched as written (no --train-wopt, the run's batch) said
    'stock 8.55 MiB = 2.27+1.76+4.52': the idle experts' gradients left out (whole: 2.27 MiB), and no word of it; the
    memory is re-counted where the rows held fewer gradients than the model trains, as at another size."""
    (tmp_path / "run.json").write_text(json.dumps({"workloads": {"toy.py:Toy": {"kind": "file"}}}))
    small = {"param_bytes": 4000.0, "grad_bytes": 4000.0, "largest_param_bytes": 1024.0}
    rows = pd.DataFrame([held(impl, world, 0.002, 0.004, param=0.0038, **small, workload="toy.py:Toy",
                              workload_spec=toy, workload_options=json.dumps({"width": 16}))
                         for impl in ("local", "stock") for world in (1, 2)])  # fmt: skip
    setup = {key: rows[key].iloc[0] for key in ("workload", "size", "batch_size", "dtype", "optimizer")}
    scaled, note = full_size.memory_rows(tmp_path, rows, setup)
    whole = meta_counts.counts(toy, "full", {"width": 16}, batch_size=1, dtype="fp32")["grad_bytes"] / MIB
    assert scaled[scaled["impl"] == "stock"]["held_grad_mb"].tolist() == pytest.approx([whole] * 2)
    assert "gradients and their optimizer state counted whole" in note
    every = rows.assign(held_grad_mb=4000.0 / MIB)  # a run that held them all: its rows as they are
    same, said = full_size.memory_rows(tmp_path, every, setup)
    assert said == "" and same["held_grad_mb"].tolist() == every["held_grad_mb"].tolist()

"""A mixture of experts benched small: its idle experts got no gradient (nor Adam's moments), and predict carried that
share to the full size, where every expert may get tokens."""

from __future__ import annotations

import pandas as pd
import pytest

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

"""Model state per rank at world sizes a run did not reach: held(n) = whole + split / n, fitted per strategy."""

from __future__ import annotations

import dataclasses
import json
import re
import types
from typing import ClassVar

import pandas as pd
import pytest

from harness.commands.predict import trained_dtype
from harness.perfmodel import fits, memory, memory_words, sharded
from harness.perfmodel.memory_words import activation_words
from harness.perfmodel.pick import choice_table


def held(impl: str, world: int, param: float, grad: float, state: float, **extra) -> dict:
    return {"workload": "resnet50", "size": "small", "batch_size": 4, "dtype": "fp32", "optimizer": "adam",
            "impl": impl, "impl_options": "{}", "world_size": world, "status": "ok", "held_param_mb": param,
            "held_grad_mb": grad, "held_optimizer_state_mb": state, **extra}  # fmt: skip


# As a walkthrough's resnet50/small run measured them at 1 and 2 ranks (Adam: state twice the parameters).
RUN = pd.DataFrame([
    held("stock", 1, 90.46, 90.46, 180.92), held("stock", 2, 90.46, 90.46, 180.92),
    held("zero", 1, 90.46, 90.46, 180.92), held("zero", 2, 90.46, 90.46, 90.46),
    held("fsdp", 1, 90.46, 90.46, 180.92), held("fsdp", 2, 45.23, 45.23, 90.46),
    held("fsdp", 2, 45.23, 45.23, 90.47, status="failed"),  # a failed launch holds nothing to fit
    held("naive", 2, 90.46, 90.46, 180.92),  # one world size: whole and split cannot be told apart
])  # fmt: skip


def test_each_strategy_splits_what_its_ranks_were_measured_to_split():
    state = memory.state_per_rank(RUN, [8, 1024]).set_index(["impl", "world_size"])
    assert set(state.index.get_level_values("impl")) == {"stock", "zero", "fsdp"}
    assert state.loc[("stock", 1024), "total_mb"] == pytest.approx(361.84) and state.loc[("stock", 8), "splits"] == ""
    assert state.loc[("zero", 8), "held_optimizer_state_mb"] == pytest.approx(180.92 / 8)
    assert state.loc[("zero", 8), "held_param_mb"] == pytest.approx(90.46) and state.loc[("zero", 8), "splits"] == (
        "optimizer state"
    )
    assert state.loc[("fsdp", 8), "total_mb"] == pytest.approx(361.84 / 8)
    assert state.loc[("fsdp", 1024), "splits"] == "parameters, gradients, optimizer state"
    # the world sizes measured are as measured, and said so
    assert state.loc[("fsdp", 2), "measured"] and not state.loc[("fsdp", 8), "measured"]
    assert state.loc[("fsdp", 2), "held_optimizer_state_mb"] == pytest.approx(90.46)


def test_noise_never_fits_a_negative_part_and_a_run_without_held_state_has_no_table():
    grows = pd.DataFrame([held("stock", 1, 90.0, 90.0, 180.0), held("stock", 2, 90.2, 90.0, 180.0)])
    state = memory.state_per_rank(grows, [8]).set_index("world_size")
    assert state.loc[8, "held_param_mb"] == pytest.approx(90.1) and state.loc[8, "splits"] == ""
    assert memory.state_per_rank(RUN.drop(columns=["held_grad_mb"]), [8]).empty
    assert memory.state_per_rank(RUN[RUN["impl"] == "naive"], [8]).empty


def test_predict_prints_each_strategys_model_state_at_the_gpu_counts_asked(capsys):
    from harness.commands.console.predict import memory as console_memory

    state = memory.state_per_rank(RUN, [8, 64])
    console_memory.model_state(state, [8, 64])
    said = capsys.readouterr().out
    assert (
        "memory per rank at w8 / w64: model state (parameters + gradients + optimizer state, at the most GPUs) as "
        "held at 1, 2 ranks" in said
    )
    assert said.splitlines()[1:] == [  # smallest first; a figure alike at every GPU count said once, a unit too
        "         model state",  # its parts in one cell: a 1.3B Llama's read 20 GiB, Adam's unsaid
        "  fsdp   45.2 / 5.65 MiB",  # a total by GPU count: its figures alone, the table kept to the console's width
        "  zero   204 / 184 MiB",
        "  stock  362 MiB = 90.5+90.5+181",
    ]
    assert "forward keeps" not in said  # a run from before activations were counted: not said
    # a table whose every figure is alike at each GPU count says so in its head, not 'at w8 / w64' over one figure
    console_memory.model_state(state[state["impl"] == "stock"], [8, 64])
    assert capsys.readouterr().out.startswith("ddpbench predict: memory per rank, alike at w8 / w64: model state")
    counted = RUN.assign(activation_mb=130.0, activation_top="NewGELUActivation 48%", activation_sample_added_mb=30.0)
    console_memory.model_state(memory.state_per_rank(counted, [8, 64]), [8, 64])
    said = capsys.readouterr().out
    assert (
        "and the model's forward keeps 130 MiB of activations for backward at 4 samples a rank in fp32 (each further "
        "sample adds 30 MiB; most kept by NewGELUActivation 48%), every strategy alike at any GPU count"
    ) in said
    assert "memory per rank at w8 / w64: " in said and "; peak: the state, backward's or the optimizer's part" in said
    assert "         model state              peak           optim. temps\n" in said  # a kind kept beside
    assert "  stock  362 MiB = 90.5+90.5+181  492 MiB        90.5 MiB\n" in said
    # what is kept beside at the peak at each GPU count the header names, as the peak is: a walkthrough read FSDP's
    # temporaries at its most GPUs under a verdict at its fewest; at w8 they are 180.92 / 8 / 2 MiB
    assert "  fsdp   45.2 / 5.65 MiB          175 / 136 MiB  11.3 / 1.41 MiB\n" in said
    assert "unsharded:" not in said  # no such column, no such word
    # a language model's activations grow with the sequence: its length is said (the full size's may be another)
    console_memory.model_state(memory.state_per_rank(counted.assign(tokens_per_batch=4 * 1024), [8]), [8])
    assert "of activations for backward at 4 samples of 1,024 tokens a rank in fp32" in capsys.readouterr().out
    # a source and a target a sample (t5): --train-wopt seq_len=512 was followed by "samples of 1,024 tokens" unsaid
    t5 = counted.assign(tokens_per_batch=4 * 1024, workload="hf:t5")
    console_memory.model_state(memory.state_per_rank(t5, [8]), [8])
    assert "at 4 samples of 1,024 tokens (512 source + 512 target) a rank in fp32" in capsys.readouterr().out
    console_memory.model_state(state.iloc[0:0], [8])  # nothing measured at two world sizes: nothing said
    assert capsys.readouterr().out == ""


def test_a_strategy_that_splits_its_optimizer_but_not_its_parameters_keeps_the_largest_ones_state():
    """ZeRO places whole parameters on ranks: at 1024 ranks the even split (0.18 MiB of Adam state) is below the
    largest parameter's 18 MiB that one rank keeps. FSDP splits the parameters themselves: no floor."""
    largest = RUN.assign(largest_param_bytes=9 * 2**20)
    state = memory.state_per_rank(largest, [1024]).set_index(["impl", "world_size"])
    assert state.loc[("zero", 1024), "held_optimizer_state_mb"] == pytest.approx(9 * 180.92 / 90.46)
    assert state.loc[("zero", 1024), "floor_mb"] == pytest.approx(18.0)
    assert state.loc[("zero", 2), "held_optimizer_state_mb"] == pytest.approx(90.46)  # measured stays measured
    assert state.loc[("fsdp", 1024), "floor_mb"] == 0 and state.loc[("fsdp", 1024), "total_mb"] < 1


def test_the_baseline_is_no_strategy_and_a_cap_sweeps_caps_are_one():
    """A walkthrough's sweep listed `local` (one process's training, no data parallelism to choose) and
    'stock bucket_cap_mb=1 32.4 MiB, stock bucket_cap_mb=25 32.4 MiB': DDP's buckets are not in the state held."""
    swept = pd.concat([RUN, pd.DataFrame([
        held("local", 1, 90.46, 90.46, 180.92), held("local", 2, 90.46, 90.46, 180.92),
        held("stock", 1, 90.46, 90.46, 180.92, impl_options='{"bucket_cap_mb": 1.0}'),
        held("stock", 2, 90.46, 90.46, 180.92, impl_options='{"bucket_cap_mb": 1.0}'),
        held("stock", 2, 90.46, 90.46, 180.92, impl_options='{"bucket_cap_mb": 1.0, "static_graph": true}'),
        held("stock", 1, 90.46, 90.46, 180.92, impl_options='{"bucket_cap_mb": 25.0, "static_graph": true}'),
    ])])  # fmt: skip
    state = memory.state_per_rank(swept, [8])
    assert sorted(set(zip(state["impl"], state["impl_options"], strict=True))) == [
        ("fsdp", "{}"), ("stock", '{"static_graph": true}'), ("stock", "{}"), ("zero", "{}")]  # fmt: skip


def test_which_strategy_fits_in_the_clusters_gpus_state_and_activations_together():
    """A model 400× the walkthrough's (141 GiB of Adam training, and a GPU's Adam's temporary, half its state, at
    the step's peak): DDP never fits in 80 GiB, ZeRO once its optimizer state is split far enough, FSDP from the
    first node; without counted activations nothing is said (the state alone would pass a model whose
    activations do not fit)."""
    big = RUN.assign(**{c: RUN[c] * 400 for c in memory.HELD}, activation_mb=1024.0)
    state = memory.state_per_rank(big, [8, 64, 512]).query("world_size >= 8")
    state = state.assign(strategy=state["impl"])
    words = memory_words.fit_words(state, 80)
    assert "stock does not fit (177 GiB a rank)" in words
    assert (
        "zero fits from w64 (72.8 of 80 GiB a rank there: 7.22 GiB left for" in words
        and "fsdp fits (22.1 of 80 GiB a rank at most, at w8: 57.9 GiB left for" in words
    )
    assert (
        memory_words.fit_words(state, 0.0) == ""
        and memory_words.fit_words(state.assign(activation_mb=float("nan")), 80) == ""
    )


def test_where_nothing_fits_the_batch_a_rank_at_which_each_would_is_said():
    """A walkthrough's llama at batch 8 fitted nowhere and the table said 'none modelled fits', nothing more: the
    activations grow sample by sample (7.5 GiB a sample here) and nothing else does, so at batch 4 a rank stock needs
    40 + 5 + 30 GiB; at 5, 82.5 of 80."""
    rows = pd.DataFrame({"strategy": ["stock", "stock", "zero"], "world_size": [8, 64, 64],
                         "total_mb": [50 * 1024.0, 40 * 1024.0, 79 * 1024.0], "activation_mb": [60 * 1024.0] * 3,
                         "batch_size": [8] * 3, "buckets_mb": [5 * 1024.0] * 3,
                         "optimizer_temp_mb": [10 * 1024.0] * 3})  # fmt: skip
    assert list(fits.largest_batch(rows, 80)) == [3, 4, 0]  # zero: its state alone leaves no room for a step
    need = memory.need_mb(rows.assign(activation_mb=7.5 * 1024 * 4)).iloc[1]
    assert need <= 80 * 1024 < memory.need_mb(rows.assign(activation_mb=7.5 * 1024 * 5)).iloc[1]
    said = memory_words.fit_words(rows, 80)
    # at batch 4 stock leaves 5 of its 75 GiB: under the 8 % the console's and the answer's "with room" keep
    assert said.startswith("stock does not fit (105 GiB a rank at the least; at batch 4 a rank or fewer it would, at "
                           "w64, tight: at 3 with room); zero does not fit (")  # fmt: skip
    assert memory_words.batch_words(rows[rows["world_size"] == 64], 80) == (
        "at batch 4 a rank or fewer stock would fit (tight; with room: stock 3)"
    )
    roomy = rows.assign(activation_mb=57.6 * 1024)  # 7.2 GiB a sample: 40 + 5 + 28.8 at 4, 6.2 GiB left: room
    assert (
        memory_words.batch_words(roomy[roomy["world_size"] == 64], 80) == "at batch 4 a rank or fewer stock would fit"
    )
    assert memory_words.batch_words(rows[rows["strategy"] == "zero"], 80) == ""
    crowded = pd.DataFrame({"strategy": ["stock"], "world_size": [8], "total_mb": [70 * 1024.0],
                            "activation_mb": [8 * 1024.0], "batch_size": [8], "buckets_mb": [5 * 1024.0]})  # fmt: skip
    assert fits.fit_phrase(crowded, 80).endswith("at batch 5 a rank or fewer it would, tight: no batch has room)")
    # a review's: one that fits already is no advice to shrink, and one that keeps nothing has no bound (no crash)
    odd = pd.DataFrame({"strategy": ["none kept", "fits"], "world_size": [8, 8], "total_mb": [90 * 1024.0, 1024.0],
                        "activation_mb": [0.0, 1024.0], "batch_size": [8, 8]})  # fmt: skip
    assert list(fits.largest_batch(odd, 80)) == [0, 632] and memory_words.batch_words(odd, 80) == ""


def test_a_need_that_grows_with_the_gpus_and_a_strategy_in_another_dtype_are_said_as_they_are():
    """A review found 'does not fit (71 GiB a rank at the least)' for a need rising 71 → 91 GiB against 80, and
    FSDP computing in bf16 given the fp32 forward's activations."""
    rows = pd.DataFrame({"strategy": ["odd"] * 3, "world_size": [8, 64, 512], "total_mb": [70e3, 72e3, 92e3],
                         "activation_mb": [1024.0] * 3})  # fmt: skip
    assert memory_words.fit_words(rows, 80) == "odd fits at w8, w64, not at w512 (90.8 GiB a rank at w512)"
    mixed = RUN.assign(activation_mb=64.0)
    mixed.loc[mixed["impl"] == "fsdp", "impl_options"] = '{"param_dtype": "bf16"}'
    state = memory.state_per_rank(mixed, [8]).query("world_size == 8")
    state = state.assign(strategy=state["impl"])
    said = activation_words(state)
    assert "every strategy alike but fsdp, which computes in bf16 (not counted)" in said
    assert "fsdp" not in said.split("at the step's peak")[0].split("at any GPU count:")[1]  # no total for it
    assert "fsdp" not in memory_words.fit_words(state, 80) and "stock fits" in memory_words.fit_words(state, 80)
    # counted in its own dtype (predict counts it on the meta device): its own activations, said and fitted
    counted = memory.state_per_rank(mixed.assign(compute_activation_mb=30.0, compute_activation_top="Linear 60%"), [8])
    counted = counted.query("world_size == 8").assign(strategy=lambda f: f["impl"])
    fsdp = counted.set_index("strategy").loc["fsdp"]
    assert (fsdp["activation_mb"], fsdp["computes_in"], fsdp["activation_top"]) == (30.0, "bf16", "Linear 60%")
    said = activation_words(counted)
    assert "keeps 64 MiB of activations for backward at" in said and " in fp32" in said  # the run's dtype leads
    assert "every strategy alike but fsdp, which computes in bf16: 30 MiB at any GPU count" in said
    assert "fsdp fits" in memory_words.fit_words(counted, 80)


def test_one_process_over_a_nodes_gpus_stays_at_the_world_sizes_run_and_its_first_gpu_is_not_counted():
    """nn.DataParallel: a review's synthetic frame had it 'fit' at w64 (one process drives one node's GPUs), and
    counted its first GPU as one rank's batch (it gathers every replica's outputs and the whole batch's loss)."""
    run = pd.concat([RUN.assign(activation_mb=64.0),
                     pd.DataFrame([held("dataparallel", w, 90.46, 90.46, 180.92, activation_mb=64.0,
                                        single_process=True) for w in (1, 2, 4)])], ignore_index=True)  # fmt: skip
    state = memory.state_per_rank(run, [8, 64])
    one = state[state["impl"] == "dataparallel"]
    assert sorted(one["world_size"]) == [1, 2, 4]  # not carried to w8 or w64
    assert one.set_index("world_size")["activation_mb"].isna().tolist() == [False, True, True]
    at2 = state[state["world_size"] == 2].assign(strategy=lambda f: f["impl"])
    assert "every strategy alike but dataparallel, whose first GPU also gathers every replica's outputs" in (
        activation_words(at2)
    )
    assert "dataparallel" not in memory_words.fit_words(at2, 80)


def test_the_gradient_buckets_kept_beside_the_gradients_count_at_every_gpu_count():
    """stock's ranks laid out 1 + 89.46 MiB of buckets beside its gradients, every gradient bucketed at each cap;
    with gradient_as_bucket_view the gradients are the buckets: nothing beside them. FSDP keeps none. The buckets
    are there through backward and the optimizer step alike (Adam's temporary, 90.46 MiB, beside them): at 452 MiB
    a rank without them stock fits a GPU of 0.5 GiB; with them it does not. A run that recorded no layout for a
    strategy with a cap counts none, and says so."""
    buckets = {"bucket_sizes_mb": [1.0, 89.46], "bucket_cap_mb": 25.0}
    units = {"param_bytes": 0, "root_param_bytes": 0, "root_grad_bytes": 0, "largest_block_bytes": 0,
             "largest_block_grad_bytes": 0}  # fmt: skip
    run = pd.concat([RUN, pd.DataFrame([
        held("stock", 1, 90.46, 90.46, 180.92, bucket_sizes_mb=[25.0, 65.46], bucket_cap_mb=25.0),
        held("stock", 2, 90.46, 90.46, 180.92, **buckets),
        held("stock", 1, 90.46, 90.46, 180.92, impl_options='{"gradient_as_bucket_view": true}', **buckets),
        held("stock", 2, 90.46, 90.46, 180.92, impl_options='{"gradient_as_bucket_view": true}', **buckets),
    ])]).assign(activation_mb=10.0, **units)  # fmt: skip
    state = memory.state_per_rank(run, [8]).set_index(["impl", "impl_options", "world_size"])
    assert state.loc[("stock", "{}", 8), "buckets_mb"] == pytest.approx(90.46)
    assert state.loc[("stock", '{"gradient_as_bucket_view": true}', 8), "buckets_mb"] == 0
    assert state.loc[("fsdp", "{}", 8), "buckets_mb"] == 0
    assert memory.need_mb(state).loc[("stock", "{}", 8)] == pytest.approx(361.84 + 90.46 + 90.46)
    plain = state.reset_index().query("impl_options == '{}'").assign(strategy=lambda f: f["impl"])
    assert "stock does not fit (543 MiB a rank)" in memory_words.fit_words(plain, 0.5)
    assert (
        "stock fits (452 MiB of 0.5 GiB a rank at most: 59.7 MiB left for buffers, the CUDA context"
        in memory_words.fit_words(plain.assign(buckets_mb=0.0, step_buckets_mb=0.0), 0.5)
    )
    said = activation_words(plain[plain["world_size"] == 8])
    assert "stock 543 MiB" in said and "at the step's peak (its state and the larger of backward's part and " in said
    assert "; the gradient buckets kept beside the gradients, stock 90.5 MiB; buckets not recorded for zero" in said
    unlaid = memory.state_per_rank(run.assign(bucket_sizes_mb=None), [8]).assign(strategy=lambda f: f["impl"])
    assert unlaid.query("impl == 'stock' and impl_options == '{}'")["buckets_mb"].isna().all()
    assert memory_words.fit_words(unlaid, 0.5).endswith(
        "buckets for stock, zero not recorded (a run from before ddpbench recorded them): counted as none"
    )


def test_fsdp_holds_the_roots_and_the_largest_blocks_parameters_and_gradients_whole_at_its_peak():
    """The root (20 MiB, 12 MiB of it trained) is gathered from forward to the end of backward and its gradients are
    reduce-scattered only then; the largest block (10 MiB, 8 trained) is held twice over (its gather's buffer and
    its unsharded copy; its gradients and the previous block's reduce-scatter input): 20 + 12 + 2 × (10 + 8) = 68
    MiB beside fsdp's shards at every GPU count. With reshard_after_forward=false every parameter (90.46 MiB)
    instead of the root's and the blocks'. Nothing for a strategy that shards no parameters; an unrecorded run's
    fsdp counts none, and the lines say so."""
    mib = 2**20
    units = {"param_bytes": 90.46 * mib, "root_param_bytes": 20 * mib, "root_grad_bytes": 12 * mib,
             "largest_block_bytes": 10 * mib, "largest_block_grad_bytes": 8 * mib}  # fmt: skip
    kept = '{"reshard_after_forward": false}'
    run = pd.concat([RUN, pd.DataFrame([held("fsdp", 1, 90.46, 90.46, 180.92, impl_options=kept),
                                        held("fsdp", 2, 45.23, 45.23, 90.46, impl_options=kept)])])  # fmt: skip
    state = memory.state_per_rank(run.assign(activation_mb=10.0, **units), [8, 64])
    state = state.set_index(["impl", "impl_options", "world_size"])
    assert state.loc[("fsdp", "{}", 64), "unsharded_mb"] == pytest.approx(68.0)
    assert state.loc[("fsdp", kept, 8), "unsharded_mb"] == pytest.approx(90.46 + 12 + 2 * 8)
    assert state.loc[("stock", "{}", 8), "unsharded_mb"] == 0 and state.loc[("zero", "{}", 8), "unsharded_mb"] == 0
    assert memory.need_mb(state).loc[("fsdp", "{}", 64)] == pytest.approx(361.84 / 64 + 10 + 68)
    rows = state.reset_index().query("world_size == 64").assign(strategy=lambda f: f["impl"] + f["impl_options"])
    assert "the parameters and gradients held whole at the peak, fsdp{} 68 MiB, fsdp" in activation_words(rows)
    old = memory.state_per_rank(run.assign(activation_mb=10.0), [8]).assign(strategy=lambda f: f["impl"])
    assert old.query("impl == 'fsdp'")["unsharded_mb"].isna().all()
    assert "unsharded parameters and gradients for fsdp not recorded" in memory_words.fit_words(old, 80)


def test_fsdp_in_bf16_holds_its_gathered_parameters_and_gradients_at_half_the_masters_size():
    """param_dtype=bf16 gathers and computes in bf16 (half the fp32 masters' bytes): the root's 20 MiB and the
    largest block's 2 × 10 MiB of parameters, the root's 12 MiB and the block's 8 MiB of gradients are held at half;
    the reduce-scatter's input is in reduce_dtype: 8 MiB at fp32, 4 at bf16."""
    units = {"param_bytes": 90.46, "root_param_bytes": 20.0, "root_grad_bytes": 12.0, "largest_block_bytes": 10.0,
             "largest_block_grad_bytes": 8.0}  # fmt: skip
    rows = pd.DataFrame([{"impl": "fsdp", **units}]).assign(**{k: lambda f, k=k: f[k] * 2**20 for k in units})
    bf16 = memory._unsharded(rows, '{"param_dtype": "bf16"}')
    assert bf16 == pytest.approx((20 + 2 * 10) / 2 + (12 + 8) / 2 + 8)
    both = memory._unsharded(rows, '{"param_dtype": "bf16", "reduce_dtype": "bf16"}')
    assert both == pytest.approx(68.0 / 2) and memory._unsharded(rows, "{}") == pytest.approx(68.0)


def test_at_the_optimizer_step_gradients_living_in_their_buckets_are_not_counted_twice():
    """flat and bucketed point their gradients at their flat buffers after the sync: at the optimizer step the
    buffers hold the gradients, not a copy beside them, so that step needs the state and Adam's temporary only;
    DDP's default copies the buckets back into gradients of their own, and keeps both."""
    buckets = {"bucket_sizes_mb": [90.46], "bucket_cap_mb": 25.0}
    run = pd.DataFrame([held(impl, world, 90.46, 90.46, 180.92, held_grad_view_mb=views, **buckets)
                        for impl, views in (("stock", 0.0), ("flat", 90.46)) for world in (1, 2)])  # fmt: skip
    state = memory.state_per_rank(run.assign(activation_mb=10.0), [8]).set_index(["impl", "world_size"])
    assert state.loc[("flat", 8), "step_buckets_mb"] == 0 and state.loc[("stock", 8), "step_buckets_mb"] == 90.46
    need = memory.need_mb(state)
    assert need.loc[("stock", 8)] == pytest.approx(361.84 + 90.46 + 90.46)
    assert need.loc[("flat", 8)] == pytest.approx(361.84 + max(10 + 90.46, 90.46))


def test_powersgd_keeps_each_buckets_error_from_step_to_step_beside_everything_else():
    """torch's PowerSGD hook keeps one tensor of each bucket's size, its compression's local error: 90.46 MiB for
    buckets of 60 + 30.46, a part of the state (in both backward's and the optimizer step's), gradients as bucket
    views or not; another hook keeps none, and a run without a bucket layout says it did not record it."""
    hooked = '{"comm_hook": "powersgd"}'
    viewed = '{"comm_hook": "powersgd", "gradient_as_bucket_view": true}'
    run = pd.DataFrame([held("stock", world, 90.46, 90.46, 180.92, impl_options=options, bucket_sizes_mb=[60, 30.46])
                        for options in ("{}", hooked, viewed) for world in (1, 2)])  # fmt: skip
    state = memory.state_per_rank(run.assign(activation_mb=10.0), [8]).query("world_size == 8")
    state = state.set_index("impl_options")
    assert state.loc["{}", "hook_state_mb"] == 0
    assert state.loc[hooked, "hook_state_mb"] == pytest.approx(90.46) == state.loc[viewed, "hook_state_mb"]
    # and, in backward, two copies of the bucket it compresses (the clone, then the new error beside the old)
    assert state.loc[hooked, "hook_copies_mb"] == 120.0 and state.loc["{}", "hook_copies_mb"] == 0
    need = memory.need_mb(state)
    optimizer_step = 180.92 * 0.5 + 90.46  # Adam's temporary, the buckets
    assert need.loc["{}"] == pytest.approx(361.84 + max(10.0 + 90.46, optimizer_step))
    # the copies come as the bucket is ready, the activations by then freed: the larger of the two, not both
    assert need.loc[hooked] == pytest.approx(361.84 + 90.46 + max(90.46 + max(10.0, 120.0), optimizer_step))
    assert need.loc[viewed] == pytest.approx(361.84 + 90.46 + max(120.0, 180.92 * 0.5))  # no buckets apart
    rows = state.reset_index().assign(strategy=lambda f: "stock" + f["impl_options"])
    assert f"PowerSGD's error feedback, kept from step to step, stock{hooked} 90.5 MiB" in activation_words(rows)
    unlaid = memory.state_per_rank(run.assign(activation_mb=10.0, bucket_sizes_mb=None), [8]).query("world_size == 8")
    assert memory.unrecorded(unlaid.assign(strategy=lambda f: "stock" + f["impl_options"])).startswith(
        "buckets for stock{}, stock" + hooked + "; the hook's state for stock" + hooked
    )


def test_a_smaller_sizes_run_is_re_counted_at_the_full_size_from_what_its_ranks_held():
    """A walkthrough's hf:llama/small run said stock 'fits (151 MiB a rank)' of a model whose full size holds 25 GiB
    of gradients: each rank's share, as measured, of the full size's bytes; its sizes and activations counted."""
    small = {"param_bytes": 100 * 2**20, "grad_bytes": 90 * 2**20, "largest_param_bytes": 10 * 2**20,
             "bucket_sizes_mb": [40.0, 50.0], "activation_mb": 3.0}  # fmt: skip
    full = {"param_bytes": 1000 * 2**20, "grad_bytes": 900 * 2**20, "largest_param_bytes": 64 * 2**20,
            "root_param_bytes": 0, "root_grad_bytes": 0, "largest_block_bytes": 0, "largest_block_grad_bytes": 0,
            "activation_mb": 30.0, "activation_top": "Linear 90%", "grad_sizes": [64 * 2**20] * 10 + [26 * 2**20] * 10,
            "grad_dtypes": ["float32"] * 20}  # fmt: skip
    rows = pd.DataFrame([held("stock", 1, 100.0, 90.0, 180.0, **small), held("stock", 2, 100.0, 90.0, 180.0, **small),
                         held("zero", 1, 100.0, 90.0, 180.0, **small), held("zero", 2, 100.0, 90.0, 90.0, **small),
                         held("stock", 2, 1.0, 1.0, 1.0, grad_bytes=None)])  # fmt: skip
    at_full = sharded.at_full_size(rows, full)
    assert len(at_full) == 4 and set(at_full["size"]) == {"full"}  # the row without its sizes is left out
    state = memory.state_per_rank(at_full, [8]).set_index(["impl", "world_size"])
    assert state.loc[("stock", 8), ["held_param_mb", "held_grad_mb", "held_optimizer_state_mb"]].tolist() == [
        pytest.approx(1000.0), pytest.approx(900.0), pytest.approx(1800.0)]  # fmt: skip
    assert state.loc[("zero", 8), "held_optimizer_state_mb"] == pytest.approx(max(1800.0 / 8, 64 * 2 * 0.9))
    assert state.loc[("stock", 8), "buckets_mb"] == pytest.approx(900.0)  # every gradient in a bucket, as at small
    assert (
        state.loc[("stock", 8), "activation_mb"] == 30.0 and state.loc[("stock", 8), "activation_top"] == "Linear 90%"
    )
    # under PowerSGD the copies are of the largest bucket: laid out by DDP's rules at the row's cap, not grown
    hooked = rows.iloc[:2].assign(impl_options='{"comm_hook": "powersgd", "bucket_cap_mb": 100}')
    state = memory.state_per_rank(sharded.at_full_size(hooked, full), [8]).set_index("world_size")
    assert state.loc[8, "hook_copies_mb"] == pytest.approx(2 * 128.0)  # two 64 MiB gradients reach the 100 MiB cap
    assert memory.mib_text(1000.0) == "1000 MiB" and memory.mib_text(999.0) == "999 MiB"


def test_zeros_optimizer_state_at_the_full_size_is_its_share_by_torchs_partition_of_the_full_models_parameters():
    """A user's GPT benched small, its tied embedding 88 % of the parameters (one rank held 49.1 of 55.4 MiB at 2),
    read 'zero 4.72 GiB' at 32 GPUs of the full model, where torch's partition of the full model's parameters gives
    3.03: the small run's split scaled by the bytes, not the full model's partition."""
    small = {"param_bytes": 100 * 2**20, "grad_bytes": 100 * 2**20, "largest_param_bytes": 88 * 2**20}
    embedding, blocks = (200 * 2**20, "float32", True, None, "wte.weight"), [(10 * 2**20, "float32", True, 0, "w")]
    frozen = (400 * 2**20, "float32", False, None, "frozen")  # partitioned, but no state to keep
    full = {"param_bytes": 1600 * 2**20, "grad_bytes": 1200 * 2**20, "largest_param_bytes": 400 * 2**20,
            "parameters": [embedding, *blocks * 100, frozen]}  # fmt: skip
    rows = pd.DataFrame(
        [
            held("zero", 1, 100.0, 100.0, 200.0, **small),
            held("zero", 2, 100.0, 100.0, 176.0, **small),
            held("stock", 1, 100.0, 100.0, 200.0, **small),
            held("stock", 2, 100.0, 100.0, 200.0, **small),
        ]
    )
    state = memory.state_per_rank(sharded.at_full_size(rows, full), [2, 32]).set_index(["impl", "world_size"])
    # at 2: the frozen 400 MiB to one rank, the embedding to the other, the blocks evened out: 800 of 1200 trained
    assert state.loc[("zero", 2), "held_optimizer_state_mb"] == pytest.approx(2400.0 * 800 / 1200)  # not 2112
    assert state.loc[("zero", 32), "held_optimizer_state_mb"] == pytest.approx(2400.0 * 200 / 1200)  # the embedding
    assert state.loc[("stock", 32), "held_optimizer_state_mb"] == pytest.approx(2400.0)  # nothing split: as was
    assert state.loc[("zero", 32), "held_param_mb"] == pytest.approx(1600.0)
    assert memory.state_per_rank(rows, [32]).set_index(["impl", "world_size"]).loc[
        ("zero", 32), "held_optimizer_state_mb"
    ] == pytest.approx(176.0)  # the run's own size: its fit, its floor
    # beside another setup not re-counted (a report's frame of several workloads: its table reads NaN there), as run
    other = RUN[RUN["impl"] == "zero"].assign(workload="mlp")
    both = memory.state_per_rank(pd.concat([sharded.at_full_size(rows, full), other]), [32])
    assert both.set_index(["workload", "impl", "world_size"]).loc[("mlp", "zero", 32), "held_optimizer_state_mb"] == (
        pytest.approx(180.92 / 32)  # its own fit
    )


def test_a_row_asking_defaults_by_name_or_an_inert_option_is_the_plain_strategy_once():
    """A sweep of gradient_as_bucket_view has a row asking False, DDP as it ships, beside plain stock: the choice
    read them as two strategies tied at one step ('stock 100 ms or stock gradient_as_bucket_view=False 100 ms')."""
    asked = [held("stock", w, 90.0, 90.0, 180.0, impl_options=o) for w in (1, 2)
             for o in ("{}", '{"gradient_as_bucket_view": false}', '{"powersgd_rank": 4}')]  # fmt: skip
    hooked = [held("stock", w, 90.0, 90.0, 180.0, impl_options='{"comm_hook": "fp16"}') for w in (1, 2)]
    state = memory.state_per_rank(pd.DataFrame(asked + hooked), [8])
    assert sorted(state.loc[state["world_size"] == 8, "impl_options"]) == ['{"comm_hook": "fp16"}', "{}"]


def test_what_one_more_sample_adds_is_said_and_fitted_only_where_counted_at_two_batches():
    """A tester's bf16 llama read '7.43 GiB a sample' at batch 2 and '6.54' at batch 8: the total over the batch, with
    the bf16 copies of its weights kept once at any batch in it; 7.43 × 8 is 59 GiB against the 52.3 counted. What
    one more sample adds (8.63 GiB at batch 1, 6.24 more a sample) is said where counted; otherwise no such figure."""
    gib = 1024.0
    run = RUN.assign(activation_mb=14.87 * gib, batch_size=2, tokens_per_batch=4096)
    state = memory.state_per_rank(run, [8]).query("world_size == 8").assign(strategy=lambda f: f["impl"])
    said = activation_words(state)
    assert "a sample" not in said and "each further sample" not in said  # the total over the batch is no such figure
    counted = memory.state_per_rank(run.assign(activation_sample_added_mb=6.24 * gib), [8])
    counted = counted.query("world_size == 8").assign(strategy=lambda f: f["impl"])
    assert "at 2 samples of 2,048 tokens a rank in fp32 (each further sample adds 6.24 GiB)" in activation_words(
        counted
    )
    # the batch that fits grows by what one more sample adds, the part kept once apart: 14.87 + 6.24 (n - 2) GiB
    stock = counted[counted["impl"] == "stock"]
    room = 79.11 * gib - memory.need_mb(stock.assign(activation_mb=0.0)).iloc[0]  # what the activations may take
    assert fits.largest_batch(stock, 79.11).iloc[0] == 2 + int((room - 14.87 * gib) // (6.24 * gib))
    assert fits.largest_batch(stock, 79.11).iloc[0] > fits.largest_batch(state[state["impl"] == "stock"], 79.11).iloc[0]


def test_what_fits_says_what_it_leaves_and_a_thin_margin_is_said_tight():
    """A tester read 'stock fits (77.4 GiB a rank at most)' in 'a GPU of 80 GiB', 1.7 GiB over buffers, the CUDA
    context and NCCL's, none of which the count holds: what is left is said, computed, and a margin under the most
    the count has read below a rank's peak (fits.COUNT_BELOW_PEAK of it) is 'tight'."""
    gib = 1024.0
    rows = pd.DataFrame({"strategy": ["stock", "fsdp"], "world_size": [16, 16], "total_mb": [20 * gib, 1.25 * gib],
                         "activation_mb": [52.3 * gib, 52.3 * gib], "batch_size": [8, 8],
                         "buckets_mb": [5.01 * gib, 0.0], "optimizer_temp_mb": [5.01 * gib, 0.08 * gib]})  # fmt: skip
    need = memory.need_mb(rows)
    stock, fsdp = (fits.fit_phrase(rows[rows["strategy"] == s], 79.11) for s in ("stock", "fsdp"))
    left = 79.11 * gib - need.iloc[0]
    assert left < fits.COUNT_BELOW_PEAK * need.iloc[0]  # 1.8 GiB against 6.2: tight
    assert stock == (f"fits, tight ({need.iloc[0] / gib:.3g} of 79.11 GiB a rank at most: {memory.mib_text(left)} "
                     "left for buffers, the CUDA context and NCCL's)")  # fmt: skip
    assert fsdp.startswith(f"fits ({need.iloc[1] / gib:.3g} of 79.11 GiB a rank at most: ")  # 20 GiB left: not tight
    terse = fits.fit_phrase(rows[rows["strategy"] == "stock"], 79.11, terse=True)  # the console's rows: the need
    assert terse == f"tight, {memory.mib_text(left)}"  # under a header that says it fits the GPU's memory
    assert fits.room_words(80 * gib, 79.11).startswith("does not fit (80 GiB a rank")


def _mlp_full(**extra) -> pd.DataFrame:
    """mlp/full (16 weights of 4096 × 4096, 1 GiB) at batch 8 in fp32, as predict re-counts a tiny run's rows."""
    return pd.DataFrame([held(impl, world, 1024.0, 1024.0, 0.0, workload="mlp", size="full", batch_size=8,
                              optimizer="sgd", **extra) for impl in ("stock", "zero") for world in (1, 2)])  # fmt: skip


def test_bf16s_weight_copies_kept_once_are_said_apart_and_a_sample_compared_with_fp32s_sample():
    """A tiny mlp run on dgx-h100 read 'in bf16 (autocast) 481 MiB at 8 samples a rank (226.38×; …)' beside fp32's
    2.13 MiB: both the full size's at batch 8, but 480 MiB of bf16's are the copies of 15 of its 16 weights of 32 MiB
    autocast keeps for backward (the first layer's input needs no gradient: its copy is not kept), once at any
    batch; what a sample adds is 0.50× fp32's. The ratio of the totals said none of that."""
    rows = _mlp_full(activation_mb=2.1254)
    note = trained_dtype.dtype_note({"dtype": "fp32"}, rows, "mlp", {}, terse=True)
    said = re.search(r"in bf16 \(autocast\) ([\d.]+) MiB at 8 samples a rank, ([\d.]+) MiB of it the weights' bf16 "
                     r"copies, kept once \(each further sample ([\d.]+) MiB, ([\d.]+)× fp32's\)", note)  # fmt: skip
    assert said, note
    total, once, added, ratio = (float(x) for x in said.groups())
    assert once == pytest.approx(15 * 32, rel=0.01) and total == pytest.approx(once + 8 * added, rel=0.01)
    assert ratio == pytest.approx(0.5, abs=0.02) and added == pytest.approx(0.5 * 2.1254 / 8, rel=0.05)
    page = trained_dtype.dtype_note({"dtype": "fp32"}, rows, "mlp", {})  # the page's: fp32's figures beside
    assert f"against fp32's 2.13 MiB: {memory.mib_text(once)} kept once at any batch" in page
    assert f"each further sample adds {added:.3g} MiB ({ratio:.2f}× fp32's 0.266 MiB)" in page


def test_a_cpu_runs_fp32_activations_are_counted_again_in_the_dtype_its_gpu_trains_in(tmp_path):
    """A walkthrough's 7B model read 'zero does not fit' at 143 of 140.4 GiB from a CPU run's fp32 activations;
    benched in bf16, as --dtype auto trains on its H200s, zero fit at 134 GiB and was the pick. Where a CPU run left
    --dtype auto and the cluster's GPU trains in bf16, the activations are counted again so on the meta device (at the
    rows' batch and one more) and the fit judged on them; the state stays as held (autocast keeps it fp32)."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"device": "cpu", "config": {"dtype": "auto"}}))
    h100 = types.SimpleNamespace(name="dgx-h100", description="DGX H100: 8× H100 SXM5")
    v100 = types.SimpleNamespace(name="dgx1-v100", description="DGX-1: 8× V100 SXM2")
    setup, configs = {"dtype": "fp32"}, pd.DataFrame({"device": ["cpu"]})
    assert trained_dtype.gpu_dtype(run, configs, setup, h100) == "bf16"
    assert trained_dtype.gpu_dtype(run, configs, setup, v100) == ""  # no bf16 peak: auto trains in fp32 there too
    assert trained_dtype.gpu_dtype(run, configs, setup, None) == ""  # no GPU, no fit to judge
    assert trained_dtype.gpu_dtype(run, configs.assign(device="cuda"), setup, h100) == ""  # a GPU run's own dtype
    (run / "run.json").write_text(json.dumps({"device": "cpu", "config": {"dtype": "fp32"}}))
    assert trained_dtype.gpu_dtype(run, configs, setup, h100) == ""  # fp32 asked for: judged so
    rows = _mlp_full(activation_mb=2.1254, activation_top="ReLU 94%", activation_sample_added_mb=0.2657)
    judged, note = trained_dtype.judged_in(rows, setup, "mlp", {}, "bf16", h100, terse=True)
    assert note == ("what fits judged in bf16 (autocast), --dtype auto's on dgx-h100's GPU: activations counted so "
                    "(in fp32, the run's dtype, at the size and batch predicted: 2.13 MiB), the state as held "
                    "(autocast keeps it fp32)")  # fmt: skip
    added = judged["activation_sample_added_mb"]
    assert (judged["activation_dtype"] == "bf16").all() and added.to_numpy() == pytest.approx(0.2657 / 2, rel=0.05)
    assert (judged["activation_mb"] - 8 * added).to_numpy() == pytest.approx(15 * 32, rel=0.01)  # its weights' copies
    assert judged[memory.HELD.keys()].equals(rows[memory.HELD.keys()])  # the state as the run held it
    state = memory.state_per_rank(judged, [8]).query("world_size == 8").assign(strategy=lambda f: f["impl"])
    assert "481 MiB of activations for backward at 8 samples a rank in bf16 (each further sample adds 0.133 MiB; " \
           "480 MiB kept once at any batch: the weights' bf16 copies" in activation_words(state)  # fmt: skip
    assert memory.need_mb(state).min() == pytest.approx(2048 + state["activation_mb"].iloc[0])  # the fit's, in bf16
    fp32 = memory.state_per_rank(rows, [8]).query("world_size == 8")
    assert choice_table.judged_dtype(state) == "bf16" and choice_table.judged_dtype(fp32) == "fp32"
    kept, said = trained_dtype.judged_in(rows, setup, "mlp", {}, "", h100, terse=True)  # the GPU trains in fp32
    assert kept is rows and said.startswith("activations in fp32, the run's dtype; in bf16 (autocast) 481 MiB")


def test_a_gpu_without_bf16_gets_fp16s_figures_and_a_bf16_run_is_judged_in_fp16_there(tmp_path):
    """dgx1-v100 read 'in bf16 (autocast) … bench --dtype bf16 to count them so' under its memory table, and judged a
    bf16 run's fit in bf16: a V100 has no bf16, --dtype auto trains in fp32 there and its autocast is fp16, with a
    grad scaler. On it the fp32 run's note counts fp16 and says why; a bf16 run is judged in fp16 (the same bytes),
    said; dgx-h100 keeps bf16's words."""
    from harness.perfmodel.clusters import cluster

    v100, h100 = cluster.load("dgx1-v100"), cluster.load("dgx-h100")
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"device": "cpu", "config": {"dtype": "auto"}}))
    cpu = pd.DataFrame({"device": ["cpu"]})
    assert trained_dtype.gpu_dtype(run, cpu, {"dtype": "fp32"}, v100) == ""  # auto: fp32 there, the run's
    rows = _mlp_full(activation_mb=2.1254)
    kept, note = trained_dtype.judged_in(rows, {"dtype": "fp32"}, "mlp", {}, "", v100, terse=True)
    assert kept is rows and note.startswith(
        "activations in fp32, the run's dtype and --dtype auto's on dgx1-v100's GPU, which has no bf16; in fp16 "
        "(autocast, with a grad scaler) 481 MiB at 8 samples a rank, 480 MiB of it the weights' fp16 copies"
    ), note
    assert note.endswith("bench --dtype fp16 to count them so") and "bf16 (" not in note
    # its fit judged in fp32 (auto's there): the rows carry the V100's half precision to the choice's hint
    state = memory.state_per_rank(rows.assign(gpu_half_dtype="fp16"), [8])
    assert choice_table.judged_dtype(state) == "fp32" and choice_table.half_dtype(state) == "fp16"
    page = trained_dtype.dtype_note({"dtype": "fp32"}, rows, "mlp", {}, gpu=v100)
    assert "trained in fp16 (autocast, with a grad scaler) the same forward keeps 481 MiB" in page
    assert "bf16 (" not in page and "--dtype bf16" not in page
    h100_note = trained_dtype.dtype_note({"dtype": "fp32"}, rows, "mlp", {}, terse=True, gpu=h100)
    assert h100_note.startswith("activations in fp32, the run's dtype; in bf16 (autocast) 481 MiB") and (
        "fp16" not in h100_note
    )
    (run / "run.json").write_text(json.dumps({"device": "cpu", "config": {"dtype": "bf16"}}))
    bf16 = {"dtype": "bf16"}
    assert trained_dtype.gpu_dtype(run, cpu, bf16, v100) == "fp16"
    assert trained_dtype.gpu_dtype(run, cpu, bf16, h100) == ""  # the run's own
    halves = _mlp_full(activation_mb=481.14, dtype="bf16")
    judged, said = trained_dtype.judged_in(halves, bf16, "mlp", {}, "fp16", v100, terse=True)
    assert (judged["activation_dtype"] == "fp16").all() and judged["activation_mb"].to_numpy() == pytest.approx(
        481.14, rel=0.01)  # fmt: skip
    assert said == ("what fits judged in fp16 (autocast, with a grad scaler): dgx1-v100's GPU has no bf16, the run's "
                    "dtype; activations counted so (in bf16, the run's dtype, at the size and batch predicted: "
                    "481 MiB)")  # fmt: skip


def test_a_knob_sweeps_variants_split_across_memory_rows_are_named_by_the_option_that_splits_them():
    """An engineer's sweep of comm_hook × gradient_as_bucket_view split into two memory rows (views keep no bucket
    copy), each named by its four variants spelt in full: a 210-character label column. A row that holds every
    variant sharing an option's value is that option's, counted; one holding every variant is 'stock ×4'."""
    from harness.commands.console.predict import memory as console_memory
    from harness.commands.console.predictions import labelled

    asked = [json.dumps({"comm_hook": hook, "gradient_as_bucket_view": view}, sort_keys=True)
             for hook in ("none", "fp16") for view in (False, True)]  # fmt: skip
    state = labelled(pd.DataFrame({"impl": "stock", "impl_options": asked}))
    plain = [n for n in state["strategy"] if "view" not in n]
    views = [n for n in state["strategy"] if "view" in n]
    assert plain == ["stock", "stock comm_hook=fp16"]
    assert console_memory._named(plain, state) == "stock gradient_as_bucket_view=False ×2"
    assert console_memory._named(views, state) == "stock gradient_as_bucket_view=True ×2"
    assert console_memory._named(plain + views, state) == "stock ×4"
    assert console_memory._named(plain[:1] + views[:1], state) == "stock comm_hook=none ×2"
    assert (
        console_memory._named(plain[:1] + views[1:], state)
        == "stock, stock comm_hook=fp16 gradient_as_bucket_view=True"
    )
    assert console_memory._variants([plain, views], state) == [
        "stock gradient_as_bucket_view=False ×2: stock, stock comm_hook=fp16; stock gradient_as_bucket_view=True ×2: "
        "stock gradient_as_bucket_view=True, stock comm_hook=fp16 gradient_as_bucket_view=True"
    ]


def test_a_miss_within_the_counts_error_is_said_narrow_and_a_need_alike_at_every_count_names_none():
    """A 1.3B Llama's stock read 'does not fit (39.9 GiB a rank at the least; at batch 1 a rank or fewer it would, at
    w8)' against 39.39 GiB: 1.3 % over, within the 7 % the count has read above a measured peak, and the same need at
    every GPU count, so neither 'at the least' nor 'at w8' bounded anything."""
    rows = pd.DataFrame({"strategy": ["stock"] * 2, "world_size": [8, 32], "total_mb": [20 * 1024.0] * 2,
                         "activation_mb": [14.9 * 1024] * 2, "activation_sample_added_mb": [6.24 * 1024] * 2,
                         "batch_size": [2] * 2, "buckets_mb": [5.01 * 1024] * 2,
                         "held_grad_mb": [5.01 * 1024] * 2})  # fmt: skip
    need = memory.need_mb(rows).iloc[0] / 1024
    assert 39.39 < need < 39.39 * 1.07
    assert memory_words.fit_words(rows, 39.39) == (
        f"stock does not fit, narrowly ({need:.3g} GiB a rank, {need / 39.39 - 1:.1%} over 39.39 GiB: within the "
        "count's error, a GPU run decides; at batch 1 a rank or fewer it would)"
    )
    assert memory_words.fit_words(rows, 30) == f"stock does not fit ({need:.3g} GiB a rank)"  # far over: no 'narrowly'
    light = rows.assign(held_grad_mb=10 * 1024.0)  # gradients outweigh half the activations: the count was the peak
    assert memory_words.fit_words(light, 39.39).startswith(f"stock does not fit ({need:.3g} GiB a rank; at batch 1")


def test_a_strategys_declared_sync_temporaries_are_counted_at_its_peak(monkeypatch):
    """A walkthrough's own strategy, rsag (every gradient copied into a new flat buffer, reduce-scattered, then
    all-gathered into another), was counted 2.47 GiB at the full size against stock's 3.47: its copies were
    invisible, its state and layout alike. Declared (`sync_temporaries`, a multiple of the gradients), they are
    counted beside the activations, from the registry for a run that predates the role, from its rows otherwise;
    a strategy declaring none is counted as before (benchmarks/memory_model.py: rsag's heap peak 240.64 MiB on
    mlp/small, 160.35 counted without the declaration, 225.62 with 3.0)."""
    import impls
    from harness.protocols import StrategyDefaults

    impls.names()
    monkeypatch.setattr(impls.REGISTRY, "_entries", dict(impls.REGISTRY._entries))  # forgotten after the test

    @dataclasses.dataclass(kw_only=True)
    class Rsag(StrategyDefaults):
        gradient_traffic: ClassVar[str] = "allreduce"
        sync_temporaries: ClassVar[float] = 3.0  # the flat copy, the gathered buffer, the new .grad beside the old

        def wrap(self, model):
            return model

        def sync_gradients(self):
            pass

    impls.register("rsag", description="a flat buffer reduce-scattered then all-gathered (a test's)")(Rsag)
    run = pd.DataFrame(
        [held(impl, world, 90.0, 90.0, 180.0) for impl in ("stock", "rsag", "naive") for world in (1, 2)]
    )
    state = memory.state_per_rank(run.assign(activation_mb=10.0), [8]).query("world_size == 8").set_index("impl")
    assert state.loc["rsag", "sync_temp_mb"] == pytest.approx(270.0) and state.loc["naive", "sync_temp_mb"] == 0
    need = memory.need_mb(state)
    assert (
        need.loc["rsag"] == pytest.approx(360.0 + max(10.0 + 270.0, 90.0)) and need.loc["naive"] == 360.0 + 90.0
    )  # Adam's temporary
    # the overflow's sum names them, so that its parts add up to the need
    labelled = state.reset_index().assign(strategy=lambda frame: frame["impl"])
    assert "rsag 640 MiB = 360 MiB of model state + 10 MiB of activations + 270 MiB of its sync's declared " \
        "temporaries" in choice_table.overflow_words(labelled, ["rsag"])  # fmt: skip
    # a run's rows record the role: a strategy not registered here is counted as its rows say
    gone = run[run["impl"] == "naive"].assign(impl="gone", sync_temporaries=2.0, activation_mb=10.0)
    assert memory.state_per_rank(gone, [8])["sync_temp_mb"].tolist() == pytest.approx([180.0] * 3)
    assert "the temporary buffers a strategy's sync allocates" in memory_words.activation_words(
        memory.state_per_rank(run.assign(activation_mb=10.0), [8])
        .query("world_size == 8")
        .assign(strategy=lambda f: f["impl"])
    )

"""Each section's one-sentence takeaway names what the run measured, and nothing it did not."""

from __future__ import annotations

import pandas as pd
import pytest

from reports.pages.run import takeaways


def configs(rows: list[dict]) -> pd.DataFrame:
    base = {"workload": "mlp", "status": "ok", "impl_options": "{}", "repeat": 0}
    return pd.DataFrame([{**base, "config_id": f"c{i}", **row} for i, row in enumerate(rows)])


# Scaling comes from samples_per_s (scaling.pooled_scaling over each strategy's one-rank row), never from
# the rows' own scaling_efficiency: those are set to figures the sentence must not repeat.
RUN = configs([
    {"impl": "local", "world_size": 2, "step_ms_median": 40.0, "comm_ms": 0.0, "exposed_comm_ms": 0.0,
     "samples_per_s": 190.0, "scaling_efficiency": 0.11, "mem_peak_rss_mb": 500.0},
    {"impl": "stock", "world_size": 2, "step_ms_median": 120.0, "comm_ms": 90.0, "exposed_comm_ms": 57.6,
     "samples_per_s": 66.0, "scaling_efficiency": 0.11, "mem_peak_rss_mb": 900.0},
    {"impl": "bucketed", "world_size": 2, "step_ms_median": 100.0, "comm_ms": 76.4, "exposed_comm_ms": 44.312,
     "samples_per_s": 80.0, "scaling_efficiency": 0.11, "mem_peak_rss_mb": 800.0},
    {"impl": "naive", "world_size": 2, "step_ms_median": 170.0, "comm_ms": 79.0, "exposed_comm_ms": 79.0,
     "samples_per_s": 46.0, "scaling_efficiency": 0.11, "mem_peak_rss_mb": 700.0},
    {"impl": "stock", "world_size": 1, "step_ms_median": 50.0, "comm_ms": 1.0, "exposed_comm_ms": 0.5,
     "samples_per_s": 100.0, "scaling_efficiency": 1.0, "mem_peak_rss_mb": 400.0},
    {"impl": "bucketed", "world_size": 1, "step_ms_median": 50.0, "samples_per_s": 100.0},
    {"impl": "naive", "world_size": 1, "step_ms_median": 50.0, "samples_per_s": 100.0},
])  # fmt: skip


def test_the_fastest_strategy_at_the_largest_world_size_against_stock_and_the_slowest():
    """One repeat a side decides nothing: the last one 'trails so far', as the first one 'leads' (a page said 'stock
    is slowest, at 1.29× bucketed's step' where that ratio's interval was 0.52–1.14)."""
    assert takeaways.fastest(RUN.replace({"impl": {"bucketed": "zero"}}), workload="mlp") == (
        "At 2 ranks zero leads (100.0 ms); too few repeats to tell it from stock, the next: so far 0.83× stock's "
        "step (1.20× faster; --repeats 2 or more; have 1, need about 3, a rough guide from 1 repeat); naive trails so "
        "far, at 1.70× zero's step."
    )
    # bucketed, not a strategy to deploy, is no answer (as the headline): the fastest to deploy is, said why
    assert takeaways.fastest(RUN, workload="mlp") == (
        "At 2 ranks stock leads (120.0 ms); too few repeats to tell it from naive, the next: so far 0.71× naive's step "
        "(1.42× faster; --repeats 2 or more; have 1, need about 2, a rough guide from 1 repeat); bucketed ran faster "
        "but is not a strategy to deploy."
    )


def test_communication_names_the_share_hidden_and_who_hides_none():
    assert takeaways.communication(RUN, workload="mlp") == (
        "At 2 ranks bucketed hides 42% of its communication (76.4 ms per step, mean); stock hides 36% of its "
        "communication (90.0 ms per step, mean); naive hides none (by design: it communicates after backward)."
    )


def test_communication_says_the_bytes_a_step_sent_where_timed():
    sent = RUN.assign(comm_bytes=[8481792.0 if impl == "stock" else None for impl in RUN["impl"]])
    assert "stock hides 36% of its communication (90.0 ms per step, mean; 8.09 MiB of messages)" in (
        takeaways.communication(sent, workload="mlp")
    )


def test_scaling_and_memory_rank_the_strategies():
    assert takeaways.scaling(RUN, workload="mlp") == (
        "At 2 ranks, share of linear scaling kept against each one's own one-rank step: bucketed 40%, stock 33%, "
        "naive 23%."
    )
    # With one plain process at one rank, ranked against it (as the step times order), each one's own after it:
    # stock's one-rank step pays DDP's own cost, so its own figure flatters it against naive's.
    plain = pd.concat([RUN.assign(samples_per_s=RUN["samples_per_s"].where(
        ~((RUN["impl"] == "stock") & (RUN["world_size"] == 1)), 80.0)),
        configs([{"impl": "local", "world_size": 1, "step_ms_median": 40.0, "samples_per_s": 125.0}])],
        ignore_index=True)  # fmt: skip
    assert takeaways.scaling(plain, workload="mlp") == (
        "At 2 ranks, share of linear scaling kept against local at one rank: bucketed 32%, stock 26%, naive 18% "
        "(against their own one-rank step: stock 41%, bucketed 40%, naive 23%); local itself, which communicates "
        "nothing, keeps 76%: what this machine leaves any strategy."
    )  # (a walkthrough read stock's figure as DDP's cost where local's own was as low: the cores were shared)
    # A strategy without a one-rank row of its own is still ranked against local, its own figure unsaid.
    no_own = plain[~((plain["impl"] == "naive") & (plain["world_size"] == 1))]
    assert takeaways.scaling(no_own, workload="mlp") == (
        "At 2 ranks, share of linear scaling kept against local at one rank: bucketed 32%, stock 26%, naive 18% "
        "(against their own one-rank step: stock 41%, bucketed 40%); local itself, which communicates nothing, "
        "keeps 76%: what this machine leaves any strategy."
    )
    assert takeaways.memory(RUN, workload="mlp") == (
        "At 2 ranks the largest peak process memory (RSS) is stock's (900 MiB), the smallest local's (500 MiB)."
    )


def test_the_state_says_whose_gradients_are_views_into_their_buckets():
    """Section 5 gave 32.4 MiB a rank for every knob of a sweep; gradient_as_bucket_view's 16.2 MiB saved, in the
    configs' held_grad_view_mb, went unsaid while predict showed it."""
    knobs = [("{}", 0.0), ('{"gradient_as_bucket_view": true}', 16.18)]
    rows = configs([{"impl": "stock", "world_size": 2, "step_ms_median": 10.0 + i, "mem_peak_rss_mb": 900.0,
                     "impl_options": options, "held_param_mb": 16.18, "held_grad_mb": 16.18,
                     "held_optimizer_state_mb": 0.0, "held_grad_view_mb": view, "device": "cpu"}
                    for i, (options, view) in enumerate(knobs)])  # fmt: skip
    said = takeaways.memory(rows, workload="mlp")
    assert ("stock gradient_as_bucket_view=True's gradients (16.2 MiB) are views into its buckets, where stock keeps "
            "its gradients and a bucket copy of them") in said, said  # fmt: skip
    assert "views" not in takeaways.memory(rows.assign(held_grad_view_mb=0.0), workload="mlp")
    hooks = pd.concat([rows, rows.assign(impl_options=rows["impl_options"].str.replace("{", '{"comm_hook": "fp16", ')
                                         .str.replace(", }", "}"), config_id=rows["config_id"] + "h")])  # fmt: skip
    swept = takeaways.memory(hooks, workload="mlp")  # a sweep's configurations named by the knob, not one by one
    assert ("; with gradient_as_bucket_view=True (2 of them) the gradients (16.2 MiB) are views into DDP's buckets, "
            "where the other 2 keep a bucket copy beside theirs") in swept, swept  # fmt: skip


def test_what_gradient_as_bucket_view_saves_is_said_as_the_buckets_the_copies_kept():
    """A walkthrough read '64.1 MiB' a rank for stock and for gradient_as_bucket_view alike, the saving left to
    infer: the bucket copy's size, in the rows' bucket_sizes_mb (4.04 + 28.03 MiB), is what the views save."""
    knobs = [("{}", 0.0), ('{"gradient_as_bucket_view": true}', 32.07)]
    rows = configs([{"impl": "stock", "world_size": 2, "step_ms_median": 10.0 + i, "mem_peak_rss_mb": 600.0,
                     "impl_options": options, "held_param_mb": 32.07, "held_grad_mb": 32.07, "keeps_buckets": True,
                     "held_optimizer_state_mb": 0.0, "held_grad_view_mb": view, "device": "cpu",
                     "bucket_sizes_mb": [4.043007, 28.027344]} for i, (options, view) in enumerate(knobs)])  # fmt: skip
    said = takeaways.memory(rows, workload="mlp")
    assert ("where stock keeps its gradients and a bucket copy of them (32.1 MiB of buckets a rank: what the views "
            "save)") in said, said  # fmt: skip
    unrecorded = takeaways.memory(rows.assign(bucket_sizes_mb=None), workload="mlp")
    assert "a bucket copy of them (on a GPU" in unrecorded and "what the views save" not in unrecorded, unrecorded


def test_without_a_gpu_memory_ranks_the_model_state_each_rank_holds_not_the_processes_rss():
    """A walkthrough read 'the largest peak process memory (RSS) is fsdp's' on a CPU run where fsdp held half of
    stock's parameters, gradients and Adam state: RSS is mostly the interpreter and torch."""
    held = {"local": (90.0, 90.0, 180.0), "stock": (90.0, 90.0, 180.0), "bucketed": (90.0, 90.0, 180.0),
            "naive": (45.0, 45.0, 90.0)}  # fmt: skip
    sharded = RUN.assign(
        held_param_mb=RUN["impl"].map(lambda impl: held[impl][0]),
        held_grad_mb=RUN["impl"].map(lambda impl: held[impl][1]),
        held_optimizer_state_mb=RUN["impl"].map(lambda impl: held[impl][2]),
        mem_peak_rss_mb=RUN["mem_peak_rss_mb"].where(RUN["impl"] != "naive", 1200.0),
        device="cpu",
    )
    assert takeaways.memory(sharded, workload="mlp") == (
        "At 2 ranks each rank holds in parameters, gradients and optimizer state: naive 180 MiB, bucketed 360 MiB, "
        "stock 360 MiB, local 360 MiB (on a GPU add activations, buckets and gathered parameters: a GPU run "
        "measures them). Each process's peak RSS here (500 MiB–1.17 GiB) is mostly the interpreter and torch, no "
        "ranking of the strategies."
    )
    counted = takeaways.memory(sharded.assign(activation_mb=12.4), workload="mlp")
    assert (
        "stock 360 MiB, local 360 MiB; the model's forward keeps 12.4 MiB of activations for backward a rank (every "
        "strategy alike; on a GPU add buckets and gathered parameters: a GPU run measures them). Each"
    ) in counted
    # A tiny model's state in three digits: whole MiB said fsdp and zero held '0 MiB' beside stock's '1 MiB'.
    tiny = sharded.assign(
        held_param_mb=sharded["held_param_mb"] / 700,
        held_grad_mb=sharded["held_grad_mb"] / 700,
        held_optimizer_state_mb=sharded["held_optimizer_state_mb"] / 700,
        activation_mb=0.4,
    )
    assert ("naive 0.257 MiB, bucketed 0.514 MiB, stock 0.514 MiB, local 0.514 MiB; the model's forward keeps "
            "0.4 MiB of activations") in takeaways.memory(tiny, workload="mlp")  # fmt: skip
    gpu = sharded.assign(mem_peak_nvml_mb=sharded["mem_peak_rss_mb"])  # a GPU's peak is ranked as measured
    assert "the largest peak GPU memory (NVML) is naive's" in takeaways.memory(gpu, workload="mlp")
    assert "(500 MiB). The largest is 1% of the GPU's 140.39 GiB." in takeaways.memory(gpu, workload="mlp",
                                                                                       gpu_mb=143_760.0)  # fmt: skip
    no_nvml = sharded.assign(device="cuda")  # a GPU run without NVML: its RSS, as measured, not the CPU's words
    assert "the largest peak process memory (RSS) is naive's" in takeaways.memory(no_nvml, workload="mlp")


@pytest.mark.parametrize("say", [takeaways.fastest, takeaways.scaling, takeaways.communication, takeaways.memory])
def test_nothing_is_said_about_what_the_run_did_not_measure(say):
    unmeasured = RUN.assign(comm_ms=None, exposed_comm_ms=None, samples_per_s=None, mem_peak_rss_mb=None,
                            step_ms_median=None)  # fmt: skip
    assert say(unmeasured, workload="mlp") == ""
    assert say(RUN, workload="gpt2") == ""


def test_against_stock_means_stock_as_shipped_not_another_stock_row():
    small_cap = {"impl": "stock", "world_size": 2, "step_ms_median": 110.0, "impl_options": '{"bucket_cap_mb": 1.0}'}
    swept = pd.concat([RUN.replace({"impl": {"bucketed": "zero"}}), configs([small_cap]).assign(config_id="extra")])
    said = takeaways.fastest(swept, workload="mlp")
    assert (
        "too few repeats to tell it from stock: so far 0.83× stock's step (1.20× faster; --repeats 2 or more; have 1, "
        "need about" in said
    )  # 100 / 120
    assert (
        "from stock bucket_cap_mb=1, the next: so far 0.91× the step of stock bucket_cap_mb=1 (1.10× faster; " in said
    )


def test_the_memory_frontier_caption_says_where_sharding_shows():
    """A fixed 'the sharded strategies trade communication for memory' sat under a CPU's RSS chart where fsdp
    peaked highest: its saving shows in a GPU's peak and in the held tensors, not in a process's RSS."""
    from reports.pages.run import run_sections

    ran = configs([{"impl": "stock", "world_size": 2}, {"impl": "fsdp", "world_size": 2}])
    on_cpu = run_sections.frontier_caption(ran, "mem_peak_rss_mb")
    assert "The sharded strategies (fsdp) hold less model state per rank" in on_cpu and "trade" not in on_cpu
    assert "(fsdp) trade communication for memory" in run_sections.frontier_caption(ran, "mem_peak_nvml_mb")
    assert "sharded" not in run_sections.frontier_caption(ran[ran["impl"] == "stock"], "mem_peak_nvml_mb")


def test_one_gpus_memory_is_the_runs_recorded_one_and_none_on_a_cpu():
    from reports.pages import alerts

    gpus = [{"index": 0, "memory_mb": 143_771.0}, {"index": 1, "memory_mb": 143_760.0}]
    assert alerts.gpu_memory_mb({"device": "cuda", "environment": {"gpus": gpus}}) == 143_760.0
    assert alerts.gpu_memory_mb({"device": "cpu", "environment": {"gpus": gpus}}) is None  # a CPU run beside a GPU
    assert alerts.gpu_memory_mb({"device": "cuda", "environment": {}}) is None


def test_a_smaller_size_than_the_full_says_its_memory_is_that_sizes_and_what_counts_the_full():
    meta = {"run_id": "r1", "workloads": {"mlp": {"kind": "registered"}}}
    small = RUN.assign(size="small")
    assert takeaways.full_size_pointer(meta, small, "mlp") == (
        " These are the small size's: 'ddpbench predict --run r1 --cluster NAME' counts the memory of the full size, "
        "the one you will train, on the meta device."
    )
    assert takeaways.full_size_pointer(meta, RUN.assign(size="full"), "mlp") == ""
    yours = {"run_id": "r1", "workloads": {"mlp": {"kind": "file"}}}  # a file of yours is built as written
    assert takeaways.full_size_pointer(yours, small, "mlp") == ""
    # `bench --gpus 2 --largest-only`: predict fits a rank's share from two world sizes, so it counts none here
    largest_only = {**meta, "config": {"ladder": False}}
    assert takeaways.full_size_pointer(largest_only, small[small["world_size"] == 2], "mlp").endswith(
        "on the meta device, once a run has measured two world sizes: this one measured 2 ranks alone (bench without "
        "--largest-only)."
    )


def test_the_full_size_of_an_hf_model_type_is_said_to_be_transformers_default_not_the_model_you_will_train():
    """A run of hf:llama at --size tiny read 'the full size, the one you will train' on its run page and
    'hf:llama/full to train' on its what-if page: the zoo's full of hf:MODEL_TYPE is transformers' default
    configuration of that type (AutoConfig.for_model: llama's 7B), no model of the reader's; a configuration file
    of theirs is theirs, as written."""
    import pandas as pd

    from reports.pages.whatif import full_size

    zoo = {"kind": "hf", "spec": "hf:llama", "path": None, "options": {}}
    meta = {"run_id": "r1", "workloads": {"hf:llama": zoo, "hf:cfg/config.json": {**zoo, "path": "/x/config.json"},
                                          "hf:llama[num_hidden_layers=4]": {**zoo, "options": {"num_hidden_layers": 4}},
                                          "mlp": {"kind": "registered"}}}  # fmt: skip
    default = "transformers' default llama configuration"
    assert full_size.default_configuration(meta, "hf:llama") == default
    assert (
        full_size.default_configuration(meta, "hf:llama[num_hidden_layers=4]") == default + " with num_hidden_layers=4"
    )
    assert full_size.default_configuration(meta, "hf:cfg/config.json") == ""  # the user's file, as written
    assert full_size.default_configuration(meta, "mlp") == ""
    small = RUN.assign(size="tiny", workload="hf:llama")
    assert takeaways.full_size_pointer(meta, small, "hf:llama") == (
        " These are the tiny size's: 'ddpbench predict --run r1 --cluster NAME' counts the memory of the full size "
        f"({default}, not a model of yours: --train-wopt KEY=VALUE, or hf:your/config.json, counts yours), on the "
        "meta device."
    )
    group = pd.DataFrame({"setup_workload": ["hf:llama"], "full_size_mb": [25_705.0]})
    heading = full_size.heading("hf:llama/tiny, batch 2 per GPU", group, "", default)
    assert heading == f"<h2>hf:llama/full, {default} (profiled: hf:llama/tiny, batch 2 per GPU)</h2>".replace(
        "'", "&#x27;"
    )
    assert "to train" not in heading
    mine = full_size.heading("hf:cfg/config.json/tiny", group.assign(setup_workload="hf:cfg/config.json"), "")
    assert "hf:cfg/config.json/full to train" in mine  # a configuration of yours is the model to train


def test_a_what_if_heading_shortens_a_long_path_not_its_words_and_puts_the_batch_with_the_model_to_train():
    """A config file's long path took a heading's 160 characters and cut its words ('… (the run measure…'), and
    --batch-size's batch read as the profiled run's."""
    from reports.pages.whatif import full_size

    path = "hf:/home/someone/models/" + "very-long-folder-name/" * 6 + "config.json"
    group = pd.DataFrame({"setup_workload": [path], "full_size_mb": [2000.0], "size": ["small"],
                          "setup_batch_size": [1], "step_batch": [8]})  # fmt: skip
    heading = full_size.heading(f"{path}/small, batch 8 per GPU (the run measured 1)", group, "seq_len=2048")
    assert heading.endswith(
        " with seq_len=2048 to train, batch 8 per GPU (profiled: " + heading.split("(profiled: ")[1]
    )
    assert "/small, batch 1 per GPU)</h2>" in heading and "the run measure" not in heading
    # --train-wopt's rows say 'benched' (their memory is another model's): the run's size, as its tables say it
    trained = full_size.heading(f"{path}/small, batch 1", group.assign(size="benched", run_size="small"), "seq_len=2")
    assert "/small, batch 1 per GPU)</h2>" in trained and "/benched" not in trained
    assert heading.count('title="' + path + '"') == 2  # the path whole in each tooltip, shortened in sight
    same = full_size.heading(f"{path}/small, batch 1 per GPU", group.assign(step_batch=1), "")
    assert "</span>/full to train (profiled: " in same and ", batch 1 per GPU)</h2>" in same


def test_scaling_says_what_the_shared_cores_allow_and_a_floor_below_the_strategies_is_no_bound():
    """A page said 'local itself … keeps 21%: what this machine leaves any strategy' beside stock's 28 %, and no more
    of 4 ranks on 2 cores, which keep 50 % at most: a reader took 28 % for the model's scaling."""
    slow_floor = configs([
        {"impl": "local", "world_size": 1, "step_ms_median": 40.0, "samples_per_s": 100.0},
        {"impl": "local", "world_size": 4, "step_ms_median": 200.0, "samples_per_s": 84.0},
        {"impl": "stock", "world_size": 1, "step_ms_median": 45.0, "samples_per_s": 90.0},
        {"impl": "stock", "world_size": 4, "step_ms_median": 150.0, "samples_per_s": 112.0},
        {"impl": "bucketed", "world_size": 1, "step_ms_median": 45.0, "samples_per_s": 90.0},
        {"impl": "bucketed", "world_size": 4, "step_ms_median": 160.0, "samples_per_s": 104.0},
    ])  # fmt: skip
    meta = {"device": "cpu", "threads_per_rank": 1, "environment": {"cpu_count": 2}}
    assert takeaways.scaling(slow_floor, workload="mlp", meta=meta) == (
        "At 4 ranks, share of linear scaling kept against local at one rank: stock 28%, bucketed 26% (against their "
        "own one-rank step: stock 31%, bucketed 29%); 4 ranks × 1 thread on 2 cores keep at most 50% here, whatever "
        "the strategy; local itself, which communicates nothing, keeps 21%, less than stock and bucketed: its own "
        "step is a measurement, no bound on theirs (the answer's 'Below the floor' note)."
    )
    # Four cores for four ranks bound nothing; a GPU run's cores none either.
    roomy = {**meta, "environment": {"cpu_count": 4}}
    assert "at most" not in takeaways.scaling(slow_floor, workload="mlp", meta=roomy)
    assert "at most" not in takeaways.scaling(slow_floor, workload="mlp", meta={**meta, "device": "cuda"})


def test_the_scaling_section_points_to_where_a_cluster_scaling_is_said():
    from reports.pages.run.run_sections import on_a_cluster

    shared = {"href": "h200.html", "title": "What if: gpt2 on dgx-h200", "book": "stock at 25 MiB"}
    assert 'href="../h200.html"' in on_a_cluster({"run_id": "r", "device": "cpu", "predict_pages": [shared]})
    assert "--cluster NAME --local-step-ms MS --page" in on_a_cluster({"run_id": "r", "device": "cpu"})
    assert 'href="r.whatif.html"' in on_a_cluster({"run_id": "r", "device": "cuda", "whatif": "r.whatif.html"})

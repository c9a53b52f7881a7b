"""rpc_hybrid: N trainers plus a parameter server, through the real launcher, checked against the
parameter-server reference; a server that raises or dies becomes a `failed` row that names it.

One run serves every end-to-end test (two torchrun launches, each plus the server): at world sizes 1
and 2, a healthy configuration (bucket_cap_mb 25), then one at 1 MiB whose server dies at world size 1
(which ends that launch) and raises at world size 2 (two trainers told). The faults come from the harness
(DDPBENCH_FAULT, on the server rank: `step` counts its remote forwards), never from the strategy.
"""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from conftest import run_ddpbench

import impls
import workloads
from harness.config import grid
from harness.config.bench import BenchConfig
from harness.config.grid import Configuration, expand
from harness.handoff import faults, records
from harness.handoff.rank_result import RankResult
from harness.measure.training import LEARNING_RATE, build_model, make_batch
from harness.parity import parameter_server
from harness.parity import reference as parity
from harness.rank import rpc_flow
from harness.rank.dist import Session
from harness.results import store
from harness.results.values import options_of

CPU = torch.device("cpu")
SEED = 0
BATCH = 8
RUN_TIMEOUT_S = 240


# (bucket_cap_mb, world size) -> fault; the faulty configuration is its launch's last, so that no relaunch
# follows the one that ends it.
FAULTS = {(25, 1): "none", (25, 2): "none", (1, 1): "exit", (1, 2): "raise"}
SERVER_FAULTS = ";".join(
    f"{kind}:impl=rpc_hybrid,world={world},cap={cap},rank={world},step=0"  # rank `world`: the server
    for (cap, world), kind in FAULTS.items()
    if kind != "none"
)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DDPBENCH_FAULT", SERVER_FAULTS)
        done = run_ddpbench(
            "bench", "--gpus", "2", "--impls", "rpc_hybrid", "--workloads", "recsys", "--size", "tiny",
            "--steps", "3", "--warmup", "2", "--batch-size", str(BATCH), "--no-baseline", "--bucket-cap-mb", "25,1",
            "--repeats", "1", "--results", str(results), "--run-id", "rpc", timeout=RUN_TIMEOUT_S,
        )  # fmt: skip
    # Exit code 1: the run finished, with failed rows (the injected failures).
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    folder = results / "rpc"
    configs = store.read_configs(folder)  # impl_options as JSON text
    caps = configs["impl_options"].map(lambda o: int(options_of(o)["bucket_cap_mb"]))
    configs["fault"] = [FAULTS[key] for key in zip(caps, configs["world_size"], strict=True)]
    return {"configs": configs, "ranks": pd.read_parquet(folder / "ranks"), "steps": pd.read_parquet(folder / "steps")}


def rows(run, fault: str) -> pd.DataFrame:
    configs = run["configs"]
    return configs[configs["fault"] == fault].sort_values("world_size")


def of_healthy_world_two(run, table: str) -> pd.DataFrame:
    config_id = rows(run, "none").query("world_size == 2")["config_id"].item()
    return run[table][run[table]["config_id"] == config_id]


def test_healthy_configurations_are_ok_and_match_the_parameter_server_reference(run):
    healthy = rows(run, "none")
    assert healthy["world_size"].tolist() == [1, 2]
    assert healthy["status"].tolist() == ["ok", "ok"], healthy["error"].tolist()
    assert healthy["parity_ok"].tolist() == [True, True], healthy["parity_note"].tolist()
    assert healthy["parity_note"].str.contains("parameter-server reference").all()


def test_every_rank_has_a_ranks_row_and_the_server_holds_the_table(run):
    ranks = of_healthy_world_two(run, "ranks").sort_values("rank")
    assert ranks["role"].tolist() == ["trainer", "trainer", "parameter_server"]
    assert (ranks["mem_peak_rss_mb"] > 0).all()
    model = workloads.create("recsys", size="tiny").build_model()
    table = sum(p.numel() * p.element_size() for p in model.embedding.parameters()) / 2**20
    dense = sum(p.numel() * p.element_size() for p in model.parameters()) / 2**20 - table
    assert ranks["held_param_mb"].tolist() == pytest.approx([dense, dense, table])


def test_the_dense_parts_ddp_caps_and_buckets_are_recorded_as_stocks_are(run):
    """predict counts a rank's gradient buckets from `bucket_sizes_mb`; without them it said rpc_hybrid's run was
    "from before ddpbench recorded them"."""
    healthy = rows(run, "none")
    assert healthy["bucket_cap_mb"].tolist() == [25, 25]
    model = workloads.create("recsys", size="tiny").build_model()
    dense = sum(p.numel() * p.element_size() for n, p in model.named_parameters() if not n.startswith("embedding"))
    for sizes in healthy["bucket_sizes_mb"]:
        assert sum(sizes) == pytest.approx(dense / 2**20, rel=1e-3)


def test_trainers_time_every_phase_and_the_server_has_no_steps(run):
    steps = of_healthy_world_two(run, "steps").query("not warmup")
    assert sorted(steps["rank"].unique()) == [0, 1]
    for phase in ("forward", "backward", "optimizer", "sync"):
        assert (steps[f"{phase}_ms"] > 0).all(), phase


def test_rpc_traffic_per_step_follows_from_the_batch_shape(run):
    """A forward RPC (ids out, pooled rows back), the pooled rows' gradient back to the server,
    and the server's optimizer step: three round trips per trainer and step."""
    shape = workloads.create("recsys", size="tiny").shape
    ids, pooled = BATCH * shape.bag * 8, BATCH * shape.dim * 4  # int64 ids, float32 rows
    healthy = rows(run, "none")
    assert healthy["rpc_round_trips_per_step"].tolist() == [3.0, 3.0]
    assert healthy["rpc_bytes_per_step"].tolist() == [ids + 2 * pooled] * 2


def test_a_server_that_raises_fails_its_row_naming_the_server_to_every_trainer(run):
    [raised] = rows(run, "raise").to_dict("records")
    assert (raised["world_size"], raised["status"]) == (2, "failed")
    named = "the parameter server (rank 2) raised RuntimeError('fault injected by DDPBENCH_FAULT"
    assert raised["error"].count(named) == 2  # both trainers: rank 0 and rank 1


def test_a_server_that_dies_fails_its_row_naming_the_server_without_a_hang_and_the_run_goes_on(run):
    [died] = rows(run, "exit").to_dict("records")
    assert (died["world_size"], died["status"]) == (1, "failed")
    assert died["error"].startswith("rank 1 (the parameter server) exited with code 3")
    assert len(rows(run, "raise")) == 1, "the configuration after the failed launch was not run"


# ---- without a launch ----------------------------------------------------------------------------


def summed_sgd_step(grads: list[dict[str, torch.Tensor]], name: str) -> torch.Tensor:
    """The SGD step that the sum of every trainer's gradient of parameter `name` makes."""
    return LEARNING_RATE * sum(g[name] for g in grads)


def test_reference_moves_the_table_by_the_sum_of_the_trainers_sgd_steps_and_the_rest_by_their_mean():
    workload = workloads.create("recsys", size="tiny")
    model = build_model(workload, seed=SEED, device=CPU)
    grads = []
    for rank in range(2):
        model.zero_grad()
        batch = make_batch(workload, batch_size=BATCH, seed=SEED, rank=rank, step=0, device=CPU)
        workload.loss(model, batch).backward()
        grads.append({name: p.grad.clone() for name, p in model.named_parameters()})
    start = {name: p.detach().clone() for name, p in model.named_parameters()}
    table = {name for name in start if name.startswith("embedding.")}
    expected = {name: w - summed_sgd_step(grads, name) / (1 if name in table else 2) for name, w in start.items()}
    got, initial = parameter_server.parameter_server_reference(
        workload, trainers=2, batch_size=BATCH, steps=1, seed=SEED, device=CPU
    )
    assert parameter_server.compare_updates(got, expected, initial).within_tolerance
    # The rules differ only in the table's update, a factor of 2 that compare_updates must see
    # (plain `compare` does not: the parameters barely move in one step).
    mean_everywhere = {name: w - summed_sgd_step(grads, name) / 2 for name, w in start.items()}
    outcome = parameter_server.compare_updates(got, mean_everywhere, initial)
    assert not outcome.within_tolerance and outcome.worst_parameter == "embedding.weight"


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_with_one_trainer_the_parameter_server_reference_is_the_data_parallel_one(optimizer):
    workload = workloads.create("recsys", size="tiny")
    setup = {"batch_size": BATCH, "steps": 3, "seed": SEED, "device": CPU, "optimizer": optimizer}
    got, _ = parameter_server.parameter_server_reference(workload, trainers=1, **setup)
    assert parity.compare(got, parity.reference_parameters(workload, world_size=1, **setup)).max_abs_diff == 0.0


def test_rpc_hybrid_gets_a_server_rank_only_on_a_workload_with_a_remote_part():
    config = BenchConfig(gpus=2, impls=("rpc_hybrid", "stock"), workloads=("recsys", "mlp"), size="tiny")
    launches = {(c.impl, c.workload, c.world_size): c.processes for c in expand(config, device="cpu")}
    assert launches[("rpc_hybrid", "recsys", 2)] == 3
    assert launches[("rpc_hybrid", "mlp", 2)] == 2  # skipped inside an ordinary launch, no extra process
    assert launches[("stock", "recsys", 2)] == 2
    multi_node = BenchConfig(
        gpus=2, impls=("rpc_hybrid",), workloads=("recsys",), nnodes=2, rdzv_endpoint="h:1", run_id="job"
    )
    assert {c.extra_ranks for c in expand(multi_node, device="cpu")} == {0}


def configuration(workload: str, *, world_size: int = 2) -> Configuration:
    return Configuration(
        config_id="c", impl="rpc_hybrid", impl_options={}, workload=workload, size="tiny", world_size=world_size,
        nnodes=1, batch_size=BATCH, steps=1, warmup=0, dtype="fp32", device="cpu", backend="gloo", seed=SEED,
        parity=True,
    )  # fmt: skip


def test_rpc_hybrid_on_a_workload_without_a_remote_part_is_skipped_with_the_reason():
    session = Session(rank=0, world_size=2, local_rank=0, device=CPU, backend="gloo")
    strategy, workload = impls.create("rpc_hybrid"), workloads.create("mlp", size="tiny")
    result = rpc_flow.measure(configuration("mlp"), session, strategy, workload, run=None)
    assert (result.status, result.error) == (
        "skipped",
        "workload 'mlp' has no remote part for the parameter server (recsys has one: --workloads recsys; "
        "a model of your own names its own with remote_part, docs/your-model.md)",
    )
    planned = grid.skip_reason(configuration("mlp"))  # the dry run's words: the same reason, not a shorter one
    assert planned == result.error and "WorkloadDefaults" not in planned  # no class of the code named to a user


def test_an_error_the_server_sent_back_is_named_as_the_servers():
    session = Session(rank=0, world_size=3, local_rank=0, device=CPU, backend="gloo")
    remote = RuntimeError(
        "On WorkerInfo(id=2, name=parameter_server):\nValueError('bad ids')\nTraceback (most recent call last):\n  x"
    )
    assert rpc_flow._failure_line(remote, session) == "the parameter server (rank 2) raised ValueError('bad ids')"
    assert rpc_flow._failure_line(ValueError("local"), session) == "ValueError: local"


def test_rpc_columns_are_the_mean_over_trainers_and_null_without_rpc():
    trainers = [RankResult("ok", rpc={"round_trips_per_step": 3.0, "bytes_per_step": b}) for b in (100.0, 300.0)]
    assert records.rpc_columns([*trainers, RankResult("ok", role="parameter_server")]) == {
        "rpc_round_trips_per_step": 3.0,
        "rpc_bytes_per_step": 200.0,
    }
    nothing = [RankResult("ok"), RankResult("ok")]
    assert records.rpc_columns(nothing) == {"rpc_round_trips_per_step": None, "rpc_bytes_per_step": None}


def test_a_ranks_row_says_which_role_the_rank_had():
    cfg = configuration("recsys", world_size=1)
    results = [RankResult("ok"), RankResult("ok", role="parameter_server")]
    assert [row["role"] for row in records.rank_rows(cfg, "run", results)] == ["trainer", "parameter_server"]


def test_a_server_fault_fires_at_its_forward_call_and_on_every_call_after_it():
    module = torch.nn.Linear(2, 2)
    where = {"impl": "rpc_hybrid", "world": 2, "repeat": 1, "rank": 2}
    injected = [faults.Fault.parse("raise:impl=rpc_hybrid,world=2,repeat=1,rank=2,step=1")]
    faults.arm_served_module(module, injected, device=CPU, **where)
    module(torch.zeros(1, 2))  # call 0: not yet
    for _ in range(2):
        with pytest.raises(RuntimeError, match="fault injected by DDPBENCH_FAULT at step 1"):
            module(torch.zeros(1, 2))
    other_repeat = torch.nn.Linear(2, 2)
    faults.arm_served_module(other_repeat, injected, device=CPU, **{**where, "repeat": 0})
    for _ in range(3):
        other_repeat(torch.zeros(1, 2))
    assert list(other_repeat.state_dict()) == ["weight", "bias"]  # a hook: the names stay the module's

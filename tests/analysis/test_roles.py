"""Roles as data: what the harness, the model and the reports know of a strategy comes from what its class
declares, recorded on its rows, never from its name. A strategy defined in one file inside this test gets
its floor, its place in the answer table and its sentence with nothing else touched."""

from __future__ import annotations

import ast
import importlib.util
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
from worker_plans import plan_for

import impls
from harness.analysis import roles
from harness.config.bench import BenchConfig
from harness.config.grid import expand
from harness.handoff import records
from harness.handoff.rank_result import RankResult
from harness.perfmodel import predict
from harness.perfmodel.network import given_network
from harness.rank import worker
from harness.results import store
from reports.aggregate import summarize_run
from reports.pages import answer, pooled
from reports.pages.run import takeaways

ROOT = Path(__file__).resolve().parents[2]

STRATEGY_FILE = """
import dataclasses
from typing import ClassVar

import torch.distributed as dist

from harness.protocols import StrategyDefaults
from impls import register


@register("throwaway", description="a strategy defined inside a test: one all-reduce per gradient")
@dataclasses.dataclass(kw_only=True)
class Throwaway(StrategyDefaults):
    gradient_traffic: ClassVar[str] = "allreduce"  # every gradient byte, once
    comm_after_backward: ClassVar[bool] = True  # after backward, by design

    def wrap(self, model):
        self._params = [p for p in model.parameters() if p.requires_grad]
        return model

    def sync_gradients(self):
        for p in self._params:
            dist.all_reduce(p.grad)
            p.grad.div_(dist.get_world_size())
"""


@pytest.fixture
def throwaway(tmp_path, monkeypatch):
    """The strategy file above, imported from a folder outside the repository: it registers itself."""
    path = tmp_path / "throwaway_strategy.py"
    path.write_text(STRATEGY_FILE)
    impls.names()  # the registry's own plug-ins first (loaded once), then a copy the test may add to
    monkeypatch.setattr(impls.REGISTRY, "_entries", dict(impls.REGISTRY._entries))  # forgotten after the test
    spec = importlib.util.spec_from_file_location("throwaway_strategy", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "throwaway_strategy", module)
    spec.loader.exec_module(module)
    assert len([line for line in STRATEGY_FILE.splitlines() if line.strip()]) <= 25
    return "throwaway"


CONTEXT = {"run_id": "roles", "started_at": "2026-01-01T00:00:00+00:00", "threads_per_rank": 1, "hostname": "h"}


def measured_rows(tmp_path: Path, impl: str, step_ms: float, *, world: int = 2) -> None:
    """Rank 0's rows for `impl` at `world` ranks, as the worker assembles them (one repeat)."""
    config = BenchConfig(gpus=world, impls=(impl,), size="tiny", steps=3, warmup=1, baseline=False)
    [cfg] = [c for c in expand(config, device="cpu") if c.world_size == world]
    steps = [{"step_ms": step_ms, "forward_ms": 1.0, "backward_ms": 2.0, "sync_ms": 1.0, "optimizer_ms": 1.0}] * 4
    result = RankResult("ok", steps=steps, memory={"mem_peak_rss_mb": 100.0}, wall_s=1.0)
    info = {"grad_bytes": 4_000_000, "param_count": 1_000_000, "trainable_param_count": 1_000_000}
    rows = records.assemble(cfg, [result] * world, run_context=CONTEXT, written=store.read_configs(tmp_path),
                            model_info=info)  # fmt: skip
    store.write_configuration(tmp_path, f"{impl}-w{world}", *rows)


def test_a_new_strategy_file_gets_its_floor_answer_row_and_sentence(throwaway, tmp_path, single_rank):
    run = tmp_path / "run"
    worker.run_configurations(plan_for(run, expand(BenchConfig(gpus=1, impls=(throwaway,), size="tiny", steps=2,
                                                               warmup=1, baseline=False), device="cpu")),
                              single_rank)  # fmt: skip
    [trained] = store.read_configs(run).to_dict("records")
    assert trained["status"] == "ok" and trained["parity_ok"] is True  # it trains like one process
    assert (trained["gradient_traffic"], trained["comm_after_backward"], trained["baseline"]) == ("allreduce", True,
                                                                                                 False)  # fmt: skip

    for impl, step_ms in ((impls.baseline_name(), 5.0), (throwaway, 8.0), ("naive", 9.0)):
        measured_rows(tmp_path, impl, step_ms)
    configs = store.read_configs(tmp_path)
    floor = pd.DataFrame(predict.floor_rows(configs, given_network(busbw_bytes_per_s=1e9, latency_s=1e-5)))
    mine = configs.loc[configs["impl"] == throwaway, "config_id"].item()
    assert mine in set(floor["config_id"])  # its floor: max(the baseline's step, one all-reduce of its bytes)
    assert floor.set_index("config_id").loc[mine, "local_ms"] == pytest.approx(5.0)

    ranked = pooled.ranked(configs, workload="mlp")
    assert ranked["strategy"].tolist() == [throwaway, "naive", impls.baseline_name()]  # the floor listed last
    assert ranked["is_floor"].tolist() == [False, False, True]
    data = summarize_run({"run_id": "roles", "device": "cpu"}, configs, store.read_steps(tmp_path),
                         store.read_ranks(tmp_path))  # fmt: skip
    assert f"<b>{throwaway}</b>" in answer.answer_section(data, ["mlp"])
    assert takeaways.fastest(configs, workload="mlp").startswith(f"At 2 ranks {throwaway} leads (")


def test_a_frame_without_role_columns_gets_them_from_the_registry():
    frame = roles.with_roles(pd.DataFrame({"impl": ["local", "zero", "unknown"]}))
    assert roles.is_baseline(frame).tolist() == [True, False, False]
    assert roles.shards_state(frame).tolist() == [False, True, False]
    assert roles.whole_gradient_allreduce(frame).tolist() == [False, False, False]  # zero shards its state


def test_a_strategy_declaring_an_unknown_traffic_kind_is_refused_at_registration(monkeypatch):
    import dataclasses
    from typing import ClassVar

    from harness.protocols import StrategyDefaults

    impls.names()
    monkeypatch.setattr(impls.REGISTRY, "_entries", dict(impls.REGISTRY._entries))

    class Odd(StrategyDefaults):
        gradient_traffic: ClassVar[str] = "telepathy"

        def wrap(self, model):
            return model

        def sync_gradients(self):
            pass

    with pytest.raises(TypeError, match="gradient_traffic as one of allreduce, sharded, none, other"):
        impls.register("odd", description="x")(dataclasses.dataclass(kw_only=True)(Odd))


VERDICT_WORDS = {("harness/analysis/stats.py", "flat")}
"""Literals that equal a strategy's name but mean something else: the sweep's verdict 'flat' (any cap will do)."""


def code_literals(path: Path) -> list[tuple[int, str]]:
    """The string constants of a module that are not docstrings, with their lines."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}  # fmt: skip
    strings = [node for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)]
    return [(node.lineno, node.value) for node in strings if id(node) not in docstrings]


def test_no_code_outside_the_plugins_names_a_strategy():
    names = set(impls.names())
    found = []
    for folder in ("harness", "reports"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = str(path.relative_to(ROOT))
            found += [f"{relative}:{line} {text!r}" for line, text in code_literals(path)
                      if text in names and (relative, text) not in VERDICT_WORDS]  # fmt: skip
    assert not found, "decide by the row's roles (harness.analysis.roles), not by a name:\n" + "\n".join(found)


def test_the_name_check_can_fail(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        textwrap.dedent('''
        """A docstring naming stock is fine."""
        FLOOR = "local"
    ''')
    )
    assert code_literals(probe) == [(3, "local")]


def test_an_option_the_model_needs_set_by_every_reference_row_stands_in_for_the_reference():
    """A model whose loss leaves parameters unused ran stock only with find_unused_parameters=True: those rows stand
    in, as the 25 MiB cap does; beside a plain row, or where the rows set it differently, nothing is read past."""
    unused = '{"find_unused_parameters": true}'
    needed = roles.needed_by_every(["stock", "stock"], [unused, unused])
    assert needed == {"find_unused_parameters": True}
    assert roles.reference_rank(unused, "stock") is None  # not DDP as shipped, by itself
    assert roles.reference_rank(unused, "stock", needed=needed)[0] == 0
    assert roles.reference_rank('{"find_unused_parameters": true, "comm_hook": "fp16"}', "stock", needed=needed) is None
    assert roles.needed_by_every(["stock", "stock"], [unused, "{}"]) == {}  # the plain row is the reference
    assert roles.needed_by_every(["stock"], ['{"static_graph": true}']) == {}  # a knob tuned for speed: no need


def test_the_reference_is_plain_stock_before_stock_asking_its_defaults_and_none_is_plain():
    """A review's: decide and the run page broke the tie between '{}' and '{"static_graph": false}' apart, and a
    row with null options beside one with text would not sort."""
    texts = ('{"static_graph": false}', "{}", None, '{"bucket_cap_mb": 25}', '{"static_graph": true}')
    ranks = {text: roles.reference_rank(text, "stock") for text in texts}
    assert ranks['{"static_graph": true}'] is None  # another step, no reference
    order = [None, "{}", '{"static_graph": false}', '{"bucket_cap_mb": 25}']
    assert sorted(r for r in ranks.values() if r is not None) == [ranks[text] for text in order]

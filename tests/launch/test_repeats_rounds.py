"""Which configurations a round of `--repeats auto` runs again (harness.launch.repeats), on a planned grid."""

from __future__ import annotations

from harness.config import grid
from harness.config.bench import BenchConfig
from harness.config.grid import expand
from harness.launch import repeats


def test_a_round_runs_the_open_configurations_baseline_at_their_world_size_with_them():
    """The floor and the 'why slower' split compare each repeat with the baseline's launch of that repeat."""
    config = BenchConfig(gpus=2, impls=("stock",), options=(("bucket_cap_mb", ("1", "25")),), size="tiny")
    planned = expand(config, device="cpu")
    by_key = {grid.identity(cfg): [cfg] for cfg in planned}
    open_ones = {key for key, (cfg,) in by_key.items() if cfg.impl == "stock" and cfg.world_size == 2}
    chosen = {(by_key[key][0].impl, by_key[key][0].world_size) for key in repeats._with_baselines(open_ones, by_key)}
    assert chosen == {("stock", 2), ("local", 2)}  # not local at one rank: nothing open rests there
    assert repeats._with_baselines(set(), by_key) == set()


def test_a_rounds_launches_run_an_order_then_its_reverse():
    """A launch's places (first: cold caches; the drift along it) fall on every configuration alike, the baseline
    included, in the rounds `--repeats auto` adds as in the planned grid."""
    config = BenchConfig(gpus=2, impls=("stock", "naive"), size="tiny", repeats=1)
    planned = [cfg for cfg in expand(config, device="cpu") if cfg.world_size == 2]  # local, stock, naive
    next_round = [(repeat, order, cfg) for repeat in (2, 3) for order, cfg in enumerate(planned)]
    ran = [(repeat, cfg.impl) for repeat, _, cfg in repeats._run_order(next_round)]
    assert ran == [(2, "stock"), (2, "naive"), (2, "local"), (3, "local"), (3, "naive"), (3, "stock")]

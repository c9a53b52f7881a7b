"""Each configuration's warm-up: the run's --warmup where given, else the default or what the strategy
needs on its device (torch DDP on CUDA waits for the device in its first 11 forwards); the run says
where strategies differ and warns where --warmup leaves one unsteady."""

from __future__ import annotations

import dataclasses

import impls
from harness.commands.console import plan as plan_lines
from harness.config.bench import DEFAULT_WARMUP, BenchConfig
from harness.config.grid import expand, warmup_needed

REFERENCE, OURS = impls.reference_name(), "bucketed"


def warmups(config: BenchConfig, device: str) -> dict[str, int]:
    return {cfg.impl: cfg.warmup for cfg in expand(config, device=device, bf16_supported=True)}


def test_a_strategy_built_on_ddp_warms_up_past_its_timed_forwards_on_cuda_only():
    config = BenchConfig(gpus=1, impls=(REFERENCE, OURS), size="tiny")
    need = warmup_needed(REFERENCE, "cuda")
    assert need > DEFAULT_WARMUP and warmup_needed(OURS, "cuda") == 0 and warmup_needed(REFERENCE, "cpu") == 0
    assert warmups(config, "cuda") == {REFERENCE: need, OURS: DEFAULT_WARMUP, impls.baseline_name(): DEFAULT_WARMUP}
    assert set(warmups(config, "cpu").values()) == {DEFAULT_WARMUP}


def test_every_strategy_that_wraps_ddp_declares_it():
    """A strategy wraps DDP where its class, or one it inherits from (zero: stock's options), is defined in a
    module that constructs DistributedDataParallel."""
    wrapping = [name for name in impls.names() if any("DistributedDataParallel(" in _source(base)
                                                      for base in impls.entry(name).cls.__mro__)]  # fmt: skip
    assert {REFERENCE, "zero", "rpc_hybrid"} <= set(wrapping)
    assert all(warmup_needed(name, "cuda") > DEFAULT_WARMUP for name in wrapping)


def test_an_explicit_warmup_wins_and_is_warned_where_too_short(capsys):
    config = BenchConfig(gpus=1, impls=(REFERENCE, OURS), size="tiny", warmup=2, baseline=False)
    configurations = expand(config, device="cuda", bf16_supported=True)
    assert {cfg.warmup for cfg in configurations} == {2}
    plan_lines.say_warmup(configurations)
    err = capsys.readouterr().err
    need = warmup_needed(REFERENCE, "cuda")
    assert f"--warmup 2: {REFERENCE} needs {need} warm-up steps on cuda" in err
    assert f"its first {need - 2} measured steps are not" in err and OURS not in err


def test_the_run_says_which_strategies_warm_up_longer(capsys):
    configurations = expand(BenchConfig(gpus=1, impls=(REFERENCE, OURS), size="tiny"), device="cuda")
    plan_lines.say_warmup(configurations)
    out, err = capsys.readouterr()
    assert f"warm-up: {DEFAULT_WARMUP} steps; {REFERENCE} {warmup_needed(REFERENCE, 'cuda')}" in out and not err
    from harness.commands.console.invoked import ddpbench_command

    assert out.rstrip().endswith(f"(what they need on the device: `{ddpbench_command()} list`)")  # pasted here, runs
    plan_lines.say_warmup([dataclasses.replace(c, device="cpu", warmup=3) for c in configurations])
    assert capsys.readouterr() == ("", "")  # all alike: nothing to say


def _source(cls: type) -> str:
    import inspect

    module = inspect.getmodule(cls)
    return inspect.getsource(module) if module is not None and module.__name__.startswith("impls") else ""


def test_rows_that_warmed_up_less_than_their_strategy_needs_are_found():
    """Runs from before strategies declared their warm-up (or with an explicit --warmup) are read as they ran."""
    import pandas as pd

    from harness.analysis import roles

    need = warmup_needed(REFERENCE, "cuda")
    rows = pd.DataFrame({"impl": [REFERENCE, REFERENCE, OURS, REFERENCE, "gone"],
                         "device": ["cuda", "cpu", "cuda", "cuda", "cuda"], "warmup": [3, 3, 3, need, 0],
                         "status": ["ok", "ok", "ok", "ok", "ok"]})  # fmt: skip
    assert roles.warmup_short_by(rows).tolist() == [need - 3, 0, 0, 0, 0]
    assert roles.warmup_short_by(rows.assign(status="failed")).sum() == 0
    assert roles.warmup_short_by(rows.drop(columns="warmup")).sum() == 0  # older rows: unknown, not short


def test_the_run_page_warns_where_a_strategy_was_measured_before_it_was_steady():
    import pandas as pd

    from reports.pages import alerts

    need = warmup_needed(REFERENCE, "cuda")
    rows = pd.DataFrame({"config_id": ["a", "b", "c"], "impl": [REFERENCE, REFERENCE, OURS],
                         "device": "cuda", "warmup": [3, 3, 3], "status": "ok"})  # fmt: skip
    typed = {"command": ["harness", "bench", "--warmup", "3"]}
    [banner] = alerts.short_warmup(typed, rows)
    assert f"<b>Warm-up too short:</b> {REFERENCE} on cuda (3 of the {need} steps it needs):" in banner
    assert OURS not in banner and "Rerun without --warmup" in banner
    [older] = alerts.short_warmup({"command": ["harness", "bench"]}, rows)  # a version's default of 3, not a flag
    assert "predates the warm-ups strategies declare: rerun with this one" in older and "without --warmup" not in older
    for fine in (rows.assign(warmup=need), rows.assign(device="cpu"), rows.assign(warmup=float("nan"))):
        assert alerts.short_warmup(typed, fine) == []  # steady, a device with no need, or a warm-up not recorded

"""Registries: plug-ins found by module, options typed from their dataclass fields."""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Literal

import pytest

import impls
import workloads
from harness.protocols import (
    ConfigError,
    ParameterServer,
    Registry,
    Strategy,
    StrategyDefaults,
    Workload,
    missing_members,
    option,
    protocol_members,
    strategy_contract_gaps,
)


def test_every_strategy_class_defines_or_inherits_every_member_of_its_protocol():
    declared = set(protocol_members(Strategy))
    assert {"wrap", "sync_gradients", "make_optimizer", "parity_exact", "extra_ranks", "reference"} <= declared
    for name in impls.names():
        cls = impls.entry(name).cls
        assert [m for m in declared if not hasattr(cls, m)] == [], name
        if cls.extra_ranks:
            assert missing_members(cls, ParameterServer) == [], name
    for name in workloads.names():
        assert missing_members(workloads.entry(name).cls, Workload) == [], name


def test_a_strategy_missing_wrap_fails_the_check_and_is_refused_at_registration():
    @dataclasses.dataclass(kw_only=True)
    class NoWrap(StrategyDefaults):
        def sync_gradients(self) -> None:
            pass

    assert strategy_contract_gaps(NoWrap) == ["wrap"]
    registry = Registry("strategy", "impls", contract_gaps=strategy_contract_gaps)
    with pytest.raises(TypeError, match="strategy 'nowrap' does not define wrap") as refused:
        registry.register("nowrap", description="d")(NoWrap)
    # bad input, as a flag's is: one line naming the file (the CLI's exit 2), not a traceback out of every command
    assert isinstance(refused.value, ConfigError)
    assert "test_registry.py: strategy 'nowrap' does not define wrap" in str(refused.value)


@pytest.mark.parametrize("command", [["list", "stock"], ["list"]])
def test_a_broken_strategy_file_is_refused_in_one_line_by_the_cli(command, monkeypatch, capsys):
    """Bare `list` once printed 'strategies:' before the refusal (its entries loaded as it said them)."""
    from harness import cli

    @dataclasses.dataclass(kw_only=True)
    class NoSync(StrategyDefaults):
        def wrap(self, model):
            return model

    def load_a_broken_file():  # as importing impls/ would, with this class in one of its files
        impls.REGISTRY.register("nosync", description="d")(NoSync)

    monkeypatch.setattr(impls.REGISTRY, "_load", load_a_broken_file)
    assert cli.main(command) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "strategy 'nosync' does not define sync_gradients" in err
    assert "Traceback" not in err


def test_a_strategy_with_extra_ranks_must_define_the_parameter_server_side():
    @dataclasses.dataclass(kw_only=True)
    class HalfAServer(StrategyDefaults):
        extra_ranks: ClassVar[int] = 1

        def wrap(self, model):
            return model

        def sync_gradients(self) -> None:
            pass

        def serve(self, module, *, device) -> None:
            pass

    gaps = strategy_contract_gaps(HalfAServer)
    assert gaps == ["connect", "served_failure", "served_parameter_bytes", "step_traffic", "stop_serving"]


def test_exactly_one_strategy_is_the_reference_and_it_is_ddp_as_torch_ships_it():
    assert [n for n in impls.names() if impls.entry(n).cls.reference] == [impls.reference_name()] == ["stock"]


def test_a_name_registered_twice_is_an_error():
    registry = Registry("thing", "impls")

    @registry.register("x", description="first")
    @dataclasses.dataclass
    class First:
        pass

    with pytest.raises(RuntimeError, match="registered twice"):
        registry.register("x", description="second")(First)


def test_options_are_coerced_from_text_by_their_field_types():
    parse = impls.REGISTRY.parse_options
    assert parse("stock", {"bucket_cap_mb": "0.5", "static_graph": "true", "comm_hook": "fp16"}) == {
        "bucket_cap_mb": 0.5,
        "static_graph": True,
        "comm_hook": "fp16",
    }


@pytest.mark.parametrize(
    ("name", "texts", "message"),
    [
        ("stock", {"comm_hook": "int8"}, "comm_hook: 'int8' is not one of none, fp16, bf16, powersgd"),
        ("stock", {"static_graph": "maybe"}, "static_graph: 'maybe' is not one of true, false"),
        ("stock", {"bucket_cap_mb": "abc"}, "bucket_cap_mb: 'abc' is not a finite number (MiB > 0, or unset)"),
        ("stock", {"bucket_cap_mb": "0"}, "bucket_cap_mb: '0' is not a finite number (MiB > 0, or unset)"),
        ("bucketed", {"first_bucket_mb": "-5"}, "first_bucket_mb: '-5' is not a finite number (MiB > 0, or unset)"),
        ("stock", {"powersgd_rank": "1.5"}, "powersgd_rank: '1.5' is not a whole number (≥ 1)"),
        ("fsdp", {"param_dtype": "fp16"}, "param_dtype: 'fp16' is not one of fp32, bf16"),
    ],
)
def test_a_bad_option_text_is_one_line_naming_it_and_the_valid_values(name, texts, message):
    with pytest.raises(ConfigError) as raised:
        impls.REGISTRY.parse_options(name, texts)
    assert str(raised.value) == message  # no Python type name ("float | None", "bool") leaks


FLOAT_OPTIONS = [
    (name, option.name)
    for name in impls.names()
    for option in impls.entry(name).options().values()
    if option.type in (float, float | None)
]


@pytest.mark.parametrize(("name", "key"), FLOAT_OPTIONS)
@pytest.mark.parametrize("text", ["inf", "-inf", "nan", "1e999"])
def test_every_float_option_refuses_a_non_finite_number(name, key, text):
    with pytest.raises(ConfigError, match=f"^{key}: '{text}' is not a finite number"):
        impls.REGISTRY.parse_options(name, {key: text})
    with pytest.raises(ConfigError, match=f"^{key}: .* is not a finite number"):
        impls.create(name, **{key: float(text)})


def test_float_options_exist_to_be_checked():
    assert ("stock", "bucket_cap_mb") in FLOAT_OPTIONS and ("bucketed", "first_bucket_mb") in FLOAT_OPTIONS


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("stock", {"comm_hook": "fp32"}, "comm_hook: 'fp32' is not one of none, fp16, bf16, powersgd"),
        ("fsdp", {"param_dtype": "fp16"}, "param_dtype: 'fp16' is not one of fp32, bf16"),
        ("stock", {"static_graph": "true"}, "static_graph: 'true' is not one of true, false"),
        ("stock", {"static_graph": 1}, "static_graph: 1 is not one of true, false"),
        ("stock", {"powersgd_rank": 2.0}, "powersgd_rank: 2.0 is not a whole number (≥ 1)"),
        ("stock", {"bucket_cap_mb": "25"}, "bucket_cap_mb: '25' is not a finite number (MiB > 0, or unset)"),
        ("rpc_hybrid", {"bucket_cap_mb": 0}, "bucket_cap_mb: 0 is not a finite number (MiB > 0, or unset)"),
        ("stock", {"find_unused_parameters": None}, "find_unused_parameters: None is not one of true, false"),
    ],
)
def test_create_checks_every_option_value_from_python(name, options, message):
    """The Python API checks what the command line checks: a misspelt hook is not plain DDP."""
    with pytest.raises(ConfigError) as raised:
        impls.create(name, **options)
    assert str(raised.value) == message


def test_create_takes_valid_values_and_an_int_for_a_float():
    strategy = impls.create("stock", bucket_cap_mb=25, comm_hook="fp16", static_graph=True)
    assert (strategy.bucket_cap_mb, type(strategy.bucket_cap_mb), strategy.comm_hook) == (25.0, float, "fp16")
    assert impls.create("bucketed", bucket_cap_mb=None).bucket_cap_mb is None  # unset is valid


def test_options_carry_the_doc_given_to_their_field():
    options = impls.entry("stock").options()
    assert options["bucket_cap_mb"].default is None  # unset: DDP chooses (its default, first bucket included)
    assert "MiB" in options["bucket_cap_mb"].doc


def test_a_strategy_sharing_anothers_options_shares_their_docs():
    stock, zero = impls.entry("stock").options(), impls.entry("zero").options()
    shared = ["bucket_cap_mb", "broadcast_buffers", "find_unused_parameters", "gradient_as_bucket_view", "static_graph"]
    assert [name for name in zero if name in stock] == shared
    assert all(zero[name] == stock[name] and zero[name].doc for name in shared)


def test_an_option_without_a_doc_has_an_empty_one():
    @dataclasses.dataclass(kw_only=True)
    class Bare(StrategyDefaults):
        knob: int = 3
        documented: int = option(4, "A   knob\n  with words.")

    registry = Registry("thing", "impls")
    registry.register("bare", description="d")(Bare)
    options = registry._entries["bare"].options()
    assert (options["knob"].doc, options["documented"].doc) == ("", "A knob with words.")


def test_unknown_option_names_the_valid_ones():
    with pytest.raises(ConfigError, match="valid options: bucket_cap_mb"):
        impls.create("stock", bucket_size=3)


def test_literal_options_list_their_choices():
    @dataclasses.dataclass(kw_only=True)
    class Knobs(StrategyDefaults):
        mode: Literal["a", "b"] = "a"

    registry = Registry("thing", "impls")
    registry.register("knobs", description="d")(Knobs)
    assert registry._entries["knobs"].options()["mode"].choices() == ("a", "b")


@pytest.mark.parametrize(
    ("impl", "options", "why"),
    [
        ("stock", {"comm_hook": "bf16"}, "comm_hook=bf16 compresses gradients (lossy by design)"),
        ("stock", {"comm_hook": "powersgd"}, "comm_hook=powersgd compresses gradients (lossy by design)"),
        ("zero", {"overlap_with_ddp": True}, "overlap_with_ddp=true: its first steps learn DDP's buckets"),
        ("fsdp", {"param_dtype": "bf16"}, "param_dtype=bf16, reduce_dtype=fp32: bf16 compute or reduction"),
    ],
)
def test_a_strategy_not_judged_at_an_option_says_which_option_makes_it_differ(impl, options, why):
    """The run page said of `stock comm_hook=bf16` 'this strategy is not expected to match exactly', while stock
    is judged everywhere else: the hook is what is lossy, and the strategy knows it."""
    strategy = impls.create(impl, **options)
    assert strategy.parity_exact is False and strategy.parity_inexact_why.startswith(why)
    assert impls.create(impl).parity_exact is True  # at its defaults it is judged

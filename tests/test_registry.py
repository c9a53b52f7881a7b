"""Registries: plug-ins found by module, options typed from their dataclass fields."""

from __future__ import annotations

import dataclasses
from typing import Literal

import pytest

import impls
import workloads
from harness.protocols import ConfigError, Registry, Strategy, StrategyDefaults, Workload


def test_every_strategy_and_workload_satisfies_its_protocol():
    for name in impls.names():
        assert isinstance(impls.create(name), Strategy), name
    for name in workloads.names():
        assert isinstance(workloads.create(name, size="tiny"), Workload), name


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
    with pytest.raises(ConfigError, match="choose one of none, fp16, bf16, powersgd"):
        parse("stock", {"comm_hook": "int8"})
    with pytest.raises(ConfigError, match="'maybe' is not a valid bool"):
        parse("stock", {"static_graph": "maybe"})


def test_options_carry_the_docstring_under_their_field():
    options = impls.entry("stock").options()
    assert options["bucket_cap_mb"].default == 25.0
    assert "MiB" in options["bucket_cap_mb"].doc


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

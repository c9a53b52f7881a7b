"""Data-parallel strategies, one file each, registered under a unique name.

import impls
impls.names()                                  # ['local', 'naive', 'stock', ...]
strategy = impls.create("stock", bucket_cap_mb=25)
impls.reference_name()                         # 'stock': the strategy the others are measured against
impls.baseline_name()                          # 'local': the one that communicates nothing
impls.roles("fsdp")                            # what a strategy is, as its class declares it (ROLES)
impls.beyond_defaults("stock", {"static_graph": False, "bucket_cap_mb": 5})   # {'bucket_cap_mb': 5}
"""

from harness.bucketing import DDP_DEFAULT_CAP_MB
from harness.protocols import Registry, Strategy, roles_of, strategy_contract_gaps

REGISTRY: Registry[Strategy] = Registry("strategy", __name__, contract_gaps=strategy_contract_gaps)
register = REGISTRY.register
names = REGISTRY.names
create = REGISTRY.create
entry = REGISTRY.entry


def reference_name() -> str:
    """The reference strategy (DDP as torch ships it): the one whose class declares `reference = True`."""
    return REGISTRY.flagged("reference")


def baseline_name() -> str:
    """The baseline strategy (no communication): the one whose class declares `baseline = True`."""
    return REGISTRY.flagged("baseline")


def roles(name: str) -> dict[str, bool | str]:
    """Strategy `name`'s roles (harness.protocols.ROLES), as its class declares them."""
    return roles_of(entry(name).cls)


def beyond_defaults(name: str, options: dict) -> dict:
    """The options asked that are not strategy `name`'s declared defaults (all of them for a strategy not
    registered): what makes its step another than the strategy's own. gradient_as_bucket_view=False, asked by a
    sweep of it, is DDP as it ships; so is stock asking powersgd_rank without the PowerSGD hook (inert_options)."""
    if name not in names():
        return dict(options)
    declared, inert = entry(name).options(), entry(name).cls.inert_options(options)
    return {key: value for key, value in options.items()
            if key not in inert and (key not in declared or declared[key].default != value)}  # fmt: skip


def model_needs(name: str, options: dict) -> dict:
    """The options `options` sets, beyond strategy `name`'s defaults, that some models need for it to run at all (its
    `model_needs`); {} for a strategy not registered."""
    needs = getattr(entry(name).cls, "model_needs", ()) if name in names() else ()
    return {key: value for key, value in beyond_defaults(name, options).items() if key in needs}


def reference_stand_in(name: str, options: dict) -> int | None:
    """How a row of strategy `name` asking `options` stands for DDP as torch ships it: 0 with no option beyond its
    defaults (the reference itself), 1 with an explicit 25 MiB cap and nothing else (a stand-in: since torch 2.9 an
    explicit cap caps the first bucket too), None for any other options (not the reference)."""
    asked = beyond_defaults(name, options)
    if not asked:
        return 0
    return 1 if set(asked) == {"bucket_cap_mb"} and float(asked["bucket_cap_mb"]) == DDP_DEFAULT_CAP_MB else None

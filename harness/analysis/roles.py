"""The strategy roles a row records (harness.protocols.ROLES), as the analysis, the model and the reports
read them: by what a strategy declares, never by its name.

Rows read from a run carry them (the store's reader fills older parts from the registry);
`with_roles` gives a frame built otherwise (by hand, or a subset of columns) the roles the registry
declares for each row's `impl`, and the defaults of a new strategy for a name no longer registered.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

import impls
from harness.protocols import ROLES, roles_of
from harness.results.values import configuration_label, options_of


def declared(impl: str) -> dict[str, bool | str]:
    """The roles strategy `impl` declares; a new strategy's defaults if it is not registered."""
    return impls.roles(impl) if impl in impls.names() else roles_of(object)


def with_roles(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with every role column; the ones it lacks, or holds null, from the registry by `impl`."""
    if "impl" not in frame or all(role in frame and frame[role].notna().all() for role in ROLES):
        return frame  # nothing to fill (rows read from a run have them all): a step model asks this per cap
    names = {name: declared(name) for name in frame["impl"].dropna().unique()}
    default = roles_of(object)
    filled = {}
    for role in ROLES:
        from_registry = frame["impl"].map(lambda name, role=role: names.get(name, default)[role])
        filled[role] = from_registry if role not in frame else frame[role].where(frame[role].notna(), from_registry)
    return frame.assign(**filled)


def flag(frame: pd.DataFrame, role: str) -> pd.Series:
    """A boolean role as a mask over `frame`'s rows (null: False)."""
    return with_roles(frame)[role].fillna(False).astype(bool) if len(frame) else pd.Series(dtype=bool)


def is_baseline(frame: pd.DataFrame) -> pd.Series:
    """Rows of the strategy that communicates nothing: the compute-only floor."""
    return flag(frame, "baseline")


def is_reference(frame: pd.DataFrame) -> pd.Series:
    """Rows of the strategy every other is measured against (DDP as torch ships it)."""
    return flag(frame, "reference")


def shards_state(frame: pd.DataFrame) -> pd.Series:
    """Rows of strategies that trade communication for memory (a shard of the state per rank)."""
    return flag(frame, "shards_state")


def comm_after_backward(frame: pd.DataFrame) -> pd.Series:
    """Rows of strategies that communicate only after backward, by design."""
    return flag(frame, "comm_after_backward")


def whole_gradient_allreduce(frame: pd.DataFrame) -> pd.Series:
    """Rows whose step all-reduces every gradient byte and runs the whole optimizer step on every rank:
    at least the baseline's step plus that all-reduce (the model's floor)."""
    if not len(frame):
        return pd.Series(dtype=bool)
    rows = with_roles(frame)
    return (rows["gradient_traffic"] == "allreduce") & ~rows["shards_state"].fillna(False).astype(bool)


def sharded_optimizer_over_allreduce(frame: pd.DataFrame) -> pd.Series:
    """Rows of strategies that all-reduce every gradient as DDP does and shard the optimizer state (ZeRO-1):
    each rank steps its shard of the parameters, then sends them to the others."""
    rows = with_roles(frame)
    return (rows["gradient_traffic"] == "allreduce") & rows["shards_state"].fillna(False).astype(bool)


STATELESS_OPTIMIZERS = ("sgd",)
"""The optimizers that keep no state: ddpbench's `sgd` (torch's SGD without momentum)."""


def shards_nothing(frame: pd.DataFrame) -> pd.Series:
    """Rows of a strategy whose only sharding is the optimizer's state (ZeRO-1: sharded_optimizer_over_allreduce)
    stepping an optimizer that keeps none (`optimizer` in STATELESS_OPTIMIZERS): it shards nothing, and what its
    rows hold and take is that optimizer's, not the one a model is trained with."""
    if not len(frame) or "optimizer" not in frame:
        return pd.Series(False, index=frame.index, dtype=bool)
    return sharded_optimizer_over_allreduce(frame) & frame["optimizer"].isin(STATELESS_OPTIMIZERS)


def shards_nothing_words(frame: pd.DataFrame) -> str:
    """'zero shards only the optimizer's state, and --optimizer sgd keeps none: …': where rows shard nothing
    (`shards_nothing`), what their memory and step are and how to see them with the optimizer one trains with; the
    words bench's plan, the run page and the what-if page say; '' where no row does."""
    rows = frame[shards_nothing(frame)]
    if rows.empty:
        return ""
    names, optimizers = (sorted(set(rows[column])) for column in ("impl", "optimizer"))
    which, stateless = ", ".join(names), " or ".join(optimizers)
    return (f"{which} shard{'s' * (len(names) == 1)} only the optimizer's state, and --optimizer {stateless} keeps "
            f"none: {which}'s memory and step here are {stateless}'s, saving nothing for the communication; bench "
            "with the optimizer you train with (--optimizer adamw keeps two moments a parameter) to see what it "
            "saves")  # fmt: skip


def shards_parameters(frame: pd.DataFrame) -> pd.Series:
    """Rows of strategies that shard the parameters themselves (FSDP): each unit's are all-gathered before its
    compute and its gradients reduce-scattered after."""
    if not len(frame):
        return pd.Series(dtype=bool)
    return with_roles(frame)["gradient_traffic"] == "sharded"


def option_left_at(impl: str, name: str, options: Any) -> Any:
    """The value option `name` of strategy `impl` had in a row whose options were `options` (what was asked:
    the rest are the class's defaults); None where the strategy takes no such option (or is not registered)."""
    if impl not in impls.names():
        return None
    declared_options = impls.entry(impl).options()
    if name not in declared_options:
        return None
    return options_of(options).get(name, declared_options[name].default)


def reference_rank(options: Any, impl: str, *, needed: dict | None = None) -> tuple | None:
    """How well a reference row stands for DDP as torch ships it, the lowest best (None: it does not): its
    `impls.reference_stand_in`, then the fewest options asked (a plain row before one asking the defaults by name), then
    the options' text, so that the run page and --repeats auto name the same reference. `needed`: options every
    reference row set (needed_by_every), read past: such rows stand in, named with them."""
    asked = options_of(options)
    rest = {key: value for key, value in asked.items() if key not in (needed or {}) or needed[key] != value}
    stand_in = impls.reference_stand_in(impl, rest)
    return None if stand_in is None else (stand_in, len(asked), str(options or ""))


def needed_by_every(impl_names: Any, impl_options: Any) -> dict:
    """The options a model needs (the strategy's `model_needs`) that every one of these reference rows sets alike; {}
    where any row differs. A run whose model leaves parameters unused ran DDP only with find_unused_parameters=True:
    its run page compared nothing with stock ('—' in every row) while every stock row could have stood in."""
    needs = [impls.model_needs(i, options_of(o)) for i, o in zip(impl_names, impl_options, strict=True)]
    return needs[0] if needs and all(need == needs[0] for need in needs) else {}


def _stand_in(impl: str, options: Any) -> int | None:
    """impls.reference_stand_in of a reference row (0 as shipped, 1 its 25 MiB stand-in); None for any other row."""
    return impls.reference_stand_in(impl, options_of(options)) if declared(impl)["reference"] else None


def reference_partner(row: tuple[str, Any], own: list[tuple], other: list[tuple]) -> tuple | None:
    """The (impl, options) of `other`, one run's rows at a setup, that stands for the same DDP as `row` of `own`, the
    other run's there, where `other` lacks `row` itself: the reference as shipped for its 25 MiB stand-in or the other
    way round, where the run holding the stand-in holds nothing as shipped (as the run page picks its reference,
    reference_rank). None otherwise, and for a row of `other` that `own` holds too: that one is matched already."""
    kind = _stand_in(*row)
    if kind is None or row in other:
        return None
    holder = other if kind == 0 else own  # the run with only the stand-in, if either
    if any(_stand_in(*r) == 0 for r in holder):
        return None
    partners = sorted(
        (reference_rank(o, i), (i, o)) for i, o in other if (i, o) not in own and _stand_in(i, o) == 1 - kind
    )
    return partners[0][1] if partners else None


def reference_pairs(base: set[tuple], new: set[tuple], keys: list[str]) -> dict[tuple, tuple]:
    """{a key of `base` that `new` lacks: the key of `new` that stands for the same DDP there} (reference_partner);
    `keys` names the keys' places (compare's match keys)."""
    i, o = keys.index("impl"), keys.index("impl_options")
    found = {}
    for key in base - new:
        own, other = ([(k[i], k[o]) for k in side if _setup(k, i, o) == _setup(key, i, o)] for side in (base, new))
        if partner := reference_partner((key[i], key[o]), own, other):
            found[key] = tuple({i: partner[0], o: partner[1]}.get(j, v) for j, v in enumerate(key))
    return found


def option_pairs(base: set[tuple], new: set[tuple], keys: list[str]) -> dict[tuple, tuple]:
    """{a key of `base` that `new` lacks: `new`'s key of the same strategy and setup at another option setting}, where
    each run measured that strategy at that setup at one setting only (a run before a DDP option and one with it,
    `--opt gradient_as_bucket_view=True`: the commonest change a gate judges); several settings a side would be a
    guess, so none is paired."""
    i, o = keys.index("impl"), keys.index("impl_options")
    found = {}
    for key in base - new:
        own, other = ([k for k in side if k[i] == key[i] and _setup(k, o) == _setup(key, o)] for side in (base, new))
        if len(own) == 1 and len(other) == 1:
            found[key] = other[0]
    return found


def _setup(key: tuple, *skipped: int) -> tuple:  # a key without its strategy's and options' places
    return tuple(v for j, v in enumerate(key) if j not in skipped)


def paired_words(base_key: tuple, new_key: tuple, keys: list[str]) -> str:
    """'stock (as shipped) -> stock bucket_cap_mb=25, its stand-in': BASE's configuration, then NEW's."""
    i, o = keys.index("impl"), keys.index("impl_options")
    return " -> ".join(configuration_label(k[i], k[o]) + (", its stand-in" if beyond_defaults(k[i], k[o])
                       else " (as shipped)") for k in (base_key, new_key))  # fmt: skip


def beyond_defaults(impl: str, options: Any) -> dict:
    """impls.beyond_defaults of a row's options (its JSON, or a mapping)."""
    return impls.beyond_defaults(impl, options_of(options))


def acting_options(impl: str, options: Any) -> str | None:
    """A row's options as they act (`beyond_defaults`), in the readers' canonical JSON text: a row asking its
    strategy's defaults by name, or an option that acts on nothing, reads as the plain row it runs alike with. The
    text as read where nothing is dropped (a null stays null)."""
    import json

    asked = options_of(options)
    acting = beyond_defaults(impl, asked)
    return options if acting == asked else json.dumps(acting, sort_keys=True)


def with_acting_options(rows: pd.DataFrame) -> pd.DataFrame:
    """`rows` with each `impl_options` as it acts (acting_options): rows that run alike match as one."""
    if rows.empty or "impl_options" not in rows:
        return rows
    pairs = zip(rows["impl"], rows["impl_options"], strict=True)
    return rows.assign(impl_options=[acting_options(impl, options) for impl, options in pairs])


def beyond_defaults_of(rows: pd.DataFrame) -> pd.Series:
    """Per row, `beyond_defaults` of its options: what its strategy ran with that its defaults are not."""
    pairs = zip(rows["impl"], rows["impl_options"], strict=True)
    return pd.Series([beyond_defaults(impl, options) for impl, options in pairs], index=rows.index, dtype=object)


def described(impl: str) -> tuple[str, str]:
    """(strategy `impl`'s registered description, its `instrument` words: why it is not one to deploy, '' where it
    is); ('', '') for a name no longer registered."""
    if impl not in impls.names():
        return "", ""
    entry = impls.entry(impl)
    return entry.description, getattr(entry.cls, "instrument", "")


def reference_name() -> str:
    """The reference strategy's name, for text where no row of it is at hand."""
    return impls.reference_name()


def baseline_name() -> str:
    """The baseline strategy's name, for text where no row of it is at hand."""
    return impls.baseline_name()


def names_of(which) -> list[str]:
    """The strategies whose rows `which` (a role predicate) selects, for text where no row is at hand (the bench that
    measures one: `bench --impls local,fsdp`)."""
    every = pd.DataFrame({"impl": impls.names()})
    return list(every.loc[which(every), "impl"])


def warmup_short_by(frame: pd.DataFrame) -> pd.Series:
    """Per ok row, how many of its measured steps came before its strategy was steady: the warm-up its
    strategy declares on the row's device (StrategyDefaults.warmup_needed) less the warm-up it ran, where
    that is more than 0 (a run with an explicit --warmup, or from before strategies declared it); 0 else."""
    columns = {"impl", "device", "warmup", "status"}
    if not len(frame) or not columns <= set(frame):
        return pd.Series(0, index=frame.index, dtype=int)
    needed = [_warmup_needed(impl, device) for impl, device in zip(frame["impl"], frame["device"], strict=True)]
    short = pd.Series(needed, index=frame.index) - frame["warmup"]  # an unknown warm-up is not a short one
    return short.where((frame["status"] == "ok") & (short > 0), 0).fillna(0).astype(int)


def short_warmups(frame: pd.DataFrame) -> pd.DataFrame:
    """The ok rows that warmed up less than their strategy needs on their device (warmup_short_by), with
    `needed`, the warm-up it declares there; empty where none."""
    short = warmup_short_by(frame)
    short = short[short > 0]
    if short.empty:  # (and a frame without the column: older rows, or none written yet)
        return frame.iloc[:0].assign(needed=[])
    return frame.loc[short.index].assign(needed=frame.loc[short.index, "warmup"] + short)


def _warmup_needed(impl: str, device: str) -> int:
    from harness.config.grid import warmup_needed

    return warmup_needed(impl, device) if impl in impls.names() and isinstance(device, str) else 0

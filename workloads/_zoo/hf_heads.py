"""The fields a transformers configuration derives from others (t5's num_decoder_layers, llama's head_dim and
key/value heads), made to follow the `--wopt` options that change those, as the configuration's own constructor
derives them."""

from __future__ import annotations

import contextlib
import functools
from typing import Any

WIDTH_FIELDS = ("head_dim", "d_kv", "kv_channels", "attention_head_dim")  # a head's width, by each of its names
PROBE = (96, 3)  # a width and head count no default has: what a constructor derives from them shows there


def options_set(config, model_type: str, fields: dict[str, Any], options: dict[str, Any]) -> None:
    """The options set on `config` (`fields`' configuration, scaled to a size), and what its constructor derives
    from them following them, as built with them: t5's num_decoder_layers from num_layers, layer_types from
    num_hidden_layers. Set after it was built, --wopt d_model=768 d_ff=3072 num_layers=12 num_heads=12 kept
    t5-small's 6 decoder layers: 166.3M parameters for T5-base's 222.9M."""
    from transformers import AutoConfig

    own = {_own_name(config, key): value for key, value in options.items()}
    defaults = AutoConfig.for_model(model_type, **fields).to_dict()
    derived = _derived_from(defaults, model_type, fields, own)
    sized = {key: value for key, value in config.to_dict().items() if defaults.get(key) != value}
    for key, value in options.items():  # by the names given (swin's num_attention_heads=8 is no list its num_heads)
        setattr(config, key, value)
    try:
        follow = derived - _sized_apart(sized, derived, model_type, fields)
        built = AutoConfig.for_model(model_type, **{**fields, **_without(sized, follow), **own}) if derived else None
    except Exception:  # a size's fields its validators refuse (zamba's layer_types at 2 layers): kept as set
        return
    for key in derived:
        with contextlib.suppress(Exception):  # a field its own setter refuses (neomme's per-layer view) stays
            setattr(config, key, getattr(built, key))


def _sized_apart(sized: dict[str, Any], derived: set[str], model_type: str, fields: dict[str, Any]) -> set[str]:
    """The derived fields the size set apart from what the constructor derives at the size: gemma3n's intermediate
    size (a list a layer), not t5's num_decoder_layers (num_layers' own): built with the options, they stay."""
    from transformers import AutoConfig

    if not derived & sized.keys():
        return set()
    at_size = AutoConfig.for_model(model_type, **{**fields, **_without(sized, derived)})
    return {key for key in derived & sized.keys() if getattr(at_size, key, None) != sized[key]}


def _derived_from(before: dict[str, Any], model_type: str, fields: dict[str, Any], options: dict[str, Any]) -> set:
    """The fields the constructor sets otherwise (than in `before`, built without them) when given the options: t5's
    num_decoder_layers for num_layers."""
    from transformers import AutoConfig

    if not options:
        return set()
    try:
        after = AutoConfig.for_model(model_type, **{**fields, **options}).to_dict()
    except Exception:  # options its validators refuse at its defaults (heads not dividing 4096): set as given, and
        return set()  # refused where wrong at the size by `check_heads`
    return {key for key in after if key not in options and before.get(key) != after[key]}


def _without(values: dict[str, Any], keys: set[str]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if key not in keys}


def heads_of(config) -> dict[str, Any]:
    """The width, the heads and the fields that may derive from them, by their own names (t5's d_kv for head_dim)."""
    own = {_own_name(config, field): getattr(config, field, None) for field in ("num_key_value_heads", *WIDTH_FIELDS)}
    return {**own, **{field: getattr(config, field, None) for field in ("hidden_size", "num_attention_heads")}}


def _own_name(config, field: str) -> str:
    return getattr(config, "attribute_map", {}).get(field, field)


@functools.cache
def _derived(model_type: str) -> frozenset[str]:
    """The fields `model_type`'s configuration derives from the width and the heads when they are not given (by
    their own names): llama's head_dim (the width over the heads) and key/value heads (every head); not qwen3's
    head_dim (128 whatever the width), t5's d_kv, or mistral's 8 key/value heads."""
    from transformers import AutoConfig

    hidden, heads = PROBE
    try:
        probe = AutoConfig.for_model(model_type, hidden_size=hidden, num_attention_heads=heads)
    except Exception:  # a configuration that takes neither: nothing of it follows them
        return frozenset()
    derived = {_own_name(probe, f) for f in WIDTH_FIELDS if getattr(probe, f, None) == hidden // heads}
    return frozenset(
        derived | ({"num_key_value_heads"} if getattr(probe, "num_key_value_heads", None) == heads else set())
    )


def heads_follow(config, before: dict[str, Any], *, model_type: str, kept: set[str]) -> None:
    """The fields the configuration's constructor derives from the width and the head count (`_derived`) follow
    options that change those, unless the options or the user's file set them (`kept`, by any of their names).
    Set one by one on the defaults, llama's hidden_size=2048 and num_attention_heads=16 kept 7B's 32 key/value
    heads and heads of 128, a model 14 % larger than the one described (and one whose attention cannot run)."""
    hidden, heads = getattr(config, "hidden_size", None), getattr(config, "num_attention_heads", None)
    old_hidden, old_heads = before["hidden_size"], before["num_attention_heads"]
    counts = all(is_count(v) for v in (hidden, heads, old_hidden, old_heads))
    if not counts or (hidden, heads) == (old_hidden, old_heads):
        return
    kept = {_own_name(config, name) for name in kept}
    for field in sorted(_derived(model_type) - kept):
        if field == "num_key_value_heads":
            if before[field] == old_heads:  # every head its own key/value head: still so
                config.num_key_value_heads = heads
        elif is_count(before.get(field)) and before[field] == old_hidden // old_heads:
            setattr(config, field, hidden // heads if hidden % heads == 0 else None)  # None: check_heads refuses


def is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1

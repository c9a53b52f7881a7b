"""`hf:MODEL_TYPE` and `hf:path/to/config.json`: any transformers architecture, built from its
configuration (`AutoConfig.for_model`, or the user's own file), never from downloaded weights.

The task follows from the architecture (first that applies: seq2seq, masked LM, causal LM, image
classification; a configuration file's `architectures` decides first; `--wopt task=…` overrides).
`full` is the configuration as it is (MODEL_TYPE: transformers' defaults, e.g. llama's 7B) at sequence FULL_SEQ,
or its max_position_embeddings where shorter (the longest sequence a model takes, not the one it trains at: 131,072
for Llama 3.1); `tiny` and `small` scale its standard fields down for the CPU (SCALES): layers, hidden size, heads
(as many key/value heads), intermediate size, vocabulary and the sequence; a configuration file's only down (a field
it sets smaller stays). Dropout is 0 so a step is deterministic (parity compares exactly); the key/value cache is
off. The parameters are fp32 whatever the
configuration's torch_dtype says (`--dtype` picks the compute). Options (`--wopt`) set any field
of the configuration after the scaling (`num_hidden_layers=4`), what its constructor derives from them following
as built with them (t5's num_decoder_layers, unless given), and `seq_len`, `task`.
FSDP's blocks are the model's own `_no_split_modules`; `tokens_per_sample` is the sequence length
(both sequences for seq2seq).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from pathlib import Path
from typing import Any

from harness.protocols import ConfigError, UnknownOption, WorkloadDefaults, lazy_module
from workloads._text import TransformerShape, causal_lm_batch, masked_lm_batch, token_loss
from workloads._zoo.hf_heads import heads_follow, heads_of, is_count, options_set
from workloads._zoo.hf_tasks import MAPPINGS, check_task, choose_task
from workloads._zoo.source import Source, did_you_mean, file_hash, unknown
from workloads._zoo.vision import deterministic

torch = lazy_module("torch")
F = lazy_module("torch.nn.functional")
nn = lazy_module("torch.nn")

OWN_OPTIONS = ("seq_len", "task")
COUNT_FIELD = re.compile(r"^(num|n)_|_(size|layers?|heads?|embd|embeddings|positions|dim)$")
"""Fields that count something (layers, heads, widths, positions): a model needs at least one of each."""


@dataclasses.dataclass(frozen=True)
class Scale:
    layers: int
    hidden: int
    heads: int
    intermediate: int
    vocab: int
    seq: int
    batch_size: int
    image_size: int
    patch_size: int


SCALES = {
    "tiny": Scale(layers=2, hidden=64, heads=2, intermediate=128, vocab=512, seq=32, batch_size=2, image_size=32,
                  patch_size=8),
    "small": Scale(layers=4, hidden=256, heads=4, intermediate=1024, vocab=4096, seq=128, batch_size=2,
                   image_size=64, patch_size=8),
}  # fmt: skip
FULL_BATCH, FULL_SEQ = 8, 1024

# The configuration fields each standard field goes by (the model's own where it has no attribute_map).
FIELDS = {
    "layers": ("num_hidden_layers", "num_layers", "num_decoder_layers", "encoder_layers", "decoder_layers"),
    "hidden": ("hidden_size", "d_model"),
    "heads": ("num_attention_heads", "num_heads", "num_key_value_heads", "encoder_attention_heads",
              "decoder_attention_heads"),
    "intermediate": ("intermediate_size", "d_ff", "n_inner", "ffn_dim", "encoder_ffn_dim", "decoder_ffn_dim"),
    "vocab": ("vocab_size",),
    "seq": ("max_position_embeddings",),
    "image_size": ("image_size",),
    "patch_size": ("patch_size",),
}  # fmt: skip


def source(target: str) -> Source:
    from transformers import CONFIG_MAPPING

    if target.endswith(".json") or "/" in target:
        path = Path(target).expanduser().resolve()
        if path.is_dir() and (path / "config.json").is_file():  # a model's folder, downloaded: its configuration
            path = path / "config.json"
        if not path.is_file():
            raise ConfigError(f"transformers configuration {target!r} does not exist (looked for {str(path)!r})"
                              + _hub_id_words(target, CONFIG_MAPPING.keys()))  # fmt: skip
        fields = _read_config(path)
        if fields["model_type"] not in CONFIG_MAPPING:  # else refused later, as if no task fitted it
            raise ConfigError(f"transformers configuration {path.name}: "
                              f"{unknown('model_type', fields['model_type'], CONFIG_MAPPING.keys())}")  # fmt: skip
        return _source(f"hf:{path}", f"hf:{path.parent.name}/{path.name}", fields, path=path)
    if target not in CONFIG_MAPPING:
        raise unknown("transformers model type", target, CONFIG_MAPPING.keys())
    return _source(f"hf:{target}", f"hf:{target}", {"model_type": target})


def _hub_id_words(target: str, model_types) -> str:
    """Where `target` reads as a Hugging Face Hub id (meta-llama/Llama-2-7b, no .json), that ddpbench downloads
    nothing, and the model type its name holds (the longest, hyphens and underscores aside: llama), as the spec
    to give: it was refused as a missing file, with no word on what to give instead."""
    if target.endswith(".json") or target.count("/") != 1 or target.startswith((".", "/", "~")):
        return ""
    plain = target.partition("/")[2].lower().replace("-", "").replace("_", "")
    held = [kind for kind in model_types if kind.replace("-", "").replace("_", "") in plain]
    given = f"hf:{max(held, key=len)} (its default configuration; --wopt sets its fields)" if held else "hf:MODEL_TYPE"
    return (f"; a Hugging Face Hub id is never downloaded: give {given}, or hf:PATH of the model's config.json, "
            f"downloaded yourself")  # fmt: skip


def _read_config(path: Path) -> dict[str, Any]:
    import json

    try:
        fields = json.loads(path.read_text())
    except ValueError as exc:
        raise ConfigError(f"transformers configuration {path.name} is not JSON: {exc}") from None
    if not isinstance(fields, dict) or "model_type" not in fields:
        raise ConfigError(f"transformers configuration {path.name} has no model_type (a model's config.json has)")
    return fields


def _source(spec: str, name: str, fields: dict[str, Any], *, path: Path | None = None) -> Source:
    def build(*, size: str, options: dict[str, Any]) -> HFModel:
        return HFModel(size=size, fields=fields, options=options, file=path.name if path else None)

    return Source(spec=spec, kind="hf", name=name, build=build, path=str(path) if path else None,
                  sha256=file_hash(path) if path else None,
                  check_options=lambda options: build(size="tiny", options=options).check(name),
                  check_workload=lambda workload: workload.check_built(name))  # fmt: skip


class HFModel(WorkloadDefaults):
    """A transformers architecture on random tokens (or images), at one size, with options."""

    requires = ("transformers",)

    def __init__(self, *, size: str, fields: dict[str, Any], options: dict[str, Any], file: str | None = None) -> None:
        self.size, self.fields, self.options, self.file = size, dict(fields), dict(options), file
        scale = SCALES.get(size)
        given = self.options.pop("task", None)
        self.task = given or choose_task(fields)
        self._task_by_default = given is None and not fields.get("architectures")
        self.batch_size = scale.batch_size if scale else FULL_BATCH
        self._seq_option = self.options.pop("seq_len", None)
        self._seq = self._seq_option or (scale.seq if scale else None)
        positions = _file_positions(fields) if file and scale and not self._seq_option else None
        if is_count(positions) and positions < scale.seq:
            self._seq = positions  # a file's own positions: a size scales it down only

    @functools.cached_property
    def settings(self):
        """The configuration, made once: the fields, scaled to the size, then the options."""
        return self.config()

    def config(self):
        """The configuration: the fields, scaled to the size, then the options (a fresh one each call)."""
        from transformers import AutoConfig

        fields = dict(self.fields)
        config = AutoConfig.for_model(fields.pop("model_type"), **fields)
        for part in _parts(config):  # a composite's own fields and its parts' (CLIP's text and vision models)
            if self.size in SCALES:
                _scale(part, SCALES[self.size], self.task, down_only=self.file is not None)
            _quiet(part)
        if self._seq:
            _set_if_smaller(config, "max_position_embeddings", int(self._seq))
        before = heads_of(config)
        options_set(config, self.fields["model_type"], fields, self.options)
        heads_follow(config, before, model_type=self.fields["model_type"], kept={*self.options, *self.fields})
        return config

    def check(self, name: str) -> None:
        """Options that are no field of this configuration are bad input, named with the fields it has."""
        check_task(name, self.fields["model_type"], self.task, by_default=self._task_by_default)
        config = HFModel(size=self.size, fields=self.fields, options={}).config()  # its fields, none set by options
        unknown_keys = [key for key in self.options if not _has_field(config, key)]
        if unknown_keys:
            fields = f"its configuration's fields ({type(config).__name__}) and {', '.join(OWN_OPTIONS)}"
            near = did_you_mean(unknown_keys, [*vars(config), *getattr(config, "attribute_map", {}), *OWN_OPTIONS])
            raise UnknownOption(f"{name} has no configuration field {', '.join(unknown_keys)}{near}; options are "
                                f"{fields}")  # fmt: skip
        counts = {key: value for key, value in self.options.items()
                  if COUNT_FIELD.search(key) and is_count(getattr(config, key, None))}  # fmt: skip
        if self._seq_option is not None:
            counts["seq_len"] = self._seq_option
        for key, value in counts.items():
            if not is_count(value):
                raise ConfigError(f"--wopt {key}={value} is not valid for {name}; give a whole number ≥ 1")

    def check_built(self, name: str) -> None:
        """What bench and predict check of it before any rank starts: a task chosen by default that builds a part
        alone of the architecture (hf:whisper's decoder), then the heads at the run's size."""
        check_task(name, self.fields["model_type"], self.task, by_default=self._task_by_default)
        self.check_heads(name)

    def check_heads(self, name: str) -> None:
        """Head counts that do not divide, at the run's size, are bad input: the model builds, and its first
        forward fails in every rank (llama: 3 attention heads over tiny's 2 key/value heads)."""
        for part in _parts(self.config()):
            heads, kv_heads = getattr(part, "num_attention_heads", None), getattr(part, "num_key_value_heads", None)
            hidden = getattr(part, "hidden_size", None)
            if is_count(heads) and is_count(kv_heads) and heads % kv_heads:
                raise self._heads_error(name, f"num_attention_heads={heads} is not a multiple of "
                                              f"num_key_value_heads={kv_heads}")  # fmt: skip
            own_width = any(getattr(part, field, None) is not None for field in ("head_dim", "d_kv"))
            if is_count(heads) and is_count(hidden) and not own_width and hidden % heads:
                raise self._heads_error(name, f"hidden_size={hidden} is not a multiple of num_attention_heads={heads}")

    def _heads_error(self, name: str, why: str) -> ConfigError:
        given = " ".join(f"--wopt {key}={value}" for key, value in self.options.items())
        return ConfigError(f"{name} at --size {self.size}: {why}" + (f" (given {given})" if given else "")
                           + "; its first step would fail in every rank")  # fmt: skip

    @property
    def seq(self) -> int:
        if self._seq:
            return int(self._seq)
        limit = getattr(self.settings, "max_position_embeddings", None) or FULL_SEQ
        return min(FULL_SEQ, int(limit))

    @property
    def positions_beyond_seq(self) -> int | None:
        """The configuration's max_position_embeddings where the sequence (no seq_len given: FULL_SEQ at full) is
        shorter: `list` says it, as a model trained at its positions is benched at them only with --wopt seq_len."""
        limit = None if self._seq else getattr(self.settings, "max_position_embeddings", None)
        return limit if isinstance(limit, int) and limit > self.seq else None

    @property
    def full_is(self) -> str:
        """What full is, for `list`: "transformers' default T5Config, like google-t5/t5-small (its docs say)", the
        checkpoint its configuration's docstring names (hf:t5's 60.5M never said it was t5-small), or the file."""
        from transformers import CONFIG_MAPPING

        given = " with the --wopt given" if set(self.options) - set(OWN_OPTIONS) else ""
        if self.file:
            return f"full is {self.file} as it is{given}"
        config = CONFIG_MAPPING[self.fields["model_type"]]
        like = re.search(r"similar configuration to that of the\s+\[([^\]]+)\]", config.__doc__ or "")
        said = f", like {like[1]} (its docs say)" if like else ""
        return f"full is transformers' default {config.__name__}{said}{given}"

    @property
    def image_size(self) -> int | None:
        """The side of its images (image classification); None for a model of tokens."""
        if self.task != "image_classification":
            return None
        config = self.settings
        vision = config if hasattr(config, "image_size") else getattr(config, "vision_config", config)
        return int(getattr(vision, "image_size", 224))

    def build_model(self) -> nn.Module:
        import transformers

        transformers.logging.set_verbosity_error()  # a model built from a config: nothing worth a warning
        auto = getattr(transformers, MAPPINGS[self.task][1])
        # fp32 whatever the configuration's torch_dtype says (from_config honours it, its parts' too): --dtype
        # picks the compute under autocast (`dtype_ignored` says what was asked)
        return deterministic(auto.from_config(self.config(), dtype=torch.float32)).train()

    @property
    def dtype_ignored(self) -> str | None:
        """The dtype the configuration (its file, a part of it, or --wopt) names where not fp32, which `build_model`
        does not build in, in words ("config.json's torch_dtype bfloat16"); None where it names none. A published
        config.json's "bfloat16" once built bf16 parameters, gradients and Adam state: half the all-reduce bytes
        and model state of the fp32 weights --dtype's autocast keeps, and on a CPU matmuls ~60x slower."""
        where = f"{self.file or 'the configuration'}'s"
        parts = [self.fields, *(part for part in self.fields.values() if isinstance(part, dict))]
        for said, values in [*((where, part) for part in parts), ("--wopt", self.options)]:
            for field in ("torch_dtype", "dtype"):
                value = values.get(field)
                if value is not None and str(value).removeprefix("torch.") not in ("float32", "fp32"):
                    value = str(value).removeprefix("torch.")
                    return f"--wopt {field}={value}" if said == "--wopt" else f"{said} {field} {value}"
        return None

    def default_batch_size(self) -> int:
        return self.batch_size

    def tokens_per_sample(self) -> int | None:
        if self.task == "image_classification":
            return None
        return 2 * self.seq if self.task == "seq2seq" else self.seq

    def blocks(self, model: nn.Module) -> list[nn.Module] | None:
        names = set(getattr(model, "_no_split_modules", None) or ())
        found = [module for module in model.modules() if type(module).__name__ in names]
        return found or None

    def make_batch(self, batch_size: int, *, device: torch.device, generator: torch.Generator):
        config = self.settings
        if self.task == "image_classification":
            vision = config if hasattr(config, "image_size") else getattr(config, "vision_config", config)
            images = torch.randn(batch_size, int(getattr(vision, "num_channels", 3)), self.image_size, self.image_size,
                                 device=device, generator=generator)  # fmt: skip
            return images, torch.randint(0, config.num_labels, (batch_size,), device=device, generator=generator)
        shape = TransformerShape(layers=0, hidden=0, heads=0, vocab=config.vocab_size, seq=self.seq, batch_size=0)
        if self.task == "masked_lm":
            return masked_lm_batch(batch_size, shape, device=device, generator=generator)
        if self.task == "seq2seq":
            source = torch.randint(0, shape.vocab, (batch_size, shape.seq), device=device, generator=generator)
            return (source, *causal_lm_batch(batch_size, shape, device=device, generator=generator))
        return causal_lm_batch(batch_size, shape, device=device, generator=generator)

    def loss(self, model: nn.Module, batch) -> torch.Tensor:
        if self.task == "image_classification":
            images, labels = batch
            return F.cross_entropy(model(pixel_values=images).logits, labels)
        if self.task == "seq2seq":
            source, decoder_inputs, labels = batch
            return token_loss(model(input_ids=source, decoder_input_ids=decoder_inputs).logits, labels)
        inputs, labels = batch
        return token_loss(model(input_ids=inputs).logits, labels)


def _parts(config) -> list:
    """The configuration and those it holds (a composite's text_config, vision_config, …)."""
    from transformers import PretrainedConfig

    return [config, *(value for value in vars(config).values() if isinstance(value, PretrainedConfig))]


def _scale(config, scale: Scale, task: str, *, down_only: bool = False) -> None:
    """The standard fields of `config` set to `scale` where it has them (heads' sizes following). `down_only` (a
    configuration file of the user's): a field only where the scale is smaller than the file's, and the heads and
    the image's patch only with the width and the side they divide (a small file stays as small as it is)."""
    wanted = {"layers": scale.layers, "hidden": scale.hidden, "heads": scale.heads, "intermediate": scale.intermediate,
              "vocab": scale.vocab, "seq": scale.seq}  # fmt: skip
    if task == "image_classification":
        wanted.update(image_size=scale.image_size, patch_size=scale.patch_size)
    if down_only:
        for standard, follows in (("hidden", "heads"), ("image_size", "patch_size")):
            if standard in wanted and not _larger(config, standard, wanted[standard]):
                del wanted[standard], wanted[follows]
    for standard, value in wanted.items():
        for field in FIELDS[standard]:
            down = not down_only or standard in ("heads", "patch_size") or _larger(config, field, value)
            if _has_field(config, field) and getattr(config, field, None) is not None and down:
                setattr(config, field, value)
    for field in ("head_dim", "d_kv"):  # a head's width, where the configuration keeps it apart
        if getattr(config, field, None) is not None and "hidden" in wanted:
            setattr(config, field, scale.hidden // scale.heads)
    vocab = getattr(config, "vocab_size", None) if down_only else scale.vocab
    for field, value in vars(config).items():  # token ids the smaller vocabulary no longer has
        if field.endswith("token_id") and isinstance(value, int) and is_count(vocab) and value >= vocab:
            setattr(config, field, vocab - 1)


def _file_positions(fields: dict[str, Any]) -> Any:
    """The positions a configuration file gives, by its model's own name for them (gpt2's n_positions)."""
    from transformers import CONFIG_MAPPING

    own = getattr(CONFIG_MAPPING[fields["model_type"]], "attribute_map", {}).get("max_position_embeddings")
    return fields.get("max_position_embeddings", fields.get(own) if own else None)


def _larger(config, standard_or_field: str, value: int) -> bool:
    """Whether the configuration's field (or any field of a standard one) is larger than `value`."""
    fields = FIELDS.get(standard_or_field, (standard_or_field,))
    return any(
        is_count(getattr(config, f, None)) and getattr(config, f) > value for f in fields if _has_field(config, f)
    )


def _quiet(config) -> None:
    """No dropout (a step is deterministic, so parity can be exact) and no key/value cache (training)."""
    for field, value in list(vars(config).items()):
        if isinstance(value, float) and ("dropout" in field or field.endswith("pdrop") or field == "dropout_rate"):
            setattr(config, field, 0.0)
    if hasattr(config, "use_cache"):
        config.use_cache = False


def _set_if_smaller(config, field: str, value: int) -> None:
    if _has_field(config, field) and (getattr(config, field, None) or 0) < value:
        setattr(config, field, value)


def _has_field(config, field: str) -> bool:
    return field in vars(config) or field in getattr(config, "attribute_map", {})

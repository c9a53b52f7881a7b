"""Standard workloads (model + synthetic data + loss), one file each, registered by name; and every
workload beyond them, named by a spec (workloads._zoo: the user's own file or module, torchvision,
transformers, timm).

import workloads
workloads.names()                              # ['mlp', ...]: the registered ones
w = workloads.create("mlp", size="tiny")
w = workloads.create("hf:llama", size="tiny", options={"num_hidden_layers": 4})
source = workloads.resolve("my_workload.py:MyModel")  # checked on the parent side, before anything runs
"""

import functools
from typing import Any

from harness.protocols import ConfigError, Registry, UnknownOption, Workload

REGISTRY: Registry[Workload] = Registry("workload", __name__)
register = REGISTRY.register
names = REGISTRY.names
entry = REGISTRY.entry


def resolve(spec: str):
    """The `Source` of a workload (workloads._zoo.Source): a registered name or a spec (resolved once per
    process: a rank builds its workload several times)."""
    from workloads import _zoo
    from workloads._zoo.source import Source

    if spec not in names() and _zoo.is_spec(spec):
        return _resolved(spec)
    if spec in names():
        return Source(spec=spec, kind="registered", name=spec,
                           build=lambda *, size, options: REGISTRY.create(spec, size=size, **options),
                           check_options=lambda options: _check_registered(spec, options))  # fmt: skip
    if not _zoo.is_spec(spec):
        near = " or ".join(_zoo.specs_named(spec))
        raise ConfigError(f"unknown workload {spec!r}; " + (f"did you mean {near}? " if near else "")
                          + f"choose one of {', '.join(names())}, or give a spec: "
                          f"FILE.py:NAME, package.module:NAME, torchvision:NAME, hf:MODEL_TYPE, timm:NAME")  # fmt: skip
    return _zoo.resolve(spec)


@functools.lru_cache(maxsize=32)
def _resolved(spec: str):
    from workloads import _zoo

    return _zoo.resolve(spec)


def create(spec: str, *, size: str = "tiny", options: dict[str, Any] | None = None) -> Workload:
    """The workload `spec` names, at `size`, with its options (a dict: a file's model may take an option named
    `size` of its own)."""
    return resolve(spec).create(size=size, options=dict(options or {}))


def parse_options(spec: str, texts: dict[str, str]) -> dict[str, Any]:
    """`--wopt key=value` texts as the workload's option values: a registered workload's typed and checked
    (ConfigError naming a key it does not take); the others' as JSON literals (4, 0.5, true) or text."""
    if spec in names():
        _check_registered(spec, texts)
        return REGISTRY.parse_options(spec, texts)
    from workloads._zoo.source import option_value

    return {key: option_value(text) for key, text in texts.items()}


def _check_registered(name: str, options: dict[str, Any]) -> None:
    valid = [key for key in entry(name).options() if key != "size"]  # --size sets the size
    unknown = sorted(set(options) - set(valid))
    if unknown:
        zoo = ("; the zoo's models take their configuration's fields, e.g. --workloads hf:gpt2 --wopt "
               "seq_len=1024: docs/your-model.md")  # fmt: skip  # no bracket: a refusal brackets this text
        from workloads._zoo.source import did_you_mean

        near = did_you_mean(unknown, valid)
        raise UnknownOption(f"workload {name!r} has no option {', '.join(unknown)}{near}; valid options: "
                          f"{', '.join(valid) or 'none' + zoo}")  # fmt: skip

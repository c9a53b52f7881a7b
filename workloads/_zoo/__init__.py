"""Workloads beyond the registered ones: the user's own file or module, and any architecture of
torchvision, transformers or timm, each built from a configuration with synthetic data.

    path/to/file.py:NAME     a class (built with the workload options) or a zero-argument factory
    package.module:NAME      the same, imported (the working directory is on the path, as for `python -m`)
    torchvision:NAME         torchvision.models.get_model(NAME, weights=None), a classification model
    hf:MODEL_TYPE            transformers' AutoConfig.for_model(MODEL_TYPE), scaled by --size
    hf:path/to/config.json   the user's own transformers configuration
    timm:NAME                timm.create_model(NAME, pretrained=False), when timm is installed

`resolve` turns a spec into a `Source` on the parent side, checking everything it can (the file, the
name, the three methods, the zoo name), so that bad input is one line before anything runs; a rank
rebuilds the workload from the source's `spec` (files as absolute paths) with `Source.create`.
Private (leading underscore): the registry does not load it as a plug-in.
"""

from __future__ import annotations

import functools

from harness.protocols import ConfigError
from workloads._zoo.source import OTHER_TASKS, Source, unknown_torchvision

ZOOS = ("torchvision", "hf", "timm")


def is_spec(text: str) -> bool:
    """Whether `text` names a workload by a spec (KIND:NAME or FILE:NAME) rather than a registered name."""
    return ":" in text


def resolve(spec: str) -> Source:
    """The source a spec names; ConfigError with one line naming what is wrong and what is valid."""
    left, sep, target = spec.partition(":")
    if not sep or not left or not target:
        raise ConfigError(f"workload {spec!r} is not a spec; give FILE.py:NAME, package.module:NAME, "
                          f"torchvision:NAME, hf:MODEL_TYPE, hf:config.json or timm:NAME")  # fmt: skip
    if left in ZOOS:
        from workloads._zoo import hf, timm_models, vision

        return {"torchvision": vision.torchvision_source, "hf": hf.source, "timm": timm_models.source}[left](target)
    from workloads._zoo import user

    return user.source(left, target)


def unfindable(spec: str) -> str | None:
    """Why a `package.module:NAME` spec cannot be imported, where its top package is on neither the import path nor
    in the working folder, as user.load_module says it: found without importing anything, so that a command says it
    before torch loads (a walkthrough's `tv:vit` took 20 s to be refused); None where it may import (resolve
    decides). A `torchvision:NAME` that torchvision's source registers no model by is said here too."""
    import importlib.machinery
    import importlib.util
    import os

    left, sep, target = spec.partition(":")
    if left == "torchvision" and target and (known := torchvision_names()) is not None and target not in known:
        return str(unknown_torchvision(target, known, torchvision_other_models()))  # resolve's words, 10 s sooner
    if not (sep and left and target) or left in ZOOS or left.endswith(".py") or os.sep in left or "/" in left:
        return None
    top = left.partition(".")[0]
    try:
        found = importlib.util.find_spec(top) or importlib.machinery.PathFinder.find_spec(top, [os.getcwd()])
    except (ImportError, ValueError):
        return None
    return (
        None if found else f"workload module {left!r} cannot be imported: ModuleNotFoundError: No module named {top!r}"
    )


def specs_named(name: str) -> list[str]:
    """The zoo specs a bare name stands for (vit_b_16: torchvision:vit_b_16; llama: hf:llama), read from the installed
    packages' files without importing them, for the refusal of a name given without its zoo: `list vit_b_16` and
    `--workloads llama` named the registered workloads and the spec forms alone."""
    import importlib.util
    import re
    from pathlib import Path

    specs = [f"torchvision:{name}"] if name in (torchvision_names() or ()) else []
    try:
        found = importlib.util.find_spec("transformers")
    except (ImportError, ValueError):
        found = None
    if found is not None and found.submodule_search_locations and re.fullmatch(r"[\w-]+", name):
        folder = Path(next(iter(found.submodule_search_locations)), "models", name.lower().replace("-", "_"))
        for path in sorted(folder.glob("configuration_*.py")):
            kinds = re.findall(r'^\s+model_type = "([^"]+)"', path.read_text(encoding="utf-8"), re.M)
            specs += [f"hf:{kind}" for kind in kinds if kind.replace("-", "_") == folder.name]
    return list(dict.fromkeys(specs))


@functools.cache  # read once a process, however many specs name torchvision
def torchvision_names() -> frozenset[str] | None:
    """The names `torchvision.models.list_models(module=torchvision.models)` gives (`vision.torchvision_source`'s),
    read from the installed package's source without importing it (torch and torchvision: 10 s, 20 on a busy CPU):
    each function of a torchvision/models/*.py decorated `@register_model()` (its name) or `@register_model("N")`
    (N). None where torchvision is not installed, or a file registers a model any other way (a call not a
    decorator, a name not a literal): the import decides then."""
    folder = _models_folder()
    names = _registered(sorted(folder.glob("*.py"))) if folder else None
    return frozenset(names) if names else None


@functools.cache
def torchvision_other_models() -> dict[str, str]:
    """The models torchvision registers for another task than classification, by name, with the folder of
    torchvision.models that says the task (fasterrcnn_resnet50_fpn: detection), read from its source as
    `torchvision_names`: such a name is refused saying why, not as one torchvision lacks. Empty where unread."""
    folder = _models_folder()
    found = {sub: _registered(sorted((folder / sub).glob("*.py"))) if folder else None for sub in OTHER_TASKS}
    return {name: sub for sub, names in found.items() for name in names or ()}


def _models_folder():
    """torchvision/models of the installed torchvision, found without importing it; None where not installed."""
    import importlib.util
    from pathlib import Path

    try:
        found = importlib.util.find_spec("torchvision")
    except (ImportError, ValueError):
        return None
    if found is None or not found.submodule_search_locations:
        return None
    return Path(next(iter(found.submodule_search_locations)), "models")


def _registered(paths) -> set[str] | None:
    """The names the files register models by (`@register_model()`: the function's; `@register_model("N")`: N);
    None where one registers a model any other way (a call not a decorator, a name not a literal)."""
    import ast

    names: set[str] = set()
    for path in paths:
        text = path.read_text(encoding="utf-8")
        if "register_model" not in text:
            continue
        tree = ast.parse(text)
        decorated = {id(d): f.name for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) for d in f.decorator_list}
        for call in ast.walk(tree):
            if not (isinstance(call, ast.Call) and _called(call.func) == "register_model"):
                continue
            given = [*call.args, *(k.value for k in call.keywords if k.arg == "name")]
            if id(call) not in decorated or len(given) > 1 or len(call.args) + len(call.keywords) != len(given):
                return None
            if given and not (isinstance(given[0], ast.Constant) and isinstance(given[0].value, str)):
                return None
            names.add(given[0].value if given else decorated[id(call)])
    return names


def _called(func) -> str | None:
    """The name a call's function goes by: `register_model(…)` or `_api.register_model(…)`."""
    import ast

    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None

"""The --wopt options of a `torchvision:NAME` model read from torchvision's source, without importing it (torch and
torchvision: 10 s, 20 on a busy CPU), so that a key the model takes nowhere is refused before that import, as its
name already is (`workloads._zoo.unfindable`). The words are `vision`'s own check's, which decides where this cannot.

The options are the ones `vision._givable` finds by building the model: the keywords of its class's `__init__` of a
plain type (int, float, bool, str, None, or an Optional/Union of them; untyped, a default of one), less those the
harness sets (IGNORED) and those its builder fixes (passed by the builder, or a helper it calls, alongside the user's
`**kwargs`, unless popped from them first), plus image_size and num_classes. Read where the builder's chain is plain
calls: builder(**kwargs) → helper(…, **kwargs) → Class(…, **kwargs), in one file; None (unsure) otherwise.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from workloads._zoo.source import did_you_mean

OWN_OPTIONS = ("image_size", "num_classes")
"""The options every image model takes: the harness sets its input and its head by them."""
IGNORED = {"self", "weights", "progress", "num_classes", "img_size"}
"""Keywords of a model's class that are no option: the harness sets them (timm's img_size from image_size)."""
PLAIN = {"int", "float", "bool", "str", "None"}
HOPS = 4  # builder → helpers → the class: torchvision's chains are 2 or 3 calls


def no_option_words(shown: str, unknown: list[str], valid: list[str]) -> str:
    """'torchvision:resnet18 takes no option BAD; its options: groups, …': an image model's refusal of a key."""
    return (
        f"{shown} takes no option {', '.join(unknown)}{did_you_mean(unknown, valid)}; its options: {', '.join(valid)}"
    )


def untaken_words(name: str, key: str) -> str | None:
    """`no_option_words` for torchvision model `name` and --wopt `key`, where its source shows the model takes no such
    option; None where it may take it, or where its source cannot tell."""
    valid = torchvision_options(name)
    if valid is None or key in valid:
        return None
    return no_option_words(f"torchvision:{name}", [key], sorted(valid))


def torchvision_options(name: str) -> frozenset[str] | None:
    """The options a command line can give torchvision model `name` (as `vision._givable` and OWN_OPTIONS); None
    where torchvision is not installed, `name` is no registered builder of its models' files, or its chain is not
    plain calls (the build decides then)."""
    for tree in _model_files():
        defined = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
        builder = defined.get(name)
        if isinstance(builder, ast.FunctionDef) and any(_registers(d) for d in builder.decorator_list):
            try:
                return _options(builder, defined)
            except _Unsure:
                return None
    return None


class _Unsure(Exception):
    """The source does not show what the build would: the build decides."""


@functools.cache  # parsed once a process
def _model_files() -> tuple[ast.Module, ...]:
    import importlib.util

    try:
        found = importlib.util.find_spec("torchvision")
    except (ImportError, ValueError):
        return ()
    if found is None or not found.submodule_search_locations:
        return ()
    folder = Path(next(iter(found.submodule_search_locations)), "models")
    return tuple(ast.parse(path.read_text(encoding="utf-8")) for path in sorted(folder.glob("*.py")))


def _registers(decorator: ast.expr) -> bool:
    func = decorator.func if isinstance(decorator, ast.Call) else decorator
    return (func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)) == "register_model"


def _options(builder: ast.FunctionDef, defined: dict[str, ast.AST]) -> frozenset[str]:
    """Down the chain from builder to class, the keywords fixed on the way; the class's plain ones less those."""
    fixed, popped, function = set(), set(), builder
    for _ in range(HOPS):
        rest = _rest(function)
        popped |= {call.args[0].value for call in ast.walk(function) if _pops(call, rest)}
        passing = [call for call in ast.walk(function) if isinstance(call, ast.Call) and _passes(call, rest)]
        if len(passing) != 1 or not isinstance(passing[0].func, ast.Name) or passing[0].func.id not in defined:
            raise _Unsure
        call, callee = passing[0], defined[passing[0].func.id]
        init = _init(callee) if isinstance(callee, ast.ClassDef) else callee
        named = [a.arg for a in (*init.args.posonlyargs, *init.args.args)][isinstance(callee, ast.ClassDef) :]
        fixed |= ({*named[: len(call.args)], *(k.arg for k in call.keywords if k.arg)}) - popped
        if isinstance(callee, ast.ClassDef):
            return frozenset((_plain_keywords(init) - IGNORED - fixed) | set(OWN_OPTIONS))
        function = callee
    raise _Unsure


def _rest(function: ast.FunctionDef) -> str:
    """The name of the `**kwargs` the user's options travel in."""
    if function.args.kwarg is None:
        raise _Unsure
    return function.args.kwarg.arg


def _pops(node: ast.AST, rest: str) -> bool:
    """`kwargs.pop("key", …)`: the key leaves the user's options here, and is no longer passed twice below."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "pop"
            and isinstance(node.func.value, ast.Name) and node.func.value.id == rest and bool(node.args)
            and isinstance(node.args[0], ast.Constant))  # fmt: skip


def _passes(call: ast.Call, rest: str) -> bool:
    return any(k.arg is None and isinstance(k.value, ast.Name) and k.value.id == rest for k in call.keywords)


def _init(cls: ast.ClassDef) -> ast.FunctionDef:
    """The class's own `__init__`; unsure where it inherits one or reads a `**kwargs` (`vision.keywords`: then no
    key is refused by name)."""
    init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    if init is None:
        raise _Unsure
    rest = init.args.kwarg.arg if init.args.kwarg else None
    if rest and any(isinstance(n, ast.Name) and n.id == rest for n in ast.walk(init)):
        raise _Unsure
    return init


def _plain_keywords(init: ast.FunctionDef) -> set[str]:
    """The keywords of `init` of a plain type (vision._plain_value's PLAIN)."""
    positional = [*init.args.posonlyargs, *init.args.args]
    with_default = positional[len(positional) - len(init.args.defaults) :]  # the last ones have the defaults
    defaults = {a.arg: d for a, d in zip(with_default, init.args.defaults, strict=True)}
    defaults |= {a.arg: d for a, d in zip(init.args.kwonlyargs, init.args.kw_defaults, strict=True) if d is not None}
    every = [*positional[1:], *init.args.kwonlyargs]
    return {a.arg for a in every if _plain(a.annotation, defaults.get(a.arg))}


def _plain(annotation: ast.expr | None, default: ast.expr | None = None) -> bool:
    if annotation is None:  # untyped: plain where its default is (-1 too)
        if isinstance(default, ast.UnaryOp) and isinstance(default.op, ast.USub):
            default = default.operand
        return isinstance(default, ast.Constant) and type(default.value) in (int, float, bool, str, type(None))
    if isinstance(annotation, ast.Name):
        return annotation.id in PLAIN
    if isinstance(annotation, ast.Constant):
        return annotation.value is None
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):  # int | None
        return _plain(annotation.left) and _plain(annotation.right)
    if isinstance(annotation, ast.Subscript) and getattr(annotation.value, "id", None) in ("Optional", "Union"):
        inner = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
        return all(_plain(kind) for kind in inner)
    return False

"""The registry of plug-ins and their options: how `--opt key=value` becomes a typed option.

Part of the contract (harness.protocols re-exports all of it): a plug-in is a keyword-only
dataclass whose init fields are its options, declared with `option()`; the registry reads those
fields to validate and coerce text from the command line, so a plug-in never parses text itself.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import math
import pkgutil
import sys
import types
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar


class ConfigError(ValueError):
    """A bad value from the user. The CLI prints its message as one line and exits with 2."""


class PluginError(ConfigError, TypeError):
    """A plug-in file that breaks its contract (a member missing, an unknown role): the user's input as much as a
    flag is, so said in one line that names the file (exit 2), not as a traceback out of every command."""


class UnknownOption(ConfigError):
    """An option the plug-in does not take at all, as against a value of one it takes: with several
    workloads, a key one of them lacks applies to the others, while a value one refuses is bad input."""


T = TypeVar("T")


def option(default: Any, doc: str, *, valid: str = "", above: float | None = None) -> Any:
    """An option of a plug-in: a dataclass field with its default and the line `ddpbench list` shows.

        bucket_cap_mb: float | None = option(None, "Largest gradient bucket in MiB.", valid="MiB > 0")

    `valid` says in words which values of the type the plug-in accepts (its `__post_init__` checks
    the range, or `above`: a number must be greater, checked with the type); a bad value's error
    quotes it as given. The doc, `valid` and `above` travel in the field's metadata, so a class that
    inherits the field (options shared by several strategies) inherits them too.
    """
    return dataclasses.field(default=default, metadata={"doc": " ".join(doc.split()), "valid": valid, "above": above})


@dataclasses.dataclass(frozen=True)
class Option:
    """One option of a plug-in: its name, type, default, the doc given to `option` and its valid range."""

    name: str
    type: Any
    default: Any
    doc: str
    valid: str = ""
    above: float | None = None  # a number must be greater (bucket_cap_mb: MiB > 0)

    def choices(self) -> tuple[Any, ...] | None:
        return typing.get_args(self.type) if typing.get_origin(self.type) is Literal else None

    @property
    def optional(self) -> bool:
        """Whether None (the option left unset) is a value of this option."""
        return typing.get_origin(self.type) in (typing.Union, types.UnionType) and type(None) in typing.get_args(
            self.type
        )

    def type_name(self) -> str:
        choices = self.choices()
        if choices:
            return "|".join(str(c) for c in choices)
        return getattr(self.type, "__name__", str(self.type))

    def coerce(self, text: str, *, typed: str | None = None) -> Any:
        """Turn command-line text into this option's value, or raise ConfigError naming the text and
        what is valid (`typed`: the flag and text as the user typed them, as `check` takes it)."""
        choices = self.choices()
        base = _strip_optional(self.type)
        try:
            if choices:
                value = next((c for c in choices if text == str(c)), _NOT_PARSED)
            elif base is bool:
                value = _parse_bool(text)
            else:
                value = base(text)
        except ValueError:
            value = _NOT_PARSED
        return self.check(value, shown=repr(text), typed=typed)

    def check(self, value: Any, *, shown: str | None = None, typed: str | None = None) -> Any:
        """`value` if it is one of this option's values (an int given for a float becomes the float),
        else ConfigError: one line naming the value (`shown`, default its repr) and what is valid, the option
        by its name; or, from the command line, what the user typed (`typed`: "--bucket-cap-mb '0'", "--opt
        bucket_cap_mb=-1": one template for every flag that gives an option, none of which can unset it)."""
        if value is None and self.optional:
            return None
        checked = self._checked(value)
        if checked is _NOT_PARSED and typed:  # a flag's words: bench's other flags say theirs so
            raise ConfigError(f"{typed} is not valid; give {self.expected(unset=False)}")
        if checked is _NOT_PARSED:
            raise ConfigError(f"{self.name}: {shown or repr(value)} is not {self.expected()}")
        return checked

    def _checked(self, value: Any) -> Any:
        choices = self.choices()
        base = _strip_optional(self.type)
        if choices:
            return value if any(value == c and type(value) is type(c) for c in choices) else _NOT_PARSED
        if base is bool:
            return value if isinstance(value, bool) else _NOT_PARSED
        if base is int:
            return value if isinstance(value, int) and not isinstance(value, bool) else _NOT_PARSED
        if base is float:
            number = isinstance(value, int | float) and not isinstance(value, bool)
            above = self.above is None or (number and value > self.above)
            return float(value) if number and math.isfinite(value) and above else _NOT_PARSED
        return value if not isinstance(base, type) or isinstance(value, base) else _NOT_PARSED

    def expected(self, *, unset: bool = True) -> str:
        """What a valid value is, in words: "one of none, fp16", "a number (MiB > 0, or unset)" (`unset`: said
        where the option may be left unset)."""
        choices = self.choices()
        base = _strip_optional(self.type)
        if choices:
            kind = "one of " + ", ".join(map(str, choices))
        elif base is bool:
            kind = "one of true, false"
        else:
            kind = {int: "a whole number", float: "a finite number"}.get(base, f"a {self.type_name()}")
        notes = [note for note in (self.valid, "or unset" if self.optional and unset else "") if note]
        return f"{kind} ({', '.join(notes)})" if notes else kind


_NOT_PARSED = object()
"""What `Option` returns for a value that is not one of the option's: never a valid value."""


def _strip_optional(tp: Any) -> Any:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(text)


@dataclasses.dataclass(frozen=True)
class Entry(Generic[T]):
    """A registered plug-in: its name, one-line description and class."""

    name: str
    description: str
    cls: type[T]

    def options(self) -> dict[str, Option]:
        hints = _type_hints(self.cls)
        return {
            f.name: Option(
                f.name,
                hints[f.name],
                _field_default(f),
                f.metadata.get("doc", ""),
                f.metadata.get("valid", ""),
                f.metadata.get("above"),
            )
            for f in dataclasses.fields(self.cls)
            if f.init
        }


@functools.cache
def _type_hints(cls: type) -> dict[str, Any]:
    """The resolved annotations of a class's options (its init fields), once: resolving them costs about 1 ms, and a
    report asks each strategy's options thousands of times (every row's options against its defaults). Only the
    options': a plug-in's own state may be annotated with torch's types (`_ddp: DistributedDataParallel | None`),
    which resolve only by importing torch (2 to 12 s), and listing, comparing or reporting strategies must not."""
    options = {f.name for f in dataclasses.fields(cls) if f.init}
    hints: dict[str, Any] = {}
    for base in reversed(cls.__mro__):  # a subclass's annotation of a field replaces its base's, as in typing's own
        own = {name: kind for name, kind in vars(base).get("__annotations__", {}).items() if name in options}
        if own:
            holder = types.SimpleNamespace(__annotations__=own)  # typing resolves a namespace's, in its module's names
            hints |= typing.get_type_hints(
                holder, globalns=vars(sys.modules[base.__module__]), localns=dict(vars(base))
            )
    return hints


def _field_default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


class LazyModule(types.ModuleType):
    """A module imported where one of its names is first used, not where a plug-in names it: `torch =
    lazy_module("torch")` lets the registry import every plug-in (their names, roles and options, for `list`,
    `compare` and `report`) without torch's 2 to 12 s import, which only building a model or a strategy needs."""

    def __init__(self, name: str, owner: dict[str, Any]) -> None:
        super().__init__(name)
        self._owner = owner  # the globals of the module that named it

    def __getattr__(self, name: str) -> Any:
        module = importlib.import_module(self.__name__)
        # the owner's names for this stand-in become the module itself: from here on a step's hot path looks torch
        # up as before (a stand-in's lookup costs microseconds), and sees what a test patches into it
        for key in [key for key, value in self._owner.items() if value is self]:
            self._owner[key] = module
        return getattr(module, name)


def lazy_module(name: str) -> Any:
    """`name`'s module, imported at the first use of one of its attributes in the module that calls this
    (`LazyModule`): `torch = lazy_module("torch")` where `import torch` stood."""
    return LazyModule(name, sys._getframe(1).f_globals)


def _source_file(cls: type) -> str:
    """The file that defines `cls`, from the working directory where it lies under it (impls/mine.py)."""
    path = getattr(sys.modules.get(cls.__module__), "__file__", None)
    if not path:
        return cls.__module__
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return path


class Registry(Generic[T]):
    """Plug-ins of one kind, found by importing every module of their package.

    A duplicate name or a module that fails to import is an error, never a silent skip:
    a plug-in that needs an optional library imports it lazily and reports it through
    `unavailable_reason`, which the runner records as a `skipped` row. So is a class that
    misses part of its protocol (`contract_gaps` names what it lacks).
    """

    def __init__(self, kind: str, package: str, *, contract_gaps: Callable[[type], list[str]] | None = None) -> None:
        self.kind = kind
        self.package = package
        self.contract_gaps = contract_gaps
        self._entries: dict[str, Entry[T]] = {}
        self._loaded = False

    def register(self, name: str, *, description: str) -> Callable[[type[T]], type[T]]:
        def decorate(cls: type[T]) -> type[T]:
            if name in self._entries:
                raise RuntimeError(f"{self.kind} {name!r} is registered twice")
            where = _source_file(cls)
            if not dataclasses.is_dataclass(cls):
                raise PluginError(f"{where}: {self.kind} {name!r} must be a dataclass (its fields are its options)")
            gaps = self.contract_gaps(cls) if self.contract_gaps else []
            if gaps:
                raise PluginError(f"{where}: {self.kind} {name!r} does not define {', '.join(gaps)}")
            self._entries[name] = Entry(name, description, cls)
            return cls

        return decorate

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        package = importlib.import_module(self.package)
        for module in pkgutil.iter_modules(package.__path__):
            if not module.name.startswith("_"):
                importlib.import_module(f"{self.package}.{module.name}")

    def names(self) -> list[str]:
        self._load()
        return sorted(self._entries)

    def entry(self, name: str) -> Entry[T]:
        self._load()
        if name not in self._entries:
            raise ConfigError(f"unknown {self.kind} {name!r}; choose one of {', '.join(self.names())}")
        return self._entries[name]

    def entries(self) -> Iterator[Entry[T]]:
        for name in self.names():
            yield self._entries[name]

    def flagged(self, attribute: str) -> str:
        """The name of the one plug-in whose class sets `attribute` true (e.g. the reference strategy)."""
        found = [e.name for e in self.entries() if getattr(e.cls, attribute, False)]
        if len(found) != 1:
            raise RuntimeError(f"exactly one {self.kind} must set {attribute} = True; found {found or 'none'}")
        return found[0]

    def create(self, name: str, **options: Any) -> T:
        """Plug-in `name` with these options, each checked against its type, choices and bound (ConfigError
        names a bad value and what is valid; the plug-in's own `__post_init__` checks other ranges)."""
        entry = self.entry(name)
        valid = entry.options()
        unknown = sorted(set(options) - set(valid))
        if unknown:
            raise UnknownOption(
                f"{self.kind} {name!r} has no option {', '.join(unknown)}; "
                f"valid options: {', '.join(valid) or '(none)'}"
            )
        checked = {key: valid[key].check(value) for key, value in options.items()}
        return entry.cls(**checked)

    def parse_options(self, name: str, texts: dict[str, str], *, flag: str | None = None) -> dict[str, Any]:
        """Coerce {key: text} from the command line into typed options of plug-in `name` (`flag`: the one that gave
        them, '--opt', named with the text where one is bad: '--opt bucket_cap_mb=-1 is not valid; give …')."""
        valid = self.entry(name).options()
        return {key: valid[key].coerce(text, typed=f"{flag} {key}={text}" if flag else None)
                for key, text in texts.items() if key in valid}  # fmt: skip

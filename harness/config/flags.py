"""Command-line flags declared once, as fields of a typed config: `flag()` is to a command what
`option()` (harness.registry) is to a strategy.

    steps: int = flag(20, "measured steps per configuration", parse=whole("--steps"))

The field's type, default and doc make its flag: the face (harness.commands.arguments.add_flags) builds the parser's
arguments from the fields (the help says the default, from the default itself), `from_args` turns the
parsed flags back into the config, and `on_resume` says what the flag may do to a stored run
(`bench --resume`). Adding a flag is adding one field. A parser here turns text into a value or raises
ConfigError with one line naming the text (the face reports it as argparse reports a bad value).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

from harness.config.units import list_items
from harness.protocols import ConfigError

REFUSED, STEERS, LOCATES = "refused", "steers", "locates"
AUTO = "auto"
"""What a flag may do on `bench --resume`: change what the run measures (refused), steer the running
only (applies: how long a silence may last, where this node joins), or find the run (its results folder)."""


@dataclasses.dataclass(frozen=True)
class Flag:
    """How a config field appears on the command line."""

    doc: str
    name: str = ""
    """The flag, e.g. --timeout; default: the field's name in kebab case."""
    parse: Callable[[str], Any] | None = None
    """Text to value; raise ConfigError with one line naming the text."""
    metavar: str | None = None
    default_text: str | None = None
    """How the help shows the default where the default itself does not say it ("the GPUs visible")."""
    negative: bool = False
    """A bool field that the flag turns off (--no-baseline sets baseline = False)."""
    repeatable: bool = False
    """Given several times, each value kept (--opt)."""
    on_resume: str = REFUSED


def flag(default: Any, doc: str, **spec: Any) -> Any:
    """A field of a command's config and the flag that sets it; `default=dataclasses.MISSING` for a field
    the command fills in itself when the flag is not given (the flag's own default is then None)."""
    metadata = {"flag": Flag(" ".join(doc.split()), **spec)}
    if default is dataclasses.MISSING:
        return dataclasses.field(metadata=metadata)
    if isinstance(default, list | dict | set):
        raise TypeError("a flag's default must be immutable (a tuple, not a list)")
    return dataclasses.field(default=default, metadata=metadata)


def flags_of(cls: type) -> dict[str, Flag]:
    """{field name: its Flag}, for the fields of `cls` that have one, in declaration order."""
    return {f.name: f.metadata["flag"] for f in dataclasses.fields(cls) if "flag" in f.metadata}


def flag_name(field: str, spec: Flag) -> str:
    return spec.name or "--" + ("no-" if spec.negative else "") + field.replace("_", "-")


def _default_text(field: dataclasses.Field, spec: Flag) -> str:
    if spec.default_text is not None:
        return spec.default_text
    default = field.default
    if isinstance(default, bool) or default is None or default == () or default == "":
        return ""
    return ",".join(map(str, default)) if isinstance(default, tuple) else str(default)


def help_text(field: dataclasses.Field, spec: Flag) -> str:
    """The doc and, where there is one to say, the default (argparse's own %-formatting escaped)."""
    shown = _default_text(field, spec)
    text = f"{spec.doc} (default: {shown})" if shown else spec.doc
    return text.replace("%", "%%")


def from_args(cls: type, args: Any, **given: Any) -> Any:
    """`cls` from the parsed flags (`args`' attribute per field name), `given` filled in or overriding."""
    values = {name: getattr(args, name) for name in flags_of(cls) if hasattr(args, name)}
    values.update(given)
    return cls(**values)


def resume_fields(cls: type, what: str) -> set[str]:
    """The fields whose flags `what` (STEERS, LOCATES) on --resume."""
    return {name for name, spec in flags_of(cls).items() if spec.on_resume == what}


# ---- parsers: text to value, with one line naming the bad text


def whole(flag: str, example: str = "") -> Callable[[str], int]:
    """A whole-number flag; `example`: a valid value and what it does, said after a refusal ('2 (world sizes …)')."""

    def parse(text: str) -> int:
        try:
            return int(text)
        except ValueError:
            give = f"; give one, e.g. {flag} {example}" if example else ""
            raise ConfigError(f"{flag} {text!r} is not a whole number{give}") from None

    return parse


def finite(flag: str, what: str) -> Callable[[str], float]:
    """A float flag: a finite number (float() takes 'inf' and 'nan', which no setting means)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise ConfigError(f"{flag} {text!r} is not {what} (a finite number)")
        return value

    return parse


def names(text: str) -> tuple[str, ...]:
    """'a, b, c' as ('a', 'b', 'c'): units.list_items (an empty item among others is refused)."""
    return list_items(text)


class Unsplit(tuple):
    """A text that is not KEY=V[,V…], as (text, ()): --wopt's, refused where the workloads it is meant for are known
    (workload_grid.check_given, naming the keys they take), not at the parse, which knows none."""


def key_values(flag: str, *, deferred: bool = False) -> Callable[[str], tuple[str, tuple[str, ...]]]:
    """KEY=V[,V…] as (KEY, (V, …)); `deferred`: a text not so as Unsplit, for its refusal to name the keys."""

    def parse(text: str) -> tuple[str, tuple[str, ...]]:
        key, sep, values = text.partition("=")
        if not sep or not key.strip():
            if deferred:
                return Unsplit((text.strip(), ()))
            raise ConfigError(f"{flag} {text!r} is not key=value[,value…]")
        joined = [value for value in names(values) if "=" in value]
        if joined:  # 'a=1,b=2': the comma separates values of one option, not options
            other = joined[0].partition("=")[0].strip()
            meant = " ".join(f"{flag} {option}" for option in _options_meant(text))
            raise ConfigError(f"{flag} {text!r} gives {other} as a value of {key.strip()}; commas separate the "
                              f"values of one option: give each option its own {flag} ({meant})")  # fmt: skip
        return key.strip(), names(values)

    return parse


def _options_meant(text: str) -> list[str]:
    """'a=1,2,b=3' as the options it means: ['a=1,2', 'b=3'] (a part with '=' starts the next option)."""
    options: list[str] = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        if "=" in part or not options:
            options.append(part)
        else:
            options[-1] += f",{part}"
    return options


def repeat_count(text: str) -> int | str:
    """--repeats: a whole number, or 'auto'."""
    if text.strip().lower() == AUTO:
        return AUTO
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"--repeats {text!r} is not valid; give a whole number ≥ 1 or 'auto'") from None


DURATION_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}


def duration(flag: str) -> Callable[[str], float]:
    """A time: '90s', '20m', '1.5h' or a bare number of seconds, in seconds."""

    def parse(text: str) -> float:
        value = text.strip().lower()
        scale = DURATION_UNITS.get(value[-1:])
        number = value[:-1] if scale is not None else value
        try:
            seconds = float(number) * (scale or 1.0)
        except ValueError:
            seconds = math.nan
        if not math.isfinite(seconds):
            raise ConfigError(f"{flag} {text!r} is not a time; give e.g. 90s, 20m or 1h")
        if seconds <= 0:
            raise ConfigError(f"{flag} {text!r} is not valid; give a positive time, e.g. 20m")
        return seconds

    return parse

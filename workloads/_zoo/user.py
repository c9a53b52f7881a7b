"""A workload of the user's own: `path/to/file.py:NAME` or `package.module:NAME`.

NAME is a class, built with the workload options as keyword arguments, or a zero-argument factory
(options, if given, become its keyword arguments). It needs no import from ddpbench: three methods
make a workload — `build_model()`, `make_batch(batch_size, *, device, generator)`, `loss(model, batch)` —
and the rest of the `Workload` protocol is optional, with the defaults `WorkloadDefaults` gives.
Every rank imports the file again from its absolute path (torchrun starts fresh processes).
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
import traceback
import typing
from pathlib import Path
from typing import Any

from harness.protocols import ConfigError, UnknownOption, WorkloadDefaults
from workloads._zoo.source import Source, did_you_mean, file_hash

REQUIRED = ("build_model", "make_batch", "loss")
OPTIONAL = ("default_batch_size", "tokens_per_sample", "unavailable_reason", "blocks")
FORM = "build_model(), make_batch(batch_size, *, device, generator), loss(model, batch)"


def source(left: str, name: str) -> Source:
    """The user's file (`left` ends in .py or is a path) or module, and the NAME it defines; ConfigError
    naming the file and what is wrong when it cannot be."""
    if left.endswith(".py") or os.sep in left or "/" in left:
        path = Path(left).expanduser().resolve()
        if not path.is_file():
            raise ConfigError(f"workload file {left!r} does not exist (looked for {str(path)!r})")
        module, shown, origin = load_file(path), path.name, path
        spec = f"{path}:{name}"
    else:
        module, shown = load_module(left), left
        origin = Path(module.__file__) if getattr(module, "__file__", None) else None
        spec = f"{left}:{name}"
    maker = _defined(module, name, shown)
    source = Source(spec=spec, kind="file" if shown.endswith(".py") else "module", name=f"{shown}:{name}",
                    build=lambda *, size, options: wrap(make(maker, options, f"{shown}:{name}"), f"{shown}:{name}",
                                                        size=size),
                    path=str(origin) if origin else None, sha256=file_hash(origin) if origin else None,
                    check_options=lambda options: _check_keywords(maker, options, f"{shown}:{name}"),
                    check_workload=lambda workload: _check_trainable(workload, f"{shown}:{name}"),
                    options_said=lambda given=None: _keywords_said(maker, given or {}))  # fmt: skip
    if _takes_no_arguments(maker):  # else its options come with the run, and `create` checks it then
        wrap(make(maker, {}, source.name), source.name, size="tiny")
    return source


OWN_PACKAGES = ("harness", "impls", "workloads", "reports")
"""ddpbench's top-level packages, found before a user's folder joins the import path: an editable install finds
them after every path entry, so a `reports/` beside the user's file was imported in their place (a review's
predict --page then ran another checkout's pages). Found here, not used: each package's __init__ is light."""


def load_file(path: Path) -> Any:
    """The module a file defines, imported once per process under a name of its own (its folder on the path, so
    that it can import its neighbours, after ddpbench's own packages are found: `OWN_PACKAGES`)."""
    module_name = "ddpbench_workload_" + hashlib.sha1(str(path).encode()).hexdigest()[:12]
    if module_name in sys.modules:
        return sys.modules[module_name]
    if str(path.parent) not in sys.path:
        for package in OWN_PACKAGES:
            importlib.import_module(package)
        sys.path.insert(0, str(path.parent))  # first, as `python file.py` has it: its neighbours are its imports
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None:  # no loader for its suffix (a log, a .txt): importlib says only 'NoneType has no loader'
        raise ConfigError(f"workload file {path.name!r} is not a Python file; give FILE.py:NAME, e.g. "
                          "examples/my_workload.py:MyModel (docs/your-model.md)")  # fmt: skip
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise ConfigError(f"workload file {path.name}: importing it raised {_one_line(exc, path)}") from None
    sys.modules[module_name] = module
    return module


def load_module(name: str) -> Any:
    """`package.module`, as importable here or from the working directory (a rank started by torchrun
    with `-m` has the working directory on its path; the `ddpbench` command does not)."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if os.getcwd() in sys.path or exc.name != name.partition(".")[0]:
            raise ConfigError(f"workload module {name!r} cannot be imported: {_one_line(exc)}") from None
    except Exception as exc:
        raise ConfigError(f"workload module {name!r}: importing it raised {_one_line(exc)}") from None
    sys.path.append(os.getcwd())
    return load_module(name)


def _defined(module: Any, name: str, shown: str) -> Any:
    workloads = _workload_classes(module)
    if not hasattr(module, name):
        raise ConfigError(f"{shown} defines no {name!r}{_nearest(name, workloads)} ({_listed(workloads)})")
    value = getattr(module, name)
    if not callable(value):
        raise ConfigError(f"{shown}:{name} is not a class or a factory (it is a {type(value).__name__})")
    if _is_model(value):  # the model itself, whose constructor's arguments are no workload's
        raise ConfigError(f"{shown}:{name} is an nn.Module (a model), not a workload: name the class whose "
                          f"build_model() returns it{_nearest(name, workloads)} ({_listed(workloads)})")  # fmt: skip
    return value


def _workload_classes(module: Any) -> list[str]:
    """The classes the file itself defines that could be a workload (they have build_model): not its helpers."""
    return sorted(n for n, v in vars(module).items() if not n.startswith("_") and inspect.isclass(v)
                  and getattr(v, "__module__", None) == module.__name__ and hasattr(v, "build_model"))  # fmt: skip


def _nearest(name: str, workloads: list[str]) -> str:
    """'; did you mean 'UNetWorkload'?': the workload class nearest the name, case aside ('Unet' for UNetWorkload)."""
    lowered = {w.lower(): w for w in workloads}
    near = difflib.get_close_matches(name.lower(), lowered, n=1, cutoff=0.4)
    return f"; did you mean {lowered[near[0]]!r}?" if near else ""


def _listed(workloads: list[str]) -> str:
    if workloads:
        return f"its classes with build_model(): {', '.join(workloads)}"
    return f"it defines no class with build_model(); a workload defines {FORM}"


def _is_model(value: Any) -> bool:
    """A torch module's class without a workload's methods (`Net`, beside the `DLRM` that builds it)."""
    torch = sys.modules.get("torch")  # a file that never imported torch defines no module
    is_module = torch is not None and inspect.isclass(value) and issubclass(value, torch.nn.Module)
    return is_module and not all(callable(getattr(value, m, None)) for m in REQUIRED)


def make(maker: Any, options: dict[str, Any], shown: str) -> Any:
    """The user's workload object: the class built with the options, or the factory called."""
    try:
        return maker(**options)
    except TypeError as exc:
        needed = [f"--wopt {key}={_placeholder(kind)}" for key, kind in _required(maker, options).items()]
        give = f"; give {'it' if len(needed) == 1 else 'them'} with {' '.join(needed)}" if needed else ""
        raise ConfigError(f"{shown}({_arguments(options)}) cannot be built: {_one_line(exc)}{give}") from None


def _required(maker: Any, options: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments `maker` requires that `options` do not give, each with its annotation."""
    try:
        parameters = inspect.signature(maker).parameters.values()
    except (TypeError, ValueError):
        return {}
    keywords = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return {p.name: p.annotation for p in parameters
            if p.default is p.empty and p.kind in keywords and p.name not in options}  # fmt: skip


def _placeholder(annotation: Any) -> str:
    return {int: "N", "int": "N", float: "X", "float": "X"}.get(annotation, "VALUE")


def _keywords_said(maker: Any, given: dict) -> str:
    """'its keyword arguments in effect, vocab=4096, d_model=1024 (--wopt), …': what `list` says of them."""
    return f"its keyword arguments in effect, {', '.join(keyword_arguments(maker, given)) or 'none'}"


def keyword_arguments(maker: Any, given: dict | None = None) -> list[str]:
    """The keyword arguments a class or factory takes (its `--wopt` options) with the values in effect: `given`'s
    marked (--wopt), else their defaults, those it requires and lacks marked so (a 300M MoE's list once showed its
    defaults beside the --wopt that made it 300M)."""
    given = given or {}
    try:
        parameters = inspect.signature(maker).parameters.values()
    except (TypeError, ValueError):
        return []
    keywords = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [f"{p.name}={given[p.name]!r} (--wopt)" if p.name in given
            else f"{p.name}={p.default!r}" if p.default is not p.empty else f"{p.name} (required)"
            for p in parameters if p.kind in keywords]  # fmt: skip


def _takes_no_arguments(maker: Any) -> bool:
    try:
        signature = inspect.signature(maker)
    except (TypeError, ValueError):
        return True
    return all(p.default is not p.empty or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
               for p in signature.parameters.values())  # fmt: skip


def _check_keywords(maker: Any, options: dict[str, Any], shown: str) -> None:
    """An option the class or factory does not take is refused, naming what it takes."""
    try:
        parameters = inspect.signature(maker).parameters
    except (TypeError, ValueError):
        return
    if any(p.kind == p.VAR_KEYWORD for p in parameters.values()):
        return
    unknown = sorted(set(options) - set(parameters))
    if unknown:
        valid = ", ".join(parameters) or "none"
        near = did_you_mean(unknown, parameters)
        raise UnknownOption(f"{shown} takes no option {', '.join(unknown)}{near}; its options: {valid}")
    _check_types(maker, options, shown)


PLAIN_TYPES = {int: (int,), float: (int, float), bool: (bool,), str: (str,)}
"""The annotations an option's value is checked against (an int is a float too); any other annotation is left to
the class itself."""


def _check_types(maker: Any, options: dict[str, Any], shown: str) -> None:
    """A value of the wrong plain type for the parameter's annotation (`width: int` given 'abc') is refused here,
    not left to fail in every rank."""
    try:
        hints = typing.get_type_hints(maker.__init__ if inspect.isclass(maker) else maker)
    except Exception:  # an annotation that does not resolve: nothing to check against
        return
    for key, value in options.items():
        accepted = PLAIN_TYPES.get(hints.get(key))
        if accepted and not (isinstance(value, accepted) and (bool in accepted or not isinstance(value, bool))):
            raise ConfigError(f"--wopt {key}={value!r} is not valid: {shown} takes {key}: {hints[key].__name__}")


def _check_trainable(workload: UserWorkload, shown: str) -> None:
    """A model without a parameter to train is refused before any rank builds it (every strategy would fail its
    own way: an empty optimizer, DDP's StopIteration). Built on the meta device (no memory). A build that fails
    there with an assert, as a model's own checks raise (`nn.MultiheadAttention`'s 'embed_dim must be divisible by
    num_heads' for a --wopt heads=3), would fail on every device: bad input, one line; any other failure may be
    the meta device's own (a .item(), a tensor formatted in an f-string: TypeError), left to the ranks, which
    report the user's own traceback."""
    import torch

    try:
        with torch.device("meta"):
            model = workload.build_model()
        trainable = any(p.requires_grad for p in model.parameters())
    except AssertionError as exc:
        raise ConfigError(f"{shown}.build_model() raised {_one_line(exc)}") from None
    except Exception:
        return
    if not trainable:
        raise ConfigError(f"{shown}.build_model() returns a {type(model).__name__} with no parameter that requires "
                          f"a gradient: data parallelism has nothing to train or synchronise")  # fmt: skip
    _check_loss(workload, model, shown)


def _check_loss(workload: UserWorkload, model: Any, shown: str) -> None:
    """A `loss()` that returns no scalar (`(loss, logits)`, a loss per sample) is refused before any rank runs it:
    every configuration's backward would fail on it. A batch of 2 made on the CPU, the loss taken on the meta
    device (no memory); a batch or forward that fails there is left to the ranks, as the build's is."""
    import torch
    from torch.utils._pytree import tree_map

    try:
        generator = torch.Generator().manual_seed(0)
        batch = workload.make_batch(2, device=torch.device("cpu"), generator=generator)
        batch = tree_map(lambda x: x.to("meta") if isinstance(x, torch.Tensor) else x, batch)
        loss = workload.loss(model, batch)
    except Exception:
        return
    if not isinstance(loss, torch.Tensor):
        raise ConfigError(f"{shown}.loss() returned a {type(loss).__name__}, not a scalar tensor")
    if loss.numel() != 1:
        raise ConfigError(f"{shown}.loss() returned a tensor of shape {tuple(loss.shape)}, not a scalar tensor "
                          f"(a mean over the batch)")  # fmt: skip


def wrap(user: Any, shown: str, *, size: str) -> UserWorkload:
    """The user's object as a `Workload`: its three methods, its optional ones where it has them, the
    defaults elsewhere; ConfigError naming what it lacks."""
    missing = [m for m in REQUIRED if not callable(getattr(user, m, None))]
    if missing:
        raise ConfigError(f"{shown} lacks {', '.join(missing)} (a workload defines {FORM})")
    return UserWorkload(user, size=size)


class UserWorkload(WorkloadDefaults):
    """A user's workload object behind the `Workload` protocol (what it does not define, the defaults)."""

    def __init__(self, user: Any, *, size: str) -> None:
        self.user, self.size = user, getattr(user, "size", size)
        self.requires = tuple(getattr(user, "requires", ()))
        self.remote_part = getattr(user, "remote_part", None)

    def build_model(self):
        return self.user.build_model()

    def make_batch(self, batch_size: int, *, device, generator):
        return self.user.make_batch(batch_size, device=device, generator=generator)

    def loss(self, model, batch):
        return self.user.loss(model, batch)

    def default_batch_size(self) -> int:
        own = getattr(self.user, "default_batch_size", None)
        return own() if callable(own) else super().default_batch_size()

    def tokens_per_sample(self) -> int | None:
        own = getattr(self.user, "tokens_per_sample", None)
        return own() if callable(own) else None

    def unavailable_reason(self, *, device: str) -> str | None:
        own = getattr(self.user, "unavailable_reason", None)
        return own(device=device) if callable(own) else super().unavailable_reason(device=device)

    def blocks(self, model):
        own = getattr(self.user, "blocks", None)
        return own(model) if callable(own) else None


def _arguments(options: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in options.items())


def _one_line(exc: BaseException, origin: Path | None = None) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[-1] if lines else ''}{_where(exc, origin)}".rstrip(": ")


def _where(exc: BaseException, origin: Path | None) -> str:
    """Where the user's code raised: the last line of `origin` (their file) that ran, else of any file of theirs,
    never the importer's or a library's lines (a SyntaxError names its file and line itself)."""
    if isinstance(exc, SyntaxError):
        return ""
    frames = [(frame.f_code.co_filename, line) for frame, line in traceback.walk_tb(exc.__traceback__)]
    own = [line for name, line in frames if origin is not None and name == str(origin)]
    if own:
        return f" (line {own[-1]})"
    theirs = [(name, line) for name, line in frames if not name.startswith(("<", *_NOT_THEIRS))]
    return f" ({Path(theirs[-1][0]).name}, line {theirs[-1][1]})" if theirs else ""


_NOT_THEIRS = (str(Path(__file__).parent), sys.prefix, sys.base_prefix)
"""Where files are the importer's, the standard library's or an installed package's."""

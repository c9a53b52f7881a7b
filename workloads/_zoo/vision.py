"""`torchvision:NAME`: any classification model torchvision knows (`torchvision.models.list_models`),
built with `weights=None`, classifying random images into random labels.

`--size` sets the input and the head, never the architecture (the model is the one named):

| size  | input                                | classes | batch per rank |
|-------|--------------------------------------|---------|----------------|
| tiny  | 32×32 (or the model's smallest)      | 10      | 2              |
| small | 64×64 (or the model's smallest)      | 100     | 4              |
| full  | the model's standard (its weights'   | 1000    | 32             |
|       | crop size: 224 for most)             |         |                |

"The model's smallest" is its weights' `min_size`: alexnet 63, inception_v3 75, efficientnet_v2 33, maxvit_t
224 (its blocks need a multiple of 224). ViT and Swin take 32×32 (their `min_size` is the pretrained input's);
a ViT's side is rounded up to its patch (vit_h_14: 42 and 70).

Options (`--wopt`): `image_size`, `num_classes`, and any keyword the model's builder takes. Vision
transformers are built for the input size (`image_size`). Dropout, stochastic depth and drop path are
turned off (`deterministic`), as in every workload: parity compares a data-parallel step with one process.
timm's models share this workload's images and loss (harness `timm:NAME`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import dis
import functools
import inspect
import re
import warnings
from collections.abc import Callable
from typing import Any

from harness.protocols import ConfigError, UnknownOption, WorkloadDefaults, lazy_module
from workloads._zoo.source import OTHER_TASKS, Source, unknown_torchvision
from workloads._zoo.vision_keywords import IGNORED, OWN_OPTIONS, no_option_words

torch = lazy_module("torch")
F = lazy_module("torch.nn.functional")
nn = lazy_module("torch.nn")


@dataclasses.dataclass(frozen=True)
class ImageSize:
    image_size: int | None  # None: the model's standard input
    classes: int
    batch_size: int


SIZES = {"tiny": ImageSize(32, 10, 2), "small": ImageSize(64, 100, 4), "full": ImageSize(None, 1000, 32)}


class ImageModel(WorkloadDefaults):
    """A zoo classification model on random images: `build(classes, image_size)` makes it."""

    def __init__(self, *, size: str, build: Callable[[int, int], nn.Module], image_size: int, classes: int,
                 batch_size: int, requires: tuple[str, ...] = ()) -> None:  # fmt: skip
        self.size, self._build, self.image_size, self.classes = size, build, image_size, classes
        self._batch_size, self.requires = batch_size, requires

    def build_model(self) -> nn.Module:
        """The model; on the meta device (a count: `harness.measure.meta_counts`) one whose builder computes with
        tensors (RegNet's widths), which the meta device refuses, is built on the CPU with each parameter and buffer
        moved to the meta device as its module registers it (`list` of a RegNet once ended in a traceback)."""
        try:
            model = self._build(self.classes, self.image_size)
        except NotImplementedError:
            if torch.get_default_device().type != "meta":
                raise
            with torch.device("cpu"), parameters_on_meta():
                model = self._build(self.classes, self.image_size)
        return deterministic(model).train()

    def default_batch_size(self) -> int:
        return self._batch_size

    def make_batch(self, batch_size: int, *, device: torch.device, generator: torch.Generator):
        images = torch.randn(batch_size, 3, self.image_size, self.image_size, device=device, generator=generator)
        labels = torch.randint(0, self.classes, (batch_size,), device=device, generator=generator)
        return images, labels

    def loss(self, model: nn.Module, batch) -> torch.Tensor:
        images, labels = batch
        return F.cross_entropy(logits(model(images)), labels)  # a mean over samples, as data parallelism assumes


def deterministic(model: nn.Module) -> nn.Module:
    """`model` without its random layers (dropout, stochastic depth, drop path): each rank would draw its
    own, so no data-parallel step could match one process on the whole batch (parity), and a step's time
    would depend on the draw."""
    for module in model.modules():
        if isinstance(module, nn.modules.dropout._DropoutNd) or type(module).__name__ == "StochasticDepth":
            module.p = 0.0  # (StochasticDepth: torchvision's)
        elif hasattr(module, "drop_prob"):  # timm's DropPath
            module.drop_prob = 0.0
    return model


def logits(output: Any) -> torch.Tensor:
    """The class scores of a model's output: GoogLeNet and Inception return them with auxiliary heads."""
    if isinstance(output, torch.Tensor):
        return output
    if hasattr(output, "logits"):
        return output.logits
    return output[0]


def torchvision_source(name: str) -> Source:
    import torchvision.models as models

    known = models.list_models(module=models)
    if name not in known:
        others = {other: sub for sub in OTHER_TASKS for other in models.list_models(module=getattr(models, sub))}
        raise unknown_torchvision(name, known, others)
    standard, smallest = _input_sizes(models, name)

    def build(*, size: str, options: dict[str, Any]) -> ImageModel:
        shape = SIZES[size]
        whole_numbers(options, f"torchvision:{name}")
        given = options.pop("image_size", None)
        image_size = int(given or _fitted(name, max(shape.image_size or standard, smallest)))
        if given is not None:
            input_fits(name, image_size, smallest)
        classes = int(options.pop("num_classes", shape.classes))
        extra = {**_size_keywords(name, image_size), **options}

        def make(classes: int, image_size: int) -> nn.Module:
            return models.get_model(name, weights=None, num_classes=classes, **extra)

        return ImageModel(size=size, build=make, image_size=image_size, classes=classes,
                          batch_size=shape.batch_size)  # fmt: skip

    return Source(spec=f"torchvision:{name}", kind="torchvision", name=f"torchvision:{name}", build=build,
                  check_options=options_check(build, f"torchvision:{name}"),
                  options_said=lambda: givable_words(build))  # fmt: skip


def whole_numbers(options: dict[str, Any], shown: str) -> None:
    """image_size and num_classes, where given, are whole numbers ≥ 1 (0 once fell back to the default unsaid)."""
    for key in OWN_OPTIONS:
        value = options.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise ConfigError(f"--wopt {key}={value!r} is not valid for {shown}; give a whole number ≥ 1")


def input_fits(name: str, image_size: int, smallest: int) -> None:
    """A given image_size the model takes, else bad input: below its smallest (convnext_tiny at 16 failed in every
    rank, "Kernel size can't be greater than actual input size") or, a ViT's, not a whole number of patches."""
    shown = f"--wopt image_size={image_size} is not valid for torchvision:{name}"
    patch = _fitted(name, 1)
    if patch > 1 and image_size % patch:
        below, above = image_size // patch * patch, -(-image_size // patch) * patch
        some = " or ".join(str(side) for side in (below, above) if side >= patch)
        raise ConfigError(f"{shown}; give a multiple of its patch, {patch} (e.g. {some})")
    if image_size < smallest and not name.startswith(ANY_INPUT):
        raise ConfigError(f"{shown}; give a whole number ≥ {smallest}, its smallest input")


def _input_sizes(models, name: str) -> tuple[int, int]:
    """(the standard input side, the smallest the model takes), from its weights' metadata (no download)."""
    try:
        weights = models.get_model_weights(name).DEFAULT
    except (ValueError, AttributeError):
        return 224, 32
    crop = getattr(weights.transforms(), "crop_size", [224])
    smallest = (32, 32) if name.startswith(ANY_INPUT) else weights.meta.get("min_size", (32, 32))
    return int(crop[0]), max(int(min(smallest)), 32)


ANY_INPUT = ("vit_", "swin")
"""Models whose weights' `min_size` is the pretrained input, not the architecture's: without weights a ViT is
built for the input (`image_size`) and a Swin pads its windows, so tiny is 32×32 for them too (once 224×224:
vit_l_16's tiny cost 369 GFLOPs a sample)."""


def _fitted(name: str, side: int) -> int:
    """`side` rounded up to a whole number of a ViT's patches (vit_h_14: 42, not 32)."""
    patch = int(name.rsplit("_", 1)[-1]) if name.startswith("vit_") else 1
    return -(-side // patch) * patch


def _size_keywords(name: str, image_size: int) -> dict[str, Any]:
    """Transformers whose position embeddings fix their input size are built for the one given."""
    if name.startswith("vit_"):
        return {"image_size": image_size}
    if name.startswith("maxvit"):
        return {"input_size": (image_size, image_size)}
    return {}


def options_check(build: Callable[..., ImageModel], shown: str) -> Callable[[dict[str, Any]], None]:
    """The check of a zoo image model's options: the keywords its class takes, then a build without the memory
    of its weights (`_weightless`) with them. Its class, and the way to build it so, are found once, by a build
    without options."""
    found = functools.cache(lambda: _meta_class(build))
    return lambda options: _check_on_meta(build, options, shown, *found())


@contextlib.contextmanager
def parameters_on_meta():
    """Each parameter and buffer moved to the meta device as its module registers it: a model whose construction
    computes with tensors (RegNet's widths), which the meta device refuses, built without the memory of its weights
    (one parameter at a time is allocated, then dropped), wholly on the meta device, as a count runs it."""
    register, register_buffer = nn.Module.register_parameter, nn.Module.register_buffer

    def on_meta(module: nn.Module, name: str, parameter: nn.Parameter | None) -> None:
        if parameter is not None:
            parameter = nn.Parameter(parameter.to("meta"), requires_grad=parameter.requires_grad)
        register(module, name, parameter)

    def buffer_on_meta(module: nn.Module, name: str, tensor: torch.Tensor | None, persistent: bool = True) -> None:
        register_buffer(module, name, None if tensor is None else tensor.to("meta"), persistent)

    nn.Module.register_parameter, nn.Module.register_buffer = on_meta, buffer_on_meta
    try:
        yield
    finally:
        nn.Module.register_parameter, nn.Module.register_buffer = register, register_buffer


WEIGHTLESS = (lambda: torch.device("meta"), parameters_on_meta)
"""Ways to build a model without its weights' memory, cheapest first."""


def _meta_class(build: Callable[..., ImageModel]) -> tuple[type | None, Callable | None]:
    """The model's class and the first way (WEIGHTLESS) it builds; (None, None) where none does."""
    for weightless in WEIGHTLESS:
        try:
            with weightless():
                return type(build(size="tiny", options={}).build_model()), weightless
        except Exception:
            continue
    return None, None


def _check_on_meta(build: Callable[..., ImageModel], options: dict[str, Any], shown: str,
                   model_class: type | None, weightless: Callable | None) -> None:  # fmt: skip
    """Options the model's class does not take, or that it refuses, are bad input."""
    taken = keywords(model_class)
    if taken is not None and set(options) - taken - set(OWN_OPTIONS):
        unknown = sorted(set(options) - taken - set(OWN_OPTIONS))
        valid = sorted(_givable(build, model_class, taken, weightless) | set(OWN_OPTIONS))
        raise UnknownOption(no_option_words(shown, unknown, valid))  # as `list` says it before torch's import
    if weightless is None:  # no build here to judge the values by: the ranks will say
        return
    workload = None
    try:
        with weightless(), warnings.catch_warnings():  # (stem_width=0's "zero-element tensors" warning: one line)
            warnings.simplefilter("ignore")
            workload = build(size="tiny", options=dict(options))
            workload.build_model()
    except ConfigError:  # a value the options themselves refuse, in its own words
        raise
    except Exception as exc:  # torchvision refuses with asserts and RuntimeErrors too (ViT's patch size)
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        given = ", ".join(f"{k}={v!r}" for k, v in options.items())
        fixed = FIXED_BY_BUILDER.search(str(exc))
        if fixed and workload is not None:
            raise ConfigError(_fixed_by_builder(shown, given, fixed[1], workload)) from None
        raise ConfigError(f"{shown} cannot be built with {given}: {type(exc).__name__}: {lines[-1] if lines else ''}"
                          .rstrip(": ")) from None  # fmt: skip


def givable_words(build: Callable[..., ImageModel]) -> str | None:
    """'image_size, num_classes and its builder's dropout, …': the options a command line can give (`_givable`), as
    `list` says them (vit_b_16's once read "its configuration's fields or its keyword arguments", and a user gave it
    num_layers, which its builder fixes); None where its class's keywords cannot be told."""
    model_class, weightless = _meta_class(build)
    taken = keywords(model_class)
    if taken is None:
        return None
    builder = sorted(_givable(build, model_class, taken, weightless) - set(OWN_OPTIONS))
    return ", ".join(OWN_OPTIONS) + (f" and its builder's {', '.join(builder)}" if builder else "")


PLAIN = {int: 1, float: 0.0, bool: False, str: "", type(None): None}
"""The types a --wopt value can be (a JSON literal: workloads._zoo.source.option_value), each with a value to try."""


def _givable(build: Callable[..., ImageModel], model_class: type, taken: set[str],
             weightless: Callable | None) -> set[str]:  # fmt: skip
    """The keywords of `taken` a command line can give: of a plain type (a layer, a list of block configurations is
    none), and not fixed by the model's builder (vit_b_16's num_layers). vit_b_16's bad --wopt once offered both
    kinds, each refused when given."""
    parameters = inspect.signature(model_class.__init__).parameters
    plain = {key: _plain_value(parameters[key]) for key in taken if key in parameters}
    plain = {key: value for key, value in plain.items() if value is not _NOT_PLAIN}
    if weightless is None:
        return set(plain)
    givable = set()
    for key, value in plain.items():
        try:
            with weightless():
                build(size="tiny", options={key: 1 if value is None else value}).build_model()
        except TypeError as exc:
            if FIXED_BY_BUILDER.search(str(exc)):
                continue
        except Exception:  # a value the model refuses, not a keyword it refuses
            pass
        givable.add(key)
    return givable


_NOT_PLAIN = object()


def _plain_value(parameter: inspect.Parameter) -> Any:
    """A value of a plain type (PLAIN) for `parameter`, its default where that is one; _NOT_PLAIN where its type is
    none (a layer, a list), or unknown and its default none."""
    annotation = parameter.annotation
    if annotation is inspect.Parameter.empty or isinstance(annotation, str):
        default = parameter.default
        return default if type(default) in PLAIN else _NOT_PLAIN
    import typing

    kinds = typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union, type(int | None)) else (
        annotation,)  # fmt: skip
    if not all(kind in PLAIN for kind in kinds):
        return _NOT_PLAIN
    default = parameter.default
    return default if type(default) in PLAIN and default is not None else PLAIN[kinds[0]]


FIXED_BY_BUILDER = re.compile(r"got multiple values for (?:keyword )?argument '(\w+)'")
"""The TypeError of a keyword the model's builder sets itself, passed again (vit_b_16's num_layers)."""


def _fixed_by_builder(shown: str, given: str, key: str, workload: ImageModel) -> str:
    """A keyword the named builder sets itself (vit_l_16's num_layers=24): the architecture, not the size."""
    kind, name = shown.split(":", 1)
    kin = []
    if kind == "torchvision":
        import torchvision.models as models

        kin = [n for n in models.list_models(module=models) if n.split("_")[0] == name.split("_")[0] and n != name]
    other = f"; for another {key}, name another model ({', '.join(kin)})" if kin else ""
    return (
        f"{shown} cannot be built with {given}: its builder fixes {key} (the architecture named; --size sets "
        f"only image_size and num_classes, {workload.image_size} and {workload.classes} at tiny){other}"
    )


def keywords(model_class: type | None) -> set[str] | None:
    """The keywords a model's class takes; None where it cannot tell: a `**kwargs` it reads (timm's MaxxVit
    passes them to its configuration). A `**kwargs` it never reads (torchvision's ConvNeXt) swallows a
    misspelt option unsaid, so it counts for nothing."""
    if model_class is None:
        return None
    init = model_class.__init__
    parameters = inspect.signature(init).parameters.values()
    rest = [p.name for p in parameters if p.kind is p.VAR_KEYWORD]
    if rest and any(rest[0] == i.argval or rest[0] in (i.argval if isinstance(i.argval, tuple) else ())
                    for i in dis.get_instructions(init)):  # fmt: skip
        return None
    named = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return named - IGNORED

"""`timm:NAME`: any model timm knows, `timm.create_model(NAME, pretrained=False)`, on random images, when
timm is installed (an optional extra: `pip install timm`). Without it the rows are `skipped` with that
reason; the sizes are torchvision's (workloads._zoo.vision), the standard input the model's own
`pretrained_cfg["input_size"]`.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from harness.protocols import UnknownOption, lazy_module
from workloads._zoo.source import Source, unknown
from workloads._zoo.vision import OWN_OPTIONS, SIZES, ImageModel, options_check, whole_numbers

nn = lazy_module("torch.nn")


def source(name: str) -> Source:
    installed = importlib.util.find_spec("timm") is not None
    if installed:
        import timm

        known = timm.list_models()
        if name not in known:
            raise unknown("timm model", name, known)

    def build(*, size: str, options: dict[str, Any]) -> ImageModel:
        shape = SIZES[size]
        whole_numbers(options, f"timm:{name}")
        image_size = int(options.pop("image_size", None) or shape.image_size or _standard_input(name, installed))

        def make(classes: int, image_size: int) -> nn.Module:
            import timm

            try:  # models with position embeddings are built for the input size
                return timm.create_model(name, pretrained=False, num_classes=classes, img_size=image_size, **options)
            except TypeError:
                return timm.create_model(name, pretrained=False, num_classes=classes, **options)

        classes = int(options.pop("num_classes", shape.classes))
        return ImageModel(size=size, build=make, image_size=image_size, classes=classes,
                          batch_size=shape.batch_size, requires=("timm",))  # fmt: skip

    check = options_check(build, f"timm:{name}") if installed else _own_options_only(f"timm:{name}")
    return Source(spec=f"timm:{name}", kind="timm", name=f"timm:{name}", build=build, check_options=check)


def _own_options_only(shown: str):
    """Without timm, the model's keywords are unknown: taking every key would let a misspelt option pass unsaid
    for every workload of the run (and the rows are skipped, so no other key could matter here)."""

    def check(options: dict[str, Any]) -> None:
        whole_numbers(options, shown)
        unknown = sorted(set(options) - set(OWN_OPTIONS))
        if unknown:
            raise UnknownOption(f"{shown} takes only {', '.join(OWN_OPTIONS)} while timm is not installed "
                                f"(pip install timm), not {', '.join(unknown)}")  # fmt: skip

    return check


def _standard_input(name: str, installed: bool) -> int:
    if not installed:
        return 224
    import timm

    config = timm.get_pretrained_cfg(name, allow_unregistered=True) if hasattr(timm, "get_pretrained_cfg") else None
    size = getattr(config, "input_size", None) or (3, 224, 224)
    return int(size[-1])

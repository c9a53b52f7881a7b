"""What a workload spec resolves to (`Source`), and the small pieces every kind of source shares."""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from harness.protocols import ConfigError


@dataclasses.dataclass(frozen=True)
class Source:
    """Where a workload comes from, and how a rank builds it again."""

    spec: str
    """What a rank rebuilds it from: the spec with a file's path made absolute."""
    kind: str
    """file, module, torchvision, hf or timm."""
    name: str
    """Its name in rows, pages and config ids: the file's name and NAME, or the zoo spec."""
    build: Callable[..., Any] = dataclasses.field(compare=False, repr=False)
    """(size, options) -> the workload."""
    path: str | None = None
    """The file that defines it (a user's file or module, a configuration file)."""
    sha256: str | None = None
    """A hash of that file's content: which code ran."""
    check_options: Callable[[dict[str, Any]], None] = dataclasses.field(default=lambda options: None,
                                                                        compare=False, repr=False)  # fmt: skip
    """Raises ConfigError naming an option this workload does not take."""
    check_workload: Callable[[Any], None] = dataclasses.field(default=lambda workload: None, compare=False,
                                                              repr=False)  # fmt: skip
    """Raises ConfigError where the workload, as built on the parent side, cannot train (a model without parameters)."""
    options_said: str | Callable[[], str | None] | None = dataclasses.field(default=None, compare=False, repr=False)
    """Its `--wopt` options, as `list` says them (a file's keyword arguments; a zoo image model's, worked out when
    asked: a build on the meta device); None: said in general."""

    def create(self, *, size: str, options: dict[str, Any]) -> Any:
        return self.build(size=size, options=dict(options))

    def provenance(self) -> dict[str, Any]:
        """What run.json and the run page record of it."""
        return {"spec": self.spec, "kind": self.kind, "path": self.path, "sha256": self.sha256}


def closest(name: str, known: Iterable[str], *, many: int = 5) -> list[str]:
    """Known names like `name`: those it begins, then the most similar (difflib)."""
    known = sorted(known)
    starting = [k for k in known if k.startswith(name)]
    similar = difflib.get_close_matches(name, known, n=many, cutoff=0.5)
    return list(dict.fromkeys([*starting, *similar]))[:many]


def did_you_mean(names: Iterable[str], known: Iterable[str]) -> str:
    """' (did you mean hidden_size?)': the known names close to any of `names` (difflib, a typo's distance), for an
    option a workload does not take; '' where none is close."""
    known = sorted(known)
    near = dict.fromkeys(m for name in names for m in difflib.get_close_matches(name, known, n=3, cutoff=0.8))
    return f" (did you mean {', '.join(near)}?)" if near else ""


LISTED = 100
"""The most names an unknown name's error lists when none is near (torchvision's classification models fit)."""


def unknown(what: str, name: str, known: Iterable[str]) -> ConfigError:
    """'unknown torchvision model 'convnext'; did you mean convnext_tiny, convnext_small, …?', or, with no name
    near, the names there are (the first LISTED of them, and how many in all)."""
    known = sorted(known)
    near = closest(name, known)
    listed = ", ".join(known[:LISTED]) + (f", … ({len(known)} in all)" if len(known) > LISTED else "")
    hint = f"did you mean {', '.join(near)}?" if near else f"the names: {listed}"
    return ConfigError(f"unknown {what} {name!r}; {hint}")


OTHER_TASKS = {
    "detection": "a detection model: it trains on each image's boxes and labels, and returns its losses",
    "segmentation": "a segmentation model: it trains on a class for every pixel",
    "video": "a video model: it takes clips of frames",
    "optical_flow": "an optical-flow model: it takes pairs of frames and predicts their motion",
    "quantization": "a quantized model, for inference",
}
"""The folders of torchvision.models that hold models for other tasks than classification, and why ddpbench,
which makes each a batch of random images and a label each, cannot train them."""
BACKBONED = ("detection", "segmentation", "quantization")
"""Those whose models are built on a classification model a name like theirs may be (resnet50's)."""


def unknown_torchvision(name: str, known: Iterable[str], others: dict[str, str]) -> ConfigError:
    """A name torchvision has no classification model by: `unknown`'s words, or, where it names a model of another
    task (`others`: name -> its folder of torchvision.models), why that cannot run, and the nearest that can."""
    if name not in others:
        return unknown("torchvision model", name, known)
    near = closest(name, known) if others[name] in BACKBONED else []
    nearest = f"; the nearest classification models: {', '.join(near)}" if near else ""
    return ConfigError(f"torchvision:{name} is {OTHER_TASKS[others[name]]} (torchvision.models.{others[name]}); "
                       f"ddpbench trains torchvision's classification models, on random images and a label "
                       f"each{nearest}")  # fmt: skip


def file_hash(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def option_value(text: str) -> Any:
    """An option given as text, for a workload whose options are not declared: a JSON literal where it is
    one (4, 0.5, true, null, "x"), else the text itself."""
    try:
        return json.loads(text)
    except ValueError:
        return text

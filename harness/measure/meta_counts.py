"""The meta device's counts of a workload's model (harness.measure.modelinfo), kept in the user's cache
(XDG_CACHE_HOME/ddpbench/meta-counts/, a file an entry) for `list`, `predict` and `report` alike: a full-size hf:t5's
parameters, activations and FLOPs, counted again by every process, were over half of a `predict` of its tiny run here.

An entry is the count asked (what, workload spec, size, options, batch, dtype) from the source its model comes from
(`source_key`): ddpbench's own code that builds and counts models, the versions of the libraries that build them, and
a file the spec names (yours, or a transformers configuration), by the hash of its content. Both name its file, so two
checkouts of ddpbench, or two versions of your file, keep their counts side by side rather than evict each other's. A
hash of your file does not see the modules it imports, nor files it reads: after changing those, delete the cache
folder. Each file is written whole or not at all, by itself (processes writing at once lose none of each other's); one
that cannot be read, is half written or cannot be written only costs the count again.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

CACHE_FOLDER = "meta-counts"
MOST_ENTRIES = 500
"""Entries kept, the latest used (read or written): counts not asked for long give way, the folder stays bounded."""
LIBRARIES = ("torch", "torchvision", "transformers", "timm")
"""The libraries that build a zoo's models (and torch every model): another version, another count."""
COUNTING = ("measure/modelinfo.py", "measure/activations.py", "measure/counting.py", "measure/training.py",
            "measure/pace.py", "measure/meta_counts.py", "protocols.py")  # fmt: skip
"""ddpbench's modules, under harness/, that a count runs through, beside every module of workloads/."""


def cache_folder() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ddpbench" / CACHE_FOLDER


def entry_path(asked: str, source: dict) -> Path:
    """The file of the count `asked` from `source`: by both, so that another source's count has a file of its own."""
    key = json.dumps([asked, source], sort_keys=True)
    return cache_folder() / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"


class ParameterCount(NamedTuple):
    """A model's parameters (a tied one once), those that train, and the bytes of their gradients (in the trained
    parameters' dtypes, `grad_dtypes`: DDP all-reduces these alone, not a frozen parameter's)."""

    parameters: int
    trained: int
    grad_bytes: int
    grad_dtypes: tuple[str, ...]


def parameters(spec: str, size: str, options: dict | None = None):
    """modelinfo.parameter_count_on_meta of the workload (a ParameterCount), or why it cannot be built here
    (`unavailable_reason` on the CPU: said, not kept). Kept, it needs neither modelinfo nor torch imported (`list`
    read seven models' counts from the cache and imported modelinfo's flop counter for the tuple)."""

    def count():
        from harness.measure.modelinfo import parameter_count_on_meta

        workload = _made(spec, size, options, quiet=False)
        return workload.unavailable_reason(device="cpu") or parameter_count_on_meta(workload)

    kept = _kept("parameters", spec, size, options, None, None, count, made=False)
    return kept if isinstance(kept, str) else ParameterCount(*kept[:3], tuple(kept[3]))


def counts(spec: str, size: str, options: dict | None, *, batch_size: int, dtype: str) -> dict | None:
    """modelinfo.counts_on_meta of the workload; None where it cannot be made or counted there."""

    def count(workload):
        from harness.measure.modelinfo import counts_on_meta

        return counts_on_meta(workload, batch_size=batch_size, dtype=dtype)

    return _kept("counts", spec, size, options, batch_size, dtype, count)


def activations(spec: str, size: str, options: dict | None, *, batch_size: int, dtype: str) -> dict | None:
    """activations.activations_on_meta of the workload; None where it cannot be made."""

    def count(workload):
        from harness.measure.activations import activations_on_meta

        return activations_on_meta(workload, batch_size=batch_size, dtype=dtype)

    return _kept("activations", spec, size, options, batch_size, dtype, count)


CPU_BATCHES = (1, 2)
"""The batches a model the meta device cannot run is counted at on this CPU: the least that says what one more sample
adds, whatever batch is asked (a full size at the batch you train at would not fit here)."""
CPU_ROOM = 4
"""What counting on the CPU takes, in the parameters' bytes, beside the activations counted: the model built at once
with its initialisation, and the forward's temporaries (a 336M-parameter mixture of experts, 1.25 GiB of parameters,
peaked at 5.4 GiB resident counted at one and two samples, which kept 614 and 1,196 MiB)."""


def activations_on_cpu(spec: str, size: str, options: dict | None, *, batch_size: int, dtype: str,
                       param_bytes: int, room: int | None) -> dict:  # fmt: skip
    """activations.activations_on_cpu of the workload at CPU_BATCHES, each kept, carried to `batch_size` by what the
    second sample added (`activation_sample_added_mb`): for a model whose forward the meta device cannot run. Counted
    only where `room` (the bytes this machine has available; None: unknown) holds CPU_ROOM × `param_bytes` and the
    activations of the second batch beside them, else from the first alone, in proportion (said by
    `activation_cpu_batches`); `activation_cpu_error` says why where none can be counted here."""
    need = CPU_ROOM * param_bytes
    if room is not None and need > room:
        return {"activation_mb": None, "activation_top": None, "activation_cpu_error": (
            f"the model needs about {need / 2**30:.1f} GiB to run here, more than the {room / 2**30:.1f} GiB this "
            "machine has available")}  # fmt: skip
    one, two = CPU_BATCHES
    first = _counted_on_cpu(spec, size, options, one, dtype)
    if first.get("activation_mb") is None or batch_size == one:
        return {**first, "activation_cpu_batches": [one]}
    if room is not None and need + 2 * two * first["activation_mb"] * 2**20 > room:  # in proportion to the first
        per_sample = first["activation_mb"] / one
        return {**first, "activation_mb": per_sample * batch_size, "activation_sample_added_mb": per_sample,
                "activation_cpu_batches": [one]}  # fmt: skip
    second = _counted_on_cpu(spec, size, options, two, dtype)
    if second.get("activation_mb") is None:
        return {**second, "activation_cpu_batches": [one, two]}
    added = (second["activation_mb"] - first["activation_mb"]) / (two - one)
    return {**second, "activation_mb": first["activation_mb"] + added * (batch_size - one),
            "activation_sample_added_mb": added, "activation_cpu_batches": [one, two]}  # fmt: skip


def _counted_on_cpu(spec: str, size: str, options: dict | None, batch_size: int, dtype: str) -> dict:
    """activations.activations_on_cpu at `batch_size`, kept where it counted (a failure may be this moment's alone)."""

    def count(workload):
        from harness.measure.activations import activations_on_cpu as counted

        return counted(workload, batch_size=batch_size, dtype=dtype)

    kept = _kept("activations_cpu", spec, size, options, batch_size, dtype, count,
                 keep=lambda value: value.get("activation_mb") is not None)  # fmt: skip
    return kept or {"activation_mb": None, "activation_top": None, "activation_cpu_error": "it cannot be made"}


def computing_in(spec: str, size: str, options: dict | None, *, batch_size: int, param_dtype: str) -> dict | None:
    """activations.activations_computing_in of the workload; None where it cannot be made or counted."""

    def count(workload):
        from harness.measure.activations import activations_computing_in

        return activations_computing_in(workload, batch_size=batch_size, param_dtype=param_dtype)

    return _kept("computing_in", spec, size, options, batch_size, param_dtype, count)


def flops(spec: str, size: str, options: dict | None) -> dict | None:
    """pace.training_flops_per_sample of the workload (`flops_per_sample`: one sample's forward and backward) and
    the sample it counted (`tokens_per_sample`, `image_size` where the workload says); None where it cannot be made
    or run on the meta device."""

    def count(workload):
        from harness.measure.pace import training_flops_per_sample

        per_sample = training_flops_per_sample(workload)
        side = getattr(workload, "image_size", None)
        return per_sample and {"flops_per_sample": per_sample, "tokens_per_sample": workload.tokens_per_sample(),
                               "image_size": side if isinstance(side, int) else None}  # fmt: skip

    return _kept("flops", spec, size, options, None, None, count)


def described(spec: str, size: str, options: dict | None, *, batch_size: int, dtype: str, device: str,
              count: Callable[[], dict]) -> dict | None:  # fmt: skip
    """modelinfo.describe of the workload on `device` (a GPU's name and cuDNN: its kernels decide what a forward
    keeps), as `count()` counts it, for bench's rows: counted once here, not again by every run of the same setup
    (on a GPU, gpt2/full's model info took 3.2-3.8 s a run: a model built and run there). A count that raises is
    not kept, nor one whose activations failed (null: describe keeps its sizes then), which may be this moment's
    alone: a GPU out of memory while another process held it."""
    return _kept("described", spec, size, options, batch_size, f"{dtype} on {device}", count, made=False,
                 keep=lambda value: value.get("activation_mb") is not None)  # fmt: skip


def _kept(what: str, spec: str, size: str, options: dict | None, batch: int | None, dtype: str | None,
          count: Callable, keep: Callable[[Any], bool] | None = None, made: bool = True) -> Any:  # fmt: skip
    """The count kept for this question and the source as it is now; else counted (`count(workload)` given the
    workload made here, None where it cannot be; `count()` where not `made`: it has its workload, or makes its own,
    so that none is made to be thrown away) and kept, unless `keep(value)` says not. Returned as JSON gives it back
    either way, so that a count read from the cache and one made now are alike."""
    asked = json.dumps([what, spec, size, options or {}, batch, dtype], sort_keys=True, default=str)
    source = source_key(spec)
    entry = _read(asked, source) if source is not None else None
    if entry is not None:
        return entry["value"]
    if not made:
        value = count()
        if isinstance(value, str):  # unavailable here: said, not kept
            return value
    else:
        workload = _made(spec, size, options)
        if workload is None:  # it could not be made: nothing counted, nothing kept
            return None
        value = count(workload)
    value = json.loads(json.dumps(value))
    if source is not None and (keep is None or keep(value)):
        _write(asked, source, value)
    return value


def _made(spec: str, size: str, options: dict | None, *, quiet: bool = True):
    """The workload as the run built it; None where it cannot be made (unless not `quiet`: its error raised)."""
    import workloads

    try:
        return workloads.resolve(spec).create(size=size, options=dict(options or {}))
    except Exception:
        if not quiet:
            raise
        return None


def source_key(spec: str) -> dict | None:
    """What the model `spec` names comes from: ddpbench's code that builds and counts it, the libraries' versions,
    and the file the spec names where it names one (your file or module, a transformers configuration: its path
    and the hash of its content, not of the modules it imports); None where that file cannot be read (counted then,
    not kept)."""
    left, sep, target = spec.partition(":")
    key = {"ddpbench": _own_code(), "libraries": _versions()}
    if not sep or left in ("torchvision", "timm") or (left == "hf" and not _is_path(target)):
        return key
    named = target if left == "hf" else left
    path = Path(named).expanduser().resolve() if _is_path(named) else _module(spec)
    try:
        return {**key, "file": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()} if path else None
    except OSError:
        return None


def _is_path(text: str) -> bool:
    """Whether a spec's part names a file (as workloads._zoo resolves it) rather than a module or a zoo's name."""
    return text.endswith((".py", ".json")) or os.sep in text or "/" in text


def _module(spec: str) -> Path | None:
    """The file `package.module:NAME`'s module was imported from (imported as a count would import it)."""
    import workloads

    try:
        path = workloads.resolve(spec).path
    except Exception:  # it cannot be imported: the count says why, or cannot count
        return None
    return Path(path) if path else None


@functools.cache
def _own_code() -> str:
    """A hash of every module of workloads/ and of harness's modules a count runs through (`COUNTING`)."""
    import workloads

    harness = Path(__file__).resolve().parents[1]
    files = sorted(Path(workloads.__file__).resolve().parent.rglob("*.py")) + [harness / name for name in COUNTING]
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:32]


@functools.cache
def _versions() -> dict[str, str | None]:
    from harness.measure.env import library_versions

    return library_versions(LIBRARIES)


def _read(asked: str, source: dict) -> dict | None:
    """The entry kept for `asked` from `source`; None where there is none, or its file cannot be read, is half
    written or holds another question (a hash's collision): counted again then, and written whole over it."""
    path = entry_path(asked, source)
    try:
        entry = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("asked") != asked or entry.get("source") != source:
        return None
    if "value" not in entry:
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # used now: among the last to give way (`_bound`)
    return entry


def _write(asked: str, source: dict, value: Any) -> None:
    """`value` for `asked` from `source`, in a file of its own: whole or not at all (results.files.atomic_write: a
    temporary renamed into place), so that processes writing at once lose nothing of each other's, as the whole cache
    rewritten by each did; nothing where it cannot be written."""
    from harness.results.files import atomic_write

    path = entry_path(asked, source)
    text = json.dumps({"asked": asked, "source": source, "value": value})
    with contextlib.suppress(OSError):
        atomic_write(path, lambda tmp: tmp.write_text(text))
        _bound(path.parent)


def _bound(folder: Path) -> None:
    """The folder's MOST_ENTRIES files used last kept, older ones removed (a temporary a killed writer left among
    them); a file another process removed first is no error."""
    used = []
    with os.scandir(folder) as files:
        for file in files:
            with contextlib.suppress(OSError):
                used.append((file.stat().st_mtime_ns, file.path))
    for _, path in sorted(used)[:-MOST_ENTRIES]:
        with contextlib.suppress(OSError):
            os.unlink(path)

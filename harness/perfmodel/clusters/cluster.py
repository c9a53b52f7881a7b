"""Cluster profiles: a small TOML file that describes the machines a user is about to book.

A profile says how many GPUs a node has, what joins them inside a node (NVLink through NVSwitch,
an NVLink mesh, or PCIe; the all-reduce bus bandwidth it reaches, with NVLS or not), what joins the
nodes (NICs, their rate, the bus bandwidth between nodes), and which of NCCL's algorithms the NCCL
version has. Every number carries its source in `[sources]`. Built-in profiles live next to this
module (`clusters/*.toml`); `ddpbench list` shows them; `--cluster FILE` takes a user's own.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path

from harness.protocols import ConfigError
from harness.results.values import counted

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

BUILTIN_FOLDER = Path(__file__).parent
GENERATIONS = ("volta", "ampere", "hopper", "blackwell")
AS_GENERATION = {"ada": "ampere"}
"""Generations NCCL's tuner files under another: Ada (L40S, L4, RTX 6000 Ada; compute capability 8.9) takes
Ampere's constants (src/graph/tuning.cc, compCapIndex: sm80-sm89 are one index)."""
FABRICS = ("nvswitch", "nvlink", "pcie")
CPUS = ("intel", "amd")
KNOWN_ALGORITHMS = ("ring", "tree", "nvls", "nvlstree")
# The numbers a profile must give, as `section.field` (top-level fields without a section).
NUMBERS = ("gpus_per_node", "intra.nvlinks", "intra.link_gbps", "intra.busbw_gbps", "intra.nvls_busbw_gbps",
           "inter.nics", "inter.nic_gbps", "inter.busbw_gbps", "inter.latency_us")  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Cluster:
    name: str
    description: str
    gpus_per_node: int
    generation: str
    cpu: str
    algorithms: tuple[str, ...]
    fabric: str
    nvlinks: int
    link_gbps: float
    intra_busbw_gbps: float
    nvls_busbw_gbps: float
    nics: int
    nic_gbps: float
    inter_busbw_gbps: float
    inter_latency_us: float
    sources: dict[str, str]
    path: str = ""
    latency_scale: float = 1.0  # NCCL's latencies as its tuner has them; a fit to a user's logs may move it
    fitted_to: str = ""  # a profile fitted to nccl-tests logs: which, and the fit's error (nccltests_fit.fit)
    fitted_nodes: int = 0  # the most nodes those logs measured: beyond, the fitted network is carried on
    gpu_memory_gib: float = 0.0  # what a process can use of one GPU, GiB (its CUDA total; 0: not given)
    gpu_memory_gbps: float = 0.0  # one GPU's memory bandwidth, GB/s (0: not given, read from the description)
    nodes: int = 0  # how many nodes the cluster has (0: not said): the what-if page predicts up to them

    @property
    def memory_gbps(self) -> float | None:
        """One GPU's memory bandwidth, GB/s: `gpu_memory_gbps`, else (a file from before the field) the datasheet's of
        the GPU its description names; None where neither says. A 40 GB A100's copy of dgx-a100 kept 2,039 GB/s."""
        from harness.config.precision import memory_gbps

        return self.gpu_memory_gbps or memory_gbps(self.description)

    @property
    def has_network(self) -> bool:
        """Whether its nodes are linked: a profile of one node (no NICs) predicts one node only."""
        return self.nics > 0 and self.nic_gbps > 0

    @property
    def tuner_generation(self) -> str:
        """The generation whose constants NCCL's tuner takes: `generation` as the profile gives it, Ada Ampere's."""
        return AS_GENERATION.get(self.generation, self.generation)

    @property
    def intra_hw(self) -> str:
        """NCCL's hardware class of a step inside a node (tuning.cc `intraHw`): NVLink or PCI."""
        return "pcie" if self.fabric == "pcie" else "nvlink"

    @property
    def channels(self) -> int:
        """NCCL's ring channels: about one per NVLink (its search fills each link; topo.h gives
        ~20 GB/s per link and channel), two over PCIe."""
        return max(2, self.nvlinks) if self.fabric != "pcie" else 2


def builtin_names() -> list[str]:
    return sorted(path.stem for path in BUILTIN_FOLDER.glob("*.toml"))


def refuse_missing_file(name_or_file: str) -> None:
    """A .toml path that is not there is a missing file, not an unknown profile name: refused in one line."""
    path = Path(name_or_file)
    if path.suffix == ".toml" and not path.is_file():
        what = "is a folder, not a file" if path.is_dir() else "no such file"
        raise ConfigError(f"--cluster {name_or_file!r}: {what}; give a cluster profile's .toml file, or a built-in "
                          f"profile ({', '.join(builtin_names())})")  # fmt: skip


def load(name_or_file: str) -> Cluster:
    """A built-in profile by name, or a TOML file; a bad one raises ConfigError in one line."""
    path = Path(name_or_file)
    if name_or_file in builtin_names():
        path = BUILTIN_FOLDER / f"{name_or_file}.toml"
    elif path.suffix == ".toml":
        refuse_missing_file(name_or_file)
    else:
        raise ConfigError(f"--cluster {name_or_file!r} is neither a built-in profile ({', '.join(builtin_names())}) "
                          "nor a .toml file")  # fmt: skip
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"--cluster {str(path)!r} is not valid TOML: {error}") from None
    return from_mapping(data, where=str(path))


POSITIVE = ("gpus_per_node", "intra.busbw_gbps", "inter.busbw_gbps")  # the numbers that cannot be 0
COUNTS = ("gpus_per_node", "intra.nvlinks", "inter.nics")  # whole numbers
SECTIONS = {"intra": ("fabric", "nvlinks", "link_gbps", "busbw_gbps", "nvls_busbw_gbps"),
            "inter": ("nics", "nic_gbps", "busbw_gbps", "latency_us")}  # fmt: skip
TOP_LEVEL = ("name", "description", "gpus_per_node", "generation", "cpu", "algorithms", "latency_scale",
             "fitted_to", "fitted_nodes", "nodes", "gpu_memory_gib", "gpu_memory_gbps", *SECTIONS,
             "sources")  # fmt: skip
READ_BY_NOTHING = ("nccl",)
"""Keys an older profile (a built-in's copy, a fit saved before) carries that nothing reads, taken and left: `nccl`,
a version the tuner's constants never followed (they are NCCL master's, harness/perfmodel/clusters/nccl.py)."""


def _refuse_unknown_keys(data: dict, where: str) -> None:
    """A misspelt key (`latency_usec`) would otherwise read as a missing one: name it, and the keys there are."""
    tables = [("", data, TOP_LEVEL)] + [(f"{name}.", data.get(name) or {}, fields) for name, fields in SECTIONS.items()]
    for prefix, table, known in tables:
        if not isinstance(table, dict):
            raise ConfigError(f"cluster profile {where}: {prefix[:-1]} is not a table; write it as [{prefix[:-1]}]")
        if unknown := [key for key in table if key not in known and not (prefix == "" and key in READ_BY_NOTHING)]:
            raise ConfigError(f"cluster profile {where}: unknown key {prefix}{unknown[0]}; the keys are "
                              f"{', '.join(prefix + key for key in known)}")  # fmt: skip


def _number(data: dict, key: str, where: str) -> float:
    section, _, field = key.rpartition(".")
    value = (data.get(section, {}) if section else data).get(field)
    floor = "> 0" if key in POSITIVE else "≥ 0"
    if value is None:
        raise ConfigError(f"cluster profile {where}: {key} is missing; give a number {floor}")
    whole = key in COUNTS
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0
            or (floor == "> 0" and value == 0) or (whole and value != int(value))):  # fmt: skip
        raise ConfigError(f"cluster profile {where}: {key} = {value!r} is not valid; give a "
                          f"{'whole ' if whole else ''}number {floor}")  # fmt: skip
    return float(value)


def _choice(data: dict, field: str, choices: tuple[str, ...], where: str, *, section: str = "") -> str:
    value = (data.get(section, {}) if section else data).get(field)
    if value not in choices:
        name = f"{section}.{field}" if section else field
        said = f"{name} is missing" if value is None else f"{name} = {value!r} is not valid"
        raise ConfigError(f"cluster profile {where}: {said}; choose one of {', '.join(choices)}")
    return value


def _generation(data: dict, where: str) -> str:
    """The profile's generation as it gives it: an Ada one stays "ada" (what `list` shows and `to_toml` writes);
    NCCL's tuner reads it as Ampere through `Cluster.tuner_generation`."""
    return _choice(data, "generation", (*GENERATIONS, *AS_GENERATION), where)


def _latency_scale(data: dict, where: str) -> float:
    value = data.get("latency_scale", 1.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise ConfigError(f"cluster profile {where}: latency_scale = {value!r} is not valid; give a number > 0 "
                          "(1: NCCL's latencies as its tuner has them)")  # fmt: skip
    return float(value)


SHARP_FACTOR = 2.0
"""How far an all-reduce's bus bandwidth between nodes can exceed the NICs' line rate: with the reduction done
in the switch (SHARP) each node sends and receives its S bytes once, so busbw = 2(n−1)/n · S/t nears twice it."""


def _refuse_impossible_network(numbers: dict[str, float], where: str) -> None:
    """A bus bandwidth between nodes the NICs cannot carry is a unit slip (B/s for GB/s, Gb/s for GB/s) or a
    typo, and would silently make every multi-node prediction fast."""
    line_rate = numbers["inter.nics"] * numbers["inter.nic_gbps"] / 8  # GB/s leaving a node
    if line_rate > 0 and numbers["inter.busbw_gbps"] > SHARP_FACTOR * line_rate:
        raise ConfigError(f"cluster profile {where}: inter.busbw_gbps = {numbers['inter.busbw_gbps']:g} GB/s is more "
                          f"than {inter_nics_text(numbers)} can carry (at most {SHARP_FACTOR:g}× their "
                          f"{line_rate:g} GB/s, with the reduction in the switch); give the all-reduce bus "
                          "bandwidth between nodes in GB/s (nic_gbps is in Gb/s)")  # fmt: skip


def _refuse_impossible_node(numbers: dict[str, float], fabric: str, algorithms: tuple[str, ...], where: str) -> None:
    """A ring's bus bandwidth in a node above its GPUs' links both ways is a unit slip or a typo (each GPU sends
    its bus bandwidth's worth one way, at most one direction's rate); NVLS is NVLink SHARP, in NVSwitch alone."""
    if numbers["intra.link_gbps"] > 0 and numbers["intra.busbw_gbps"] > numbers["intra.link_gbps"]:
        raise ConfigError(
            f"cluster profile {where}: intra.busbw_gbps = {numbers['intra.busbw_gbps']:g} GB/s is more "
            f"than the GPU's links carry (intra.link_gbps = {numbers['intra.link_gbps']:g} GB/s, both "
            "directions together); give the ring all-reduce's bus bandwidth in one node, in GB/s"
        )
    if fabric != "nvswitch" and (nvls := [a for a in algorithms if a.startswith("nvls")]):
        raise ConfigError(f"cluster profile {where}: algorithms {list(algorithms)} has {', '.join(nvls)}, which "
                          f"needs NVSwitch (NVLink SHARP), but intra.fabric is {fabric!r}; drop it, or give fabric "
                          "= \"nvswitch\"")  # fmt: skip


def refuse_without_network(chosen: Cluster, nodes: list[int], *, asked: str) -> None:
    """A profile without NICs describes one node: across nodes its all-reduce would cost nothing. `asked`: what
    wanted more nodes, as the refusal names it ('--nodes 2', 'the what-if page's 8 to 1024 GPUs')."""
    if not chosen.has_network and any(n > 1 for n in nodes):
        raise ConfigError(f"{asked}: cluster profile {chosen.path} has no network between nodes (inter.nics = "
                          f"{chosen.nics}, inter.nic_gbps = {chosen.nic_gbps:g}); give its NICs, or predict one "
                          "node")  # fmt: skip


def inter_nics_text(numbers: dict[str, float]) -> str:
    return f"{counted(int(numbers['inter.nics']), 'NIC')} of {numbers['inter.nic_gbps']:g} Gb/s"


FIELDS = {"gpus_per_node": "gpus_per_node", "intra.nvlinks": "nvlinks", "intra.link_gbps": "link_gbps",
          "intra.busbw_gbps": "intra_busbw_gbps", "intra.nvls_busbw_gbps": "nvls_busbw_gbps", "inter.nics": "nics",
          "inter.nic_gbps": "nic_gbps", "inter.busbw_gbps": "inter_busbw_gbps",
          "inter.latency_us": "inter_latency_us", "intra.fabric": "fabric"}  # fmt: skip
"""Each profile key (`section.field` below the top level) and the Cluster field that holds it: read by
from_mapping, written by to_toml."""


def from_mapping(data: dict, *, where: str = "<profile>") -> Cluster:
    _refuse_unknown_keys(data, where)
    numbers = {key: _number(data, key, where) for key in NUMBERS}
    _refuse_impossible_network(numbers, where)
    given = data.get("algorithms", ["ring", "tree"])
    algorithms = tuple(given) if isinstance(given, list) else (given,)  # "ring" alone: said as given, not r, i, n, g
    unknown = [a for a in algorithms if a not in KNOWN_ALGORITHMS]
    if unknown or "ring" not in algorithms:
        raise ConfigError(f"cluster profile {where}: algorithms {list(algorithms)} is not valid; give ring and any of "
                          f"{', '.join(KNOWN_ALGORITHMS)}")  # fmt: skip
    fabric = _choice(data, "fabric", FABRICS, where, section="intra")
    _refuse_impossible_node(numbers, fabric, algorithms, where)
    sources = {str(k): str(v) for k, v in data.get("sources", {}).items()}
    _refuse_non_text(data, where)
    name = str(data.get("name") or Path(where).stem)
    if data.get("fitted_to") and " fitted to " in name:  # a fit saved before its file's stem named it: a sentence
        name = Path(where).stem
    return Cluster(
        name=name, description=str(data.get("description", "")),
        **{FIELDS[key]: int(value) if key in COUNTS else value for key, value in numbers.items()},
        generation=_generation(data, where), cpu=_choice(data, "cpu", CPUS, where),
        algorithms=algorithms,
        fabric=fabric, sources=sources, path=where, latency_scale=_latency_scale(data, where),
        fitted_to=str(data.get("fitted_to", "")),
        fitted_nodes=_node_count(data, "fitted_nodes", where, means=FITTED_NODES_MEANS),
        nodes=_node_count(data, "nodes", where, means=NODES_MEANS),
        gpu_memory_gib=_number(data, "gpu_memory_gib", where) if "gpu_memory_gib" in data else 0.0,
        gpu_memory_gbps=_number(data, "gpu_memory_gbps", where) if "gpu_memory_gbps" in data else 0.0,
    )  # fmt: skip


TEXT = ("name", "description", "fitted_to")  # free text: a number there is a slip (a count for a name)


def _refuse_non_text(data: dict, where: str) -> None:
    for key in TEXT:
        if key in data and not isinstance(data[key], str):
            raise ConfigError(f"cluster profile {where}: {key} = {data[key]!r} is not valid; give it as text, in "
                              "quotes")  # fmt: skip


FITTED_NODES_MEANS = "the most nodes the logs it was fitted to measured, a whole number ≥ 0 (0: not fitted)"
NODES_MEANS = "how many nodes the cluster has, a whole number ≥ 1 (or leave it out)"


def _node_count(data: dict, key: str, where: str, *, means: str) -> int:
    """An optional whole number of nodes (0 where left out), refused in one line naming what it `means`."""
    value = data.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"cluster profile {where}: {key} = {value!r} is not valid; give {means}")
    return value


def to_toml(profile: Cluster) -> str:
    """The profile as a file `load` reads back to the same Cluster (a fitted one with its fit: which logs, their
    error, how many nodes they reach), so that a fit is made once and used by every command. Written here, not by
    a TOML library: the standard library reads TOML but does not write it, and a profile is flat strings, numbers
    and one list. Strings are JSON's, which TOML's basic strings read the same."""
    text = _toml_string
    headline = f"{profile.name}: fitted to {profile.fitted_to}" if profile.fitted_to else profile.description
    headline = headline or profile.name
    headline = "".join(c for c in " ".join(headline.split()) if c.isprintable())  # a comment: one line, no controls
    lines = [f"# {headline}",
             f"name = {text(profile.name)}", f"description = {text(profile.description)}",
             f"gpus_per_node = {profile.gpus_per_node}", f"generation = {text(profile.generation)}",
             f"cpu = {text(profile.cpu)}",
             f"algorithms = [{', '.join(map(text, profile.algorithms))}]",
             f"latency_scale = {profile.latency_scale!r}"]  # fmt: skip
    if profile.gpu_memory_gib:
        lines.append(f"gpu_memory_gib = {profile.gpu_memory_gib!r}")
    if profile.gpu_memory_gbps:
        lines.append(f"gpu_memory_gbps = {profile.gpu_memory_gbps!r}")
    if profile.nodes:
        lines.append(f"nodes = {profile.nodes}")
    if profile.fitted_to:
        lines += [f"fitted_to = {text(profile.fitted_to)}", f"fitted_nodes = {profile.fitted_nodes}"]
    for section, keys in SECTIONS.items():
        lines += ["", f"[{section}]"]
        for key in keys:
            value = getattr(profile, FIELDS[f"{section}.{key}"])
            lines.append(f"{key} = {text(value) if isinstance(value, str) else repr(value)}")
    lines += ["", "[sources]", *(f"{text(key)} = {text(said)}" for key, said in profile.sources.items())]
    return "\n".join(lines) + "\n"


def _toml_string(value: str) -> str:
    """A TOML basic string: JSON's escapes, which TOML reads alike, and DEL escaped too (JSON leaves it, TOML
    refuses it); a lone surrogate (a file name's undecodable byte) cannot be written in UTF-8 and becomes '?'."""
    printable = value.encode("utf-8", "replace").decode("utf-8")
    return json.dumps(printable, ensure_ascii=False).replace("\x7f", "\\u007f")


def unsourced(cluster: Cluster) -> list[str]:
    """The fields whose number the profile does not say the source of (latency_scale where it is not 1, NCCL's
    latencies as its tuner has them)."""
    keys = (
        "gpus_per_node",
        "generation",
        "cpu",
        "algorithms",
        *(("latency_scale",) if cluster.latency_scale != 1.0 else ()),
        *NUMBERS[1:],
        *(("gpu_memory_gib",) if cluster.gpu_memory_gib else ()),
        *(("gpu_memory_gbps",) if cluster.gpu_memory_gbps else ()),
        *(("nodes",) if cluster.nodes else ()),
    )
    return [key for key in keys if not cluster.sources.get(key)]


def is_builtin(cluster: Cluster) -> bool:
    """A built-in profile as shipped: not a user's file (even one under a built-in's name), not fitted (a fit keeps
    its base's path, and one saved under a built-in's name its name too: its numbers are not what was checked)."""
    shipped = cluster.path == str(BUILTIN_FOLDER / f"{cluster.name}.toml")
    return cluster.name in builtin_names() and shipped and not cluster.fitted_to

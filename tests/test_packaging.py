"""A normal (non-editable) install holds one package, `plancontracts`, and works on its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project built as a wheel and unpacked into a folder, as pip would install it."""
    scratch = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    subprocess.run([*pip, "wheel", "--no-deps", "--wheel-dir", scratch, ROOT], check=True)
    [wheel] = scratch.glob("plancontracts-*.whl")
    target = scratch / "site"
    subprocess.run([*pip, "install", "--no-deps", "--target", target, wheel], check=True)
    return target


def python_in(site: Path, code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # The installed copy comes first on the path; the run starts away from the checkout.
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )


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

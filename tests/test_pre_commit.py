"""The hooks of .pre-commit-hooks.yaml, run by pre-commit itself as a user's project runs them.

The hook repository is the working tree, committed into a temporary git
repository (pre-commit clones a commit). The user's project is another one,
whose .pre-commit-config.yaml is the one docs/contracts.md shows, pointed at
that commit. pre-commit builds each hook's virtualenv with pip, offline: from
the wheelhouse `python3 dev.py setup` fills, never an index. The environments
are made once per module, under a private PRE_COMMIT_HOME.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from plancontracts.codegen import generate

ROOT = Path(__file__).resolve().parent.parent
WHEELHOUSE = ROOT / "build" / "wheelhouse"
DOCS = ROOT / "docs" / "contracts.md"

pytestmark = [pytest.mark.process, pytest.mark.slow]

# Only a hang should reach it: building a hook's environment takes a minute on a
# loaded 2-core machine.
TIMEOUT = 900

RECIPE = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Recipe",
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "servings"],
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "servings": {"type": "integer", "minimum": 1},
    },
}
SOUP = {"name": "Soup", "servings": 4}
BROKEN = {"name": "Stew", "servings": 0}


def git(*args: str, cwd: Path) -> str:
    identity = ["-c", "user.name=plancontracts tests", "-c", "user.email=tests@example.org"]
    command = ["git", *identity, "-c", "commit.gpgsign=false", *args]
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def offline_environment(home: Path) -> dict[str, str]:
    """pre-commit's environment: its own store, and pip and virtualenv kept off the network."""
    environment = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("PIP_", "PRE_COMMIT", "VIRTUALENV_", "GIT_"))
    }
    return {
        **environment,
        "PRE_COMMIT_HOME": str(home),
        "PIP_CONFIG_FILE": os.devnull,  # no index or links from the machine's settings
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(WHEELHOUSE),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "VIRTUALENV_NO_PERIODIC_UPDATE": "1",
        "PRE_COMMIT_COLOR": "never",
    }


@pytest.fixture(scope="module")
def hooks(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The working tree as a hook repository: its files committed in a fresh repository.

    Returns the repository and its commit. The files are those git would list
    (tracked, or new and not ignored), as they are now.
    """
    if not (WHEELHOUSE / ".stamp").is_file():
        pytest.skip(f"no wheelhouse at {WHEELHOUSE}: `python3 dev.py setup` downloads it")
    repository = tmp_path_factory.mktemp("hooks")
    listed = git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT)
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():  # a file deleted but not yet committed is listed too
            (repository / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, repository / name)
    git("init", "--quiet", cwd=repository)
    git("add", "--all", cwd=repository)
    git("commit", "--quiet", "--message", "the working tree", cwd=repository)
    return repository, git("rev-parse", "HEAD", cwd=repository)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pre-commit's store, shared by the module's tests: each environment is built once."""
    return tmp_path_factory.mktemp("pre-commit-home")


def documented_config() -> str:
    """The .pre-commit-config.yaml of docs/contracts.md's "Pre-commit hooks" section."""
    text = DOCS.read_text(encoding="utf-8")
    section = text[text.index("### Pre-commit hooks") :]
    found = re.search(r"```yaml\n(.*?)```", section, flags=re.DOTALL)
    assert found is not None, "docs/contracts.md shows no .pre-commit-config.yaml"
    return found[1]


@pytest.fixture
def project(tmp_path: Path, hooks: tuple[Path, str]) -> Path:
    """A user's project as the documentation lays it out, with the documented config.

    schemas/recipes/recipe.json, recipes/ and menu/ of documents, and the
    models generated from schemas/ in kitchen/models/; its config names the
    hook repository's commit where the documentation names plancontracts'.
    """
    repository, commit = hooks
    config = documented_config()
    config, replaced = re.subn(r"(?m)^(\s*- repo: ).*$", rf"\g<1>{repository}", config)
    assert replaced == 1
    config, replaced = re.subn(r"(?m)^(\s*rev: ).*$", rf"\g<1>{commit}", config)
    assert replaced == 1
    (tmp_path / ".pre-commit-config.yaml").write_text(config, encoding="utf-8")
    (tmp_path / "schemas" / "recipes").mkdir(parents=True)
    (tmp_path / "schemas/recipes/recipe.json").write_text(json.dumps(RECIPE, indent=2))
    for folder in ("recipes", "menu"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "soup.json").write_text(json.dumps(SOUP))
        (tmp_path / folder / "stew.json").write_text(json.dumps(BROKEN))
    (tmp_path / "kitchen").mkdir()
    generate.write(tmp_path / "schemas", tmp_path / "kitchen" / "models")
    git("init", "--quiet", cwd=tmp_path)
    git("add", "--all", cwd=tmp_path)
    return tmp_path


def pre_commit(*args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pre_commit", *args]
    return subprocess.run(
        command,
        cwd=cwd,
        env=offline_environment(home),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def run_hook(hook: str, *files: str, project: Path, home: Path) -> subprocess.CompletedProcess[str]:
    return pre_commit("run", hook, "--files", *files, cwd=project, home=home)


def test_validate_by_a_schema_file_passes_a_valid_file_and_fails_an_invalid_one(
    project: Path, home: Path
) -> None:
    done = run_hook("plancontracts-validate", "recipes/soup.json", project=project, home=home)
    assert done.returncode == 0, done.stdout + done.stderr
    done = run_hook(
        "plancontracts-validate",
        "recipes/soup.json",
        "recipes/stew.json",
        project=project,
        home=home,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "recipes/stew.json: invalid (1 violation)" in done.stdout
    assert "  /servings: " in done.stdout
    assert "recipes/soup.json: valid" in done.stdout


def test_validate_by_a_folder_contract_fails_an_invalid_file(project: Path, home: Path) -> None:
    done = run_hook("plancontracts-validate", "menu/soup.json", project=project, home=home)
    assert done.returncode == 0, done.stdout + done.stderr
    done = run_hook("plancontracts-validate", "menu/stew.json", project=project, home=home)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "the menu's dishes are recipes" in done.stdout  # the documented hook's name
    assert "menu/stew.json: invalid (1 violation)" in done.stdout
    assert "  /servings: " in done.stdout


def test_generate_check_passes_fresh_models_and_fails_stale_ones(project: Path, home: Path) -> None:
    schema = "schemas/recipes/recipe.json"
    done = run_hook("plancontracts-generate-check", schema, project=project, home=home)
    assert done.returncode == 0, done.stdout + done.stderr
    edited = json.loads((project / schema).read_text())
    edited["properties"]["name"]["maxLength"] = 80
    (project / schema).write_text(json.dumps(edited, indent=2))
    done = run_hook("plancontracts-generate-check", schema, project=project, home=home)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "stale: kitchen/models/recipes.py" in done.stdout
    assert "stale: kitchen/models/schemas/recipe.json" in done.stdout
    assert "kitchen/models is stale" in done.stdout


def test_validate_without_args_fails_in_one_line(
    project: Path, hooks: tuple[Path, str], home: Path
) -> None:
    """A hook with no `args`: plancontracts-validate takes the first file for a contract's name."""
    repository, commit = hooks
    config = f"repos:\n  - repo: {repository}\n    rev: {commit}\n"
    config += "    hooks:\n      - id: plancontracts-validate\n"
    (project / "bare.yaml").write_text(config, encoding="utf-8")
    done = pre_commit(
        "run", "--config", "bare.yaml", "--files", "recipes/soup.json", cwd=project, home=home
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "- exit code: 2" in done.stdout  # a usage error
    assert (
        "plancontracts: error: give the documents to validate after the contract's name"
        in done.stdout
    )
    assert "Traceback" not in done.stdout + done.stderr


def edit_recipe(project: Path, **changes: Any) -> None:
    """Change the project's recipe schema (its root keys, and `required`) and stage it."""
    path = project / "schemas/recipes/recipe.json"
    schema = json.loads(path.read_text())
    schema.update(changes)
    path.write_text(json.dumps(schema, indent=2))
    git("add", "--all", cwd=project)


def test_diff_fails_a_breaking_change_until_the_version_is_raised(
    project: Path, home: Path
) -> None:
    schema = "schemas/recipes/recipe.json"
    edit_recipe(project, **{"x-version": 1})
    # The first commit: every contract is new.
    done = run_hook("plancontracts-diff", schema, project=project, home=home)
    assert done.returncode == 0, done.stdout + done.stderr
    git("commit", "--quiet", "--message", "recipes", cwd=project)
    edit_recipe(project, required=["name", "servings", "notes"])
    done = run_hook("plancontracts-diff", schema, project=project, home=home)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "recipe #/required: field required: readers breaking" in done.stdout
    assert "recipe: a change that is not compatible, and x-version 1 -> 1: raise it" in (
        done.stdout
    )
    edit_recipe(project, **{"x-version": 2})
    done = run_hook("plancontracts-diff", schema, project=project, home=home)
    assert done.returncode == 0, done.stdout + done.stderr


def test_try_repo_runs_the_diff_hook_of_the_checkout(
    project: Path, hooks: tuple[Path, str], tmp_path: Path
) -> None:
    """pre-commit's own way to try a hook repository: its hooks with no `args`.

    plancontracts-diff then compares schemas/ with the last commit and fails on
    any change that is not compatible for both sides.
    """
    repository, _ = hooks
    git("commit", "--quiet", "--message", "recipes", cwd=project)
    edit_recipe(project, additionalProperties=True)
    done = pre_commit(
        "try-repo",
        str(repository),
        "plancontracts-diff",
        "--files",
        "schemas/recipes/recipe.json",
        cwd=project,
        home=tmp_path / "try-repo-home",
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "- exit code: 1" in done.stdout
    assert (
        "recipe #/additionalProperties: additional properties opened: readers compatible, "
        "writers breaking" in done.stdout
    )
    assert "Traceback" not in done.stdout + done.stderr

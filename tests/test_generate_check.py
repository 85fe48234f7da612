"""`generate --check` compares what a generated package means, never how it is laid out.

The codegen extra admits a range of ruff versions, whose layouts differ (ruff
0.1.4 to 0.2 break long annotations otherwise than 0.3 and later), so a
package generated under one must be up to date under another. Every change in
what the package says (a type, a field, a default, a docstring, a schema, the
index, a file more or less) is still stale, and named.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from commands import cli

from plancontracts.codegen import generate

RECIPE = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Recipe",
    "description": "A dish and how many it feeds.",
    "type": "object",
    "additionalProperties": False,
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "maxLength": 80, "description": "What the dish is called."},
        "servings": {"type": "integer", "minimum": 1, "default": 2},
        "vegetarian": {"type": "boolean", "default": True},
    },
}


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A package generated from one schema file, once for the module (it takes a second)."""
    root = tmp_path_factory.mktemp("generated")
    (root / "recipe.json").write_text(json.dumps(RECIPE, indent=2), encoding="utf-8")
    generate.write([root / "recipe.json"], root / "recipes")
    return root


@pytest.fixture
def wanted(generated: Path) -> dict[str, str]:
    """What the schema produces, read back from the generated package: bytes are the same."""
    out = generated / "recipes"
    return {
        path.relative_to(out).as_posix(): path.read_text(encoding="utf-8")
        for path in out.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }


@pytest.fixture
def out(generated: Path, tmp_path: Path) -> Path:
    """A copy of the generated package, to lay out again or break."""
    return Path(shutil.copytree(generated / "recipes", tmp_path / "recipes"))


def stale(wanted: dict[str, str], out: Path) -> list[str]:
    return generate.stale_files(wanted, out, by_meaning=True)


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{path.name} holds no {old!r}"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def ruff_format(path: Path, *options: str) -> None:
    command = [sys.executable, "-m", "ruff", "format", "--isolated", *options, str(path)]
    subprocess.run(command, check=True, capture_output=True)


def test_a_fresh_package_is_up_to_date_by_bytes_and_by_meaning(
    wanted: dict[str, str], out: Path
) -> None:
    assert sorted(wanted) == ["__init__.py", "recipe.py", "schemas/recipe.json"]
    assert generate.stale_files(wanted, out) == []
    assert stale(wanted, out) == []


@pytest.mark.parametrize(
    "lay_out",
    [
        pytest.param(lambda out: ruff_format(out, "--line-length", "40"), id="line-length-40"),
        pytest.param(
            lambda out: ruff_format(out, "--config", "indent-width=2"), id="indent-width-2"
        ),
        pytest.param(
            lambda out: ruff_format(out, "--config", "format.quote-style='single'"),
            id="single-quotes",
        ),
        pytest.param(
            lambda out: edit(out / "recipe.py", "\nclass Recipe", "\n\n\n\nclass Recipe"),
            id="blank-lines",
        ),
        pytest.param(
            lambda out: edit(
                out / "recipe.py",
                "import msgspec as _msgspec\n",
                "import msgspec as _msgspec  # the models\n",
            ),
            id="a-comment-past-the-header",
        ),
        pytest.param(
            lambda out: (out / "schemas/recipe.json").write_text(
                json.dumps(json.loads((out / "schemas/recipe.json").read_text()), sort_keys=True)
            ),
            id="json-on-one-line-keys-sorted",
        ),
    ],
)
def test_a_package_laid_out_otherwise_is_up_to_date(
    wanted: dict[str, str], out: Path, lay_out: Callable[[Path], None]
) -> None:
    before = {path: path.read_bytes() for path in out.rglob("*") if path.is_file()}
    lay_out(out)
    assert any(path.read_bytes() != data for path, data in before.items())  # it did change
    assert stale(wanted, out) == []


@pytest.mark.parametrize(
    ("path", "old", "new"),
    [
        pytest.param(
            "recipe.py",
            "name: _typing.Annotated[str,",
            "name: _typing.Annotated[bytes,",
            id="a-field-type",
        ),
        pytest.param("recipe.py", "max_length=80", "max_length=81", id="a-constraint"),
        pytest.param("recipe.py", "= 2\n", "= 3\n", id="a-default"),
        pytest.param(
            "recipe.py",
            "What the dish is called.",
            "What the dish was called.",
            id="a-field-docstring",
        ),
        pytest.param(
            "recipe.py", "A dish and how many it feeds.", "A dish.", id="a-class-docstring"
        ),
        pytest.param(
            "recipe.py",
            "forbid_unknown_fields=True",
            "forbid_unknown_fields=False",
            id="a-class-keyword",
        ),
        pytest.param("recipe.py", "Do not edit", "Do edit", id="the-header"),
        pytest.param("recipe.py", "class Recipe", "class Recipe(", id="not-python-any-more"),
        pytest.param("__init__.py", '"recipe"', '"recipes"', id="the-index"),
        pytest.param(
            "schemas/recipe.json", '"maxLength": 80', '"maxLength": 81', id="a-schema-value"
        ),
        pytest.param(
            "schemas/recipe.json", '"default": true', '"default": 1', id="a-schema-true-made-1"
        ),
        pytest.param(
            "schemas/recipe.json", '"default": 2', '"default": 2.0', id="a-schema-2-made-2.0"
        ),
    ],
)
def test_each_change_in_meaning_is_stale(
    wanted: dict[str, str], out: Path, path: str, old: str, new: str
) -> None:
    edit(out / path, old, new)
    assert stale(wanted, out) == [path]


def test_a_removed_field_is_stale(wanted: dict[str, str], out: Path) -> None:
    module = out / "recipe.py"
    lines = module.read_text(encoding="utf-8").splitlines(keepends=True)
    kept = [line for line in lines if not line.lstrip().startswith("vegetarian:")]
    assert len(kept) == len(lines) - 1
    module.write_text("".join(kept), encoding="utf-8")
    assert stale(wanted, out) == ["recipe.py"]


def test_a_missing_an_extra_and_an_undecodable_file_are_stale(
    wanted: dict[str, str], out: Path
) -> None:
    (out / "schemas/recipe.json").unlink()
    (out / "notes.txt").write_text("left over", encoding="utf-8")
    (out / "recipe.py").write_bytes(b"\xff" + (out / "recipe.py").read_bytes())
    assert stale(wanted, out) == ["notes.txt", "recipe.py", "schemas/recipe.json"]


def test_json_that_is_not_strict_is_stale(wanted: dict[str, str], out: Path) -> None:
    edit(out / "schemas/recipe.json", '"minimum": 1', '"minimum": NaN')
    assert stale(wanted, out) == ["schemas/recipe.json"]


def test_generate_check_passes_a_reformatted_package_and_names_a_changed_one(
    generated: Path, out: Path
) -> None:
    """The command, end to end: `generate --check` renders the schema again."""
    schema = str(generated / "recipe.json")
    ruff_format(out, "--line-length", "40")
    done = cli("generate", "--check", "--schema", schema, "--out", str(out))
    assert (done.returncode, done.stdout) == (0, f"{out} is up to date\n"), done.stderr
    edit(out / "recipe.py", "max_length=80", "max_length=81")
    done = cli("generate", "--check", "--schema", schema, "--out", str(out))
    assert done.returncode == 1, done.stderr
    assert done.stdout == f"stale: {out / 'recipe.py'}\n{out} is stale\n"


def test_generate_itself_rewrites_a_file_laid_out_otherwise(generated: Path, out: Path) -> None:
    """`generate` writes the installed ruff's layout; only `--check` looks past layout."""
    ruff_format(out, "--line-length", "40")
    assert generate.write([generated / "recipe.json"], out) != []
    assert generate.stale_files(generate.render([generated / "recipe.json"]), out) == []


def test_files_nested_past_the_parsers_limits_are_stale_not_a_crash(
    wanted: dict[str, str], out: Path
) -> None:
    depth = 100_000
    (out / "recipe.py").write_text("x = " + "(" * depth + ")" * depth + "\n", encoding="utf-8")
    (out / "schemas/recipe.json").write_text("[" * depth + "]" * depth, encoding="utf-8")
    assert stale(wanted, out) == ["recipe.py", "schemas/recipe.json"]

"""README.md and docs/*.md: their examples run as written, and their links lead somewhere."""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path

import pytest
from local_servers import A_PLAN, Reply, model_server

from plancontracts.generated import FAMILIES

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]
TEXTS = {page: page.read_text(encoding="utf-8") for page in PAGES}
FENCED = re.compile(r"```(\w+)\n(.*?)```", flags=re.DOTALL)


def blocks(page: Path) -> list[tuple[int, str, str]]:
    """Each fenced block of `page`: the line its fence opens on, its language and its body."""
    text = TEXTS[page]
    return [
        (text.count("\n", 0, found.start()) + 1, found[1], found[2])
        for found in FENCED.finditer(text)
    ]


QUICK_START = blocks(README)[0]


def _examples() -> list[tuple[Path, int, str, str, str | None]]:
    """Every shell and Python example after the quick start, in page order.

    Each comes with its page, its line, its language, its body, and the output the page
    promises for it: the `text` block right after a shell example, if any.
    """
    found = []
    for page in PAGES:
        fenced = blocks(page)
        for index, (line, kind, body) in enumerate(fenced):
            if kind not in ("sh", "python") or (page, line) == (README, QUICK_START[0]):
                continue
            following = fenced[index + 1] if index + 1 < len(fenced) else None
            shown = following[2] if kind == "sh" and following and following[1] == "text" else None
            found.append((page, line, kind, body, shown))
    return found


EXAMPLES = _examples()

# A command that writes with the packaged model, unless it is told to ask a server
# or to fall back; a Python example names the model.
MODEL_COMMAND = re.compile(
    r"plancontracts (?:plan|play|think|write|goals plan|session drive|story build)\b"
    r"(?![^\n]*--(?:server|fallback))"
)


def marks(kind: str, body: str) -> list[pytest.MarkDecorator]:
    """An example's marks: `process` for a shell's, `model` for one that writes with the model.

    A shell example runs the console script as a reader does, in processes.
    """
    found = [pytest.mark.process] if kind == "sh" else []
    if MODEL_COMMAND.search(body) if kind == "sh" else "gemma3-270m" in body:
        found.append(pytest.mark.model)
    return found


def test_the_quick_start_is_exactly_two_commands_and_ci_runs_the_second() -> None:
    text = TEXTS[README]
    assert text.index("## Quick start") < text.index("```sh")
    assert QUICK_START[2].splitlines() == ["python3 dev.py demo", "python3 dev.py test"]
    ci = (ROOT / ".ci/run").read_text(encoding="utf-8")
    assert [line for line in ci.splitlines() if "dev.py" in line] == ["python3 dev.py test"]


@pytest.fixture(scope="module")
def folder_of(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Path], Path]:
    """One folder per page for all its examples, as for a reader who follows it in order."""
    folders: dict[Path, Path] = {}

    def folder(page: Path) -> Path:
        if page not in folders:
            folders[page] = tmp_path_factory.mktemp(page.stem)
        return folders[page]

    return folder


@pytest.fixture(scope="module")
def stub_server() -> Iterator[str]:
    """A model server's address, for the pages whose examples ask one: it answers with a plan."""
    with model_server(lambda number, body: Reply(content=A_PLAN)) as server:
        yield server.url


@pytest.mark.parametrize(
    ("page", "line", "kind", "body", "shown"),
    [
        pytest.param(*example, marks=marks(example[2], example[3]), id=f"{page.name}:{line}")
        for example in EXAMPLES
        for page, line in [example[:2]]
    ],
)
def test_examples_run(
    page: Path,
    line: int,
    kind: str,
    body: str,
    shown: str | None,
    folder_of: Callable[[Path], Path],
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    folder = folder_of(page)
    if page.name == "model-server.md":  # its examples ask a server: a stub answering plans
        monkeypatch.setenv("PLANCONTRACTS_SERVER", request.getfixturevalue("stub_server"))
    if kind == "python":
        saved = re.match(r"# (test_\w+\.py)\n", body)
        if saved:  # a test module the reader saves, for the shell examples after it to run
            (folder / saved[1]).write_text(body, encoding="utf-8")
            return
        if request.node.get_closest_marker("model"):  # the session's model, not a second one
            request.getfixturevalue("shared_model")
        monkeypatch.chdir(folder)
        if "set_tracer_provider" in body:
            # OpenTelemetry's providers are set once per process: this example's run in
            # a process of its own, as a program that sets them up does.
            ran = subprocess.run(
                [sys.executable, "-c", body],
                cwd=folder,
                capture_output=True,
                text=True,
                check=False,
            )
            assert ran.returncode == 0, ran.stderr
            return
        exec(compile(body, f"{page.name}:{line}", "exec"), {})
        return
    # `generate` without --out rewrites the project's generated/; with it, a folder of the
    # reader's. So does `--snapshot-update` for the project's own tests/, not for the reader's.
    rewrites_the_project = re.search(
        r"plancontracts generate(?! --check)(?![^\n]*--out)|pytest tests/[^\n]*--snapshot-update",
        body,
    )
    if rewrites_the_project or "dev.py bench" in body:
        pytest.skip("changes the project or times the machine: run by hand")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", body],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    if shown is not None:
        assert done.stdout == shown


FAMILY_PACKAGES = sorted(set(FAMILIES.values()))
FRONTS = frozenset(
    {
        "plancontracts",
        "plancontracts.generated",
        "plancontracts.runtime.model",
        "plancontracts.pytest_plugin",
        *(f"plancontracts.generated.{family}" for family in FAMILY_PACKAGES),
        *(f"plancontracts.runtime.{family}" for family in FAMILY_PACKAGES),
    }
)
"The modules an example may import plancontracts' names from: the public fronts."


@cache
def exported(front: str) -> frozenset[str]:
    """The names `front` exports: its `__all__`, or (a generated module) its public names."""
    module = importlib.import_module(front)
    names = getattr(module, "__all__", None)
    if names is None:
        names = [
            name
            for name, value in vars(module).items()
            if not name.startswith("_") and not inspect.ismodule(value)
        ]
    return frozenset(names)


def past_the_fronts(source: str, where: str, first_line: int) -> list[str]:
    """Each import of the Python example `source` that reaches past the fronts.

    Each is said as `where:line: import`, `first_line` being the line of the
    page the example's first line is on.
    Other projects' modules (json, trio) are imported freely; a module of
    plancontracts must be a front, and what is imported from one a name it
    exports, never a module reached through it.
    """

    def ours(module: str) -> bool:
        return module == "plancontracts" or module.startswith("plancontracts.")

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            deep = any(ours(alias.name) and alias.name not in FRONTS for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            deep = node.level > 0 or (
                ours(module)
                and (
                    module not in FRONTS
                    or any(
                        alias.name != "*" and alias.name not in exported(module)
                        for alias in node.names
                    )
                )
            )
        else:
            continue
        if deep:
            found.append((first_line + node.lineno - 1, ast.unparse(node)))
    return [f"{where}:{line}: {statement}" for line, statement in sorted(found)]


def test_the_python_examples_import_only_from_the_fronts() -> None:
    python = [(page, line, body) for page, line, kind, body, _ in EXAMPLES if kind == "python"]
    assert python, "no Python example found: the check below would prove nothing"
    deep = [
        found
        for page, line, body in python
        for found in past_the_fronts(body, str(page.relative_to(ROOT)), line + 1)
    ]
    assert deep == [], "imports past the public fronts:\n" + "\n".join(deep)


def test_the_front_check_catches_an_import_past_the_fronts() -> None:
    example = textwrap.dedent(
        """\
        import json

        import trio

        from plancontracts import PLAN, decode
        from plancontracts.generated.tool_plans import Plan
        from plancontracts.runtime.model import ModelChoice
        from plancontracts.runtime.tool_plans import Planner
        from plancontracts.runtime.tool_plans.agent import Planner as Deep
        import plancontracts.runtime.engine.skills
        from plancontracts.runtime.planning_blocks import mechanics
        from plancontracts.runtime import session_plans
        from plancontracts import runtime, decode as decoded
        """
    )
    assert past_the_fronts(example, "docs/made-up.md", 20) == [
        "docs/made-up.md:28: from plancontracts.runtime.tool_plans.agent import Planner as Deep",
        "docs/made-up.md:29: import plancontracts.runtime.engine.skills",
        "docs/made-up.md:30: from plancontracts.runtime.planning_blocks import mechanics",
        "docs/made-up.md:31: from plancontracts.runtime import session_plans",
        "docs/made-up.md:32: from plancontracts import runtime, decode as decoded",
    ]


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def links(page: Path) -> list[str]:
    """The targets of the Markdown links of `page`, outside its fenced blocks."""
    return LINK.findall(FENCED.sub("", TEXTS[page]))


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the headings of `page`."""
    headings = re.findall(r"^#+ (.+)$", FENCED.sub("", TEXTS[page]), flags=re.MULTILINE)
    return {
        re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings
    }


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_links_lead_to_a_page_and_heading_of_the_project(page: Path) -> None:
    broken = []
    for target in links(page):
        if re.match(r"[a-z]+:", target):  # https: and the like are not checked here
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.is_relative_to(ROOT) or not linked.exists():
            broken.append(f"{target}: no such file in the project")
        elif anchor and (linked not in TEXTS or anchor not in anchors(linked)):
            broken.append(f"{target}: no such heading")
    assert not broken, f"{page.name}: " + "; ".join(broken)


def test_every_page_of_the_manual_is_linked_from_the_readme() -> None:
    linked = {(ROOT / target.partition("#")[0]).resolve() for target in links(README)}
    assert [page.name for page in DOCS if page not in linked] == []

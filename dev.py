"""Set up the project's environment and run its jobs, with nothing but Python installed.

    python3 dev.py demo    # set up, validate the bundled examples, play one narrated turn
    python3 dev.py test    # set up, then lint, type-check, check generated/, run all tests
    python3 dev.py test --fast  # set up, then lint, type-check, run the fast tier of tests:
                                # no model, process or slow test, tens of hypothesis examples
    python3 dev.py bench [NAME ...]  # set up, run benchmarks: validation, executor, planning,
                                     # skills, thinking, served, suite (the table of the
                                     # JSON-Schema-Test-Suite), user_schema (a 2 MB schema
                                     # loaded, validated, generated), asyncio_bridge
                                     # (trio code awaited from asyncio), streaming (a
                                     # document read as written), streamed_plans (tools
                                     # started while the plan is written) (default: all)
    python3 dev.py setup   # only set up
    python3 dev.py lock    # resolve the newest versions pyproject.toml allows into
                           # constraints.txt, then set up with them

Setting up creates `.venv/` beside this file and installs the project into it
(editable, with every extra and the `dev` dependency group) at the exact
versions of constraints.txt, so every checkout and CI run gets the same ones,
and with it the native fast path, plancontracts-fast, compiled from native/
(the `fast` extra names it; it is on no package index). It also downloads the
core's dependencies, the codegen extra's and the build backend as wheels into
build/wheelhouse/, where the packaging and pre-commit tests install the
project from without a network. Each is repeated only when pyproject.toml or
constraints.txt changes, and .venv's when a source file under native/ does too.
And it fetches the official JSON-Schema-Test-Suite once per version into
build/json-schema-test-suite/ (tests/test_json_schema_suite.py runs it).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / "python"
STAMP = VENV / ".install-stamp"
PYPROJECT = ROOT / "pyproject.toml"
CONSTRAINTS = ROOT / "constraints.txt"
# The native fast path's own distribution: built from this folder, never from an index.
NATIVE = ROOT / "native"
NATIVE_NAME = "plancontracts-fast"
WHEELHOUSE = ROOT / "build" / "wheelhouse"
WHEELHOUSE_STAMP = WHEELHOUSE / ".stamp"
SCHEMA_SUITE = ROOT / "build" / "json-schema-test-suite"
TESTS = ROOT / "tests"
PYTEST_NO_TESTS = 5
BENCHMARKS = (
    "validation",
    "executor",
    "planning",
    "skills",
    "thinking",
    "served",
    "suite",
    "user_schema",
    "asyncio_bridge",
    "streaming",
    "streamed_plans",
)


def main() -> int:
    # dev.py runs under whatever python3 the user has, so it checks the version itself.
    if sys.version_info < (3, 11):  # noqa: UP036
        print("plancontracts needs Python 3.11 or newer", file=sys.stderr)
        return 2
    jobs = {"setup": lambda: 0, "demo": demo, "test": test, "bench": bench, "lock": lambda: 0}
    job, *names = sys.argv[1:] or [""]
    allowed = {"bench": set(BENCHMARKS), "test": {"--fast"}}.get(job, set())
    if job not in jobs or not set(names) <= allowed:
        print(__doc__, file=sys.stderr)
        return 2
    if job == "lock":
        lock()
    setup()
    if job == "bench":
        return bench(*names)
    if job == "test":
        return test(fast="--fast" in names)
    return jobs[job]()


def setup() -> None:
    """Install the project into .venv at the locked versions, and fill the wheelhouse."""
    if not CONSTRAINTS.exists():
        raise SystemExit(f"{CONSTRAINTS.name} is missing: `python3 dev.py lock` writes it")
    locked = hashlib.sha256(PYPROJECT.read_bytes() + CONSTRAINTS.read_bytes()).hexdigest()
    wanted = with_native(locked)
    if not (STAMP.exists() and STAMP.read_text() == wanted):
        create_venv()
        step(
            "installing plancontracts, its extras and its development tools into .venv "
            "(llama-cpp-python compiles llama.cpp: about 8 minutes on 2 cores the first time)"
        )
        constrained = ("--constraint", CONSTRAINTS)
        # pip itself first: it is pinned too, and `--group` needs pip 25.1 or newer.
        pip("install", "--upgrade", "pip", *constrained)
        pip("install", *constrained, *everything())
        STAMP.write_text(wanted)
    # The wheelhouse holds no native wheel: the packaging tests build native/ themselves.
    if not (WHEELHOUSE_STAMP.exists() and WHEELHOUSE_STAMP.read_text() == locked):
        step(f"downloading the core's dependencies as wheels into {WHEELHOUSE.relative_to(ROOT)}")
        shutil.rmtree(WHEELHOUSE, ignore_errors=True)
        pyproject = tomllib.loads(PYPROJECT.read_text())
        # The core's for the packaging tests; the codegen extra's and the build
        # backend too for the pre-commit hooks' tests, whose pip builds the project.
        wheels = [
            *pyproject["project"]["dependencies"],
            *pyproject["project"]["optional-dependencies"]["codegen"],
            *pyproject["build-system"]["requires"],
        ]
        pip("download", "--only-binary", ":all:", "--dest", WHEELHOUSE, "-c", CONSTRAINTS, *wheels)
        WHEELHOUSE_STAMP.write_text(locked)
    fetch_schema_suite()


def with_native(locked: str) -> str:
    """`locked` (a hash of pyproject.toml and constraints.txt) hashed with the source
    files under native/, each with its path, so that an edit of the C compiles it again.

    The native folder's build artifacts (its `build/`, `*.egg-info`, `__pycache__`,
    a compiled `.so` or `.pyd`) are left out: pip's own build writes them there.
    """
    digest = hashlib.sha256(locked.encode())
    for path in sorted(NATIVE.rglob("*")):
        relative = path.relative_to(NATIVE)
        artifact = relative.parts[0] == "build" or any(
            part == "__pycache__" or part.endswith(".egg-info") for part in relative.parts
        )
        if artifact or not path.is_file() or path.suffix in (".so", ".pyd"):
            continue
        digest.update(b"\0" + relative.as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def fetch_schema_suite() -> None:
    """Put the JSON-Schema-Test-Suite in build/json-schema-test-suite/<jsonschema's version>/.

    The suite comes from PyPI, where CI can reach: jsonschema's source
    distribution carries it under `json/`, so the version constraints.txt
    pins for jsonschema pins the suite too. Only `json/` is kept. The
    folder is filled under a temporary name and renamed into place whole,
    so its presence is the stamp: an interrupted fetch leaves no folder
    that looks complete, and the next setup starts it again.
    """
    pinned = re.search(r"^jsonschema==(\S+)$", CONSTRAINTS.read_text(), re.MULTILINE)
    if pinned is None:
        raise SystemExit(f"{CONSTRAINTS.name} pins no jsonschema version")
    version = pinned.group(1)
    target = SCHEMA_SUITE / version
    if target.is_dir():
        return
    where = target.relative_to(ROOT)
    step(f"fetching the JSON-Schema-Test-Suite, from jsonschema {version}'s sources, into {where}")
    SCHEMA_SUITE.mkdir(parents=True, exist_ok=True)
    for leftover in SCHEMA_SUITE.glob(".fetching-*"):  # an interrupted fetch's
        shutil.rmtree(leftover, ignore_errors=True)
    work = Path(tempfile.mkdtemp(prefix=".fetching-", dir=SCHEMA_SUITE))
    try:
        pip(
            "download",
            "--no-binary",
            ":all:",
            "--no-deps",
            "--dest",
            work,
            f"jsonschema=={version}",
        )
        (archive,) = work.glob("jsonschema-*.tar.gz")
        extract_suite(archive, work / "json")
        (work / "json").rename(target)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def extract_suite(archive: Path, out: Path) -> None:
    """Write the regular files under `<top>/json/` of the source archive into `out`.

    Member names are checked, not trusted: one that would land outside
    `out` stops the setup.
    """
    with tarfile.open(archive) as tar:
        for member in tar:
            inside = member.name.partition("/")[2]
            if not member.isfile() or not inside.startswith("json/"):
                continue
            parts = Path(inside).parts[1:]
            if not parts or ".." in parts:
                raise SystemExit(f"{archive.name}: unexpected member {member.name!r}")
            destination = out.joinpath(*parts)
            destination.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(member)
            assert source is not None  # a regular file's
            with source, destination.open("wb") as stream:
                shutil.copyfileobj(source, stream)


def lock() -> None:
    """Write constraints.txt: the newest versions that pyproject.toml allows, for .venv.

    Nothing is installed but pip: pip resolves the whole environment as if
    it were empty and reports what it would install.
    """
    step(f"resolving the newest allowed versions into {CONSTRAINTS.name}")
    create_venv()
    pip("install", "--upgrade", "pip")
    report = ROOT / "build" / "lock-report.json"
    report.parent.mkdir(exist_ok=True)
    pip("install", "--dry-run", "--ignore-installed", "--report", report, *everything())
    resolved = json.loads(report.read_text())["install"]
    report.unlink()
    versions = {
        canonical(item["metadata"]["name"]): item["metadata"]["version"]
        for item in resolved
        # This repository's own distributions come from its folders, not from an index.
        if canonical(item["metadata"]["name"]) not in ("plancontracts", NATIVE_NAME)
    }
    asked = [PYTHON, "-c", "import importlib.metadata as m; print(m.version('pip'))"]
    done = subprocess.run(asked, capture_output=True, text=True, check=True)
    versions["pip"] = done.stdout.strip()
    python = f"{platform.python_implementation()} {platform.python_version()}"
    CONSTRAINTS.write_text(
        "# The exact version of everything `python3 dev.py setup` installs into .venv,\n"
        "# pip included. Written by `python3 dev.py lock`: do not edit by hand.\n"
        f"# Resolved with {python} on {sys.platform} {platform.machine()}.\n"
        + "".join(f"{name}=={versions[name]}\n" for name in sorted(versions))
    )


def everything() -> list[object]:
    """pip's arguments for the project (editable) with every extra, native/, and the `dev` group.

    native/ is named in the same command: pip takes a folder it is given as
    the one candidate for its distribution, so the `fast` extra resolves to it.
    pip builds a folder again at every install, so an edited C file is compiled.
    """
    extras = ",".join(tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"])
    return ["--editable", f"{ROOT}[{extras}]", NATIVE, "--group", f"{PYPROJECT}:dev"]


def canonical(name: str) -> str:
    """A distribution's name as PEP 503 normalizes it: `Jinja2` is `jinja2`, `a_b` is `a-b`."""
    return re.sub(r"[-_.]+", "-", name).lower()


def create_venv() -> None:
    if not PYTHON.exists():
        step("creating .venv")
        venv.create(VENV, with_pip=True)


def pip(*arguments: object) -> None:
    """Run pip in .venv; its chatter is shown only when it fails."""
    command = [str(PYTHON), "-m", "pip", *map(str, arguments)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        print(done.stdout + done.stderr, file=sys.stderr)
        raise SystemExit(f"pip failed (exit {done.returncode}): {' '.join(command[3:])}")


def demo() -> int:
    step("plancontracts examples")
    status = run(BIN / "plancontracts", "examples", check=False)
    player_input = "I light the torch and examine the iron door"
    step(f"plancontracts plan --execute {player_input!r}: planned by the local model, narrated")
    command = (BIN / "plancontracts", "plan", "--execute", player_input, "--no-download")
    return status | run(*command, check=False)


def test(*, fast: bool) -> int:
    """Lint, type-check, check generated/ and run the tests: all of them, or the fast tier.

    The fast tier (`pytest --fast`, docs/development.md#the-test-suite) leaves out the
    tests marked model, process or slow, and the generated/ check, which
    test_codegen.py's fast tests make too.
    """
    step("ruff check")
    run(PYTHON, "-m", "ruff", "check", ".")
    step("ruff format --check")
    run(PYTHON, "-m", "ruff", "format", "--check", ".")
    step("mypy --strict on runtime/, codegen/, generated/, the skill scripts and tests/")
    mypy = [PYTHON, "-m", "mypy", "--cache-dir", ROOT / ".mypy_cache"]
    view = type_check_view()
    run(*mypy, "-p", "plancontracts", cwd=view, env={"MYPYPATH": "."})
    # Skill scripts are programs, not modules of the package: each imports its
    # own folder's helpers, so each folder is on the path. The tests' fault
    # skills are programs of the same kind, run by the executor as processes.
    manifests = [*(ROOT / "skills").glob("*/skill.json"), *TESTS.glob("fault_skills/*/skill.json")]
    folders = sorted(path.parent for path in manifests)
    scripts = [script for folder in folders for script in sorted(folder.glob("*.py"))]
    search = os.pathsep.join(map(str, [view, *folders]))
    run(*mypy, "--explicit-package-bases", *scripts, cwd=view, env={"MYPYPATH": search})
    # The tests import their helpers (commands, schema_strategies...) as
    # top-level modules, as pytest puts tests/ on the path.
    search = os.pathsep.join(map(str, [view, TESTS]))
    tests = sorted(TESTS.glob("*.py"))
    run(*mypy, "--explicit-package-bases", *tests, cwd=view, env={"MYPYPATH": search})
    if not fast:
        step("plancontracts generate --check")
        run(BIN / "plancontracts", "generate", "--check")
    tier = ["--fast"] if fast else []
    # One worker per core (pytest-xdist), each test sent to whichever is free:
    # the model and the 1,000-example properties keep both cores busy.
    workers = ["--numprocesses", "auto", "--dist", "worksteal"]
    step(" ".join(["pytest", *tier, *workers]))
    status = run(PYTHON, "-m", "pytest", "-p", "no:cacheprovider", *tier, *workers, check=False)
    if status == PYTEST_NO_TESTS:
        print("pytest collected no tests, so the suite proved nothing: failing", file=sys.stderr)
        return 1
    return status


def bench(*names: str) -> int:
    status = 0
    for name in names or BENCHMARKS:
        step(f"{name} benchmark")
        status |= run(PYTHON, str(ROOT / "benchmarks" / f"{name}.py"), check=False)
    return status


def type_check_view() -> Path:
    """A folder where `plancontracts` is laid out as installed, for mypy to follow.

    mypy does not run the import hook of an editable install, so it cannot
    see that `runtime/` is `plancontracts.runtime`. Symbolic links show it.
    """
    view = ROOT / "build" / "typecheck"
    shutil.rmtree(view, ignore_errors=True)
    package = view / "plancontracts"
    package.mkdir(parents=True)
    for path in [*(ROOT / "plancontracts").glob("*.py"), ROOT / "plancontracts" / "py.typed"]:
        (package / path.name).symlink_to(path)
    for name in ("codegen", "generated", "runtime"):
        (package / name).symlink_to(ROOT / name, target_is_directory=True)
    (package / "skills").mkdir()
    (package / "skills" / "__init__.py").symlink_to(ROOT / "skills" / "__init__.py")
    shutil.copy(ROOT / "pyproject.toml", view / "pyproject.toml")
    return view


def step(text: str) -> None:
    print(f"==> {text}", flush=True)


def run(
    *command: object, check: bool = True, cwd: Path = ROOT, env: dict[str, str] | None = None
) -> int:
    full_env = {**os.environ, **(env or {})}
    status = subprocess.run([str(part) for part in command], cwd=cwd, env=full_env).returncode
    if check and status != 0:
        print(f"failed (exit {status}): {' '.join(map(str, command))}", file=sys.stderr)
        raise SystemExit(status)
    return status


if __name__ == "__main__":
    raise SystemExit(main())

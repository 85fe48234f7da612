"""`think --narrate`: a whole story response (narrative, then a Story-mode block) from the model.

Every document the response profile allows must map back to a valid
story-response needing no repair, whose narrative is prose (the profile
itself keeps the block's JSON out of it); the prompt is snapshot-tested;
the command is run against the stub server, and its session moves as a
Story-mode turn does.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from commands import cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from local_servers import Reply, conforming, model_server, sent_schema, simplest_document
from schema_strategies import valid_documents
from tiers import examples_at_most

from plancontracts import contract_schema, violations
from plancontracts.generated import STORY_RESPONSE
from plancontracts.pytest_plugin import PromptSnapshot
from plancontracts.runtime.core.errors import ProfileBug
from plancontracts.runtime.model.chat import render_chat
from plancontracts.runtime.planning_blocks import (
    HOUR,
    freeze,
    response_profile,
    story_messages,
)
from plancontracts.runtime.planning_blocks.profiles import NARRATIVE_TEXT
from plancontracts.runtime.planning_blocks.session import MINUTE


@pytest.mark.slow  # each example is a whole response drawn from the profile
def test_every_document_the_profile_allows_is_a_valid_response() -> None:
    profile = response_profile()
    drawn = [0]

    @settings(max_examples=examples_at_most(100), suppress_health_check=[HealthCheck.too_slow])
    @given(st.data())
    def check(data: st.DataObject) -> None:
        document = data.draw(valid_documents(profile.schema), label="document")
        response = profile.to_response(document)
        assert response.narrative == document["narrative"]
        assert list(response.planning_block.choices)[-1] == "parallel_execution"
        drawn[0] += 1

    check()
    assert drawn[0] >= examples_at_most(100)


@given(st.from_regex(NARRATIVE_TEXT, fullmatch=True).filter(lambda text: len(text) <= 800))
def test_a_narrative_the_profile_allows_is_never_refused_by_the_rules(narrative: str) -> None:
    document = {**contract_schema("story-response")["examples"][1], "narrative": narrative}
    assert violations(STORY_RESPONSE, document) == ()


@pytest.mark.parametrize(
    "narrative",
    ['{"choices": {}}', 'He says "thinking": no.', "Look:\n```json", "~~~", "<b>Hi</b>", " Hi"],
)
def test_the_profile_refuses_what_the_rules_refuse(narrative: str) -> None:
    assert re.fullmatch(NARRATIVE_TEXT, narrative) is None


def test_the_profile_bounds_the_narrative_within_the_contract() -> None:
    written = response_profile().schema["properties"]["narrative"]
    contract = contract_schema("story-response")["properties"]["narrative"]
    assert contract["minLength"] == written["minLength"]
    assert written["maxLength"] <= contract["maxLength"]


def test_a_response_breaking_its_contract_is_a_profile_bug() -> None:
    profile = response_profile()
    document = simplest_document(profile.schema)
    document["narrative"] = 'The block: {"choices": {}}'  # what the profile never lets through
    with pytest.raises(ProfileBug, match="holds planning-block JSON"):
        profile.to_response(document)


def test_the_story_prompt(prompt_snapshot: PromptSnapshot) -> None:
    messages = story_messages("A bored guard watches the bridge at dusk")
    prompt = render_chat(messages, None, answer="Story response JSON")
    assert prompt == prompt_snapshot


def test_the_story_prompt_holds_every_field_of_the_response() -> None:
    system = story_messages("x")[0]["content"]
    schema = contract_schema("story-response")
    for field in schema["properties"].values():
        assert field["description"] in system
    assert schema["description"] in system


def test_think_narrate_prints_a_valid_story_response() -> None:
    with model_server(conforming) as server:
        done = cli("think", "--server", server.url, "--narrate", "the guard dozes off")
    assert done.returncode == 0, done.stderr
    [line] = done.stdout.splitlines()
    response = json.loads(line)
    assert violations(STORY_RESPONSE, response) == ()
    assert "state_updates" not in response  # no session: nothing to update


def test_with_a_session_a_narrated_turn_moves_the_clock_and_carries_the_frozen_plans(
    tmp_path: Path,
) -> None:
    state = tmp_path / "session.json"
    frozen = freeze({}, "vault_heist", dc=14, now=0, description="planning the vault heist")
    ending = freeze({}, "old_plan", dc=5, now=0, description="planning the old plan")
    plans = {**frozen, **ending}  # 4 hours and 1 hour from time 0
    state.write_text(
        json.dumps(
            {
                "time": 0,
                "turn": 0,
                "frozen_plans": {
                    key: {
                        "failed_at": plan.failed_at,
                        "freeze_until": plan.freeze_until,
                        "original_dc": plan.original_dc,
                        "freeze_hours": plan.freeze_hours,
                        "description": plan.description,
                    }
                    for key, plan in plans.items()
                },
            }
        )
    )
    with model_server(conforming) as server:
        done = cli(
            "think", "--server", server.url, "--narrate", "--state", str(state),
            "--minutes", "90", "the guard dozes off",
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    response = json.loads(done.stdout)
    assert violations(STORY_RESPONSE, response) == ()
    # Story mode advances time: 90 minutes, one turn; the one-hour freeze has ended.
    assert list(response["state_updates"]["frozen_plans"]) == ["vault_heist"]
    session = json.loads(state.read_text())
    assert (session["time"], session["turn"]) == (90 * MINUTE, 1)
    assert session["frozen_plans"] == response["state_updates"]["frozen_plans"]
    assert session["frozen_plans"]["vault_heist"]["freeze_until"] == 4 * HOUR


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["--mode", "think", "the bridge"], "--narrate writes Story mode's response"),
        (["THINK: the bridge"], "is Think mode (THINK:)"),
    ],
)
def test_narrate_refuses_think_mode_before_any_model(arguments: list[str], said: str) -> None:
    done = cli("think", "--narrate", *arguments, env={"PLANCONTRACTS_SERVER": "http://127.0.0.1:9"})
    assert done.returncode == 2
    assert said in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_think_line_on_standard_input_is_refused_and_the_others_written() -> None:
    with model_server(conforming) as server:
        done = cli(
            "think", "--server", server.url, "--narrate", "-",
            stdin="THINK: the bridge\nthe guard dozes off\n",
        )  # fmt: skip
    assert done.returncode == 1
    assert "no response for 'THINK: the bridge': --narrate is Story mode's" in done.stderr
    assert len(done.stdout.splitlines()) == 1


def _block_in_the_narrative(number: int, body: dict[str, Any]) -> Reply:
    """A server that ignores the constraint and writes the block into the narrative."""
    document = simplest_document(sent_schema(body))
    if "narrative" in document:
        document["narrative"] = "You wait. " + json.dumps({"choices": {"wait": {}}})
    return Reply(content=json.dumps(document))


def test_a_server_writing_the_block_into_the_narrative_is_refused_in_one_line() -> None:
    with model_server(_block_in_the_narrative) as server:
        done = cli("think", "--server", server.url, "--narrate", "the guard dozes off")
    assert done.returncode == 1
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    assert "no response for 'the guard dozes off'" in done.stderr


def _narrative_of(text: str) -> Any:
    """A server that ignores the constraint and writes `text` as the narrative."""

    def reply(number: int, body: dict[str, Any]) -> Reply:
        document = simplest_document(sent_schema(body))
        if "narrative" in document:
            document["narrative"] = text
        return Reply(content=json.dumps(document))

    return reply


@pytest.mark.parametrize(
    ("narrative", "said"),
    [
        (
            "He waits. " + json.dumps({"alternatives": {"wait": {}}}),
            '/narrative: holds planning-block JSON ("{\\"alternatives\\": {\\"wait\\": {}}}"); '
            "the narrative is story prose only; the choices go in planning_block",
        ),
        (
            "He waits.\x07 The bell.",
            "/narrative: holds control characters (U+0007); the narrative is plain text",
        ),
        (
            "He waits for `the bell`.",
            "/narrative: is not the plain prose a narrative is written in",
        ),
    ],
)
def test_a_refused_narrative_is_said_in_the_rules_words_not_the_profiles_pattern(
    narrative: str, said: str
) -> None:
    # The profile's pattern said what it refused as a raw regular expression.
    with model_server(_narrative_of(narrative)) as server:
        done = cli("think", "--server", server.url, "--narrate", "the guard dozes off")
    assert (done.returncode, done.stdout) == (1, "")
    last = done.stderr.splitlines()[-1]
    assert last.startswith("plancontracts: no response for 'the guard dozes off': ")
    assert said in last
    assert "does not match" not in done.stderr

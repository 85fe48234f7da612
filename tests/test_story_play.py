"""Story play: a finished package played as the seed's Director would, and its playthroughs.

The pure functions of `story_packages.play` are tested on small packages
built here; `story play` through `cli(...)`, with choices on standard input
and the playthrough kept with `--state`. The property test plays random
finalized packages (drawn to satisfy the contract and the package's rules,
as finalizing checks them) with random choices, and asserts that no state
reached is without a way forward: while the story goes on, something is
offered, and the act can still end.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from commands import cli
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from tiers import examples_at_most

from plancontracts import STORY_PACKAGE, STORY_PLAYTHROUGH, decode, violations
from plancontracts.generated.story_packages import Choice, StoryPackage, StoryPlaythrough
from plancontracts.runtime.core.contracts import contract_schema
from plancontracts.runtime.core.errors import PlayRefused
from plancontracts.runtime.core.rules import Rules
from plancontracts.runtime.core.validation import convert
from plancontracts.runtime.story_packages import STORY_PACKAGE_RULES
from plancontracts.runtime.story_packages.play import (
    MAX_CHOICES,
    choose,
    happenings,
    offered,
    package_hash,
    resolve,
    resumed,
    start,
)

Document = dict[str, Any]

EXAMPLE: Document = contract_schema("story-package")["examples"][0]
"The story-package contract's example: one act, a lamp room and a harbour, a doom clock."


def _package(document: Document) -> StoryPackage:
    package: StoryPackage = decode(STORY_PACKAGE, json.dumps(document))
    return package


def _play(package: StoryPackage, *ids: str) -> StoryPlaythrough:
    state = start(package)
    for name in ids:
        state = choose(package, state, resolve(package, state, name))
    return state


def _two_acts() -> Document:
    """The example with a second act: a doom clock of 2 (escalation at 1), a cellar with filler."""
    document = copy.deepcopy(EXAMPLE)
    document["plot"]["acts"].append(
        {
            "id": "act_2",
            "title": "Undertow",
            "objective": "Survive the night",
            "scenarioContext": "The sea takes what the lamp shows.",
            "narrativeGuidelines": "Short sentences.",
            "opposingForce": {
                "trackerLabel": "Tide",
                "requiredValue": 2,
                "escalationEvents": [{"threshold": 1, "description": "Water in the cellar."}],
            },
            "sandboxLocations": [
                {
                    "id": "loc_cellar",
                    "title": "Cellar",
                    "location": "loc_lamp_room",
                    "requiredCharacters": [],
                    "connections": ["loc_cellar"],
                    "mood": "fog-theme",
                    "encounters": [
                        {
                            "id": "enc_drip",
                            "title": "Dripping",
                            "description": "Water drips.",
                            "type": "atmospheric",
                            "pacing": {"expectedFrames": 2, "focus": "standard"},
                            "repeatable": True,
                            "givesProgression": 1,
                            "excludeIfFlags": ["cellar_flooded"],
                            "potentialFlags": ["heard_drip"],
                        },
                    ],
                }
            ],
        }
    )
    return document


EXAMPLE_PACKAGE = _package(EXAMPLE)


def _ids(package: StoryPackage, state: StoryPlaythrough) -> list[tuple[str, str]]:
    return [(offer.choice.kind, offer.choice.id) for offer in offered(package, state)]


def test_a_playthrough_starts_at_the_first_act_and_location() -> None:
    state = start(EXAMPLE_PACKAGE)
    assert state.package.id == EXAMPLE_PACKAGE.id
    assert state.package.sha256 == package_hash(EXAMPLE_PACKAGE)
    assert [act.id for act in state.acts] == ["act_1"]
    assert (state.location, state.flags, state.played, state.log) == ("loc_lamp_room", [], {}, [])
    assert decode(STORY_PLAYTHROUGH, msgspec.json.encode(state)) == state


def test_the_hash_is_of_the_content_not_the_layout() -> None:
    reordered = json.loads(json.dumps(EXAMPLE, indent=3, sort_keys=True))
    del reordered["language"]  # its default, "en"
    assert package_hash(_package(reordered)) == package_hash(EXAMPLE_PACKAGE)
    changed = copy.deepcopy(EXAMPLE)
    changed["title"] = "Salt and Signals"
    assert package_hash(_package(changed)) != package_hash(EXAMPLE_PACKAGE)


def test_offers_follow_prerequisites_then_arcs_moves_and_events() -> None:
    package = EXAMPLE_PACKAGE
    state = start(package)
    # The pilot needs saw_future_entry: at the harbour before the entry, only moves and events.
    assert _ids(package, _play(package, "loc_harbour")) == [
        ("encounter", "arc_tomas_admits"),  # Tomas is required at the harbour: his arc is here
        ("move", "loc_lamp_room"),
        ("event", "evt_ship_sighted"),
    ]
    assert _ids(package, state) == [
        ("encounter", "enc_new_entry"),
        ("move", "loc_harbour"),
        ("event", "evt_ship_sighted"),
    ]
    offer = offered(package, state)[2]
    assert (offer.title, offer.detail) == ("A Ship Out of Time", "When progress reaches 2")
    after = _play(package, "enc_new_entry", "loc_harbour")
    assert _ids(package, after)[:2] == [
        ("encounter", "enc_pilot_talk"),
        ("encounter", "arc_tomas_admits"),
    ]


def test_an_encounter_sets_its_flags_and_counts_once_and_the_clock_runs() -> None:
    package = EXAMPLE_PACKAGE
    state = start(package)
    after = _play(package, "enc_new_entry")
    assert after.flags == ["saw_future_entry"]
    assert after.played == {"enc_new_entry": 1}
    assert after.acts[0].progression == 1
    assert after.acts[0].doom == 1  # every choice is a beat of the act's time
    assert ("encounter", "enc_new_entry") not in _ids(package, after)  # not repeatable
    assert state == start(package)  # the state given is never changed


def test_progression_reached_ends_the_act_and_the_last_act_the_story() -> None:
    package = EXAMPLE_PACKAGE
    state = _play(package, "enc_new_entry", "loc_harbour", "enc_pilot_talk")
    assert state.acts[0].outcome == "progression"
    assert state.ended == "progression"
    assert state.acts[0].escalations == [3]  # the third choice reached the foghorn's threshold
    assert offered(package, state) == []
    with pytest.raises(PlayRefused, match="the story has ended"):
        choose(package, state, Choice(kind="move", id="loc_lamp_room"))


def test_the_doom_clock_forces_the_climax_and_play_goes_on_to_the_next_act() -> None:
    package = _package(_two_acts())
    # Act 1's clock is full at 5: five choices without reaching its progression.
    state = _play(package, *["loc_harbour", "loc_lamp_room"] * 2, "loc_harbour")
    assert state.acts[0].outcome == "doom"
    assert state.acts[0].escalations == [3]
    assert [act.id for act in state.acts] == ["act_1", "act_2"]
    assert state.location == "loc_cellar"
    assert state.ended is msgspec.UNSET
    assert happenings(package, start(package), state) == [
        "Fog Density reaches 3: The foghorn starts by itself.",
        "Fog Bank ends (Fog Density full: the climax is forced)",
        "Undertow begins: Survive the night",
    ]
    before = state
    state = _play_from(package, state, "enc_drip")
    assert happenings(package, before, state) == ["Tide reaches 1: Water in the cellar."]
    state = _play_from(package, state, "enc_drip")  # repeatable: offered again, no more progress
    assert state.played == {"enc_drip": 2}
    assert state.acts[1].progression == 1
    assert state.ended == "doom"
    assert happenings(package, before, state)[-2:] == [
        "Undertow ends (Tide full: the climax is forced)",
        "the story ends",
    ]


def _play_from(package: StoryPackage, state: StoryPlaythrough, *ids: str) -> StoryPlaythrough:
    for name in ids:
        state = choose(package, state, resolve(package, state, name))
    return state


def test_an_event_that_forces_the_climax_ends_the_act() -> None:
    state = _play(EXAMPLE_PACKAGE, "evt_ship_sighted")
    assert state.acts[0].events == ["evt_ship_sighted"]
    assert state.ended == "climax"
    assert happenings(EXAMPLE_PACKAGE, start(EXAMPLE_PACKAGE), state) == [
        "A Ship Out of Time: A ship from tomorrow's entry appears in the bay.",
        "Fog Bank ends (an inevitable event forces the climax)",
        "the story ends",
    ]


def test_a_choice_is_named_by_number_id_or_itself_and_refused_when_not_offered() -> None:
    package = EXAMPLE_PACKAGE
    state = start(package)
    move = Choice(kind="move", id="loc_harbour")
    assert resolve(package, state, 2) == move
    assert resolve(package, state, "loc_harbour") == move
    assert resolve(package, state, move) == move
    cases: list[tuple[int | str | Choice, str]] = [
        (0, "no choice 0: the choices are numbered 1 to 3"),
        (4, "no choice 4: the choices are numbered 1 to 3"),
        (
            "enc_pilot_talk",
            '"enc_pilot_talk" is not offered now (offered: encounter enc_new_entry,',
        ),
        (Choice(kind="event", id="loc_harbour"), 'event "loc_harbour" is not offered now'),
    ]
    for wanted, said in cases:
        with pytest.raises(PlayRefused) as refused:
            resolve(package, state, wanted)
        assert str(refused.value).startswith(said)
    with pytest.raises(PlayRefused, match="is not offered now"):
        choose(package, state, Choice(kind="encounter", id="enc_pilot_talk"))
    assert state == start(package)


def test_an_id_naming_two_kinds_of_choice_asks_for_more() -> None:
    document = copy.deepcopy(EXAMPLE)
    document["plot"]["acts"][0]["sandboxLocations"][0]["encounters"][0]["id"] = "loc_harbour"
    package = _package(document)
    with pytest.raises(PlayRefused, match="names both an encounter and move: choose by number"):
        resolve(package, start(package), "loc_harbour")


def test_a_playthrough_resumes_only_from_its_own_package_and_log() -> None:
    package = EXAMPLE_PACKAGE
    state = _play(package, "enc_new_entry", "loc_harbour")
    assert resumed(package, state) == state
    other = copy.deepcopy(EXAMPLE)
    other["id"] = "00000000-0000-4000-8000-000000000000"
    with pytest.raises(PlayRefused, match="a playthrough of package 9a4e2c71"):
        resumed(_package(other), state)
    changed = copy.deepcopy(EXAMPLE)
    changed["plot"]["acts"][0]["sandboxLocations"][0]["title"] = "Lantern Room"
    with pytest.raises(PlayRefused, match="another version of package"):
        resumed(_package(changed), state)
    edited = msgspec.structs.replace(state, flags=["saw_future_entry", "found_it"])
    with pytest.raises(PlayRefused, match="not the one its log leads to"):
        resumed(package, edited)
    twice = msgspec.structs.replace(state, log=[state.log[1], state.log[1]])
    with pytest.raises(PlayRefused, match="its log's choice 2 cannot be replayed: move"):
        resumed(package, twice)  # from the harbour, the harbour is no connection


def test_the_log_is_bounded_by_its_contract() -> None:
    package = EXAMPLE_PACKAGE
    full = msgspec.structs.replace(
        start(package), log=[Choice(kind="move", id="loc_harbour")] * MAX_CHOICES
    )
    with pytest.raises(PlayRefused, match=f"it took {MAX_CHOICES} choices"):
        choose(package, full, Choice(kind="move", id="loc_harbour"))


# The playthrough's own rules ------------------------------------------------------------


def test_the_playthrough_rules_hold_its_parts_together() -> None:
    state = json.loads(msgspec.json.encode(_play(EXAMPLE_PACKAGE, "enc_new_entry", "loc_harbour")))
    assert violations(STORY_PLAYTHROUGH, state) == ()
    state["played"] = {"enc_new_entry": 2, "enc_other": 1}
    state["acts"][0]["outcome"] = "doom"
    state["acts"][0]["escalations"] = [3, 3]
    found = [(v.pointer, v.message) for v in violations(STORY_PLAYTHROUGH, state)]
    assert found == [
        ("/acts/0", 'has the outcome "doom", but the story has not ended: the last act tells how'),
        ("/acts/0/escalations/1",
         "is 3, not above the one before, 3: thresholds are reached in increasing order"),
        ("/played/enc_new_entry", "is 2, but the log chooses the encounter 1 times"),
        ("/played/enc_other", "is 1, but the log chooses the encounter 0 times"),
    ]  # fmt: skip


def test_the_playthrough_example_is_valid() -> None:
    for example in contract_schema("story-playthrough")["examples"]:
        assert violations(STORY_PLAYTHROUGH, example) == ()


# story play ----------------------------------------------------------------------------


def _records(stdout: str) -> list[Any]:
    return [json.loads(line) for line in stdout.splitlines()]


@pytest.fixture
def package_file(tmp_path: Path) -> Path:
    path = tmp_path / "package.json"
    path.write_text(json.dumps(EXAMPLE))
    return path


def test_story_play_prints_each_state_and_goes_on_past_a_refused_choice(
    package_file: Path,
) -> None:
    pilot = {"kind": "encounter", "id": "enc_pilot_talk"}
    choices = [{"choose": 1}, {"choose": "enc_pilot_talk"}, {"choose": "loc_harbour"},
               {"choose": pilot}, {"choose": 1}]  # fmt: skip
    done = cli("story", "play", str(package_file),
               stdin="".join(json.dumps(c) + "\n" for c in choices))  # fmt: skip
    assert done.returncode == 1, done.stderr  # a choice was refused
    assert done.stderr == ""
    first, entry, refused, harbour, last = _records(done.stdout)  # the 5th line is never read
    assert "log" not in first["state"]  # the count stands for it: see --full-state
    assert first["choices"] == 0
    assert first["happened"] == []
    assert first["offered"][0] == {
        "number": 1, "kind": "encounter", "id": "enc_new_entry",
        "title": "A New Entry", "detail": "discovery, standard",
    }  # fmt: skip
    assert entry["state"]["flags"] == ["saw_future_entry"]
    assert refused == {"line": 2, "refused": '"enc_pilot_talk" is not offered now (offered: '
                       "move loc_harbour, event evt_ship_sighted)"}  # fmt: skip
    assert harbour["state"]["location"] == "loc_harbour"
    assert last["state"]["ended"] == "progression"
    assert last["offered"] == []
    assert last["happened"][-1] == "the story ends"
    assert last["choices"] == 3


def test_play_output_and_state_writes_grow_linearly_with_the_choices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each line and each save cost what the package holds, not what the log has grown to."""
    from plancontracts.runtime.core.files import replace_file
    from plancontracts.runtime.story_packages import playing

    looping = copy.deepcopy(EXAMPLE)  # no clock, no event: the moves never end the act
    del looping["plot"]["acts"][0]["opposingForce"]
    del looping["plot"]["acts"][0]["inevitableEvents"]
    package = tmp_path / "loop.json"
    package.write_text(json.dumps(looping))
    written: list[int] = []

    def counted(path: Path, data: bytes) -> None:
        written.append(len(data))
        replace_file(path, data)

    monkeypatch.setattr(playing, "replace_file", counted)
    moves = ['{"choose": "loc_harbour"}\n', '{"choose": "loc_lamp_room"}\n'] * 400
    kept = tmp_path / "play.json"
    done = cli("story", "play", str(package), "--state", str(kept), stdin="".join(moves))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 801
    assert len(lines[-1]) - len(lines[1]) < 16  # the 800th line no longer than the 1st (but digits)
    assert json.loads(lines[-1])["choices"] == 800
    final = kept.stat().st_size
    assert len(decode(STORY_PLAYTHROUGH, kept.read_bytes()).log) == 800  # all kept in the end
    assert sum(written) < 40 * final  # 800 rewrites of the whole file would be ~400 times it
    full = cli("story", "play", str(package), "--full-state", stdin="".join(moves[:3]))
    assert json.loads(full.stdout.splitlines()[-1])["state"]["log"] == [
        {"kind": "move", "id": "loc_harbour"}, {"kind": "move", "id": "loc_lamp_room"},
        {"kind": "move", "id": "loc_harbour"},
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("nope", "malformed JSON: invalid character"),
        ('{"choose": true}', "true names no choice"),
        ('{"pick": 1}', 'a line of choices is {"choose": N or ID or {"kind": K, "id": ID}}'),
        ('{"choose": {"kind": "fly", "id": "x"}}', "a choice's kind is one of encounter, move"),
        ('{"choose": 9}', "no choice 9: the choices are numbered 1 to 3"),
    ],
)
def test_a_line_that_is_no_choice_is_one_refusal(package_file: Path, line: str, said: str) -> None:
    done = cli("story", "play", str(package_file), stdin=line + "\n" + '{"choose": 2}\n')
    assert done.returncode == 1
    records = _records(done.stdout)
    assert len(records) == 3
    assert records[1]["line"] == 1
    assert said in records[1]["refused"], records[1]
    assert records[2]["state"]["location"] == "loc_harbour"  # the next line is played


def test_state_keeps_the_playthrough_and_resumes_it(package_file: Path, tmp_path: Path) -> None:
    kept = tmp_path / "play.json"
    done = cli("story", "play", str(package_file), "--state", str(kept),
               stdin='{"choose": "enc_new_entry"}\n')  # fmt: skip
    assert done.returncode == 0, done.stderr
    saved = decode(STORY_PLAYTHROUGH, kept.read_bytes())
    assert saved.log == [Choice(kind="encounter", id="enc_new_entry")]
    done = cli("story", "play", str(package_file), "--state", str(kept),
               stdin='{"choose": "loc_harbour"}\n{"choose": "enc_pilot_talk"}\n')  # fmt: skip
    assert done.returncode == 0, done.stderr
    first = _records(done.stdout)[0]
    assert first["state"]["played"] == {"enc_new_entry": 1}  # resumed where it was left
    assert decode(STORY_PLAYTHROUGH, kept.read_bytes()).ended == "progression"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".part")] == []


def test_a_playthrough_that_has_ended_is_shown_and_plays_no_more(
    package_file: Path, tmp_path: Path
) -> None:
    kept = tmp_path / "play.json"
    ended = _play(EXAMPLE_PACKAGE, "evt_ship_sighted")
    kept.write_bytes(msgspec.json.encode(ended))
    done = cli("story", "play", str(package_file), "--state", str(kept), stdin='{"choose": 1}\n')
    assert done.returncode == 0, done.stderr
    [record] = _records(done.stdout)
    assert record["state"]["ended"] == "climax"
    assert record["offered"] == []


def test_a_state_of_another_package_or_no_playthrough_is_one_line_exit_2(
    package_file: Path, tmp_path: Path
) -> None:
    kept = tmp_path / "play.json"
    other = copy.deepcopy(EXAMPLE)
    other["title"] = "Another Story"
    state = start(_package(other))
    cases = {
        msgspec.json.encode(state): "another version of package 9a4e2c71",
        b"[1, 2": "not a story playthrough",
        b'{"acts": []}': "not a story playthrough",
    }
    for text, said in cases.items():
        kept.write_bytes(text)
        done = cli("story", "play", str(package_file), "--state", str(kept), stdin="")
        assert done.returncode == 2
        assert done.stdout == ""
        assert len(done.stderr.splitlines()) == 1
        assert said in done.stderr, done.stderr
        assert kept.read_bytes() == text  # left as it was


def test_a_state_that_is_a_fifo_is_refused_without_waiting(
    package_file: Path, tmp_path: Path
) -> None:
    import os

    fifo = tmp_path / "play.json"
    os.mkfifo(fifo)
    done = cli("story", "play", str(package_file), "--state", str(fifo), stdin="")
    assert done.returncode == 2
    assert done.stderr == f"plancontracts: error: --state {fifo}: not a regular file\n"


def test_a_package_that_is_not_finalized_is_one_line_exit_1(tmp_path: Path) -> None:
    path = tmp_path / "package.json"
    broken = _without_other_ends(copy.deepcopy(EXAMPLE))
    del broken["plot"]["acts"][0]["globalProgression"]
    for text, said in [
        (json.dumps(broken), "not a finalized story-package (1 violation), the first: "
                             "/plot/acts/0: can never end"),
        ("{", "not a finalized story-package"),
    ]:  # fmt: skip
        path.write_text(text)
        done = cli("story", "play", str(path), stdin='{"choose": 1}\n')
        assert done.returncode == 1
        assert done.stdout == ""
        assert done.stderr.startswith(f"plancontracts: error: {path}: {said}"), done.stderr
        assert len(done.stderr.splitlines()) == 1


def test_the_package_cannot_be_standard_input() -> None:
    done = cli("story", "play", "-", stdin='{"choose": 1}\n')
    assert done.returncode == 2
    assert "standard input carries the choices" in done.stderr


@pytest.mark.process  # a terminal is the subject: the menu shows only on one
def test_on_a_terminal_the_play_is_a_numbered_menu(package_file: Path) -> None:
    import os
    import pty
    import subprocess
    import sys

    leader, follower = pty.openpty()
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "plancontracts", "story", "play", str(package_file)],
            stdin=follower,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        os.write(leader, b"1\nnope\nloc_harbour\n\n")
        out, err = process.communicate(timeout=120)
    finally:
        os.close(leader)
        os.close(follower)
    text = out.decode()
    assert process.returncode == 0, err
    assert "Fog Bank (act 1 of 1): Learn who writes in the logbook\n" in text
    assert "At Lamp Room. Entries Explained 0/2; Fog Density 0/5\n" in text
    assert "  1. A New Entry (discovery, standard)\n  2. go to Harbour\n" in text
    assert "  3. fire: A Ship Out of Time (When progress reaches 2)\n" in text
    assert '"nope" is not offered now' in text
    assert "At Harbour. Entries Explained 1/2; Fog Density 2/5\n" in text


# Dead ends the rules now refuse, each shown by play ------------------------------------

_SCHEMA_ALONE = Rules(STORY_PACKAGE.name, "the schema alone", lambda value: iter(()))


def _refused_and_stuck(document: Document, ids: list[str], expected: list[tuple[str, str]]) -> None:
    """The rules refuse `document` as `expected`; played by `ids`, its act can no longer end."""
    assert [(v.pointer, v.message) for v in violations(STORY_PACKAGE, document)] == expected
    package: StoryPackage = convert(STORY_PACKAGE, document, rules=_SCHEMA_ALONE)
    state = _play(package, *ids)
    assert state.ended is msgspec.UNSET
    assert _act_can_end(package, state) is False


def _without_other_ends(document: Document) -> Document:
    act = document["plot"]["acts"][0]
    del act["opposingForce"], act["inevitableEvents"]
    return document


ACT = "/plot/acts/0"


def test_an_act_with_no_way_to_end_is_refused() -> None:
    document = _without_other_ends(copy.deepcopy(EXAMPLE))
    del document["plot"]["acts"][0]["globalProgression"]
    _refused_and_stuck(
        document,
        ["enc_new_entry", "loc_harbour", "enc_pilot_talk", "arc_tomas_admits"],
        [(ACT, "can never end: it has no globalProgression, no opposingForce and no inevitable "
               "event that forcesClimax")],
    )  # fmt: skip


def test_a_location_that_strands_the_player_is_refused() -> None:
    document = _without_other_ends(copy.deepcopy(EXAMPLE))
    document["plot"]["acts"][0]["sandboxLocations"][1]["connections"] = []
    _refused_and_stuck(
        document,
        ["loc_harbour", "arc_tomas_admits"],  # 1 of 2; the entry is back in the lamp room
        [(f"{ACT}/sandboxLocations/1",
          "cannot lead back to the act's start by following connections: a player who goes "
          "there is stranded away from the act's progression, and it has no doom clock and no "
          "inevitable event that forces the climax")],
    )  # fmt: skip


def test_progression_that_a_flag_can_exclude_is_not_counted_on() -> None:
    document = _without_other_ends(copy.deepcopy(EXAMPLE))
    act = document["plot"]["acts"][0]
    act["globalProgression"]["requiredValue"] = 3
    lamp, harbour = act["sandboxLocations"]
    study = copy.deepcopy(lamp["encounters"][0])
    study |= {"id": "enc_study", "potentialFlags": [], "priority": "normal"}
    study["pacing"] = {"expectedFrames": 4, "focus": "tension_and_action"}
    lamp["encounters"].append(study)
    for encounter in (study, harbour["encounters"][0]):
        encounter["excludeIfFlags"] = ["second_light_known"]  # which Tomas's arc sets
    _refused_and_stuck(
        document,
        ["loc_harbour", "arc_tomas_admits", "loc_lamp_room", "enc_new_entry"],
        [(f"{ACT}/globalProgression/requiredValue",
          "is 3, but the encounters that can always be played give 2 (one a settable flag "
          "excludes, or that needs a flag of an earlier act, which may have been missed, may "
          "never be), and it has no doom clock and no inevitable event that forces the climax")],
    )  # fmt: skip


def test_progression_resting_on_an_earlier_acts_flag_is_not_counted_on() -> None:
    document = _two_acts()
    second = document["plot"]["acts"][1]
    del second["opposingForce"]
    second["globalProgression"] = {"requiredValue": 2, "trackerLabel": "Rooms Searched"}
    cellar = second["sandboxLocations"][0]
    drip = cellar["encounters"][0]
    drip |= {"repeatable": False, "excludeIfFlags": []}
    needs = [copy.deepcopy(drip) | {"id": f"enc_needs_{n}", "prerequisites": ["second_light_known"]}
             for n in (1, 2)]  # fmt: skip
    for need in needs:
        need["pacing"] = {"expectedFrames": 4, "focus": "tension_and_action"}
    cellar["encounters"] += needs
    _refused_and_stuck(
        document,
        # Act 1 ends by its progression without Tomas's arc, which sets the flag.
        ["enc_new_entry", "loc_harbour", "enc_pilot_talk", "enc_drip"],
        [("/plot/acts/1/globalProgression/requiredValue",
          "is 2, but the encounters that can always be played give 1 (one a settable flag "
          "excludes, or that needs a flag of an earlier act, which may have been missed, may "
          "never be), and it has no doom clock and no inevitable event that forces the climax")],
    )  # fmt: skip


def test_progression_no_play_reaches_is_said_once() -> None:
    document = _without_other_ends(copy.deepcopy(EXAMPLE))
    document["plot"]["acts"][0]["globalProgression"]["requiredValue"] = 9
    assert [(v.pointer, v.message) for v in violations(STORY_PACKAGE, document)] == [
        (f"{ACT}/globalProgression/requiredValue",
         "is 9, but the act's encounters give 3 in all (1 of it from character arcs): "
         "the act can never be completed"),
    ]  # fmt: skip


def test_a_doom_clock_that_can_stop_is_refused() -> None:
    document = _two_acts()
    cellar = document["plot"]["acts"][1]["sandboxLocations"][0]
    cellar["connections"] = []
    cellar["encounters"][0]["repeatable"] = False
    _refused_and_stuck(
        document,
        ["evt_ship_sighted", "enc_drip"],
        [("/plot/acts/1/sandboxLocations/0",
          "has no connection and no repeatable encounter that can always be played: once its "
          "encounters are played nothing is offered, so the doom clock stops before it is full, "
          "and the act has no progression tracker or climax event to end it")],
    )  # fmt: skip


def test_a_dead_end_whose_filler_needs_a_flag_set_elsewhere_is_refused() -> None:
    # Found by the property test: the attic's only repeatable encounter needs a
    # flag the cellar sets, but a player may go up without it, and cannot leave.
    document = _two_acts()
    cellar = document["plot"]["acts"][1]["sandboxLocations"][0]
    cellar["connections"] = ["loc_cellar", "loc_attic"]
    cellar["encounters"].append(
        {
            "id": "enc_rope",
            "title": "A Rope",
            "description": "A rope up to the attic.",
            "type": "discovery",
            "potentialFlags": ["saw_rope"],
            "pacing": {"expectedFrames": 3, "focus": "dialogue_and_worldbuilding"},
        }
    )
    attic = {
        "id": "loc_attic",
        "title": "Attic",
        "location": "loc_lamp_room",
        "mood": "fog-theme",
        "requiredCharacters": [],
        "connections": [],
        "encounters": [
            {
                "id": "enc_creak",
                "title": "Creaking",
                "description": "The beams creak.",
                "type": "atmospheric",
                "pacing": {"expectedFrames": 2, "focus": "standard"},
                "repeatable": True,
                "prerequisites": ["saw_rope"],
            }
        ],
    }
    document["plot"]["acts"][1]["sandboxLocations"].append(attic)
    _refused_and_stuck(
        document,
        ["evt_ship_sighted", "loc_attic"],
        [("/plot/acts/1/sandboxLocations/1",
          "has no connection and no repeatable encounter that can always be played: once its "
          "encounters are played nothing is offered, so the doom clock stops before it is full, "
          "and the act has no progression tracker or climax event to end it")],
    )  # fmt: skip


def test_ids_a_playthrough_names_are_unique() -> None:
    document = _two_acts()
    document["plot"]["acts"][1]["id"] = "act_1"
    document["plot"]["acts"][1]["sandboxLocations"][0]["encounters"][0]["id"] = "enc_new_entry"
    assert [(v.pointer, v.message) for v in violations(STORY_PACKAGE, document)] == [
        ("/plot/acts/1/id", '"act_1" is already the id of an act: ids are unique'),
        ("/plot/acts/1/sandboxLocations/0/encounters/0/id",
         '"enc_new_entry" is already the id of an encounter: ids are unique'),
    ]  # fmt: skip


def test_a_location_of_one_pace_is_refused() -> None:
    document = copy.deepcopy(EXAMPLE)
    lamp = document["plot"]["acts"][0]["sandboxLocations"][0]
    second = copy.deepcopy(lamp["encounters"][0]) | {"id": "enc_logbook", "priority": "normal"}
    lamp["encounters"].append(second)  # two encounters, both of the focus "standard"
    assert [(v.pointer, v.message) for v in violations(STORY_PACKAGE, document)] == [
        (f"{ACT}/sandboxLocations/0/encounters",
         'gives every encounter the focus "standard": a location\'s pool varies its pacing '
         "(the seed mixes dialogue_and_worldbuilding with tension_and_action), so give one of "
         "them another focus"),
    ]  # fmt: skip
    second["pacing"]["focus"] = "dialogue_and_worldbuilding"  # quiet, as upstream's reading room
    assert violations(STORY_PACKAGE, document) == ()


def test_the_upstream_package_plays_to_an_end_by_any_choices(upstream: Path) -> None:
    package = _package(json.loads((upstream / "vn/synthetic_full_package.json").read_text()))
    for pick in (0, -1):  # the Director's first offer each time, and its last
        state = start(package)
        for _ in range(MAX_CHOICES):
            choices = offered(package, state)
            if not choices:
                break
            state = choose(package, state, choices[pick].choice)
        assert state.ended is not msgspec.UNSET, msgspec.json.encode(state)


@settings(max_examples=examples_at_most(200), deadline=None)
@given(data=st.data())
def test_random_choices_on_the_upstream_package_never_stall(data: st.DataObject) -> None:
    from conftest import UPSTREAM

    path = UPSTREAM / "vn/synthetic_full_package.json"
    if not path.exists():
        pytest.skip(f"upstream fixtures not found at {UPSTREAM}")
    package = _package(json.loads(path.read_text()))
    state = start(package)
    for _ in range(30):
        if state.ended is not msgspec.UNSET:
            return
        choices = offered(package, state)
        assert choices
        state = choose(package, state, data.draw(st.sampled_from(choices)).choice)
    assert _act_can_end(package, state) is not False


# Random finalized packages ------------------------------------------------------------

FLAGS = ("f_a", "f_b", "f_c", "f_d")
"The flags random packages set and test: few, so that prerequisites and exclusions meet."
TYPES = ("discovery", "npc_interaction", "combat", "puzzle", "atmospheric")
FOCUSES = ("dialogue_and_worldbuilding", "standard", "tension_and_action")


@st.composite
def _encounter(draw: st.DrawFn, name: str, settable: list[str], arc: str | None = None) -> Document:
    """An encounter whose prerequisites are among `settable`, flags already set before it."""
    flags = draw(st.lists(st.sampled_from(FLAGS), max_size=2, unique=True))
    gives = draw(st.integers(0, 3))
    repeatable = draw(st.booleans())
    if not gives and not flags and not repeatable:  # no dead end: the rules refuse one
        gives = 1
    encounter: Document = {
        "id": name,
        "title": name.replace("_", " ").title(),
        "description": f"What happens in {name}.",
        "type": draw(st.sampled_from(TYPES)),
        "pacing": {"expectedFrames": 5, "focus": draw(st.sampled_from(FOCUSES))},
        "prerequisites": draw(st.lists(st.sampled_from(settable), max_size=1, unique=True))
        if settable
        else [],
        "excludeIfFlags": draw(st.lists(st.sampled_from(FLAGS), max_size=1, unique=True)),
        "givesProgression": gives,
        "potentialFlags": flags,
        "priority": draw(st.sampled_from(("low", "normal", "high", "urgent"))),
        "repeatable": repeatable,
    }
    if arc is not None:
        encounter |= {"arcPhase": "development", "arcCharacterId": arc}
    settable.extend(flag for flag in flags if flag not in settable)
    return encounter


@st.composite
def finalized_packages(draw: st.DrawFn) -> Document:
    """A small story package that satisfies its contract and the package's rules."""
    settable: list[str] = []
    characters: list[Document] = [
        {
            "id": "hero",
            "name": "Hero",
            "role": "protagonist",
            "description": "The lead.",
            "imagePrompt": "",
        },
    ]
    if draw(st.booleans()):
        arc = [
            draw(_encounter(f"arc_{number}", settable, arc="guide"))
            for number in range(draw(st.integers(1, 2)))
        ]
        characters.append(
            {
                "id": "guide",
                "name": "Guide",
                "role": "ally",
                "description": "Helps.",
                "imagePrompt": "",
                "personalArc": {"want": "w", "need": "n", "arcEncounters": arc},
            }
        )
    acts = []
    for act_number in range(draw(st.integers(1, 2))):
        count = draw(st.integers(1, 3))
        names = [f"loc_{act_number}_{number}" for number in range(count)]
        locations = []
        for number, name in enumerate(names):
            # Each location is reached from an earlier one; more connections at random.
            connections = draw(st.lists(st.sampled_from(names), max_size=2, unique=True))
            locations.append(
                {
                    "id": name,
                    "title": name.replace("_", " ").title(),
                    "location": name,
                    "requiredCharacters": draw(
                        st.lists(st.sampled_from([c["id"] for c in characters]), max_size=1)
                    ),
                    "encounters": [
                        draw(_encounter(f"enc_{act_number}_{number}_{e}", settable))
                        for e in range(draw(st.integers(1, 3)))
                    ],
                    "connections": connections,
                    "mood": "theme",
                }
            )
        for number in range(1, count):
            parent: Document = locations[draw(st.integers(0, number - 1))]
            if names[number] not in parent["connections"]:
                parent["connections"] = [*parent["connections"], names[number]]
        act: Document = {
            "id": f"act_{act_number}",
            "title": f"Act {act_number}",
            "objective": "Get through it",
            "scenarioContext": "What is hidden.",
            "narrativeGuidelines": "Plainly.",
            "sandboxLocations": locations,
        }
        gives = [e["givesProgression"] for place in locations for e in place["encounters"]]
        gives = [amount for amount in gives if amount > 0]
        enough = sum(gives) - min(gives, default=0)
        if enough >= 1 and draw(st.booleans()):
            act["globalProgression"] = {
                "requiredValue": draw(st.integers(1, enough)),
                "trackerLabel": "Progress",
            }
        if draw(st.booleans()):
            required = draw(st.integers(1, 8))
            thresholds = draw(st.lists(st.integers(1, required), max_size=2, unique=True))
            act["opposingForce"] = {
                "trackerLabel": "Doom",
                "requiredValue": required,
                "escalationEvents": [
                    {"threshold": t, "description": f"At {t}."} for t in sorted(thresholds)
                ],
            }
        if draw(st.booleans()):
            act["inevitableEvents"] = [
                {
                    "id": "evt_end",
                    "title": "The End Comes",
                    "triggerCondition": "When it must",
                    "description": "It comes.",
                    "forcesClimax": draw(st.booleans()),
                }
            ]
        acts.append(act)
    document = copy.deepcopy(EXAMPLE)
    document["characters"] = characters
    document["plot"]["acts"] = acts
    document["plot"].pop("globalWorldInfo", None)
    keys = {place["location"] for act in acts for place in act["sandboxLocations"]}
    asset = {"url": "/x.png", "mimeType": "image/png"}
    document["assets"] = {
        "backgrounds": dict.fromkeys(keys, asset),
        "characters": {},
        "music": {"theme": {"url": "/x.wav", "mimeType": "audio/wav"}},
    }
    assume(not any(True for _ in STORY_PACKAGE_RULES.find(document)))
    return document


def _act_can_end(package: StoryPackage, state: StoryPlaythrough, budget: int = 4000) -> bool | None:
    """Whether some choices from `state` end its act (or the story); None past `budget` states.

    A depth-first search through `choose`, encounters and events tried
    before moves, over states told apart by everything but their logs.
    """
    acts = len(state.acts)
    seen: set[bytes] = set()
    waiting = [state]
    while waiting:
        here = waiting.pop()
        if len(here.acts) > acts or here.ended is not msgspec.UNSET:
            return True
        key = msgspec.json.encode(msgspec.structs.replace(here, log=[]))
        if key in seen:
            continue
        seen.add(key)
        if len(seen) > budget:
            return None
        waiting.extend(choose(package, here, o.choice) for o in reversed(offered(package, here)))
    return False


@settings(
    max_examples=examples_at_most(200),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(document=finalized_packages(), data=st.data())
def test_random_choices_never_reach_a_state_with_no_way_forward(
    document: Document, data: st.DataObject
) -> None:
    package = _package(document)
    state = start(package)
    for _ in range(40):
        if state.ended is not msgspec.UNSET:
            return
        choices = offered(package, state)
        assert choices, f"nothing is offered: {msgspec.json.encode(state).decode()}"
        state = choose(package, state, data.draw(st.sampled_from(choices)).choice)
    # A state of an act that can no longer end is followed only by such states of
    # the same act: the last one tells for every state of the walk.
    assert _act_can_end(package, state) is not False, (
        f"the act can no longer end: {msgspec.json.encode(state).decode()}"
    )

"""`story graph`: a story package drawn as Mermaid or dot text, or as SVG through Graphviz.

The drawings are read back by strict parsers of the little of each language
the drawing uses (`mermaid_parts`, `dot_parts`): a title that could add a
node, an edge or a line of its own would make them fail or count wrong.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from commands import cli

from plancontracts import STORY_PACKAGE, decode, violations
from plancontracts.generated.story_packages import StoryPackage
from plancontracts.pytest_plugin import PromptSnapshot
from plancontracts.runtime.core.rules import Rules
from plancontracts.runtime.story_packages import dot, mermaid

Document = dict[str, Any]


# A small package ----------------------------------------------------------------------


def encounter(name: str, **fields: Any) -> Document:
    return {
        "id": name,
        "title": name.title(),
        "description": f"What happens in {name}.",
        "type": "discovery",
        "pacing": {"expectedFrames": 6, "focus": "standard"},
        **fields,
    }


def location(name: str, title: str, connections: list[str], *encounters: Document) -> Document:
    return {
        "id": name,
        "title": title,
        "location": name,
        "requiredCharacters": ["ines"],
        "connections": connections,
        "mood": "fog",
        "encounters": list(encounters),
    }


CLIMAX = {
    "id": "evt_climax",
    "title": "The Storm",
    "triggerCondition": "When the Director judges it time",
    "description": "The storm breaks.",
    "forcesClimax": True,
}


def act(name: str, title: str, *places: Document) -> Document:
    return {
        "id": name,
        "title": title,
        "objective": "Learn who writes in the logbook",
        "scenarioContext": "The lamp writes the entries.",
        "narrativeGuidelines": "Hint, never show.",
        "sandboxLocations": list(places),
        # How play ends the act: its trackers are not drawn.
        "inevitableEvents": [CLIMAX],
    }


def package() -> Document:
    """Two acts; a flag set in the first is needed in the second; Tomas's arc sets another.

    Valid under the schema and every rule beyond it: Tomas is in act 2 (the
    reef requires him), so his arc can set `tomas_trusts` there.
    """
    first = act(
        "act_1",
        "Fog Bank",
        location(
            "loc_lamp",
            "Lamp Room",
            ["loc_harbour"],
            encounter("enc_entry", givesProgression=1, potentialFlags=["saw_ship"]),
        ),
        location(
            "loc_harbour",
            "Harbour",
            ["loc_lamp"],
            encounter("enc_dock", prerequisites=["saw_ship"], potentialFlags=["met_pilot"]),
        ),
    )
    reef = location(
        "loc_reef",
        "Reef",
        ["loc_cave"],
        encounter("enc_reef", prerequisites=["saw_ship", "tomas_trusts"], givesProgression=1),
    )
    reef["requiredCharacters"] = ["ines", "tomas"]
    second = act(
        "act_2",
        "The Wreck",
        reef,
        location("loc_cave", "Sea Cave", [], encounter("enc_cave", repeatable=True)),
    )
    arc = encounter(
        "arc_tomas", type="npc_interaction", arcPhase="crisis", potentialFlags=["tomas_trusts"]
    )
    file = {"url": "/generated/x.png", "mimeType": "image/png"}
    return {
        "id": "9a4e2c71-5b3d-4f08-8c6e-1d2f3a4b5c6d",
        "createdAt": "2026-11-20T18:45:00Z",
        "title": "Fog Bank",
        "genre": "mystery",
        "artStyle": "ink wash",
        "characters": [
            {
                "id": "ines",
                "name": "Ines",
                "role": "protagonist",
                "description": "The keeper.",
                "imagePrompt": "",
            },
            {
                "id": "tomas",
                "name": "Tomas",
                "role": "ally",
                "description": "The pilot.",
                "imagePrompt": "",
                "personalArc": {"want": "Peace", "need": "Truth", "arcEncounters": [arc]},
            },
        ],
        "plot": {
            "premise": "A logbook records ships that have not sailed.",
            "themes": ["foresight"],
            "globalContext": {
                "setting": "A foggy coast",
                "tone": "unease",
                "overarchingTruths": [],
            },
            "acts": [first, second],
            "possibleEndings": ["The wreck is prevented"],
        },
        "assets": {
            "backgrounds": dict.fromkeys(["loc_lamp", "loc_harbour", "loc_reef", "loc_cave"], file),
            "characters": {},
            "music": {"fog": file},
        },
        "meta": {"estimatedDuration": "10 minutes", "generationMs": 0},
    }


SCHEMA_ALONE = Rules(STORY_PACKAGE.name, "no rules", lambda value: iter(()))


def typed(document: Document) -> StoryPackage:
    """`document` decoded under its schema alone, as `story graph` reads a package."""
    return decode(STORY_PACKAGE, json.dumps(document), rules=SCHEMA_ALONE)


def titles(document: Document) -> list[str]:
    return [place["title"] for act in document["plot"]["acts"] for place in act["sandboxLocations"]]


# Strict readers of the drawings -------------------------------------------------------

_LABEL = r'"((?:[^"#;<>`\[\]{}|&\n\\]|#[0-9]+;)*)"'
_MERMAID_LINES = {
    "header": re.compile(r"flowchart LR"),
    "class": re.compile(r"  classDef missing stroke:#c00,stroke-dasharray: 5 5"),
    "subgraph": re.compile(rf"  subgraph (act[0-9]+)\[{_LABEL}\]"),
    "end": re.compile(r"  end"),
    "node": re.compile(rf" +([a-z0-9_]+)\[{_LABEL}\](:::missing)?"),
    "arc": re.compile(rf"  (arc[0-9]+)\(\[{_LABEL}\]\)"),
    "edge": re.compile(rf"  ([a-z0-9_]+) (-->|--x|-\.->)(?:\|{_LABEL}\|)? ([a-z0-9_]+)"),
}


def _mermaid_text(label: str) -> str:
    return re.sub(r"#([0-9]+);", lambda code: chr(int(code[1])), label)


def mermaid_parts(text: str) -> tuple[dict[str, tuple[str, str]], list[tuple[str, str, str, str]]]:
    """The nodes (key: kind, label) and edges (source, arrow, label, target) of a drawing.

    Every line must be one the drawing writes, each label made only of safe
    characters and `#N;` codes; labels come back decoded.
    """
    nodes: dict[str, tuple[str, str]] = {}
    edges: list[tuple[str, str, str, str]] = []
    lines = text.split("\n")
    assert lines[0] == "flowchart LR"
    assert lines[-1] == ""
    for line in lines[1:-1]:
        kind, found = next(
            (
                (kind, found)
                for kind, pattern in _MERMAID_LINES.items()
                if (found := pattern.fullmatch(line))
            ),
            ("", None),
        )
        assert found is not None, f"not a line the drawing writes: {line!r}"
        if kind in ("node", "arc"):
            assert found[1] not in nodes
            missing = kind == "node" and found[3] is not None
            nodes[found[1]] = ("missing" if missing else kind, _mermaid_text(found[2]))
        elif kind == "edge":
            edges.append((found[1], found[2], _mermaid_text(found[3] or ""), found[4]))
    assert all(source in nodes and target in nodes for source, _, _, target in edges)
    return nodes, edges


_DOT_TOKEN = re.compile(r'\s+|("(?:[^"\\\n]|\\.)*")|(->|[{}\[\];=,])|([A-Za-z_][A-Za-z0-9_]*)')


def _dot_tokens(text: str) -> list[str]:
    tokens: list[str] = []
    at = 0
    while at < len(text):
        found = _DOT_TOKEN.match(text, at)
        assert found is not None, f"not dot at {at}: {text[at : at + 40]!r}"
        if found.lastindex:
            tokens.append(found[found.lastindex])
        at = found.end()
    return tokens


def _dot_string(token: str) -> str:
    assert token.startswith('"'), token
    return re.sub(r"\\(.)", r"\1", token[1:-1]).replace("&amp;", "&")


def dot_parts(text: str) -> tuple[dict[str, dict[str, str]], list[tuple[str, str, dict[str, str]]]]:
    """The nodes (key: attributes and `cluster`) and edges (source, target, attributes) of dot.

    Only the statements the drawing writes are accepted: graph and node
    defaults, clusters with a label, node and edge statements.
    """
    tokens = _dot_tokens(text)
    assert tokens[:3] == ["digraph", "story_package", "{"]
    assert tokens[-1] == "}"
    nodes: dict[str, dict[str, str]] = {}
    edges: list[tuple[str, str, dict[str, str]]] = []
    at = 3
    cluster = ""

    def attributes() -> dict[str, str]:
        nonlocal at
        found: dict[str, str] = {}
        if tokens[at] != "[":
            return found
        at += 1
        while tokens[at] != "]":
            name, equals, value = tokens[at : at + 3]
            assert equals == "=", tokens[at : at + 3]
            assert name.isidentifier(), name
            found[name] = _dot_string(value) if value.startswith('"') else value
            at += 3
            if tokens[at] == ",":
                at += 1
        at += 1
        return found

    while at < len(tokens) - 1:
        token = tokens[at]
        if token == "subgraph":
            assert not cluster
            assert tokens[at + 2] == "{"
            cluster = _dot_string(tokens[at + 1])
            at += 3
            continue
        if token == "}":
            assert cluster
            cluster = ""
            at += 1
            continue
        if tokens[at + 1] == "=":  # rankdir=LR; or a cluster's label
            at += 3
        elif token == "node":
            at += 1
            attributes()
        elif tokens[at + 1] == "->":
            source, target = _dot_string(token), _dot_string(tokens[at + 2])
            at += 3
            edges.append((source, target, attributes()))
        else:
            key = _dot_string(token)
            at += 1
            assert key not in nodes
            nodes[key] = {**attributes(), "cluster": cluster}
        assert tokens[at] == ";", tokens[at - 2 : at + 2]
        at += 1
    assert all(source in nodes and target in nodes for source, target, _ in edges)
    return nodes, edges


# The drawings ---------------------------------------------------------------------------


def test_the_small_package_is_valid_under_every_rule() -> None:
    assert violations(STORY_PACKAGE, package()) == ()


def test_mermaid_drawing(prompt_snapshot: PromptSnapshot) -> None:
    assert mermaid(typed(package())) == prompt_snapshot.with_tokenizer(None)


def test_dot_drawing(prompt_snapshot: PromptSnapshot) -> None:
    assert dot(typed(package())) == prompt_snapshot.with_tokenizer(None)


def test_acts_locations_connections_and_flags_are_drawn() -> None:
    nodes, edges = mermaid_parts(mermaid(typed(package())))
    assert nodes == {
        "act0_loc0": ("node", "Lamp Room"),
        "act0_loc1": ("node", "Harbour"),
        "act1_loc0": ("node", "Reef"),
        "act1_loc1": ("node", "Sea Cave"),
        "arc1": ("arc", "Tomas's arc"),
    }
    assert edges == [
        ("act0_loc0", "-->", "", "act0_loc1"),
        ("act0_loc1", "-->", "", "act0_loc0"),
        ("act1_loc0", "-->", "", "act1_loc1"),  # one way, as written: the cave leads nowhere
        ("act0_loc0", "-.->", "saw_ship", "act0_loc1"),
        ("act0_loc0", "-.->", "saw_ship", "act1_loc0"),  # across acts
        ("arc1", "-.->", "tomas_trusts", "act1_loc0"),
    ]
    dot_nodes, dot_edges = dot_parts(dot(typed(package())))
    assert {key: (node["label"], node["cluster"]) for key, node in dot_nodes.items()} == {
        "act0_loc0": ("Lamp Room", "cluster_act0"),
        "act0_loc1": ("Harbour", "cluster_act0"),
        "act1_loc0": ("Reef", "cluster_act1"),
        "act1_loc1": ("Sea Cave", "cluster_act1"),
        "arc1": ("Tomas's arc", ""),
    }
    assert [(s, t, a.get("label", "")) for s, t, a in dot_edges] == [
        (source, target, label) for source, _, label, target in edges
    ]


def test_a_pair_of_locations_joined_by_many_flags_gets_one_arrow_naming_five() -> None:
    document = package()
    flags = [f"flag_{number}" for number in range(7)]
    lamp, harbour = document["plot"]["acts"][0]["sandboxLocations"]
    lamp["encounters"][0]["potentialFlags"] = flags
    harbour["encounters"][0]["prerequisites"] = flags
    _, edges = mermaid_parts(mermaid(typed(document)))
    assert [edge for edge in edges if edge[1] == "-.->" and edge[0] == "act0_loc0"] == [
        ("act0_loc0", "-.->", "flag_0, flag_1, flag_2, flag_3, flag_4 and 2 more", "act0_loc1")
    ]


def test_what_the_rules_refuse_is_drawn_distinctly() -> None:
    document = package()
    lamp = document["plot"]["acts"][0]["sandboxLocations"][0]
    lamp["connections"] = ["loc_harbor", "loc_harbour", "loc_harbor"]  # a typo, twice
    lamp["encounters"][0]["prerequisites"] = ["saw_storm"]  # set by no encounter
    assert violations(STORY_PACKAGE, document)  # the rules refuse it; the schema does not
    nodes, edges = mermaid_parts(mermaid(typed(document)))
    assert nodes["act0_missing0"] == ("missing", "loc_harbor (no such location)")
    assert nodes["flag0"] == ("missing", "saw_storm: no encounter sets it")
    assert [edge for edge in edges if "missing" in edge[3] or edge[0] == "flag0"] == [
        ("act0_loc0", "--x", "", "act0_missing0"),
        ("act0_loc0", "--x", "", "act0_missing0"),
        ("flag0", "-.->", "", "act0_loc0"),
    ]
    dot_nodes, dot_edges = dot_parts(dot(typed(document)))
    assert dot_nodes["act0_missing0"]["style"] == dot_nodes["flag0"]["style"] == "dashed"
    assert [a for s, t, a in dot_edges if t == "act0_missing0"] == [
        {"style": "dashed", "color": "red"}
    ] * 2


HOSTILE = [
    'A "quoted" title',
    'x"] --> y["z',
    "line\nbreak --> evil\r\nsubgraph x",
    "`markdown` **bold**",
    "<b>bold</b> &amp; <script>alert(1)</script>",
    "end",
    '}]; "a" -> "b"; x [label="',
    "back\\slash\\",
    "#quot; #35; %% not a comment",
    "|pipes| and {braces} and [brackets]",
    "\u202eright to left\u2028line separator\ttab",
    "ünïcödé ❤ 日本",
]


def test_hostile_titles_stay_one_label_each() -> None:
    document = package()
    places = [
        location(f"loc_{number}", title, [f"loc_{number + 1}"] if number + 1 < len(HOSTILE) else [],
                 encounter(f"enc_{number}", repeatable=True))
        for number, title in enumerate(HOSTILE)
    ]  # fmt: skip
    document["plot"]["acts"][0]["title"] = HOSTILE[1]
    document["plot"]["acts"][1]["sandboxLocations"] = places
    document["characters"][1]["name"] = HOSTILE[6][:80]
    package_ = typed(document)
    # Control characters are drawn as spaces; everything else as it is.
    drawn = [re.sub(r"[\n\r\t\u2028\u202e]", " ", title) for title in titles(document)]

    nodes, edges = mermaid_parts(mermaid(package_))
    assert [label for key, (kind, label) in nodes.items() if kind == "node"] == drawn
    assert nodes["arc1"] == ("arc", f"{HOSTILE[6]}'s arc")
    assert len([edge for edge in edges if edge[1] == "-->"]) == 2 + len(HOSTILE) - 1
    assert re.search(rf"subgraph act0\[{_LABEL}\]", mermaid(package_))

    dot_nodes, dot_edges = dot_parts(dot(package_))
    assert [node["label"] for key, node in dot_nodes.items() if "_loc" in key] == drawn
    assert dot_nodes["arc1"]["label"] == f"{HOSTILE[6]}'s arc"
    assert len([edge for edge in dot_edges if not edge[2]]) == 2 + len(HOSTILE) - 1


def test_the_synthetic_upstream_package_drawn_in_place(upstream: Path) -> None:
    path = upstream / "vn" / "synthetic_full_package.json"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    document = json.loads(path.read_text(encoding="utf-8"))
    done = cli("story", "graph", str(path))
    assert (done.returncode, done.stderr) == (0, "")
    nodes, edges = mermaid_parts(done.stdout)
    assert [label for kind, label in nodes.values() if kind == "node"] == titles(document)
    connections = sum(
        len(place["connections"])
        for act in document["plot"]["acts"]
        for place in act["sandboxLocations"]
    )
    assert len([edge for edge in edges if edge[1] == "-->"]) == connections
    assert ("act0_loc0", "-.->", "found_altered_card", "act0_loc1") in edges
    assert dot_parts(dot(decode(STORY_PACKAGE, path.read_bytes())))[0].keys() == nodes.keys()


# The command ------------------------------------------------------------------------------


def test_the_command_prints_the_drawing_of_a_file_or_stdin(tmp_path: Path) -> None:
    path = tmp_path / "package.json"
    path.write_text(json.dumps(package()), encoding="utf-8")
    done = cli("story", "graph", str(path))
    assert (done.returncode, done.stdout, done.stderr) == (0, mermaid(typed(package())), "")
    done = cli(
        "story",
        "graph",
        "-",
        "--format",
        "dot",
        stdin=json.dumps(package()),
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, dot(typed(package())), "")


def test_a_package_that_breaks_only_the_rules_is_drawn_with_a_warning(tmp_path: Path) -> None:
    document = package()
    document["plot"]["acts"][0]["sandboxLocations"][0]["connections"] = ["loc_harbor"]
    path = tmp_path / "package.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    done = cli("story", "graph", str(path))
    assert (done.returncode, done.stdout) == (0, mermaid(typed(document)))
    assert done.stderr == (
        f"plancontracts: warning: {path} breaks the story package's rules beyond its schema "
        "(2 problems): drawn as it is; `plancontracts validate story-package` lists them\n"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "<stdin>: malformed JSON: Expecting property name enclosed in double quotes"),
        ("[]", "<stdin>: not a valid story-package (1 violation), the first: (document): "),
        (
            json.dumps({**package(), "title": ""}),
            "<stdin>: not a valid story-package (1 violation), the first: /title: ",
        ),
        (" " * 100_001, "<stdin>: larger than 100000 bytes (see --max-bytes)"),
    ],
    ids=["not-json", "not-an-object", "schema", "too-large"],
)
def test_a_package_that_is_not_json_or_breaks_its_schema_is_refused_in_one_line(
    text: str, message: str
) -> None:
    done = cli("story", "graph", "-", "--max-bytes", "100000", stdin=text)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith(f"plancontracts: error: {message}")
    assert done.stderr.count("\n") == 1


def test_a_missing_file_and_a_bad_command_line(tmp_path: Path) -> None:
    # A file that cannot be read is a usage error, as in every command.
    done = cli("story", "graph", str(tmp_path / "none.json"))
    assert (done.returncode, done.stderr) == (
        2,
        f"plancontracts: error: {tmp_path}/none.json: no such file\n",
    )
    done = cli("story", "graph", "-", "--format", "png")
    assert done.returncode == 2
    assert "invalid choice: 'png'" in done.stderr
    out = tmp_path / "out.svg"
    done = cli("story", "graph", "-", "--format", "mermaid", "--svg", str(out))
    assert (done.returncode, done.stderr) == (
        2,
        "plancontracts: error: --svg renders the dot drawing: --format mermaid does not apply\n",
    )
    assert not out.exists()


def test_svg_without_graphviz_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # a folder without `dot`
    out = tmp_path / "out.svg"
    done = cli("story", "graph", "-", "--svg", str(out), stdin=json.dumps(package()))  # fmt: skip
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "plancontracts: error: --svg needs Graphviz's dot program (https://graphviz.org), "
        "not on PATH\n"
    )
    assert not out.exists()


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_svg_is_rendered_with_graphviz(tmp_path: Path) -> None:
    document = package()
    document["plot"]["acts"][0]["title"] = HOSTILE[6]
    path, out = tmp_path / "package.json", tmp_path / "out.svg"
    path.write_text(json.dumps(document), encoding="utf-8")
    done = cli("story", "graph", str(path), "--svg", str(out))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    svg = out.read_text(encoding="utf-8")
    assert svg.lstrip().startswith("<?xml")
    assert svg.rstrip().endswith("</svg>")
    assert svg.count('class="node"') == 5  # four locations and an arc: the title added none

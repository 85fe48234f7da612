"""A picture of a story package for review, as Mermaid or Graphviz dot text.

What is drawn:

- each act as a subgraph (a cluster in dot), titled with the act's title,
  holding a node per location, labelled with the location's title;
- each connection as an arrow from its location to the one it names, one
  way, as written (the package's connections are one-way);
- each flag dependency as a dotted arrow from a location (or a character's
  personal arc) with an encounter whose `potentialFlags` set a flag, to a
  location (or arc) with an encounter whose `prerequisites` need it, across
  acts too; one arrow per pair, labelled with its flags;
- each character whose personal arc has encounters that set or need a flag,
  as a node of its own outside the acts.

What the rules beyond the schema refuse is drawn too, distinctly, since a
picture helps to see why: a connection naming no location of its act ends
in a dashed node "ID (no such location)", and a prerequisite no encounter
sets comes from a dashed node "FLAG: no encounter sets it".

Every node id is made here from positions (`act0_loc1`), never from the
package's ids, and every label is escaped for its format, so no title can
add a node or an edge. Line breaks and other control characters in titles
are drawn as spaces. Work and text grow with the package's size and the
number of pairs of locations joined by flags; labels name at most
`NAMES_SHOWN` flags.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from msgspec import UNSET

from ...generated.story_packages import ArcEncounter, Encounter, StoryPackage
from .rules import NAMES_SHOWN

__all__ = ["FORMATS", "Picture", "dot", "mermaid", "picture"]

NodeKind = Literal["location", "arc", "missing"]
EdgeKind = Literal["connection", "dangling", "flags"]


@dataclass(frozen=True)
class Node:
    """One box of the picture: `key` is its id in the output text, `label` its text, unescaped."""

    key: str
    label: str
    kind: NodeKind


@dataclass(frozen=True)
class Cluster:
    """An act: its key, its title, and its nodes in document order."""

    key: str
    label: str
    nodes: tuple[Node, ...]


@dataclass(frozen=True)
class Edge:
    """An arrow: a connection, a connection to no location, or the flags one node sets another."""

    source: str
    target: str
    kind: EdgeKind
    label: str = ""


@dataclass(frozen=True)
class Picture:
    """What is drawn, whatever the format: the acts, the nodes outside them, the arrows."""

    clusters: tuple[Cluster, ...]
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]


@dataclass
class _Flags:
    """Who sets and who needs each flag, by node key, in document order and without repeats."""

    setters: dict[str, dict[str, None]] = field(default_factory=dict)
    needers: dict[tuple[str, str], None] = field(default_factory=dict)
    "Each (node key, flag) once."

    def note(self, key: str, encounters: Iterable[Encounter | ArcEncounter]) -> None:
        for encounter in encounters:
            if encounter.potential_flags is not UNSET:
                for flag in encounter.potential_flags:
                    self.setters.setdefault(flag, {})[key] = None
            if encounter.prerequisites is not UNSET:
                for flag in encounter.prerequisites:
                    self.needers[key, flag] = None


def picture(package: StoryPackage) -> Picture:
    """What `package` looks like: its acts, locations, connections and flag dependencies.

    `package` needs only to satisfy its schema: what the rules beyond it
    refuse (a connection to no location, a flag nobody sets) is drawn as
    missing nodes. Raises nothing.
    """
    clusters: list[Cluster] = []
    edges: list[Edge] = []
    flags = _Flags()
    for act_number, act in enumerate(package.plot.acts):
        act_key = f"act{act_number}"
        nodes: list[Node] = []
        keys: dict[str, str] = {}
        for number, location in enumerate(act.sandbox_locations):
            key = f"{act_key}_loc{number}"
            nodes.append(Node(key, location.title, "location"))
            keys.setdefault(location.id, key)  # where ids repeat, connections go to the first
            if location.encounters is not UNSET:
                flags.note(key, location.encounters)
        missing: dict[str, str] = {}
        for number, location in enumerate(act.sandbox_locations):
            source = f"{act_key}_loc{number}"
            for target in location.connections:
                if target in keys:
                    edges.append(Edge(source, keys[target], "connection"))
                    continue
                if target not in missing:
                    missing[target] = f"{act_key}_missing{len(missing)}"
                    nodes.append(Node(missing[target], f"{target} (no such location)", "missing"))
                edges.append(Edge(source, missing[target], "dangling"))
        clusters.append(Cluster(act_key, act.title, tuple(nodes)))
    arcs: list[Node] = []
    for number, character in enumerate(package.characters):
        if character.personal_arc is UNSET:
            continue
        encounters = character.personal_arc.arc_encounters
        if any(encounter.potential_flags or encounter.prerequisites for encounter in encounters):
            arcs.append(Node(f"arc{number}", f"{character.name}'s arc", "arc"))
            flags.note(f"arc{number}", encounters)
    unset, flag_edges = _flag_edges(flags)
    return Picture(tuple(clusters), (*arcs, *unset), (*edges, *flag_edges))


def _flag_edges(flags: _Flags) -> tuple[list[Node], list[Edge]]:
    """The nodes of flags nobody sets, and one arrow per pair of nodes a flag joins."""
    unset: dict[str, str] = {}
    pairs: dict[tuple[str, str], list[str]] = {}
    counts: dict[tuple[str, str], int] = {}
    for needer, flag in flags.needers:
        setters = flags.setters.get(flag)
        if setters is None:
            if flag not in unset:
                unset[flag] = f"flag{len(unset)}"
            setters = {unset[flag]: None}
        for setter in setters:
            pair = setter, needer
            named = pairs.setdefault(pair, [])
            counts[pair] = counts.get(pair, 0) + 1
            if len(named) < NAMES_SHOWN:
                named.append(flag)
    nodes = [Node(key, f"{flag}: no encounter sets it", "missing") for flag, key in unset.items()]
    unset_keys = set(unset.values())
    edges = [
        Edge(source, target, "flags", "" if source in unset_keys else _listed(named, counts[pair]))
        for pair, named in pairs.items()
        for source, target in [pair]
    ]
    return nodes, edges


def _listed(names: list[str], count: int) -> str:
    more = count - len(names)
    return ", ".join(names) + (f" and {more} more" if more else "")


# Mermaid ----------------------------------------------------------------------------

_MERMAID_PLAIN = frozenset(" .,'!?:()/-_")
"Characters that stand for themselves in a quoted Mermaid label; other punctuation is a code."


def mermaid(package: StoryPackage) -> str:
    """`package` drawn as a Mermaid flowchart, left to right (see the module's docstring)."""
    drawn = picture(package)
    lines = ["flowchart LR"]
    if any(node.kind == "missing" for node in _all_nodes(drawn)):
        lines.append("  classDef missing stroke:#c00,stroke-dasharray: 5 5")
    for cluster in drawn.clusters:
        lines.append(f"  subgraph {cluster.key}[{_mermaid_label(cluster.label)}]")
        lines += [f"    {_mermaid_node(node)}" for node in cluster.nodes]
        lines.append("  end")
    lines += [f"  {_mermaid_node(node)}" for node in drawn.nodes]
    for edge in drawn.edges:
        arrow = {"connection": "-->", "dangling": "--x", "flags": "-.->"}[edge.kind]
        text = f"|{_mermaid_label(edge.label)}|" if edge.label else ""
        lines.append(f"  {edge.source} {arrow}{text} {edge.target}")
    return "\n".join(lines) + "\n"


def _mermaid_node(node: Node) -> str:
    label = _mermaid_label(node.label)
    if node.kind == "arc":
        return f"{node.key}([{label}])"
    return f"{node.key}[{label}]" + (":::missing" if node.kind == "missing" else "")


def _mermaid_label(text: str) -> str:
    """`text` in double quotes, each character but letters, digits and plain punctuation as `#N;`.

    Mermaid reads `#N;` as the character of code N (`#34;` is a double
    quote), so no text can end the label, start a line, or form markup.
    """
    escaped = (
        ch
        if ch.isalnum() or ch in _MERMAID_PLAIN
        else " "
        if not ch.isprintable()
        else f"#{ord(ch)};"
        for ch in text
    )
    return '"' + "".join(escaped) + '"'


# Graphviz dot -------------------------------------------------------------------------


def dot(package: StoryPackage) -> str:
    """`package` drawn as a Graphviz digraph, left to right (see the module's docstring)."""
    drawn = picture(package)
    lines = ["digraph story_package {", "  rankdir=LR;", "  node [shape=box];"]
    for cluster in drawn.clusters:
        lines.append(f"  subgraph {_dot_text('cluster_' + cluster.key)} {{")
        lines.append(f"    label={_dot_text(cluster.label)};")
        lines += [f"    {_dot_node(node)}" for node in cluster.nodes]
        lines.append("  }")
    lines += [f"  {_dot_node(node)}" for node in drawn.nodes]
    for edge in drawn.edges:
        attributes = {
            "connection": "",
            "dangling": " [style=dashed, color=red]",
            "flags": f" [label={_dot_text(edge.label)}, style=dotted]"
            if edge.label
            else " [style=dotted]",
        }[edge.kind]
        lines.append(f"  {_dot_text(edge.source)} -> {_dot_text(edge.target)}{attributes};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _dot_node(node: Node) -> str:
    style = {"location": "", "arc": ", shape=ellipse", "missing": ", style=dashed, color=red"}
    return f"{_dot_text(node.key)} [label={_dot_text(node.label)}{style[node.kind]}];"


def _dot_text(text: str) -> str:
    """`text` as a dot string in double quotes: every quote and backslash escaped.

    `&` is written `&amp;`, since Graphviz reads entities in labels; other
    characters that are not printable are drawn as spaces.
    """
    escaped = (
        "\\" + ch if ch in '"\\' else "&amp;" if ch == "&" else ch if ch.isprintable() else " "
        for ch in text
    )
    return '"' + "".join(escaped) + '"'


def _all_nodes(drawn: Picture) -> Iterable[Node]:
    for cluster in drawn.clusters:
        yield from cluster.nodes
    yield from drawn.nodes


FORMATS: dict[str, Callable[[StoryPackage], str]] = {"mermaid": mermaid, "dot": dot}
"Each format `story graph --format` draws, by name."

"""Compiling a contract's string pattern to a DFA over code points, as Python's `re` reads it.

A pattern check that runs natively needs the pattern as a table: a
deterministic automaton whose state 0 is the start, stepping on each code
point of the string, that accepts exactly the strings in which
`re.compile(pattern).search` finds a match. `compile_dfa` builds that table
for the subset of `re` it reads exactly (literals, classes of literals and
ranges, `.`, groups, alternation, greedy and lazy repeats, `^` at the start,
`$`, `\\Z` or `$(?!\\n)` at the end) and returns None for any other pattern:
the caller then checks that pattern with `re`, so a table never decides
differently from `re`.

Construction: a Thompson NFA whose moves are ranges of code points, the
subset construction (each DFA state's ranges split at every bound of its NFA
states' ranges), then Hopcroft's minimisation over the classes of code points
no range bound separates.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

__all__ = ["MAX_CODE_POINT", "NFA_NODES", "DfaTable", "compile_dfa"]

MAX_CODE_POINT = 0x10FFFF
"The last code point a str may hold; tables cover 0..MAX_CODE_POINT."

NFA_NODES = 20_000
"At most this many NFA nodes and copies of repeats (counted repeats expanded): past that, no table."

_SUBSET_WORK = 1_000_000
"NFA nodes and ranges the subset construction may visit in all: past that, no table."

_MINIMISED_CELLS = 4_000_000
"States times code point classes past which the table is left unminimised: the work would be long."

DfaTable: TypeAlias = tuple[tuple[bool, ...], tuple[tuple[tuple[int, int, int], ...], ...]]
"""`(accepting, transitions)`: whether each state accepts, and each state's moves.

`transitions[s]` lists `(lo, hi, target)`: the code points `lo..hi` (inclusive)
lead from `s` to `target`. The ranges are sorted by `lo` and do not overlap; a
code point no range covers rejects the string. State 0 is the start.
"""

Ranges: TypeAlias = tuple[tuple[int, int], ...]
"Inclusive ranges of code points, sorted, neither overlapping nor touching."

_NEWLINE = 0x0A


class _Unsupported(Exception):
    """The pattern uses what this module does not read exactly: no table for it."""


@dataclass(frozen=True, slots=True)
class _Chars:
    """One code point out of `ranges` (empty: matches nothing)."""

    ranges: Ranges


@dataclass(frozen=True, slots=True)
class _Sequence:
    """Each item in turn (none: the empty string)."""

    items: tuple[_Node, ...]


@dataclass(frozen=True, slots=True)
class _Either:
    """Any one of the options."""

    options: tuple[_Node, ...]


@dataclass(frozen=True, slots=True)
class _Repeat:
    """`item` at least `least` times, at most `most` (None: no limit)."""

    item: _Node
    least: int
    most: int | None


_Node: TypeAlias = "_Chars | _Sequence | _Either | _Repeat"


@dataclass(frozen=True, slots=True)
class _Pattern:
    """A pattern as `search` uses it.

    `at_start`: the match must begin at the start of the string (`^`, `\\A`).
    `end`: None when anything may follow the match; "end" when the match must
    end the string (`$(?!\\n)`, `\\Z`); "end or newline" when it may also be
    followed by one final newline (a bare `$`).
    """

    at_start: bool
    body: _Node
    end: Literal["end", "end or newline"] | None


def _complement(ranges: Iterable[tuple[int, int]]) -> Ranges:
    """The code points none of `ranges` holds, as sorted ranges."""
    left: list[tuple[int, int]] = []
    next_free = 0
    for lo, hi in _merged(ranges):
        if lo > next_free:
            left.append((next_free, lo - 1))
        next_free = hi + 1
    if next_free <= MAX_CODE_POINT:
        left.append((next_free, MAX_CODE_POINT))
    return tuple(left)


def _merged(ranges: Iterable[tuple[int, int]]) -> Ranges:
    """`ranges` sorted, with overlapping and touching ranges joined."""
    joined: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if joined and lo <= joined[-1][1] + 1:
            joined[-1] = (joined[-1][0], max(hi, joined[-1][1]))
        else:
            joined.append((lo, hi))
    return tuple(joined)


_ANY_BUT_NEWLINE = _complement([(_NEWLINE, _NEWLINE)])


def _read(pattern: str) -> _Pattern:
    """`pattern` as `re` reads it, in this module's terms.

    This is the one place that reads `re`'s private parser (`re._parser`, the
    standard library's own reading of a pattern, the same one `re.compile`
    uses): parsing the pattern any other way could read it differently from
    `re`, and the table must never decide differently from `re`.

    Raises `re.error` for a pattern `re` does not compile, and `_Unsupported`
    for one that uses flags or constructs this module does not read exactly.
    """
    re.compile(pattern)
    sre: Any = importlib.import_module("re._parser")
    tree = sre.parse(pattern)
    # Any flag but the one every str pattern carries (Unicode) changes what a
    # construct means: case-insensitivity, `.` taking newlines, `^`/`$` at lines.
    if tree.state.flags & ~sre.SRE_FLAG_UNICODE:
        raise _Unsupported

    def sequence(sub: Any) -> _Sequence:
        return _Sequence(tuple(item(op, av) for op, av in sub.data))

    def item(op: Any, av: Any) -> _Node:
        if op is sre.LITERAL:
            return _Chars(((av, av),))
        if op is sre.NOT_LITERAL:
            return _Chars(_complement([(av, av)]))
        if op is sre.ANY:
            return _Chars(_ANY_BUT_NEWLINE)
        if op is sre.IN:
            return _Chars(chars(av))
        if op is sre.SUBPATTERN:
            _group, add_flags, del_flags, sub = av
            if add_flags or del_flags:
                raise _Unsupported
            return sequence(sub)
        if op is sre.BRANCH:
            return _Either(tuple(sequence(sub) for sub in av[1]))
        if op is sre.MAX_REPEAT or op is sre.MIN_REPEAT:
            # Lazy or greedy, a repeat matches the same strings: only which
            # match `search` reports differs, never whether there is one.
            least, most, sub = av
            return _Repeat(sequence(sub), least, None if most == sre.MAXREPEAT else most)
        raise _Unsupported

    def chars(members: Any) -> Ranges:
        negate = False
        ranges: list[tuple[int, int]] = []
        for position, (op, av) in enumerate(members):
            if op is sre.NEGATE and position == 0:
                negate = True
            elif op is sre.LITERAL:
                ranges.append((av, av))
            elif op is sre.RANGE:
                ranges.append((av[0], av[1]))
            else:
                raise _Unsupported
        return _complement(ranges) if negate else _merged(ranges)

    def is_at(entry: Any, *where: Any) -> bool:
        return bool(entry[0] is sre.AT and any(entry[1] is at for at in where))

    items = list(tree.data)
    at_start = bool(items) and is_at(items[0], sre.AT_BEGINNING, sre.AT_BEGINNING_STRING)
    if at_start:
        del items[0]
    end: Literal["end", "end or newline"] | None = None
    # `$(?!\n)`: `$`, then a lookahead (direction 1) that the newline alone does not follow.
    if (
        len(items) >= 2
        and is_at(items[-2], sre.AT_END)
        and items[-1][0] is sre.ASSERT_NOT
        and items[-1][1][0] == 1
        and list(items[-1][1][1].data) == [(sre.LITERAL, _NEWLINE)]
    ):
        end = "end"
        del items[-2:]
    elif items and is_at(items[-1], sre.AT_END_STRING):
        end = "end"
        del items[-1]
    elif items and is_at(items[-1], sre.AT_END):
        end = "end or newline"
        del items[-1]
    return _Pattern(at_start, _Sequence(tuple(item(op, av) for op, av in items)), end)


class _Nfa:
    """A Thompson NFA: each node's moves on ranges of code points, and its empty moves."""

    def __init__(self, limit: int) -> None:
        self.moves: list[list[tuple[int, int, int]]] = []
        self.skips: list[list[int]] = []
        self.limit = limit
        self.work = 0

    def spend(self) -> None:
        """Counts one node or one copy of a repeat. Raises `_Unsupported` past the limit.

        Copies count too: a repeat of what takes no node (`(?:){4000000000}`)
        would otherwise run for hours building nothing.
        """
        self.work += 1
        if self.work > self.limit:
            raise _Unsupported

    def node(self) -> int:
        """A new node. Raises `_Unsupported` past the limit."""
        self.spend()
        self.moves.append([])
        self.skips.append([])
        return len(self.moves) - 1

    def add(self, node: _Node, start: int) -> int:
        """Adds `node`'s strings from `start`; returns the node where they end.

        Nothing leads back into `start` (loops get nodes of their own), so the
        caller may go on adding moves from it and from the end it is given.
        """
        if isinstance(node, _Chars):
            end = self.node()
            self.moves[start] += [(lo, hi, end) for lo, hi in node.ranges]
            return end
        if isinstance(node, _Sequence):
            for item in node.items:
                start = self.add(item, start)
            return start
        if isinstance(node, _Either):
            end = self.node()
            for option in node.options:
                begin = self.node()
                self.skips[start].append(begin)
                self.skips[self.add(option, begin)].append(end)
            return end
        for _ in range(node.least):
            self.spend()
            start = self.add(node.item, start)
        if node.most is None:
            loop = self.node()
            self.skips[start].append(loop)
            self.skips[self.add(node.item, loop)].append(loop)
            return loop
        end = self.node()
        for _ in range(node.most - node.least):
            self.spend()
            self.skips[start].append(end)
            start = self.add(node.item, start)
        self.skips[start].append(end)
        return end


def _nfa(pattern: _Pattern, limit: int) -> tuple[_Nfa, int]:
    """The NFA of `search` with `pattern`, starting at node 0, and its accepting node."""
    nfa = _Nfa(limit)
    start = nfa.node()
    if not pattern.at_start:
        # `search` tries every position: any code points may come first.
        nfa.moves[start].append((0, MAX_CODE_POINT, start))
        begin = nfa.node()
        nfa.skips[start].append(begin)
        start = begin
    end = nfa.add(pattern.body, start)
    accept = nfa.node()
    nfa.skips[end].append(accept)
    if pattern.end is None:
        nfa.moves[accept].append((0, MAX_CODE_POINT, accept))
    elif pattern.end == "end or newline":
        nfa.moves[end].append((_NEWLINE, _NEWLINE, accept))
    return nfa, accept


def _closure(nfa: _Nfa, nodes: Iterable[int], accept: int) -> frozenset[int]:
    """The nodes that `nodes` reach by empty moves and that move on code points or accept.

    Nodes with only empty moves are left out: they change nothing about what
    the set accepts, and leaving them out makes sets that differ only there one.
    """
    reached = set(nodes)
    pending = list(reached)
    while pending:
        for target in nfa.skips[pending.pop()]:
            if target not in reached:
                reached.add(target)
                pending.append(target)
    return frozenset(node for node in reached if nfa.moves[node] or node == accept)


def _extend(moves: list[tuple[int, int, int]], lo: int, hi: int, target: int) -> None:
    """Adds the move `lo..hi -> target` after `moves`, joined to the last one if it continues it."""
    if moves and moves[-1][1] == lo - 1 and moves[-1][2] == target:
        moves[-1] = (moves[-1][0], hi, target)
    else:
        moves.append((lo, hi, target))


def _determinised(nfa: _Nfa, accept: int, max_states: int) -> DfaTable | None:
    """The subset construction of `nfa`; None past `max_states` states or `_SUBSET_WORK`."""
    closures: dict[frozenset[int], frozenset[int]] = {}
    start = _closure(nfa, [0], accept)
    index = {start: 0}
    states = [start]
    work = 0
    rows: list[tuple[tuple[int, int, int], ...]] = []
    while len(rows) < len(states):
        # The NFA's nodes share few distinct ranges: split at the bounds of those.
        targets_of: dict[tuple[int, int], set[int]] = {}
        for node in states[len(rows)]:
            for lo, hi, target in nfa.moves[node]:
                targets_of.setdefault((lo, hi), set()).add(target)
        work += len(states[len(rows)]) + len(targets_of)
        if work > _SUBSET_WORK:
            return None
        events = sorted(
            [(lo, 1, (lo, hi)) for lo, hi in targets_of]
            + [(hi + 1, -1, (lo, hi)) for lo, hi in targets_of]
        )
        active: set[tuple[int, int]] = set()
        row: list[tuple[int, int, int]] = []
        at = 0
        while at < len(events):
            point = events[at][0]
            while at < len(events) and events[at][0] == point:
                _, change, span = events[at]
                if change > 0:
                    active.add(span)
                else:
                    active.discard(span)
                at += 1
            if not active:
                continue
            # Every range opened closes, so a non-empty active set has a next point.
            upto = events[at][0] - 1
            targets = frozenset().union(*(targets_of[span] for span in active))
            if targets not in closures:
                closures[targets] = _closure(nfa, targets, accept)
            closed = closures[targets]
            if closed not in index:
                if len(states) >= max_states:
                    return None
                index[closed] = len(states)
                states.append(closed)
            _extend(row, point, upto, index[closed])
        rows.append(tuple(row))
    return tuple(accept in state for state in states), tuple(rows)


def _minimised(table: DfaTable) -> DfaTable:
    """The smallest table accepting what `table` accepts (Hopcroft), numbered breadth first.

    States from which no string is accepted are left out. A table too large
    to minimise quickly comes back as it is.
    """
    accepting, rows = table
    bounds = sorted({0} | {bound for row in rows for lo, hi, _ in row for bound in (lo, hi + 1)})
    bounds = [bound for bound in bounds if bound <= MAX_CODE_POINT]
    count = len(rows)
    dead = count
    if (count + 1) * len(bounds) > _MINIMISED_CELLS:
        return table
    class_of = {bound: position for position, bound in enumerate(bounds)}
    # delta[s][c]: where code point class c leads from s; the dead state takes what no range does.
    delta = [[dead] * len(bounds) for _ in range(count + 1)]
    for state, row in enumerate(rows):
        for lo, hi, target in row:
            first = class_of[lo]
            last = class_of[hi + 1] if hi < MAX_CODE_POINT else len(bounds)
            for klass in range(first, last):
                delta[state][klass] = target
    inverse: list[dict[int, list[int]]] = [{} for _ in bounds]
    for state in range(count + 1):
        for klass, target in enumerate(delta[state]):
            inverse[klass].setdefault(target, []).append(state)

    block_of = [0 if state < count and accepting[state] else 1 for state in range(count + 1)]
    blocks: list[set[int]] = [set(), set()]
    for state, block in enumerate(block_of):
        blocks[block].add(state)
    if not blocks[0]:
        blocks[0], blocks[1] = blocks[1], blocks[0]
        block_of = [0] * (count + 1)
        blocks.pop()
    waiting = set(range(len(blocks)))
    while waiting:
        splitter = frozenset(blocks[min(waiting)])
        waiting.discard(min(waiting))
        for klass in range(len(bounds)):
            sources: set[int] = set()
            for target in splitter:
                sources.update(inverse[klass].get(target, ()))
            touched: dict[int, set[int]] = {}
            for source in sources:
                touched.setdefault(block_of[source], set()).add(source)
            for block in sorted(touched):
                part = touched[block]
                if len(part) == len(blocks[block]):
                    continue
                blocks[block] -= part
                split = len(blocks)
                blocks.append(part)
                for state in part:
                    block_of[state] = split
                if block in waiting or len(part) <= len(blocks[block]):
                    waiting.add(split)
                else:
                    waiting.add(block)

    numbers = {block_of[0]: 0}
    order = [block_of[0]]
    new_rows: list[tuple[tuple[int, int, int], ...]] = []
    while len(new_rows) < len(order):
        block = order[len(new_rows)]
        moves: list[tuple[int, int, int]] = []
        if block != block_of[dead]:
            for lo, hi, target in rows[min(blocks[block])]:
                if block_of[target] == block_of[dead]:
                    continue
                if block_of[target] not in numbers:
                    numbers[block_of[target]] = len(order)
                    order.append(block_of[target])
                _extend(moves, lo, hi, numbers[block_of[target]])
        new_rows.append(tuple(moves))
    new_accepting = tuple(
        block != block_of[dead] and accepting[min(blocks[block])] for block in order
    )
    return new_accepting, tuple(new_rows)


def compile_dfa(pattern: str, *, max_states: int = 4096) -> DfaTable | None:
    """The table of the strings in which `re.compile(pattern).search` finds a match.

    Accepts any str pattern. Returns None whenever the table could not be
    sure to agree with `re`: flags (inline or not), categories (`\\d`, `\\w`,
    `\\b`...), backreferences, lookarounds other than `(?!\\n)` right after a
    final `$`, `^` or `$` anywhere but at the pattern's start and end,
    conditionals, possessive repeats and atomic groups; and when the
    construction would pass `max_states` DFA states or `NFA_NODES` NFA nodes
    (counted repeats expanded). The same pattern always gives the same table.

    Raises `re.error` for a pattern `re` does not compile.
    """
    try:
        read = _read(pattern)
        nfa, accept = _nfa(read, NFA_NODES)
        table = _determinised(nfa, accept, max_states)
    except (_Unsupported, RecursionError):
        return None
    return None if table is None else _minimised(table)

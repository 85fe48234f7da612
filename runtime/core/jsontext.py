"""Strict parsing of one JSON document, with errors a person can act on.

msgspec does the parsing. It already refuses what JSON forbids (NaN,
Infinity, trailing commas, a byte order mark, invalid UTF-8, trailing
characters), but it keeps the last of duplicate keys without a word, so this
module adds that check.

Finding duplicates costs almost nothing on the common path. Re-encoding the
parsed value writes one colon per object member plus the colons inside
strings; the original text holds the same colons, plus one more for every
member that a later duplicate replaced, as long as no colon was written as the
escape `\\u003a`. So the colon counts differ exactly when a key was
duplicated. When they differ, when the escape occurs, or when the value nests
too deeply for msgspec to write it again, a slow exact pass over the text
finds the first duplicate and where it is.

With the `fast` extra installed (`runtime.core.native`), a native scan first
checks, in one pass over the bytes, everything this module adds to msgspec
(duplicate keys, numbers past a float, lone surrogates, nesting); when it
finds nothing, msgspec's parse alone gives the value. Whenever it is unsure,
the steps below run and explain, so the verdicts and messages are the same.

The parser's nesting limit is msgspec's: it counts each level of arrays and
objects against Python's recursion limit (1,000 by default, less the frames
of the calling code). Nothing that reads a parsed value afterwards recurses,
so every value the parser accepts gets a verdict.

A parsed value costs more memory than its text: an empty list is 56 bytes of
Python for the 3 of `[],`, a small object some 200. Judging a document must
stay within `MEMORY_PER_TEXT_BYTE` times its size (plus a constant), so a
document over `DENSE_FROM` bytes whose parsed form would cost more is
refused before it is parsed, in one line that says so. The cost is estimated
from the text in linear time, generously per kind of value (objects, arrays,
strings, floats, and the slot each value takes), so that the estimate is
never below what parsing takes; only documents made mostly of tiny arrays,
objects or strings come near the bound.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import msgspec

from .errors import MalformedJSON
from .native import native

_BOM = b"\xef\xbb\xbf"
_OFFSET = re.compile(r"\(byte (\d+)\)")
_ENCODER = msgspec.json.Encoder()
TOO_DEEP = "arrays and objects nest too deeply (the limit is about 1,000 levels)"
TOO_LARGE = "a number is too large to represent as a 64-bit float"
# A string (possessive, so that a long one costs no backtracking state) or a
# character of JSON's structure; numbers and literals are skipped over.
_TOKENS = re.compile(rb'"(?:[^"\\]++|\\.)*+"|[\[\]{}:,]')


NATIVE_DEPTH = 256
"""Documents nesting deeper take the Python path, whose limit is msgspec's (about 1,000 levels):
none of the contracts' documents nests this deep, and decoding into types recurses per level."""
DENSE_FROM = 1 << 20
"Documents up to this size are always parsed: their cost is within the constant."
MEMORY_PER_TEXT_BYTE = 19
"The most memory a parsed value may take per byte of its text (judging it takes a little more)."
# Generous costs in bytes of CPython 3.11 values as msgspec builds them, each
# measured with what it holds apart (a small dict's table, a list's items):
# an object, an array, a string of a few characters, a float, and the slot
# each value or key takes in its container. Besides, the text is held about
# four times over: read, joined, parsed from, and written again to check keys.
_OBJECT, _ARRAY, _STRING, _FLOAT, _SLOT, _TEXT = 240, 96, 64, 32, 8, 4
# A string, possessive: a long one costs no backtracking state.
_STRINGS = re.compile(rb'"(?:[^"\\]++|\\.)*+"')


def parse(data: bytes) -> Any:
    """Parse `data` as exactly one JSON document.

    Returns plain Python values (dict, list, str, int, float, bool, None).
    Raises `MalformedJSON` for anything that is not strict JSON, including
    duplicate keys within one object, and for a document over `DENSE_FROM`
    bytes whose parsed form would take more than `MEMORY_PER_TEXT_BYTE`
    times its size.
    """
    if len(data) > DENSE_FROM:
        _refuse_if_costly(data)
    elif (module := native()) is not None and module.scan(data, NATIVE_DEPTH):
        # The native scan found none of what msgspec lets through: its parse is the verdict.
        try:
            return msgspec.json.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            pass  # what the scan missed is found and explained below
    try:
        value = msgspec.json.decode(data)
    except RecursionError:
        raise MalformedJSON(TOO_DEEP) from None
    except msgspec.ValidationError:
        raise MalformedJSON(TOO_LARGE) from None
    except (msgspec.DecodeError, UnicodeDecodeError) as error:
        raise _diagnose(data, str(error)) from None
    try:
        if _may_hold_duplicates(data, value):
            pointer, key, at = _first_duplicate(data)
            if pointer is not None:
                message = f"duplicate key {json.dumps(key)} in one object"
                raise MalformedJSON(message, pointer, offset=at)
    except RecursionError:
        raise MalformedJSON(TOO_DEEP) from None
    return value


def parsed_cost(data: bytes) -> int:
    """About how many bytes of memory `data` takes once parsed, never less than it takes.

    Counted on the text between strings, so that what a string holds is
    counted once, as text, and never as structure. The text between strings
    is gathered in pieces of about a megabyte: memory stays flat.
    """
    tally = dict.fromkeys((b"{", b"[", b",", b":", b".", b"e", b"E", b"true", b"false"), 0)
    strings = 0
    between = bytearray()

    def count() -> None:
        for mark in tally:
            tally[mark] += between.count(mark)
        between.clear()

    start = 0
    for string in _STRINGS.finditer(data):
        between += data[start : string.start()]
        between += b" "  # keeps `tr` and `ue` of two pieces from making a `true`
        start = string.end()
        strings += 1
        if len(between) > _PIECE:
            count()
    between += data[start:]
    count()
    # Without strings, an `e` is in a number or in true/false.
    floats = tally[b"."] + tally[b"e"] + tally[b"E"] - tally[b"true"] - tally[b"false"]
    return (
        _OBJECT * tally[b"{"]
        + _ARRAY * tally[b"["]
        + _STRING * strings
        + _FLOAT * floats
        + _SLOT * (tally[b","] + tally[b":"] + 1)
        + _TEXT * len(data)
    )


_PIECE = 1 << 20


def _refuse_if_costly(data: bytes) -> None:
    limit = MEMORY_PER_TEXT_BYTE * len(data)
    # Counted first with the strings in: when that is within bounds, so is the rest.
    rough = (
        _OBJECT * data.count(b"{")
        + _ARRAY * data.count(b"[")
        + _STRING * data.count(b'"')
        + _FLOAT * (data.count(b".") + data.count(b"e") + data.count(b"E"))
        + _SLOT * (data.count(b",") + data.count(b":") + 1)
        + _TEXT * len(data)
    )
    if rough <= limit:
        return
    cost = parsed_cost(data)
    if cost > limit:
        raise MalformedJSON(
            f"holds too many small values to judge in bounded memory: parsed, its "
            f"{len(data):,} bytes would take about {cost:,} bytes, more than "
            f"{MEMORY_PER_TEXT_BYTE} times its size (the bound for documents over "
            f"{DENSE_FROM:,} bytes)"
        )


def _may_hold_duplicates(data: bytes, value: Any) -> bool:
    # A colon escaped as \u003a would upset the counts; only text with a
    # backslash can hold one, and a one-byte search finds that fast.
    if b"\\" in data and b"\\u003" in data:
        return True
    try:
        written = _ENCODER.encode(value)
    except RecursionError:
        # Writing recurses from one frame deeper than parsing did, so the
        # deepest values the parser accepts may not be written again.
        return True
    return data.count(b":") != written.count(b":")


def _first_duplicate(data: bytes) -> tuple[str | None, str, int]:
    """The pointer, key and offset of the first duplicated key in the text; None when there is none.

    `data` is well-formed JSON. One pass over its strings and punctuation,
    in a loop: any depth works, and memory holds the keys of the objects
    open at the moment, not a parsed copy.
    """
    # Per open container: the keys seen so far (None for an array) and the
    # token that leads to its current member, a key or an index.
    open_: list[tuple[set[str] | None, list[str | int]]] = []
    text, start = b"", 0
    for match in _TOKENS.finditer(data):
        token = match.group()
        if token[0] == 0x22:  # '"': a string, a key if a colon follows
            text, start = token, match.start()
        elif token == b":":
            key = json.loads(text) if b"\\" in text else text[1:-1].decode()
            seen, where = open_[-1]
            assert seen is not None
            where[0] = key
            if key in seen:
                return "".join(f"/{escape_token(str(w[0]))}" for _, w in open_), key, start
            seen.add(key)
        elif token == b",":
            seen, where = open_[-1]
            if seen is None:
                where[0] = int(where[0]) + 1
        elif token in (b"{", b"["):
            open_.append((set(), [""]) if token == b"{" else (None, [0]))
        else:
            open_.pop()
    return None, "", 0


def escape_token(token: str) -> str:
    """Escape one reference token of a JSON Pointer (RFC 6901)."""
    return token.replace("~", "~0").replace("/", "~1")


def pointer(path: Iterable[str | int]) -> str:
    """The JSON Pointer of a path of keys and indexes."""
    return "".join(f"/{escape_token(str(token))}" for token in path)


# Where values are in the text ---------------------------------------------------------------


@dataclass(frozen=True)
class Located:
    """Where the value a JSON Pointer names begins in a document's text, as byte offsets.

    `key` is where its key begins (the opening quote) when the value is an
    object's member. `exact` is False when the text holds no value at the
    pointer (a rule may name what is missing): `value` is then where the
    nearest value above it begins, and `key` is None.
    """

    value: int
    key: int | None
    exact: bool


class _Place:
    """A node of the tree of wanted pointers: where its value and key begin, once passed."""

    __slots__ = ("children", "key_at", "value_at", "wanted")

    def __init__(self) -> None:
        self.children: dict[str, _Place] = {}
        self.wanted = False
        self.value_at: int | None = None
        self.key_at: int | None = None


_NON_SPACE = re.compile(rb"[^ \t\r\n]")


def _value_start(data: bytes, after: int) -> int:
    found = _NON_SPACE.search(data, after)
    return len(data) if found is None else found.start()


def reference_tokens(pointer: str) -> list[str]:
    """The reference tokens of a JSON Pointer, unescaped; ValueError for one that is no pointer."""
    if not pointer:
        return []
    if not pointer.startswith("/"):
        raise ValueError(f"not a JSON Pointer: {pointer[:60]!r}")
    return [token.replace("~1", "/").replace("~0", "~") for token in pointer[1:].split("/")]


def locate(data: bytes, pointers: Iterable[str]) -> dict[str, Located]:
    """Where the value each JSON Pointer names begins in `data`, one JSON document's text.

    `data` should be well-formed JSON (as `parse` accepts it); in other
    text each pointer gets the nearest place passed before the text went
    wrong. One pass over the text, in a loop, finds every pointer at once: the
    pointers make a tree, and the pass follows it while the text's path is
    in it, so the work is linear in the text plus the pointers, at any
    depth, and it stops once every pointer is found. Raises ValueError for a
    string that is not a JSON Pointer.
    """
    root = _Place()
    paths: dict[str, list[_Place]] = {}
    remaining = 0
    for pointer in pointers:
        if pointer in paths:
            continue
        path = [root]
        for token in reference_tokens(pointer):
            path.append(path[-1].children.setdefault(token, _Place()))
        remaining += not path[-1].wanted
        path[-1].wanted = True
        paths[pointer] = path
    root.value_at = _value_start(data, 0)
    remaining -= root.wanted
    # Per open container: its place in the tree (None once the text's path
    # has left the tree), whether it is an object, and its current index.
    open_: list[list[Any]] = []
    current: _Place | None = root  # the place of the value that begins next
    expect_key = False
    key_start = key_end = 0
    for match in _TOKENS.finditer(data) if remaining else ():
        mark = data[match.start()]
        if mark == 0x22:  # '"': a key when an object expects one; a value needs nothing
            if expect_key:
                key_start, key_end = match.span()
            continue
        at: _Place | None = open_[-1][0] if open_ else None
        begun, current = current, None
        if mark == 0x3A:  # ':' ends a key: its value begins next
            expect_key = False
            if at is not None and at.children:
                quoted = data[key_start:key_end]
                key = json.loads(quoted) if b"\\" in quoted else quoted[1:-1].decode()
                current = at.children.get(key)
                if current is not None and current.key_at is None:
                    current.key_at = key_start
        elif mark == 0x2C:  # ',': the next key of an object, or the next item of an array
            frame = open_[-1]
            if frame[1]:
                expect_key = True
            else:
                frame[2] += 1
                if at is not None and at.children:
                    current = at.children.get(str(frame[2]))
        elif mark in (0x7B, 0x5B):  # '{' or '[': a container begins, at the place found before
            here = begun
            open_.append([here, mark == 0x7B, 0])
            expect_key = mark == 0x7B
            after = _value_start(data, match.end())
            first = data[after : after + 1]
            if mark == 0x5B and here is not None and here.children and first != b"]":
                current = here.children.get("0")  # an array's first item, if it has one
        else:  # '}' or ']'
            open_.pop()
            expect_key = False
        if current is not None and current.value_at is None:
            current.value_at = _value_start(data, match.end())
            remaining -= current.wanted
            if not remaining:
                break
    located = {}
    for pointer, path in paths.items():
        end = path[-1]
        if end.value_at is not None:
            located[pointer] = Located(end.value_at, end.key_at, True)
        else:
            above = next(place for place in reversed(path) if place.value_at is not None)
            located[pointer] = Located(above.value_at or 0, None, False)
    return located


# Bytes that begin no character in UTF-8: a character is its first byte.
_NOT_CONTINUATION = bytes(byte for byte in range(256) if not 0x80 <= byte < 0xC0)


def _characters(data: bytes, start: int, end: int) -> int:
    piece = data[start:end]
    return len(piece) - len(piece.translate(None, _NOT_CONTINUATION))


def positions(data: bytes, offsets: Iterable[int]) -> dict[int, tuple[int, int]]:
    """The line and column of each byte offset into `data`, both counted from 1.

    A line ends at each line feed. Columns count characters (Unicode code
    points; an escape such as `\\u00e9` is the six characters written), not
    bytes, as an editor counts them. An offset past the end of the text is
    the end. One pass over the text, up to the last offset, whatever their
    number: a 16 MB text on one line with a hundred offsets is read once.
    """
    found: dict[int, tuple[int, int]] = {}
    line, column, at = 1, 1, 0
    for offset in sorted(set(offsets)):
        end = min(max(offset, 0), len(data))
        breaks = data.count(b"\n", at, end)
        if breaks:
            line += breaks
            start = data.rfind(b"\n", at, end) + 1
            column = 1 + _characters(data, start, end)
        else:
            column += _characters(data, at, end)
        at = end
        found[offset] = (line, column)
    return found


def _diagnose(data: bytes, reason: str) -> MalformedJSON:
    if data.startswith(_BOM):
        return MalformedJSON(
            "starts with a UTF-8 byte order mark, which JSON text must not have", offset=0
        )
    if not data.strip(b" \t\r\n"):
        return MalformedJSON("empty document: expected a JSON value", offset=len(data))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        return MalformedJSON(
            f"not valid UTF-8: byte 0x{data[error.start]:02x} at offset {error.start} "
            f"({_place(data, error.start)})",
            offset=error.start,
        )
    found = _OFFSET.search(reason)
    if found:
        offset = int(found.group(1))
        if re.match(rb"-?(NaN|Infinity)", data[offset:]):
            message = f"NaN and Infinity are not JSON numbers ({_place(data, offset)})"
            return MalformedJSON(message, offset=offset)
        detail = _OFFSET.sub("", reason).removeprefix("JSON is malformed: ").strip()
        return MalformedJSON(f"malformed JSON: {detail} ({_place(data, offset)})", offset=offset)
    # msgspec gives no position here; the standard library's parser does.
    try:
        json.loads(text)
    except json.JSONDecodeError as error:
        return MalformedJSON(
            f"malformed JSON: {error.msg} (line {error.lineno}, column {error.colno})",
            offset=len(text[: error.pos].encode("utf-8")),
        )
    except RecursionError:
        # It parses from deeper frames than msgspec, which got to the end of
        # the text within its own limit: the text ends inside a value.
        return MalformedJSON(
            f"malformed JSON: the text ends inside a value ({_place(data, len(data))})",
            offset=len(data),
        )
    # The standard library accepts what msgspec rightly refuses: an escape
    # such as \ud800 that is half of a UTF-16 surrogate pair.
    return MalformedJSON("a \\u escape stands for half of a UTF-16 surrogate pair, not a character")


def _place(data: bytes, offset: int) -> str:
    line, column = positions(data, (offset,))[offset]
    return f"line {line}, column {column}"


def copy_json(value: Any, leaf: Callable[[Any], Any] | None = None) -> Any:
    """A deep copy of a JSON value (dicts, lists and scalars), with `leaf` applied to each scalar.

    Made in a loop, not by recursion: values nest as deeply as the parser allows.
    """
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(root, 0, value)]
    while stack:
        parent, slot, node = stack.pop()
        if isinstance(node, dict):
            copy: Any = {}
            stack += [(copy, key, child) for key, child in reversed(node.items())]
        elif isinstance(node, list):
            copy = [None] * len(node)
            stack += [(copy, index, child) for index, child in enumerate(node)]
        else:
            copy = node if leaf is None else leaf(node)
        parent[slot] = copy
    return root[0]

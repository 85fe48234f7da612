"""Checking the schema's string patterns on a typed value, after msgspec converted it.

The generated types carry each string's pattern as `Meta(extra_json_schema=
{"pattern": ...})`, not as msgspec's `pattern` constraint: msgspec would call
Python's `re` once per patterned string, which was most of the time `decode`
spent converting a plan. Instead, `patterns_hold` walks the converted value
along a *node* tree derived once per type from msgspec's own description of
it (`msgspec.inspect`), visiting only the fields that can hold a patterned
string, and matches each such string: with a DFA in native code when the
`fast` extra is installed (`runtime.core.dfa` compiles the pattern), with
`re` otherwise (and for a pattern no DFA is made for). The pattern is the one
msgspec would have checked, searched for as msgspec searched for it.

A node is a tuple, as the native walker reads it too:

- `(0, matcher)`: a `str` must match (other values pass);
- `(1, item)`: each item of a list or tuple;
- `(2, key, value)`: each key and value of a dict (None: not checked);
- `(3, fields)`: a value whose exact type is a key of `fields` (a dict of
  struct classes to their `(attribute, node)` pairs) has those attributes checked;
- `(4, nodes)`: every node applies.

A type with no patterned string anywhere has no node (None), and costs nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from typing import Any, TypeVar

import msgspec
import msgspec.inspect as mi

from .dfa import compile_dfa
from .native import native

__all__ = ["Node", "conforming", "pattern_check", "pattern_node", "patterns_hold"]

Node = tuple[Any, ...]
"See the module's docstring."
_T = TypeVar("_T")

_STR, _SEQUENCE, _MAP, _STRUCT, _ALL = range(5)
_BINNED, _LISTED, _SEARCHED, _CALLED = range(4)
"How a struct's field is checked without the extension (`_Compiler.field`)."


def pattern_node(target: Any) -> Node | None:
    """The node tree that checks the patterns of values of type `target`; None when it has none.

    `target` is any type msgspec converts into (a generated struct, a union, an
    annotated alias). Built once per type, for the native walker or the
    Python one, whichever runs now. A fixed-length tuple type holding
    patterned strings cannot be walked position by position: ValueError.
    """
    return _node_of(target, native() is not None)


@cache
def _node_of(target: Any, natively: bool) -> Node | None:
    fields: dict[type, tuple[tuple[str, Node], ...]] = {}
    return _Deriver(fields, natively).node(mi.type_info(target))


def patterns_hold(value: Any, target: Any) -> bool:
    """Whether every patterned string of `value`, a value of type `target`, matches its pattern.

    `value` is what msgspec converted into `target` (a struct, a list of
    them...). Any depth works: a value too deep for the native walk or the
    Python functions is walked again in a loop.
    """
    return pattern_check(target)(value)


def pattern_check(target: Any) -> Callable[[Any], bool]:
    """`patterns_hold` for values of `target`, as a function of the value: for a caller's cache.

    The function is the one for the walk that runs now (native or Python).
    """
    return _checker(target, native() is not None)


@cache
def _checker(target: Any, natively: bool) -> Callable[[Any], bool]:
    node = _node_of(target, natively)
    if node is None:
        return lambda value: True
    module = native()
    if natively and module is not None:
        check = module.check

        def checked(value: Any) -> bool:
            try:
                return bool(check(value, node))
            except RecursionError:
                return _walk(value, node)

        return checked
    return _Compiler().checker(node)


def conforming(value: Any, target: type[_T]) -> _T:
    """`msgspec.convert(value, target)` with the schema's patterns checked too.

    For code that converts into a generated type without `decode` (checking a
    name against `SkillName`, say). Raises `msgspec.ValidationError`, as
    msgspec does, when the value does not fit the type or a string does not
    match its pattern.
    """
    converted = msgspec.convert(value, target)
    if not patterns_hold(converted, target):
        raise msgspec.ValidationError("a string does not match the pattern its type requires")
    return converted


def _matcher(pattern: str, natively: bool) -> Any:
    """What matches `pattern` in a node: a native DFA where one is made, else a compiled `re`."""
    module = native()
    if natively and module is not None:
        table = compile_dfa(pattern)
        if table is not None:
            return module.Dfa(*table)
    return re.compile(pattern)


class _Deriver:
    """Turns msgspec's type information into nodes, sharing one `fields` dict for every struct.

    A struct class is walked only when some string below it has a pattern
    (see `struct`: a class met again while it is derived, in a recursive
    type, is taken to have one).
    """

    def __init__(self, fields: dict[type, tuple[tuple[str, Node], ...]], natively: bool) -> None:
        self.fields = fields
        self.natively = natively
        self.holds: dict[type, bool] = {}

    def node(self, info: mi.Type) -> Node | None:
        if isinstance(info, mi.Metadata):
            extra = info.extra_json_schema or {}
            pattern = extra.get("pattern")
            if isinstance(info.type, mi.StrType) and isinstance(pattern, str):
                return (_STR, _matcher(pattern, self.natively))
            return self.node(info.type)
        if isinstance(info, mi.ListType | mi.SetType | mi.FrozenSetType | mi.VarTupleType):
            item = self.node(info.item_type)
            return None if item is None else (_SEQUENCE, item)
        if isinstance(info, mi.TupleType):
            if any(self.node(item) is not None for item in info.item_types):
                raise ValueError("a fixed-length tuple of patterned strings cannot be checked")
            return None
        if isinstance(info, mi.DictType):
            key, value = self.node(info.key_type), self.node(info.value_type)
            return None if key is None and value is None else (_MAP, key, value)
        if isinstance(info, mi.StructType):
            return (_STRUCT, self.fields) if self.struct(info) else None
        if isinstance(info, mi.UnionType):
            members = [node for member in info.types if (node := self.node(member)) is not None]
            # Every struct member's node is the same lookup by class: one of them does.
            found = [node for node in members if node[0] != _STRUCT]
            if len(found) < len(members):
                found.append((_STRUCT, self.fields))
            if not found:
                return None
            return found[0] if len(found) == 1 else (_ALL, tuple(found))
        return None  # numbers, booleans, literals, Any...: no pattern

    def struct(self, info: mi.StructType) -> bool:
        """Whether a value of this struct class may hold patterned strings; fills `fields` if so.

        A class met again while its own fields are being derived (a recursive
        type) is taken to hold some. That is safe either way: the walker
        passes any value whose class `fields` does not name.
        """
        cls = info.cls
        if cls not in self.holds:
            self.holds[cls] = True
            walked = tuple(
                (field.name, node)
                for field in info.fields
                if (node := self.node(field.type)) is not None
            )
            self.holds[cls] = bool(walked)
            if walked:
                self.fields[cls] = walked
        return self.holds[cls]


Bins = dict[int, list[str]]
"Per batched pattern (by its index), the strings a walk found for it (see `_Compiler`)."
Check = Callable[[Any, Bins], bool]


class _Compiler:
    """Turns a node into Python functions, one per node: `patterns_hold` without the extension.

    A function per node, specialised to its kind, costs a call where the loop
    of `_walk` costs a dispatch on the node's kind. The struct lookup is one
    function for every class (they share one `fields` dict), filled once every
    class's functions exist, so a recursive type's functions call each other.
    Their recursion follows the value's depth: past Python's limit the caller
    walks with `_walk`.

    Strings in lists and maps are matched in batches: the walk only puts each
    in its pattern's bin, then each bin is matched in one call, its strings
    joined by a separator the pattern never matches (`_batched`). One `re`
    call per pattern instead of one per string: on a plan of twenty tools,
    eighty patterned strings share five patterns. A string met once per
    value (a field of the top struct) is matched at once: a bin would cost it
    more than it saves.
    """

    def __init__(self) -> None:
        # Per mode (False: met once, True: in a list or map), the struct lookup and its tables.
        self.structs: dict[bool, dict[type, tuple[tuple[str, int, Any], ...]]] = {}
        self.struct: dict[bool, Check] = {}
        self.batches: list[tuple[re.Pattern[str], re.Pattern[str], str]] = []
        self.bin_of: dict[str, int] = {}

    def checker(self, node: Node) -> Callable[[Any], bool]:
        """The whole check of a value: the walk, then each bin's match, in a loop past recursion."""
        walk = self.function(node, repeated=False)
        batches = self.batches

        def check(value: Any) -> bool:
            bins: Bins = {}
            try:
                if not walk(value, bins):
                    return False
            except RecursionError:
                return _walk(value, node)
            for index, found in bins.items():
                alone, joined, separator = batches[index]
                try:
                    text = separator.join(found)
                except TypeError:  # a list of a hand-made struct that holds more than strings
                    if any(isinstance(each, str) and not alone.search(each) for each in found):
                        return False
                    continue
                # A string holding the separator cannot match: it must not pass as two.
                if text.count(separator) != len(found) - 1 or not joined.fullmatch(text):
                    return False
            return True

        return check

    def function(self, node: Node, repeated: bool) -> Check:
        kind = node[0]
        if kind == _STR:
            return self.text_function(node[1], repeated)
        if kind == _SEQUENCE:
            item = self.function(node[1], repeated=True)

            def items(value: Any, bins: Bins) -> bool:
                if not isinstance(value, list | tuple):
                    return True
                for each in value:  # noqa: SIM110 (a loop: no generator per list)
                    if not item(each, bins):
                        return False
                return True

            return items
        if kind == _MAP:
            key = self.function(node[1], repeated=True) if node[1] is not None else None
            entry = self.function(node[2], repeated=True) if node[2] is not None else None

            def entries(value: Any, bins: Bins) -> bool:
                if not isinstance(value, dict):
                    return True
                if key is not None and not all(key(each, bins) for each in value):
                    return False
                return entry is None or all(entry(each, bins) for each in value.values())

            return entries
        if kind == _STRUCT:
            return self.struct_function(node[1], repeated)
        each = [self.function(sub, repeated) for sub in node[1]]
        return lambda value, bins: all(check(value, bins) for check in each)

    def text_function(self, pattern: re.Pattern[str], repeated: bool) -> Check:
        index = self.bin(pattern) if repeated else None
        if index is None:
            search = pattern.search

            def text(value: Any, bins: Bins) -> bool:
                return not isinstance(value, str) or search(value) is not None

            return text

        def binned(value: Any, bins: Bins) -> bool:
            if isinstance(value, str):
                bins.setdefault(index, []).append(value)
            return True

        return binned

    def struct_function(
        self, fields: dict[type, tuple[tuple[str, Node], ...]], repeated: bool
    ) -> Check:
        if repeated not in self.struct:
            tables: dict[type, tuple[tuple[str, int, Any], ...]] = {}
            checks = tables.get

            def struct(value: Any, bins: Bins) -> bool:
                found = checks(type(value))
                if found is None:
                    return True
                # The commonest fields are handled here rather than by a call each:
                # a patterned string (_BINNED, or _SEARCHED where met once) and a list
                # of them (_LISTED: put in its bin whole, no loop over its items).
                for name, kind, payload in found:
                    field = getattr(value, name)
                    if kind == _BINNED:
                        if isinstance(field, str):
                            bins.setdefault(payload, []).append(field)
                    elif kind == _LISTED:
                        if isinstance(field, list | tuple) and field:
                            bins.setdefault(payload, []).extend(field)
                    elif kind == _SEARCHED:
                        if isinstance(field, str) and payload(field) is None:
                            return False
                    elif not payload(field, bins):
                        return False
                return True

            self.structs[repeated] = tables
            self.struct[repeated] = struct
            for cls, walked in fields.items():
                tables[cls] = tuple(self.field(name, sub, repeated) for name, sub in walked)
        return self.struct[repeated]

    def field(self, name: str, node: Node, repeated: bool) -> tuple[str, int, Any]:
        """How a struct's field is checked: see `struct_function`."""
        kind = node[0]
        if kind == _SEQUENCE and node[1][0] == _STR:
            index = self.bin(node[1][1])
            if index is not None:
                return name, _LISTED, index
        if kind == _STR:
            index = self.bin(node[1]) if repeated else None
            if index is not None:
                return name, _BINNED, index
            return name, _SEARCHED, node[1].search
        return name, _CALLED, self.function(node, repeated)

    def bin(self, pattern: re.Pattern[str]) -> int | None:
        """The index of the pattern's bin; None when its strings cannot be matched in a batch."""
        batched = _batched(pattern.pattern)
        if batched is None:
            return None
        index = self.bin_of.setdefault(pattern.pattern, len(self.batches))
        if index == len(self.batches):
            self.batches.append((pattern, *batched))
        return index


_END = "$(?!\\n)"
"How the generated patterns end: `$` read as the end of the text, as the schema reads it."


@cache
def _batched(pattern: str) -> tuple[re.Pattern[str], str] | None:
    """A pattern matching strings of `pattern` joined by a separator, and the separator; or None.

    Only for `^BODY$(?!\\n)`, whose strings are exactly BODY's: the whole
    pattern and `^(?:BODY)$(?!\\n)` must compile to the same DFA table (same
    table, same language), which rules out a `^` or `$` that is not the whole
    pattern's (`^a|b$`). The separator is a character no string of the
    pattern holds (none of the DFA's transitions reads it): `\\n`, NUL or
    U+001F. So the joined text matches exactly when each string does, given
    that the caller counts the separators.
    """
    if not (pattern.startswith("^") and pattern.endswith(_END)):
        return None
    body = pattern[1 : -len(_END)]
    try:
        table = compile_dfa(pattern)
        if table is None or compile_dfa(f"^(?:{body}){_END}") != table:
            return None
    except re.error:
        return None
    ranges = [(lo, hi) for state in table[1] for lo, hi, _ in state]
    for separator in ("\n", "\x00", "\x1f"):
        code = ord(separator)
        if not any(lo <= code <= hi for lo, hi in ranges):
            sep = re.escape(separator)
            # Each string is matched in an atomic group that must reach the next separator
            # (or the end): once one string has matched, a later failure never backtracks
            # into it, so the joined text costs what its strings cost one by one. Without
            # it, `^a{0,20}a{0,20}$` took 22 s on six strings and a seventh that fails.
            one = f"(?>(?:{body})(?={sep}|\\Z))"
            return re.compile(f"{one}(?:{sep}{one})*"), separator
    return None


def _walk(value: Any, node: Node) -> bool:
    """The walk in a loop, for values too deep for the functions' recursion: any depth works."""
    pending: list[tuple[Any, Node]] = [(value, node)]
    while pending:
        value, node = pending.pop()
        kind = node[0]
        if kind == _STR:
            found = node[1]
            if isinstance(value, str) and not (
                found.search(value) is not None
                if isinstance(found, re.Pattern)
                else found.matches(value)
            ):
                return False
        elif kind == _SEQUENCE:
            if isinstance(value, list | tuple):
                item = node[1]
                pending += [(each, item) for each in value]
        elif kind == _MAP:
            if isinstance(value, dict):
                key, item = node[1], node[2]
                if key is not None:
                    pending += [(each, key) for each in value]
                if item is not None:
                    pending += [(each, item) for each in value.values()]
        elif kind == _STRUCT:
            walked = node[1].get(type(value))
            if walked is not None:
                pending += [(getattr(value, name), sub) for name, sub in walked]
        else:
            pending += [(value, sub) for sub in node[1]]
    return True

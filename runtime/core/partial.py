"""JSON read as it is written: the value of the longest complete prefix, and its violations.

A model writes a document a few characters at a time. `PartialJSON` is fed
those pieces and keeps, after each, the value of the longest prefix that is
complete: a string once its closing quote is read, a number once a
character after it is (`12` may still become `123`), `true`, `false` and
`null` once whole. A container appears as soon as it opens (`{}` or `[]`)
and grows in place; an object holds a key once its value is there by that
rule. `complete(path)` says whether the value at a path has been closed.

The parser is as strict as `jsontext.parse`, the project's strict parser,
and says so as early: a duplicate key, a number past a float's range, a
lone surrogate escape, an invalid escape, a control character in a string,
nesting past the strict parser's depth limit, or any other text that is not
JSON raises `MalformedJSON` at the `feed` that reads it, in one line that
gives the character offset (and the byte offset as `offset`).

It is a state machine over the text, never going back: every character is
read once, runs of plain string characters and of digits by a compiled
pattern, and a string's pieces are kept in a list and joined once it
closes. Time and memory are linear in the document's size, however it is
cut into pieces: one character at a time included (benchmarks/streaming.py
measures it).

`prefix_violations(contract, value)` judges a partial value by a contract,
leaving out what is still missing: see its docstring for the rule.
"""

from __future__ import annotations

import enum
import json
import re
import sys
from collections.abc import Callable, Iterator
from functools import cache
from itertools import islice
from typing import TYPE_CHECKING, Any, Final, NoReturn

from .contracts import AnyContract
from .errors import MAX_VIOLATIONS, MalformedJSON, Violations, printable
from .jsontext import TOO_DEEP, TOO_LARGE
from .jsontext import pointer as json_pointer
from .validation import contracts_of

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError as SchemaError

__all__ = ["MISSING", "PartialJSON", "prefix_violations"]


class _Missing(enum.Enum):
    MISSING = "MISSING"

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing.MISSING
"The value of a document of which nothing complete has been read yet."

Path = tuple[str | int, ...]

# The parser's states: what the next character may be.
_VALUE = 0  # a value (after `:`, after `,` in an array, or at the start)
_FIRST_ITEM = 1  # a value or `]` (just after `[`)
_AFTER = 2  # `,` or the closing bracket, after a member
_KEY = 3  # a key's opening quote (after `,` in an object)
_FIRST_KEY = 4  # a key's opening quote or `}` (just after `{`)
_COLON = 5
_STRING = 6  # inside a string
_ESCAPE = 7  # inside a string's escape
_NUMBER = 8
_LITERAL = 9  # inside true, false or null
_END = 10  # after the document: only whitespace

# A run of characters that stand for themselves in a string: anything but the
# quote, the backslash, control characters, and lone surrogates (which a str
# can hold and UTF-8 cannot).
_PLAIN = re.compile(r'[^"\\\x00-\x1f\ud800-\udfff]*')
_SPACE = re.compile(r"[ \t\n\r]*")
_SPACES = frozenset(" \t\n\r")
# A run of characters a number may hold; the steps below judge their order.
_NUMBER_RUN = re.compile(r"[-+.0-9eE]*")
_DIGITS = "0123456789"
_HEX = frozenset("0123456789abcdefABCDEF")
_SIMPLE_ESCAPES = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}
_LITERALS: dict[str, tuple[str, Any]] = {
    "t": ("true", True),
    "f": ("false", False),
    "n": ("null", None),
}


def _number_steps() -> list[dict[str, int]]:
    """JSON's number grammar as steps between states, one character at a time.

    States: 0 start, 1 after `-`, 2 after a leading `0`, 3 in the integer's
    digits, 4 after `.`, 5 in the fraction's digits, 6 after `e`, 7 after
    the exponent's sign, 8 in the exponent's digits.
    """
    digits = dict.fromkeys(_DIGITS, 0)
    nonzero = dict.fromkeys(_DIGITS[1:], 3)
    exponent = {"e": 6, "E": 6}

    def to(state: int) -> dict[str, int]:
        return dict.fromkeys(digits, state)

    return [
        {"-": 1, "0": 2, **nonzero},
        {"0": 2, **nonzero},
        {".": 4, **exponent},
        {**to(3), ".": 4, **exponent},
        to(5),
        {**to(5), **exponent},
        {"+": 7, "-": 7, **to(8)},
        to(8),
        to(8),
    ]


_NUMBER_STEPS = _number_steps()
_WHOLE_NUMBER = frozenset((2, 3, 5, 8))  # states where a number may end
_INTEGER = frozenset((2, 3))


def _utf8_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _nesting_limit() -> int:
    """How deep the strict parser would let arrays and objects nest, called from here.

    msgspec counts each level against Python's recursion limit, less the
    frames of the calling code (see `jsontext`): the same count, taken when
    the parser is made, keeps what this parser accepts within what `parse`
    of the whole text accepts from the same place.
    """
    frames = 0
    frame = sys._getframe()
    while frame is not None:
        frames += 1
        frame = frame.f_back  # type: ignore[assignment]
    return max(sys.getrecursionlimit() - frames, 1)


class PartialJSON:
    """An incremental, strict parser of one JSON document fed as pieces of text.

    `feed(text)` reads the next piece; `value` is the value of the longest
    complete prefix read so far (`MISSING` before there is one);
    `complete(path)` says whether the value at a path is closed; `finish()`
    returns the whole document once the text has ended. Values are the ones
    `msgspec.json.decode` gives: dict, list, str, int, float, bool, None.

    `value` is the parser's own, growing in place as pieces are fed: copy
    it (`jsontext.copy_json`) to keep a partial value as it was.
    """

    def __init__(self) -> None:
        self._value: Any = MISSING
        self._state = _VALUE
        # The containers open, outermost first, and each one's current key (None for an array).
        self._stack: list[Any] = []
        self._keys: list[str | None] = []
        self._pieces: list[str] = []  # of the string or number being read
        self._is_key = False
        self._started = 0  # character offset where the current string or number began
        self._started_byte: int | None = None
        self._escape = ""  # the escape being read, from its backslash
        self._number = 0  # the state of the number being read (see _number_steps)
        self._word = ""  # the literal being read, and how much of it has been
        self._word_value: Any = None
        self._matched = 0
        self._characters = 0  # before the current piece
        self._bytes = 0
        self._failed: MalformedJSON | None = None
        self._changed = False
        self._limit = _nesting_limit()

    @property
    def value(self) -> Any:
        """The value of the longest complete prefix read so far, or `MISSING`."""
        return self._value

    def feed(self, text: str) -> bool:
        """Read the next piece of the document's text (any length, empty included).

        Returns True when `value` grew or one of its arrays or objects
        closed (so `complete` may now answer differently), else False. Raises
        `MalformedJSON` as soon as the text read cannot begin one JSON
        document, and again on every later call.
        """
        n = len(text)
        if self._state == _STRING and _PLAIN.fullmatch(text) and self._failed is None:
            # Within a string, as most of a document is: one more piece of it.
            self._pieces.append(text)
            self._characters += n
            self._bytes += n if text.isascii() else len(text.encode("utf-8"))
            return False
        if self._failed is not None:
            raise self._failed
        self._changed = False
        stack = self._stack
        state = self._state
        i = 0
        while i < n:
            if state == _STRING:
                j = _PLAIN.match(text, i).end()  # type: ignore[union-attr]
                if j == n:
                    self._pieces.append(text[i:])
                    break
                c = text[j]
                if c == '"':
                    pieces = self._pieces
                    if pieces:
                        pieces.append(text[i:j])
                        string = "".join(pieces)
                        self._pieces = []
                    else:
                        string = text[i:j]
                    i = j + 1
                    if self._is_key:
                        if string in stack[-1]:
                            self._duplicate(string, text)
                        self._keys[-1] = string
                        state = _COLON
                    else:
                        state = self._put(string)
                elif c == "\\":
                    if j > i:
                        self._pieces.append(text[i:j])
                    self._escape = "\\"
                    state = _ESCAPE
                    i = j + 1
                elif c < " ":
                    self._fail(
                        f"control character U+{ord(c):04X} in a string, not escaped", text, j
                    )
                else:
                    self._fail(f"lone surrogate U+{ord(c):04X} in a string", text, j)
                continue
            c = text[i]
            if state == _AFTER:
                if c == ",":
                    state = _KEY if type(stack[-1]) is dict else _VALUE
                    i += 1
                elif c == "}" if type(stack[-1]) is dict else c == "]":
                    state = self._close()
                    i += 1
                elif c in _SPACES:
                    i = _SPACE.match(text, i).end()  # type: ignore[union-attr]
                else:
                    closing = "}" if type(stack[-1]) is dict else "]"
                    self._unexpected(f'"," or "{closing}"', text, i)
            elif state == _COLON:
                if c == ":":
                    state = _VALUE
                    i += 1
                elif c in _SPACES:
                    i = _SPACE.match(text, i).end()  # type: ignore[union-attr]
                else:
                    self._unexpected('":"', text, i)
            elif state in (_KEY, _FIRST_KEY):
                if c == '"':
                    self._is_key = True
                    self._started = self._characters + i
                    self._started_byte = None
                    state = _STRING
                    i += 1
                elif c == "}" and state == _FIRST_KEY:
                    state = self._close()
                    i += 1
                elif c in _SPACES:
                    i = _SPACE.match(text, i).end()  # type: ignore[union-attr]
                else:
                    self._unexpected("a key" if state == _KEY else 'a key or "}"', text, i)
            elif state in (_VALUE, _FIRST_ITEM):
                if c == '"':
                    self._is_key = False
                    state = _STRING
                    i += 1
                elif c == "{" or c == "[":
                    if len(stack) >= self._limit:
                        self._fail(TOO_DEEP, text, i)
                    container: Any = {} if c == "{" else []
                    self._put(container)
                    stack.append(container)
                    self._keys.append(None)
                    state = _FIRST_KEY if c == "{" else _FIRST_ITEM
                    i += 1
                elif c in "-0123456789":
                    self._started = self._characters + i
                    self._number = 0
                    state = _NUMBER
                elif c in _LITERALS:
                    self._word, self._word_value = _LITERALS[c]
                    self._matched = 0
                    state = _LITERAL
                elif c == "]" and state == _FIRST_ITEM:
                    state = self._close()
                    i += 1
                elif c in _SPACES:
                    i = _SPACE.match(text, i).end()  # type: ignore[union-attr]
                else:
                    self._unexpected("a value", text, i)
            elif state == _ESCAPE:
                i = self._read_escape(text, i)
                if not self._escape:
                    state = _STRING
            elif state == _NUMBER:
                j = _NUMBER_RUN.match(text, i).end()  # type: ignore[union-attr]
                number = self._number
                for at in range(i, j):
                    step = _NUMBER_STEPS[number].get(text[at])
                    if step is None:
                        self._unexpected("a digit" if number in (1, 4, 6, 7) else "", text, at)
                    number = step
                self._number = number
                self._pieces.append(text[i:j])
                i = j
                if j < n:  # a character that ends the number: read next, in the state after it
                    state = self._end_number(text, j)
            elif state == _LITERAL:
                word, matched = self._word, self._matched
                wanted = word[matched:]
                piece = text[i : i + len(wanted)]
                if not wanted.startswith(piece):
                    wrong = next(
                        k for k, (a, b) in enumerate(zip(piece, wanted, strict=False)) if a != b
                    )
                    self._unexpected(f'"{word}"', text, i + wrong)
                self._matched = matched + len(piece)
                i += len(piece)
                if self._matched == len(word):
                    state = self._put(self._word_value)
            elif c in _SPACES:  # _END
                i = _SPACE.match(text, i).end()  # type: ignore[union-attr]
            else:
                self._unexpected("the end of the text after the document", text, i)
        self._state = state
        if self._is_key and state in (_STRING, _ESCAPE) and self._started >= self._characters:
            # A key still open when the piece ends: where it began, in bytes, for a
            # duplicate's message, while the piece it began in is at hand.
            self._started_byte = self._bytes + _utf8_size(text[: self._started - self._characters])
        self._characters += n
        self._bytes += n if text.isascii() else _utf8_size(text)
        return self._changed

    def complete(self, path: Path = ()) -> bool:
        """Whether the value at `path`, keys and indexes from the root, is there and closed.

        A scalar is complete once it is there; an array or object once its
        closing bracket is read. False for a path that is not there yet.
        """
        node = self._value
        if node is MISSING:
            return False
        for step in path:
            if type(node) is dict:
                if not isinstance(step, str) or step not in node:
                    return False
                node = node[step]
            elif type(node) is list:
                if type(step) is not int or not 0 <= step < len(node):
                    return False
                node = node[step]
            else:
                return False
        depth = len(path)
        return not (depth < len(self._stack) and self._stack[depth] is node)

    def finish(self) -> Any:
        """The whole document, once its text has all been fed.

        Raises `MalformedJSON` when the text is not exactly one complete
        JSON value (whitespace around it allowed).
        """
        if self._failed is not None:
            raise self._failed
        if self._state == _NUMBER and not self._stack:
            self._state = self._end_number("", 0)
        if self._state == _END:
            return self._value
        if self._value is MISSING and self._state == _VALUE:
            self._fail("empty document: expected a JSON value", "", 0)
        self._fail("the text ends inside a value", "", 0)

    # Reading ----------------------------------------------------------------------------

    def _put(self, value: Any) -> int:
        """Place a value that is complete, or a container just opened; the state after it."""
        self._changed = True
        stack = self._stack
        if not stack:
            self._value = value
            return _END
        top = stack[-1]
        if type(top) is list:
            top.append(value)
        else:
            top[self._keys[-1]] = value
        return _AFTER

    def _close(self) -> int:
        self._stack.pop()
        self._keys.pop()
        self._changed = True
        return _AFTER if self._stack else _END

    def _end_number(self, text: str, at: int) -> int:
        """Place the number read, finished by the character at `at`; the state after it."""
        if self._number not in _WHOLE_NUMBER:
            self._unexpected("a digit", text, at)
        written = "".join(self._pieces)
        self._pieces = []
        if self._number in _INTEGER:
            # msgspec refuses an integer written longer than Python's limit on digits
            # (4,300 by default), its sign counted; int() counts digits alone.
            limit = sys.get_int_max_str_digits()
            if limit and len(written) > limit:
                self._fail(TOO_LARGE, text, at, self._started)
            number: int | float = int(written)
        else:
            number = float(written)
            if number in (float("inf"), float("-inf")):
                self._fail(TOO_LARGE, text, at, self._started)
        return self._put(number)

    def _read_escape(self, text: str, i: int) -> int:
        """Read one character of an escape; where to read next. Clears `_escape` once it is done."""
        c = text[i]
        escape = self._escape + c
        size = len(escape)
        if size == 2:
            simple = _SIMPLE_ESCAPES.get(c)
            if simple is not None:
                self._pieces.append(simple)
                self._escape = ""
                return i + 1
            if c != "u":
                self._fail(f"invalid escape {printable(escape)} in a string", text, i)
        elif size <= 6 or 8 < size <= 12:
            if c not in _HEX:
                self._fail("invalid \\u escape: expected 4 hexadecimal digits", text, i)
            if size == 6:
                code = int(escape[2:], 16)
                if 0xDC00 <= code < 0xE000:
                    self._fail(_lone(code), text, i)
                if not 0xD800 <= code < 0xDC00:  # else half of a pair: the other half follows
                    self._pieces.append(chr(code))
                    escape = ""
            elif size == 12:
                high, low = int(escape[2:6], 16), int(escape[8:], 16)
                if not 0xDC00 <= low < 0xE000:
                    self._fail(_lone(high), text, i)
                self._pieces.append(chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)))
                escape = ""
        elif c != ("\\" if size == 7 else "u"):
            self._fail(_lone(int(escape[2:6], 16)), text, i)
        self._escape = escape
        return i + 1

    # Failing ----------------------------------------------------------------------------

    def _fail(self, problem: str, text: str, at: int, start: int | None = None) -> NoReturn:
        """Raise, and keep raising, MalformedJSON for `problem` at `text[at]` (or at `start`)."""
        character = self._characters + at if start is None else start
        byte = None
        if start is None:
            byte = self._bytes + _utf8_size(text[:at])
        elif start >= self._characters:
            byte = self._bytes + _utf8_size(text[: start - self._characters])
        elif self._bytes == self._characters:  # everything before this piece was ASCII
            byte = start
        self._failed = MalformedJSON(
            f"malformed JSON: {problem} (character {character})", offset=byte
        )
        raise self._failed

    def _unexpected(self, wanted: str, text: str, at: int) -> NoReturn:
        found = json.dumps(text[at]) if at < len(text) else "the end of the text"
        self._fail(f"expected {wanted}, got {found}" if wanted else f"unexpected {found}", text, at)

    def _duplicate(self, key: str, text: str) -> NoReturn:
        where: list[str | int] = [
            member if member is not None else len(container) - 1
            for container, member in zip(self._stack[:-1], self._keys[:-1], strict=True)
        ]
        start = self._started
        byte = self._started_byte
        if start >= self._characters:
            byte = self._bytes + _utf8_size(text[: start - self._characters])
        self._failed = MalformedJSON(
            f"duplicate key {json.dumps(key)} in one object (character {start})",
            json_pointer([*where, key]),
            offset=byte,
        )
        raise self._failed


def _lone(code: int) -> str:
    return f"the \\u escape {code:04x} is half of a UTF-16 surrogate pair, not a character"


# Judging a partial value --------------------------------------------------------------


def prefix_violations(contract: AnyContract, value: Any) -> Violations:
    """The violations of `contract` by `value`, a partial value, leaving out what is still missing.

    `value` is what `PartialJSON.value` holds at some point (`MISSING`
    included, which has none); `contract` is any contract (a handle, a
    bundled contract's name, or a handle of `load_contracts`). The rule:
    whatever is in `value` must already be right, and whatever may still
    come is not asked for. A complete document the contract accepts never
    has a prefix with violations here, so a violation means the document
    will be refused however it goes on. Judged by the contract's schema with:

    - `required`, `dependentRequired`, `dependentSchemas` (`dependencies`
      in older drafts), `minItems`, `minProperties` and `contains` (with
      `minContains` and `maxContains`) not checked: more members may come;
    - `const` and `enum` not checked on an array or object (it may still
      grow into the value), only on scalars, which are complete;
    - `not` not checked: a value may grow out of what it must not be;
    - `oneOf` holding when any branch holds (the others may fail later);
    - `if`/`then`/`else` holding when `if` and `then` hold or `else` holds;
    - `uniqueItems` leaving out an array's last item when it is an array or
      object (it may still grow to differ from an earlier one);
    - the rules of the contract's family beyond the schema not run: they
      judge whole documents.

    Every other keyword is judged as `violations` judges it: strings and
    numbers in a partial value are complete, and objects and arrays only
    grow. One call costs what `violations` costs on `value`. Raises
    `UnknownContractError` for an unknown name, TypeError for what is not a contract.
    """
    contracts, name = contracts_of(contract)
    if value is MISSING:
        contracts.require(name)
        return Violations()
    return contracts.schema_violations(name, value, relaxed=_relaxed())


@cache
def _relaxed() -> tuple[tuple[str, Callable[[Any], Any]], ...]:
    """The keywords `prefix_violations` judges otherwise, for `ContractSet.schema_violations`."""
    from jsonschema.exceptions import ValidationError

    def unchecked(_own: Any) -> Any:
        def keyword(validator: Any, expected: Any, instance: Any, schema: Any) -> Iterator[Any]:
            return iter(())

        return keyword

    def on_scalars(own: Any) -> Any:
        def keyword(validator: Any, expected: Any, instance: Any, schema: Any) -> Iterator[Any]:
            if isinstance(instance, dict | list):
                return iter(())
            result: Iterator[Any] = own(validator, expected, instance, schema)
            return result

        return keyword

    def any_branch(_own: Any) -> Any:
        def keyword(validator: Any, branches: Any, instance: Any, schema: Any) -> Iterator[Any]:
            result: Iterator[Any] = validator.VALIDATORS["anyOf"](
                validator, branches, instance, schema
            )
            return result

        return keyword

    def then_or_else(_own: Any) -> Any:
        def keyword(validator: Any, condition: Any, instance: Any, schema: Any) -> Iterator[Any]:
            def errors(branch: str) -> list[SchemaError]:
                found = validator.descend(instance, schema.get(branch, True), schema_path=branch)
                return list(islice(found, MAX_VIOLATIONS + 1))

            held = validator.evolve(schema=condition).is_valid(instance)
            then = errors("then") if held else None
            if then == []:
                return
            otherwise = errors("else")
            if not otherwise:
                return
            if then:
                yield ValidationError("neither then nor else holds", context=then + otherwise)
            else:
                yield from otherwise

        return keyword

    def unique_but_growing(own: Any) -> Any:
        def keyword(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[Any]:
            if isinstance(instance, list) and instance and isinstance(instance[-1], dict | list):
                instance = instance[:-1]
            result: Iterator[Any] = own(validator, unique, instance, schema)
            return result

        return keyword

    ignored = (
        "required",
        "dependentRequired",
        "dependentSchemas",
        "dependencies",
        "minItems",
        "minProperties",
        "contains",
        "not",
    )
    return (
        *((name, unchecked) for name in ignored),
        ("const", on_scalars),
        ("enum", on_scalars),
        ("oneOf", any_branch),
        ("if", then_or_else),
        ("uniqueItems", unique_but_growing),
    )

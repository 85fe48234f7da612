"""Plain text: telling markup and control characters from prose, and removing them.

Text fields of the contracts are plain text, but they reach web front ends,
where a `<script>` in a choice's label would run. Markup is recognized and
removed by ammonia, a maintained HTML sanitiser (through its Python binding
`nh3`), never by hand-written patterns: those both miss attacks and mangle
prose.

A text holds markup when reading it as HTML gives anything but text: an
element, a comment, a doctype. Prose with `=`, `&`, quotes, emoji, or a `<`
that opens no tag (`HP < 10`, `<3`) holds none and is never changed. As in
HTML, a `<` directly followed by a letter, `/`, `!` or `?` opens markup, so
`a<b` is markup (a browser shows `a`) and so is `press <Enter>`.

Control characters (C0 and C1, but tab, line feed and carriage return) are
not text either: they move terminals' cursors and colour their output.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from functools import cache
from typing import Any

import nh3

from .contracts import AnyContract, contract_name, contract_schema

__all__ = [
    "control_characters",
    "free_texts",
    "given_text",
    "has_markup",
    "neutralize",
    "one_line",
    "without_controls",
]

# Each round removes one layer of markup (and of references spelling markup);
# real texts need one or two. Deeper nesting than this is escaped instead.
_ROUNDS = 16


# In HTML a `<` opens markup only before a letter, `/`, `!` or `?` (the
# tokenizer's tag open state); every other `<` is text. A text without such a
# pair needs no parsing: character references alone only ever make text.
_MAY_OPEN_MARKUP = re.compile(r"<[A-Za-z/!?]")
_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def one_line(text: str, most: int | None = None) -> str:
    """`text` on one line, its whitespace runs as single spaces, cut at a word to `most` characters.

    For a value quoted in a prompt: a newline in it cannot open a section of
    its own there. A word longer than `most` is cut where `most` falls.
    """
    text = " ".join(text.split())
    if most is None or len(text) <= most:
        return text
    cut = text[: most + 1].rsplit(" ", 1)[0]
    return cut if cut and len(cut) <= most else text[:most]


def given_text(text: str, what: str, most: int) -> str:
    """`text` trimmed, as the `what` a command or an agent is given (`the objective`).

    Raises ValueError, saying which, when it is empty once trimmed or longer
    than `most` characters (the contract's bound).
    """
    given = text.strip()
    if not given:
        raise ValueError(f"{what} is empty")
    if len(given) > most:
        raise ValueError(f"{what} is {len(given)} characters long; at most {most} allowed")
    return given


def has_markup(text: str) -> bool:
    """Whether `text`, read as HTML, holds anything but text."""
    if not _MAY_OPEN_MARKUP.search(text):
        return False
    # The same text with every `<` escaped holds no markup at all; both are read
    # by the same parser, so they differ exactly when some `<` opened markup.
    return _clean(text) != _clean(text.replace("<", "&lt;"))


def neutralize(text: str) -> str:
    """`text` with its markup removed: what a browser would show of it, as plain text.

    Tags and comments are dropped and the contents of `script` and `style`
    with them; the text between tags is kept. Where the text holds markup, its
    character references are read as HTML reads them (`&amp;` becomes `&`),
    and the result is cleaned again until no markup is left, so a reference
    that spells a tag cannot survive as one (`<b>&lt;script&gt;...</b>` loses
    the spelled tag too). Text without markup is returned unchanged, byte for
    byte; markup nested deeper than any real text is escaped instead.
    """
    for _ in range(_ROUNDS):
        if not has_markup(text):
            return text
        # The sanitiser writes HTML: &amp;, &lt;, &gt; and &nbsp; are its only escapes.
        text = html.unescape(_clean(text))
    return text if not has_markup(text) else nh3.clean_text(text)


def _clean(fragment: str) -> str:
    """`fragment` as HTML with every tag and comment removed, as the sanitiser writes it."""
    try:
        return nh3.clean(fragment, tags=set())
    except UnicodeEncodeError:
        # A lone surrogate, which no HTML parser takes: read it as U+FFFD, as they do.
        fixed = fragment.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return nh3.clean(fixed, tags=set())


def control_characters(text: str) -> list[str]:
    """The control characters in `text` (tab, line feed and carriage return are text), in order."""
    return _CONTROLS.findall(text)


def without_controls(text: str) -> str:
    """`text` without its control characters; tab, line feed and carriage return stay."""
    return _CONTROLS.sub("", text)


@cache
def _schema(contract: AnyContract) -> Any:
    """`contract`'s schema, parsed once: it is only read here."""
    return contract_schema(contract)


def free_texts(contract: AnyContract, value: Any) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Each string of `value` that the schema leaves free, with its path, in document order.

    Free means no enum, const or pattern constrains it (those the schema
    judges alone); strings in fields the schema does not know are free too.
    """
    contract_name(contract)  # a TypeError for what is not a contract
    schema = _schema(contract)
    definitions = schema.get("$defs", {})
    # A loop, not recursion: documents nest as deeply as the parser allows. Each
    # node's path is a link to its parent's, spelt out only for the strings
    # yielded: copying paths as the walk goes down would cost depth squared.
    stack: list[tuple[_Path, Any, Any]] = [(None, value, schema)]
    while stack:
        path, node, schema = stack.pop()
        while isinstance(schema, dict) and "$ref" in schema:
            target = definitions[schema["$ref"].removeprefix("#/$defs/")]
            schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        if not isinstance(schema, dict):
            schema = {}
        if isinstance(node, str):
            if not {"enum", "const", "pattern"} & set(schema):
                yield _spelt(path), node
        elif isinstance(node, dict):
            known = schema.get("properties", {})
            others = schema.get("additionalProperties")
            stack += [
                ((path, key), child, known.get(key, others))
                for key, child in reversed(node.items())
            ]
        elif isinstance(node, list):
            items = schema.get("items")
            stack += [((path, index), node[index], items) for index in range(len(node) - 1, -1, -1)]


_Path = tuple[Any, str | int] | None
"A path as a chain of links: None for the root, else (the parent's path, the key or index)."


def _spelt(path: _Path) -> tuple[str | int, ...]:
    tokens: list[str | int] = []
    while path is not None:
        path, token = path
        tokens.append(token)
    return tuple(reversed(tokens))

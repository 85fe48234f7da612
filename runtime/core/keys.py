"""Keys from words: what people write, as the snake_case ids the contracts use.

A topic of frozen plans, a choice id, a faction or a door named in a player's
input all become keys the same way, so the same words always give the same
key wherever they are met.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["snake_case"]

_WORD = re.compile(r"[a-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def snake_case(text: str, max_length: int = 64) -> str:
    """`text` as snake_case ASCII words, accents folded, at most `max_length` characters.

    `"Bribe the Guard!"` gives `bribe_the_guard`, `"Éclair à minuit"` gives
    `eclair_a_minuit`, `"AIGenerated"` gives `ai_generated`. Words are never
    cut: whole words that do not fit are left off. The result may be empty
    (a text without Latin letters or digits) or start with a digit; callers
    that need a key check both.
    """
    words_apart = _CAMEL.sub(" ", text)  # "PickLock" and "AIGenerated" are two words each
    folded = unicodedata.normalize("NFKD", words_apart).encode("ascii", "ignore").decode().lower()
    words: list[str] = []
    length = -1
    for word in _WORD.findall(folded):
        if length + 1 + len(word) > max_length:
            break
        words.append(word)
        length += 1 + len(word)
    return "_".join(words)

"""How long a prompt is for the packaged model, written into its snapshot so growth shows in review.

A prompt snapshot holds the prompt, then one last line such as
`<!-- 1234 tokens under gemma3-270m -->`: the number of tokens the packaged
model's tokenizer (llama.cpp's, read from its GGUF file without the weights)
makes of the prompt's text, not counting the start-of-text token.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import llama_cpp
from packaged_model import model_file

from plancontracts.runtime.model.resolution import PACKAGED_MODEL


@cache
def _tokenizer() -> Any:
    path = model_file()
    # The vocabulary alone: tokenizing needs no weights, and loads in a second.
    return llama_cpp.Llama(str(path), vocab_only=True, verbose=False)


def token_count(text: str) -> int:
    """The number of tokens the packaged model reads `text` as, without the start-of-text token."""
    return len(_tokenizer().tokenize(text.encode("utf-8"), add_bos=False, special=False))


def with_token_count(prompt: str) -> str:
    """`prompt` as its snapshot holds it: the prompt, then a line giving its length in tokens."""
    return f"{prompt}\n<!-- {token_count(prompt)} tokens under {PACKAGED_MODEL} -->\n"

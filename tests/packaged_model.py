"""The packaged small model's file, found once: before the fast tier hides the model, too.

Tests reach the model through the `packaged_model` fixture (conftest.py), which
loads it once per test session; this file is for what needs the file itself:
a server started on it, and the prompt snapshots' tokenizer. The file is the
one plancontracts' pytest plugin finds for `prompt_snapshot`, from the same
cache: found here before the fast tier hides the package, the plugin's token
counts keep working there.
"""

from __future__ import annotations

from plancontracts.pytest_plugin import packaged_model_file as model_file

__all__ = ["model_file"]

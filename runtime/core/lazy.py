"""Names a module exports but imports only when first used, so that importing it stays light.

    _EXPORTS = {"LocalModel": "local"}             # a name and its module, relative to this one
    _found, __dir__ = lazy_names(__name__, _EXPORTS)
    if not TYPE_CHECKING:
        __getattr__ = _found

Assigned under `if not TYPE_CHECKING`, since a type checker that saw a module
`__getattr__` would type every other name, a user's typo included, as Any
instead of refusing it; the module imports the names for type checkers itself.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(
    module: str, names: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module `__getattr__` and `__dir__` for `names`: each public name and its module.

    `module` is the importing module's `__name__`, and the modules in `names`
    are relative to it. The `__getattr__` imports a name on first use and
    keeps it in the module, so later lookups find it there; it raises
    AttributeError for any name not in `names`. The `__dir__` lists the
    module's names and these, imported or not.
    """
    namespace = sys.modules[module].__dict__

    def found(name: str) -> Any:
        try:
            where = names[name]
        except KeyError:
            raise AttributeError(f"module {module!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(f".{where}", module), name)
        namespace[name] = value
        return value

    def listed() -> list[str]:
        return sorted({*namespace, *names})

    return found, listed

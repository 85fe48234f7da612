"""The optional native fast path (the `fast` extra), or None where it is not installed.

`plancontracts_fast` is a small C extension built from this repository's
`native/` folder. It makes `decode` faster and changes nothing else: every
step it takes is one the Python code takes too, and wherever it is unsure
(or refuses), the Python code runs and gives the verdict and the message.
So nothing depends on whether it is installed, and `PLANCONTRACTS_NATIVE=0`
(or `false`, `no`, `off`) in the environment turns it off (the test suite
judges the same documents both ways).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

__all__ = ["PROTOCOL", "native", "native_state", "turned_off"]

PROTOCOL = 1
"The version of the extension's interface this code calls; another one is not used."
_OFF = frozenset({"0", "false", "no", "off"})
"What `PLANCONTRACTS_NATIVE` may say to keep the extension from loading, in any case."


def _load() -> tuple[ModuleType | None, str]:
    switch = os.environ.get("PLANCONTRACTS_NATIVE", "")
    if switch.strip().lower() in _OFF:
        return None, f"off: PLANCONTRACTS_NATIVE={switch.strip()}"
    try:
        import plancontracts_fast
    except ImportError:
        return None, "off: install plancontracts[fast]"
    found = getattr(plancontracts_fast, "PROTOCOL", None)
    if found != PROTOCOL:
        # An extension built from another version of native/: its functions may
        # mean something else, so it is left alone rather than trusted.
        return None, f"off: plancontracts-fast speaks protocol {found}, this version {PROTOCOL}"
    return plancontracts_fast, "on"


_MODULE, _STATE = _load()


def native() -> ModuleType | None:
    """The `plancontracts_fast` module if it is installed, usable and not turned off; else None."""
    return _MODULE


@contextmanager
def turned_off() -> Iterator[None]:
    """Within the block, `native()` is None: to judge the same documents both ways in one process.

    Not thread-safe: the tests and the validation benchmark use it around
    single-threaded work.
    """
    global _MODULE
    saved, _MODULE = _MODULE, None
    try:
        yield
    finally:
        _MODULE = saved


def native_state() -> str:
    """One phrase saying whether the native fast path is on, and if not, why: for `--version`."""
    return _STATE

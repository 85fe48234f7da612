"""The native fast path of plancontracts' `decode`, as an optional C extension.

plancontracts uses it when it is installed (`pip install ./native`, or the
`fast` extra) and works the same without it: every verdict and message is
the pure-Python path's. `scan` says whether a JSON text is strict JSON that
the Python parser accepts as is (False means not sure, and the slow parser
decides and explains); `Dfa` matches strings against a generated type's
patterns; `check` walks a typed value and matches the strings its patterns
apply to; `decode` runs the scan, a typed decoder and the walk in one call.
`PROTOCOL` names the version of this interface.
"""

from ._native import PROTOCOL, Dfa, check, decode, scan

__all__ = ["PROTOCOL", "Dfa", "check", "decode", "scan"]

"""Reading a skill folder's files: regular files inside the folder, each within a size limit.

Every file a skill is made of (its manifest, its prompt, an input schema and
the files that refers to) is read this way: a FIFO, a socket, a device or a
folder is refused without being opened for reading, and a path that leaves
the skill folder (through a symbolic link included) is refused.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..core.errors import ContractError, TooLarge
from ..core.files import kind_of

__all__ = ["inside", "read_regular_file", "reason"]


def inside(root: Path, relative: str) -> Path:
    """`root / relative` resolved, symbolic links included.

    Raises ValueError when it leaves `root`, or loops through links; its
    message says which, to follow the name of the file.
    """
    try:
        path = (root / relative).resolve()
    except RuntimeError:  # how Python before 3.13 reports a loop of links
        raise ValueError("is a loop of symbolic links") from None
    if not path.is_relative_to(root):
        raise ValueError("leaves the skill folder")
    return path


def read_regular_file(path: Path, limit: int) -> bytes:
    """The contents of `path`, which must be a regular file of at most `limit` bytes.

    Anything else is refused before it is opened: opening a FIFO for reading
    waits for a writer, and a device may do anything. The file is opened
    without waiting (`O_NONBLOCK`) and checked again, in case it was
    replaced in between. Raises OSError when it cannot be read, TooLarge
    past `limit` and ValueError for a file that is not regular, each naming
    what is wrong.
    """
    _require_regular(os.stat(path).st_mode)
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with open(descriptor, "rb") as file:
        _require_regular(os.fstat(descriptor).st_mode)
        # A file that grows while it is read is cut at the limit: one byte more is enough to tell.
        data = file.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(f"larger than {limit} bytes")
    return data


def _require_regular(mode: int) -> None:
    if not stat.S_ISREG(mode):
        kind = kind_of(mode)
        raise ValueError(f"not a regular file ({kind})")


def reason(error: BaseException) -> str:
    """`error` as the end of a one-line problem: OSErrors without their errno and path."""
    if isinstance(error, OSError) and error.strerror:
        return error.strerror[0].lower() + error.strerror[1:]
    if isinstance(error, ContractError):
        return f"not a valid {error.contract}: {'; '.join(map(str, error.violations))}"
    return str(error)

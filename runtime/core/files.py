"""Files a command keeps between runs: replaced whole, and changed by one run at a time.

`replace_file(path, data)` writes `data` to a temporary file made exclusively
beside `path` (a unique name, `O_CREAT | O_EXCL`: never an existing file or a
link planted under a fixed name) and renames it over `path`, so a reader
sees the old text or the new, never half, and two writers never share a
temporary file. `locked(path)` holds an exclusive lock that every run
changing `path` takes around its read-modify-write, so a second run waits
for the first and then reads what it wrote: nothing either accepted is lost.

    with locked(Path("session.json")):
        text = Path("session.json").read_bytes()
        replace_file(Path("session.json"), changed(text))
"""

from __future__ import annotations

import fcntl
import os
import secrets
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

__all__ = ["kind_of", "lock_path", "locked", "replace_file", "staged_file"]

_KINDS = {
    stat.S_IFDIR: "a folder",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


def kind_of(mode: int) -> str:
    """What a file of `mode` (`os.stat`'s) is that is not a regular file, for a one-line error."""
    return _KINDS.get(stat.S_IFMT(mode), "an unknown kind of file")


def replace_file(path: Path, data: bytes) -> None:
    """Replace `path` with `data`, whole or not at all. Raises OSError when it cannot."""
    part = staged_file(path, data)
    try:
        os.replace(part, path)
    except BaseException:
        part.unlink(missing_ok=True)
        raise


def staged_file(path: Path, data: bytes) -> Path:
    """A new temporary file beside `path` holding `data`, for `os.replace` onto `path` later.

    Its name is unique and it is made exclusively, never through a link. It
    gets the mode of the file `path` names when there is one (a private file
    stays private once replaced), else the mode the umask gives a new file
    (0644 under 022), as `open` would: `tempfile`'s 0600 would survive the
    rename. Its data reach the disk before it returns, so a crash after the
    rename finds them. Raises OSError when it cannot be written (and then
    leaves nothing).
    """
    part = path.with_name(f".{path.name}.{secrets.token_hex(8)}.part")
    descriptor = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
    try:
        with os.fdopen(descriptor, "wb") as stream:
            with suppress(FileNotFoundError):  # a new file keeps the umask's mode
                os.fchmod(stream.fileno(), stat.S_IMODE(os.stat(path).st_mode))
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    return part


def lock_path(path: Path) -> Path:
    """The lock file of `path`: `.NAME.lock` beside it."""
    return path.with_name(f".{path.name}.lock")


@contextmanager
def locked(path: Path, *, waiting: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold the exclusive lock of `path` (`fcntl.flock` on its lock file) while the block runs.

    The lock is on a lock file beside `path`, `.NAME.lock`, never on `path`
    itself: `path` is replaced by a rename, so a lock on it would be on a
    file no longer there. The lock file is left in place (removing it would
    let a third run lock a new file while a second holds the old one). A
    link planted there is not followed. When another run holds the lock,
    `waiting` is called once, then the block waits for it: a run holding it
    that ends, however it ends, releases it. Raises OSError when the lock
    file cannot be made or opened.
    """
    # O_NONBLOCK: a FIFO planted at the lock file's name must not hold the open.
    descriptor = os.open(
        lock_path(path),
        os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
        0o666,
    )
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting is not None:
                waiting()
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # closing the only descriptor releases the lock

"""`atomic_write`: the one way the package writes a file (models, predictions, dumps).

The data goes to a temporary file in the target's folder, is flushed to disk (``fsync``) and
renamed over the target (``os.replace``), so a reader sees the old file or the new one, never a
truncated one, and an interrupted write leaves the old file as it was. The result looks as if
``open(path, "w")`` had written it:

- a new file gets ``0o666 & ~umask`` (the temporary file is created with mode 0o666 and the
  kernel applies the umask, and any default ACL, exactly as for ``open``);
- an overwritten file keeps its permission bits (a 0444 file stays 0444);
- a symbolic link is followed: its target is replaced and the link stays a link;
- a missing folder raises `FileNotFoundError` naming the path the caller gave.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat

PathLike = str | os.PathLike


def _temporary(folder: str, name: str) -> tuple[int, str]:
    """A new file ``.<name>.<random>.tmp`` in `folder`, opened for writing, mode 0o666 less
    the umask."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = os.path.join(folder, f".{name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "could not create a unique temporary file", folder)


def _sync_folder(folder: str) -> None:
    """Make the rename itself durable (best effort: not every platform opens folders)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: PathLike, data: bytes | str) -> None:
    """Replace the file at `path` with `data` (str is written as UTF-8), atomically.

    Raises FileNotFoundError when the folder does not exist, IsADirectoryError when `path` is
    a folder, and any other OSError of the write (the old file is then left untouched and no
    temporary file remains).
    """
    given = os.fspath(path)
    if isinstance(data, str):
        data = data.encode("utf-8")
    # realpath follows symbolic links (also dangling ones), so the link's target is written
    target = os.path.realpath(given)
    folder, name = os.path.split(target)
    if not os.path.isdir(folder):
        raise FileNotFoundError(errno.ENOENT, f"cannot write {given!r}: folder {folder!r} "
                                "does not exist", given)
    try:
        old_mode: int | None = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        old_mode = None
    if os.path.isdir(target):
        raise IsADirectoryError(errno.EISDIR, f"cannot write {given!r}: it is a folder", given)
    try:
        fd, tmp = _temporary(folder, name)
    except OSError as e:  # e.g. a read-only folder: name the file asked for, not the temporary
        raise type(e)(e.errno, f"cannot write {given!r}: {e.strerror}", given) from None
    try:
        with os.fdopen(fd, "wb") as f:
            if old_mode is not None:
                os.fchmod(f.fileno(), old_mode)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _sync_folder(folder)


__all__ = ["atomic_write"]

"""Atomic file writes: data go to a temporary file beside the target, which then
replaces the target, so a failed write never damages what was saved before.

The folder rule (docs/guide.md, "Output folders"): livessb creates no folder for its
outputs. The folder a file goes to, or the folder an export writes into, must exist;
:func:`require_folder` is the one check and the one message, for the Python API, the
widget (Save, export pins, export TIFF) and the command line alike.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import IO


class MissingFolderError(FileNotFoundError):
    """An output's folder does not exist (livessb creates none)."""


def require_folder(folder: str | Path, what: str = "") -> Path:
    """``folder`` if it is an existing directory, else MissingFolderError naming it (and
    ``what`` asked for it, e.g. a command-line flag and its value) and the fix."""
    path = Path(folder).expanduser() if str(folder) else Path(".")
    if path.is_dir():
        return path
    prefix = f"{what}: " if what else ""
    raise MissingFolderError(f"{prefix}the folder {str(folder)!r} does not exist (livessb creates "
                             "no folders): create it first or choose another path")


def folder_of(path: str | Path) -> Path:
    """The folder a file ``path`` goes to (``.`` for a bare name)."""
    parent = Path(path).expanduser().parent
    return parent if str(parent) else Path(".")


@contextlib.contextmanager
def atomic_write(path: str | Path) -> Iterator[IO[bytes]]:
    """Open a temporary file next to ``path``; on success it replaces ``path``.

    On any exception the temporary file is removed and ``path`` is left as it was.
    """
    target = Path(path).expanduser()
    if target.is_dir():  # os.replace would fail only after the data were written
        raise IsADirectoryError(f"{str(path)!r} is a folder: give a file path inside it "
                                f"({str(target / '<name>')!r}), not the folder itself")
    directory = require_folder(folder_of(target))
    # os.open with 0o666 lets the user's umask decide the mode, as for any new file
    # (tempfile.mkstemp would leave it 0600).
    tmp = str(directory / f".{target.name}.{secrets.token_hex(6)}.tmp")
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    try:
        with open(tmp, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) atomically (its folder must exist: :func:`require_folder`)."""
    path = Path(path).expanduser()
    with atomic_write(path) as fh:
        fh.write(text.encode("utf-8"))
    return path

"""Atomic file writes: data go to a temporary file beside the target, which then
replaces the target, so a failed write never damages what was saved before."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import IO


@contextlib.contextmanager
def atomic_write(path: str | Path) -> Iterator[IO[bytes]]:
    """Open a temporary file next to ``path``; on success it replaces ``path``.

    On any exception the temporary file is removed and ``path`` is left as it was.
    """
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise FileNotFoundError(f"the directory {str(directory)!r} does not exist: create it first")
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
    """Write ``text`` (UTF-8) atomically, creating missing parent directories."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as fh:
        fh.write(text.encode("utf-8"))
    return path

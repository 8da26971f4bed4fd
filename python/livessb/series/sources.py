"""The scans of a series: paths (loaded by the workers themselves) or in-memory datasets,
each with an identity that says whether a result on disk belongs to it."""

from __future__ import annotations

import difflib
import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..dataset import Dataset4D


class SeriesError(ValueError):
    """The series cannot run as asked; the message names the problem and the fix."""


@dataclass(frozen=True)
class ScanSource:
    """One scan: ``index`` in the series, a file ``path`` or an in-memory ``dataset``."""

    index: int
    label: str  # file name or "dataset-<index>": for messages and output names
    path: str | None = None
    dataset: Dataset4D | None = None

    def identity(self) -> dict[str, Any]:
        """What identifies the scan's data: the file's absolute path, size and mtime (a
        rewritten file is refitted), or an in-memory dataset's content hash."""
        if self.path is not None:
            st = os.stat(self.path)
            return {"path": self.path, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
        assert self.dataset is not None
        return {"dataset": self.dataset.signature()["content_sha256"]}

    @property
    def stem(self) -> str:
        """A file-name-safe stem for the scan's outputs."""
        base = Path(self.path).name if self.path is not None else self.label
        for suffix in (".npy", ".npz", ".emd", ".h5", ".hdf5", ".mib"):
            if base.lower().endswith(suffix):
                base = base[: -len(suffix)]
                break
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in base)
        if self.index < 0:  # a reference from outside the series
            return f"reference-{safe or 'scan'}"
        return f"{self.index:04d}-{safe or 'scan'}"


def missing_path_message(path: str) -> str:
    """'no such file' with the closest names in its folder (a typo'd scan name)."""
    p = Path(path).expanduser()
    folder = p.parent if str(p.parent) else Path(".")
    if not folder.is_dir():
        return f"{path}: no such file (the folder {str(folder)!r} does not exist)"
    near = difflib.get_close_matches(p.name, sorted(os.listdir(folder)), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(repr(str(folder / n)) for n in near)}?" if near else ""
    return f"{path}: no such file{hint}"


def resolve_sources(sources: Sequence[str | Path | Dataset4D] | str | Path | Dataset4D) -> tuple[
        list[ScanSource], list[dict[str, Any]]]:
    """The scans that exist, in order, and a record for each path that does not."""
    if isinstance(sources, (str, Path, Dataset4D)):
        sources = [sources]
    scans: list[ScanSource] = []
    missing: list[dict[str, Any]] = []
    for i, src in enumerate(sources):
        if isinstance(src, Dataset4D):
            scans.append(ScanSource(i, f"dataset-{i}", dataset=src))
        elif isinstance(src, (str, Path)):
            p = Path(src).expanduser()
            if p.is_file():
                scans.append(ScanSource(i, p.name, path=str(p.resolve())))
            else:
                missing.append({"index": i, "source": str(src), "status": "missing",
                                "error": missing_path_message(str(src))})
        else:
            raise SeriesError(f"series source {i} is a {type(src).__name__}: give file paths "
                              "or livessb.Dataset4D objects")
    if not scans:
        raise SeriesError("no scan to fit: " + ("; ".join(m["error"] for m in missing)
                                                 if missing else "the series is empty"))
    return scans, missing


def settings_key(settings: dict[str, Any]) -> str:
    """A short hash of what decides a scan's result besides its data (skip on rerun only
    when it matches)."""
    text = json.dumps(settings, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

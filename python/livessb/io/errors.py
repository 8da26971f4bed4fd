"""Loader errors: each names the problem and the fix (all are ``DatasetError``)."""

from __future__ import annotations

from ..dataset import DatasetError


class FileFormatError(DatasetError):
    """The file is readable but not laid out as expected (or ambiguous); names the fix."""


class CorruptFileError(DatasetError, OSError):
    """The file is truncated, corrupt or missing a part (an ``OSError`` and a ``DatasetError``)."""


class UnsupportedFormatError(FileFormatError):
    """The suffix or file variant is not supported; the message says how to convert."""


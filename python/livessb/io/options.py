"""What the caller asked ``load`` for, passed to every reader."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Region = tuple[int, int, int, int]  # (row_start, row_stop, col_start, col_stop), stops exclusive


@dataclass
class LoadOptions:
    scan_shape: tuple[int, int] | None = None
    scan_region: Region | None = None
    bin_detector: int | None = None
    crop_to_bf: bool | int = False
    progress: bool = True
    calibration: dict[str, Any] = field(default_factory=dict)


"""Preview frames on the wire: request parsing and latest-wins sending.

Requests arrive with a ``seq``; frames go out in increasing ``seq`` only, so the
browser never receives a frame older than one it has (docs/widget-protocol.md).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..preview import VIEWS, Frame, numeric_params

__all__ = ["FrameStream", "PreviewRequest"]

Send = Callable[[dict[str, Any], list[bytes]], None]


@dataclass(frozen=True)
class PreviewRequest:
    seq: int
    params: dict[str, float]
    rotation_deg: float | None
    view: str
    draft: bool = False  # a slider drag's frame: rendered without upsampling

    @classmethod
    def from_message(cls, content: dict[str, Any]) -> PreviewRequest:
        """The ``preview`` message's fields, checked; ValueError names the bad one."""
        try:
            seq = int(content.get("seq", 0))
        except (TypeError, ValueError):
            raise ValueError(f"seq must be an integer, got {content.get('seq')!r}") from None
        params = numeric_params(content.get("params"), "a preview request")
        rotation = content.get("rotation_deg")
        rotation_deg = None if rotation is None else float(rotation)
        if rotation_deg is not None and not math.isfinite(rotation_deg):
            raise ValueError(f"rotation_deg must be a finite number, got {rotation!r}")
        view = str(content.get("view") or "phase")
        if view not in VIEWS:
            raise ValueError(f"view must be one of {VIEWS}, got {view!r}")
        draft = content.get("draft", False)
        if not isinstance(draft, bool):
            raise ValueError(f"draft must be true or false, got {draft!r}")
        return cls(seq, params, rotation_deg, view, draft)


class FrameStream:
    """Sends frames in increasing ``seq``; remembers the last one for a re-rendered view."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._lock = threading.Lock()
        self.latest_seq = 0  # highest request seq received
        self.sent_seq = -1  # seq of the last frame sent
        self._last: tuple[dict[str, Any], list[bytes]] | None = None

    def received(self, seq: int) -> None:
        with self._lock:
            self.latest_seq = max(self.latest_seq, int(seq))

    def send(self, frame: Frame, seq: int | None = None) -> bool:
        """Send ``frame`` as the answer to request ``seq`` (None: a frame Python sends by
        itself, carrying the latest request seq); False when a later frame went out."""
        with self._lock:
            seq = self.latest_seq if seq is None else int(seq)
            if seq < self.sent_seq:
                return False
            content, buffers = frame.message(seq)
            self.sent_seq = seq
            self._last = (content, buffers)
            self._send(content, buffers)
            return True

    @property
    def last(self) -> dict[str, Any] | None:
        """The last frame message sent (without its buffer)."""
        with self._lock:
            return None if self._last is None else dict(self._last[0])

    def resend_last(self) -> None:
        with self._lock:
            if self._last is not None:
                self._send(*self._last)

"""Test helpers for the widget without a browser: region dicts and captured custom messages."""

from __future__ import annotations

import threading
from typing import Any


def region(rid: str, r0: int, r1: int, c0: int, c1: int) -> dict[str, Any]:
    return {"id": rid, "row_start": r0, "row_stop": r1, "col_start": c0, "col_stop": c1}


def fit_with_region(w: Any, timeout: float) -> Sent:
    """Wait for widget ``w``'s full-field fit, capture its messages, then fit region r1
    (scan rows and columns 0-12); returns the capture."""
    w.wait(timeout)
    assert w.status == "done", w.message
    sent = Sent(w)
    w.regions = [region("r1", 0, 12, 0, 12)]
    w.wait(timeout)
    return sent


class Sent:
    """Captures the widget's custom messages (crops, frames, …) by replacing its send."""

    def __init__(self, w: Any) -> None:
        self.messages: list[tuple[dict[str, Any], list[bytes]]] = []
        self._lock = threading.Lock()
        w.send = self._send

    def _send(self, content: dict[str, Any], buffers: list[bytes] | None = None) -> None:
        with self._lock:
            self.messages.append((content, [bytes(b) for b in (buffers or [])]))

    def of(self, kind: str) -> list[tuple[dict[str, Any], list[bytes]]]:
        with self._lock:
            return [(c, b) for c, b in self.messages if c.get("type") == kind]

    def crops(self, rid: str | None = None) -> list[tuple[dict[str, Any], bytes]]:
        return [(c, b[0]) for c, b in self.of("crop") if rid is None or c["id"] == rid]

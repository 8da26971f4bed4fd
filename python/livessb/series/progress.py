"""The series' progress: a tqdm bar (text in a terminal, a widget in a notebook) over the
scans, with the last scan's time and the ETA, or the caller's callback."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class SeriesProgress:
    """``progress``: True (a bar), False (silent) or a callable (record, done, total)."""

    def __init__(self, progress: bool | Callable[[dict[str, Any], int, int], None],
                 total: int) -> None:
        self.callback = progress if callable(progress) else None
        self.total = total
        self.count = 0
        self.show = progress is True
        self.bar: Any = None

    def start(self) -> None:
        """The bar, once the cluster is up (its messages printed above it)."""
        if self.show and self.bar is None:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=self.total, desc="series", unit="scan", dynamic_ncols=True)

    def say(self, text: str) -> None:
        if self.bar is not None:
            self.bar.write(text)
        elif self.show or self.callback is not None:
            print(text)

    def scan_done(self, record: dict[str, Any], kept: bool = False) -> None:
        self.count += 1
        if self.callback is not None:
            self.callback(record, self.count, self.total)
        if self.bar is None:
            return
        status = record.get("status")
        if kept:
            self.bar.set_postfix_str(f"scan {record['index']} kept from an earlier run")
        elif status == "done":
            self.bar.set_postfix_str(f"scan {record['index']}: "
                                     f"{record['timings']['total_s']:.2f} s")
        else:
            self.bar.write(f"scan {record['index']} ({record['label']}) {status}: "
                           f"{record.get('error')}")
        self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

"""Markdown table of a `livessb benchmark` record against an earlier one and the targets.

Warm medians (first run where only one ran) of every operation either record has, the
ratio new/old, and the record's own targets; optionally the preview and live-region
records of the same device run.

    python benchmarks/compare_records.py NEW.json OLD.json [--preview P.json]
        [--live L.json] [--label-old d6ac7c4]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def _warm(entry: Any) -> float | None:
    if isinstance(entry, dict):
        value = entry.get("warm_median", entry.get("first"))
        return None if value is None else float(value)
    return None if entry is None else float(entry)


def _fmt(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    return f"{seconds * 1e3:.1f} ms" if seconds < 0.1 else f"{seconds:.3f} s"


def table(new: dict[str, Any], old: dict[str, Any], label_old: str) -> list[str]:
    targets = {**old.get("targets_s", {}), **new.get("targets_s", {})}
    names = list(dict.fromkeys([*old.get("times_s", {}), *new.get("times_s", {})]))
    rows = [f"| operation | {label_old} | {new.get('commit', 'new')[:7]} | new/old | target |",
            "|---|---:|---:|---:|---:|"]
    for name in names:
        a, b = _warm(old.get("times_s", {}).get(name)), _warm(new.get("times_s", {}).get(name))
        ratio = f"{b / a:.2f}" if a and b else "—"
        rows.append(f"| {name} | {_fmt(a)} | {_fmt(b)} | {ratio} | "
                    f"{_fmt(targets.get(name))} |")
    return rows


def extras(preview: dict[str, Any] | None, live: dict[str, Any] | None) -> list[str]:
    rows = []
    if preview:
        lat, drag = preview["latency"], preview.get("drag_draft_latency", {})
        rows.append(f"| preview frame (full) | warm median {lat['warm_median_ms']:.1f} ms, "
                    f"p90 {lat['warm_p90_ms']:.1f} ms |")
        if drag:
            rows.append(f"| preview frame during a slider drag (draft) | warm median "
                        f"{drag['warm_median_ms']:.1f} ms, p90 {drag['warm_p90_ms']:.1f} ms |")
    if live:
        d = live.get("drag", live)
        behind = d.get("behind") or {}
        tail = float(d.get("last_edit_to_final_crop_s") or 0.0)
        rows.append(f"| live drag of a region | {d.get('crops_painted_per_s', 0):.1f} crops "
                    f"painted/s, behind median {behind.get('median')} max {behind.get('max')}, "
                    f"last edit → final crop {tail:.3f} s |")
    return (["", "| live steering | measured |", "|---|---|", *rows]) if rows else []


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("new", type=Path)
    ap.add_argument("old", type=Path)
    ap.add_argument("--preview", type=Path)
    ap.add_argument("--live", type=Path)
    ap.add_argument("--label-old", default="old")
    a = ap.parse_args(argv)

    def load(p: Path | None) -> dict[str, Any] | None:
        return None if p is None else dict(json.loads(p.read_text()))

    new, old = load(a.new), load(a.old)
    assert new is not None and old is not None
    print("\n".join(table(new, old, a.label_old) + extras(load(a.preview), load(a.live))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

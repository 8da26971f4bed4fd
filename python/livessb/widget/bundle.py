"""The built front end (``static/widget.js`` and its CSS) the widget ships to the browser."""

from __future__ import annotations

from pathlib import Path

__all__ = ["FrontendBuildError", "bundle_paths"]

_STATIC = Path(__file__).resolve().parent.parent / "static"


class FrontendBuildError(RuntimeError):
    """The built front end (static/widget.js) is missing."""


def bundle_paths() -> tuple[Path, Path]:
    """Paths of the built ES module and its CSS; raises if the build is missing."""
    js, css = _STATIC / "widget.js", _STATIC / "widget.css"
    if not js.is_file():
        raise FrontendBuildError(
            f"livessb widget front end not built: {js} is missing. Build it from the "
            "repository root with `scripts/build-frontend.sh` (npm ci && npm run build).")
    return js, css

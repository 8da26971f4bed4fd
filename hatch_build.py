"""Hatch build hook: build the widget front end into the package before packaging.

Runs for the wheel and the sdist. The bundle (python/livessb/static/widget.{js,css})
is rebuilt with ``npm ci && npm run build`` when it is missing or when its inputs
(js/, package.json, package-lock.json, vite.config.ts, tsconfig.json) changed since it
was built (a SHA-256 of the inputs is stored beside it). A wheel built from an sdist
whose bundle matches its inputs needs no Node. When the bundle cannot be built the
build fails with a message saying why and what to install: a wheel without its
widget would install cleanly and then never render.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parent
STATIC = ROOT / "python" / "livessb" / "static"
BUNDLE = ("widget.js", "widget.css")
STAMP = STATIC / "build-inputs.sha256"
INPUT_FILES = ("package.json", "package-lock.json", "vite.config.ts", "tsconfig.json")


class FrontendBuildError(RuntimeError):
    pass


def inputs_digest(root: Path = ROOT) -> str | None:
    """SHA-256 over the front end's sources; None when they are absent (an odd sdist)."""
    js = root / "js"
    if not js.is_dir():
        return None
    files = [root / f for f in INPUT_FILES if (root / f).is_file()]
    files += sorted(p for p in js.rglob("*") if p.is_file() and ".test." not in p.name)
    h = hashlib.sha256()
    for p in files:
        h.update(p.relative_to(root).as_posix().encode() + b"\0")
        h.update(p.read_bytes() + b"\0")
    return h.hexdigest()


def bundle_is_current(root: Path = ROOT) -> bool:
    static = root / "python" / "livessb" / "static"
    if not all((static / f).is_file() and (static / f).stat().st_size > 0 for f in BUNDLE):
        return False
    digest = inputs_digest(root)
    if digest is None:  # no sources to compare with: the shipped bundle is all there is
        return True
    stamp = static / STAMP.name
    return stamp.is_file() and stamp.read_text().strip() == digest


def _run(cmd: list[str], root: Path) -> None:
    try:
        proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    except OSError as exc:
        raise FrontendBuildError(f"could not run {' '.join(cmd)}: {exc}") from None
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr)[-3000:]
        raise FrontendBuildError(f"`{' '.join(cmd)}` failed (exit {proc.returncode}):\n{tail}")


def build_frontend(root: Path = ROOT) -> None:
    """npm ci (when node_modules is missing) and npm run build; check the bundle."""
    if inputs_digest(root) is None:
        raise FrontendBuildError(
            "the widget bundle python/livessb/static/widget.js is missing and the front-end "
            "sources (js/, package.json) are not here to build it: build from a git clone "
            "or an sdist of livessb")
    npm = shutil.which("npm")
    if npm is None:
        raise FrontendBuildError(
            "building livessb needs Node.js ≥ 20 and npm to build the widget bundle "
            "(python/livessb/static/widget.js), and npm is not on PATH: install them "
            "(Debian: apt-get install nodejs npm) or run `bash scripts/setup.sh`")
    if not (root / "node_modules").exists():
        _run([npm, "ci", "--no-audit", "--no-fund"], root)
    _run([npm, "run", "build"], root)
    static = root / "python" / "livessb" / "static"
    missing = [f for f in BUNDLE if not (static / f).is_file()]
    if missing:
        raise FrontendBuildError(f"`npm run build` wrote no {', '.join(missing)} in {static}")
    digest = inputs_digest(root)
    assert digest is not None
    (static / STAMP.name).write_text(digest + "\n")


def ensure_bundle(root: Path, version: str, say: Any = print) -> None:
    """What the hook does for every target: build the bundle unless it is current."""
    if os.environ.get("LIVESSB_SKIP_FRONTEND") == "1" and version == "editable":
        return  # editable dev installs may build the bundle later (scripts/build-frontend.sh)
    if not bundle_is_current(root):
        say("livessb: building the widget front end (npm run build)")
        try:
            build_frontend(root)
        except FrontendBuildError as exc:
            raise RuntimeError(
                f"livessb build: the widget front end could not be built: {exc}") from None


try:  # hatchling is there when hatch builds; the functions above are tested without it
    from hatchling.builders.hooks.plugin.interface import BuildHookInterface
except ImportError:  # pragma: no cover
    pass
else:
    class FrontendBuildHook(BuildHookInterface):  # type: ignore[type-arg]
        PLUGIN_NAME = "custom"

        def initialize(self, version: str, build_data: dict[str, Any]) -> None:
            ensure_bundle(Path(self.root), version, self.app.display_info)

"""Packaging: the installed package carries its widget bundle and demo notebook; the
wheel's build hook rebuilds a stale bundle and fails clearly when it cannot."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest

from helpers import check_installed_location

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
import hatch_build  # noqa: E402


def test_livessb_resolves_where_the_run_expects() -> None:
    import livessb

    check_installed_location(livessb.__file__)
    if os.environ.get("LIVESSB_EXPECT_INSTALLED"):
        assert Path(sys.prefix) in Path(livessb.__file__).resolve().parents


def test_installed_package_has_bundle_and_notebook() -> None:
    spec = importlib.util.find_spec("livessb")
    assert spec is not None and spec.origin is not None
    pkg = Path(spec.origin).parent
    for name in ("static/widget.js", "static/widget.css", "notebooks/demo.ipynb"):
        assert (pkg / name).is_file() and (pkg / name).stat().st_size > 0, name
    assert (pkg / "notebooks/demo.ipynb").read_bytes() == (
        REPO / "notebooks/demo.ipynb").read_bytes(), "packaged demo notebook is out of date"
    from livessb.demo_launch import demo_notebook_path

    assert demo_notebook_path().read_bytes() == (REPO / "notebooks/demo.ipynb").read_bytes()


def _front_end_copy(tmp: Path) -> Path:
    root = tmp / "src"
    shutil.copytree(REPO / "js", root / "js")
    for name in hatch_build.INPUT_FILES:
        shutil.copyfile(REPO / name, root / name)
    (root / "python" / "livessb" / "static").mkdir(parents=True)
    return root


def test_bundle_is_stale_when_missing_or_sources_change(tmp_path: Path) -> None:
    root = _front_end_copy(tmp_path)
    assert not hatch_build.bundle_is_current(root)  # missing
    static = root / "python" / "livessb" / "static"
    for name in hatch_build.BUNDLE:
        (static / name).write_text("/* built */")
    assert not hatch_build.bundle_is_current(root)  # no stamp: unknown provenance
    digest = hatch_build.inputs_digest(root)
    assert digest is not None
    (static / hatch_build.STAMP.name).write_text(digest)
    assert hatch_build.bundle_is_current(root)
    (root / "js" / "regions.ts").write_text((root / "js" / "regions.ts").read_text() + "\n// x")
    assert not hatch_build.bundle_is_current(root)  # a source changed after the build


def test_build_fails_clearly_without_npm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _front_end_copy(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(RuntimeError, match=r"npm is not on PATH.*apt-get install nodejs npm"):
        hatch_build.ensure_bundle(root, "standard", say=lambda _msg: None)


def test_build_fails_clearly_without_sources(tmp_path: Path) -> None:
    root = tmp_path / "bare"
    (root / "python" / "livessb" / "static").mkdir(parents=True)
    with pytest.raises(RuntimeError, match=r"sources .* are not here"):
        hatch_build.ensure_bundle(root, "standard", say=lambda _msg: None)

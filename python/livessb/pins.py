"""Pins and exports from a session: PNGs with scale bar + one ``pins.json``; 32-bit TIFF.

A pin is a set of parameters with the view it was seen in (colormap, contrast).
Paths are relative to the working directory unless absolute; every file is
written atomically (``atomic.py``), so a failed export never leaves half a file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._version import __version__
from .atomic import atomic_write_text, require_folder
from .export import ExportError
from .preview import VIEWS, numeric_params, params_loss
from .render import COLORMAPS

if TYPE_CHECKING:
    from .session import Session

__all__ = ["MANIFEST", "export_pins", "export_tiff"]

MANIFEST = "pins.json"


def _params(value: Any, what: str) -> dict[str, float]:
    try:
        return numeric_params(value, what)
    except ValueError as exc:
        raise ExportError(str(exc)) from None


def _view(value: Any, what: str) -> str:
    view = str(value or "phase")
    if view not in VIEWS:
        raise ExportError(f"{what}: view must be one of {VIEWS}, got {view!r}")
    return view


def _file_stem(name: str, used: set[str]) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "pin"
    out, n = stem, 2
    while out in used:
        out, n = f"{stem}-{n}", n + 1
    used.add(out)
    return out


def calibration_summary(session: Session) -> dict[str, Any]:
    """Rotation, transpose, voltage, semiangle and scan step of the session."""
    ds = session.dataset
    return {"rotation_deg": session.rotation_deg, "transpose": session.transpose,
            "voltage_kV": float(ds.voltage_kV), "semiangle_mrad": float(ds.semiangle_mrad),
            "scan_step_A": [float(s) for s in ds.scan_step_A]}


def export_pins(session: Session, directory: str | Path,
                pins: Sequence[Mapping[str, Any]]) -> list[Path]:
    """One PNG per pin (its view with scale bar, colormap and contrast) and ``pins.json``.

    Each pin: ``{name, params, view?, colormap?, contrast?: [lo, hi]}``; the image is
    the full field at the session's Auto upsampling. Returns the paths written,
    the manifest last.
    """
    if not pins:
        raise ExportError("no pins to export: pin the current view first (key P)")
    out_dir = require_folder(directory)  # the folder rule: none is created (atomic.py)
    used: set[str] = {Path(MANIFEST).stem}
    written: list[Path] = []
    entries: list[dict[str, Any]] = []
    sampling: list[float] = []
    for i, pin in enumerate(pins):
        name = str(pin.get("name") or f"pin {i + 1}")
        params = _params(pin.get("params"), f"pin {name!r}")
        view = _view(pin.get("view"), f"pin {name!r}")
        colormap = str(pin.get("colormap") or "gray")
        if colormap not in COLORMAPS:
            raise ExportError(f"pin {name!r}: colormap must be one of {COLORMAPS}, "
                              f"got {colormap!r}")
        contrast = pin.get("contrast")
        limits = None if contrast is None else (float(contrast[0]), float(contrast[1]))
        rec = session.reconstruct(params)
        path = out_dir / f"{_file_stem(name, used)}.png"
        rec.save(path, what=view, colormap=colormap, limits=limits, scale_bar=True)
        written.append(path)
        sampling = [float(s) for s in rec.sampling_A]
        loss = params_loss(session, params)  # higher orders included, as reconstructed
        entries.append({"name": name, "file": path.name, "params": params, "loss": loss,
                        "view": view, "colormap": colormap,
                        "contrast": None if limits is None else list(limits)})
    manifest = {"livessb": __version__, "pins": entries,
                "calibration": calibration_summary(session), "sampling_A": sampling,
                "upsample": int(session.upsample_factor)}
    written.append(atomic_write_text(out_dir / MANIFEST, json.dumps(manifest, indent=2)))
    return written


def export_tiff(session: Session, path: str | Path, params: Mapping[str, Any],
                view: str = "phase") -> Path:
    """The full field with ``params`` as a 32-bit TIFF carrying its pixel size."""
    target = Path(path).expanduser()
    if target.suffix.lower() not in (".tif", ".tiff"):
        raise ExportError(f"a TIFF export needs a .tif or .tiff name, got {target.name!r}")
    rec = session.reconstruct(_params(params, "export_tiff"))
    return rec.save(target, what=_view(view, "export_tiff"))

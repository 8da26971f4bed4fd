"""The descan diagnostic figure: measured and fitted BF disk centre over the scan."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .descan import DescanFit

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def plot_descan(fit: DescanFit) -> Figure:
    """Measured disk-centre shift (row, col; detector px, from the fitted centre at the
    scan centre), the fit, and the residual, over the scan (one value per block)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10.0, 6.0), layout="constrained")
    axes = fig.subplots(2, 3)
    fitted = fit.centre_map(variation_only=True)
    centre = fit.coefficients[:, 0]
    measured = None if fit.measured is None else fit.measured - centre
    b = fit.block
    for k, comp in enumerate(("row", "col")):
        f = fitted[..., k]
        lim = max(float(np.abs(f).max()), 1e-3)
        panels: list[tuple[str, np.ndarray | None]] = [
            (f"measured {comp} shift", None if measured is None else measured[..., k]),
            (f"{fit.model} fit, span {fit.span_px:.3g} px", f),
            (f"residual (rms {fit.residual_rms_px:.3g} px)",
             None if measured is None else measured[..., k] - f[::b, ::b][
                 :measured.shape[0], :measured.shape[1]]),
        ]
        for ax, (title, img) in zip(axes[k], panels, strict=True):
            ax.set_title(title, fontsize=9)
            ax.set_xlabel("scan col (blocks)" if img is not f else "scan col (px)")
            ax.set_ylabel("scan row")
            if img is None:
                ax.text(0.5, 0.5, "not recorded\n(restored fit)", ha="center", va="center",
                        transform=ax.transAxes)
                continue
            im = ax.imshow(img, cmap="RdBu_r", vmin=-lim, vmax=lim)
            fig.colorbar(im, ax=ax, label="detector px")
    applied = "applied" if fit.significant else "not applied (insignificant)"
    fig.suptitle(f"descan: {fit.model} fit, correction {applied}")
    return fig

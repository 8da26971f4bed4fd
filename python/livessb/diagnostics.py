"""``Session.diagnostics``: a read-only window on a session's resident state.

For benchmarks, profiling scripts and tests: the engine, its stage timings and
memory, the prepared spectra and models it holds, and the full field's prepared
spectra (evaluated and differentiated directly, without the fit around them).
Not part of the analysis API: the figures describe engine internals. This is the
one module outside ``engine/`` that knows those internals' names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from .engine.protocol import Engine
    from .fit.model import ThickSampleModel


class SessionDiagnostics:
    """A snapshot of an open session's engine and full-field model (see module docstring)."""

    def __init__(self, engine: Engine, full_model: ThickSampleModel | None) -> None:
        self.engine = engine  # the resident engine (public methods: prepare, evaluate, ...)
        self.full_model = full_model  # None until the full field was fitted or restored

    @property
    def engine_name(self) -> str:
        return str(self.engine.name)

    def memory_info(self) -> dict[str, Any]:
        return dict(self.engine.memory_info())

    @property
    def stats(self) -> dict[str, float]:
        """Per-stage device timings and counts so far (a copy; empty on the CPU engine)."""
        return dict(self.engine.stage_timings())

    @property
    def close_breakdown(self) -> dict[str, float]:
        """Seconds per step of the engine's last ``close`` (empty on the CPU engine)."""
        return dict(self.engine.close_timings())

    @property
    def n_bf(self) -> int:
        """Bright-field pixels the engine keeps per scan position."""
        return int(self.engine.n_bf)

    @property
    def spikes_repaired(self) -> int:
        """One-frame spikes (an X-ray hit, a saturated read) the engine replaced in the
        resident BF counts by their pixel's mean (``livessb.engine.spikes``)."""
        return int(self.engine.spikes_repaired)

    @property
    def bf_counts(self) -> Any:
        """The resident BF counts, (scan rows, scan cols, BF pixels), engine array module."""
        return self.engine.resident_bf_counts()

    def upload_bf_counts(self, counts: Any) -> Any:
        """Gather the BF pixels of ``counts`` again (what opening a session does), for timing."""
        return self.engine.upload_bf_counts(counts)

    @property
    def prepared_spectra(self) -> tuple[Any, ...]:
        """Every spectra handle the engine holds (the full field's and live regions')."""
        return tuple(self.engine.live_spectra())

    @property
    def models(self) -> tuple[Any, ...]:
        """The models bound to the engine (the engine↔model cycle ``close`` breaks)."""
        return tuple(self.engine.models)

    @property
    def full_spectra(self) -> Any:
        """The full field's prepared spectra handle (rotation applied)."""
        if self.full_model is None:
            raise RuntimeError("no full-field spectra yet: run Session.fit() first")
        return self.full_model.spectra

    def full_field_sizes(self) -> dict[str, int]:
        """BF pixels, half-plane frequencies, in-trotter pairs and spectra bytes (CUDA)."""
        info = self.engine.spectra_info(self.full_spectra)
        return {"n_bf": int(info["n_bf"]), "M_half_plane": int(info["half_plane"]),
                "trotter_pairs": int(info["trotter_pairs"]),
                "spectra_bytes": int(info["spectra_bytes"])}

    def evaluate_full(self, candidates: np.ndarray, objective: str = "vp") -> np.ndarray:
        """Losses of a ``(K, 6)`` candidate batch on the full field (counts as evaluations)."""
        return np.asarray(self.engine.evaluate(self.full_spectra, candidates, objective))

    def derivatives_full(self, candidates: np.ndarray) -> Any:
        """(loss, gradient, Hessian) of a candidate batch on the full field."""
        return self.engine.derivatives(self.full_spectra, candidates)

"""How often the first lattice basis (``physics.lattice_peaks.peak_basis``) is a lattice of
the truth's points: windows of the demo's crystal (16²-96² at 0.6 Å steps), the bias
matrix's abTEM crystals (cached by ``scripts/bias_matrix.py``) and model crystals of random
reflection strengths (``tests/test_lattice_fit._model_counts``, 4 angles × 4 sizes × 4
steps × 3 seeds; hexagonal ones of 2.46-4 Å, 3 angles × 4 scans × 2 seeds). Writes
docs/bias-matrix.md §19's table: the SrTiO3 crystals count their lattice or its centred
sublattice (h + k even, their strong reflections), the model crystals their lattice.

    PYTHONPATH=python:tests python scripts/lattice_peaks_survey.py [--compare-with DIR]

``--compare-with DIR``: a second column from another checkout's ``python/`` (e.g. a
``git archive`` of an earlier commit), whose ``peak_basis`` takes no band.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

Reader = Callable[[np.ndarray, tuple[float, float], float], np.ndarray]


def _readers(compare_with: str | None) -> dict[str, Reader]:
    out: dict[str, Reader] = {}
    if compare_with:
        sys.path.insert(0, str(Path(compare_with) / "python"))
        earlier = importlib.import_module("livessb.physics.lattice").peak_basis
        out["earlier"] = lambda counts, step, band: earlier(counts, step)
        sys.path.pop(0)
        for name in [m for m in sys.modules if m.startswith("livessb")]:
            del sys.modules[name]
    now = importlib.import_module("livessb.physics.lattice_peaks").peak_basis
    out["now"] = lambda counts, step, band: now(counts, step, band_inv_A=band)
    return out


def _is_lattice(read: Reader, counts: np.ndarray, step: tuple[float, float], band: float,
                truth: np.ndarray, indices: tuple[int, ...]) -> bool:
    """The basis read spans a sublattice of the truth's of one of these ``indices``."""
    try:
        hk = read(counts, step, band) @ np.linalg.inv(truth)
    except ValueError:
        return False
    return bool(np.abs(hk - np.round(hk)).max() < 0.1
                and round(abs(np.linalg.det(np.round(hk)))) in indices)


def cases() -> list[tuple[str, np.ndarray, tuple[float, float], float, np.ndarray]]:
    from livessb.simulate.demo import DEMO_SETTINGS, demo_dataset
    from test_lattice_fit import _model_counts
    from test_lattice_peaks import _band, _bf_counts
    from test_lattice_profiles import _rotated
    out = []
    ds, truth = demo_dataset(with_truth=True)
    band = _band(DEMO_SETTINGS["voltage_kV"], DEMO_SETTINGS["semiangle_mrad"])
    for n in (16, 20, 24, 30, 32, 40, 48, 64):
        corners = {(0, 0), (96 - n, 96 - n), ((96 - n) // 2, (96 - n) // 2), (0, 96 - n),
                   (13, 29)}
        for r0, c0 in sorted(corners):
            out.append((f"demo {n}²", _bf_counts(np.asarray(ds.counts[r0:r0 + n, c0:c0 + n])),
                        (0.6, 0.6), band, np.eye(2) / truth.lattice_A))
    for path in sorted((Path.home() / ".cache/livessb/bias-matrix").glob("*.npz")):
        if "amorphous" in path.name:
            continue
        z = np.load(path)
        c = z["counts"]
        rows, cols = np.mgrid[:c.shape[2], :c.shape[3]]
        inside = np.hypot(rows - z["bf_center_px"][0], cols - z["bf_center_px"][1]) \
            < float(z["bf_radius_px"])
        out.append(("abTEM matrix crystals", c[:, :, inside].astype(np.float64),
                    (float(z["scan_step_A"][0]), float(z["scan_step_A"][1])),
                    _band(float(z["voltage_kV"]), float(z["semiangle_mrad"])),
                    np.eye(2) / 3.905))
    for angle in (0.0, 0.3, 0.7, 1.2):
        for n in (16, 20, 24, 32):
            for step in (0.3, 0.45, 0.5, 0.6):
                for seed in (5, 6, 7):
                    basis = _rotated(3.905, angle)
                    case = _model_counts(basis, n, step, seed=seed)
                    wide = n * step / 3.905 >= 2.4
                    out.append((f"model crystals, {'≥' if wide else '<'} 2.4 periods",
                                case["I"], (step, step), 2 * case["k_alpha"], basis))
    for a_A in (2.46, 3.2, 4.0):  # hexagonal
        for angle in (0.0, 0.4, 1.0):
            turn = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
            basis = np.array([[1, 0], [0.5, np.sqrt(3) / 2]]) / a_A @ turn.T
            for n, step in ((24, 0.5), (32, 0.4), (20, 0.6), (32, 0.3)):
                if n * step / a_A >= 2.4:
                    for seed in (5, 6):
                        case = _model_counts(basis, n, step, seed=seed)
                        out.append(("hexagonal model crystals, 2.46-4 Å", case["I"],
                                    (step, step), 2 * case["k_alpha"], basis))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compare-with", default=None)
    readers = _readers(parser.parse_args().compare_with)
    tally: dict[str, list[int]] = {}
    for group, counts, step, band, truth in cases():
        t = tally.setdefault(group, [0] * (len(readers) + 1))
        t[0] += 1
        for i, read in enumerate(readers.values()):
            indices = (1,) if group.startswith(("model", "hexagonal")) else (1, 2)
            t[i + 1] += _is_lattice(read, counts, step, band, truth, indices)
    print("| windows | cases | " + " | ".join(readers) + " |")
    print("|---|---|" + "---|" * len(readers))
    for group, t in tally.items():
        print(f"| {group} | {t[0]} | " + " | ".join(str(v) for v in t[1:]) + " |")


if __name__ == "__main__":
    main()

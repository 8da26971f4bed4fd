"""Where the C10 bias on crystals comes from (issue 20, docs/bias-matrix.md §2).

A standalone NumPy model of the per-lobe VP loss with exact geometry (rotation 0, the
simulator's BF centre and sampling), so that one ingredient can be changed at a time:

    python scripts/bias_profiles.py ~/.cache/livessb/bias-matrix/sto1_C10-150.npz ...

prints, per case, the conditional C10 minimum (every other parameter at the truth)
minus the truth for: the package's model (Γ at the scan grid frequency ν of each bin),
one shared object for both lobes, and the per-lobe model with Γ at each bin's
*effective* frequency: the frequency its signal actually has, measured from the data
as the ratio of the Hann-windowed DFTs of (R − R̄)·I and I, inverted through the
window's own kernel (the package's table); and both with the aliases of an undersampled scan
resolved (``alias_loss``, a prototype of docs/bias-matrix.md §2b).

``--pixels`` prints instead the C10 minimum with Γ at each pixel's centre (the package's
model), averaged over 4×4 sub-samples of the pixel with a sharp aperture (what a
detector that integrates its pixels measures, docs/bias-matrix.md §4), and with each
pair's phase at the centroid of the pixel's lit part (``centroid_loss``: the candidate
engine model, one offset per disc that cuts the pixel; first for the pixel's own disc
only, then for both); ``--bin B`` first sums B×B detector pixels of the case (a coarser
integrating detector made in software).

``--apodise`` prints instead the C10 minimum on the scan-apodised spectra (a periodic
Hann h = 1 − cos(2πR/N) over the measured positions, ``apodised``): with the effective
frequencies of the unapodised data (as the package now), with each bin at its nearest
lattice frequency (``--lattice-A``), and with each bin's frequency measured under the
apodisation (``apodised_frequencies``: windows h·w and h·t, a table over ±1.5 bins, the
main lobe that apodisation spreads a Bragg peak over; docs/bias-matrix.md §6).

A crystal whose lattice is not commensurate with the scan window puts each Bragg
frequency g between bins; the bin then carries the k-dependence of Γ(k, g), not Γ(k, ν),
and the fitted C10 is scaled by ≈ g/ν.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import minimize_scalar

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from livessb.physics.apodisation import hann
from livessb.physics.frequencies import offset_table
from livessb.physics.optics import aperture, chi, wavelength_A

Case = dict[str, Any]


def load(path: Path, bin_by: int = 1) -> Case:
    d = dict(np.load(path))
    if bin_by > 1:  # sum bin_by × bin_by pixels: the centre and sampling follow
        c = d["counts"]
        n = c.shape[-1] // bin_by * bin_by
        d["counts"] = c[..., :n, :n].reshape(*c.shape[:2], n // bin_by, bin_by, n // bin_by,
                                             bin_by).sum(axis=(3, 5))
        d["bf_center_px"] = (d["bf_center_px"] - 0.5 * (bin_by - 1)) / bin_by
        d["detector_sampling_mrad"] = d["detector_sampling_mrad"] * bin_by
    lam = wavelength_A(float(d["voltage_kV"]))
    px = float(d["detector_sampling_mrad"]) * 1e-3 / lam
    k_alpha = float(d["semiangle_mrad"]) * 1e-3 / lam
    c = d["bf_center_px"]
    n = d["counts"].shape[-1]
    kr, kc = np.meshgrid((np.arange(n) - c[0]) * px, (np.arange(n) - c[1]) * px, indexing="ij")
    inside = kr**2 + kc**2 <= (k_alpha + px) ** 2
    I = d["counts"].astype(np.float64)[..., inside]
    return {"k": np.stack([kr[inside], kc[inside]], 1), "lam": lam, "px": px,
            "k_alpha": k_alpha, "step": d["scan_step_A"], **with_spectra(I, d["scan_step_A"]),
            "truth": {k[6:]: float(d[k]) for k in d if k.startswith("truth_")}}


def with_spectra(I: Any, step: Any) -> Case:
    """The counts ``I`` (R, R, B), their full-plane spectra G (B, M) and the grid
    frequencies ν of each bin (flattened, row-major)."""
    nr, nc = (np.fft.fftfreq(m, s) for m, s in zip(I.shape[:2], step, strict=True))
    NR, NC = np.meshgrid(nr, nc, indexing="ij")
    return {"I": I, "nu_r": NR.ravel(), "nu_c": NC.ravel(),
            "G": np.fft.fft2(I, axes=(0, 1)).reshape(-1, I.shape[-1]).T}


def _probe(qr: Any, qc: Any, case: Case, p: dict[str, float]) -> Any:
    coeffs = {"C10": p["C10"], "C12": p["C12"], "phi12": p["phi12"]}
    return aperture(qr, qc, case["k_alpha"], case["px"]) * np.exp(
        -1j * chi(qr, qc, case["lam"], coeffs))


def gamma(case: Case, p: dict[str, float], nu_r: Any, nu_c: Any) -> Any:
    """Γ = P(k−ν)P*(k) − P*(k+ν)P(k) at every BF pixel k (rows) and frequency ``nu_r/nu_c``
    (columns, broadcast)."""
    kr, kc = case["k"][:, :1], case["k"][:, 1:]
    p0 = _probe(kr, kc, case, p)
    return _probe(kr - nu_r, kc - nu_c, case, p) * np.conj(p0) - np.conj(
        _probe(kr + nu_r, kc + nu_c, case, p)) * p0


def trotter_lobes(case: Case, nu_r: Any, nu_c: Any) -> tuple[Any, Any]:
    """(k−ν in the disc, single-sideband support) per BF pixel and frequency: the support's
    pixels with k−ν in the disc are the k−ν lobe, the others the k+ν lobe."""
    kr, kc, ka = case["k"][:, :1], case["k"][:, 1:], case["k_alpha"]
    in_minus = (kr - nu_r) ** 2 + (kc - nu_c) ** 2 <= ka**2
    return in_minus, in_minus ^ ((kr + nu_r) ** 2 + (kc + nu_c) ** 2 <= ka**2)


def loss(case: Case, p: dict[str, float], nu_r: Any, nu_c: Any, lobes: bool = True) -> float:
    """The thin-model VP loss, Γ evaluated (and the trotters placed) at ``nu_r/nu_c``."""
    return _lobe_loss(case, gamma(case, p, nu_r, nu_c), nu_r, nu_c, lobes)


def integrated_loss(case: Case, p: dict[str, float], nu_r: Any, nu_c: Any,
                    sub: int = 4) -> float:
    """The per-lobe loss with Γ averaged over sub × sub points of each pixel, each point's
    aperture edge one sub-pixel wide (its own integral across a straight edge): the pixel's
    integral of a sharp aperture's Γ; trotter membership at the centre."""
    kr, kc, px = case["k"][:, :1], case["k"][:, 1:], case["px"]
    sharp = {**case, "px": px / sub}
    gam = 0
    for dr in (np.arange(sub) - (sub - 1) / 2) / sub * px:
        for dc in (np.arange(sub) - (sub - 1) / 2) / sub * px:
            qr, qc = kr + dr, kc + dc
            p0 = _probe(qr, qc, sharp, p)
            gam = gam + _probe(qr - nu_r, qc - nu_c, sharp, p) * np.conj(p0) - np.conj(
                _probe(qr + nu_r, qc + nu_c, sharp, p)) * p0
    return _lobe_loss(case, gam / sub**2, nu_r, nu_c)


def lit_centroid_offset(qr: Any, qc: Any, case: Case) -> tuple[Any, Any]:
    """Where the lit part of the pixel centred at q (relative to a disc's centre) has its
    centroid, relative to the pixel's centre: with the aperture's linear edge one pixel w
    wide, a ∈ (0, 1) is the lit fraction of a pixel cut by a straight edge, and the lit
    part's centroid lies w(1 − a)/2 inward, along −q̂ (0 for a pixel fully lit or dark)."""
    ka, w = case["k_alpha"], case["px"]
    a = aperture(qr, qc, ka, w)
    r = np.maximum(np.sqrt(qr**2 + qc**2), 1e-30)
    s = np.where((a > 0) & (a < 1), w * (1 - a) / 2, 0.0)
    return -s * qr / r, -s * qc / r


def centroid_loss(case: Case, p: dict[str, float], nu_r: Any, nu_c: Any,
                  shifted_disc: bool = True) -> float:
    """The per-lobe loss with the amplitudes at the pixel centres and each pair's phase
    χ(q ∓ ν) − χ(q) at q = the centroid of the pixel's lit part: the pair's phase is
    linear in q across a pixel (χ quadratic), so that is its pixel integral to first
    order. Offsets from the pixel's own disc (|k| = kα) and, with ``shifted_disc``, from
    the other disc of the pair (|k ∓ ν| = kα) add."""
    kr, kc = case["k"][:, :1], case["k"][:, 1:]
    coeffs = {"C10": p["C10"], "C12": p["C12"], "phi12": p["phi12"]}
    a0 = aperture(kr, kc, case["k_alpha"], case["px"])
    own_r, own_c = lit_centroid_offset(kr, kc, case)
    gam: Any = 0
    for sign in (-1, 1):  # P(k−ν)P*(k) − P*(k+ν)P(k)
        sr, sc = kr + sign * nu_r, kc + sign * nu_c
        other_r, other_c = lit_centroid_offset(sr, sc, case) if shifted_disc else (0, 0)
        qr, qc = kr + own_r + other_r, kc + own_c + other_c
        phase = (chi(qr + sign * nu_r, qc + sign * nu_c, case["lam"], coeffs)
                 - chi(qr, qc, case["lam"], coeffs))
        term = aperture(sr, sc, case["k_alpha"], case["px"]) * a0 * np.exp(-1j * phase)
        gam = gam + (term if sign < 0 else -np.conj(term))
    return _lobe_loss(case, gam, nu_r, nu_c)


def _lobe_loss(case: Case, gam: Any, nu_r: Any, nu_c: Any, lobes: bool = True) -> float:
    """1 − the explained energy of Γ = ``gam`` with a free object per trotter lobe (one
    per trotter where not ``lobes``), membership at each pixel's centre."""
    in_minus, support = trotter_lobes(case, nu_r, nu_c)
    ok = (case["nu_r"] ** 2 + case["nu_c"] ** 2) > 0
    parts = (in_minus & support, ~in_minus & support) if lobes else (support,)
    explained = _explained(gam, case["G"], parts, ok)
    return 1.0 - explained / float(np.sum(np.abs(np.where(support, case["G"], 0)[:, ok]) ** 2))


def _explained(gam: Any, G: Any, parts: Any, ok: Any) -> float:
    """Σ over ``parts`` (pixel masks, each with its own free object) and the frequencies
    ``ok`` of |Σ_b Γ* G|² / Σ_b |Γ|²: the energy the best object per part explains."""
    explained = 0.0
    for part in parts:
        g = np.where(part, gam, 0)  # zero outside the part: G needs no mask
        N, D = np.sum(np.conj(g) * G, 0), np.sum(np.abs(g) ** 2, 0)
        explained += float(np.sum((np.abs(N) ** 2 / np.maximum(D, 1e-12))[ok]))
    return explained


def alias_loss(case: Case, p: dict[str, float], nu_r: Any, nu_c: Any) -> float:
    """The per-lobe loss with each bin's aliases ν + m/step (m ∈ {−1, 0, 1} per axis)
    resolved: a BF pixel belongs to the alias whose single-sideband support holds it, a
    pixel in two aliases' supports is left out, each (alias, lobe) has its own object."""
    step = case["step"]
    ok = (case["nu_r"] ** 2 + case["nu_c"] ** 2) > 0
    aliases = []
    for mr in (-1, 0, 1):
        for mc in (-1, 0, 1):
            ar, ac = nu_r + mr / step[0], nu_c + mc / step[1]
            aliases.append((ar, ac, *trotter_lobes(case, ar, ac)))
    single = sum(a[3].astype(int) for a in aliases) == 1
    used = np.zeros(case["G"].shape, bool)
    explained = 0.0
    for ar, ac, in_minus, support in aliases:
        use = support & single
        used |= use
        explained += _explained(gamma(case, p, ar, ac), case["G"],
                                (in_minus & use, ~in_minus & use), ok)
    return 1.0 - explained / float(np.sum(np.abs(np.where(used, case["G"], 0)[:, ok]) ** 2))


def _measured_frequencies(I: Any, case: Case, table: Any) -> tuple[Any, Any]:
    """Each bin's signal frequency per scan axis from (R, R, B) data ``I`` (mean removed):
    q = Im(2π·Gt/Gw) of the data weighted by w = 1 − cos(2πR/N) and t = sin(2πR/N), energy
    weighted over the BF pixels, inverted through ``table(n)`` (q(x), x) of those windows."""
    out = []
    for axis, nu in ((0, case["nu_r"]), (1, case["nu_c"])):
        n, step = I.shape[axis], float(case["step"][axis])
        shape = [1, 1, 1]
        shape[axis] = n
        phase = 2 * np.pi * np.arange(n) / n
        Gw, Gt = (np.fft.fft2(I * f.reshape(shape), axes=(0, 1)).reshape(-1, I.shape[-1]).T
                  for f in (1 - np.cos(phase), np.sin(phase)))
        q = (2 * np.pi * np.sum(np.conj(Gw) * Gt, 0)
             / (np.sum(np.abs(Gw) ** 2, 0) + 1e-30)).imag
        table_q, table_x = table(n)
        out.append(nu + np.interp(q, table_q, table_x) / step)
    return out[0], out[1]


def effective_frequencies(case: Case) -> tuple[Any, Any]:
    """Each bin's signal frequency per scan axis, on this model's full plane, with the
    package's weights and offset table (livessb.physics.frequencies: the periodic Hann
    w = 1 − cos(2πR/N) and t = sin(2πR/N), here as FFTs of the weighted counts)."""
    return _measured_frequencies(case["I"] - case["I"].mean(axis=(0, 1)), case,
                                 lambda n: offset_table(n, n))


def apodised(case: Case) -> Case:
    """``case`` with its spectra from (I − Ī)·h, h a periodic Hann over the measured
    positions of each scan axis: a Bragg peak's leakage falls as 1/d³ instead of 1/d."""
    I = case["I"] - case["I"].mean(axis=(0, 1))
    h = [hann(n) for n in I.shape[:2]]
    Ih = I * h[0][:, None, None] * h[1][None, :, None]
    return {**case, "I": Ih, "G": np.fft.fft2(Ih, axes=(0, 1)).reshape(-1, I.shape[-1]).T}


def _apodised_table(n: int, span_bins: float = 1.5) -> tuple[Any, Any]:
    """q(x) of ``apodised_frequencies`` for one tone at x cycles per position, |x| up to
    ``span_bins`` bins (monotonic there: the apodised main lobe is three bins wide)."""
    r = np.arange(n)
    phase = 2 * np.pi * r / n
    h = 1 - np.cos(phase)
    w, t = h * (1 - np.cos(phase)), h * np.sin(phase)
    x = np.linspace(-span_bins / n, span_bins / n, 2001)
    tone = np.exp(2j * np.pi * x[:, None] * r[None, :])
    q = (2 * np.pi * (tone * t).sum(axis=1) / (tone * w).sum(axis=1)).imag
    order = np.argsort(q)
    return q[order], x[order]


def apodised_frequencies(case: Case) -> tuple[Any, Any]:
    """Each bin's signal frequency per axis, measured on apodised data (``apodised``: its
    I is already (I − Ī)·h) as ``effective_frequencies`` does on the raw data, with the
    apodised windows' table."""
    return _measured_frequencies(case["I"], case, _apodised_table)


def c10_minimum(case: Case, nu_r: Any, nu_c: Any, lobes: bool = True,
                aliases: bool = False, integrated: bool = False,
                centroid: str = "") -> float:
    """The conditional C10 minimum minus the truth; ``centroid`` "own" / "both" picks
    ``centroid_loss`` with one or both discs' offsets."""
    t = case["truth"]

    def at(c10: float) -> float:
        p = {**t, "C10": c10}
        if centroid:
            return centroid_loss(case, p, nu_r, nu_c, shifted_disc=centroid == "both")
        if integrated:
            return integrated_loss(case, p, nu_r, nu_c)
        return alias_loss(case, p, nu_r, nu_c) if aliases else loss(case, p, nu_r, nu_c, lobes)

    best = minimize_scalar(at,
                           bounds=(t["C10"] - 8, t["C10"] + 8), method="bounded",
                           options={"xatol": 1e-3})
    return float(best.x) - t["C10"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cases", nargs="+", type=Path)
    ap.add_argument("--pixels", action="store_true",
                    help="pixel centre against pixel integral (effective ν)")
    ap.add_argument("--bin", type=int, default=1, help="sum BIN×BIN detector pixels first")
    ap.add_argument("--apodise", action="store_true",
                    help="Hann-apodised spectra: effective, lattice and apodised-measured ν")
    ap.add_argument("--lattice-A", type=float, default=3.905,
                    help="with --apodise: the lattice period whose frequencies are exact")
    args = ap.parse_args()
    if args.apodise:
        print("| case | truth C10 | effective ν | apodised, effective ν | apodised, lattice ν |"
              " apodised, ν measured apodised |\n|---|---|---|---|---|---|")
        a = args.lattice_A
        for path in args.cases:
            case = load(path)
            eff = effective_frequencies(case)
            lattice = (np.round(case["nu_r"] * a) / a, np.round(case["nu_c"] * a) / a)
            apo = apodised(case)
            cells = [c10_minimum(case, *eff), c10_minimum(apo, *eff),
                     c10_minimum(apo, *lattice), c10_minimum(apo, *apodised_frequencies(apo))]
            print(f"| {path.stem} | {case['truth']['C10']:.2f} | "
                  + " | ".join(f"{v:+.2f}" for v in cells) + " |", flush=True)
        return
    if args.pixels:
        print("| case | bin | truth C10 | Γ at the pixel centre | Γ integrated over the pixel |"
              " centroid, own disc | centroid, both discs |\n|---|---|---|---|---|---|---|")
        for path in args.cases:
            case = load(path, args.bin)
            eff = effective_frequencies(case)
            cells = [c10_minimum(case, *eff), c10_minimum(case, *eff, integrated=True),
                     c10_minimum(case, *eff, centroid="own"),
                     c10_minimum(case, *eff, centroid="both")]
            print(f"| {path.stem} | {args.bin} | {case['truth']['C10']:.2f} | "
                  + " | ".join(f"{v:+.2f}" for v in cells) + " |", flush=True)
        return
    print("| case | truth C10 | grid ν, lobes | grid ν, one object | effective ν "
          "| aliases resolved, grid ν | aliases resolved, effective ν |"
          "\n|---|---|---|---|---|---|---|")
    for path in args.cases:
        case = load(path)
        grid = (case["nu_r"], case["nu_c"])
        effective = effective_frequencies(case)
        cells = [c10_minimum(case, *grid), c10_minimum(case, *grid, lobes=False),
                 c10_minimum(case, *effective), c10_minimum(case, *grid, aliases=True),
                 c10_minimum(case, *effective, aliases=True)]
        print(f"| {path.stem} | {case['truth']['C10']:.2f} | "
              + " | ".join(f"{v:+.2f}" for v in cells) + " |", flush=True)


if __name__ == "__main__":
    main()

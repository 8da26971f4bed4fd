// Click-to-measure on the FFT: the clicked bin is refined to the local maximum
// of the power and its sub-pixel position; the bin's offset from zero
// frequency gives the spatial frequency (1/Å) from the displayed sampling,
// and d = 1 / |f| in Å.
import type { Spectrum } from "./fft";

export interface Peak {
  row: number; // fractional bin, fftshifted coordinates
  col: number;
}

/**
 * The strongest bin within `radius` of (row, col), refined to sub-pixel
 * precision along each axis by the vertex of a parabola through the log power
 * of the bin and its two neighbours (exact for a Gaussian peak; a Hann-tapered
 * lattice fringe is close to one). Falls back to the 3×3 power centroid where
 * a neighbour's power is zero.
 */
export function refinePeak(s: Spectrum, row: number, col: number, radius = 3): Peak {
  const at = (r: number, c: number) => s.power[r * s.cols + c];
  const inside = (r: number, c: number) => r >= 0 && r < s.rows && c >= 0 && c < s.cols;
  const r0 = Math.min(Math.max(Math.round(row), 0), s.rows - 1);
  const c0 = Math.min(Math.max(Math.round(col), 0), s.cols - 1);
  let best = -Infinity;
  let br = r0;
  let bc = c0;
  for (let r = r0 - radius; r <= r0 + radius; r++) {
    for (let c = c0 - radius; c <= c0 + radius; c++) {
      if (!inside(r, c) || (r === s.rows / 2 && c === s.cols / 2)) continue; // never zero frequency
      if (at(r, c) > best) [best, br, bc] = [at(r, c), r, c];
    }
  }
  const vertex = (m: number, z: number, p: number): number | null => {
    if (!(m > 0 && z > 0 && p > 0)) return null;
    const [a, b, c] = [Math.log(m), Math.log(z), Math.log(p)];
    const curv = a - 2 * b + c;
    return curv < 0 ? Math.max(-0.5, Math.min(0.5, (0.5 * (a - c)) / curv)) : null;
  };
  const dr = inside(br - 1, bc) && inside(br + 1, bc) ? vertex(at(br - 1, bc), best, at(br + 1, bc)) : null;
  const dc = inside(br, bc - 1) && inside(br, bc + 1) ? vertex(at(br, bc - 1), best, at(br, bc + 1)) : null;
  if (dr !== null && dc !== null) return { row: br + dr, col: bc + dc };
  let sw = 0;
  let sr = 0;
  let sc = 0;
  for (let r = br - 1; r <= br + 1; r++) {
    for (let c = bc - 1; c <= bc + 1; c++) {
      if (!inside(r, c)) continue;
      sw += at(r, c);
      sr += at(r, c) * r;
      sc += at(r, c) * c;
    }
  }
  return sw > 0 ? { row: sr / sw, col: sc / sw } : { row: br, col: bc };
}

/** The strongest bin at least `minRadius` bins from zero frequency (null if none). */
export function strongestBin(s: Spectrum, minRadius: number): Peak | null {
  let best = -Infinity;
  let at: Peak | null = null;
  for (let r = 0; r < s.rows; r++) {
    for (let c = 0; c < s.cols; c++) {
      if (Math.hypot(r - s.rows / 2, c - s.cols / 2) < minRadius) continue;
      const v = s.power[r * s.cols + c];
      if (v > best) [best, at] = [v, { row: r, col: c }];
    }
  }
  return at;
}

export interface Measurement {
  freqRow: number; // cycles per Å
  freqCol: number;
  dA: number; // d-spacing in Å (Infinity at zero frequency)
}

/** Spatial frequency and d-spacing of an fftshifted bin, from Å per image pixel [row, col]. */
export function dSpacing(peak: Peak, rows: number, cols: number, samplingA: readonly [number, number]): Measurement {
  const freqRow = (peak.row - rows / 2) / (rows * samplingA[0]);
  const freqCol = (peak.col - cols / 2) / (cols * samplingA[1]);
  const f = Math.hypot(freqRow, freqCol);
  return { freqRow, freqCol, dA: f > 0 ? 1 / f : Infinity };
}

export function dSpacingText(m: Measurement): string {
  if (!Number.isFinite(m.dA)) return "d = ∞ (zero frequency)";
  return `d = ${m.dA.toFixed(m.dA < 10 ? 3 : 1)} Å`;
}

// Peaks of an FFT power spectrum, for click-to-measure. A click snaps to the
// nearest *peak* within the snap radius: a local maximum of the power that
// stands clearly above its surroundings, so a click on empty background gives
// no answer rather than the d-spacing of a noise speckle. The background is
// the median of the power around the candidate (robust to the peak itself and
// to its neighbours); the position is then refined to sub-pixel precision.
import type { Spectrum } from "./fft";

export interface Peak {
  row: number; // fractional bin, fftshifted coordinates
  col: number;
}

/**
 * How far above the local median power a peak must stand. The power of a noise
 * bin is exponentially distributed, so a noise bin reaches 20 × its median with
 * probability e^(−20·ln 2) ≈ 1e-6; on the demo's reconstruction the strongest
 * speckle of the background reaches ~12 × while its first-order lattice peaks
 * stand at 100–20000 ×.
 */
export const PEAK_FACTOR = 20;
/** Half-width (bins) of the box whose median is a candidate's background. */
export const BACKGROUND_HALF = 8;

const inside = (s: Spectrum, r: number, c: number) => r >= 0 && r < s.rows && c >= 0 && c < s.cols;
const powerAt = (s: Spectrum, r: number, c: number) => s.power[r * s.cols + c];
const isZeroFrequency = (s: Spectrum, r: number, c: number) => r === s.rows / 2 && c === s.cols / 2;

/** Median of the power in the (2·half+1)² box around (r, c), clipped to the spectrum. */
export function localBackground(s: Spectrum, r: number, c: number, half = BACKGROUND_HALF): number {
  const vals: number[] = [];
  for (let i = r - half; i <= r + half; i++) {
    for (let j = c - half; j <= c + half; j++) if (inside(s, i, j)) vals.push(powerAt(s, i, j));
  }
  vals.sort((a, b) => a - b);
  const m = vals.length >> 1;
  return vals.length % 2 ? vals[m] : 0.5 * (vals[m - 1] + vals[m]);
}

/** Is bin (r, c) a local maximum (≥ its 8 neighbours, > 0) standing PEAK_FACTOR above its background? */
export function isPeak(s: Spectrum, r: number, c: number): boolean {
  if (!inside(s, r, c) || isZeroFrequency(s, r, c)) return false;
  const p = powerAt(s, r, c);
  if (!(p > 0)) return false;
  for (let i = r - 1; i <= r + 1; i++) {
    for (let j = c - 1; j <= c + 1; j++) if (inside(s, i, j) && powerAt(s, i, j) > p) return false;
  }
  return p > PEAK_FACTOR * localBackground(s, r, c);
}

/**
 * The peak nearest to (row, col) whose bin lies within `radius` bins (the
 * stronger one of two equally near), refined to sub-pixel; null if none.
 */
export function snapPeak(s: Spectrum, row: number, col: number, radius: number): Peak | null {
  let best: { r: number; c: number; dist: number; p: number } | null = null;
  const rad = Math.max(0, radius);
  for (let r = Math.ceil(row - rad); r <= Math.floor(row + rad); r++) {
    for (let c = Math.ceil(col - rad); c <= Math.floor(col + rad); c++) {
      const dist = Math.hypot(r - row, c - col);
      if (dist > rad || !isPeak(s, r, c)) continue;
      const p = powerAt(s, r, c);
      if (!best || dist < best.dist - 1e-9 || (Math.abs(dist - best.dist) <= 1e-9 && p > best.p)) best = { r, c, dist, p };
    }
  }
  return best ? subpixel(s, best.r, best.c) : null;
}

/**
 * Sub-pixel position of the maximum at bin (r, c): along each axis the vertex
 * of a parabola through the log power of the bin and its two neighbours
 * (exact for a Gaussian peak; a Hann-tapered lattice fringe is close to one).
 * Falls back to the 3×3 power centroid where a neighbour's power is zero.
 */
export function subpixel(s: Spectrum, r: number, c: number): Peak {
  const z = powerAt(s, r, c);
  const vertex = (m: number, p: number): number | null => {
    if (!(m > 0 && z > 0 && p > 0)) return null;
    const [a, b, d] = [Math.log(m), Math.log(z), Math.log(p)];
    const curv = a - 2 * b + d;
    return curv < 0 ? Math.max(-0.5, Math.min(0.5, (0.5 * (a - d)) / curv)) : null;
  };
  const dr = inside(s, r - 1, c) && inside(s, r + 1, c) ? vertex(powerAt(s, r - 1, c), powerAt(s, r + 1, c)) : null;
  const dc = inside(s, r, c - 1) && inside(s, r, c + 1) ? vertex(powerAt(s, r, c - 1), powerAt(s, r, c + 1)) : null;
  if (dr !== null && dc !== null) return { row: r + dr, col: c + dc };
  let sw = 0;
  let sr = 0;
  let sc = 0;
  for (let i = r - 1; i <= r + 1; i++) {
    for (let j = c - 1; j <= c + 1; j++) {
      if (!inside(s, i, j)) continue;
      const w = powerAt(s, i, j);
      sw += w;
      sr += w * i;
      sc += w * j;
    }
  }
  return sw > 0 ? { row: sr / sw, col: sc / sw } : { row: r, col: c };
}

/** The strongest peak at least `minRadius` bins from zero frequency (keyboard access), or null. */
export function strongestPeak(s: Spectrum, minRadius: number): Peak | null {
  let best = -Infinity;
  let at: { r: number; c: number } | null = null;
  for (let r = 0; r < s.rows; r++) {
    for (let c = 0; c < s.cols; c++) {
      if (Math.hypot(r - s.rows / 2, c - s.cols / 2) < minRadius) continue;
      const v = powerAt(s, r, c);
      if (v > best) [best, at] = [v, { r, c }];
    }
  }
  return at && isPeak(s, at.r, at.c) ? subpixel(s, at.r, at.c) : null;
}

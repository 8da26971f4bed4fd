// What a measured FFT peak means: the peak's offset from zero frequency (bins,
// fftshifted) over the padded size and the displayed sampling gives its
// spatial frequency g (1/Å), hence d = 1 / |g| in Å and the direction of g.
// Peak finding and snapping are in peaks.ts.
import type { Peak } from "./peaks";

export interface Measurement {
  freqRow: number; // cycles per Å
  freqCol: number;
  gA: number; // |g| in 1/Å (cycles per Å, no 2π)
  dA: number; // d-spacing in Å (Infinity at zero frequency)
  /**
   * Direction of g in degrees from the scan's column axis (+x, to the right on
   * screen), counter-clockwise as seen on screen (rows grow downwards), in (−180, 180].
   */
  angleDeg: number;
}

export const NO_PEAK_TEXT = "no peak near";

/** Direction of (dx right, dy up) in degrees, in (−180, 180] after rounding to `digits`. */
export function angleDegrees(dx: number, dy: number, digits = 1): number {
  const k = 10 ** digits;
  const a = Math.round(((Math.atan2(dy, dx) * 180) / Math.PI) * k) / k;
  return a <= -180 ? a + 360 : a === 0 ? 0 : a; // no "-0.0"
}

/** Spatial frequency, d-spacing and direction of an fftshifted bin, from Å per image pixel [row, col]. */
export function dSpacing(peak: Peak, rows: number, cols: number, samplingA: readonly [number, number]): Measurement {
  const freqRow = (peak.row - rows / 2) / (rows * samplingA[0]);
  const freqCol = (peak.col - cols / 2) / (cols * samplingA[1]);
  const gA = Math.hypot(freqRow, freqCol);
  return { freqRow, freqCol, gA, dA: gA > 0 ? 1 / gA : Infinity, angleDeg: angleDegrees(freqCol, -freqRow) };
}

/** `d = 1.952 Å, |g| = 0.5123 Å⁻¹, angle = 90.0°` (SPEC §3). */
export function dSpacingText(m: Measurement): string {
  if (!Number.isFinite(m.dA)) return "d = ∞ (zero frequency)";
  const g = m.gA.toPrecision(4);
  return `d = ${m.dA.toFixed(m.dA < 10 ? 3 : 1)} Å, |g| = ${g} Å⁻¹, angle = ${m.angleDeg.toFixed(1)}°`;
}

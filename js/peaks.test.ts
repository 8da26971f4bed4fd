import { describe, expect, it } from "vitest";
import { angleDegrees, dSpacing, dSpacingText, NO_PEAK_TEXT } from "./dspacing";
import { powerSpectrum, type Spectrum } from "./fft";
import { isPeak, snapPeak, strongestPeak } from "./peaks";

/** Seeded standard normal deviates (mulberry32 + Box–Muller): the same noise every run. */
function normal(seed: number): () => number {
  let a = seed >>> 0;
  const uniform = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return () => Math.sqrt(-2 * Math.log(1 - uniform())) * Math.cos(2 * Math.PI * uniform());
}

// A SrTiO3-like square lattice (a = 3.905 Å) at 0.3 Å per pixel, rotated by 17°
// (counter-clockwise on screen), with white noise: the image's spectrum has peaks
// at |g| = 1/a along −17°, 73°, 163°, −107° and weaker (1 1) ones at 1/(a/√2).
const a = 3.905;
const sampling: [number, number] = [0.3, 0.3];
const th = (17 * Math.PI) / 180;

function lattice(rows: number, cols: number, noise: number, seed = 1): Float64Array {
  const rnd = normal(seed);
  const img = new Float64Array(rows * cols);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) {
    const x = c * sampling[1];
    const y = -r * sampling[0]; // up on screen
    const u = x * Math.cos(th) + y * Math.sin(th);
    const w = -x * Math.sin(th) + y * Math.cos(th);
    img[r * cols + c] = Math.cos((2 * Math.PI * u) / a) + Math.cos((2 * Math.PI * w) / a)
      + 0.4 * Math.cos((2 * Math.PI * (u + w)) / a) + noise * rnd();
  }
  return img;
}

/** Fractional bin of a spatial frequency (cycles/Å, x right, y up) in an fftshifted spectrum. */
function binOf(s: Spectrum, fx: number, fy: number): { row: number; col: number } {
  return { row: s.rows / 2 - fy * s.rows * sampling[0], col: s.cols / 2 + fx * s.cols * sampling[1] };
}

const angleOff = (x: number, y: number) => Math.abs(((x - y + 540) % 360) - 180);

describe("snapping to a peak of a noisy lattice", () => {
  const s = powerSpectrum(lattice(150, 170, 1.5), 170, 0, 0, 150, 170); // padded to 256 × 256
  const g10 = binOf(s, Math.cos(th) / a, Math.sin(th) / a); // the (1 0) peak, 17° up from the column axis

  it("a click 3 bins off the (1 0) peak snaps to it: d = a within 0.3 %, |g| = 1/d, its angle", () => {
    const peak = snapPeak(s, g10.row + 2, g10.col - 2, 6)!;
    expect(peak).not.toBeNull();
    expect(Math.hypot(peak.row - g10.row, peak.col - g10.col)).toBeLessThan(0.3); // sub-pixel
    const m = dSpacing(peak, s.rows, s.cols, sampling);
    expect(Math.abs(m.dA - a) / a).toBeLessThan(0.003);
    expect(m.gA * m.dA).toBeCloseTo(1, 12);
    expect(angleOff(m.angleDeg, 17)).toBeLessThan(0.5); // u grows along (cos 17°, sin 17°): up-right
    expect(dSpacingText(m)).toMatch(/^d = 3\.9\d\d Å, \|g\| = 0\.25\d\d Å⁻¹, angle = 1[67]\.\d°$/);
  });
  it("the opposite peak reads 180° round, the (1 1) peak a/√2 at 62°", () => {
    const opp = binOf(s, -Math.cos(th) / a, -Math.sin(th) / a);
    const m = dSpacing(snapPeak(s, opp.row, opp.col, 6)!, s.rows, s.cols, sampling);
    expect(angleOff(m.angleDeg, 17 - 180)).toBeLessThan(0.5);
    const f = (Math.cos(th) - Math.sin(th)) / a;
    const g = (Math.sin(th) + Math.cos(th)) / a; // u + w: (cos − sin, sin + cos) / a
    const b11 = binOf(s, f, g);
    const m11 = dSpacing(snapPeak(s, b11.row + 1, b11.col + 1, 6)!, s.rows, s.cols, sampling);
    expect(Math.abs(m11.dA - a / Math.SQRT2) / (a / Math.SQRT2)).toBeLessThan(0.01);
    expect(angleOff(m11.angleDeg, 62)).toBeLessThan(0.5);
  });
  it("a click on the background between peaks finds none", () => {
    // the middle of a reciprocal cell: ~14 bins from the nearest peak
    for (const [i, j] of [[0.5, 0.5], [-0.5, 0.5], [1.5, 0.5], [0.5, -1.5]]) {
      const fx = (i * Math.cos(th) - j * Math.sin(th)) / a;
      const fy = (i * Math.sin(th) + j * Math.cos(th)) / a;
      const at = binOf(s, fx, fy);
      expect(snapPeak(s, at.row, at.col, 6)).toBeNull();
    }
  });
  it("noise alone has no peaks anywhere", () => {
    const rnd = normal(7);
    const n = 128;
    const noise = Float64Array.from({ length: n * n }, () => rnd());
    const ns = powerSpectrum(noise, n, 0, 0, n, n);
    let found = 0;
    for (let r = 0; r < ns.rows; r++) for (let c = 0; c < ns.cols; c++) if (isPeak(ns, r, c)) found++;
    expect(found).toBe(0);
  });
  it("the keyboard's strongest peak is a first-order one", () => {
    const m = dSpacing(strongestPeak(s, 4)!, s.rows, s.cols, sampling);
    expect(Math.abs(m.dA - a) / a).toBeLessThan(0.003);
    expect(strongestPeak(powerSpectrum(new Float64Array(64 * 64), 64, 0, 0, 64, 64), 4)).toBeNull(); // flat: none
  });
});

describe("snapping rules", () => {
  // a strong and a weak fringe 6 bins apart, one between bins, and some noise (without any, the
  // taper's faint side lobes would stand far above a background of rounding errors)
  const n = 64;
  const rnd = normal(3);
  const img = new Float64Array(n * n);
  for (let r = 0; r < n; r++) for (let c = 0; c < n; c++) {
    img[r * n + c] = 3 * Math.cos((2 * Math.PI * 10 * c) / n) + 0.5 * Math.cos((2 * Math.PI * (10 * c + 6 * r)) / n)
      + Math.cos((2 * Math.PI * 20.3 * c) / n) + 0.05 * rnd();
  }
  const s = powerSpectrum(img, n, 0, 0, n, n);

  it("the nearest peak wins over a stronger one", () => {
    // click between (32, 42) [strong] and (38, 42) [weak], nearer the weak one
    const p = snapPeak(s, 36.5, 42, 6)!;
    expect(Math.round(p.row)).toBe(38);
    expect(Math.round(snapPeak(s, 33.5, 42, 6)!.row)).toBe(32);
  });
  it("sub-pixel: a fringe of 20.3 cycles is found at 20.3 ± 0.1 bins", () => {
    const p = snapPeak(s, 32, 52, 3)!;
    expect(Math.abs(p.col - 32 - 20.3)).toBeLessThan(0.1);
    expect(Math.abs(p.row - 32)).toBeLessThan(0.01);
  });
  it("nothing beyond the radius; zero frequency is never a peak", () => {
    expect(snapPeak(s, 32, 32 + 10 - 5, 4)).toBeNull();
    expect(snapPeak(s, 32, 32, 3)).toBeNull();
    expect(isPeak(s, 32, 32)).toBe(false);
  });
});

describe("d, |g| and angle of a bin", () => {
  it("angle: from the column axis, counter-clockwise on screen, in (−180, 180]", () => {
    const ang = (dr: number, dc: number) => dSpacing({ row: 64 + dr, col: 64 + dc }, 128, 128, [1, 1]).angleDeg;
    expect(ang(0, 5)).toBe(0);
    expect(ang(-5, 0)).toBe(90); // up on screen
    expect(ang(0, -5)).toBe(180);
    expect(ang(5, 0)).toBe(-90);
    expect(ang(-5, 5)).toBe(45);
    expect(angleDegrees(-1, -1e-9)).toBe(180); // rounds to −180: reported as 180
    expect(Object.is(angleDegrees(1, -1e-9), 0)).toBe(true); // no −0.0
  });
  it("anisotropic sampling, |g| = 1/d, and the zero bin", () => {
    const m = dSpacing({ row: 64 + 10, col: 64 }, 128, 128, [0.5, 0.25]);
    expect(m.dA).toBeCloseTo((128 * 0.5) / 10, 10);
    expect(m.gA).toBeCloseTo(10 / (128 * 0.5), 12);
    const m2 = dSpacing({ row: 64, col: 64 + 10 }, 128, 128, [0.5, 0.25]);
    expect(m2.dA).toBeCloseTo((128 * 0.25) / 10, 10);
    expect(dSpacing({ row: 64, col: 64 }, 128, 128, [1, 1]).dA).toBe(Infinity);
    expect(NO_PEAK_TEXT).toBe("no peak near");
  });
  it("text: d, |g| and angle in SPEC wording", () => {
    const m = dSpacing({ row: 64, col: 64 + 16.4 }, 128, 128, [0.25, 0.25]);
    expect(dSpacingText(m)).toBe("d = 1.951 Å, |g| = 0.5125 Å⁻¹, angle = 0.0°");
  });
});

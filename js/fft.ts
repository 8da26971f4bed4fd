// 2-D FFT of what is on screen: radix-2 (sizes padded to powers of two),
// log power, fftshift. The window: the mean is removed and a Hann taper keeps
// the crop's edges from painting a cross through the spectrum.

export const MAX_FFT = 512;

export function nextPow2(n: number): number {
  let p = 1;
  while (p < n) p *= 2;
  return p;
}

/** In-place radix-2 FFT of (re, im)[offset + stride·k], k < n (n a power of two). */
export function fft1d(re: Float64Array, im: Float64Array, n: number, offset = 0, stride = 1): void {
  if (n & (n - 1)) throw new Error(`FFT length ${n} is not a power of two`);
  for (let i = 1, j = 0; i < n; i++) {
    let bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) {
      const a = offset + stride * i;
      const b = offset + stride * j;
      [re[a], re[b]] = [re[b], re[a]];
      [im[a], im[b]] = [im[b], im[a]];
    }
  }
  for (let len = 2; len <= n; len <<= 1) {
    const ang = (-2 * Math.PI) / len;
    const wr = Math.cos(ang);
    const wi = Math.sin(ang);
    for (let i = 0; i < n; i += len) {
      let cr = 1;
      let ci = 0;
      for (let k = 0; k < len / 2; k++) {
        const a = offset + stride * (i + k);
        const b = offset + stride * (i + k + len / 2);
        const xr = re[b] * cr - im[b] * ci;
        const xi = re[b] * ci + im[b] * cr;
        re[b] = re[a] - xr;
        im[b] = im[a] - xi;
        re[a] += xr;
        im[a] += xi;
        const t = cr * wr - ci * wi;
        ci = cr * wi + ci * wr;
        cr = t;
      }
    }
  }
}

/** In-place 2-D FFT of a rows × cols row-major array (both powers of two). */
export function fft2d(re: Float64Array, im: Float64Array, rows: number, cols: number): void {
  for (let r = 0; r < rows; r++) fft1d(re, im, cols, r * cols, 1);
  for (let c = 0; c < cols; c++) fft1d(re, im, rows, c, cols);
}

export interface Spectrum {
  power: Float64Array; // |F|², fftshifted: zero frequency at (rows/2, cols/2)
  rows: number;
  cols: number;
}

/**
 * Power spectrum of the window [r0, r0+h) × [c0, c0+w) of a rows×cols image
 * (`width` = its row length), padded to powers of two (at most MAX_FFT).
 */
export function powerSpectrum(
  values: ArrayLike<number>, width: number, r0: number, c0: number, h: number, w: number,
): Spectrum {
  h = Math.min(h, MAX_FFT);
  w = Math.min(w, MAX_FFT);
  const rows = nextPow2(h);
  const cols = nextPow2(w);
  const re = new Float64Array(rows * cols);
  const im = new Float64Array(rows * cols);
  const hann = (k: number, n: number) => (n > 1 ? 0.5 - 0.5 * Math.cos((2 * Math.PI * (k + 0.5)) / n) : 1);
  const wr = Float64Array.from({ length: h }, (_, k) => hann(k, h));
  const wc = Float64Array.from({ length: w }, (_, k) => hann(k, w));
  // the taper-weighted mean: removing it leaves exactly zero at zero frequency
  let sum = 0;
  let weight = 0;
  for (let r = 0; r < h; r++) {
    for (let c = 0; c < w; c++) {
      sum += values[(r0 + r) * width + c0 + c] * wr[r] * wc[c];
      weight += wr[r] * wc[c];
    }
  }
  const mean = sum / weight;
  for (let r = 0; r < h; r++) {
    for (let c = 0; c < w; c++) re[r * cols + c] = (values[(r0 + r) * width + c0 + c] - mean) * wr[r] * wc[c];
  }
  fft2d(re, im, rows, cols);
  const power = new Float64Array(rows * cols);
  const hr = rows / 2;
  const hc = cols / 2;
  for (let r = 0; r < rows; r++) {
    const sr = (r + hr) % rows;
    for (let c = 0; c < cols; c++) {
      const i = r * cols + c;
      power[sr * cols + ((c + hc) % cols)] = re[i] * re[i] + im[i] * im[i];
    }
  }
  return { power, rows, cols };
}

/** log(1 + power) scaled to 0..1 between its 50th percentile and its maximum. */
export function logDisplay(s: Spectrum): Float64Array {
  const out = new Float64Array(s.power.length);
  for (let i = 0; i < out.length; i++) out[i] = Math.log1p(s.power[i]);
  const sorted = Float64Array.from(out).sort();
  const lo = sorted[Math.floor(sorted.length / 2)];
  const hi = sorted[sorted.length - 1];
  const span = hi > lo ? hi - lo : 1;
  for (let i = 0; i < out.length; i++) out[i] = Math.min(1, Math.max(0, (out[i] - lo) / span));
  return out;
}

// FFT view: the log power of what is on screen (canvas "FFT image"); a click
// snaps to the nearest peak within SNAP_PX and shows its d-spacing, |g| and
// direction ("d-spacing"), or "no peak near" when there is none.
import { lut } from "./colormaps";
import { element } from "./dom";
import { dSpacing, dSpacingText, NO_PEAK_TEXT } from "./dspacing";
import { logDisplay, powerSpectrum, type Spectrum } from "./fft";
import { snapPeak, strongestPeak, type Peak } from "./peaks";

const FFT_PX = 256; // CSS px of the FFT canvas
const SNAP_PX = 8; // a click snaps to a peak at most this far (CSS px), whatever the FFT size

export interface FFTInput {
  values: Float64Array; // the frame's values, row-major
  cols: number; // frame width
  r0: number; // visible window in frame px
  c0: number;
  h: number;
  w: number;
  samplingA: [number, number]; // Å per frame px
}

export class FFTView {
  readonly el: HTMLElement;
  readonly canvas: HTMLCanvasElement;
  readonly readout: HTMLElement;
  private spectrum: Spectrum | null = null;
  private sampling: [number, number] = [1, 1];
  private shownImage: ImageData | null = null;
  private peak: Peak | null = null;
  private missed: { row: number; col: number; radius: number } | null = null; // a click with no peak near

  constructor() {
    this.el = element("div", "livessb-fft");
    this.canvas = element("canvas", "", "FFT image");
    this.canvas.tabIndex = 0;
    this.canvas.title = "click near a peak to measure its d-spacing (Enter: the strongest peak)";
    this.canvas.style.width = `${FFT_PX}px`;
    this.canvas.style.height = `${FFT_PX}px`;
    this.readout = element("output", "livessb-dspacing", "d-spacing");
    this.readout.setAttribute("role", "status");
    this.readout.hidden = true;
    this.el.append(this.canvas, this.readout);
    this.el.hidden = true;
    this.canvas.addEventListener("click", (e) => this.click(e));
    this.canvas.addEventListener("keydown", (e) => {
      if (e.key !== "Enter") return;
      e.preventDefault();
      this.measureStrongest();
    });
  }

  get shown(): boolean {
    return !this.el.hidden;
  }

  show(on: boolean): void {
    this.el.hidden = !on;
  }

  /** Recompute the spectrum of the visible window and paint it. */
  update(input: FFTInput): void {
    const h = Math.max(1, Math.floor(input.h));
    const w = Math.max(1, Math.floor(input.w));
    if (h < 4 || w < 4) return;
    const s = powerSpectrum(input.values, input.cols, Math.floor(input.r0), Math.floor(input.c0), h, w);
    if (this.spectrum && (s.rows !== this.spectrum.rows || s.cols !== this.spectrum.cols)) {
      this.peak = this.missed = null; // bins of another size: the marks would sit on other frequencies
    }
    this.spectrum = s;
    this.sampling = input.samplingA;
    const shown = logDisplay(s);
    const table = lut("gray");
    const img = new ImageData(s.cols, s.rows);
    for (let i = 0; i < shown.length; i++) {
      const k = 4 * Math.min(255, Math.floor(shown[i] * 256));
      img.data[4 * i] = table[k];
      img.data[4 * i + 1] = table[k + 1];
      img.data[4 * i + 2] = table[k + 2];
      img.data[4 * i + 3] = 255;
    }
    this.canvas.width = s.cols;
    this.canvas.height = s.rows;
    this.shownImage = img;
    this.canvas.dataset.fftShape = `${s.rows}x${s.cols}`;
    this.paint();
  }

  private paint(): void {
    const ctx = this.canvas.getContext("2d");
    if (!ctx || !this.shownImage) return;
    ctx.putImageData(this.shownImage, 0, 0);
    const k = this.canvas.width / FFT_PX; // bins per CSS px: marks keep their on-screen size
    ctx.lineWidth = Math.max(1, k);
    if (this.peak) {
      // g from zero frequency to the ring: its length is |g|, its direction the angle
      ctx.strokeStyle = "rgba(255, 202, 58, 0.6)";
      ctx.beginPath();
      ctx.moveTo(this.canvas.width / 2 + 0.5, this.canvas.height / 2 + 0.5); // centre of the zero bin
      ctx.lineTo(this.peak.col + 0.5, this.peak.row + 0.5);
      ctx.stroke();
      ctx.strokeStyle = "#ffca3a";
      ctx.beginPath();
      ctx.arc(this.peak.col + 0.5, this.peak.row + 0.5, 4 * k, 0, 2 * Math.PI);
      ctx.stroke();
    } else if (this.missed) {
      ctx.strokeStyle = "rgba(255, 89, 94, 0.8)"; // the snap disc that held no peak
      ctx.setLineDash([3 * k, 3 * k]);
      ctx.beginPath();
      ctx.arc(this.missed.col + 0.5, this.missed.row + 0.5, this.missed.radius, 0, 2 * Math.PI);
      ctx.stroke();
      ctx.setLineDash([]);
    }
  }

  private click(e: MouseEvent): void {
    const s = this.spectrum;
    if (!s) return;
    const rect = this.canvas.getBoundingClientRect();
    const col = ((e.clientX - rect.left) / rect.width) * s.cols - 0.5;
    const row = ((e.clientY - rect.top) / rect.height) * s.rows - 0.5;
    const radius = rect.width > 0 ? (SNAP_PX * s.cols) / rect.width : SNAP_PX;
    const peak = snapPeak(s, row, col, radius);
    this.report(peak, peak ? null : { row, col, radius });
  }

  /** Keyboard: the strongest peak away from the low-frequency core. */
  private measureStrongest(): void {
    const s = this.spectrum;
    if (s) this.report(strongestPeak(s, Math.max(4, s.rows / 32)), null);
  }

  private report(peak: Peak | null, missed: FFTView["missed"]): void {
    const s = this.spectrum;
    if (!s) return;
    this.peak = peak;
    this.missed = missed;
    const out = this.readout;
    if (peak) {
      const m = dSpacing(peak, s.rows, s.cols, this.sampling);
      out.textContent = dSpacingText(m);
      out.dataset.dA = String(m.dA);
      out.dataset.gA = String(m.gA);
      out.dataset.angleDeg = String(m.angleDeg);
    } else {
      out.textContent = NO_PEAK_TEXT;
      delete out.dataset.dA;
      delete out.dataset.gA;
      delete out.dataset.angleDeg;
    }
    out.hidden = false;
    this.paint();
  }
}

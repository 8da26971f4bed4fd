// FFT view: the log power of what is on screen (canvas "FFT image"); a click
// refines to the nearest peak and shows its d-spacing in Å ("d-spacing").
import { lut } from "./colormaps";
import { element } from "./dom";
import { dSpacing, dSpacingText, refinePeak, strongestBin, type Peak } from "./dspacing";
import { logDisplay, powerSpectrum, type Spectrum } from "./fft";

const FFT_PX = 256; // CSS px of the FFT canvas

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

  constructor() {
    this.el = element("div", "livessb-fft");
    this.canvas = element("canvas", "", "FFT image");
    this.canvas.tabIndex = 0;
    this.canvas.title = "click a peak to measure its d-spacing (Enter: the strongest peak)";
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
    if (this.peak) {
      ctx.strokeStyle = "#ffca3a";
      ctx.lineWidth = Math.max(1, this.canvas.width / FFT_PX);
      const r = 4 * (this.canvas.width / FFT_PX);
      ctx.beginPath();
      ctx.arc(this.peak.col + 0.5, this.peak.row + 0.5, r, 0, 2 * Math.PI);
      ctx.stroke();
    }
  }

  private click(e: MouseEvent): void {
    const s = this.spectrum;
    if (!s) return;
    const rect = this.canvas.getBoundingClientRect();
    const col = ((e.clientX - rect.left) / rect.width) * s.cols - 0.5;
    const row = ((e.clientY - rect.top) / rect.height) * s.rows - 0.5;
    this.measure(row, col, Math.max(2, Math.round(s.rows / 64)));
  }

  /** Keyboard: the strongest bin away from the low-frequency core. */
  private measureStrongest(): void {
    const s = this.spectrum;
    if (!s) return;
    const at = strongestBin(s, Math.max(4, s.rows / 32));
    if (at) this.measure(at.row, at.col, 1);
  }

  private measure(row: number, col: number, radius: number): void {
    const s = this.spectrum;
    if (!s) return;
    this.peak = refinePeak(s, row, col, radius);
    const m = dSpacing(this.peak, s.rows, s.cols, this.sampling);
    this.readout.textContent = dSpacingText(m);
    this.readout.dataset.dA = String(m.dA);
    this.readout.hidden = false;
    this.paint();
  }
}

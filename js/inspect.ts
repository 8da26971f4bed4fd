// Inspection controls: colormap, phase/amplitude view, contrast (auto 1–99 %
// and manual limits over a histogram), reset view and the FFT toggle.
import { COLORMAPS, isColormap, type ColormapName } from "./colormaps";
import { histogramFraction, histogramValue, type Histogram } from "./contrast";
import { button, element, onCommit } from "./dom";
import type { ViewKind } from "./pins";

export interface InspectCallbacks {
  onColormap: (name: ColormapName) => void;
  onView: (view: ViewKind) => void;
  onAutoContrast: () => void;
  onLimits: (lo: number, hi: number) => void; // manual limits
  onResetView: () => void;
  onFFT: (shown: boolean) => void;
}

const HIST_W = 240;
const HIST_H = 48;

export class InspectPanel {
  readonly el: HTMLElement;
  readonly colormap: HTMLSelectElement;
  readonly view: HTMLSelectElement;
  readonly autoButton: HTMLButtonElement;
  readonly resetViewButton: HTMLButtonElement;
  readonly fftButton: HTMLButtonElement;
  readonly viewRow: HTMLElement; // colormap, view, reset view, FFT (layout.ts adds the image's other controls)
  readonly contrastRow: HTMLElement; // auto contrast, limits, histogram
  private lo: HTMLInputElement;
  private hi: HTMLInputElement;
  private hist: HTMLCanvasElement;
  private histogram: Histogram | null = null;
  private limits: [number, number] = [0, 1];
  private dragFrom: number | null = null;

  constructor(private readonly cb: InspectCallbacks) {
    this.el = element("div", "livessb-inspect");
    this.colormap = element("select", "", "colormap");
    for (const name of COLORMAPS) {
      const opt = element("option");
      opt.value = name;
      opt.textContent = name === "twilight" ? "twilight (cyclic)" : name;
      this.colormap.append(opt);
    }
    this.colormap.addEventListener("change", () => {
      if (isColormap(this.colormap.value)) cb.onColormap(this.colormap.value);
    });
    this.view = element("select", "", "view");
    for (const v of ["phase", "amplitude"]) {
      const opt = element("option");
      opt.value = v;
      opt.textContent = v;
      this.view.append(opt);
    }
    this.view.addEventListener("change", () => cb.onView(this.view.value === "amplitude" ? "amplitude" : "phase"));
    this.autoButton = button("auto contrast", "auto contrast");
    this.autoButton.addEventListener("click", () => cb.onAutoContrast());
    this.lo = element("input", "", "contrast min");
    this.hi = element("input", "", "contrast max");
    for (const input of [this.lo, this.hi]) {
      input.type = "number";
      input.step = "any";
      onCommit(input, () => this.typed()); // Enter or leaving the field
    }
    this.hist = element("canvas", "livessb-histogram", "histogram");
    this.hist.title = "drag across the histogram to set the contrast limits (keyboard: the min/max fields)";
    this.hist.width = HIST_W;
    this.hist.height = HIST_H;
    this.hist.addEventListener("pointerdown", (e) => this.histDown(e));
    this.hist.addEventListener("pointermove", (e) => this.histMove(e));
    this.hist.addEventListener("pointerup", () => (this.dragFrom = null));
    this.resetViewButton = button("reset view", "reset view");
    this.resetViewButton.addEventListener("click", () => cb.onResetView());
    this.fftButton = button("FFT", "FFT view");
    this.fftButton.setAttribute("aria-pressed", "false");
    this.fftButton.addEventListener("click", () => {
      const shown = this.fftButton.getAttribute("aria-pressed") !== "true";
      this.fftButton.setAttribute("aria-pressed", String(shown));
      cb.onFFT(shown);
    });
    this.viewRow = element("div", "livessb-row livessb-view-row");
    this.viewRow.append(this.colormap, this.view, this.resetViewButton, this.fftButton);
    this.contrastRow = element("div", "livessb-row livessb-contrast");
    this.contrastRow.append(this.autoButton, this.lo, this.hi, this.hist);
    this.el.append(this.viewRow, this.contrastRow);
  }

  /** Show the histogram of the frame on screen and the limits over it. */
  setHistogram(h: Histogram, limits: [number, number], digits = 3): void {
    this.histogram = h;
    this.limits = limits;
    this.lo.value = limits[0].toFixed(digits);
    this.hi.value = limits[1].toFixed(digits);
    this.drawHistogram();
  }

  private drawHistogram(): void {
    const ctx = this.hist.getContext("2d");
    const h = this.histogram;
    if (!ctx || !h) return;
    ctx.fillStyle = "#222";
    ctx.fillRect(0, 0, HIST_W, HIST_H);
    let max = 1;
    for (const c of h.counts) max = Math.max(max, c);
    ctx.fillStyle = "#9ab";
    const bw = HIST_W / h.counts.length;
    h.counts.forEach((c, i) => {
      const bar = (Math.log1p(c) / Math.log1p(max)) * (HIST_H - 2);
      ctx.fillRect(i * bw, HIST_H - bar, Math.max(bw - 0.5, 0.5), bar);
    });
    const x0 = histogramFraction(h, this.limits[0]) * HIST_W;
    const x1 = histogramFraction(h, this.limits[1]) * HIST_W;
    ctx.fillStyle = "rgba(255, 202, 58, 0.18)";
    ctx.fillRect(x0, 0, x1 - x0, HIST_H);
    ctx.fillStyle = "#ffca3a";
    ctx.fillRect(x0 - 1, 0, 2, HIST_H);
    ctx.fillRect(x1 - 1, 0, 2, HIST_H);
  }

  private typed(): void {
    const lo = Number(this.lo.value);
    const hi = Number(this.hi.value);
    if (Number.isFinite(lo) && Number.isFinite(hi) && hi > lo) this.cb.onLimits(lo, hi);
  }

  private fraction(e: PointerEvent): number {
    const r = this.hist.getBoundingClientRect();
    return r.width > 0 ? (e.clientX - r.left) / r.width : 0;
  }

  private histDown(e: PointerEvent): void {
    if (!this.histogram) return;
    this.hist.setPointerCapture(e.pointerId);
    this.dragFrom = histogramValue(this.histogram, this.fraction(e));
  }

  private histMove(e: PointerEvent): void {
    if (this.dragFrom === null || !this.histogram) return;
    const v = histogramValue(this.histogram, this.fraction(e));
    if (v !== this.dragFrom) this.cb.onLimits(Math.min(v, this.dragFrom), Math.max(v, this.dragFrom));
  }
}

// The line profile tool: "line profile" toggles it; while it is on, a left
// drag on the scan image draws a line instead of a region, and the frame's
// values along it are plotted ("profile", bilinear, in the units of what is
// shown) with the line's length in Å ("profile length"). The line lives in
// scan px, so it stays on the same atoms through zoom and pan, and it is
// resampled when a new frame arrives. Off again, the mouse draws regions.
//
// The tool takes the scan canvas's presses before ScanInput does (a capture
// listener on the canvas's parent), so region drawing needs no knowledge of it;
// the middle button and space + drag still pan.
import { setupCanvas } from "./canvas";
import type { FrameDisplay } from "./display";
import { button, element } from "./dom";
import { lengthText, lineLengthA, plotLine, rescalePoint, sampleLine } from "./profile";
import { scanToCanvas, type ScanPoint, type Viewport } from "./regions";
import type { ScanView } from "./scanview";

const PLOT_W = 320; // CSS px of the plot
const PLOT_H = 96;
const PAD = { left: 72, right: 6, top: 6, bottom: 16 }; // room for "-0.0145 rad"
const MIN_DRAG_PX = 3; // shorter drags are clicks: the previous line stays
const LINE_COLOR = "#ffca3a";

interface Line {
  a: ScanPoint;
  b: ScanPoint;
}

export class ProfileTool {
  readonly el: HTMLElement;
  readonly toggle: HTMLButtonElement;
  readonly length: HTMLElement;
  readonly plot: HTMLCanvasElement;
  private ctx: CanvasRenderingContext2D | null = null;
  private line: Line | null = null;
  private kept: Line | null = null; // the line before the current drag
  private drag: number | null = null; // pointer id of a drag in progress
  private space = false;
  private sampled: unknown = null; // the frame values the plot was drawn from
  private readonly off: (() => void)[] = [];

  constructor(private readonly scan: ScanView, private readonly display: FrameDisplay) {
    this.el = element("div", "livessb-profile");
    this.toggle = button("line profile", "line profile");
    this.toggle.setAttribute("aria-pressed", "false");
    this.toggle.title = "drag on the image to plot the values along a line (off: drag draws regions)";
    this.toggle.addEventListener("click", () => this.setActive(!this.active));
    this.length = element("output", "livessb-profile-length", "profile length");
    this.length.hidden = true;
    this.plot = element("canvas", "livessb-profile-plot", "profile");
    this.plot.setAttribute("role", "img");
    this.plot.hidden = true;
    const row = element("div", "livessb-row");
    row.append(this.toggle, this.length);
    this.el.append(row, this.plot);
    scan.afterPaint.push((ctx, vp) => this.afterPaint(ctx, vp));
    const stage = scan.canvas.parentElement ?? scan.canvas;
    const on = <K extends keyof HTMLElementEventMap>(t: HTMLElement, k: K, f: (e: HTMLElementEventMap[K]) => void) => {
      t.addEventListener(k, f as EventListener, true);
      this.off.push(() => t.removeEventListener(k, f as EventListener, true));
    };
    on(stage, "pointerdown", (e) => this.down(e));
    on(stage, "pointermove", (e) => this.move(e));
    on(stage, "pointerup", (e) => this.up(e));
    on(stage, "pointercancel", (e) => this.up(e));
    // space + drag pans (ScanInput): the tool must let that press through
    on(scan.canvas, "keydown", (e) => {
      if (e.key === " ") this.space = true;
    });
    on(scan.canvas, "keyup", (e) => {
      if (e.key === " ") this.space = false;
    });
    on(scan.canvas, "blur", () => (this.space = false));
  }

  get active(): boolean {
    return this.toggle.getAttribute("aria-pressed") === "true";
  }

  setActive(on: boolean): void {
    this.toggle.setAttribute("aria-pressed", String(on));
    this.scan.canvas.style.cursor = on ? "crosshair" : "";
    if (!on) {
      this.line = this.kept = null;
      this.drag = null;
      this.length.hidden = this.plot.hidden = true;
      delete this.el.dataset.lengthA;
    }
    this.scan.schedule();
  }

  dispose(): void {
    for (const f of this.off) f();
  }

  private point(e: PointerEvent): ScanPoint {
    const p = this.scan.scanPoint(e);
    const { rows, cols } = this.scan.scanShape;
    return { r: Math.min(Math.max(p.r, 0), rows), c: Math.min(Math.max(p.c, 0), cols) };
  }

  private down(e: PointerEvent): void {
    if (!this.active || e.target !== this.scan.canvas || e.button !== 0 || this.space) return;
    e.stopPropagation(); // the press is the line's, not a region's
    e.preventDefault();
    this.scan.canvas.focus();
    this.scan.canvas.setPointerCapture(e.pointerId);
    this.drag = e.pointerId;
    this.kept = this.line;
    const p = this.point(e);
    this.line = { a: p, b: p };
  }

  private move(e: PointerEvent): void {
    if (this.drag === null) {
      // hovering: no region cursors while the tool is on (a middle-button pan passes through)
      if (this.active && e.buttons === 0) e.stopPropagation();
      return;
    }
    if (e.pointerId !== this.drag || !this.line) return;
    e.stopPropagation();
    this.line = { a: this.line.a, b: this.point(e) };
    this.update();
  }

  private up(e: PointerEvent): void {
    if (this.drag === null || e.pointerId !== this.drag) return;
    e.stopPropagation();
    const c = this.scan.canvas;
    if (c.hasPointerCapture(e.pointerId)) c.releasePointerCapture(e.pointerId);
    this.drag = null;
    if (e.type === "pointerup" && this.line) this.line = { a: this.line.a, b: this.point(e) };
    if (!this.line || this.lengthPx(this.line) < MIN_DRAG_PX) this.line = this.kept;
    this.update();
  }

  private lengthPx(line: Line): number {
    const s = this.scan.viewport.scale;
    return Math.hypot(line.b.r - line.a.r, line.b.c - line.a.c) * s;
  }

  /** Length text, plot and overlay of the current line. */
  private update(): void {
    this.sampled = null;
    this.redraw();
    this.scan.schedule();
  }

  private afterPaint(ctx: CanvasRenderingContext2D, vp: Viewport): void {
    if (!this.line) return;
    if (this.sampled !== this.display.frameValues()) this.redraw(); // a new frame under the line
    const a = scanToCanvas(this.line.a, vp);
    const b = scanToCanvas(this.line.b, vp);
    ctx.save();
    ctx.lineCap = "round";
    ctx.strokeStyle = "rgba(0, 0, 0, 0.7)";
    ctx.lineWidth = 4;
    ctx.beginPath();
    ctx.moveTo(a.x, a.y);
    ctx.lineTo(b.x, b.y);
    ctx.stroke();
    ctx.strokeStyle = LINE_COLOR;
    ctx.lineWidth = 2;
    ctx.stroke();
    ctx.fillStyle = LINE_COLOR; // filled dot: the start, where the plot begins
    ctx.beginPath();
    ctx.arc(a.x, a.y, 4, 0, 2 * Math.PI);
    ctx.fill();
    ctx.beginPath();
    ctx.arc(b.x, b.y, 4, 0, 2 * Math.PI);
    ctx.stroke();
    ctx.restore();
  }

  /** Resample the line on the frame shown and repaint the plot and the length. */
  private redraw(): void {
    const line = this.line;
    if (!line) {
      this.length.hidden = this.plot.hidden = true;
      delete this.el.dataset.lengthA;
      return;
    }
    const f = this.display.frame;
    const values = this.display.frameValues();
    const sampling = this.display.meta?.sampling_A ?? null;
    this.sampled = values;
    let lengthA: number | null = null;
    if (f && values && sampling) {
      const shape = { rows: f.rows, cols: f.cols };
      const a = rescalePoint(line.a, this.scan.scanShape, shape);
      const b = rescalePoint(line.b, this.scan.scanShape, shape);
      lengthA = lineLengthA(a, b, sampling);
      const unit = this.display.meta?.view === "phase" ? "rad" : "a.u.";
      this.paintPlot(sampleLine({ values, rows: f.rows, cols: f.cols }, a, b), unit, lengthA);
    } else if (this.scan.scanSamplingA !== null) {
      const s = this.scan.scanSamplingA; // no frame yet: the length from the scan's sampling, no plot
      lengthA = lineLengthA(line.a, line.b, [s, s]);
      this.plot.hidden = true;
    }
    this.length.hidden = lengthA === null;
    if (lengthA === null) return;
    this.length.textContent = lengthText(lengthA);
    this.el.dataset.lengthA = String(lengthA);
  }

  private paintPlot(values: Float64Array, unit: string, lengthA: number): void {
    if (!this.ctx) this.ctx = setupCanvas(this.plot, PLOT_W, PLOT_H);
    const ctx = this.ctx;
    const w = PLOT_W - PAD.left - PAD.right;
    const h = PLOT_H - PAD.top - PAD.bottom;
    const line = plotLine(values, w, h);
    ctx.fillStyle = "#222";
    ctx.fillRect(0, 0, PLOT_W, PLOT_H);
    ctx.strokeStyle = "#666";
    ctx.lineWidth = 1;
    ctx.strokeRect(PAD.left - 0.5, PAD.top - 0.5, w + 1, h + 1);
    ctx.strokeStyle = LINE_COLOR;
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    line.points.forEach((p, i) => (i ? ctx.lineTo : ctx.moveTo).call(ctx, PAD.left + p.x, PAD.top + p.y));
    ctx.stroke();
    ctx.fillStyle = "#ddd";
    ctx.font = "10px sans-serif";
    ctx.textAlign = "right";
    ctx.textBaseline = "top";
    ctx.fillText(`${line.hi.toPrecision(3)} ${unit}`, PAD.left - 4, PAD.top);
    ctx.textBaseline = "bottom";
    ctx.fillText(`${line.lo.toPrecision(3)} ${unit}`, PAD.left - 4, PAD.top + h);
    ctx.textBaseline = "top";
    ctx.textAlign = "left";
    ctx.fillText("0", PAD.left, PAD.top + h + 3);
    ctx.textAlign = "right";
    ctx.fillText(lengthText(lengthA), PAD.left + w, PAD.top + h + 3);
    this.plot.hidden = false;
    this.plot.dataset.samples = String(values.length);
    this.plot.dataset.unit = unit;
  }
}

// The diffraction panel (DOM; its logic is diffraction.ts): the pattern under the pointer
// on the scan image ("diffraction pattern", log scale; the root's data-pattern-position
// is the scan pixel shown), the mean pattern ("mean pattern" toggles it), the BF disk,
// its centre, the BF pixels in use, the repaired pixels and the fitted disk centre drawn
// over it, the descan field ("descan field" arrows), and the "BF pixels" slider (how many
// BF pixels the image on screen sums over: the bf_pixels trait; Python re-renders).
// Self-contained: diffractionPanel() builds it, listens to the model and the scan
// canvas itself, and lets go of them when the widget's root leaves the page.
import type { AnyModel } from "@anywidget/types";
import { setupCanvas } from "./canvas";
import {
  bfPixelsText, decodeRadii, descanArrows, descanText, diskOnCanvas, paintPattern, parseDescan, pixelMark,
  positionText, scanPixelAt, subsetRadiusPx, type Cell, type DescanRecord,
} from "./diffraction";
import { button, element } from "./dom";
import { decodeCodes } from "./frame";
import { LatestWins, Throttle } from "./latest";
import { toBytes, type Traits } from "./model";
import type { ScanView } from "./scanview";
import "./diffraction.css";

const PATTERN_CSS_PX = 240; // longer side of the pattern canvas
const DESCAN_CSS_PX = 120;
const HOVER_MS = 40; // pointer moves: at most one request every 40 ms (and one in flight)
const SLIDER_MS = 150; // BF-pixel slider drags: a re-render at most every 150 ms
const DISK = "#3ad6ff";
const SUBSET = "#ffca3a";
const REPAIRED = "#ff4d4d";
const FITTED = "#ff9d2e";

interface DiffractionTraits extends Traits {
  diffraction_info: Record<string, unknown>; // Python -> JS (widget/diffractionview.py info())
  bf_pixels: number; // JS <-> Python: BF pixels of the image on screen, 0 = all
}

interface Info {
  bin: number;
  bf: { center_row: number; center_col: number; radius_px: number };
  total: number;
  radii: Uint16Array;
  repaired: number[][];
  repairedCount: number;
  descan: DescanRecord | null;
}

interface PatternMeta {
  seq: number;
  kind: "frame" | "mean";
  position: [number, number] | null;
  shape: [number, number];
  range: [number, number];
  total: number;
  descan_centre_px: [number, number] | null;
}

/** Build the panel, wired to the model and the scan view; returns its element. */
export function diffractionPanel(model: AnyModel<Traits>, root: HTMLElement, scan: ScanView): HTMLElement {
  return new DiffractionPanel(model as unknown as AnyModel<DiffractionTraits>, root, scan).el;
}

class DiffractionPanel {
  readonly el = element("section", "livessb-diffraction");
  private readonly canvas = element("canvas", "livessb-pattern", "diffraction pattern");
  private readonly meanButton = button("mean pattern", "mean pattern");
  private readonly readout = element("output", "livessb-pattern-readout", "pattern position");
  private readonly legend = element("div", "livessb-pattern-legend");
  private readonly slider = element("input", "", "BF pixels");
  private readonly count = element("output", "livessb-bf-count", "BF pixels count");
  private readonly descanCanvas = element("canvas", "livessb-descan", "descan field");
  private readonly descanLabel = element("div", "livessb-descan-text", "descan");
  private ctx: CanvasRenderingContext2D | null = null;
  private info: Info | null = null;
  private meta: PatternMeta | null = null;
  private rgba: Uint8ClampedArray | null = null;
  private readonly image = document.createElement("canvas");
  private mean = false;
  private hovered: Cell | null = null;
  private lastPainted = -Infinity;
  private readonly requests: LatestWins<Cell | null>;
  private readonly hover: Throttle<Cell>;
  private readonly sliderSet: Throttle<number>;
  private readonly off: (() => void)[] = [];

  constructor(private readonly model: AnyModel<DiffractionTraits>, private readonly root: HTMLElement, private readonly scan: ScanView) {
    const title = element("div", "livessb-diffraction-title");
    title.textContent = "Diffraction pattern (log scale)";
    this.canvas.setAttribute("role", "img");
    this.meanButton.setAttribute("aria-pressed", "false");
    this.meanButton.title = "show the mean of all patterns (off: the pattern under the pointer on the scan image)";
    this.slider.type = "range";
    this.slider.min = "1";
    this.slider.step = "1";
    this.slider.title = "how many BF pixels, the nearest the disk centre, the image sums over (fits use all)";
    this.descanCanvas.setAttribute("role", "img");
    const views = element("div", "livessb-diffraction-views");
    const descan = element("div", "livessb-descan-box");
    descan.append(this.descanCanvas, this.descanLabel);
    views.append(this.canvas, descan);
    const controls = element("div", "livessb-row");
    controls.append(this.meanButton, this.readout);
    const bf = element("label", "livessb-row livessb-bf-pixels");
    bf.append("BF pixels ", this.slider, this.count);
    this.el.append(title, views, controls, this.legend, bf);

    this.requests = new LatestWins<Cell | null>((cell, seq) => {
      model.send(cell === null ? { type: "pattern", seq, mean: true } : { type: "pattern", seq, row: cell.row, col: cell.col });
    }, Date.now());
    this.hover = new Throttle<Cell>((cell) => this.requests.request(cell), HOVER_MS);
    this.sliderSet = new Throttle<number>((n) => {
      model.set("bf_pixels", n);
      model.save_changes();
    }, SLIDER_MS);

    this.listen(this.meanButton, "click", () => this.setMean(!this.mean));
    this.listen(this.slider, "input", () => this.onSlider(false));
    this.listen(this.slider, "change", () => this.onSlider(true));
    this.listen(scan.canvas, "pointermove", (e) => this.onHover(e as PointerEvent));
    const onMsg = (msg: unknown, buffers: DataView[]) => this.receive(msg, buffers);
    const onInfo = () => this.setInfo(model.get("diffraction_info"));
    const onBf = () => this.showCount();
    model.on("msg:custom", onMsg);
    model.on("change:diffraction_info", onInfo);
    model.on("change:bf_pixels", onBf);
    this.off.push(() => model.off("msg:custom", onMsg), () => model.off("change:diffraction_info", onInfo), () => model.off("change:bf_pixels", onBf));
    const onShape = () => this.drawDescan();
    model.on("change:scan_shape", onShape);
    this.off.push(() => model.off("change:scan_shape", onShape));
    whenDetached(root, () => this.dispose());
    onInfo();
    const shape = this.scanShape();
    this.requests.request({ row: Math.floor(shape.rows / 2), col: Math.floor(shape.cols / 2) }); // a pattern at once
  }

  /** The scan's shape from the model (the scan view learns it after the panels are built). */
  private scanShape(): { rows: number; cols: number } {
    const s = this.model.get("scan_shape");
    return Array.isArray(s) && s.length === 2 && s[0] > 0 && s[1] > 0 ? { rows: s[0], cols: s[1] } : this.scan.scanShape;
  }

  private listen(target: EventTarget, kind: string, f: (e: Event) => void): void {
    target.addEventListener(kind, f);
    this.off.push(() => target.removeEventListener(kind, f));
  }

  private dispose(): void {
    this.hover.cancel();
    this.sliderSet.cancel();
    for (const f of this.off) f();
  }

  private onHover(e: PointerEvent): void {
    const cell = scanPixelAt(this.scan.scanPoint(e), this.scanShape());
    if (cell === null || (this.hovered && cell.row === this.hovered.row && cell.col === this.hovered.col)) return;
    this.hovered = cell;
    if (!this.mean) this.hover.call(cell);
  }

  private setMean(on: boolean): void {
    this.mean = on;
    this.meanButton.setAttribute("aria-pressed", String(on));
    this.hover.cancel();
    const back = this.hovered ?? (this.meta?.position ? { row: this.meta.position[0], col: this.meta.position[1] } : null);
    this.requests.request(on ? null : back ?? { row: 0, col: 0 });
  }

  private onSlider(release: boolean): void {
    const total = this.info?.total ?? 0;
    const n = Number(this.slider.value);
    this.showCount(n);
    this.sliderSet.call(n >= total ? 0 : n); // 0: all (the default bits)
    if (release) this.sliderSet.flush();
  }

  private showCount(value?: number): void {
    const info = this.info;
    if (!info) return;
    const trait = Number(this.model.get("bf_pixels") ?? 0);
    const n = value ?? (trait > 0 ? trait : info.total);
    if (value === undefined) this.slider.value = String(n);
    this.count.textContent = bfPixelsText(n, info.total, subsetRadiusPx(info.radii, n));
    this.count.dataset.value = String(n);
    this.draw();
  }

  private setInfo(raw: unknown): void {
    const o = (raw ?? {}) as Record<string, unknown>;
    const bf = o.bf as Info["bf"] | undefined;
    if (!bf || typeof o.bf_pixels_total !== "number") return;
    this.info = {
      bin: Number(o.bin) || 1, bf, total: o.bf_pixels_total, radii: decodeRadii(toBytes(o.bf_radii)),
      repaired: Array.isArray(o.repaired) ? (o.repaired as number[][]) : [], repairedCount: Number(o.repaired_count) || 0,
      descan: parseDescan(o.descan),
    };
    this.slider.max = String(this.info.total);
    this.legend.textContent = legendText(this.info);
    this.drawDescan();
    this.showCount();
  }

  private receive(msg: unknown, buffers: DataView[]): void {
    const o = msg as Record<string, unknown> | null;
    if (o?.type === "frame") {
      // the BF-pixel count of the frame on screen (root data-preview-bf-pixels, 0: all)
      this.root.dataset.previewBfPixels = String(typeof o.bf_pixels === "number" ? o.bf_pixels : 0);
      return;
    }
    if (o?.type !== "pattern") return;
    const meta = o as unknown as PatternMeta;
    this.requests.answered(meta.seq);
    const bytes = buffers?.length ? toBytes(buffers[0]) : null;
    if (!bytes || meta.seq < this.lastPainted || (meta.kind === "mean") !== this.mean) return;
    const [rows, cols] = meta.shape;
    this.rgba = paintPattern(decodeCodes(bytes, rows, cols), this.rgba ?? undefined);
    this.image.width = cols;
    this.image.height = rows;
    this.image.getContext("2d")?.putImageData(new ImageData(this.rgba as Uint8ClampedArray<ArrayBuffer>, cols, rows), 0, 0);
    if (!this.meta || this.meta.shape[0] !== rows || this.meta.shape[1] !== cols) {
      const s = PATTERN_CSS_PX / Math.max(rows, cols);
      this.ctx = setupCanvas(this.canvas, Math.round(cols * s), Math.round(rows * s));
    }
    this.meta = meta;
    this.lastPainted = meta.seq;
    const cell = meta.position ? { row: meta.position[0], col: meta.position[1] } : null;
    if (cell) this.root.dataset.patternPosition = `${cell.row},${cell.col}`;
    else delete this.root.dataset.patternPosition;
    this.root.dataset.pattern = meta.kind;
    const step = this.model.get("sampling_A");
    const f = this.model.get("upsample") || 1;
    this.readout.textContent = positionText(cell, Array.isArray(step) ? step.map((v) => v * f) : null, meta.total, this.scanShape());
    this.draw();
  }

  /** The pattern and its overlays (canvas CSS px). */
  private draw(): void {
    const ctx = this.ctx;
    const meta = this.meta;
    if (!ctx || !meta) return;
    const w = parseFloat(this.canvas.style.width);
    const h = parseFloat(this.canvas.style.height);
    const scale = w / meta.shape[1];
    ctx.save();
    ctx.imageSmoothingEnabled = false;
    ctx.clearRect(0, 0, w, h);
    ctx.drawImage(this.image, 0, 0, w, h);
    const info = this.info;
    if (info) {
      const bin = info.bin;
      const disk = diskOnCanvas(info.bf.center_row, info.bf.center_col, info.bf.radius_px, bin, scale);
      ctx.lineWidth = 1.5;
      ctx.strokeStyle = DISK;
      circle(ctx, disk);
      cross(ctx, disk.x, disk.y, 6);
      const n = Number(this.count.dataset.value ?? info.total);
      const r = subsetRadiusPx(info.radii, n);
      if (n < info.total && r !== null) {
        ctx.setLineDash([4, 3]);
        ctx.strokeStyle = SUBSET;
        circle(ctx, diskOnCanvas(info.bf.center_row, info.bf.center_col, r + 0.5, bin, scale));
        ctx.setLineDash([]);
      }
      ctx.strokeStyle = REPAIRED;
      for (const [pr, pc] of info.repaired) {
        const b = pixelMark(pr, pc, bin, scale);
        ctx.strokeRect(b.x, b.y, b.w, b.h);
      }
      const fitted = meta.descan_centre_px;
      if (fitted && info.descan?.applied) {
        const c = diskOnCanvas(fitted[0], fitted[1], 0, bin, scale);
        ctx.strokeStyle = FITTED;
        cross(ctx, c.x, c.y, 5, true);
      }
    }
    ctx.restore();
    this.canvas.dataset.painted = String(Number(this.canvas.dataset.painted ?? 0) + 1);
  }

  private drawDescan(): void {
    const d = this.info?.descan ?? null;
    this.descanLabel.textContent = descanText(d);
    this.descanCanvas.hidden = !d?.applied; // the field only where descan was found
    if (!d?.applied) return;
    const shape = this.scanShape();
    const s = DESCAN_CSS_PX / Math.max(shape.rows, shape.cols);
    const w = Math.round(shape.cols * s);
    const h = Math.round(shape.rows * s);
    const ctx = setupCanvas(this.descanCanvas, w, h);
    ctx.fillStyle = "#111";
    ctx.fillRect(0, 0, w, h);
    const { arrows } = descanArrows(d, shape, w, h);
    ctx.strokeStyle = d.applied ? FITTED : "#888";
    ctx.lineWidth = 1.2;
    for (const a of arrows) arrow(ctx, a.x0, a.y0, a.x1, a.y1);
    this.descanCanvas.title = `disk-centre shift over the scan (longest ${d.span_px.toFixed(2)} px span)`;
  }
}

function legendText(info: Info): string {
  const parts = [`cyan: BF disk r = ${info.bf.radius_px.toFixed(1)} px and centre`, "yellow dashed: BF pixels used"];
  if (info.repairedCount > 0) parts.push(`red: ${info.repairedCount} repaired pixel${info.repairedCount === 1 ? "" : "s"}`);
  if (info.descan?.applied) parts.push("orange ×: fitted disk centre here");
  return parts.join(" · ");
}

function circle(ctx: CanvasRenderingContext2D, c: { x: number; y: number; r: number }): void {
  ctx.beginPath();
  ctx.arc(c.x, c.y, c.r, 0, 2 * Math.PI);
  ctx.stroke();
}

function cross(ctx: CanvasRenderingContext2D, x: number, y: number, size: number, diagonal = false): void {
  ctx.beginPath();
  if (diagonal) {
    ctx.moveTo(x - size, y - size);
    ctx.lineTo(x + size, y + size);
    ctx.moveTo(x - size, y + size);
    ctx.lineTo(x + size, y - size);
  } else {
    ctx.moveTo(x - size, y);
    ctx.lineTo(x + size, y);
    ctx.moveTo(x, y - size);
    ctx.lineTo(x, y + size);
  }
  ctx.stroke();
}

function arrow(ctx: CanvasRenderingContext2D, x0: number, y0: number, x1: number, y1: number): void {
  const len = Math.hypot(x1 - x0, y1 - y0);
  ctx.beginPath();
  ctx.moveTo(x0, y0);
  ctx.lineTo(x1, y1);
  if (len > 3) {
    const a = Math.atan2(y1 - y0, x1 - x0);
    const head = Math.min(4, len / 2);
    ctx.moveTo(x1, y1);
    ctx.lineTo(x1 - head * Math.cos(a - 0.5), y1 - head * Math.sin(a - 0.5));
    ctx.moveTo(x1, y1);
    ctx.lineTo(x1 - head * Math.cos(a + 0.5), y1 - head * Math.sin(a + 0.5));
  } else {
    ctx.arc(x0, y0, 1, 0, 2 * Math.PI);
  }
  ctx.stroke();
}

/** Run `dispose` once `node` leaves its parent (the widget's cleanup removes its root). */
function whenDetached(node: HTMLElement, dispose: () => void): void {
  requestAnimationFrame(() => {
    const parent = node.parentNode;
    if (!parent) return dispose(); // removed before its first frame
    const watch = new MutationObserver(() => {
      if (node.parentNode !== parent) {
        watch.disconnect();
        dispose();
      }
    });
    watch.observe(parent, { childList: true });
  });
}

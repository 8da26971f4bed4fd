// The scan view: the canvas "scan image" with the frame (or the scan PNG
// until a frame arrives), region overlays, zoom/pan viewport, the scale bar
// and the live loss over its bottom corners. Painting is batched per animation frame.
import { paint, setupCanvas } from "./canvas";
import { element } from "./dom";
import type { Region } from "./model";
import type { OverlayTile } from "./overlay";
import { canvasToScan, fitViewport, type ScanPoint, type Shape, type Viewport } from "./regions";
import { ScaleBarView } from "./scalebarview";
import { clampViewport, panBy, visibleScan, zoomAt, zoomOf, type Size } from "./view";

const MAX_CANVAS_PX = 512;
const SCALEBAR_FRACTION = 0.25; // longest bar: a quarter of the view

/** What the number beside the image is (docs/widget.md, "Steering"). */
export const LOSS_TITLE =
  "VP loss of the image on screen: the fraction of the measured sideband energy the model " +
  "with these parameters (higher orders included) leaves unexplained; 0 explains all of it, " +
  "lower is better, noise keeps it above 0";

export class ScanView {
  readonly el: HTMLElement;
  readonly canvas: HTMLCanvasElement;
  readonly loss: HTMLElement;
  private scaleBar = new ScaleBarView();
  private ctx: CanvasRenderingContext2D | null = null;
  private frameCanvas: HTMLCanvasElement = document.createElement("canvas");
  private png: ImageBitmap | null = null;
  private hasFrame = false;
  private shape: Shape = { rows: 1, cols: 1 };
  private base: Viewport = fitViewport(this.shape, MAX_CANVAS_PX);
  private vp: Viewport = this.base;
  private size: Size = { w: 1, h: 1 };
  private raf = 0;
  private alive = true;
  /** Å per scan pixel (for the scale bar), null while unknown. */
  scanSamplingA: number | null = null;
  regions: readonly Region[] = [];
  selected: string | null = null;
  refused: string | null = null;
  overlay: readonly OverlayTile[] = []; // the map overlay's tiles (mapview.ts)
  /** Called after each repaint (zoom or pan may have changed). */
  onViewChange: () => void = () => {};
  /** Tools' overlays, painted over the image at each repaint (canvas CSS px): the line profile's line. */
  readonly afterPaint: ((ctx: CanvasRenderingContext2D, vp: Viewport) => void)[] = [];

  constructor() {
    this.el = element("div", "livessb-scanview");
    const stage = element("div", "livessb-stage");
    this.canvas = element("canvas", "", "scan image");
    this.canvas.tabIndex = 0;
    this.loss = element("output", "livessb-loss", "preview loss");
    this.loss.textContent = "loss –";
    this.loss.title = LOSS_TITLE;
    stage.append(this.canvas, this.scaleBar.el, this.loss); // the loss in the image's corner
    this.el.append(stage);
  }

  get viewport(): Viewport {
    return this.vp;
  }

  get scanShape(): Shape {
    return this.shape;
  }

  get zoom(): number {
    return zoomOf(this.vp, this.base);
  }

  setShape(shape: Shape): void {
    this.shape = shape;
    this.base = fitViewport(shape, MAX_CANVAS_PX);
    this.vp = this.base;
    this.size = { w: Math.round(shape.cols * this.base.scale), h: Math.round(shape.rows * this.base.scale) };
    this.ctx = setupCanvas(this.canvas, this.size.w, this.size.h);
    this.schedule();
  }

  setPng(bmp: ImageBitmap): void {
    this.png?.close();
    this.png = bmp;
    this.schedule();
  }

  /** Show a painted frame (RGBA, rows × cols covering the whole scan). */
  setFrame(rgba: Uint8ClampedArray, rows: number, cols: number): void {
    if (this.frameCanvas.width !== cols || this.frameCanvas.height !== rows) {
      this.frameCanvas.width = cols;
      this.frameCanvas.height = rows;
    }
    const ctx = this.frameCanvas.getContext("2d");
    if (!ctx) return;
    ctx.putImageData(new ImageData(rgba as Uint8ClampedArray<ArrayBuffer>, cols, rows), 0, 0);
    this.hasFrame = true;
    this.schedule();
  }

  /** Paint now (a frame counts as painted only once it is on the canvas). */
  paintNow(): void {
    if (this.raf) cancelAnimationFrame(this.raf);
    this.repaint();
  }

  schedule(): void {
    if (this.raf === 0 && this.alive) this.raf = requestAnimationFrame(() => this.repaint());
  }

  /** Canvas px of a pointer event. */
  canvasPoint(e: { clientX: number; clientY: number }): { x: number; y: number } {
    const rect = this.canvas.getBoundingClientRect();
    const sx = rect.width > 0 ? this.size.w / rect.width : 1;
    const sy = rect.height > 0 ? this.size.h / rect.height : 1;
    return { x: (e.clientX - rect.left) * sx, y: (e.clientY - rect.top) * sy };
  }

  scanPoint(e: { clientX: number; clientY: number }): ScanPoint {
    return canvasToScan(this.canvasPoint(e), this.vp);
  }

  zoomBy(e: { clientX: number; clientY: number }, factor: number): void {
    this.vp = zoomAt(this.vp, this.base, this.canvasPoint(e), factor, this.shape, this.size);
    this.schedule();
  }

  panBy(dx: number, dy: number): void {
    this.vp = panBy(this.vp, dx, dy, this.shape, this.size);
    this.schedule();
  }

  resetView(): void {
    this.vp = clampViewport(this.base, this.shape, this.size);
    this.schedule();
  }

  /** The scan rectangle on screen (continuous scan px). */
  visible(): { r0: number; r1: number; c0: number; c1: number } {
    return visibleScan(this.vp, this.shape, this.size);
  }

  setLoss(loss: number | null): void {
    this.loss.textContent = loss === null ? "loss –" : `loss ${loss.toPrecision(6)}`;
    this.loss.dataset.value = loss === null ? "" : String(loss);
  }

  dispose(): void {
    this.alive = false;
    if (this.raf) cancelAnimationFrame(this.raf);
    this.png?.close();
  }

  private repaint(): void {
    this.raf = 0;
    if (!this.ctx) return;
    const image = this.hasFrame ? this.frameCanvas : this.png;
    paint(this.ctx, {
      image, shape: this.shape, regions: this.regions, selected: this.selected, refused: this.refused, overlay: this.overlay,
      viewport: this.vp, width: this.size.w, height: this.size.h,
    });
    for (const f of this.afterPaint) f(this.ctx, this.vp);
    if (this.scanSamplingA !== null) this.scaleBar.update(this.vp.scale / this.scanSamplingA, SCALEBAR_FRACTION * this.size.w);
    this.onViewChange();
  }
}

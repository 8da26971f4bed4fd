// What the scan view shows of the latest frame: its codes painted through the
// chosen colormap and contrast (auto 1–99 % per frame until the user sets
// limits), the histogram under the limits, and the values for the FFT.
import { lut, type ColormapName } from "./colormaps";
import { autoContrast, codeCounts, histogram } from "./contrast";
import { frameValues, paintFrame, type Frame } from "./frame";
import type { FrameMessage } from "./model";
import type { InspectPanel } from "./inspect";
import type { ScanView } from "./scanview";

const HIST_BINS = 120;

export class FrameDisplay {
  frame: Frame | null = null;
  meta: FrameMessage | null = null;
  colormap: ColormapName = "gray";
  limits: [number, number] = [0, 1];
  autoLimits = true;
  /** False while another display owns the scan view (imageview.ts): frames are kept, not painted. */
  active = true;
  /** After each paint (the colour bar follows the limits and colormap). */
  onPaint: () => void = () => {};
  private values: Float64Array | null = null;
  private rgba: Uint8ClampedArray | undefined;

  constructor(private readonly view: ScanView, private readonly inspect: InspectPanel) {}

  /** Take a new frame and paint it now. */
  show(frame: Frame, meta: FrameMessage | null = null): void {
    this.frame = frame;
    this.meta = meta;
    this.values = null;
    this.repaint();
  }

  setColormap(name: ColormapName): void {
    this.colormap = name;
    this.repaint();
  }

  auto(): void {
    this.autoLimits = true;
    this.repaint();
  }

  setLimits(lo: number, hi: number): void {
    this.autoLimits = false;
    this.limits = [lo, hi];
    this.repaint();
  }

  /** The frame's values (computed once per frame, for the FFT). */
  frameValues(): Float64Array | null {
    if (this.frame && !this.values) this.values = frameValues(this.frame);
    return this.values;
  }

  repaint(): void {
    const f = this.frame;
    if (!f || !this.active) return;
    const counts = codeCounts(f.codes);
    if (this.autoLimits) this.limits = autoContrast(f, counts);
    this.rgba = paintFrame(f, lut(this.colormap), this.limits[0], this.limits[1], this.rgba);
    this.view.setFrame(this.rgba, f.rows, f.cols);
    this.view.paintNow();
    this.inspect.setHistogram(histogram(f, HIST_BINS, counts), this.limits);
    this.onPaint();
  }
}

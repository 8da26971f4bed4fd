// The colour bar beside the scan image ("colour bar"): the colormap's gradient
// standing between the text of its two ends (the highest at the top), the
// contrast limits of what is painted, with the image's unit. Redrawn by whichever
// display paints (imageview.ts); placed to the right of the image (layout.ts).
import { LUT_SIZE, lut, type ColormapName } from "./colormaps";
import { endLabels, gradientPixels } from "./colourscale";
import { element } from "./dom";

export class ColourBar {
  readonly el: HTMLElement;
  private lo: HTMLElement;
  private hi: HTMLElement;
  private gradient: HTMLCanvasElement;
  private colormap: ColormapName | null = null;

  constructor() {
    this.el = element("div", "livessb-colourbar", "colour bar");
    this.lo = element("span", "livessb-colourbar-end");
    this.hi = element("span", "livessb-colourbar-end");
    this.gradient = element("canvas", "livessb-colourbar-gradient");
    this.gradient.width = 1;
    this.gradient.height = LUT_SIZE;
    this.el.append(this.lo, this.gradient, this.hi); // text order low, high; shown bottom to top (CSS)
    this.el.hidden = true; // until something is painted
  }

  update(colormap: ColormapName, limits: readonly [number, number], unit: string): void {
    const [lo, hi] = endLabels(limits, unit);
    this.lo.textContent = lo;
    this.hi.textContent = hi;
    this.el.dataset.unit = unit;
    this.el.hidden = false;
    if (colormap === this.colormap) return;
    const ctx = this.gradient.getContext("2d");
    if (!ctx) return;
    ctx.putImageData(new ImageData(gradientPixels(lut(colormap)) as Uint8ClampedArray<ArrayBuffer>, 1, LUT_SIZE), 0, 0);
    this.colormap = colormap;
  }
}

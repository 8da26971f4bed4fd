// Which image the scan view paints: a virtual image from the counts (there within
// a second, before, during and after the fit) or the fit's phase. The "virtual
// image" select chooses (the `image` trait, shared with Python: the end of a fit
// sets "phase"; steering the reconstruction goes back to it); the root's data-image
// says what is painted. Each kind has its own FrameDisplay, so the phase's contrast
// (rad) survives a look at a virtual image (counts); one colormap for both; only the
// active display paints the canvas, the histogram and the colour bar. The fit's
// progress bar is moved over the image so it is seen without scrolling.
import type { ColormapName } from "./colormaps";
import { ColourBar } from "./colourbar";
import type { FrameDisplay } from "./display";
import { element } from "./dom";
import {
  asImageKind, IMAGE_KINDS, parseVirtualImages, shownImage, type ImageKind, type VirtualImage, type VirtualKind,
} from "./imagekind";
import type { Model } from "./model";
import type { ScanView } from "./scanview";
import "./imageview.css";

const PHASE_TEXT = "phase (SSB)";

export class ImageChoice {
  readonly el: HTMLElement;
  readonly select: HTMLSelectElement;
  readonly colourBar = new ColourBar(); // beside the image (layout.ts)
  private readonly options = new Map<ImageKind, HTMLOptionElement>();
  private images = new Map<VirtualKind, VirtualImage>();
  private inVirtual: VirtualImage | null = null; // the image the virtual display holds
  private lastVirtual: VirtualKind | null = null;
  private shown: ImageKind | null = null;
  private readonly listeners: [string, () => void][];

  constructor(
    private readonly model: Model,
    private readonly root: HTMLElement,
    scan: ScanView,
    private readonly phase: FrameDisplay,
    private readonly virtual: FrameDisplay,
    progressBar: HTMLElement,
  ) {
    this.el = element("div", "livessb-imagebar");
    this.select = element("select", "", "virtual image");
    this.select.title = "what the scan shows: a virtual image from the counts, or the fit's phase";
    for (const kind of IMAGE_KINDS) {
      const opt = element("option");
      opt.value = kind;
      opt.textContent = kind === "phase" ? PHASE_TEXT : kind;
      opt.disabled = true; // until it has arrived
      this.options.set(kind, opt);
      this.select.append(opt);
    }
    this.select.addEventListener("change", () => this.choose(asImageKind(this.select.value)));
    this.el.append(this.select);
    progressBar.classList.add("livessb-progress-over");
    scan.canvas.parentElement?.append(progressBar);
    phase.active = false;
    virtual.active = false;
    phase.onPaint = () => this.painted(phase);
    virtual.onPaint = () => this.painted(virtual);
    this.listeners = [["change:virtual_images", () => this.setImages()], ["change:image", () => this.refresh()]];
    for (const [name, cb] of this.listeners) model.on(name as never, cb);
    this.setImages();
  }

  /** The display that paints now (contrast controls act on it). */
  get active(): FrameDisplay {
    return this.shown === "phase" ? this.phase : this.virtual;
  }

  /** One colormap for every image (only the active display repaints). */
  setColormap(name: ColormapName): void {
    this.phase.setColormap(name);
    this.virtual.setColormap(name);
  }

  /** The user (select) or the widget chose `kind`. */
  choose(kind: ImageKind): void {
    if (asImageKind(this.model.get("image")) !== kind) {
      this.model.set("image", kind);
      this.model.save_changes();
    }
    this.refresh();
  }

  /** A preview was asked for (slider, trial, pin, view): the reconstruction is what the user looks at. */
  steered(): void {
    this.choose("phase");
  }

  /** Paint what `shownImage` picks (after a frame, the trait or the images changed). */
  refresh(): void {
    this.options.get("phase")!.disabled = this.phase.frame === null;
    const shown = shownImage(asImageKind(this.model.get("image")), this.phase.frame !== null,
      new Set(this.images.keys()), this.lastVirtual);
    if (shown === null) return; // nothing has arrived yet
    const changed = shown !== this.shown;
    this.shown = shown;
    this.phase.active = shown === "phase";
    this.virtual.active = shown !== "phase";
    if (shown === "phase") {
      if (changed) this.phase.repaint();
    } else {
      const image = this.images.get(shown)!;
      this.lastVirtual = shown;
      if (image !== this.inVirtual) {
        this.inVirtual = image;
        this.virtual.autoLimits = true; // counts, rad or mrad: another image's limits mean nothing
        this.virtual.show(image.frame);
      } else if (changed) {
        this.virtual.repaint();
      }
    }
    this.root.dataset.image = shown;
    this.select.value = shown;
  }

  dispose(): void {
    for (const [name, cb] of this.listeners) this.model.off(name as never, cb);
  }

  private setImages(): void {
    this.images = parseVirtualImages(this.model.get("virtual_images"));
    for (const [kind, image] of this.images) {
      const opt = this.options.get(kind)!;
      opt.textContent = image.label;
      opt.disabled = false;
    }
    this.refresh();
  }

  private painted(display: FrameDisplay): void {
    const unit = display === this.virtual ? this.inVirtual?.unit ?? "" : this.phase.meta?.view === "amplitude" ? "a.u." : "rad";
    this.colourBar.update(display.colormap, display.limits, unit);
  }
}

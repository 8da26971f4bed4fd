// The region gallery beside the scan: one panel per region with its crop image
// (PNG bytes -> blob URL), fitted parameters and status. The featured region (the
// selected one, else the newest: gallery.ts) is shown large with its parameters;
// the others are thumbnails below it that select theirs on a click. Every panel
// keeps its img, parameters and status in the DOM (SPEC §3 names), thumbnails
// only hide them by CSS.
import { regionColor } from "./canvas";
import { acceptCrop, cropStatusText, type CropStamp } from "./cropstate";
import { element } from "./dom";
import { containScale, featuredRegion } from "./gallery";
import { fmt, type Region, type RegionResult, type Status } from "./model";
import { jointRows, type ParamRow } from "./paramtable";
import { modelText, parseTrust, readout, type ReadoutState } from "./readout";
import { ScaleBarView } from "./scalebarview";

const SCALEBAR_FRACTION = 0.4; // longest bar: this much of the crop's shown width
const EMPTY_TEXT = "Draw a rectangle on the image to fit a region: its crop and parameters appear here.";

interface Panel {
  root: HTMLElement;
  title: HTMLElement;
  extent: HTMLElement;
  img: HTMLImageElement;
  params: HTMLElement;
  statusEl: HTMLElement;
  scaleBar: ScaleBarView;
  url: string | null; // the crop on screen
  pending: string | null; // a newer crop still decoding (replaced by a newer one)
  generation: number; // generation of the newest crop taken, shown or decoding (-1: none)
}

export class CropPanels {
  readonly el: HTMLElement;
  private panels = new Map<string, Panel>();
  private onSelect: (id: string) => void;
  private table: readonly ParamRow[] = [];
  private samplingA: number | null = null; // Å per crop pixel
  private featured: HTMLElement;
  private thumbs: HTMLElement;
  private empty: HTMLElement;
  private resize: ResizeObserver | null = null;

  constructor(onSelect: (id: string) => void) {
    this.el = element("div", "livessb-crops", "region crops");
    this.featured = element("div", "livessb-gallery-featured");
    this.thumbs = element("div", "livessb-gallery-thumbs", "region thumbnails");
    this.empty = element("div", "livessb-gallery-empty");
    this.empty.textContent = EMPTY_TEXT;
    this.el.append(this.empty, this.featured, this.thumbs);
    this.onSelect = onSelect;
    // the large crop's size follows the gallery's width: its scale bar with it
    if (typeof ResizeObserver !== "undefined") {
      this.resize = new ResizeObserver(() => this.scaleBars());
      this.resize.observe(this.featured);
    }
  }

  /** The parameter table (rows shown per crop) and Å per crop pixel (scale bars). */
  configure(table: readonly ParamRow[], samplingA: number | null): void {
    this.table = table;
    this.samplingA = samplingA;
    for (const panel of this.panels.values()) this.updateScaleBar(panel);
  }

  /** Create/remove panels to match the regions; refresh texts from the results; arrange. */
  sync(regions: readonly Region[], results: Record<string, RegionResult>, selected: string | null): void {
    const ids = new Set(regions.map((r) => r.id));
    for (const [id, panel] of this.panels) {
      if (!ids.has(id)) {
        this.revoke(panel);
        panel.root.remove();
        this.panels.delete(id);
      }
    }
    for (const region of regions) {
      const panel = this.panels.get(region.id) ?? this.create(region.id);
      this.update(panel, region, results[region.id], region.id === selected);
    }
    this.arrange(regions.map((r) => r.id), selected);
  }

  /** The featured panel large on top, the others as thumbnails in drawing order. */
  private arrange(ids: readonly string[], selected: string | null): void {
    const featured = featuredRegion(ids, selected);
    for (const id of ids) {
      const panel = this.panels.get(id)!;
      const big = id === featured;
      panel.root.classList.toggle("featured", big);
      panel.root.title = big ? "" : `${panel.title.textContent ?? id}: click to select`;
      (big ? this.featured : this.thumbs).append(panel.root);
    }
    this.empty.hidden = ids.length > 0;
    this.thumbs.hidden = ids.length < 2;
    this.scaleBars();
  }

  private scaleBars(): void {
    for (const panel of this.panels.values()) this.updateScaleBar(panel);
  }

  /** Show a crop if it is of a newer edit than the one taken (older and re-sent crops are
   * ignored); once decoded the img carries `data-generation` and `data-behind`. */
  setCrop(id: string, stamp: CropStamp, bytes: Uint8Array): boolean {
    const panel = this.panels.get(id) ?? this.create(id);
    if (!acceptCrop(panel.generation, stamp.generation)) return false;
    const url = URL.createObjectURL(new Blob([bytes as BlobPart], { type: "image/png" }));
    if (panel.pending) URL.revokeObjectURL(panel.pending); // overtaken before it decoded
    panel.pending = url;
    panel.generation = stamp.generation;
    panel.img.onload = () => {
      const old = panel.url;
      panel.url = url;
      panel.pending = null;
      panel.img.dataset.generation = String(stamp.generation);
      panel.img.dataset.behind = String(stamp.behind);
      panel.img.dataset.paintedAt = String(performance.now());
      panel.img.hidden = false;
      this.updateScaleBar(panel);
      if (old) URL.revokeObjectURL(old);
    };
    panel.img.src = url;
    return true;
  }

  /** Generation of the crop shown for each region (to ask for missing ones). */
  shownGeneration(id: string): number {
    return this.panels.get(id)?.generation ?? -1;
  }

  dispose(): void {
    this.resize?.disconnect();
    for (const panel of this.panels.values()) this.revoke(panel);
    this.panels.clear();
    this.el.remove();
  }

  private create(id: string): Panel {
    const root = element("section", "livessb-panel", `region panel ${id}`);
    root.dataset.regionId = id;
    root.dataset.status = "idle";
    root.style.borderColor = regionColor(id);
    root.addEventListener("click", () => this.onSelect(id));
    const header = element("header");
    const title = element("span", "livessb-panel-id");
    const extent = element("span", "livessb-panel-extent");
    header.append(title, extent);
    const img = element("img", "", `region crop ${id}`);
    img.alt = `phase crop of region ${id}`;
    img.hidden = true;
    const stage = element("div", "livessb-crop-stage");
    const scaleBar = new ScaleBarView();
    stage.append(img, scaleBar.el);
    const params = element("div", "livessb-params");
    const statusEl = element("div", "livessb-panel-status");
    statusEl.setAttribute("role", "status");
    root.append(header, stage, params, statusEl);
    this.thumbs.append(root);
    const panel: Panel = { root, title, extent, img, params, statusEl, scaleBar, url: null, pending: null, generation: -1 };
    this.panels.set(id, panel);
    return panel;
  }

  private revoke(panel: Panel): void {
    if (panel.url) URL.revokeObjectURL(panel.url);
    if (panel.pending) URL.revokeObjectURL(panel.pending);
  }

  /** The crop is shown `object-fit: contain` in its img box (large or thumbnail size). */
  private updateScaleBar(panel: Panel): void {
    const w = panel.img.naturalWidth;
    const h = panel.img.naturalHeight;
    const shown = containScale(panel.img.clientWidth, panel.img.clientHeight, w, h);
    if (!this.samplingA || shown === 0) return;
    panel.scaleBar.update(shown / this.samplingA, SCALEBAR_FRACTION * w * shown);
  }

  private update(panel: Panel, region: Region, result: RegionResult | undefined, selected: boolean): void {
    const status: Status = result?.status ?? "idle";
    panel.root.dataset.status = status;
    panel.root.classList.toggle("selected", selected);
    const h = region.row_stop - region.row_start;
    const w = region.col_stop - region.col_start;
    panel.title.textContent = region.id;
    panel.extent.textContent = `rows ${region.row_start}–${region.row_stop}, cols ${region.col_start}–${region.col_stop} (${h}×${w})`;
    panel.title.style.color = regionColor(region.id);
    const params = result?.params ?? {};
    panel.params.replaceChildren();
    const row = (key: string, label: string, value: number | null | undefined, text: string, state?: ReadoutState) => {
      const k = element("span", "livessb-key");
      k.textContent = label;
      const v = element("span", "livessb-value");
      v.dataset.param = key;
      if (typeof value === "number") v.dataset.value = String(value);
      if (state) v.dataset.state = state;
      v.textContent = text;
      panel.params.append(k, v);
    };
    const trust = parseTrust(result);
    for (const p of jointRows(this.table)) {
      const r = readout(p, params[p.name], trust);
      row(p.name, p.label, params[p.name], r.text, r.state);
    }
    row("loss", "loss", result?.loss, fmt(result?.loss, 4));
    if (trust.model) row("model", "model", undefined, modelText(trust));
    if (trust.crystal) row("crystal", "crystal", undefined, trust.crystal);
    panel.statusEl.textContent = cropStatusText(status, result?.error ?? "", result?.behind ?? 0, result?.step ?? "");
  }
}

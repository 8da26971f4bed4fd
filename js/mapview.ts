// The map overlay's controls and painting: "fit map" (tile size, then the
// session's fit_map on the worker), "map parameter" (none, or a parameter whose
// map is drawn over the scan as semi-transparent tiles) and the legend. The pure
// parts (cells, colours, legend values) are in overlay.ts.
import { button, element } from "./dom";
import { rectToCanvas, type Viewport } from "./regions";
import { legendValues, OVERLAY_ALPHA, OVERLAY_COLORMAP, overlayTiles, type MapOverlays, type OverlayTile } from "./overlay";
import { lut } from "./colormaps";

export const NO_MAP = "none";
const DEFAULT_TILE = 64;
const FIT_TITLE = "fit every tile of a grid (fast on CUDA, slow on the CPU)";

/** Tiles over the scan: colour, hatching where not determined, a red × on a box edge. */
export function paintOverlay(ctx: CanvasRenderingContext2D, tiles: readonly OverlayTile[], vp: Viewport): void {
  ctx.save();
  for (const t of tiles) {
    const b = rectToCanvas(t, vp);
    ctx.fillStyle = t.rgb ? `rgba(${t.rgb[0]}, ${t.rgb[1]}, ${t.rgb[2]}, ${OVERLAY_ALPHA})` : "rgba(128, 128, 128, 0.45)";
    ctx.fillRect(b.x, b.y, b.w, b.h);
    ctx.strokeStyle = "rgba(255, 255, 255, 0.5)";
    ctx.lineWidth = 1;
    ctx.strokeRect(b.x + 0.5, b.y + 0.5, b.w - 1, b.h - 1);
    if (t.undetermined) {
      ctx.save();
      ctx.beginPath();
      ctx.rect(b.x, b.y, b.w, b.h);
      ctx.clip();
      ctx.strokeStyle = "rgba(255, 255, 255, 0.85)";
      ctx.beginPath();
      for (let d = -b.h; d < b.w; d += 8) {
        ctx.moveTo(b.x + d, b.y + b.h);
        ctx.lineTo(b.x + d + b.h, b.y);
      }
      ctx.stroke();
      ctx.restore();
    }
    if (t.edge) {
      const cx = b.x + b.w / 2;
      const cy = b.y + b.h / 2;
      const r = Math.min(6, b.w / 4, b.h / 4);
      ctx.strokeStyle = "#ff2020";
      ctx.lineWidth = 2;
      ctx.beginPath();
      ctx.moveTo(cx - r, cy - r);
      ctx.lineTo(cx + r, cy + r);
      ctx.moveTo(cx + r, cy - r);
      ctx.lineTo(cx - r, cy + r);
      ctx.stroke();
    }
  }
  ctx.restore();
}

/** CSS gradient of the overlay colormap (the legend's bar). */
function gradientCss(): string {
  const t = lut(OVERLAY_COLORMAP);
  const stops = [0, 64, 128, 192, 255].map((i) => `rgb(${t[4 * i]}, ${t[4 * i + 1]}, ${t[4 * i + 2]}) ${((100 * i) / 255).toFixed(0)}%`);
  return `linear-gradient(to right, ${stops.join(", ")})`;
}

export interface MapPanelHooks {
  onFit: (tile: number) => void; // the "fit map" button
  onShow: (tiles: readonly OverlayTile[]) => void; // tiles to paint ([]: none)
}

export class MapPanel {
  readonly el: HTMLElement;
  readonly fitButton: HTMLButtonElement;
  readonly tileInput: HTMLInputElement;
  readonly select: HTMLSelectElement;
  private legend: HTMLElement;
  private maps: MapOverlays | null = null;
  private shape = { rows: 1, cols: 1 };

  constructor(private hooks: MapPanelHooks) {
    this.el = element("div", "livessb-row livessb-map");
    this.fitButton = button("Fit map", "fit map");
    this.fitButton.title = FIT_TITLE;
    this.tileInput = element("input", "", "map tile");
    this.tileInput.type = "number";
    this.tileInput.min = "4";
    this.tileInput.step = "1";
    this.tileInput.value = String(DEFAULT_TILE);
    this.tileInput.title = "tile side in scan px";
    this.select = element("select", "", "map parameter");
    this.legend = element("div", "livessb-map-legend", "map legend");
    this.legend.hidden = true;
    const tileLabel = element("span");
    tileLabel.textContent = "tile";
    this.el.append(this.fitButton, tileLabel, this.tileInput, this.select, this.legend);
    this.fitButton.addEventListener("click", () => {
      const tile = Math.round(Number(this.tileInput.value));
      if (Number.isFinite(tile) && tile >= 1) this.hooks.onFit(tile);
    });
    this.tileInput.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" && !this.fitButton.disabled) this.fitButton.click(); // Enter applies
    });
    this.select.addEventListener("change", () => this.show());
    this.setMaps(null);
  }

  /** While a map runs its button is off (Python also ignores the same map asked twice). */
  setRunning(running: boolean): void {
    this.fitButton.disabled = running;
    this.fitButton.title = running ? "a map is being fitted (Cancel stops it)" : FIT_TITLE;
  }

  /** The scan's size in scan px (tile cells reach its edges). */
  setShape(rows: number, cols: number): void {
    this.shape = { rows, cols };
    this.show();
  }

  /** A new map (or none): the choice is kept when the new map has it; a first map shows its first parameter. */
  setMaps(maps: MapOverlays | null): void {
    const first = this.maps === null && maps !== null;
    const current = this.select.value;
    this.maps = maps;
    const options = [NO_MAP, ...(maps?.parameters ?? [])];
    this.select.replaceChildren(...options.map((name) => {
      const o = element("option");
      o.value = name;
      o.textContent = name === NO_MAP ? "map: none" : (maps?.overlays[name]?.label ?? name);
      return o;
    }));
    this.select.disabled = maps === null;
    this.select.value = first ? options[1] : options.includes(current) ? current : NO_MAP;
    this.show();
  }

  private show(): void {
    const ov = this.select.value === NO_MAP ? undefined : this.maps?.overlays[this.select.value];
    this.el.dataset.parameter = ov ? ov.parameter : NO_MAP;
    if (!ov) {
      this.legend.hidden = true;
      this.hooks.onShow([]);
      return;
    }
    const lg = legendValues(ov);
    const bar = element("span", "livessb-map-bar");
    bar.style.background = gradientCss();
    const text = (s: string) => {
      const span = element("span");
      span.textContent = s;
      return span;
    };
    const parts = [text(`${lg.low}`), bar, text(`${lg.high} ${lg.unit}`.trim())];
    if (lg.fixed) parts.push(text("(fixed)"));
    if (lg.undeterminedTiles) parts.push(text(`▨ not determined: ${lg.undeterminedTiles}`));
    if (lg.edgeTiles) parts.push(text(`✕ box edge: ${lg.edgeTiles}`));
    this.legend.replaceChildren(...parts);
    this.legend.hidden = false;
    const tiles = overlayTiles(ov, this.shape.rows, this.shape.cols);
    this.el.dataset.tiles = String(tiles.length);
    this.hooks.onShow(tiles);
  }
}

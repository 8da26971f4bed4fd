// The map overlay's pure parts: the `map_overlays` trait parsed (one
// MapResult.overlay(name) record per parameter, docs/widget-protocol.md), each
// tile's cell on the scan and its colour, and the legend's values.
import { lut, type ColormapName } from "./colormaps";
import type { Rect } from "./regions";

export const OVERLAY_COLORMAP: ColormapName = "viridis";
export const OVERLAY_ALPHA = 0.55;

/** One parameter's map (python/livessb/maps.py MapResult.overlay). */
export interface Overlay {
  parameter: string;
  label: string;
  unit: string;
  digits: number;
  centers: [number, number][][]; // (tile rows, tile cols) of (row, col) scan px
  values: (number | null)[][];
  errors: (number | null)[][];
  undetermined: boolean[][];
  onBoxEdge: boolean[][];
  fixed: boolean;
  range: [number, number] | null;
}

export interface MapOverlays {
  parameters: string[];
  overlays: Record<string, Overlay>;
}

/** A tile as drawn: its cell, colour (null: no value), and its flags. */
export interface OverlayTile extends Rect {
  rgb: [number, number, number] | null;
  undetermined: boolean;
  edge: boolean;
}

export interface Legend {
  low: string;
  high: string;
  unit: string;
  undeterminedTiles: number;
  edgeTiles: number;
  fixed: boolean;
}

const isNum = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);
const grid = <T>(x: unknown, cell: (v: unknown) => T): T[][] =>
  Array.isArray(x) ? x.map((row) => (Array.isArray(row) ? row.map(cell) : [])) : [];
const numOrNull = (v: unknown): number | null => (isNum(v) ? v : null);

function parseOverlay(x: unknown): Overlay | null {
  if (typeof x !== "object" || x === null) return null;
  const o = x as Record<string, unknown>;
  if (typeof o.parameter !== "string") return null;
  const centers = grid(o.centers_px, (c): [number, number] =>
    Array.isArray(c) && isNum(c[0]) && isNum(c[1]) ? [c[0], c[1]] : [NaN, NaN]);
  const values = grid(o.values, numOrNull);
  const rows = values.length;
  const cols = rows ? values[0].length : 0;
  if (rows === 0 || cols === 0 || centers.length !== rows || centers.some((r) => r.length !== cols)) return null;
  const range = Array.isArray(o.range) && isNum(o.range[0]) && isNum(o.range[1]) ? ([o.range[0], o.range[1]] as [number, number]) : null;
  return {
    parameter: o.parameter,
    label: typeof o.label === "string" ? o.label : o.parameter,
    unit: typeof o.unit === "string" ? o.unit : "",
    digits: Number.isInteger(o.digits) && (o.digits as number) >= 0 ? (o.digits as number) : 2,
    centers,
    values,
    errors: grid(o.errors, numOrNull),
    undetermined: grid(o.undetermined, (v) => v === true),
    onBoxEdge: grid(o.on_box_edge, (v) => v === true),
    fixed: o.fixed === true,
    range,
  };
}

/** The trait's maps, in its parameter order (null: no map yet, or malformed). */
export function parseMapOverlays(x: unknown): MapOverlays | null {
  if (typeof x !== "object" || x === null) return null;
  const o = x as Record<string, unknown>;
  const raw = (typeof o.overlays === "object" && o.overlays !== null ? o.overlays : {}) as Record<string, unknown>;
  const overlays: Record<string, Overlay> = {};
  const parameters: string[] = [];
  for (const name of Array.isArray(o.parameters) ? o.parameters : []) {
    const ov = typeof name === "string" ? parseOverlay(raw[name]) : null;
    if (ov) {
      overlays[name as string] = ov;
      parameters.push(name as string);
    }
  }
  return parameters.length ? { parameters, overlays } : null;
}

/** Cell edges (scan px, pixel-edge coordinates) around tile centres (pixel-centre
 * coordinates): midway between neighbours, the outer ones at 0 and n (map_plots.cell_edges). */
export function cellEdges(centers: readonly number[], n: number): number[] {
  const mid = centers.slice(1).map((c, i) => (centers[i] + c) / 2 + 0.5);
  return [0, ...mid, n];
}

/** A value's colour on the overlay colormap over `range` (a flat map: the middle). */
export function overlayColor(value: number, range: [number, number]): [number, number, number] {
  const [lo, hi] = range;
  const t = hi > lo ? Math.min(Math.max((value - lo) / (hi - lo), 0), 1) : 0.5;
  const i = Math.round(t * 255);
  const table = lut(OVERLAY_COLORMAP);
  return [table[4 * i], table[4 * i + 1], table[4 * i + 2]];
}

/** The colour range: the determined tiles' values (undetermined ones are not coloured). */
export function colorRange(ov: Overlay): [number, number] | null {
  const kept = ov.values.flatMap((row, i) => row.filter((v, j): v is number => v !== null && !ov.undetermined[i]?.[j]));
  return kept.length ? [Math.min(...kept), Math.max(...kept)] : null;
}

/** Every tile's cell and colour over a scan of `rows` × `cols` px. */
export function overlayTiles(ov: Overlay, rows: number, cols: number): OverlayTile[] {
  const range = colorRange(ov);
  const er = cellEdges(ov.centers.map((r) => r[0][0]), rows);
  const ec = cellEdges(ov.centers[0].map((c) => c[1]), cols);
  const out: OverlayTile[] = [];
  ov.values.forEach((row, i) =>
    row.forEach((v, j) => {
      const undetermined = ov.undetermined[i]?.[j] === true;
      out.push({
        row_start: er[i], row_stop: er[i + 1], col_start: ec[j], col_stop: ec[j + 1],
        rgb: v !== null && range && !undetermined ? overlayColor(v, range) : null,
        undetermined,
        edge: ov.onBoxEdge[i]?.[j] === true,
      });
    }));
  return out;
}

const count = (g: boolean[][]): number => g.reduce((n, row) => n + row.filter(Boolean).length, 0);

/** The legend: the colour range's ends in the table's digits, the unit, the flagged tiles. */
export function legendValues(ov: Overlay): Legend {
  const range = colorRange(ov);
  const f = (v: number | undefined) => (v === undefined ? "–" : v.toFixed(ov.digits));
  return {
    low: f(range?.[0]), high: f(range?.[1]), unit: ov.unit,
    undeterminedTiles: count(ov.undetermined), edgeTiles: count(ov.onBoxEdge), fixed: ov.fixed,
  };
}

// Typed view of the synced traits of livessb.SSBWidget and of the custom
// messages. Direction as in python/livessb/widget.py.
import type { AnyModel } from "@anywidget/types";
import type { Rect } from "./regions";

export type Status = "idle" | "fitting" | "done" | "error";
export const STATUSES: readonly Status[] = ["idle", "fitting", "done", "error"];

/** A region as synced: scan pixels, stops exclusive. */
export interface Region extends Rect {
  id: string;
}

export type Params = Record<string, number>;

export interface RegionResult {
  status: Status;
  params: Params;
  loss: number | null;
  generation: number;
  error: string;
}

export interface FullFit {
  params: Params;
  loss: number;
  rotation_deg: number;
  transpose: boolean;
}

export interface Traits {
  scan_png: DataView | null; // Python -> JS: full-field phase PNG
  scan_shape: number[]; // Python -> JS: [rows, cols] in scan pixels
  upsample: number; // Python -> JS: output pixels per scan pixel
  status: Status; // Python -> JS
  message: string; // Python -> JS
  full_fit: Partial<FullFit>; // Python -> JS ({} until fitted)
  region_results: Record<string, RegionResult>; // Python -> JS
  regions: Region[]; // JS <-> Python
}

export type Model = AnyModel<Traits>;

/** Python -> JS messages. */
export interface CropMessage {
  type: "crop";
  id: string;
  generation: number;
  shape?: number[];
}

/** JS -> Python messages. */
export type OutgoingMessage = { type: "request_crops" } | { type: "save"; path: string };

export function asStatus(x: unknown): Status {
  return typeof x === "string" && (STATUSES as readonly string[]).includes(x) ? (x as Status) : "idle";
}

const isInt = (v: unknown): v is number => typeof v === "number" && Number.isInteger(v);

/** Keep well-formed regions only (the wire is untyped). */
export function parseRegions(x: unknown): Region[] {
  if (!Array.isArray(x)) return [];
  const out: Region[] = [];
  for (const item of x) {
    if (typeof item !== "object" || item === null) continue;
    const o = item as Record<string, unknown>;
    if (typeof o.id !== "string") continue;
    if (!isInt(o.row_start) || !isInt(o.row_stop) || !isInt(o.col_start) || !isInt(o.col_stop)) continue;
    out.push({ id: o.id, row_start: o.row_start, row_stop: o.row_stop, col_start: o.col_start, col_stop: o.col_stop });
  }
  return out;
}

export function parseShape(x: unknown): { rows: number; cols: number } | null {
  if (!Array.isArray(x) || x.length < 2 || !isInt(x[0]) || !isInt(x[1]) || x[0] < 1 || x[1] < 1) return null;
  return { rows: x[0], cols: x[1] };
}

export function parseCropMessage(msg: unknown): CropMessage | null {
  if (typeof msg !== "object" || msg === null) return null;
  const o = msg as Record<string, unknown>;
  if (o.type !== "crop" || typeof o.id !== "string" || !isInt(o.generation)) return null;
  return { type: "crop", id: o.id, generation: o.generation, shape: Array.isArray(o.shape) ? (o.shape as number[]) : undefined };
}

/** "r1", "r2", ...: the smallest free number. */
export function nextRegionId(regions: readonly { id: string }[]): string {
  const used = new Set(regions.map((r) => r.id));
  for (let i = 1; ; i++) {
    const id = `r${i}`;
    if (!used.has(id)) return id;
  }
}

/** Bytes from whatever the widget manager hands us (DataView, ArrayBuffer, typed array). */
export function toBytes(x: unknown): Uint8Array | null {
  if (x instanceof Uint8Array) return x;
  if (x instanceof DataView) return new Uint8Array(x.buffer, x.byteOffset, x.byteLength);
  if (x instanceof ArrayBuffer) return new Uint8Array(x);
  if (ArrayBuffer.isView(x)) return new Uint8Array(x.buffer, x.byteOffset, x.byteLength);
  return null;
}

/** Plain-object copy of a region list for model.set (no shared references). */
export function regionsForWire(regions: readonly Region[]): Region[] {
  return regions.map((r) => ({ id: r.id, row_start: r.row_start, row_stop: r.row_stop, col_start: r.col_start, col_stop: r.col_stop }));
}

/** Short number for the readouts. */
export function fmt(v: number | null | undefined, digits = 1): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return "–";
  return v.toFixed(digits);
}

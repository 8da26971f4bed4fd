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
  generation: number; // the region's latest edit
  behind?: number; // edits the params and crop shown trail it (0: fitted for it)
  error: string;
  elapsed_s?: number;
  trials?: unknown[]; // [{n, params, loss}] (trials.ts parses)
  errors?: Params; // 1-σ (readout.ts parses these four)
  undetermined?: string[];
  on_box_edge?: string[];
  model?: string | null;
  step?: string; // while fitting: the step it is at ("crystal mode 2/5"), else ""
}

export interface FullFit {
  params: Params;
  loss: number;
  rotation_deg: number;
  transpose: boolean;
  timings?: Record<string, number>;
  errors?: Params; // 1-σ (readout.ts parses these four)
  undetermined?: string[];
  on_box_edge?: string[];
  model?: string | null;
}

export type Stage = "search" | "newton" | "reconstruct" | "map" | "";

export interface Progress {
  stage: Stage;
  done: number;
  total: number;
  elapsed_s: number;
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
  sampling_A: number[]; // Python -> JS: [row, col] Å per output pixel
  param_table: unknown[]; // Python -> JS: params.table_for_frontend() (paramtable.ts parses)
  min_region_px: number; // Python -> JS: smallest region side the session accepts
  trials_full: unknown[]; // Python -> JS: best trials of the full-field fit
  progress: Partial<Progress>; // Python -> JS
  live_regions: boolean; // JS <-> Python
  object_model: string; // JS <-> Python: how regions are fitted ("per_bin" | "lattice": crystal mode)
  map_overlays: Record<string, unknown>; // Python -> JS: latest map ({} none; overlay.ts parses)
  virtual_images: Record<string, unknown>; // Python -> JS: images from the counts (imagekind.ts parses)
  image: string; // JS <-> Python: what the scan view shows (imagekind.ts ImageKind)
  cancellable: string; // Python -> JS: the job a cancel would stop ("fit" | "refine" | "map" | "")
  cancelled: string; // Python -> JS: the job last cancelled ("" none since): root data-cancelled
}

export type Model = AnyModel<Traits>;

/** Python -> JS messages. */
export interface CropMessage {
  type: "crop";
  id: string;
  generation: number; // the edit it was fitted for
  behind: number; // edits it trailed the region's latest when sent (0: absent)
  shape?: number[];
}

/** Python -> JS: a preview frame (its uint16 codes travel in buffers[0]). */
export interface FrameMessage {
  type: "frame";
  seq: number;
  params: Params;
  rotation_deg: number | null;
  loss: number | null;
  view: "phase" | "amplitude";
  shape: [number, number];
  range: [number, number];
  sampling_A: [number, number] | null;
  draft: boolean; // rendered without upsampling during a slider drag
}

export interface ExportedMessage {
  type: "exported";
  files: string[];
  error: string;
}

export function asStatus(x: unknown): Status {
  return typeof x === "string" && (STATUSES as readonly string[]).includes(x) ? (x as Status) : "idle";
}

const isInt = (v: unknown): v is number => typeof v === "number" && Number.isInteger(v);

/** The items of a wire list that `parse` accepts (the wire is untyped: objects only). */
export function parseList<T>(x: unknown, parse: (o: Record<string, unknown>) => T | null): T[] {
  if (!Array.isArray(x)) return [];
  const out: T[] = [];
  for (const item of x) {
    const parsed = typeof item === "object" && item !== null ? parse(item as Record<string, unknown>) : null;
    if (parsed !== null) out.push(parsed);
  }
  return out;
}

/** Keep well-formed regions only. */
export function parseRegions(x: unknown): Region[] {
  return parseList(x, (o) => {
    if (typeof o.id !== "string") return null;
    if (!isInt(o.row_start) || !isInt(o.row_stop) || !isInt(o.col_start) || !isInt(o.col_stop)) return null;
    return { id: o.id, row_start: o.row_start, row_stop: o.row_stop, col_start: o.col_start, col_stop: o.col_stop };
  });
}

export function parseShape(x: unknown): { rows: number; cols: number } | null {
  if (!Array.isArray(x) || x.length < 2 || !isInt(x[0]) || !isInt(x[1]) || x[0] < 1 || x[1] < 1) return null;
  return { rows: x[0], cols: x[1] };
}

export function parseCropMessage(msg: unknown): CropMessage | null {
  if (typeof msg !== "object" || msg === null) return null;
  const o = msg as Record<string, unknown>;
  if (o.type !== "crop" || typeof o.id !== "string" || !isInt(o.generation)) return null;
  const behind = isInt(o.behind) && o.behind > 0 ? o.behind : 0;
  const shape = Array.isArray(o.shape) ? (o.shape as number[]) : undefined;
  return { type: "crop", id: o.id, generation: o.generation, behind, shape };
}

const isNum = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);

function numPair(x: unknown): [number, number] | null {
  return Array.isArray(x) && x.length >= 2 && isNum(x[0]) && isNum(x[1]) ? [x[0], x[1]] : null;
}

/** The finite numbers of an object (parameter dicts). */
export function numbersOf(x: unknown): Params {
  const out: Params = {};
  if (typeof x !== "object" || x === null) return out;
  for (const [k, v] of Object.entries(x as Record<string, unknown>)) if (isNum(v)) out[k] = v;
  return out;
}

export function parseFrameMessage(msg: unknown): FrameMessage | null {
  if (typeof msg !== "object" || msg === null) return null;
  const o = msg as Record<string, unknown>;
  const shape = numPair(o.shape);
  const range = numPair(o.range);
  if (o.type !== "frame" || !isNum(o.seq) || !shape || !range) return null;
  if (!isInt(shape[0]) || !isInt(shape[1]) || shape[0] < 1 || shape[1] < 1) return null;
  return {
    type: "frame",
    seq: o.seq,
    params: numbersOf(o.params),
    rotation_deg: isNum(o.rotation_deg) ? o.rotation_deg : null,
    loss: isNum(o.loss) ? o.loss : null,
    view: o.view === "amplitude" ? "amplitude" : "phase",
    shape,
    range,
    sampling_A: numPair(o.sampling_A),
    draft: o.draft === true,
  };
}

export function parseExportedMessage(msg: unknown): ExportedMessage | null {
  if (typeof msg !== "object" || msg === null) return null;
  const o = msg as Record<string, unknown>;
  if (o.type !== "exported") return null;
  const files = Array.isArray(o.files) ? o.files.filter((f): f is string => typeof f === "string") : [];
  return { type: "exported", files, error: typeof o.error === "string" ? o.error : "" };
}

export function parseProgress(x: unknown): Progress {
  const o = (typeof x === "object" && x !== null ? x : {}) as Record<string, unknown>;
  const stage = o.stage === "search" || o.stage === "newton" || o.stage === "reconstruct" || o.stage === "map" ? o.stage : "";
  return {
    stage,
    done: isNum(o.done) ? o.done : 0,
    total: isNum(o.total) ? o.total : 0,
    elapsed_s: isNum(o.elapsed_s) ? o.elapsed_s : 0,
  };
}

export function parseSampling(x: unknown): [number, number] | null {
  const p = numPair(x);
  return p && p[0] > 0 && p[1] > 0 ? p : null;
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

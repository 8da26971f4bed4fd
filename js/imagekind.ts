// What the scan view shows: one of the virtual images (python/livessb/virtual.py,
// the `virtual_images` trait) or the fit's phase. Parsing the trait into frames
// (the same uint16 codes + range as a preview frame) and the rule that picks what
// is painted from what the user (or the fit) chose and what has arrived.
import { decodeCodes, type Frame } from "./frame";
import { toBytes } from "./model";

export type VirtualKind = "virtual-bf" | "virtual-adf" | "icom" | "dpc";
export type ImageKind = VirtualKind | "phase";
export const VIRTUAL_KINDS: readonly VirtualKind[] = ["virtual-bf", "virtual-adf", "icom", "dpc"];
export const IMAGE_KINDS: readonly ImageKind[] = [...VIRTUAL_KINDS, "phase"];

export interface VirtualImage {
  kind: VirtualKind;
  label: string;
  unit: string;
  frame: Frame;
}

export function isVirtualKind(x: unknown): x is VirtualKind {
  return typeof x === "string" && (VIRTUAL_KINDS as readonly string[]).includes(x);
}

export function asImageKind(x: unknown): ImageKind {
  return x === "phase" || isVirtualKind(x) ? x : "virtual-bf";
}

const isNum = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);

/** The well-formed images of the trait ({kind: {label, unit, shape, range, data}}); a
 * malformed entry is left out rather than painted wrong. */
export function parseVirtualImages(x: unknown): Map<VirtualKind, VirtualImage> {
  const out = new Map<VirtualKind, VirtualImage>();
  if (typeof x !== "object" || x === null) return out;
  for (const kind of VIRTUAL_KINDS) {
    const o = (x as Record<string, unknown>)[kind] as Record<string, unknown> | undefined;
    if (typeof o !== "object" || o === null) continue;
    const shape = o.shape;
    const range = o.range;
    const bytes = toBytes(o.data);
    if (!Array.isArray(shape) || !Array.isArray(range) || !bytes) continue;
    const [rows, cols] = shape;
    const [lo, hi] = range;
    if (!Number.isInteger(rows) || !Number.isInteger(cols) || rows < 1 || cols < 1 || !isNum(lo) || !isNum(hi)) continue;
    if (bytes.byteLength !== 2 * rows * cols) continue;
    out.set(kind, {
      kind,
      label: typeof o.label === "string" ? o.label : kind,
      unit: typeof o.unit === "string" ? o.unit : "a.u.",
      frame: { codes: decodeCodes(bytes, rows, cols), rows, cols, lo, hi },
    });
  }
  return out;
}

/**
 * What to paint: the chosen image when it is there; the phase chosen but not arrived
 * yet (the fit has just ended, its frame is on the way): the last virtual image shown
 * (else the first there is); a virtual image chosen but none arrived: the phase if
 * there is one. null: nothing to paint yet.
 */
export function shownImage(
  wanted: ImageKind, hasPhase: boolean, available: ReadonlySet<VirtualKind>, lastVirtual: VirtualKind | null,
): ImageKind | null {
  if (wanted === "phase") {
    if (hasPhase) return "phase";
    if (lastVirtual !== null && available.has(lastVirtual)) return lastVirtual;
    return VIRTUAL_KINDS.find((k) => available.has(k)) ?? null;
  }
  if (available.has(wanted)) return wanted;
  return hasPhase ? "phase" : null;
}

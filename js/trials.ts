// Trials browsing: the best trials of a fit as the wire sends them, and the
// ←/→ index logic (clamped at the ends; nothing selected yet starts at the best).
import type { Params } from "./model";

export interface Trial {
  n: number;
  params: Params;
  loss: number;
}

export function parseTrials(x: unknown): Trial[] {
  if (!Array.isArray(x)) return [];
  const out: Trial[] = [];
  for (const item of x) {
    if (typeof item !== "object" || item === null) continue;
    const o = item as Record<string, unknown>;
    if (!Number.isInteger(o.n) || typeof o.loss !== "number" || typeof o.params !== "object" || o.params === null) continue;
    const params: Params = {};
    for (const [k, v] of Object.entries(o.params as Record<string, unknown>)) if (typeof v === "number") params[k] = v;
    out.push({ n: o.n as number, params, loss: o.loss });
  }
  return out;
}

/** Index after pressing ← (delta -1) or → (+1); -1 (none) goes to the first. */
export function stepIndex(current: number, delta: number, length: number): number {
  if (length === 0) return -1;
  if (current < 0 || current >= length) return delta < 0 ? length - 1 : 0;
  return Math.min(length - 1, Math.max(0, current + delta));
}

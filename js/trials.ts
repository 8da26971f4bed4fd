// Trials browsing: the best trials of a fit as the wire sends them, and the
// ←/→ index logic (clamped at the ends; nothing selected yet starts at the best).
import { numbersOf, parseList, type Params } from "./model";

export interface Trial {
  n: number;
  params: Params;
  loss: number;
}

export function parseTrials(x: unknown): Trial[] {
  return parseList(x, (o) => {
    if (!Number.isInteger(o.n) || typeof o.loss !== "number" || typeof o.params !== "object" || o.params === null) return null;
    return { n: o.n as number, params: numbersOf(o.params), loss: o.loss };
  });
}

/** Index after pressing ← (delta -1) or → (+1); -1 (none) goes to the first. */
export function stepIndex(current: number, delta: number, length: number): number {
  if (length === 0) return -1;
  if (current < 0 || current >= length) return delta < 0 ? length - 1 : 0;
  return Math.min(length - 1, Math.max(0, current + delta));
}

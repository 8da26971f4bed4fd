// Pointer gesture state machine (UI-only state): what a press starts and what
// the region list looks like while dragging. Pure; the DOM wiring is in widget.ts.
import type { Region } from "./model";
import { nextRegionId } from "./model";
import {
  hitTest, moveRect, rectFromDrag, resizeRect, sameRect,
  type Handle, type Rect, type ScanPoint, type Shape,
} from "./regions";

export type Gesture =
  | { kind: "draw"; id: string; start: ScanPoint }
  | { kind: "move"; id: string; origin: Rect; start: ScanPoint }
  | { kind: "resize"; id: string; origin: Rect; handle: Handle };

/** A press at `p`: grab a handle, grab a region to move, or start drawing. */
export function beginGesture(regions: readonly Region[], p: ScanPoint, tolerance: number): Gesture {
  const hit = hitTest(regions, p, tolerance);
  if (hit === null) return { kind: "draw", id: nextRegionId(regions), start: p };
  if (hit.kind === "handle") return { kind: "resize", id: hit.region.id, origin: { ...hit.region }, handle: hit.handle };
  return { kind: "move", id: hit.region.id, origin: { ...hit.region }, start: p };
}

/**
 * The region list while the pointer is at `p`. A draw shorter than
 * `minDraw` scan px in both directions adds nothing (it was a click).
 */
export function applyGesture(
  regions: readonly Region[], g: Gesture, p: ScanPoint, shape: Shape, minDraw: number,
): Region[] {
  if (g.kind === "draw") {
    const base = regions.filter((r) => r.id !== g.id);
    if (Math.abs(p.r - g.start.r) < minDraw && Math.abs(p.c - g.start.c) < minDraw) return base;
    return [...base, { id: g.id, ...rectFromDrag(g.start, p, shape) }];
  }
  return regions.map((r) => {
    if (r.id !== g.id) return r;
    const rect = g.kind === "move"
      ? moveRect(g.origin, p.r - g.start.r, p.c - g.start.c, shape)
      : resizeRect(g.origin, g.handle, p, shape);
    return { id: r.id, ...rect };
  });
}

/** Did the gesture change anything compared to the committed list? */
export function regionsDiffer(a: readonly Region[], b: readonly Region[]): boolean {
  if (a.length !== b.length) return true;
  return a.some((r, i) => r.id !== b[i].id || !sameRect(r, b[i]));
}

export function removeRegion(regions: readonly Region[], id: string): Region[] {
  return regions.filter((r) => r.id !== id);
}

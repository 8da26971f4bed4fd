// Zoom and pan of the scan view as a Viewport (scan px -> canvas px). The base
// viewport shows the whole scan (zoom 1); zooming scales about the pointer,
// panning shifts, and both are clamped so the scan always covers the canvas.
// canvasToScan (regions.ts) inverts any of these exactly, so regions drawn
// while zoomed land on the right scan pixels.
import type { CanvasPoint, Shape, Viewport } from "./regions";

export const MAX_ZOOM = 32;
/** Zoom factor per wheel notch (deltaY of 100). */
export const WHEEL_STEP = 1.25;

export interface Size {
  w: number; // canvas CSS px
  h: number;
}

/** Zoom factor of `vp` relative to the whole-scan view. */
export function zoomOf(vp: Viewport, base: Viewport): number {
  return vp.scale / base.scale;
}

/** Offsets clamped so the scan covers the canvas (centred where it is smaller). */
export function clampViewport(vp: Viewport, shape: Shape, size: Size): Viewport {
  const axis = (offset: number, extent: number, canvas: number): number => {
    if (extent <= canvas) return (canvas - extent) / 2;
    return Math.min(0, Math.max(canvas - extent, offset));
  };
  return {
    scale: vp.scale,
    offsetX: axis(vp.offsetX, shape.cols * vp.scale, size.w),
    offsetY: axis(vp.offsetY, shape.rows * vp.scale, size.h),
  };
}

/**
 * Multiply the zoom by `factor` keeping the scan point under `at` fixed
 * (zoom kept within [1, MAX_ZOOM] of the base view).
 */
export function zoomAt(vp: Viewport, base: Viewport, at: CanvasPoint, factor: number, shape: Shape, size: Size): Viewport {
  const zoom = Math.min(MAX_ZOOM, Math.max(1, zoomOf(vp, base) * factor));
  const scale = base.scale * zoom;
  // scan point under the pointer before: ((at - offset) / scale); keep it there
  const k = scale / vp.scale;
  const next = { scale, offsetX: at.x - (at.x - vp.offsetX) * k, offsetY: at.y - (at.y - vp.offsetY) * k };
  return zoom === 1 ? clampViewport({ ...base }, shape, size) : clampViewport(next, shape, size);
}

/** Zoom factor of a wheel event's deltaY (negative = towards the user = zoom in). */
export function wheelFactor(deltaY: number, deltaMode = 0): number {
  const px = deltaMode === 1 ? deltaY * 33 : deltaMode === 2 ? deltaY * 400 : deltaY;
  return WHEEL_STEP ** (-px / 100);
}

/** Shift the view by (dx, dy) canvas px. */
export function panBy(vp: Viewport, dx: number, dy: number, shape: Shape, size: Size): Viewport {
  return clampViewport({ scale: vp.scale, offsetX: vp.offsetX + dx, offsetY: vp.offsetY + dy }, shape, size);
}

/** The scan rectangle on screen, continuous scan px [r0, r1) × [c0, c1). */
export function visibleScan(vp: Viewport, shape: Shape, size: Size): { r0: number; r1: number; c0: number; c1: number } {
  const r0 = Math.max(0, -vp.offsetY / vp.scale);
  const c0 = Math.max(0, -vp.offsetX / vp.scale);
  const r1 = Math.min(shape.rows, (size.h - vp.offsetY) / vp.scale);
  const c1 = Math.min(shape.cols, (size.w - vp.offsetX) / vp.scale);
  return { r0, r1, c0, c1 };
}

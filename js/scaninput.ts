// Pointer input on the scan view: the left button draws, moves and resizes
// regions (drafts at frame rate, committed on release); the middle button or
// space + left button pans; the wheel zooms about the pointer. Drafts smaller
// than the session's minimum region are refused with a message.
import { HANDLE_PX } from "./canvas";
import { applyGesture, beginGesture, regionsDiffer, type Gesture } from "./interaction";
import type { Region } from "./model";
import { cursorFor, hitTest, rectHeight, rectWidth } from "./regions";
import type { ScanView } from "./scanview";
import { wheelFactor } from "./view";

export interface ScanInputCallbacks {
  committed: () => readonly Region[];
  minRegionPx: () => number;
  onSelect: (id: string | null) => void;
  onDraft: (regions: readonly Region[]) => void; // a valid draft during a drag
  onCommit: (regions: Region[]) => void;
  onRefused: (message: string) => void;
}

/** The message for a region smaller than the minimum, or null if it is large enough. */
export function tooSmall(region: Region, minPx: number): string | null {
  const h = rectHeight(region);
  const w = rectWidth(region);
  if (h >= minPx && w >= minPx) return null;
  return `region ${region.id} is ${h}×${w} scan px: regions need at least ${minPx}×${minPx}; drag a larger one`;
}

export class ScanInput {
  private gesture: Gesture | null = null;
  private panning: { pointerId: number; x: number; y: number } | null = null;
  private space = false;
  private readonly off: (() => void)[] = [];

  constructor(private readonly view: ScanView, private readonly cb: ScanInputCallbacks) {
    const c = view.canvas;
    const on = <K extends keyof HTMLElementEventMap>(k: K, f: (e: HTMLElementEventMap[K]) => void, opts?: AddEventListenerOptions) => {
      c.addEventListener(k, f as EventListener, opts);
      this.off.push(() => c.removeEventListener(k, f as EventListener, opts));
    };
    on("pointerdown", (e) => this.down(e));
    on("pointermove", (e) => this.move(e));
    on("pointerup", (e) => this.up(e));
    on("pointercancel", () => this.cancel());
    on("wheel", (e) => this.wheel(e), { passive: false });
    on("auxclick", (e) => e.preventDefault()); // no middle-click paste
    on("mousedown", (e) => {
      if (e.button === 1) e.preventDefault(); // no autoscroll: the middle button pans
    });
    on("keydown", (e) => {
      if (e.key === " ") {
        this.space = true;
        c.style.cursor = "grab";
        e.preventDefault();
      }
    });
    on("keyup", (e) => {
      if (e.key === " ") this.space = false;
    });
    on("blur", () => (this.space = false));
  }

  /** Drop a gesture in progress (Esc). */
  cancel(): void {
    this.gesture = null;
    this.panning = null;
    this.view.regions = this.cb.committed();
    this.view.refused = null;
    this.view.schedule();
  }

  get dragging(): boolean {
    return this.gesture !== null;
  }

  dispose(): void {
    for (const f of this.off) f();
  }

  private tolerance(): number {
    return (HANDLE_PX * 0.75) / this.view.viewport.scale;
  }

  private minDraw(): number {
    return 3 / this.view.viewport.scale; // shorter drags are clicks
  }

  private down(e: PointerEvent): void {
    const c = this.view.canvas;
    c.focus();
    if (e.button === 1 || (e.button === 0 && this.space)) {
      c.setPointerCapture(e.pointerId);
      this.panning = { pointerId: e.pointerId, x: e.clientX, y: e.clientY };
      c.style.cursor = "grabbing";
      e.preventDefault();
      return;
    }
    if (e.button !== 0) return;
    c.setPointerCapture(e.pointerId);
    this.gesture = beginGesture(this.cb.committed(), this.view.scanPoint(e), this.tolerance());
    if (this.gesture.kind !== "draw") this.cb.onSelect(this.gesture.id);
    e.preventDefault();
  }

  private move(e: PointerEvent): void {
    if (this.panning) {
      const r = this.view.canvas.getBoundingClientRect();
      const k = r.width > 0 ? this.view.canvas.width / (globalThis.devicePixelRatio || 1) / r.width : 1;
      this.view.panBy((e.clientX - this.panning.x) * k, (e.clientY - this.panning.y) * k);
      this.panning.x = e.clientX;
      this.panning.y = e.clientY;
      return;
    }
    const p = this.view.scanPoint(e);
    if (this.gesture === null) {
      this.view.canvas.style.cursor = this.space ? "grab" : cursorFor(hitTest(this.cb.committed(), p, this.tolerance()));
      return;
    }
    const draft = applyGesture(this.cb.committed(), this.gesture, p, this.view.scanShape, this.minDraw());
    const mine = draft.find((r) => r.id === this.gesture?.id);
    const small = mine ? tooSmall(mine, this.cb.minRegionPx()) : null;
    this.view.regions = draft;
    this.view.refused = small ? mine!.id : null;
    this.view.schedule();
    if (!small && mine && regionsDiffer(draft, this.cb.committed())) this.cb.onDraft(draft);
  }

  private up(e: PointerEvent): void {
    const c = this.view.canvas;
    if (c.hasPointerCapture(e.pointerId)) c.releasePointerCapture(e.pointerId);
    if (this.panning) {
      this.panning = null;
      c.style.cursor = this.space ? "grab" : "crosshair";
      return;
    }
    const g = this.gesture;
    if (g === null) return;
    this.gesture = null;
    const committed = this.cb.committed();
    const next = applyGesture(committed, g, this.view.scanPoint(e), this.view.scanShape, this.minDraw());
    const mine = next.find((r) => r.id === g.id);
    const small = mine ? tooSmall(mine, this.cb.minRegionPx()) : null;
    this.view.refused = null;
    this.view.regions = committed;
    if (small) {
      this.cb.onRefused(small);
      this.cb.onSelect(g.kind === "draw" ? null : g.id);
      this.view.schedule();
      return;
    }
    if (regionsDiffer(next, committed)) this.cb.onCommit(next);
    this.cb.onSelect(mine ? g.id : null);
  }

  private wheel(e: WheelEvent): void {
    e.preventDefault();
    this.view.zoomBy(e, wheelFactor(e.deltaY, e.deltaMode));
  }
}

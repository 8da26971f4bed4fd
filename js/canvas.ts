// Painting the scan image, region overlays, labels and handles on a canvas.
import { paintOverlay } from "./mapview";
import type { Region } from "./model";
import type { OverlayTile } from "./overlay";
import { HANDLES, handlePoint, rectToCanvas, scanToCanvas, type Shape, type Viewport } from "./regions";

const PALETTE = ["#ff595e", "#1982c4", "#8ac926", "#ffca3a", "#6a4c93", "#ff924c", "#36c5b0", "#f15bb5"];

/** Stable, distinct colour per region id ("r3" -> third colour). */
export function regionColor(id: string): string {
  const m = /(\d+)$/.exec(id);
  let n: number;
  if (m) n = Number(m[1]) - 1;
  else n = [...id].reduce((a, ch) => a + ch.charCodeAt(0), 0);
  return PALETTE[((n % PALETTE.length) + PALETTE.length) % PALETTE.length];
}

export const HANDLE_PX = 8;

export interface Scene {
  image: CanvasImageSource | null; // covers the whole scan
  shape: Shape; // scan px
  regions: readonly Region[];
  selected: string | null;
  refused: string | null; // a region drawn too small: painted red, not committed
  overlay: readonly OverlayTile[]; // the chosen parameter's map ([]: none)
  viewport: Viewport;
  width: number; // canvas CSS px
  height: number;
}

/** Size the backing store for the device pixel ratio; returns the 2D context. */
export function setupCanvas(canvas: HTMLCanvasElement, width: number, height: number): CanvasRenderingContext2D {
  const dpr = globalThis.devicePixelRatio || 1;
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  canvas.width = Math.round(width * dpr);
  canvas.height = Math.round(height * dpr);
  const ctx = canvas.getContext("2d");
  if (!ctx) throw new Error("2D canvas not available");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  return ctx;
}

export function paint(ctx: CanvasRenderingContext2D, scene: Scene): void {
  const { viewport: vp } = scene;
  ctx.save();
  ctx.clearRect(0, 0, scene.width, scene.height);
  ctx.fillStyle = "#222";
  ctx.fillRect(0, 0, scene.width, scene.height);
  if (scene.image) {
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(scene.image, vp.offsetX, vp.offsetY, scene.shape.cols * vp.scale, scene.shape.rows * vp.scale);
  }
  if (scene.overlay.length) paintOverlay(ctx, scene.overlay, vp);
  for (const region of scene.regions) {
    paintRegion(ctx, region, region.id === scene.selected, vp, region.id === scene.refused ? "#ff0000" : regionColor(region.id));
  }
  ctx.restore();
}

function paintRegion(ctx: CanvasRenderingContext2D, region: Region, selected: boolean, vp: Viewport, color: string): void {
  const box = rectToCanvas(region, vp);
  ctx.lineWidth = selected ? 2.5 : 1.5;
  ctx.strokeStyle = color;
  ctx.setLineDash(selected ? [] : [6, 3]);
  ctx.strokeRect(box.x + 0.5, box.y + 0.5, Math.max(box.w - 1, 1), Math.max(box.h - 1, 1));
  ctx.setLineDash([]);
  ctx.fillStyle = color + "22";
  ctx.fillRect(box.x, box.y, box.w, box.h);
  // label
  ctx.font = "bold 12px sans-serif";
  const tw = ctx.measureText(region.id).width;
  ctx.fillStyle = color;
  ctx.fillRect(box.x, box.y, tw + 8, 16);
  ctx.fillStyle = "#000";
  ctx.fillText(region.id, box.x + 4, box.y + 12);
  if (!selected) return;
  ctx.fillStyle = "#fff";
  ctx.strokeStyle = color;
  ctx.lineWidth = 1.5;
  for (const h of HANDLES) {
    const p = scanToCanvas(handlePoint(region, h), vp);
    ctx.fillRect(p.x - HANDLE_PX / 2, p.y - HANDLE_PX / 2, HANDLE_PX, HANDLE_PX);
    ctx.strokeRect(p.x - HANDLE_PX / 2, p.y - HANDLE_PX / 2, HANDLE_PX, HANDLE_PX);
  }
}

/** Decode PNG bytes to something drawImage accepts. */
export async function decodePng(bytes: Uint8Array): Promise<ImageBitmap> {
  const blob = new Blob([bytes as BlobPart], { type: "image/png" });
  return await createImageBitmap(blob);
}

// anywidget entry: builds the DOM and wires model <-> views <-> pointer input.
// Geometry lives in regions.ts/interaction.ts, painting in canvas.ts, crop
// panels in crops.ts, readouts in status.ts.
import type { Render } from "@anywidget/types";
import { decodePng, HANDLE_PX, paint, setupCanvas } from "./canvas";
import { CropPanels } from "./crops";
import { element } from "./dom";
import { applyGesture, beginGesture, regionsDiffer, removeRegion, type Gesture } from "./interaction";
import {
  asStatus, parseCropMessage, parseRegions, parseShape, regionsForWire, toBytes,
  type Region, type Traits,
} from "./model";
import { canvasToScan, cursorFor, fitViewport, hitTest, type ScanPoint, type Shape, type Viewport } from "./regions";
import { StatusBar, Toolbar } from "./status";
import "./widget.css";

const MAX_CANVAS_PX = 512;

const render: Render<Traits> = ({ model, el }) => {
  const root = element("div", "livessb");
  const canvas = element("canvas", "", "scan image");
  canvas.tabIndex = 0;
  const left = element("div", "livessb-left");
  const statusBar = new StatusBar();
  const toolbar = new Toolbar();
  const panels = new CropPanels((id) => select(id));
  left.append(canvas, toolbar.el, statusBar.el);
  root.append(left, panels.el);
  el.append(root);

  // --- UI-only state (never synced) ---
  let committed: Region[] = parseRegions(model.get("regions"));
  let draft: Region[] | null = null;
  let gesture: Gesture | null = null;
  let selected: string | null = null;
  let image: ImageBitmap | null = null;
  let shape: Shape = parseShape(model.get("scan_shape")) ?? { rows: 1, cols: 1 };
  let vp: Viewport = fitViewport(shape, MAX_CANVAS_PX);
  let size = { w: 1, h: 1 };
  let ctx: CanvasRenderingContext2D | null = null;
  let frame = 0;
  let alive = true;

  const layout = () => {
    vp = fitViewport(shape, MAX_CANVAS_PX);
    size = { w: Math.round(shape.cols * vp.scale), h: Math.round(shape.rows * vp.scale) };
    ctx = setupCanvas(canvas, size.w, size.h);
  };
  const repaint = () => {
    frame = 0;
    if (ctx) paint(ctx, { image, regions: draft ?? committed, selected, viewport: vp, width: size.w, height: size.h });
  };
  const schedule = () => {
    if (frame === 0 && alive) frame = requestAnimationFrame(repaint);
  };
  const refreshPanels = () => {
    panels.sync(committed, model.get("region_results") ?? {}, selected);
    toolbar.deleteButton.disabled = selected === null;
  };
  function select(id: string | null): void {
    selected = id;
    refreshPanels();
    schedule();
  }
  const commit = (next: Region[]) => {
    root.dataset.lastRelease = String(performance.now()); // latency benchmark: release -> crop painted
    committed = next;
    model.set("regions", regionsForWire(next));
    model.save_changes();
    refreshPanels();
  };

  // --- model -> view ---
  const onScan = async () => {
    const bytes = toBytes(model.get("scan_png"));
    if (!bytes || bytes.byteLength === 0) return;
    try {
      const bmp = await decodePng(bytes);
      if (!alive) return bmp.close();
      image?.close();
      image = bmp;
      schedule();
    } catch (err) {
      statusBar.setMessage(`cannot decode scan image: ${String(err)}`, "error");
    }
  };
  const onShape = () => {
    shape = parseShape(model.get("scan_shape")) ?? shape;
    layout();
    schedule();
  };
  const onStatus = () => {
    const status = asStatus(model.get("status"));
    root.dataset.status = status;
    statusBar.setStatus(status);
    statusBar.setMessage(model.get("message") ?? "", status);
  };
  const onFullFit = () => statusBar.setFullFit(model.get("full_fit") ?? {});
  const onRegions = () => {
    committed = parseRegions(model.get("regions"));
    if (selected !== null && !committed.some((r) => r.id === selected)) selected = null;
    refreshPanels();
    schedule();
  };
  const onMsg = (msg: unknown, buffers: DataView[]) => {
    const crop = parseCropMessage(msg);
    const bytes = buffers?.length ? toBytes(buffers[0]) : null;
    if (crop && bytes) panels.setCrop(crop.id, crop.generation, bytes);
  };
  const listeners: [string, (...a: never[]) => void][] = [
    ["change:scan_png", onScan], ["change:scan_shape", onShape], ["change:status", onStatus],
    ["change:message", onStatus], ["change:full_fit", onFullFit], ["change:regions", onRegions],
    ["change:region_results", refreshPanels], ["msg:custom", onMsg],
  ];
  for (const [name, cb] of listeners) model.on(name, cb as () => void);

  // --- pointer input: local drafts at frame rate, sync on release ---
  const scanPoint = (e: PointerEvent): ScanPoint => {
    const rect = canvas.getBoundingClientRect();
    const sx = rect.width > 0 ? size.w / rect.width : 1;
    const sy = rect.height > 0 ? size.h / rect.height : 1;
    return canvasToScan({ x: (e.clientX - rect.left) * sx, y: (e.clientY - rect.top) * sy }, vp);
  };
  const tolerance = () => (HANDLE_PX * 0.75) / vp.scale;
  const minDraw = () => 3 / vp.scale;
  const onDown = (e: PointerEvent) => {
    if (e.button !== 0) return;
    canvas.focus();
    canvas.setPointerCapture(e.pointerId);
    gesture = beginGesture(committed, scanPoint(e), tolerance());
    if (gesture.kind !== "draw") select(gesture.id);
    e.preventDefault();
  };
  const onMove = (e: PointerEvent) => {
    const p = scanPoint(e);
    if (gesture === null) {
      canvas.style.cursor = cursorFor(hitTest(committed, p, tolerance()));
      return;
    }
    draft = applyGesture(committed, gesture, p, shape, minDraw());
    schedule();
  };
  const onUp = (e: PointerEvent) => {
    if (gesture === null) return;
    const next = applyGesture(committed, gesture, scanPoint(e), shape, minDraw());
    const g = gesture;
    gesture = null;
    draft = null;
    if (canvas.hasPointerCapture(e.pointerId)) canvas.releasePointerCapture(e.pointerId);
    if (regionsDiffer(next, committed)) commit(next);
    select(next.some((r) => r.id === g.id) ? g.id : null);
  };
  const onCancel = () => {
    gesture = null;
    draft = null;
    schedule();
  };
  const deleteSelected = () => {
    if (selected === null) return;
    const id = selected;
    selected = null;
    commit(removeRegion(committed, id));
    schedule();
  };
  const onKey = (e: KeyboardEvent) => {
    if ((e.key === "Delete" || e.key === "Backspace") && selected !== null) {
      e.preventDefault();
      deleteSelected();
    } else if (e.key === "Escape") {
      onCancel();
      select(null);
    }
  };
  const onSave = () => model.send({ type: "save", path: toolbar.pathInput.value.trim() || "calibration.json" });
  canvas.addEventListener("pointerdown", onDown);
  canvas.addEventListener("pointermove", onMove);
  canvas.addEventListener("pointerup", onUp);
  canvas.addEventListener("pointercancel", onCancel);
  canvas.addEventListener("keydown", onKey);
  toolbar.deleteButton.addEventListener("click", deleteSelected);
  toolbar.saveButton.addEventListener("click", onSave);

  layout();
  onStatus();
  onFullFit();
  refreshPanels();
  void onScan();
  schedule();
  model.send({ type: "request_crops" }); // crops are not in the widget state

  return () => {
    alive = false;
    if (frame) cancelAnimationFrame(frame);
    for (const [name, cb] of listeners) model.off(name as never, cb as () => void);
    image?.close();
    panels.dispose();
    root.remove();
  };
};

export default { render };

// anywidget entry: builds the views and wires model <-> views <-> input. Pure
// logic lives in its own modules (geometry, colormaps, contrast, FFT, latest
// wins, trials, pins); views in scanview/steering/inspect/fftview/lists/…
import type { Render } from "@anywidget/types";
import { decodePng } from "./canvas";
import { isColormap } from "./colormaps";
import { CropPanels } from "./crops";
import { FrameDisplay } from "./display";
import { element } from "./dom";
import { FFTView } from "./fftview";
import { decodeCodes } from "./frame";
import { InspectPanel } from "./inspect";
import { isStale, LatestWins, Throttle } from "./latest";
import { PinsPanel, TrialsList } from "./lists";
import {
  asStatus, parseCropMessage, parseExportedMessage, parseFrameMessage, parseProgress, parseRegions,
  parseSampling, parseShape, regionsForWire, toBytes, type Params, type Region, type Traits,
} from "./model";
import { completeParams, parseParamTable, type ParamRow } from "./paramtable";
import { addPin, exportPinsMessage, removePin, type Pin, type ViewKind } from "./pins";
import { ProgressView } from "./progress";
import { removeRegion } from "./interaction";
import { ScanInput } from "./scaninput";
import { ScanView } from "./scanview";
import { StatusBar, Toolbar } from "./status";
import { SteeringPanel } from "./steering";
import { parseTrials, stepIndex, type Trial } from "./trials";
import "./widget.css";

const LIVE_REGION_MS = 100; // live region edits: at most one every 100 ms (latest wins)

interface PreviewRequest {
  params: Params;
  rotation_deg: number | null;
  view: ViewKind;
}

const render: Render<Traits> = ({ model, el }) => {
  const root = element("div", "livessb");
  root.dataset.lmSuppressShortcuts = "true"; // keys typed here are the widget's, not the notebook's
  root.dataset.previewFrame = "0";
  root.dataset.zoom = "1";
  const scan = new ScanView();
  const statusBar = new StatusBar();
  const toolbar = new Toolbar();
  const progress = new ProgressView();
  const panels = new CropPanels((id) => select(id));
  const fft = new FFTView();
  const steering = new SteeringPanel({
    onChange: () => requestPreview(),
    onReset: () => resetToFit(),
    onRefine: () => model.send({ type: "refine", params: steering.values(), locked: steering.locked() }),
  });
  const inspect = new InspectPanel({
    onColormap: (name) => display.setColormap(name),
    onView: (v) => { view = v; display.autoLimits = true; requestPreview(); },
    onAutoContrast: () => display.auto(),
    onLimits: (lo, hi) => display.setLimits(lo, hi),
    onResetView: () => scan.resetView(),
    onFFT: (shown) => { fft.show(shown); fftKey = ""; updateFFT(); },
  });
  const display = new FrameDisplay(scan, inspect);
  const trialsList = new TrialsList((i) => showTrial(i));
  const pinsPanel = new PinsPanel({
    onPin: () => pin(),
    onShow: (p) => showPin(p),
    onRemove: (name) => { pins = removePin(pins, name); pinsPanel.set(pins, table); },
    onExportPins: (dir) => model.send(exportPinsMessage(dir, pins)),
    onExportTiff: (path) => model.send({ type: "export_tiff", path, params: shownParams(), view, ...rotationField() }),
  });
  const left = element("div", "livessb-left");
  left.append(scan.el, inspect.el, fft.el, toolbar.el, progress.el, statusBar.el);
  const middle = element("div", "livessb-middle");
  middle.append(steering.el, trialsList.el, pinsPanel.el);
  root.append(left, middle, panels.el);
  el.append(root);

  // --- UI-only state (never synced) ---
  let committed: Region[] = parseRegions(model.get("regions"));
  let selected: string | null = null;
  let table: ParamRow[] = [];
  let view: ViewKind = "phase";
  let pins: Pin[] = [];
  let trials: Trial[] = [];
  let trialIndex = -1;
  let lastPainted = -Infinity;
  let painted = 0;
  let fftKey = "";
  let alive = true;

  const preview = new LatestWins<PreviewRequest>((req, seq) => {
    model.send({ type: "preview", seq, params: req.params, view: req.view, ...(req.rotation_deg === null ? {} : { rotation_deg: req.rotation_deg }) });
  }, Date.now());
  const liveRegions = new Throttle<Region[]>((next) => {
    model.set("regions", regionsForWire(next));
    model.save_changes();
  }, LIVE_REGION_MS);

  function requestPreview(): void {
    preview.request({ params: steering.values(), rotation_deg: steering.rotationDeg(), view });
  }
  const rotationField = () => {
    const r = steering.rotationDeg();
    return r === null ? {} : { rotation_deg: r };
  };
  /** Parameters of the frame on screen (else of the controls). */
  const shownParams = (): Params => ({ ...(display.meta?.params ?? steering.values()) });
  const fullFit = () => model.get("full_fit") ?? {};
  function resetToFit(): void {
    const fit = fullFit();
    if (!fit.params) return;
    steering.setValues(completeParams(table, fit.params), fit.rotation_deg ?? null);
    requestPreview();
  }
  function showTrial(i: number): void {
    const t = trials[i];
    if (!t) return;
    trialIndex = i;
    trialsList.setActive(i);
    steering.setValues(t.params, null);
    requestPreview();
  }
  function pin(): void {
    const meta = display.meta;
    pins = addPin(pins, {
      params: shownParams(), rotation_deg: meta?.rotation_deg ?? steering.rotationDeg(), loss: meta?.loss ?? null,
      view, colormap: display.colormap, contrast: [display.limits[0], display.limits[1]],
    });
    pinsPanel.set(pins, table);
  }
  function showPin(p: Pin): void {
    steering.setValues(p.params, p.rotation_deg);
    inspect.colormap.value = p.colormap;
    display.colormap = p.colormap;
    display.setLimits(p.contrast[0], p.contrast[1]);
    view = p.view;
    inspect.view.value = p.view;
    requestPreview();
  }
  function refreshTrials(): void {
    const reg = selected !== null ? model.get("region_results")?.[selected] : undefined;
    const regTrials = parseTrials(reg?.trials);
    const useRegion = regTrials.length > 0;
    trials = useRegion ? regTrials : parseTrials(model.get("trials_full"));
    if (trialIndex >= trials.length) trialIndex = -1;
    trialsList.set(trials, table, useRegion ? `region ${selected}` : "full field", trialIndex);
  }

  // --- scan view, regions ---
  const refreshPanels = () => {
    panels.sync(committed, model.get("region_results") ?? {}, selected);
    toolbar.deleteButton.disabled = selected === null;
  };
  function select(id: string | null): void {
    if (id !== selected) trialIndex = -1;
    selected = id;
    scan.selected = id;
    refreshPanels();
    refreshTrials();
    scan.schedule();
  }
  const commit = (next: Region[]) => {
    liveRegions.cancel();
    root.dataset.lastRelease = String(performance.now()); // latency benchmark: release -> crop painted
    committed = next;
    scan.regions = next;
    statusBar.setNotice("");
    model.set("regions", regionsForWire(next));
    model.save_changes();
    refreshPanels();
  };
  const input = new ScanInput(scan, {
    committed: () => committed,
    minRegionPx: () => Math.max(1, model.get("min_region_px") ?? 1),
    onSelect: (id) => select(id),
    onDraft: (draft) => { if (model.get("live_regions")) liveRegions.call(regionsForWire(draft)); },
    onCommit: commit,
    onRefused: (text) => statusBar.setNotice(text),
  });
  const updateSampling = () => {
    const shape = scan.scanShape;
    const meta = display.meta;
    const trait = parseSampling(model.get("sampling_A"));
    const up = model.get("upsample") || 1;
    let perScanPx: number | null = trait ? trait[1] * up : null;
    if (meta?.sampling_A) perScanPx = (meta.sampling_A[1] * meta.shape[1]) / shape.cols;
    scan.scanSamplingA = perScanPx;
    panels.configure(table, trait ? trait[1] : null);
  };
  /** FFT of the frame's pixels on screen (recomputed when the frame or the view changes). */
  function updateFFT(): void {
    const f = display.frame;
    const sampling = display.meta?.sampling_A;
    const values = display.frameValues();
    if (!fft.shown || !f || !sampling || !values) return;
    const v = scan.visible();
    const key = `${painted}:${v.r0},${v.r1},${v.c0},${v.c1}`;
    if (key === fftKey) return;
    fftKey = key;
    const fr = f.rows / scan.scanShape.rows; // frame px per scan px
    const fc = f.cols / scan.scanShape.cols;
    const r0 = Math.floor(v.r0 * fr);
    const c0 = Math.floor(v.c0 * fc);
    const h = Math.min(f.rows, Math.ceil(v.r1 * fr)) - r0;
    const w = Math.min(f.cols, Math.ceil(v.c1 * fc)) - c0;
    fft.update({ values, cols: f.cols, r0, c0, h, w, samplingA: sampling });
  }
  scan.onViewChange = () => {
    root.dataset.zoom = String(Number(scan.zoom.toFixed(4)));
    updateFFT();
  };

  // --- model -> view ---
  const onScan = async () => {
    const bytes = toBytes(model.get("scan_png"));
    if (!bytes || bytes.byteLength === 0) return;
    try {
      const bmp = await decodePng(bytes);
      if (!alive) return bmp.close();
      scan.setPng(bmp);
    } catch (err) {
      statusBar.setMessage(`cannot decode scan image: ${String(err)}`, "error");
    }
  };
  const onShape = () => {
    const shape = parseShape(model.get("scan_shape"));
    if (shape) scan.setShape(shape);
    updateSampling();
  };
  const onStatus = () => {
    const status = asStatus(model.get("status"));
    root.dataset.status = status;
    statusBar.setStatus(status);
    statusBar.setMessage(model.get("message") ?? "", status);
  };
  const onTable = () => {
    table = parseParamTable(model.get("param_table"));
    steering.setTable(table);
    const fit = fullFit();
    if (fit.params) steering.setValues(completeParams(table, fit.params), fit.rotation_deg ?? null);
    updateSampling();
    refreshPanels();
    onFullFit();
  };
  const onFullFit = () => {
    const fit = fullFit();
    statusBar.setFullFit(fit, table);
    progress.setTimings(fit.timings);
    if (fit.params && !steering.editing()) steering.setValues(completeParams(table, fit.params), fit.rotation_deg ?? null);
  };
  const onRegions = () => {
    if (input.dragging) return; // our own live edits echoing back
    committed = parseRegions(model.get("regions"));
    scan.regions = committed;
    if (selected !== null && !committed.some((r) => r.id === selected)) select(null);
    refreshPanels();
    scan.schedule();
  };
  const onLive = () => (toolbar.liveRegions.checked = !!model.get("live_regions"));
  const onFrame = (msg: unknown, buffers: DataView[]) => {
    const meta = parseFrameMessage(msg);
    if (!meta) return false;
    preview.answered(meta.seq);
    const bytes = buffers?.length ? toBytes(buffers[0]) : null;
    if (!bytes || isStale(meta.seq, lastPainted)) return true;
    try {
      const codes = decodeCodes(bytes, meta.shape[0], meta.shape[1]);
      lastPainted = meta.seq;
      display.show({ codes, rows: meta.shape[0], cols: meta.shape[1], lo: meta.range[0], hi: meta.range[1] }, meta);
      painted += 1;
      root.dataset.previewParams = JSON.stringify(meta.params);
      root.dataset.previewFrame = String(painted);
      root.dataset.previewSeq = String(meta.seq);
      scan.setLoss(meta.loss);
      updateSampling();
      updateFFT();
    } catch (err) {
      statusBar.setNotice(`cannot show frame: ${String(err)}`);
    }
    return true;
  };
  const onMsg = (msg: unknown, buffers: DataView[]) => {
    if (onFrame(msg, buffers)) return;
    const exported = parseExportedMessage(msg);
    if (exported) {
      pinsPanel.setResult(exported.error ? `export failed: ${exported.error}` : `exported ${exported.files.join(", ")}`, !!exported.error);
      return;
    }
    const crop = parseCropMessage(msg);
    const bytes = buffers?.length ? toBytes(buffers[0]) : null;
    if (crop && bytes) panels.setCrop(crop.id, crop.generation, bytes);
  };
  const listeners: [string, (...a: never[]) => void][] = [
    ["change:scan_png", onScan], ["change:scan_shape", onShape], ["change:status", onStatus],
    ["change:message", onStatus], ["change:full_fit", onFullFit], ["change:regions", onRegions],
    ["change:region_results", () => { refreshPanels(); refreshTrials(); }], ["msg:custom", onMsg],
    ["change:param_table", onTable], ["change:sampling_A", updateSampling], ["change:upsample", updateSampling],
    ["change:trials_full", refreshTrials], ["change:progress", () => progress.setProgress(parseProgress(model.get("progress")))],
    ["change:live_regions", onLive],
  ];
  for (const [name, cb] of listeners) model.on(name, cb as () => void);

  // --- keys: anywhere in the widget except while typing in a field ---
  const deleteSelected = () => {
    if (selected === null) return;
    const id = selected;
    select(null);
    commit(removeRegion(committed, id));
  };
  const typing = (t: EventTarget | null) =>
    (t instanceof HTMLInputElement && t.type !== "checkbox" && t.type !== "button") || t instanceof HTMLSelectElement || t instanceof HTMLTextAreaElement;
  const onKey = (e: KeyboardEvent) => {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.key === "Escape") {
      input.cancel();
      statusBar.setNotice("");
      select(null);
    } else if (typing(e.target)) {
      return;
    } else if (e.key === "r" || e.key === "R") {
      scan.resetView();
    } else if (e.key === "p" || e.key === "P") {
      pin();
    } else if (e.key === "ArrowLeft" || e.key === "ArrowRight") {
      const i = stepIndex(trialIndex, e.key === "ArrowLeft" ? -1 : 1, trials.length);
      if (i >= 0) showTrial(i);
    } else if ((e.key === "Delete" || e.key === "Backspace") && selected !== null) {
      deleteSelected();
    } else {
      return;
    }
    e.preventDefault();
    e.stopPropagation();
  };
  root.addEventListener("keydown", onKey);
  toolbar.deleteButton.addEventListener("click", deleteSelected);
  toolbar.saveButton.addEventListener("click", () => model.send({ type: "save", path: toolbar.pathInput.value.trim() || "calibration.json" }));
  toolbar.liveRegions.addEventListener("change", () => {
    model.set("live_regions", toolbar.liveRegions.checked);
    model.save_changes();
  });
  inspect.colormap.value = isColormap(display.colormap) ? display.colormap : "gray";

  onShape();
  onTable();
  onStatus();
  onLive();
  refreshPanels();
  refreshTrials();
  progress.setProgress(parseProgress(model.get("progress")));
  scan.regions = committed;
  void onScan();
  model.send({ type: "request_crops" }); // crops and the last frame are not in the widget state

  return () => {
    alive = false;
    liveRegions.cancel();
    for (const [name, cb] of listeners) model.off(name as never, cb as () => void);
    input.dispose();
    scan.dispose();
    panels.dispose();
    root.remove();
  };
};

export default { render };

// anywidget entry: builds the views and wires model <-> views <-> input.
// Logic lives elsewhere: geometry (regions, interaction, view), painting
// (canvas, display, colormaps, contrast), steering frames (preview), trials
// and pins (browse), FFT (fft, peaks, dspacing, fftview), line profile (profile, profileview).
import type { Render } from "@anywidget/types";
import { Browse } from "./browse";
import { CancelControl } from "./cancel";
import { jobName } from "./cancelkey";
import { decodePng } from "./canvas";
import { CropPanels } from "./crops";
import { diffractionPanel } from "./diffractionview";
import { FrameDisplay } from "./display";
import { element } from "./dom";
import { FFTView } from "./fftview";
import { ImageChoice } from "./imageview";
import { InspectPanel } from "./inspect";
import { buildLayout } from "./layout";
import { removeRegion } from "./interaction";
import { Throttle } from "./latest";
import { PinsPanel, TrialsList } from "./lists";
import { MapPanel } from "./mapview";
import {
  asStatus, numbersOf, parseCropMessage, parseProgress, parseRegions, parseSampling, parseShape, regionsForWire, toBytes,
  type Region, type Traits,
} from "./model";
import { parseMapOverlays } from "./overlay";
import { completeParams, parseParamTable } from "./paramtable";
import { PreviewController } from "./preview";
import { ProfileTool } from "./profileview";
import { ProgressView } from "./progress";
import { ScanInput } from "./scaninput";
import { ScanView } from "./scanview";
import { StatusBar, Toolbar } from "./status";
import { SteeringPanel } from "./steering";
import "./widget.css";
import "./layout.css";

const LIVE_REGION_MS = 100; // live region edits: at most one every 100 ms (latest wins)

const render: Render<Traits> = ({ model, el }) => {
  const root = element("div", "livessb");
  root.dataset.lmSuppressShortcuts = "true"; // keys typed here are the widget's, not the notebook's
  root.dataset.zoom = "1";
  const scan = new ScanView();
  const statusBar = new StatusBar();
  const toolbar = new Toolbar();
  const progress = new ProgressView();
  const cancel = new CancelControl(root, model); // its button and Esc: cancel.ts
  const maps = new MapPanel({
    onFit: (tile) => model.send({ type: "fit_map", tile }),
    onShow: (tiles) => {
      scan.overlay = tiles;
      scan.schedule();
    },
  });
  const panels = new CropPanels((id) => select(id));
  const fft = new FFTView();
  const steering = new SteeringPanel({
    onChange: (draft) => preview.request(draft),
    onReset: () => resetToFit(),
    onRefine: () => model.send({ type: "refine", params: steering.values(), locked: steering.locked() }),
  });
  const inspect = new InspectPanel({
    onColormap: (name) => images.setColormap(name),
    onView: (v) => {
      preview.view = v;
      display.autoLimits = true;
      preview.request();
    },
    onAutoContrast: () => images.active.auto(),
    onLimits: (lo, hi) => images.active.setLimits(lo, hi),
    onResetView: () => scan.resetView(),
    onFFT: (shown) => preview.showFFT(shown),
  });
  const display = new FrameDisplay(scan, inspect);
  const profile = new ProfileTool(scan, display);
  const preview = new PreviewController(model, root, scan, steering, display, fft, (t) => statusBar.setNotice(t));
  const images = new ImageChoice(model, root, scan, display, new FrameDisplay(scan, inspect), progress.bar); // virtual image | phase
  preview.onRequest = () => images.steered();
  const trialsList = new TrialsList((i) => browse.showTrial(i));
  const pinsPanel = new PinsPanel({
    onPin: () => browse.pin(),
    onShow: (p) => browse.showPin(p),
    onRemove: (name) => browse.removePin(name),
    onExportPins: (dir) => browse.exportPins(dir),
    onExportTiff: (path) => browse.exportTiff(path),
  });
  const browse = new Browse(model, steering, preview, display, inspect, trialsList, pinsPanel);
  const layout = buildLayout({
    stage: scan.el, colourBar: images.colourBar.el, viewRow: inspect.viewRow, imageControls: [images.el],
    viewTools: [profile.toggle], contrastRow: inspect.contrastRow, mapRow: maps.el, tools: [fft.el, profile.el],
    lists: [trialsList.el, pinsPanel.el], steering: steering.el, status: statusBar.el, statusHeader: statusBar.header,
    cancel: cancel.el, timings: progress.el, save: toolbar.saveRow, regionTools: toolbar.regionTools, crops: panels.el,
  });
  layout.side.append(diffractionPanel(model, root, scan)); // the pattern under the pointer, BF pixels
  root.append(layout.el);
  el.append(root);

  // --- regions (UI-only state: the committed list and the selection) ---
  let committed: Region[] = parseRegions(model.get("regions"));
  let selected: string | null = null;
  let alive = true;
  const liveRegions = new Throttle<Region[]>((next) => {
    model.set("regions", regionsForWire(next));
    model.save_changes();
  }, LIVE_REGION_MS);
  const refreshPanels = () => {
    panels.sync(committed, model.get("region_results") ?? {}, selected);
    toolbar.deleteButton.disabled = selected === null;
  };
  function select(id: string | null): void {
    selected = id;
    scan.selected = id;
    refreshPanels();
    browse.refreshTrials(selected);
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
    onDraft: (draft) => {
      if (model.get("live_regions")) liveRegions.call(regionsForWire(draft));
    },
    onCommit: commit,
    onRefused: (text) => statusBar.setNotice(text),
  });
  const deleteSelected = () => {
    if (selected === null) return;
    const id = selected;
    select(null);
    commit(removeRegion(committed, id));
  };
  scan.onViewChange = () => {
    root.dataset.zoom = String(Number(scan.zoom.toFixed(4)));
    preview.updateFFT();
  };
  const fullFit = () => model.get("full_fit") ?? {};
  function resetToFit(): void {
    const fit = fullFit();
    if (!fit.params) return;
    steering.showFit(completeParams(browse.table, fit.params), numbersOf(fit.errors), fit.rotation_deg ?? null);
    browse.clearActive();
    preview.request();
  }

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
  /** Å per scan px for the scan's scale bar (the frame's, else the traits'), Å per crop px. */
  const onSampling = () => {
    const trait = parseSampling(model.get("sampling_A"));
    const meta = display.meta;
    scan.scanSamplingA = meta?.sampling_A
      ? (meta.sampling_A[1] * meta.shape[1]) / scan.scanShape.cols
      : trait ? trait[1] * (model.get("upsample") || 1) : null;
    panels.configure(browse.table, trait ? trait[1] : null);
  };
  const onShape = () => {
    const shape = parseShape(model.get("scan_shape"));
    if (shape) scan.setShape(shape);
    if (shape) maps.setShape(shape.rows, shape.cols);
    onSampling();
  };
  const onStatus = () => {
    const status = asStatus(model.get("status"));
    root.dataset.status = status;
    statusBar.setStatus(status);
    statusBar.setMessage(model.get("message") ?? "", status);
  };
  const onFullFit = () => {
    const fit = fullFit();
    statusBar.setFullFit(fit, browse.table);
    progress.setTimings(fit.timings);
    if (fit.params && !steering.editing()) {
      steering.showFit(completeParams(browse.table, fit.params), numbersOf(fit.errors), fit.rotation_deg ?? null);
    }
  };
  const onTable = () => {
    browse.table = parseParamTable(model.get("param_table"));
    steering.setTable(browse.table);
    onSampling();
    refreshPanels();
    onFullFit();
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
  const onCrystal = () => (toolbar.crystalMode.checked = model.get("object_model") === "lattice");
  const onMaps = () => maps.setMaps(parseMapOverlays(model.get("map_overlays")));
  const onCancellable = () => maps.setRunning(jobName(model.get("cancellable")) === "map");
  const onProgress = () => progress.setProgress(parseProgress(model.get("progress")));
  const onMsg = (msg: unknown, buffers: DataView[]) => {
    if (preview.receive(msg, buffers)) {
      images.refresh(); // the phase the scan view may be waiting for
      return onSampling();
    }
    if (browse.receive(msg)) return;
    const crop = parseCropMessage(msg);
    const bytes = buffers?.length ? toBytes(buffers[0]) : null;
    if (crop && bytes) panels.setCrop(crop.id, crop, bytes);
  };
  const listeners: [string, (...a: never[]) => void][] = [
    ["change:scan_png", onScan], ["change:scan_shape", onShape], ["change:status", onStatus],
    ["change:message", onStatus], ["change:full_fit", onFullFit], ["change:regions", onRegions],
    ["change:region_results", () => select(selected)], ["msg:custom", onMsg],
    ["change:param_table", onTable], ["change:sampling_A", onSampling], ["change:upsample", onSampling],
    ["change:trials_full", () => browse.refreshTrials(selected)], ["change:progress", onProgress],
    ["change:live_regions", onLive], ["change:object_model", onCrystal], ["change:map_overlays", onMaps],
    ["change:cancellable", onCancellable],
  ];
  for (const [name, cb] of listeners) model.on(name, cb as () => void);

  // --- keys: anywhere in the widget except while typing in a field ---
  const typing = (t: EventTarget | null) =>
    (t instanceof HTMLInputElement && t.type !== "checkbox" && t.type !== "button") ||
    t instanceof HTMLSelectElement || t instanceof HTMLTextAreaElement;
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
      browse.pin();
    } else if (e.key === "ArrowLeft" || e.key === "ArrowRight") {
      browse.step(e.key === "ArrowLeft" ? -1 : 1);
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
  toolbar.saveButton.addEventListener("click", () =>
    model.send({ type: "save", path: toolbar.pathInput.value.trim() || "calibration.json" }));
  toolbar.liveRegions.addEventListener("change", () => {
    model.set("live_regions", toolbar.liveRegions.checked);
    model.save_changes();
  });
  toolbar.crystalMode.addEventListener("change", () => {
    model.set("object_model", toolbar.crystalMode.checked ? "lattice" : "per_bin");
    model.save_changes();
  });

  onShape();
  onTable();
  onStatus();
  onLive();
  onCrystal();
  onProgress();
  onMaps();
  onCancellable();
  scan.regions = committed;
  select(null);
  void onScan();
  model.send({ type: "request_crops" }); // crops and the last frame are not in the widget state

  return () => {
    alive = false;
    liveRegions.cancel();
    for (const [name, cb] of listeners) model.off(name as never, cb as () => void);
    input.dispose();
    cancel.dispose();
    profile.dispose();
    images.dispose();
    scan.dispose();
    panels.dispose();
    root.remove();
  };
};

export default { render };

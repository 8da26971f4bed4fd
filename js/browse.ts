// Trials and pins behind their lists: which trials are listed (the selected
// region's fit if it has trials, else the full field's), ←/→ browsing, pins
// of the view on screen, and the export messages.
import type { FrameDisplay } from "./display";
import type { InspectPanel } from "./inspect";
import type { PinsPanel, TrialsList } from "./lists";
import { parseExportedMessage, type Model } from "./model";
import type { ParamRow } from "./paramtable";
import { addPin, exportPinsMessage, removePin, type Pin } from "./pins";
import type { PreviewController } from "./preview";
import type { SteeringPanel } from "./steering";
import { parseTrials, stepIndex, type Trial } from "./trials";

export class Browse {
  table: readonly ParamRow[] = [];
  private trials: Trial[] = [];
  private index = -1;
  private source: string | null = null;
  private pins: Pin[] = [];

  constructor(
    private readonly model: Model,
    private readonly steering: SteeringPanel,
    private readonly preview: PreviewController,
    private readonly display: FrameDisplay,
    private readonly inspect: InspectPanel,
    private readonly trialsList: TrialsList,
    private readonly pinsPanel: PinsPanel,
  ) {}

  /** List the trials of region `selected` (if it has any) or of the full field. */
  refreshTrials(selected: string | null): void {
    const regionTrials = selected === null ? [] : parseTrials(this.model.get("region_results")?.[selected]?.trials);
    const source = regionTrials.length > 0 ? selected : null;
    if (source !== this.source) this.index = -1;
    this.source = source;
    this.trials = source !== null ? regionTrials : parseTrials(this.model.get("trials_full"));
    if (this.index >= this.trials.length) this.index = -1;
    this.trialsList.set(this.trials, this.table, source !== null ? `region ${source}` : "full field", this.index);
  }

  /** Show trial `i`'s reconstruction (its parameters go to the controls). */
  showTrial(i: number): void {
    const t = this.trials[i];
    if (!t) return;
    this.index = i;
    this.trialsList.setActive(i);
    this.steering.setValues(t.params, null);
    this.preview.request();
  }

  /** Nothing browsed any more (the controls went back to the fit). */
  clearActive(): void {
    this.index = -1;
    this.trialsList.setActive(-1);
  }

  /** ←/→ */
  step(delta: number): void {
    const i = stepIndex(this.index, delta, this.trials.length);
    if (i >= 0) this.showTrial(i);
  }

  pin(): void {
    const meta = this.display.meta;
    this.pins = addPin(this.pins, {
      params: this.preview.shownParams(),
      rotation_deg: meta?.rotation_deg ?? this.steering.rotationDeg(),
      loss: meta?.loss ?? null,
      view: this.preview.view,
      colormap: this.display.colormap,
      contrast: [this.display.limits[0], this.display.limits[1]],
    });
    this.pinsPanel.set(this.pins, this.table);
  }

  /** Back to a pin: its parameters, view, colormap and contrast. */
  showPin(p: Pin): void {
    this.steering.setValues(p.params, p.rotation_deg);
    this.inspect.colormap.value = p.colormap;
    this.inspect.view.value = p.view;
    this.display.colormap = p.colormap;
    this.display.setLimits(p.contrast[0], p.contrast[1]);
    this.preview.view = p.view;
    this.preview.request();
  }

  removePin(name: string): void {
    this.pins = removePin(this.pins, name);
    this.pinsPanel.set(this.pins, this.table);
  }

  exportPins(dir: string): void {
    if (this.pins.length === 0) {
      this.pinsPanel.setResult("no pins to export: pin the current view first (P)", true);
      return;
    }
    this.pinsPanel.setResult(`exporting ${this.pins.length} pin(s) …`, false);
    this.model.send(exportPinsMessage(dir, this.pins));
  }

  exportTiff(path: string): void {
    this.pinsPanel.setResult("exporting the TIFF …", false);
    this.model.send({ type: "export_tiff", path, params: this.preview.shownParams(), view: this.preview.view, ...this.preview.rotationField() });
  }

  /** Handle an `exported` answer; false if the message is something else. */
  receive(msg: unknown): boolean {
    const exported = parseExportedMessage(msg);
    if (!exported) return false;
    const text = exported.error ? `export failed: ${exported.error}` : `exported ${exported.files.join(", ")}`;
    this.pinsPanel.setResult(text, exported.error !== "");
    return true;
  }
}

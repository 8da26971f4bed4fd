// Widget status, message line and the full-field readout (rotation + params).
import { button, element } from "./dom";
import { fmt, type FullFit, type Status } from "./model";
import { jointRows, type ParamRow } from "./paramtable";
import { modelText, parseTrust, readout, type ReadoutState } from "./readout";

export class StatusBar {
  readonly el: HTMLElement;
  readonly header: HTMLElement; // the badge's row (layout.ts adds the cancel button)
  private statusEl: HTMLElement;
  private messageEl: HTMLElement;
  private readoutEl: HTMLElement;
  private noticeEl: HTMLElement;

  constructor() {
    this.el = element("div", "livessb-status");
    this.statusEl = element("span", "livessb-status-badge", "widget status");
    this.messageEl = element("div", "livessb-message", "message");
    this.messageEl.setAttribute("role", "status");
    this.readoutEl = element("div", "livessb-readout", "full-field fit");
    this.noticeEl = element("div", "livessb-notice", "notice");
    this.noticeEl.setAttribute("role", "alert");
    this.header = element("div", "livessb-status-header");
    this.header.append(this.statusEl);
    this.el.append(this.header, this.readoutEl, this.messageEl, this.noticeEl);
  }

  /** A browser-side notice (e.g. a refused region), cleared with "". */
  setNotice(text: string): void {
    this.noticeEl.textContent = text;
    this.noticeEl.hidden = text === "";
  }

  setStatus(status: Status): void {
    this.statusEl.textContent = status;
    this.statusEl.dataset.status = status;
  }

  setMessage(message: string, status: Status): void {
    this.messageEl.textContent = message;
    this.messageEl.classList.toggle("error", status === "error");
  }

  setFullFit(fit: Partial<FullFit>, table: readonly ParamRow[]): void {
    this.readoutEl.replaceChildren();
    if (fit.params === undefined) {
      this.readoutEl.textContent = "full field: not fitted";
      return;
    }
    const add = (key: string, text: string, value: number | boolean | undefined, state?: ReadoutState) => {
      const span = element("span");
      span.dataset.param = key;
      if (value !== undefined) span.dataset.value = String(value);
      if (state) span.dataset.state = state;
      span.textContent = text;
      this.readoutEl.append(span);
    };
    const p = fit.params;
    add("rotation_deg", `rotation ${fmt(fit.rotation_deg, 2)}°${fit.transpose ? " (T)" : ""}`, fit.rotation_deg);
    add("transpose", "", fit.transpose);
    const trust = parseTrust(fit);
    for (const row of jointRows(table)) {
      const r = readout(row, p[row.name], trust);
      add(row.name, `${row.label} ${r.text}`, p[row.name], r.state);
    }
    add("loss", `loss ${fmt(fit.loss, 4)}`, fit.loss);
    if (trust.model) add("model", modelText(trust), undefined);
  }
}

/** Toolbar: delete selected region, live regions and crystal mode (the gallery's
 * header), and the calibration path + save (beside the status). */
export class Toolbar {
  readonly regionTools: HTMLElement;
  readonly saveRow: HTMLElement;
  readonly deleteButton: HTMLButtonElement;
  readonly liveRegions: HTMLInputElement;
  readonly crystalMode: HTMLInputElement;
  readonly pathInput: HTMLInputElement;
  readonly saveButton: HTMLButtonElement;

  constructor() {
    this.regionTools = element("div", "livessb-toolbar");
    this.saveRow = element("div", "livessb-toolbar livessb-save");
    this.deleteButton = button("Delete", "delete region");
    this.deleteButton.disabled = true;
    this.pathInput = element("input", "", "calibration path");
    this.pathInput.type = "text";
    this.pathInput.value = "calibration.json";
    this.saveButton = button("Save", "save calibration");
    this.liveRegions = element("input", "", "live regions");
    this.liveRegions.type = "checkbox";
    this.liveRegions.title = "refit regions continuously while dragging them";
    const live = element("label", "livessb-lock");
    live.title = this.liveRegions.title;
    live.append(this.liveRegions, "live");
    this.crystalMode = element("input", "", "crystal mode");
    this.crystalMode.type = "checkbox";
    this.crystalMode.title =
      "fit regions with the lattice model of a crystal (object_model=\"lattice\"): right on small regions of a crystal, slower";
    const crystal = element("label", "livessb-lock");
    crystal.title = this.crystalMode.title;
    crystal.append(this.crystalMode, "crystal");
    const boxes = element("div", "livessb-boxes"); // one above the other: the column is narrow
    boxes.append(live, crystal);
    this.regionTools.append(this.deleteButton, boxes);
    this.saveRow.append(this.pathInput, this.saveButton);
  }
}

// Widget status, message line and the full-field readout (rotation + params).
import { button, element } from "./dom";
import { fmt, type FullFit, type Status } from "./model";

export class StatusBar {
  readonly el: HTMLElement;
  private statusEl: HTMLElement;
  private messageEl: HTMLElement;
  private readoutEl: HTMLElement;

  constructor() {
    this.el = element("div", "livessb-status");
    this.statusEl = element("span", "livessb-status-badge", "widget status");
    this.messageEl = element("div", "livessb-message", "message");
    this.messageEl.setAttribute("role", "status");
    this.readoutEl = element("div", "livessb-readout", "full-field fit");
    this.el.append(this.statusEl, this.readoutEl, this.messageEl);
  }

  setStatus(status: Status): void {
    this.statusEl.textContent = status;
    this.statusEl.dataset.status = status;
  }

  setMessage(message: string, status: Status): void {
    this.messageEl.textContent = message;
    this.messageEl.classList.toggle("error", status === "error");
  }

  setFullFit(fit: Partial<FullFit>): void {
    this.readoutEl.replaceChildren();
    if (fit.params === undefined) {
      this.readoutEl.textContent = "full field: not fitted";
      return;
    }
    const add = (key: string, text: string, value: number | boolean | undefined) => {
      const span = element("span");
      span.dataset.param = key;
      if (value !== undefined) span.dataset.value = String(value);
      span.textContent = text;
      this.readoutEl.append(span);
    };
    const p = fit.params;
    add("rotation_deg", `rotation ${fmt(fit.rotation_deg, 2)}°${fit.transpose ? " (T)" : ""}`, fit.rotation_deg);
    add("transpose", "", fit.transpose);
    add("C10", `C10 ${fmt(p.C10)} Å`, p.C10);
    add("C12", `C12 ${fmt(p.C12)} Å`, p.C12);
    add("phi12", `φ12 ${fmt(p.phi12, 3)}`, p.phi12);
    add("tilt_row_mrad", `tilt (${fmt(p.tilt_row_mrad, 2)}, `, p.tilt_row_mrad);
    add("tilt_col_mrad", `${fmt(p.tilt_col_mrad, 2)}) mrad`, p.tilt_col_mrad);
    add("depth", `depth ${fmt(p.depth)} Å`, p.depth);
    add("loss", `loss ${fmt(fit.loss, 4)}`, fit.loss);
  }
}

/** Toolbar: delete selected region, calibration path + save. */
export class Toolbar {
  readonly el: HTMLElement;
  readonly deleteButton: HTMLButtonElement;
  readonly pathInput: HTMLInputElement;
  readonly saveButton: HTMLButtonElement;

  constructor() {
    this.el = element("div", "livessb-toolbar");
    this.deleteButton = button("Delete", "delete region");
    this.deleteButton.disabled = true;
    this.pathInput = element("input", "", "calibration path");
    this.pathInput.type = "text";
    this.pathInput.value = "calibration.json";
    this.saveButton = button("Save", "save calibration");
    this.el.append(this.deleteButton, this.pathInput, this.saveButton);
  }
}

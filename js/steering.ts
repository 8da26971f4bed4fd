// Steering panel: a slider + number input per parameter of the table (the six
// fitted ones in front, higher orders in a collapsible panel), a rotation
// control, a lock per fitted parameter, "reset to fit" and "refine from here".
// Ranges, units, labels and digits come from the `param_table` trait only.
import { button, element } from "./dom";
import type { Params } from "./model";
import { higherRows, jointRows, sliderRange, type ParamRow } from "./paramtable";

export interface SteeringCallbacks {
  // a value moved (slider or number input); draft while a slider is being dragged (its
  // input events), not on its release (change) or a typed value
  onChange: (draft: boolean) => void;
  onReset: () => void;
  onRefine: () => void;
}

interface Control {
  row: ParamRow;
  slider: HTMLInputElement;
  value: HTMLInputElement;
  lock: HTMLInputElement | null;
  exact: number; // the value in full precision (the inputs show it rounded)
}

const ROTATION: ParamRow = {
  name: "rotation", unit: "°", label: "rotation", box: [-180, 180], digits: 2, period: 360, non_negative: false,
  opt_in: "rotation", fittable: false,
};

export class SteeringPanel {
  readonly el: HTMLElement;
  readonly resetButton: HTMLButtonElement;
  readonly refineButton: HTMLButtonElement;
  private main: HTMLElement;
  private higher: HTMLDetailsElement;
  private higherBody: HTMLElement;
  private controls = new Map<string, Control>();
  private rotation: Control;
  private signature = "";
  private rotationKnown = false;

  constructor(private readonly cb: SteeringCallbacks) {
    this.el = element("div", "livessb-steering", "steering");
    this.main = element("div", "livessb-sliders");
    this.higher = element("details", "livessb-higher");
    const summary = element("summary", "", "higher orders");
    summary.textContent = "higher orders";
    this.higherBody = element("div", "livessb-sliders");
    this.higher.append(summary, this.higherBody);
    this.rotation = this.makeControl(ROTATION, false);
    this.resetButton = button("reset to fit", "reset to fit");
    this.refineButton = button("refine from here", "refine from here");
    this.resetButton.addEventListener("click", () => this.cb.onReset());
    this.refineButton.addEventListener("click", () => this.cb.onRefine());
    const buttons = element("div", "livessb-buttons");
    buttons.append(this.resetButton, this.refineButton);
    this.el.append(this.main, this.higher, buttons);
  }

  /** Build the rows for a table (kept if the table's names did not change). */
  setTable(table: readonly ParamRow[]): void {
    const signature = JSON.stringify(table);
    if (signature === this.signature) return;
    this.signature = signature;
    const old = this.values();
    this.controls.clear();
    this.main.replaceChildren();
    this.higherBody.replaceChildren();
    for (const row of jointRows(table)) this.main.append(this.add(row, true));
    this.main.append(this.rotation.slider.parentElement!);
    for (const row of higherRows(table)) this.higherBody.append(this.add(row, false));
    this.higher.hidden = higherRows(table).length === 0;
    this.setValues(old, null);
  }

  /** Show values (widening a slider's range if needed) without firing onChange. */
  setValues(params: Params, rotationDeg: number | null): void {
    for (const [name, c] of this.controls) if (typeof params[name] === "number") this.show(c, params[name]);
    if (rotationDeg !== null && Number.isFinite(rotationDeg)) this.show(this.rotation, rotationDeg);
  }

  /** Current value of every parameter of the table. */
  values(): Params {
    const out: Params = {};
    for (const [name, c] of this.controls) out[name] = c.exact;
    return out;
  }

  rotationDeg(): number | null {
    return this.rotationKnown ? this.rotation.exact : null;
  }

  locked(): string[] {
    return [...this.controls.values()].filter((c) => c.lock?.checked).map((c) => c.row.name);
  }

  /** Is a slider being dragged or a value typed (incoming fit values should not jump it)? */
  editing(): boolean {
    const a = document.activeElement;
    return a instanceof HTMLInputElement && this.el.contains(a) && a.type !== "checkbox";
  }

  private add(row: ParamRow, lockable: boolean): HTMLElement {
    const c = this.makeControl(row, lockable);
    this.controls.set(row.name, c);
    return c.slider.parentElement!;
  }

  private makeControl(row: ParamRow, lockable: boolean): Control {
    const wrap = element("div", "livessb-param-row");
    wrap.dataset.param = row.name;
    const name = element("span", "livessb-param-label");
    name.textContent = row.unit ? `${row.label} (${row.unit})` : row.label;
    const range = sliderRange(row);
    const slider = element("input", "", `${row.name} slider`);
    slider.type = "range";
    const value = element("input", "", `${row.name} value`);
    value.type = "number";
    for (const el of [slider, value]) {
      el.min = String(range.min);
      el.max = String(range.max);
      el.step = String(range.step);
    }
    const start = Math.min(Math.max(0, range.min), range.max);
    slider.value = String(start);
    value.value = String(start);
    const fromSlider = (ev: Event) => {
      const v = Number(slider.value);
      const released = ev.type === "change";
      // the release repeats the last input value: its full frame is still wanted
      if (v === c.exact && !released) return;
      value.value = slider.value;
      c.exact = v;
      if (row === ROTATION) this.rotationKnown = true;
      this.cb.onChange(!released);
    };
    slider.addEventListener("input", fromSlider);
    slider.addEventListener("change", fromSlider);
    const fromValue = () => {
      const v = Number(value.value);
      if (value.value === "" || !Number.isFinite(v) || v === c.exact) return;
      this.widen(c, v);
      slider.value = String(v);
      c.exact = v;
      if (row === ROTATION) this.rotationKnown = true;
      this.cb.onChange(false);
    };
    value.addEventListener("input", fromValue);
    value.addEventListener("change", fromValue);
    wrap.append(name, slider, value);
    let lock: HTMLInputElement | null = null;
    if (lockable) {
      lock = element("input", "", `${row.name} lock`);
      lock.type = "checkbox";
      lock.title = `hold ${row.label} fixed when refining`;
      const lab = element("span", "livessb-lock");
      lab.textContent = "lock";
      wrap.append(lock, lab);
    }
    const c: Control = { row, slider, value, lock, exact: start };
    return c;
  }

  private widen(c: Control, v: number): void {
    const range = sliderRange(c.row, v);
    c.slider.min = String(Math.min(range.min, Number(c.slider.min)));
    c.slider.max = String(Math.max(range.max, Number(c.slider.max)));
  }

  private show(c: Control, v: number): void {
    this.widen(c, v);
    c.exact = v;
    if (c === this.rotation) this.rotationKnown = true;
    c.slider.value = String(v);
    c.value.value = String(Number(v.toFixed(c.row.digits + 2)));
  }
}

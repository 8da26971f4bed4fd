// Steering panel: a slider + number input per parameter of the table (the six
// fitted ones in front, higher orders in a collapsible panel), a rotation
// control, a lock per fitted parameter, "reset to fit" and "refine from here".
// Units, labels, digits and spans come from the `param_table` trait only; the
// ranges, fine steps and drag gearing are steerrange.ts's.
import { button, element, onCommit } from "./dom";
import type { Params } from "./model";
import { higherRows, jointRows, type ParamRow } from "./paramtable";
import { clamp, fineStep, Gearing, homeRange, keyStep, snap, widened, type SliderRange } from "./steerrange";

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
  home: SliderRange; // the fit's range ("reset to fit" restores it)
  range: SliderRange; // now: home, widened by values outside it
}

const ROTATION: ParamRow = {
  name: "rotation", unit: "°", label: "rotation", box: [-180, 180], digits: 2, period: 360, non_negative: false,
  opt_in: "rotation", fittable: false, span: null,
};
const KEYS_TITLE = "←/→: one step, Shift: a tenth (keys and drag), PageUp/PageDown: ten steps";

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

  /** Centre every slider on the fit (`errors`: its 1-σ errors widen the span) and
   *  restore those ranges, dropping any widening; values are not changed. */
  setFit(params: Params, errors: Params, rotationDeg: number | null): void {
    for (const [name, c] of this.controls) this.setHome(c, homeRange(c.row, params[name], errors[name]));
    if (rotationDeg !== null) this.setHome(this.rotation, homeRange(ROTATION, rotationDeg));
  }

  /** The fit on the controls: its ranges (setFit) and its values. */
  showFit(params: Params, errors: Params, rotationDeg: number | null): void {
    this.setFit(params, errors, rotationDeg);
    this.setValues(params, rotationDeg);
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
    const range = homeRange(row);
    const slider = element("input", "", `${row.name} slider`);
    slider.type = "range";
    slider.title = KEYS_TITLE;
    const value = element("input", "", `${row.name} value`);
    value.type = "number";
    value.title = "type a value, Enter applies (outside the slider's range widens it until reset to fit)";
    // the slider holds fine steps (Shift); the number box steps by one shown digit
    slider.step = String(fineStep(row));
    value.step = String(range.step);
    const start = clamp(0, range);
    const c: Control = { row, slider, value, lock: null, exact: start, home: range, range };
    this.applyRange(c);
    slider.value = String(start);
    value.value = String(start);
    const known = () => {
      if (row === ROTATION) this.rotationKnown = true;
    };
    // A drag: the browser's pointer value through the Shift gearing (steerrange.Gearing).
    const gear = new Gearing();
    let dragging = false;
    let shift = false;
    slider.addEventListener("pointerdown", (ev) => {
      dragging = true;
      shift = ev.shiftKey;
      gear.start(c.exact);
    });
    slider.addEventListener("pointermove", (ev) => (shift = ev.shiftKey));
    const fromSlider = (ev: Event) => {
      const released = ev.type === "change";
      let v = Number(slider.value);
      if (dragging) {
        v = snap(row, clamp(gear.map(v, shift), c.range));
        slider.value = String(v);
      }
      if (released) dragging = false;
      // the release repeats the last input value: its full frame is still wanted
      if (v === c.exact && !released) return;
      this.set(c, v, false);
      known();
      this.cb.onChange(!released);
    };
    slider.addEventListener("input", fromSlider);
    slider.addEventListener("change", fromSlider);
    slider.addEventListener("keydown", (ev) => {
      const v = keyStep(row, c.range, c.exact, ev.key, ev.shiftKey);
      if (v === null || ev.ctrlKey || ev.metaKey || ev.altKey) return;
      ev.preventDefault(); // the slider's own step would be the fine one
      ev.stopPropagation(); // not the widget's ←/→ (trials)
      if (v === c.exact) return;
      this.set(c, v, false);
      known();
      this.cb.onChange(false);
    });
    // The number box applies on Enter or when it loses focus, not per keystroke.
    onCommit(value, () => {
      const v = Number(value.value);
      if (value.value === "" || !Number.isFinite(v) || v === c.exact) return;
      this.set(c, v, true);
      known();
      this.cb.onChange(false);
    });
    wrap.append(name, slider, value);
    if (lockable) {
      c.lock = element("input", "", `${row.name} lock`);
      c.lock.type = "checkbox";
      c.lock.title = `hold ${row.label} fixed when refining`;
      const lab = element("span", "livessb-lock");
      lab.textContent = "lock";
      wrap.append(c.lock, lab);
    }
    return c;
  }

  private setHome(c: Control, home: SliderRange): void {
    c.home = home;
    c.range = home;
    this.applyRange(c);
    c.slider.value = String(c.exact); // re-placed on the new scale
  }

  private applyRange(c: Control): void {
    c.slider.min = String(c.range.min);
    c.slider.max = String(c.range.max);
    c.slider.dataset.homeMin = String(c.home.min);
    c.slider.dataset.homeMax = String(c.home.max);
  }

  /** `v` on the control: the range widened to hold it (kept until reset), the slider and,
   *  unless it was typed there, the number box. */
  private set(c: Control, v: number, typed: boolean): void {
    const wider = widened(c.range, v, c.row);
    if (wider !== c.range) {
      c.range = wider;
      this.applyRange(c);
    }
    c.exact = v;
    c.slider.value = String(v);
    if (!typed) c.value.value = String(Number(v.toFixed(c.row.digits + 2)));
  }

  private show(c: Control, v: number): void {
    this.set(c, v, false);
    if (c === this.rotation) this.rotationKnown = true;
  }
}

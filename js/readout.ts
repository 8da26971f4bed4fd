// Fitted values as the readouts show them: value ± 1-σ error in the parameter
// table's digits and unit, "not determined" for a parameter the data do not
// determine, and a warning for a value on its box edge (docs/widget-protocol.md:
// errors, undetermined, on_box_edge and model of full_fit and region_results).
import { numbersOf, type Params } from "./model";
import type { ParamRow } from "./paramtable";

export const NOT_DETERMINED = "not determined";
export const EDGE_WARNING = "⚠ box edge";

/** What a fit record says about its own trustworthiness. */
export interface Trust {
  errors: Params;
  undetermined: string[];
  onBoxEdge: string[];
  model: string | null; // "thin" | "thick" (null: no choice recorded)
  crystal: string; // what crystal mode did ("" for a per-bin fit): the lattice, or why not
}

export type ReadoutState = "value" | "undetermined" | "edge" | "missing";

export interface Readout {
  text: string;
  state: ReadoutState;
}

const names = (x: unknown): string[] => (Array.isArray(x) ? x.filter((n): n is string => typeof n === "string") : []);

/** The trust fields of a `full_fit` or `region_results[id]` record (absent: none). */
export function parseTrust(x: unknown): Trust {
  const o = (typeof x === "object" && x !== null ? x : {}) as Record<string, unknown>;
  return {
    errors: numbersOf(o.errors),
    undetermined: names(o.undetermined),
    onBoxEdge: names(o.on_box_edge),
    model: typeof o.model === "string" ? o.model : null,
    crystal: typeof o.crystal === "string" ? o.crystal : "",
  };
}

/** One parameter's readout text (without its label). */
export function readout(row: ParamRow, value: number | null | undefined, trust: Trust): Readout {
  if (trust.undetermined.includes(row.name)) return { text: NOT_DETERMINED, state: "undetermined" };
  if (value === null || value === undefined || !Number.isFinite(value)) return { text: `– ${row.unit}`.trim(), state: "missing" };
  const err = trust.errors[row.name];
  const pm = err !== undefined && err > 0 ? ` ± ${err.toFixed(row.digits)}` : "";
  const text = `${value.toFixed(row.digits)}${pm} ${row.unit}`.trim();
  return trust.onBoxEdge.includes(row.name) ? { text: `${text} ${EDGE_WARNING}`, state: "edge" } : { text, state: "value" };
}

/** "thin model" / "thick model" ("" when the record has no choice). */
export function modelText(trust: Trust): string {
  return trust.model ? `${trust.model} model` : "";
}

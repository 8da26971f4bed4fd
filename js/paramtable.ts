// The `param_table` trait (python/livessb/params.py, table_for_frontend): the
// one source of parameter names, units, labels, boxes and digits in the front
// end. Sliders, readouts and crop panels all read it; nothing here copies it.
import { parseList, type Params } from "./model";

export interface ParamRow {
  name: string;
  unit: string;
  label: string;
  box: [number, number];
  digits: number;
  period: number | null;
  non_negative: boolean;
  opt_in: string | null; // null (and fittable): one of the jointly fitted parameters
  fittable: boolean; // false: reconstruction only (higher orders steered by hand)
  span: number | null; // slider half-span around the fitted value (slice_span; null: the box)
}

const isNum = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);

/** Keep well-formed rows. */
export function parseParamTable(x: unknown): ParamRow[] {
  return parseList(x, (o) => {
    const box = o.box;
    if (typeof o.name !== "string" || !Array.isArray(box) || !isNum(box[0]) || !isNum(box[1])) return null;
    return {
      name: o.name,
      unit: typeof o.unit === "string" ? o.unit : "",
      label: typeof o.label === "string" ? o.label : o.name,
      box: [box[0], box[1]],
      digits: Number.isInteger(o.digits) && (o.digits as number) >= 0 ? (o.digits as number) : 2,
      period: isNum(o.period) ? o.period : null,
      non_negative: o.non_negative === true,
      opt_in: typeof o.opt_in === "string" ? o.opt_in : null,
      fittable: o.fittable !== false,
      span: isNum(o.slice_span) && o.slice_span > 0 ? o.slice_span : null,
    };
  });
}

const isJoint = (r: ParamRow): boolean => r.fittable && r.opt_in === null;

/** The jointly fitted parameters (the six of SPEC §3), in table order. */
export function jointRows(table: readonly ParamRow[]): ParamRow[] {
  return table.filter(isJoint);
}

/** Higher orders: opt-in coefficients and the reconstruction-only ones. */
export function higherRows(table: readonly ParamRow[]): ParamRow[] {
  return table.filter((r) => !isJoint(r));
}

/** A value as the table shows it: its digits and unit. */
export function formatParam(row: ParamRow, value: number | null | undefined): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return `– ${row.unit}`.trim();
  return `${value.toFixed(row.digits)} ${row.unit}`.trim();
}

/** Starting values: every row present (the fit's where known, else 0 clamped into the box). */
export function completeParams(table: readonly ParamRow[], known: Params | undefined): Params {
  const out: Params = {};
  for (const row of table) {
    const v = known?.[row.name];
    out[row.name] = typeof v === "number" && Number.isFinite(v) ? v : Math.min(Math.max(0, row.box[0]), row.box[1]);
  }
  return out;
}

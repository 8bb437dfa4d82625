// A param's declared constraints in words, shown under its input. The server checks them on every
// call (its answer names the one that failed); the form also refuses a number outside min/max.

import type { Param } from "../../api";

const isNumeric = (param: Param) => param.type === "int" || param.type === "float";
const UNITS: Record<string, [string, string]> = {
  str: ["character", "characters"],
  list: ["item", "items"],
  dict: ["entry", "entries"],
};

function count(n: number, type: string): string {
  const [one, many] = UNITS[type] ?? ["", ""];
  return one ? `${n} ${n === 1 ? one : many}` : String(n);
}

/** "Between 1 and 10.", "At least 3 characters.", ...; "" when no bound is declared. */
export function boundsText(param: Param): string {
  const { min, max } = param;
  if (min === undefined && max === undefined) return "";
  if (isNumeric(param)) {
    if (min !== undefined && max !== undefined) return `Between ${min} and ${max}.`;
    return min !== undefined ? `At least ${min}.` : `At most ${max}.`;
  }
  if (min !== undefined && max !== undefined) return `${min} to ${count(max, param.type)}.`;
  return min !== undefined ? `At least ${count(min, param.type)}.` : `At most ${count(max!, param.type)}.`;
}

/** The form's own check of a number against min/max ("" when it holds). */
export function numberOutOfBounds(param: Param, value: number): string {
  if (param.min !== undefined && value < param.min) return `Must be at least ${param.min}.`;
  if (param.max !== undefined && value > param.max) return `Must be at most ${param.max}.`;
  return "";
}

export const hasEnum = (param: Param): boolean => Array.isArray(param.enum) && param.enum.length > 0;

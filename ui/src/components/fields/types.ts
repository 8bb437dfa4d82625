// What every field kind provides to the call form: its state, how the state reads back as the
// argument to send, and the input that edits it. One kind per param type (fields/index.ts).

import type { ComponentType } from "preact";
import type { Param } from "../../api";

/** A field's argument: a value to send, an error to show, or nothing to send (null). */
export type Read = { value: unknown } | { error: string } | null;

export interface FieldProps<S> {
  id: string;
  param: Param;
  state: S;
  /** The form's "Edit list/dict params as JSON" switch. */
  json: boolean;
  invalid: boolean;
  describedBy: string | undefined;
  placeholder: string;
  onChange: (state: S) => void;
}

/** List and dict fields switch between a widget and JSON text; both ways may fail. */
export interface JsonSwitch<S> {
  toJson(param: Param, state: S): { state: S; error?: string };
  fromJson(param: Param, state: S): { state: S; error?: string };
  /** The state with anything half-typed committed, so what is sent is what is shown. */
  settle(state: S): S;
}

export interface FieldKind<S> {
  init(param: Param): S;
  /** The state showing `value` (a link's argument); init with that value as default if absent. */
  fromValue?(param: Param, value: unknown): S;
  read(param: Param, state: S, json: boolean): Read;
  Input: ComponentType<FieldProps<S>>;
  /** The label row above the input points at it (for=id); false for a group of inputs. */
  labelFor(json: boolean): boolean;
  /** The input shows its own label (a checkbox), so the form draws no label row. */
  ownLabel?: boolean;
  /** A usage hint after the description (widget mode only). */
  hint?: string;
  json?: JsonSwitch<S>;
}

/** aria-required / aria-invalid / aria-describedby for an input. */
export function ariaProps(param: Param, invalid: boolean, describedBy: string | undefined) {
  return {
    "aria-required": param.required ? ("true" as const) : undefined,
    "aria-invalid": invalid ? ("true" as const) : undefined,
    "aria-describedby": describedBy,
  };
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function isEmptyValue(value: unknown): boolean {
  return (
    value === null ||
    value === undefined ||
    (Array.isArray(value) && value.length === 0) ||
    (isPlainObject(value) && Object.keys(value).length === 0)
  );
}

/** The JSON text of a list/dict field: "" means not sent; bad JSON is an error. */
export function readJsonText(text: string): Read {
  const trimmed = text.trim();
  if (trimmed === "") return null;
  try {
    return { value: JSON.parse(trimmed) };
  } catch (error) {
    return { error: `Not valid JSON (${error instanceof Error ? error.message : "parse error"}).` };
  }
}

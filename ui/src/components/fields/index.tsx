// One field kind per param type, and the field that renders a param with its kind.

import type { Param } from "../../api";
import { boolKind } from "./BoolField";
import { boundsText, hasEnum } from "./constraints";
import { dictKind } from "./DictField";
import { enumKind } from "./EnumField";
import { errorId, FieldShell, helpId, rulesId } from "./FieldShell";
import { listKind } from "./ListField";
import { numberKind } from "./NumberField";
import { textKind } from "./TextField";
import type { FieldKind, Read } from "./types";

export type { Read } from "./types";

// The form keeps each field's state opaque; only its kind reads or writes it.
type AnyKind = FieldKind<unknown>;

const KINDS: Record<string, AnyKind> = {
  str: textKind as AnyKind,
  int: numberKind as AnyKind,
  float: numberKind as AnyKind,
  bool: boolKind as AnyKind,
  list: listKind as AnyKind,
  dict: dictKind as AnyKind,
};

const SCALAR = new Set(["str", "int", "float"]);

export function kindOf(param: Param): AnyKind {
  if (hasEnum(param) && SCALAR.has(param.type)) return enumKind as AnyKind;
  return KINDS[param.type] ?? (textKind as AnyKind);
}

export interface FieldState {
  state: unknown;
  error: string;
}

function initialState(param: Param, values: Record<string, unknown> | null): unknown {
  const kind = kindOf(param);
  if (values === null || !Object.hasOwn(values, param.name)) return kind.init(param);
  const value = values[param.name];
  return kind.fromValue ? kind.fromValue(param, value) : kind.init({ ...param, default: value });
}

/** Every field at its default, or at the value given for it (a link's arguments). */
export const initialFields = (params: Param[], values: Record<string, unknown> | null = null) =>
  Object.fromEntries(params.map((p) => [p.name, { state: initialState(p, values), error: "" }])) as Record<
    string,
    FieldState
  >;

export const readField = (param: Param, field: FieldState, json: boolean): Read =>
  kindOf(param).read(param, field.state, json);

export function fieldId(toolKey: string, param: Param): string {
  return `p-${toolKey.replace(/[^A-Za-z0-9_-]/g, "_")}-${param.name}`;
}

function placeholderOf(param: Param): string {
  const example = param.example;
  if (example === null || example === undefined || param.secret) return "";
  return `e.g. ${typeof example === "string" ? example : JSON.stringify(example)}`;
}

interface Props {
  toolKey: string;
  param: Param;
  field: FieldState;
  json: boolean;
  onChange: (state: unknown) => void;
}

export function ParamField({ toolKey, param, field, json, onChange }: Props) {
  const kind = kindOf(param);
  const id = fieldId(toolKey, param);
  const hint = json ? "" : (kind.hint ?? "");
  const help = [param.description, hint].filter(Boolean).join(" ");
  const bounds = kind === enumKind ? "" : boundsText(param);
  const pattern = kind === enumKind ? undefined : param.pattern;
  const rules = bounds || pattern !== undefined;
  const describedBy =
    [help ? helpId(id) : "", rules ? rulesId(id) : "", field.error ? errorId(id) : ""].filter(Boolean).join(" ") ||
    undefined;
  const Input = kind.Input;
  return (
    <FieldShell
      id={id}
      param={param}
      labelRow={!kind.ownLabel}
      labelFor={kind.labelFor(json)}
      help={help}
      bounds={bounds}
      pattern={pattern}
      error={field.error}
    >
      <Input
        id={id}
        param={param}
        state={field.state}
        json={json}
        invalid={field.error !== ""}
        describedBy={describedBy}
        placeholder={placeholderOf(param)}
        onChange={onChange}
      />
    </FieldShell>
  );
}

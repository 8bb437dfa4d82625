// One field kind per param type, and the field that renders a param with its kind.

import type { Param } from "../../api";
import { boolKind } from "./BoolField";
import { dictKind } from "./DictField";
import { errorId, FieldShell, helpId } from "./FieldShell";
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

export function kindOf(param: Param): AnyKind {
  return KINDS[param.type] ?? (textKind as AnyKind);
}

export interface FieldState {
  state: unknown;
  error: string;
}

export const initialFields = (params: Param[]): Record<string, FieldState> =>
  Object.fromEntries(params.map((p) => [p.name, { state: kindOf(p).init(p), error: "" }]));

export const readField = (param: Param, field: FieldState, json: boolean): Read =>
  kindOf(param).read(param, field.state, json);

export function fieldId(toolKey: string, param: Param): string {
  return `p-${toolKey.replace(/[^A-Za-z0-9_-]/g, "_")}-${param.name}`;
}

function placeholderOf(param: Param): string {
  const example = param.example;
  if (example === null || example === undefined) return "";
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
  const describedBy = [help ? helpId(id) : "", field.error ? errorId(id) : ""].filter(Boolean).join(" ") || undefined;
  const Input = kind.Input;
  return (
    <FieldShell
      id={id}
      param={param}
      labelRow={!kind.ownLabel}
      labelFor={kind.labelFor(json)}
      help={help}
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

// A param with `enum` (str, int or float): a <select> of the declared values. An optional param
// (or one without a default) also offers "not set", which sends nothing.

import { scalarText } from "../../format";
import { ariaProps, type FieldKind, type FieldProps } from "./types";

export interface EnumState {
  /** The index of the chosen value in param.enum, or "" for not set. */
  choice: string;
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

function EnumInput({ id, param, state, invalid, describedBy, onChange }: FieldProps<EnumState>) {
  const values = param.enum ?? [];
  const offerUnset = !param.required || param.default === null || param.default === undefined;
  return (
    <select
      id={id}
      class="input select"
      value={state.choice}
      {...ariaProps(param, invalid, describedBy)}
      onChange={(event) => onChange({ choice: (event.currentTarget as HTMLSelectElement).value })}
    >
      {offerUnset && <option value="">{param.required ? "Choose…" : "(not set)"}</option>}
      {values.map((value, index) => (
        <option key={index} value={String(index)}>
          {scalarText(value)}
        </option>
      ))}
    </select>
  );
}

export const enumKind: FieldKind<EnumState> = {
  init: (param) => {
    const index = (param.enum ?? []).findIndex((value) => same(value, param.default));
    return { choice: index >= 0 ? String(index) : "" };
  },
  read: (param, state) => {
    if (state.choice === "") return param.required ? { error: "Choose a value." } : null;
    return { value: (param.enum ?? [])[Number(state.choice)] };
  },
  Input: EnumInput,
  labelFor: () => true,
};

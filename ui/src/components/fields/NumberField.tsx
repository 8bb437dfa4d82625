// `int` and `float` params: a native number input.

import { scalarText } from "../../format";
import { numberOutOfBounds } from "./constraints";
import { ariaProps, type FieldKind, type FieldProps } from "./types";

export interface NumberState {
  text: string;
}

function NumberInput({ id, param, state, invalid, describedBy, placeholder, onChange }: FieldProps<NumberState>) {
  const integer = param.type === "int";
  return (
    <input
      id={id}
      class="input input-number"
      type="number"
      inputMode={integer ? "numeric" : "decimal"}
      step={integer ? "1" : "any"}
      min={param.min}
      max={param.max}
      value={state.text}
      placeholder={placeholder}
      {...ariaProps(param, invalid, describedBy)}
      onInput={(event) => onChange({ text: (event.currentTarget as HTMLInputElement).value })}
    />
  );
}

export const numberKind: FieldKind<NumberState> = {
  init: (param) => ({ text: scalarText(param.default) }),
  read: (param, state) => {
    const text = state.text.trim();
    if (text === "") return null;
    const number = Number(text);
    if (!Number.isFinite(number)) return { error: "Enter a number." };
    const outside = numberOutOfBounds(param, number);
    return outside ? { error: outside } : { value: number };
  },
  Input: NumberInput,
  labelFor: () => true,
};

// `int` and `float` params: a native number input.

import { scalarText } from "../../format";
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
      value={state.text}
      placeholder={placeholder}
      {...ariaProps(param, invalid, describedBy)}
      onInput={(event) => onChange({ text: (event.currentTarget as HTMLInputElement).value })}
    />
  );
}

export const numberKind: FieldKind<NumberState> = {
  init: (param) => ({ text: scalarText(param.default) }),
  read: (_param, state) => {
    const text = state.text.trim();
    if (text === "") return null;
    const number = Number(text);
    return Number.isFinite(number) ? { value: number } : { error: "Enter a number." };
  },
  Input: NumberInput,
  labelFor: () => true,
};

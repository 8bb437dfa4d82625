// `bool` params: a checkbox with its label beside it. An optional bool without a default is sent
// only once touched.

import { RequiredMark } from "./FieldShell";
import { ariaProps, type FieldKind, type FieldProps } from "./types";

export interface BoolState {
  checked: boolean;
  touched: boolean;
}

function BoolInput({ id, param, state, describedBy, onChange }: FieldProps<BoolState>) {
  const aria = ariaProps(param, false, describedBy);
  return (
    <div class="checkbox-row">
      <input
        id={id}
        type="checkbox"
        class="checkbox"
        checked={state.checked}
        aria-required={aria["aria-required"]}
        aria-describedby={aria["aria-describedby"]}
        onChange={(event) => onChange({ checked: (event.currentTarget as HTMLInputElement).checked, touched: true })}
      />
      <label class="field-label" for={id} id={`${id}-label`}>
        <span class="param-name">{param.name}</span>
      </label>
      {param.required && <RequiredMark />}
      <span class="type-badge">bool</span>
    </div>
  );
}

export const boolKind: FieldKind<BoolState> = {
  init: (param) => ({ checked: param.default === true, touched: false }),
  fromValue: (_param, value) => ({ checked: value === true, touched: true }),
  read: (param, state) =>
    param.required || state.touched || (param.default !== null && param.default !== undefined)
      ? { value: state.checked }
      : null,
  Input: BoolInput,
  labelFor: () => true,
  ownLabel: true,
};

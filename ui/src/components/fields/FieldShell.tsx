// The frame around one param's input: the label row (name, required mark, type), the description
// and usage hint, and the field's error.

import type { ComponentChildren } from "preact";
import type { Param } from "../../api";

/** The visual required mark; assistive tech gets aria-required on the input instead. */
export function RequiredMark() {
  return (
    <span class="required" title="required" aria-hidden="true">
      *
    </span>
  );
}

interface Props {
  id: string;
  param: Param;
  /** Draw the label row (false when the input labels itself, as a checkbox does). */
  labelRow: boolean;
  /** The label points at the input; otherwise it names a group (aria-labelledby). */
  labelFor: boolean;
  help: string;
  /** The declared bounds in words ("Between 1 and 10."), or "". */
  bounds: string;
  /** The declared pattern, shown as a hint (the whole value must match). */
  pattern: string | undefined;
  error: string;
  children: ComponentChildren;
}

export const helpId = (id: string) => `${id}-help`;
export const errorId = (id: string) => `${id}-error`;
export const rulesId = (id: string) => `${id}-rules`;

export function FieldShell({ id, param, labelRow, labelFor, help, bounds, pattern, error, children }: Props) {
  const LabelTag = labelFor ? "label" : "span";
  return (
    <div class={`field field-${param.type}`} data-param={param.name}>
      {labelRow && (
        <div class="field-label-row">
          <LabelTag class="field-label" id={`${id}-label`} {...(labelFor ? { for: id } : {})}>
            <span class="param-name">{param.name}</span>
            {!labelFor && param.required && <span class="sr-only"> (required)</span>}
          </LabelTag>
          {param.required && <RequiredMark />}
          <span class="type-badge">{param.type}</span>
          {param.secret && <span class="type-badge secret-badge">secret</span>}
        </div>
      )}
      {children}
      {help && (
        <p class="field-help" id={helpId(id)}>
          {help}
        </p>
      )}
      {(bounds || pattern !== undefined) && (
        <p class="field-rules" id={rulesId(id)} data-testid="rules">
          {bounds}
          {bounds && pattern !== undefined ? " " : ""}
          {pattern !== undefined && (
            <>
              Must match <code class="pattern">{pattern}</code>
            </>
          )}
        </p>
      )}
      {error && (
        <p class="field-error" id={errorId(id)}>
          {error}
        </p>
      )}
    </div>
  );
}

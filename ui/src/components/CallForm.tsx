// The call form: one field per declared param (native inputs for str/int/float/bool, tag chips
// for list, key/value rows for dict, one "Edit list/dict params as JSON" toggle), then
// POST /tools/{key} and the result.

import { useEffect, useRef, useState } from "preact/hooks";
import { callTool, type Param, type Tool } from "../api";
import { describeProblem } from "../errors";
import { displayResult, parseLoose, scalarText, showLoose } from "../format";
import { ChipInput } from "./ChipInput";
import { KeyValueEditor, newRow, type Row } from "./KeyValueEditor";
import { formatMillis, type Outcome, ResultPanel } from "./ResultPanel";
import { PlayIcon } from "./icons";

interface Field {
  text: string;
  checked: boolean;
  touched: boolean;
  chips: string[];
  draft: string;
  rows: Row[];
  json: string;
  error: string;
}

const isComplex = (p: Param) => p.type === "list" || p.type === "dict";

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function initialField(param: Param): Field {
  const d = param.default;
  const field: Field = {
    text: "",
    checked: false,
    touched: false,
    chips: [],
    draft: "",
    rows: [],
    json: "",
    error: "",
  };
  switch (param.type) {
    case "bool":
      field.checked = d === true;
      break;
    case "list":
      field.chips = Array.isArray(d) ? d.map(showLoose) : [];
      break;
    case "dict":
      field.rows = isPlainObject(d) ? Object.entries(d).map(([k, v]) => newRow(k, showLoose(v))) : [];
      if (field.rows.length === 0) field.rows = [newRow()];
      break;
    default:
      field.text = scalarText(d);
  }
  return field;
}

function isEmptyDefault(d: unknown): boolean {
  return d === null || d === undefined || (Array.isArray(d) && d.length === 0) || (isPlainObject(d) && Object.keys(d).length === 0);
}

/** The value of a list/dict field in widget mode; errors as strings. */
function complexValue(param: Param, field: Field): { value?: unknown; error?: string } {
  if (param.type === "list") {
    const items = [...field.chips, ...(field.draft.trim() ? [field.draft.trim()] : [])];
    return { value: items.map(parseLoose) };
  }
  const result: Record<string, unknown> = {};
  for (const row of field.rows) {
    if (row.key === "" && row.value.trim() === "") continue;
    if (row.key === "") return { error: `An entry with value ${JSON.stringify(row.value)} has no key.` };
    if (Object.hasOwn(result, row.key)) return { error: `The key ${JSON.stringify(row.key)} appears twice.` };
    result[row.key] = parseLoose(row.value);
  }
  return { value: result };
}

/** The visual required mark; assistive tech gets aria-required on the input instead. */
function RequiredMark() {
  return (
    <span class="required" title="required" aria-hidden="true">
      *
    </span>
  );
}

function fieldId(tool: Tool, param: Param): string {
  return `p-${tool.key.replace(/[^A-Za-z0-9_-]/g, "_")}-${param.name}`;
}

const EXAMPLE_HINT: Record<string, string> = {
  list: "Enter or comma adds an item.",
  dict: "",
};

export function CallForm({ tool }: { tool: Tool }) {
  const [fields, setFields] = useState<Record<string, Field>>(() =>
    Object.fromEntries(tool.params.map((p) => [p.name, initialField(p)])),
  );
  const [jsonMode, setJsonMode] = useState(false);
  const [toggleError, setToggleError] = useState("");
  const [running, setRunning] = useState(false);
  const [elapsed, setElapsed] = useState(0);
  const [outcome, setOutcome] = useState<Outcome | null>(null);
  const controller = useRef<AbortController | null>(null);
  const resultRef = useRef<HTMLDivElement>(null);
  const hasComplex = tool.params.some(isComplex);

  useEffect(() => () => controller.current?.abort(), []);

  useEffect(() => {
    if (!running) return undefined;
    const started = performance.now();
    setElapsed(0);
    const timer = window.setInterval(() => setElapsed(performance.now() - started), 100);
    return () => window.clearInterval(timer);
  }, [running]);

  const patch = (name: string, change: Partial<Field>) =>
    setFields((current) => ({ ...current, [name]: { ...current[name]!, ...change, error: change.error ?? "" } }));

  const toggleJson = (on: boolean) => {
    setToggleError("");
    if (on) {
      const next = { ...fields };
      for (const param of tool.params.filter(isComplex)) {
        const field = next[param.name]!;
        const { value, error } = complexValue(param, field);
        const empty = error === undefined && isEmptyDefault(value) && isEmptyDefault(param.default);
        next[param.name] = {
          ...field,
          chips: param.type === "list" && field.draft.trim() ? [...field.chips, field.draft.trim()] : field.chips,
          draft: "",
          json: error !== undefined ? "" : empty ? "" : JSON.stringify(value, null, 2),
          error: error ?? "",
        };
      }
      setFields(next);
      setJsonMode(true);
      return;
    }
    const next = { ...fields };
    let failed = "";
    for (const param of tool.params.filter(isComplex)) {
      const field = next[param.name]!;
      const text = field.json.trim();
      let value: unknown = param.type === "list" ? [] : {};
      if (text !== "") {
        try {
          value = JSON.parse(text);
        } catch {
          next[param.name] = { ...field, error: "Not valid JSON: fix it to switch back to the editor." };
          failed ||= param.name;
          continue;
        }
      }
      if (param.type === "list") {
        if (!Array.isArray(value)) {
          next[param.name] = { ...field, error: "Must be a JSON array to edit as chips." };
          failed ||= param.name;
          continue;
        }
        next[param.name] = { ...field, chips: value.map(showLoose), draft: "", error: "" };
      } else {
        if (!isPlainObject(value)) {
          next[param.name] = { ...field, error: "Must be a JSON object to edit as rows." };
          failed ||= param.name;
          continue;
        }
        const rows = Object.entries(value).map(([k, v]) => newRow(k, showLoose(v)));
        next[param.name] = { ...field, rows: rows.length ? rows : [newRow()], error: "" };
      }
    }
    setFields(next);
    if (failed) {
      setToggleError(`Fix the JSON of ${failed} first.`);
      const param = tool.params.find((p) => p.name === failed)!;
      document.getElementById(fieldId(tool, param))?.focus();
      return;
    }
    setJsonMode(false);
  };

  const collect = (): { args: Record<string, unknown>; errors: Record<string, string> } => {
    const args: Record<string, unknown> = {};
    const errors: Record<string, string> = {};
    for (const param of tool.params) {
      const field = fields[param.name]!;
      switch (param.type) {
        case "str":
          if (field.text !== "") args[param.name] = field.text;
          break;
        case "int":
        case "float": {
          const text = field.text.trim();
          if (text === "") break;
          const number = Number(text);
          if (!Number.isFinite(number)) errors[param.name] = "Enter a number.";
          else args[param.name] = number;
          break;
        }
        case "bool":
          if (param.required || field.touched || param.default !== null) args[param.name] = field.checked;
          break;
        case "list":
        case "dict": {
          if (jsonMode) {
            const text = field.json.trim();
            if (text === "") break;
            try {
              args[param.name] = JSON.parse(text);
            } catch (error) {
              errors[param.name] = `Not valid JSON (${error instanceof Error ? error.message : "parse error"}).`;
            }
            break;
          }
          const { value, error } = complexValue(param, field);
          if (error !== undefined) errors[param.name] = error;
          else if (!(isEmptyDefault(value) && isEmptyDefault(param.default))) args[param.name] = value;
          break;
        }
        default:
          // A type this UI does not know: the text is sent as typed, JSON when it parses.
          if (field.text.trim() !== "") args[param.name] = parseLoose(field.text);
      }
    }
    return { args, errors };
  };

  const submit = async (event?: Event) => {
    event?.preventDefault();
    if (running) return;
    // Commit half-typed chips so what is sent is what is shown.
    if (!jsonMode) {
      setFields((current) => {
        const next = { ...current };
        for (const param of tool.params.filter((p) => p.type === "list")) {
          const f = next[param.name]!;
          if (f.draft.trim()) next[param.name] = { ...f, chips: [...f.chips, f.draft.trim()], draft: "" };
        }
        return next;
      });
    }
    const { args, errors } = collect();
    if (Object.keys(errors).length > 0) {
      setFields((current) => {
        const next = { ...current };
        for (const [name, error] of Object.entries(errors)) next[name] = { ...next[name]!, error };
        return next;
      });
      const first = tool.params.find((p) => errors[p.name]);
      if (first) document.getElementById(fieldId(tool, first))?.focus();
      return;
    }
    controller.current?.abort();
    const abort = new AbortController();
    controller.current = abort;
    setRunning(true);
    setOutcome(null);
    try {
      const result = await callTool(tool.key, args, abort.signal);
      const shown = displayResult(result.text);
      setOutcome({ kind: "ok", status: result.status, text: shown.text, json: shown.json, millis: result.millis });
    } catch (error) {
      if (error instanceof DOMException && error.name === "AbortError") {
        setOutcome({
          kind: "error",
          status: 0,
          title: "Cancelled",
          detail: "The page stopped waiting. The tool may still be running on the server.",
          body: "",
          retryAfter: null,
        });
      } else {
        setOutcome({ kind: "error", ...describeProblem(error, "call") });
      }
    } finally {
      if (controller.current === abort) controller.current = null;
      setRunning(false);
      window.requestAnimationFrame(() => resultRef.current?.scrollIntoView({ block: "nearest", behavior: "smooth" }));
    }
  };

  const reset = () => {
    setFields(Object.fromEntries(tool.params.map((p) => [p.name, initialField(p)])));
    setJsonMode(false);
    setToggleError("");
    setOutcome(null);
  };

  return (
    <form
      class="call-form"
      noValidate
      onSubmit={submit}
      onKeyDown={(event) => {
        if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) void submit(event);
      }}
      aria-labelledby="call-heading"
    >
      <div class="section-head">
        <h3 id="call-heading">Call</h3>
        {hasComplex && (
          <label class="switch">
            <input
              type="checkbox"
              role="switch"
              checked={jsonMode}
              onChange={(event) => toggleJson((event.currentTarget as HTMLInputElement).checked)}
            />
            <span class="switch-track" aria-hidden="true">
              <span class="switch-thumb" />
            </span>
            <span>Edit list/dict params as JSON</span>
          </label>
        )}
      </div>
      {toggleError && (
        <p class="field-error" role="alert">
          {toggleError}
        </p>
      )}
      {tool.params.length === 0 && <p class="muted">This tool takes no parameters.</p>}
      {tool.params.map((param) => {
        const id = fieldId(tool, param);
        const field = fields[param.name]!;
        const helpId = `${id}-help`;
        const errorId = `${id}-error`;
        const describedBy = [param.description || EXAMPLE_HINT[param.type] ? helpId : "", field.error ? errorId : ""]
          .filter(Boolean)
          .join(" ") || undefined;
        const invalid = field.error !== "";
        const example = param.example !== null && param.example !== undefined ? param.example : null;
        const placeholder = example === null ? "" : `e.g. ${typeof example === "string" ? example : JSON.stringify(example)}`;
        const labelFor = param.type === "dict" && !jsonMode ? undefined : id;
        const LabelTag = labelFor ? "label" : "span";
        return (
          <div class={`field field-${param.type}`} key={param.name} data-param={param.name}>
            {param.type !== "bool" && (
              <div class="field-label-row">
                <LabelTag class="field-label" id={`${id}-label`} {...(labelFor ? { for: labelFor } : {})}>
                  <span class="param-name">{param.name}</span>
                  {!labelFor && param.required && <span class="sr-only"> (required)</span>}
                </LabelTag>
                {param.required && <RequiredMark />}
                <span class="type-badge">{param.type}</span>
              </div>
            )}
            {(param.type === "str" || !["int", "float", "bool", "list", "dict"].includes(param.type)) && (
              <input
                id={id}
                class="input"
                type="text"
                value={field.text}
                placeholder={placeholder}
                autocomplete="off"
                spellcheck={false}
                aria-required={param.required ? "true" : undefined}
                aria-invalid={invalid ? "true" : undefined}
                aria-describedby={describedBy}
                onInput={(event) => patch(param.name, { text: (event.currentTarget as HTMLInputElement).value })}
              />
            )}
            {(param.type === "int" || param.type === "float") && (
              <input
                id={id}
                class="input input-number"
                type="number"
                inputMode={param.type === "int" ? "numeric" : "decimal"}
                step={param.type === "int" ? "1" : "any"}
                value={field.text}
                placeholder={placeholder}
                aria-required={param.required ? "true" : undefined}
                aria-invalid={invalid ? "true" : undefined}
                aria-describedby={describedBy}
                onInput={(event) => patch(param.name, { text: (event.currentTarget as HTMLInputElement).value })}
              />
            )}
            {param.type === "bool" && (
              <div class="checkbox-row">
                <input
                  id={id}
                  type="checkbox"
                  class="checkbox"
                  checked={field.checked}
                  aria-required={param.required ? "true" : undefined}
                  aria-describedby={describedBy}
                  onChange={(event) =>
                    patch(param.name, { checked: (event.currentTarget as HTMLInputElement).checked, touched: true })
                  }
                />
                <label class="field-label" for={id} id={`${id}-label`}>
                  <span class="param-name">{param.name}</span>
                </label>
                {param.required && <RequiredMark />}
                <span class="type-badge">bool</span>
              </div>
            )}
            {isComplex(param) && jsonMode && (
              <textarea
                id={id}
                class="input textarea mono"
                rows={Math.min(10, Math.max(3, field.json.split("\n").length))}
                value={field.json}
                spellcheck={false}
                placeholder={param.type === "list" ? '["item", 2]' : '{"key": "value"}'}
                aria-required={param.required ? "true" : undefined}
                aria-invalid={invalid ? "true" : undefined}
                aria-describedby={describedBy}
                onInput={(event) => patch(param.name, { json: (event.currentTarget as HTMLTextAreaElement).value })}
              />
            )}
            {param.type === "list" && !jsonMode && (
              <ChipInput
                id={id}
                chips={field.chips}
                draft={field.draft}
                required={param.required}
                describedBy={describedBy}
                invalid={invalid}
                placeholder={placeholder || "Type an item, press Enter"}
                onChange={(chips, draft) => patch(param.name, { chips, draft })}
              />
            )}
            {param.type === "dict" && !jsonMode && (
              <KeyValueEditor
                id={id}
                name={param.name}
                rows={field.rows}
                describedBy={describedBy}
                invalid={invalid}
                onChange={(rows) => patch(param.name, { rows })}
              />
            )}
            {(param.description || EXAMPLE_HINT[param.type]) && (
              <p class="field-help" id={helpId}>
                {param.description}
                {param.description && EXAMPLE_HINT[param.type] && !jsonMode ? " " : ""}
                {!jsonMode && EXAMPLE_HINT[param.type]}
              </p>
            )}
            {field.error && (
              <p class="field-error" id={errorId}>
                {field.error}
              </p>
            )}
          </div>
        );
      })}
      {hasComplex && !jsonMode && (
        <p class="form-note">
          List items and dict values are read as JSON when they parse (<code>4</code>, <code>true</code>,{" "}
          <code>"4"</code>) and as text otherwise.
        </p>
      )}
      <div class="form-actions">
        <button type="submit" class="btn btn-primary" disabled={running} aria-describedby="run-hint">
          {running ? <span class="spinner" aria-hidden="true" /> : <PlayIcon size={14} />}
          {running ? "Running…" : "Run"}
        </button>
        {running ? (
          <button type="button" class="btn btn-ghost" onClick={() => controller.current?.abort()}>
            Cancel
          </button>
        ) : (
          <button type="button" class="btn btn-ghost" onClick={reset}>
            Reset
          </button>
        )}
        <span class="run-hint muted" id="run-hint">
          {running ? (
            <span role="status" data-testid="running">
              Waiting for the tool… {formatMillis(elapsed)}
            </span>
          ) : (
            <span class="run-shortcut">
              <kbd>Ctrl</kbd>+<kbd>Enter</kbd> runs
            </span>
          )}
        </span>
      </div>
      <div ref={resultRef} aria-live="polite" aria-busy={running ? "true" : "false"}>
        {outcome && <ResultPanel outcome={outcome} />}
      </div>
    </form>
  );
}

// The call form: one field per declared param (a small component per param type, in fields/),
// one "Edit list/dict params as JSON" switch, then POST /tools/{key} and the result.

import { useEffect, useRef, useState } from "preact/hooks";
import { callTool, JobEnded, type Param, type Tool } from "../api";
import { describeProblem } from "../errors";
import { shownResult } from "../format";
import { fieldId, type FieldState, initialFields, kindOf, ParamField, readField } from "./fields";
import { formatMillis, type Outcome, ResultPanel } from "./ResultPanel";
import { SharePanel } from "./SharePanel";
import { parseLocation } from "../router";
import { linkedArgs } from "../share";
import { PlayIcon } from "./icons";

const isComplex = (p: Param) => kindOf(p).json !== undefined;

/** The arguments the form holds now, and the fields that cannot be read. */
export function collectArgs(
  params: Param[],
  fields: Record<string, FieldState>,
  json: boolean,
): { args: Record<string, unknown>; errors: Record<string, string> } {
  const args: Record<string, unknown> = {};
  const errors: Record<string, string> = {};
  for (const param of params) {
    const read = readField(param, fields[param.name]!, json);
    if (read === null) continue;
    if ("error" in read) errors[param.name] = read.error;
    else args[param.name] = read.value;
  }
  return { args, errors };
}

export function CallForm({ tool }: { tool: Tool }) {
  // A link may carry arguments (?args=<json>): they fill the form when it opens on that tool.
  const [fields, setFields] = useState<Record<string, FieldState>>(() =>
    initialFields(tool.params, parseLocation().tool === tool.key ? linkedArgs(tool.params) : null),
  );
  const [jsonMode, setJsonMode] = useState(false);
  const [toggleError, setToggleError] = useState("");
  const [running, setRunning] = useState(false);
  const [elapsed, setElapsed] = useState(0);
  const [outcome, setOutcome] = useState<Outcome | null>(null);
  // A destructive tool asks before it runs: Run shows the question, "Run it" sends the call.
  const [confirming, setConfirming] = useState(false);
  const keepRef = useRef<HTMLButtonElement>(null);
  const destructive = tool.annotations?.destructive === true;
  const controller = useRef<AbortController | null>(null);
  const resultRef = useRef<HTMLDivElement>(null);
  const complex = tool.params.filter(isComplex);

  useEffect(() => () => controller.current?.abort(), []);

  useEffect(() => {
    if (!running) return undefined;
    const started = performance.now();
    setElapsed(0);
    const timer = window.setInterval(() => setElapsed(performance.now() - started), 100);
    return () => window.clearInterval(timer);
  }, [running]);

  const change = (name: string, state: unknown) =>
    setFields((current) => ({ ...current, [name]: { state, error: "" } }));

  const focusField = (name: string) => {
    const param = tool.params.find((p) => p.name === name);
    if (param) document.getElementById(fieldId(tool.key, param))?.focus();
  };

  const toggleJson = (on: boolean) => {
    setToggleError("");
    const next = { ...fields };
    let failed = "";
    for (const param of complex) {
      const convert = kindOf(param).json!;
      const field = next[param.name]!;
      const done = on ? convert.toJson(param, field.state) : convert.fromJson(param, field.state);
      next[param.name] = { state: done.state, error: done.error ?? "" };
      if (done.error && !on) failed ||= param.name;
    }
    setFields(next);
    if (failed) {
      setToggleError(`Fix the JSON of ${failed} first.`);
      focusField(failed);
      return;
    }
    setJsonMode(on);
  };

  useEffect(() => {
    if (confirming) keepRef.current?.focus();
  }, [confirming]);

  /** The arguments to send, or null after marking the fields that cannot be read. */
  const readArgs = (): Record<string, unknown> | null => {
    const { args, errors } = collectArgs(tool.params, fields, jsonMode);
    if (Object.keys(errors).length === 0) return args;
    setFields((current) => {
      const next = { ...current };
      for (const [name, error] of Object.entries(errors)) next[name] = { ...next[name]!, error };
      return next;
    });
    const first = tool.params.find((p) => errors[p.name]);
    if (first) focusField(first.name);
    return null;
  };

  const submit = async (event?: Event, confirmed = false) => {
    event?.preventDefault();
    if (running) return;
    // Commit half-typed chips so what is sent is what is shown.
    if (!jsonMode) {
      setFields((current) => {
        const next = { ...current };
        for (const param of complex) {
          const field = next[param.name]!;
          next[param.name] = { ...field, state: kindOf(param).json!.settle(field.state) };
        }
        return next;
      });
    }
    const args = readArgs();
    if (args === null) return;
    if (destructive && !confirmed) {
      setConfirming(true);
      return;
    }
    setConfirming(false);
    controller.current?.abort();
    const abort = new AbortController();
    controller.current = abort;
    setRunning(true);
    setOutcome(null);
    try {
      const result = await callTool(tool.key, args, abort.signal, (view) => setOutcome({ kind: "job", view }));
      setOutcome({
        kind: "result",
        status: result.status,
        shown: shownResult(result.payload),
        millis: result.millis,
        ...(result.sandbox ? { sandbox: result.sandbox } : {}),
      });
    } catch (error) {
      if (error instanceof JobEnded) {
        setOutcome({ kind: "job", view: error.view }); // denied, expired, cancelled: said, with what it printed
      } else if (error instanceof DOMException && error.name === "AbortError") {
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

  const awaiting = outcome?.kind === "job" && outcome.view.status === "awaiting_approval";

  const reset = () => {
    setConfirming(false);
    setFields(initialFields(tool.params));
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
        {complex.length > 0 && (
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
      {tool.params.map((param) => (
        <ParamField
          key={param.name}
          toolKey={tool.key}
          param={param}
          field={fields[param.name]!}
          json={jsonMode}
          onChange={(state) => change(param.name, state)}
        />
      ))}
      {complex.length > 0 && !jsonMode && (
        <p class="form-note">
          List items and dict values are read as JSON when they parse (<code>4</code>, <code>true</code>,{" "}
          <code>"4"</code>) and as text otherwise.
        </p>
      )}
      {confirming && (
        <div class="notice notice-warn confirm" role="alert" data-testid="confirm">
          <p>
            <strong>{tool.key} is marked destructive.</strong> It may change or delete things. Run it with these
            arguments?
          </p>
          <div class="confirm-actions">
            <button type="button" class="btn btn-danger" onClick={() => void submit(undefined, true)}>
              Run it
            </button>
            <button type="button" class="btn btn-ghost" ref={keepRef} onClick={() => setConfirming(false)}>
              Don't run
            </button>
          </div>
        </div>
      )}
      <div class="form-actions">
        <button type="submit" class="btn btn-primary" disabled={running} aria-describedby="run-hint">
          {running ? <span class="spinner" aria-hidden="true" /> : <PlayIcon size={14} />}
          {running ? (awaiting ? "Waiting for approval…" : "Running…") : "Run"}
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
              {awaiting ? "Waiting for an approver…" : "Waiting for the tool…"} {formatMillis(elapsed)}
            </span>
          ) : (
            <span class="run-shortcut">
              <kbd>Ctrl</kbd>+<kbd>Enter</kbd> runs
            </span>
          )}
        </span>
      </div>
      <SharePanel tool={tool} readArgs={readArgs} />
      <div ref={resultRef} aria-live="polite" aria-busy={running ? "true" : "false"}>
        {outcome && <ResultPanel outcome={outcome} />}
      </div>
    </form>
  );
}

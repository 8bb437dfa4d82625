// The outcome of POST /tools/{key}: the result (pretty JSON or verbatim text) with a Copy
// button that copies exactly what is shown; a command that failed or timed out, marked as such,
// with its stdout and stderr in panes of their own; or the server's error shown plainly.
// Long lines wrap (a toggle, remembered in the browser).

import { useEffect, useState } from "preact/hooks";
import type { JobView } from "../api";
import { copyText } from "../clipboard";
import { failureWords, type Shown, visibleText } from "../format";
import { DataView } from "./DataView";
import { AlertIcon, CheckIcon, CopyIcon } from "./icons";

export type Outcome =
  | { kind: "job"; view: JobView }
  | { kind: "result"; status: number; shown: Shown; millis: number; sandbox?: { profile: string; withholds: string } }
  | { kind: "error"; status: number; title: string; detail: string; body: string; retryAfter: number | null };

const STATUS_TEXT: Record<number, string> = {
  200: "OK",
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  408: "Request Timeout",
  413: "Payload Too Large",
  415: "Unsupported Media Type",
  429: "Too Many Requests",
  500: "Internal Server Error",
  502: "Bad Gateway",
  503: "Service Unavailable",
  504: "Gateway Timeout",
};

export function statusLine(status: number): string {
  if (status === 0) return "No response";
  return `${status} ${STATUS_TEXT[status] ?? ""}`.trim();
}

export function formatMillis(ms: number): string {
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
}

const WRAP_STORAGE = "toolrun.wrap";

function savedWrap(): boolean {
  try {
    return window.localStorage.getItem(WRAP_STORAGE) !== "off";
  } catch {
    return true;
  }
}

/** Whether long lines wrap (the default) or scroll sideways; the choice is remembered. */
function useWrap(): [boolean, (wrap: boolean) => void] {
  const [wrap, setWrap] = useState(savedWrap);
  const change = (next: boolean) => {
    try {
      window.localStorage.setItem(WRAP_STORAGE, next ? "on" : "off");
    } catch {
      /* not remembered */
    }
    setWrap(next);
  };
  return [wrap, change];
}

function WrapToggle({ wrap, onChange }: { wrap: boolean; onChange: (wrap: boolean) => void }) {
  return (
    <button
      type="button"
      class="btn btn-small btn-ghost wrap-toggle"
      aria-pressed={wrap ? "true" : "false"}
      title={wrap ? "Long lines wrap; press to scroll them sideways" : "Long lines scroll sideways; press to wrap them"}
      onClick={() => onChange(!wrap)}
    >
      Wrap lines
    </button>
  );
}

function CopyButton({ text, what }: { text: string; what?: string }) {
  const [state, setState] = useState<"idle" | "copied" | "failed">("idle");
  useEffect(() => {
    if (state === "idle") return undefined;
    const timer = window.setTimeout(() => setState("idle"), 1800);
    return () => window.clearTimeout(timer);
  }, [state]);
  const subject = what ?? "Result";
  return (
    <>
      <button
        type="button"
        class="btn btn-small btn-ghost copy-btn"
        onClick={async () => setState((await copyText(text)) ? "copied" : "failed")}
      >
        {state === "copied" ? <CheckIcon size={14} /> : <CopyIcon size={14} />}
        {state === "copied" ? "Copied" : state === "failed" ? "Copy failed" : "Copy"}
        {what && <span class="sr-only"> {what}</span>}
      </button>
      <span class="sr-only" role="status">
        {state === "copied" ? `${subject} copied to the clipboard` : state === "failed" ? "Could not copy" : ""}
      </span>
    </>
  );
}

function CutNote({ bytes }: { bytes: number }) {
  if (bytes <= 0) return null;
  return (
    <p class="result-note" data-testid="result-cut">
      The output was cut: the server dropped {bytes} {bytes === 1 ? "byte" : "bytes"} over its cap.
    </p>
  );
}

/** One output stream of a failed command, in a pane of its own. */
function Stream({ name, label, text, wrap }: { name: string; label: string; text: string; wrap: boolean }) {
  const labelId = `stream-${name}-label`;
  return (
    <div class="stream" data-testid={`result-${name}`}>
      <div class="stream-head">
        <span class="stream-label" id={labelId}>
          {label} <code>{name}</code>
        </span>
        <span class="spacer" />
        {text !== "" && <CopyButton text={text} what={name} />}
      </div>
      {text === "" ? (
        <p class="result-empty">Nothing on {name}.</p>
      ) : (
        <pre class={`output${wrap ? " output-wrap" : ""}`} tabIndex={0} aria-labelledby={labelId} data-testid={`${name}-text`}>
          {text}
        </pre>
      )}
    </div>
  );
}

function Failed({
  status,
  shown,
  millis,
  sandbox,
}: {
  status: number;
  shown: Extract<Shown, { kind: "failed" }>;
  millis: number;
  sandbox?: { profile: string; withholds: string };
}) {
  const [wrap, setWrap] = useWrap();
  const words = failureWords(shown.exitCode, shown.timedOut);
  return (
    <section
      class="result result-failed"
      aria-label="Result: the command failed"
      data-testid="result"
      data-outcome={shown.timedOut ? "timeout" : "failed"}
    >
      <div class="result-head">
        <AlertIcon />
        <span class="pill pill-error" data-testid="result-status">
          {words.pill}
        </span>
        <strong class="result-title">{words.title}</strong>
        <span class="spacer" />
        <WrapToggle wrap={wrap} onChange={setWrap} />
      </div>
      <p class="result-meta">
        HTTP {statusLine(status)} · {formatMillis(millis)} · the answer's <code>X-Toolrun-Exit-Code</code> header
        carries the exit code
      </p>
      {sandbox && (
        <p class="result-detail" data-testid="sandbox-note">
          It ran in the sandbox profile <code>{sandbox.profile}</code>, which withholds {sandbox.withholds}.
        </p>
      )}
      <CutNote bytes={shown.cut} />
      <Stream name="stdout" label="Standard output" text={shown.stdout} wrap={wrap} />
      <Stream name="stderr" label="Standard error" text={shown.stderr} wrap={wrap} />
    </section>
  );
}

function Done({ status, shown, millis }: { status: number; shown: Extract<Shown, { kind: "ok" }>; millis: number }) {
  const [wrap, setWrap] = useWrap();
  return (
    <section class="result" aria-label="Result" data-testid="result" data-outcome="ok">
      <div class="result-head">
        <span class="pill pill-ok" data-testid="result-status">
          {statusLine(status)}
        </span>
        <span class="result-kind">
          {shown.data !== undefined ? "Typed output" : shown.json ? "JSON, pretty-printed" : "Text, verbatim"}
        </span>
        <span class="result-time">{formatMillis(millis)}</span>
        <span class="spacer" />
        {shown.text !== "" && <WrapToggle wrap={wrap} onChange={setWrap} />}
        <CopyButton text={shown.text} />
      </div>
      <CutNote bytes={shown.cut} />
      {shown.data !== undefined && <DataView value={shown.data} />}
      {shown.data !== undefined ? (
        <details class="data-json">
          <summary>As JSON</summary>
          <pre class={`output${wrap ? " output-wrap" : ""}`} tabIndex={0} aria-label="Result text" data-testid="result-text">
            {shown.text}
          </pre>
        </details>
      ) : shown.text === "" ? (
        <p class="result-empty">The tool returned an empty result.</p>
      ) : (
        <pre class={`output${wrap ? " output-wrap" : ""}`} tabIndex={0} aria-label="Result text" data-testid="result-text">
          {shown.text}
        </pre>
      )}
    </section>
  );
}

const JOB_WORDS: Record<string, string> = {
  awaiting_approval: "Awaiting approval",
  running: "Running",
  cancelled: "Cancelled",
  denied: "Denied",
  expired: "Expired",
  failed: "Failed",
  timed_out: "Timed out",
  succeeded: "Succeeded",
};

/** A stream of a job's output as the record keeps it: the head, then the tail after a gap. */
function printed(head: string, tail: string): string {
  return tail ? `${head}\n…\n${tail}` : head;
}

function jobDetail(view: JobView): string {
  const by = view.decided_by ? ` by ${view.decided_by}` : "";
  // A reason is another person's words: written out as `toolrun call` prints it (no bidi override turns it around).
  const why = visibleText(view.reason ? `: ${view.reason}` : view.error ? ` (${view.error})` : "");
  switch (view.status) {
    case "awaiting_approval":
      return `This tool needs approval by a member of ${view.approvers.join(", ")}. The result appears here once it ran.`;
    case "running":
      return "The call runs on the server; its output appears below as it comes, the result when it ends.";
    case "denied":
    case "expired":
      return `The call was ${view.status}${by}${why}; the tool did not run.`;
    default:
      return `The call was ${view.status}${by}${why}.`;
  }
}

function JobState({ view }: { view: JobView }) {
  const [wrap, setWrap] = useWrap();
  const ended = !["awaiting_approval", "running"].includes(view.status);
  const output = view.output;
  const stdout = output ? printed(output.stdout_head, output.stdout_tail) : "";
  const stderr = output ? printed(output.stderr_head, output.stderr_tail) : "";
  return (
    <section
      class={`result${ended ? " result-failed" : ""}`}
      role="status"
      aria-label="Job"
      data-testid="job-state"
      data-status={view.status}
    >
      <div class="result-head">
        <span class={`pill${ended ? " pill-error" : ""}`}>{JOB_WORDS[view.status] ?? view.status}</span>
        <strong class="result-title">Job {view.job}</strong>
        <span class="spacer" />
        {output && <WrapToggle wrap={wrap} onChange={setWrap} />}
      </div>
      <p class="result-detail" data-testid="job-detail">
        {jobDetail(view)}
      </p>
      {output && (
        <div data-testid="job-output">
          <Stream name="stdout" label={ended ? "It printed, on" : "So far, on"} text={stdout} wrap={wrap} />
          <Stream name="stderr" label={ended ? "It printed, on" : "So far, on"} text={stderr} wrap={wrap} />
        </div>
      )}
    </section>
  );
}

export function ResultPanel({ outcome }: { outcome: Outcome }) {
  if (outcome.kind === "job") return <JobState view={outcome.view} />;
  if (outcome.kind === "result") {
    return outcome.shown.kind === "ok" ? (
      <Done status={outcome.status} shown={outcome.shown} millis={outcome.millis} />
    ) : (
      <Failed status={outcome.status} shown={outcome.shown} millis={outcome.millis} sandbox={outcome.sandbox} />
    );
  }
  return (
    <section class="result result-error" role="alert" aria-label="Error" data-testid="error">
      <div class="result-head">
        <AlertIcon />
        <span class="pill pill-error">{statusLine(outcome.status)}</span>
        <strong class="result-title">{outcome.title}</strong>
      </div>
      {outcome.detail && <p class="result-detail">{outcome.detail}</p>}
      {outcome.body && (
        <pre class="output output-error" tabIndex={0} aria-label="Error text from the server" data-testid="error-text">
          {outcome.body}
        </pre>
      )}
    </section>
  );
}

// The outcome of POST /tools/{key}: the result (pretty JSON or verbatim text) with a Copy
// button that copies exactly what is shown, or the server's error shown plainly.

import { useEffect, useState } from "preact/hooks";
import { copyText } from "../clipboard";
import { AlertIcon, CheckIcon, CopyIcon } from "./icons";

export type Outcome =
  | { kind: "ok"; status: number; text: string; json: boolean; millis: number }
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

function CopyButton({ text }: { text: string }) {
  const [state, setState] = useState<"idle" | "copied" | "failed">("idle");
  useEffect(() => {
    if (state === "idle") return undefined;
    const timer = window.setTimeout(() => setState("idle"), 1800);
    return () => window.clearTimeout(timer);
  }, [state]);
  return (
    <>
      <button
        type="button"
        class="btn btn-small btn-ghost copy-btn"
        onClick={async () => setState((await copyText(text)) ? "copied" : "failed")}
      >
        {state === "copied" ? <CheckIcon size={14} /> : <CopyIcon size={14} />}
        {state === "copied" ? "Copied" : state === "failed" ? "Copy failed" : "Copy"}
      </button>
      <span class="sr-only" role="status">
        {state === "copied" ? "Result copied to the clipboard" : state === "failed" ? "Could not copy" : ""}
      </span>
    </>
  );
}

export function ResultPanel({ outcome }: { outcome: Outcome }) {
  if (outcome.kind === "ok") {
    return (
      <section class="result" aria-label="Result" data-testid="result">
        <div class="result-head">
          <span class="pill pill-ok">{statusLine(outcome.status)}</span>
          <span class="result-kind">{outcome.json ? "JSON, pretty-printed" : "Text, verbatim"}</span>
          <span class="result-time">{formatMillis(outcome.millis)}</span>
          <span class="spacer" />
          <CopyButton text={outcome.text} />
        </div>
        {outcome.text === "" ? (
          <p class="result-empty">The tool returned an empty result.</p>
        ) : (
          <pre class="output" tabIndex={0} aria-label="Result text" data-testid="result-text">
            {outcome.text}
          </pre>
        )}
      </section>
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

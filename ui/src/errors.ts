// Server errors in plain words, with the server's own text kept verbatim beside them.

import { ApiError } from "./api";

export interface Problem {
  status: number;
  title: string;
  detail: string;
  body: string;
  retryAfter: number | null;
}

function seconds(n: number): string {
  return n === 1 ? "1 second" : `${n} seconds`;
}

export function describeProblem(error: unknown, what: "call" | "load" = "call"): Problem {
  if (!(error instanceof ApiError)) {
    const message = error instanceof Error ? error.message : String(error);
    return { status: 0, title: "Something went wrong", detail: message, body: "", retryAfter: null };
  }
  const { status, body, retryAfter } = error;
  const base = { status, body, retryAfter };
  switch (status) {
    case 0:
      return { ...base, title: "Could not reach the server", detail: error.message };
    case 400:
      return {
        ...base,
        title: what === "call" ? "The server rejected the call" : "The server rejected the request",
        detail: "",
      };
    case 401:
      return { ...base, title: "Unauthorized", detail: "The API key was not accepted." };
    case 403:
      return { ...base, title: "Forbidden", detail: "" };
    case 404:
      return {
        ...base,
        title: "Not found",
        detail: "This tool does not exist, or it is not visible to your identity.",
      };
    case 413:
      return { ...base, title: "Request too large", detail: "" };
    case 429:
      return {
        ...base,
        title: "Rate limited",
        detail:
          retryAfter !== null
            ? `Too many calls to this tool. Try again in ${seconds(retryAfter)}.`
            : "Too many calls to this tool. Wait a moment, then try again.",
      };
    case 500:
      return { ...base, title: what === "call" ? "The tool failed" : "Server error", detail: "" };
    case 503:
      return {
        ...base,
        title: "The server is busy",
        detail: retryAfter !== null ? `Try again in ${seconds(retryAfter)}.` : "Try again shortly.",
      };
    default:
      return { ...base, title: "Request failed", detail: "" };
  }
}

// Result display and the value <-> text rules of the call form.

/**
 * `text` re-indented with two spaces when it parses as JSON, else null. The tokens are kept as
 * written (a 20-digit integer is not rounded through a double, "\u00e9" stays escaped): only the
 * whitespace between them changes.
 */
export function prettyJson(text: string): string | null {
  const trimmed = text.trim();
  if (!trimmed) return null;
  try {
    JSON.parse(trimmed);
  } catch {
    return null;
  }
  let out = "";
  let depth = 0;
  let inString = false;
  const newline = () => "\n" + "  ".repeat(depth);
  for (let i = 0; i < trimmed.length; i++) {
    const ch = trimmed[i]!;
    if (inString) {
      out += ch;
      if (ch === "\\") {
        out += trimmed[++i] ?? "";
      } else if (ch === '"') {
        inString = false;
      }
      continue;
    }
    if (ch === " " || ch === "\t" || ch === "\n" || ch === "\r") continue;
    if (ch === '"') {
      inString = true;
      out += ch;
    } else if (ch === "{" || ch === "[") {
      const close = ch === "{" ? "}" : "]";
      let j = i + 1;
      while (j < trimmed.length && /\s/.test(trimmed[j]!)) j++;
      if (trimmed[j] === close) {
        out += ch + close;
        i = j;
      } else {
        depth++;
        out += ch + newline();
      }
    } else if (ch === "}" || ch === "]") {
      depth--;
      out += newline() + ch;
    } else if (ch === ",") {
      out += "," + newline();
    } else if (ch === ":") {
      out += ": ";
    } else {
      out += ch;
    }
  }
  return out;
}

/** What the result panel shows for a 200 body: pretty JSON, or the text verbatim. */
export function displayResult(text: string): { text: string; json: boolean } {
  const pretty = prettyJson(text);
  return pretty === null ? { text, json: false } : { text: pretty, json: true };
}

/**
 * A chip or a dict value as typed: JSON when it parses (`4`, `true`, `"4"`, `{"a": 1}`), the text
 * itself otherwise. So `4` sends the number 4 and `"4"` the string "4".
 */
export function parseLoose(text: string): unknown {
  const trimmed = text.trim();
  if (trimmed === "") return text;
  try {
    return JSON.parse(trimmed);
  } catch {
    return text;
  }
}

/** The inverse of parseLoose: a string that would read back as something else is quoted. */
export function showLoose(value: unknown): string {
  if (typeof value === "string") return parseLoose(value) === value ? value : JSON.stringify(value);
  return JSON.stringify(value) ?? String(value);
}

/** A value for a text/number input (defaults prefilled). */
export function scalarText(value: unknown): string {
  if (value === null || value === undefined) return "";
  if (typeof value === "string") return value;
  return JSON.stringify(value) ?? String(value);
}

/** What a call's structured answer shows: a result, or a command that failed or timed out. */
export type Shown =
  | { kind: "ok"; text: string; json: boolean; cut: number; data?: unknown }
  | { kind: "failed"; exitCode: number; timedOut: boolean; stdout: string; stderr: string; cut: number };

/**
 * The structured answer of POST /tools/{key} as the panel shows it. A success shows what the
 * plain-text answer holds (an exec tool's stdout, an fn tool's `text`), pretty-printed when it is
 * JSON; a failed command shows its exit code, stdout and stderr apart. `cut`: bytes the server dropped.
 */
export function shownResult(payload: {
  ok: boolean;
  returncode?: number;
  stdout?: string;
  stderr?: string;
  timed_out?: boolean;
  truncated?: boolean;
  bytes_dropped?: number;
  result?: unknown;
  text?: string;
  typed?: boolean;
}): Shown {
  const cut = payload.truncated ? (payload.bytes_dropped ?? 0) : 0;
  if (typeof payload.returncode === "number" && !payload.ok) {
    return {
      kind: "failed",
      exitCode: payload.returncode,
      timedOut: payload.timed_out === true,
      stdout: payload.stdout ?? "",
      stderr: payload.stderr ?? "",
      cut,
    };
  }
  if (payload.typed === true) {
    // A typed output (`output:` json or lines): the parsed value, shown as a table or a tree.
    const pretty = JSON.stringify(payload.result, null, 2) ?? "";
    return { kind: "ok", text: pretty, json: true, cut, data: payload.result };
  }
  const text =
    typeof payload.stdout === "string"
      ? payload.stdout
      : typeof payload.text === "string"
        ? payload.text
        : (JSON.stringify(payload.result) ?? "");
  return { kind: "ok", ...displayResult(text), cut };
}

/** The failure of a command in words: its exit code, the timeout, or the signal that stopped it. */
export function failureWords(exitCode: number, timedOut: boolean): { pill: string; title: string } {
  if (timedOut) return { pill: "Timed out", title: "The command ran past its timeout and was stopped" };
  if (exitCode < 0) return { pill: `Signal ${-exitCode}`, title: `The command was killed by signal ${-exitCode}` };
  return { pill: `Exit code ${exitCode}`, title: `The command failed with exit code ${exitCode}` };
}

const INVISIBLE = /[\p{Cc}\p{Cf}]/gu;

/**
 * `text` with every control and format character but newline and tab written out as `\x1b` or `\u202e`, as
 * `toolrun jobs show` writes it: a requester's bidi override or isolate must not make the command an approver
 * reads look like another (Trojan Source), nor an escape sequence hide part of it.
 */
export function visibleText(text: string): string {
  return text.replace(INVISIBLE, (ch) => {
    if (ch === "\n" || ch === "\t") return ch;
    const code = ch.codePointAt(0) ?? 0;
    return code < 0x100 ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`;
  });
}

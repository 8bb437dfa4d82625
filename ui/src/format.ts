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

// "Copy as curl", "Copy as toolrun call" and "Copy link": the current form as a command or a URL
// that reproduces the call. The API key is never written out: curl gets the header as
// "X-API-Key: $TOOLRUN_API_KEY" (expanded by the shell), and `toolrun --url` reads
// $TOOLRUN_API_KEY itself. A secret param's value is never written out either: the commands take
// it from $TOOLRUN_SECRET_<NAME>, and links leave it out.

import type { Param } from "./api";
import { BASE } from "./router";

/** One POSIX shell word: bare when it is plain, else single-quoted ('\'' for a quote). */
export function shellQuote(text: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(text)) return text;
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

export function secretVariable(name: string): string {
  return `TOOLRUN_SECRET_${name.toUpperCase().replace(/[^A-Z0-9_]/g, "_")}`;
}

const isSecret = (params: Param[], name: string) => params.find((p) => p.name === name)?.secret === true;

/**
 * `curl` POSTing the arguments as JSON to /tools/{key} of this origin. A secret value is spliced
 * in from its variable between the single-quoted JSON parts ('..."'"$VAR"'"...'): a value with a
 * `"` or `\` must be JSON-escaped in the variable.
 */
export function curlCommand(
  origin: string,
  key: string,
  params: Param[],
  args: Record<string, unknown>,
  signedIn: boolean,
): string {
  const markers: [string, string][] = [];
  const body: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(args)) {
    if (isSecret(params, name)) {
      const marker = `\u0000secret-${markers.length}\u0000`;
      markers.push([marker, secretVariable(name)]);
      body[name] = marker;
    } else {
      body[name] = value;
    }
  }
  let data = shellQuote(JSON.stringify(body));
  for (const [marker, variable] of markers) {
    const json = JSON.stringify(marker);
    data = data.replace(json, `"'"$${variable}"'"`);
  }
  if (markers.length > 0 && !data.startsWith("'")) data = `'${data}'`;
  const parts = [
    "curl",
    "-sS",
    "-X",
    "POST",
    shellQuote(`${origin}/tools/${encodeURIComponent(key)}`),
    "-H",
    shellQuote("Content-Type: application/json"),
  ];
  if (signedIn) parts.push("-H", '"X-API-Key: $TOOLRUN_API_KEY"');
  parts.push("--data-raw", data);
  return parts.join(" ");
}

/** The arguments of `toolrun call`: `name=value` for str/int/float/bool, `name:=<json>` otherwise. */
export function toolrunArgs(params: Param[], args: Record<string, unknown>): string[] {
  const words: string[] = [];
  for (const [name, value] of Object.entries(args)) {
    const param = params.find((p) => p.name === name);
    if (param?.secret) {
      words.push(`${name}="$${secretVariable(name)}"`);
      continue;
    }
    const scalar = param && ["str", "int", "float", "bool"].includes(param.type);
    if (scalar && typeof value === "string") words.push(shellQuote(`${name}=${value}`));
    else if (scalar) words.push(shellQuote(`${name}=${JSON.stringify(value)}`));
    else words.push(shellQuote(`${name}:=${JSON.stringify(value)}`));
  }
  return words;
}

/** `toolrun --url <origin> call <key> <args>`: the remote CLI against this server. */
export function toolrunCommand(origin: string, key: string, params: Param[], args: Record<string, unknown>): string {
  return ["toolrun", "--url", shellQuote(origin), "call", shellQuote(key), ...toolrunArgs(params, args)].join(" ");
}

/** A link that opens the tool with these arguments filled in (never a secret's value). */
export function toolLink(origin: string, key: string, params: Param[], args: Record<string, unknown>): string {
  const shared = Object.fromEntries(Object.entries(args).filter(([name]) => !isSecret(params, name)));
  const path = `${origin}${BASE}tools/${encodeURIComponent(key)}`;
  return Object.keys(shared).length ? `${path}?${new URLSearchParams({ args: JSON.stringify(shared) })}` : path;
}

/** The arguments of a link opened on this page (`?args=<json object>`), secrets dropped; null if none. */
export function linkedArgs(params: Param[], search: string = window.location.search): Record<string, unknown> | null {
  const text = new URLSearchParams(search).get("args");
  if (text === null) return null;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return null;
  return Object.fromEntries(
    Object.entries(value).filter(([name]) => params.some((p) => p.name === name && !p.secret)),
  );
}

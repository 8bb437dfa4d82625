// Signing in with the OpenID provider (docs/oauth.md): the authorization code flow with PKCE, for a public
// client. The server says how (GET /ui/oauth.json: issuer, client id, endpoints, scopes; 404 when off).
//
// The round trip: a random state and code verifier go to sessionStorage (this tab, this origin) only until
// the provider sends the browser back to /ui/ with ?code&state; the URL is cleaned at once, the state must
// match, and the code is exchanged at the token endpoint from the browser (CORS at the provider) with the
// verifier. The token is then checked with toolrun's /whoami and kept in this page's memory only: never in
// localStorage or sessionStorage, so a reload or a new tab signs in again.
//
// Which token: the access token when it is a JWT (toolrun needs JWTs); else the ID token, whose `aud` is
// the client id, so it is accepted only where oauth_audience is that client id.

import type { Identity } from "./api";

export interface Provider {
  issuer: string;
  provider: string;
  client_id: string;
  scopes: string[];
  authorization_endpoint: string;
  token_endpoint: string;
}

const PENDING = "toolrun.oauth.pending";

let cached: Promise<Provider | null> | null = null;

/** The provider the UI signs in with, or null when the server offers none (or cannot reach it). */
export function provider(): Promise<Provider | null> {
  if (!cached) {
    cached = (async () => {
      try {
        const response = await fetch("/ui/oauth.json", { headers: { Accept: "application/json" } });
        if (!response.ok) return null;
        return (await response.json()) as Provider;
      } catch {
        return null;
      }
    })();
    // A failure is not remembered: the next dialog asks again.
    void cached.then((found) => {
      if (!found) cached = null;
    });
  }
  return cached;
}

function base64url(bytes: Uint8Array): string {
  let text = "";
  for (const byte of bytes) text += String.fromCharCode(byte);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function random(length: number): string {
  return base64url(crypto.getRandomValues(new Uint8Array(length)));
}

async function challengeOf(verifier: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
  return base64url(new Uint8Array(digest));
}

export function redirectUri(): string {
  return `${window.location.origin}/ui/`;
}

/** Leave for the provider's sign-in page; it sends the browser back to /ui/ with a code. */
export async function startSignIn(found: Provider): Promise<void> {
  const state = random(16);
  const verifier = random(32); // 43 characters, the shortest RFC 7636 allows
  const back = window.location.pathname + window.location.search;
  window.sessionStorage.setItem(PENDING, JSON.stringify({ state, verifier, back }));
  const url = new URL(found.authorization_endpoint);
  url.searchParams.set("response_type", "code");
  url.searchParams.set("client_id", found.client_id);
  url.searchParams.set("redirect_uri", redirectUri());
  url.searchParams.set("scope", found.scopes.join(" "));
  url.searchParams.set("state", state);
  url.searchParams.set("code_challenge", await challengeOf(verifier));
  url.searchParams.set("code_challenge_method", "S256");
  window.location.assign(url.toString());
}

/** Whether this page is the provider sending the browser back (?state with ?code or ?error). */
export function isCallback(): boolean {
  const params = new URLSearchParams(window.location.search);
  return window.location.pathname === "/ui/" && params.has("state") && (params.has("code") || params.has("error"));
}

export class SignInError extends Error {}

function isJwt(value: unknown): value is string {
  return typeof value === "string" && value.split(".").length === 3;
}

function takePending(): { state: string; verifier: string; back: string } | null {
  const raw = window.sessionStorage.getItem(PENDING);
  window.sessionStorage.removeItem(PENDING);
  if (!raw) return null;
  try {
    return JSON.parse(raw) as { state: string; verifier: string; back: string };
  } catch {
    return null;
  }
}

async function exchange(found: Provider, code: string, verifier: string): Promise<string> {
  const body = new URLSearchParams({
    grant_type: "authorization_code",
    code,
    redirect_uri: redirectUri(),
    client_id: found.client_id,
    code_verifier: verifier,
  });
  let response: Response;
  try {
    response = await fetch(found.token_endpoint, { method: "POST", body, headers: { Accept: "application/json" } });
  } catch {
    throw new SignInError(
      `Could not reach ${found.provider}'s token endpoint: check that it allows this origin (CORS) for a public client.`,
    );
  }
  const answer = (await response.json().catch(() => ({}))) as Record<string, unknown>;
  if (!response.ok) {
    const why = [answer.error, answer.error_description].filter((x) => typeof x === "string").join(": ");
    throw new SignInError(`${found.provider} refused to give a token (HTTP ${response.status}${why ? `: ${why}` : ""}).`);
  }
  if (isJwt(answer.access_token)) return answer.access_token;
  if (isJwt(answer.id_token)) return answer.id_token;
  throw new SignInError(`${found.provider} gave no JWT (neither the access token nor an ID token): toolrun needs one.`);
}

async function check(token: string): Promise<Identity> {
  const response = await fetch("/whoami", { headers: { Authorization: `Bearer ${token}`, Accept: "application/json" } });
  if (response.ok) return (await response.json()) as Identity;
  const header = response.headers.get("WWW-Authenticate") ?? "";
  const why = /error_description="([^"]*)"/.exec(header)?.[1];
  throw new SignInError(`toolrun refused the token${why ? `: ${why}` : ` (HTTP ${response.status})`}.`);
}

/** Milliseconds until the token's `exp`, or null when it has none that can be read. */
export function expiresIn(token: string): number | null {
  try {
    const payload = token.split(".")[1] ?? "";
    const claims = JSON.parse(atob(payload.replace(/-/g, "+").replace(/_/g, "/"))) as { exp?: unknown };
    return typeof claims.exp === "number" ? claims.exp * 1000 - Date.now() : null;
  } catch {
    return null;
  }
}

/**
 * Finish a sign-in when the provider sent the browser back: the URL is cleaned first (the code and state
 * never stay in the address bar or history), then the state is checked, the code exchanged and the token
 * checked with toolrun. Returns the token (for memory only) and who it is; throws SignInError.
 */
export async function completeSignIn(): Promise<{ token: string; identity: Identity }> {
  const params = new URLSearchParams(window.location.search);
  const pending = takePending();
  window.history.replaceState(null, "", pending?.back.startsWith("/ui/") ? pending.back : "/ui/");
  if (!pending || params.get("state") !== pending.state) {
    throw new SignInError("The sign-in answer does not match a sign-in started here (state mismatch): sign in again.");
  }
  const error = params.get("error");
  if (error) {
    const detail = params.get("error_description");
    throw new SignInError(`The provider did not sign you in: ${error}${detail ? ` (${detail})` : ""}.`);
  }
  const found = await provider();
  if (!found) throw new SignInError("Signing in with the provider is not available on this server right now.");
  const token = await exchange(found, params.get("code") ?? "", pending.verifier);
  return { token, identity: await check(token) };
}

// Paste an API key: validated with GET /whoami (key in the X-API-Key header), then kept in
// localStorage by the caller. Or, where the server offers it, sign in with the OpenID provider
// (oauth.ts: PKCE, the token kept in memory only). A modal <dialog>: focus is trapped, Escape closes it.

import { useEffect, useRef, useState } from "preact/hooks";
import { ApiError, type Identity, whoami } from "../api";
import { describeProblem } from "../errors";
import { type Provider, provider as findProvider, startSignIn } from "../oauth";

interface Props {
  open: boolean;
  onClose: () => void;
  onSignedIn: (key: string, identity: Identity) => void;
  /** Why the last sign-in with the provider failed, shown when the dialog opens. */
  providerError?: string;
}

export function SignInDialog({ open, onClose, onSignedIn, providerError = "" }: Props) {
  const dialog = useRef<HTMLDialogElement>(null);
  const input = useRef<HTMLInputElement>(null);
  const [key, setKey] = useState("");
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  const [provider, setProvider] = useState<Provider | null>(null);
  const [leaving, setLeaving] = useState(false);

  useEffect(() => {
    const element = dialog.current;
    if (!element) return;
    if (open && !element.open) {
      setKey("");
      setError("");
      setLeaving(false);
      element.showModal();
      input.current?.focus();
      void findProvider().then(setProvider);
    } else if (!open && element.open) {
      element.close();
    }
  }, [open]);

  const signInWithProvider = async () => {
    if (!provider) return;
    setLeaving(true);
    try {
      await startSignIn(provider);
    } catch {
      setLeaving(false);
      setError(`Could not start signing in with ${provider.provider}: this browser lacks sessionStorage or crypto.`);
    }
  };

  const submit = async (event: Event) => {
    event.preventDefault();
    const candidate = key.trim();
    if (!candidate) {
      setError("Paste an API key first.");
      input.current?.focus();
      return;
    }
    setBusy(true);
    setError("");
    try {
      const identity = await whoami(candidate);
      setKey("");
      onSignedIn(candidate, identity);
    } catch (problem) {
      setError(
        problem instanceof ApiError && problem.status === 401
          ? "That key was not accepted: it is unknown, revoked or expired."
          : `${describeProblem(problem, "load").title}. ${describeProblem(problem, "load").detail}`.trim(),
      );
      input.current?.select();
    } finally {
      setBusy(false);
    }
  };

  const providerErrorText = providerError && (
    <p id="signin-provider-error" class="field-error" role="alert">
      {providerError}
    </p>
  );

  return (
    <dialog
      ref={dialog}
      class="dialog"
      aria-labelledby="signin-heading"
      aria-describedby="signin-help"
      onClose={onClose}
      onCancel={onClose}
      onClick={(event) => {
        // A click on the backdrop (the dialog element itself) closes it.
        if (event.target === dialog.current) onClose();
      }}
    >
      <form class="dialog-body" onSubmit={submit} noValidate>
        <h2 id="signin-heading">{provider ? "Sign in" : "Sign in with an API key"}</h2>
        {provider && (
          <div class="signin-provider">
            <button
              type="button"
              class="btn btn-primary"
              disabled={leaving}
              aria-describedby="signin-provider-help"
              onClick={() => void signInWithProvider()}
            >
              {leaving && <span class="spinner" aria-hidden="true" />}
              Sign in with {provider.provider}
            </button>
            <p id="signin-provider-help" class="muted">
              You sign in at {provider.provider} and come back here. The token is kept in this page&apos;s memory
              only: a reload or a new tab asks you to sign in again.
            </p>
            {providerErrorText}
          </div>
        )}
        {!provider && providerErrorText}
        {provider && <p class="muted">Or paste an API key:</p>}
        <p id="signin-help" class="muted">
          The key is checked with <code>/whoami</code>, kept in this browser's local storage and sent as the{" "}
          <code>X-API-Key</code> header. Create one with <code>toolrun keys create &lt;user&gt;</code>.
        </p>
        <label for="api-key" class="field-label">
          API key
        </label>
        <input
          id="api-key"
          ref={input}
          class="input mono"
          type="password"
          autocomplete="off"
          spellcheck={false}
          value={key}
          aria-invalid={error ? "true" : undefined}
          aria-describedby={error ? "signin-error" : undefined}
          onInput={(event) => setKey((event.currentTarget as HTMLInputElement).value)}
        />
        {error && (
          <p id="signin-error" class="field-error" role="alert">
            {error}
          </p>
        )}
        <div class="dialog-actions">
          <button type="button" class="btn btn-ghost" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" class="btn btn-primary" disabled={busy}>
            {busy && <span class="spinner" aria-hidden="true" />}
            Sign in
          </button>
        </div>
      </form>
    </dialog>
  );
}

// The top bar: brand, identity (anonymous, or username and groups with Sign out), theme toggle.

import type { Identity } from "../api";
import type { Theme } from "../theme";
import { KeyIcon, LogoMark, MoonIcon, SunIcon } from "./icons";

interface Props {
  identity: Identity | null;
  checking: boolean;
  theme: Theme;
  onTheme: () => void;
  onSignIn: () => void;
  onSignOut: () => void;
  homeHref: string;
  onHome: (event: MouseEvent) => void;
  pending: number; // calls waiting for this user's approval
  onPending: (event: MouseEvent) => void;
}

export function Header(props: Props) {
  const { identity, checking, theme, onTheme, onSignIn, onSignOut, homeHref, onHome, pending, onPending } = props;
  const next = theme === "dark" ? "light" : "dark";
  return (
    <header class="topbar">
      <div class="topbar-inner">
        <h1 class="brand-heading">
          <a class="brand" href={homeHref} onClick={onHome}>
            <LogoMark />
            <span class="brand-name">toolrun</span>
            <span class="sr-only"> tools</span>
          </a>
        </h1>
        <span class="spacer" />
        {identity && pending > 0 && (
          <a class="pending-badge" href={`${homeHref}#approvals`} onClick={onPending} data-testid="pending-count">
            {pending} awaiting your approval
          </a>
        )}
        <div class="identity" data-testid="identity">
          {checking && !identity ? (
            <span class="identity-anon muted" role="status">
              Checking your API key…
            </span>
          ) : identity ? (
            <>
              <span class="avatar" aria-hidden="true">
                {identity.username.slice(0, 1).toUpperCase()}
              </span>
              <span class="identity-text">
                <span class="identity-name" data-testid="username">
                  {identity.username}
                </span>
                <span class="identity-groups" data-testid="groups">
                  <span class="sr-only">Groups: </span>
                  {identity.groups.length ? identity.groups.join(", ") : "no groups"}
                </span>
              </span>
              <button type="button" class="btn btn-small btn-ghost" onClick={onSignOut}>
                Sign out
              </button>
            </>
          ) : (
            <>
              <span class="identity-anon muted">Anonymous · public tools</span>
              <button type="button" class="btn btn-small" onClick={onSignIn}>
                <KeyIcon size={14} /> Sign in
              </button>
            </>
          )}
        </div>
        <button
          type="button"
          class="btn btn-icon btn-ghost theme-toggle"
          aria-label={`Switch to ${next} theme`}
          title={`Switch to ${next} theme`}
          onClick={onTheme}
          data-theme-current={theme}
        >
          {theme === "dark" ? <SunIcon size={18} /> : <MoonIcon size={18} />}
        </button>
      </div>
    </header>
  );
}

// The app shell: route state (from the URL), identity (from the stored key), theme, and the
// list and detail panes side by side (one at a time on a phone).

import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import {
  ApiError,
  currentKey,
  type Identity,
  KEY_STORAGE_NAME,
  listJobs,
  storedKey,
  storeKey,
  setCurrentKey,
  whoami,
} from "./api";
import { Approvals } from "./components/Approvals";
import { MyRequests } from "./components/MyRequests";
import { Header } from "./components/Header";
import { SignInDialog } from "./components/SignIn";
import { ToolDetail } from "./components/ToolDetail";
import { ToolList } from "./components/ToolList";
import { completeSignIn, expiresIn, isCallback, SignInError } from "./oauth";
import { href, navigate, parseLocation, type Route } from "./router";
import { applyTheme, followSystem, saveTheme, savedTheme, systemTheme, type Theme } from "./theme";

function isPlainClick(event: MouseEvent): boolean {
  return event.button === 0 && !event.metaKey && !event.ctrlKey && !event.shiftKey && !event.altKey;
}

export function App() {
  const [route, setRoute] = useState<Route>(() => parseLocation());
  const [identity, setIdentity] = useState<Identity | null>(null);
  const [checking, setChecking] = useState(() => currentKey() !== "" || isCallback());
  const [providerError, setProviderError] = useState("");
  const [epoch, setEpoch] = useState(0);
  const [signInOpen, setSignInOpen] = useState(false);
  const [notice, setNotice] = useState("");
  const [theme, setTheme] = useState<Theme>(() => savedTheme() ?? systemTheme());
  const searchRef = useRef<HTMLInputElement | null>(null);

  const [pending, setPending] = useState(0);
  useEffect(() => applyTheme(theme), [theme]);
  // The header's count of calls waiting for this user's approval, on every page.
  useEffect(() => {
    if (!identity) {
      setPending(0);
      return undefined;
    }
    const count = async () => {
      try {
        setPending((await listJobs("awaiting_approval")).filter((j) => j.can_decide).length);
      } catch {
        setPending(0);
      }
    };
    void count();
    const timer = window.setInterval(() => void count(), 5000);
    return () => window.clearInterval(timer);
  }, [identity, epoch]);
  useEffect(() => followSystem(setTheme), []);

  const go = useCallback((next: Route, replace = false) => {
    navigate(next, replace);
    setRoute(next);
  }, []);

  useEffect(() => {
    const onPop = () => setRoute(parseLocation());
    window.addEventListener("popstate", onPop);
    return () => window.removeEventListener("popstate", onPop);
  }, []);

  // A stored key is checked once at start: a key that no longer resolves is dropped.
  const verify = useCallback(async (key: string) => {
    if (!key) {
      setIdentity(null);
      setChecking(false);
      return;
    }
    setChecking(true);
    try {
      setIdentity(await whoami(key));
    } catch (error) {
      if (error instanceof ApiError && error.status === 401) {
        storeKey("");
        setIdentity(null);
        setNotice("Your saved API key is no longer accepted, so you are browsing anonymously.");
        setEpoch((n) => n + 1);
      } else {
        setNotice("Could not check your saved API key; it is still being sent.");
      }
    } finally {
      setChecking(false);
    }
  }, []);

  // Back from the provider (?code&state): finish the sign-in; the token stays in memory only, until it expires.
  const expiry = useRef<number | undefined>(undefined);
  const finishSignIn = useCallback(async () => {
    setChecking(true);
    try {
      const { token, identity: who } = await completeSignIn();
      storeKey(""); // a saved API key would come back on reload: the provider's sign-in replaces it
      setCurrentKey(token);
      setIdentity(who);
      const left = expiresIn(token);
      if (left !== null) {
        window.clearTimeout(expiry.current);
        expiry.current = window.setTimeout(
          () => {
            if (currentKey() !== token) return; // signed out or in again since
            setCurrentKey("");
            setIdentity(null);
            setNotice("Your sign-in with the provider has expired: sign in again.");
            setEpoch((n) => n + 1);
          },
          Math.min(Math.max(left, 0), 2 ** 31 - 1),
        );
      }
      setProviderError("");
      setNotice("");
    } catch (error) {
      setProviderError(error instanceof SignInError ? error.message : `Signing in failed: ${String(error)}`);
      setSignInOpen(true);
      void verify(currentKey());
    } finally {
      setRoute(parseLocation());
      setEpoch((n) => n + 1);
      setChecking(false);
    }
  }, [verify]);

  useEffect(() => {
    if (isCallback()) void finishSignIn();
    else void verify(currentKey());
    // Another tab signed in or out.
    const onStorage = (event: StorageEvent) => {
      if (event.key !== KEY_STORAGE_NAME && event.key !== null) return;
      const key = storedKey();
      if (key === currentKey()) return;
      setCurrentKey(key);
      void verify(key);
      setEpoch((n) => n + 1);
    };
    window.addEventListener("storage", onStorage);
    return () => window.removeEventListener("storage", onStorage);
  }, [verify, finishSignIn]);

  // "/" jumps to the search box from anywhere but a text field.
  useEffect(() => {
    const onKey = (event: KeyboardEvent) => {
      if (event.key !== "/" || event.ctrlKey || event.metaKey || event.altKey) return;
      const target = event.target as HTMLElement | null;
      if (target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName))) return;
      if (document.querySelector("dialog[open]")) return;
      event.preventDefault();
      if (route.tool && window.matchMedia("(max-width: 899px)").matches) go({ ...route, tool: null });
      window.requestAnimationFrame(() => searchRef.current?.focus());
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [route, go]);

  const signedIn = (key: string, who: Identity) => {
    storeKey(key);
    setIdentity(who);
    setSignInOpen(false);
    setProviderError("");
    setNotice("");
    setEpoch((n) => n + 1);
  };

  const signOut = () => {
    storeKey("");
    setIdentity(null);
    setNotice("Signed out: you see public tools only.");
    setEpoch((n) => n + 1);
  };

  const toggleTheme = () => {
    const next = theme === "dark" ? "light" : "dark";
    saveTheme(next);
    setTheme(next);
  };

  const home = { query: route.query, offset: route.offset, tool: null };

  return (
    <>
      <a class="skip-link" href="#search">
        Skip to search
      </a>
      <Header
        identity={identity}
        checking={checking}
        theme={theme}
        onTheme={toggleTheme}
        onSignIn={() => setSignInOpen(true)}
        onSignOut={signOut}
        homeHref={href({ tool: null, query: "", offset: 0 })}
        onHome={(event) => {
          if (!isPlainClick(event)) return;
          event.preventDefault();
          go({ tool: null, query: "", offset: 0 });
        }}
        pending={pending}
        onPending={(event) => {
          if (!isPlainClick(event)) return;
          event.preventDefault();
          go({ tool: null, query: "", offset: 0 });
          window.requestAnimationFrame(() => document.getElementById("approvals")?.scrollIntoView());
        }}
      />
      {notice && (
        <div class="banner" role="status">
          <span>{notice}</span>
          <button type="button" class="btn btn-small btn-link" onClick={() => setNotice("")}>
            Dismiss
          </button>
        </div>
      )}
      <main class={`layout${route.tool ? " has-detail" : ""}`} id="main">
        <ToolList
          route={route}
          epoch={epoch}
          searchRef={searchRef}
          onQuery={(query) => go({ ...route, query, offset: 0 }, true)}
          onOffset={(offset) => go({ ...route, offset })}
          onOpen={(key, event) => {
            if (!isPlainClick(event)) return;
            event.preventDefault();
            go({ ...route, tool: key });
          }}
        />
        <div class="detail-pane">
          {route.tool ? (
            <ToolDetail
              toolKey={route.tool}
              epoch={epoch}
              backHref={href(home)}
              onBack={(event) => {
                if (!isPlainClick(event)) return;
                event.preventDefault();
                go(home);
                window.requestAnimationFrame(() => {
                  const card = document.querySelector<HTMLAnchorElement>(
                    `.card[data-key="${CSS.escape(route.tool ?? "")}"] .card-link`,
                  );
                  (card ?? searchRef.current)?.focus();
                });
              }}
            />
          ) : (
            <div class="panel placeholder">
              <p class="placeholder-title">Pick a tool</p>
              <p class="muted">Its description, example call and a form to run it appear here.</p>
              {identity && <Approvals epoch={epoch} />}
              {identity && <MyRequests username={identity.username} epoch={epoch} />}
            </div>
          )}
        </div>
      </main>
      <SignInDialog
        open={signInOpen}
        onClose={() => {
          setSignInOpen(false);
          setProviderError("");
        }}
        onSignedIn={signedIn}
        providerError={providerError}
      />
    </>
  );
}

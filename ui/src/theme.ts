// Light and dark themes: the saved choice wins, else the system preference (followed live).

export type Theme = "light" | "dark";
const STORAGE = "toolrun.theme";

export function savedTheme(): Theme | null {
  try {
    const value = window.localStorage.getItem(STORAGE);
    return value === "light" || value === "dark" ? value : null;
  } catch {
    return null;
  }
}

export function systemTheme(): Theme {
  return window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}

export function applyTheme(theme: Theme): void {
  document.documentElement.setAttribute("data-theme", theme);
}

export function saveTheme(theme: Theme): void {
  try {
    window.localStorage.setItem(STORAGE, theme);
  } catch {
    /* not remembered */
  }
}

/** Calls `onChange` when the system preference changes and no choice was saved. */
export function followSystem(onChange: (theme: Theme) => void): () => void {
  const query = window.matchMedia("(prefers-color-scheme: dark)");
  const listener = () => {
    if (savedTheme() === null) onChange(systemTheme());
  };
  query.addEventListener("change", listener);
  return () => query.removeEventListener("change", listener);
}

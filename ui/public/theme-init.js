// Runs before the first paint: the saved theme, else the system preference.
(function () {
  var theme;
  try {
    theme = window.localStorage.getItem("toolrun.theme");
  } catch {
    theme = null;
  }
  if (theme !== "light" && theme !== "dark") {
    theme = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  }
  document.documentElement.setAttribute("data-theme", theme);
})();

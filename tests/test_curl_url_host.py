"""A curl tool whose URL's scheme, host or port comes from a caller (SSRF): validate-catalog and serve's start
warnings name the tool and the param (`curl-url-host`); a param in the path or query is fine."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.catalogs import write_catalog
from support.servers import clean_env, toolrun_cli
from toolrun import catalog as catalog_mod

SHAPES = [
    ("whole", '"{{ url }}"', "url", "scheme and host"),
    ("quoted", "-- {{ url | quote }}", "url", "scheme and host"),
    ("host", "https://{{ host }}/x", "host", "host or port"),
    ("port", "https://api.example:{{ port }}/x", "port", "host or port"),
    ("scheme", "{{ scheme }}://api.example/x", "scheme", "scheme"),
    ("glued", "https://api.example{{ path }}", "path", "host or port"),  # "@169.254.169.254" moves the host
    ("url-option", "--url={{ url }}", "url", "scheme and host"),
    ("proxy", "-x {{ proxy }} https://api.example/", "proxy", "scheme and host"),
]


def _problems(tmp_path: Path, curl: str, name: str, extra: str = "") -> list[tuple[str, str, str]]:
    text = f"group: web\ntools:\n  - name: t\n    curl: {curl}\n    params: [{{name: {name}, type: str{extra}}}]\n"
    _, problems = catalog_mod.check([write_catalog(tmp_path, text)])
    return [(p.key, p.code, p.message) for p in problems]


@pytest.mark.parametrize(("case", "curl", "name", "part"), SHAPES, ids=[s[0] for s in SHAPES])
def test_a_param_in_the_scheme_host_or_port_is_warned_about(
    tmp_path: Path, case: str, curl: str, name: str, part: str
) -> None:
    found = [(key, message) for key, code, message in _problems(tmp_path, curl, name) if code == "curl-url-host"]
    assert len(found) == 1, found
    key, message = found[0]
    assert key == "web.t"
    assert message.startswith(f"param {name!r} sets the {part} of the URL curl requests")
    assert "metadata service" in message and "enum" in message


@pytest.mark.parametrize(
    "curl",
    [
        "https://api.example/{{ path }}",
        "https://api.example/x?q={{ path | urlencode }}",
        "https://api.example/x#{{ path }}",
        "-H 'X-Note: {{ path }}' -d {{ path | quote }} https://api.example/",
    ],
)
def test_a_param_in_the_path_query_or_an_option_argument_is_not(tmp_path: Path, curl: str) -> None:
    assert [p for p in _problems(tmp_path, curl, "path") if p[1] == "curl-url-host"] == []


def test_an_enum_fixes_the_hosts_and_silences_the_warning(tmp_path: Path) -> None:
    problems = _problems(tmp_path, "https://{{ host }}/x", "host", ", enum: [a.example, b.example]")
    assert [p for p in problems if p[1] == "curl-url-host"] == []


def test_validate_catalog_strict_fails_on_it_and_allow_warnings_acknowledges_it(tmp_path: Path) -> None:
    text = "group: web\ntools:\n  - name: fetch\n    curl: -- {{ url | quote }}\n    params: [{name: url, type: str}]\n"
    path = write_catalog(tmp_path, text)
    env = clean_env(tmp_path / "home")
    done = toolrun_cli("validate-catalog", "--strict", str(path), env=env)
    assert done.returncode != 0
    assert "web.fetch: warning: param 'url' sets the scheme and host of the URL" in done.stdout + done.stderr
    assert "[curl-url-host]" in done.stdout + done.stderr
    path.write_text(text.replace("    params:", "    allow_warnings: [curl-url-host]\n    params:"))
    quiet = toolrun_cli("validate-catalog", "--strict", str(path), env=env)
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr


def test_serve_prints_it_at_start(tmp_path: Path) -> None:
    import subprocess
    import sys

    text = "group: web\ntools:\n  - name: fetch\n    curl: https://{{ host }}/x\n"
    text += "    params: [{name: host, type: str}]\n"
    path = write_catalog(tmp_path, text)
    done = subprocess.run(
        [sys.executable, "-m", "toolrun", "serve", "--stdio", "-c", str(path)],
        env=clean_env(tmp_path / "home"),
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "web.fetch: warning: param 'host' sets the host or port of the URL" in done.stderr

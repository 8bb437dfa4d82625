"""A careless or hostile catalog file (issue 23, items 1 and 8), on the real `toolrun` command and a real `serve`.

- YAML alias bombs ("billion laughs", the same with merge keys, a long string repeated) and a recursive alias
  are refused at once at their file:line, by `validate-catalog` and by a reload; the server keeps serving.
- A reload never holds a SIGTERM'd server past its grace, and nothing else does either.
- A catalog path that leads to a file that is not a catalog (a password file, a FIFO, a device) is refused with an
  error that names the file and never quotes it, in `validate-catalog`, the server log and `/admin/reload`.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

from support.catalogs import write_catalog
from support.keys import create_key
from support.servers import ToolrunServer, clean_env, toolrun_cli, wait_until

SERVED = """\
version: 1
group: ops
tools:
  - name: one
    public: true
    exec: printf one
"""


def laughs(levels: int = 9) -> str:
    """The classic: nine anchors of ten aliases each, the last one used by a tool (10^9 strings once expanded)."""
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, levels + 1)]
    return "\n".join(lines) + f"\ntools:\n  - name: boom\n    exec: echo hi\n    description: *a{levels}\n"


def merge_bomb() -> str:
    """The same with `<<` merge keys: each level merges ten copies of the one before."""
    lines = ["m0: &m0 {" + ", ".join(f"k{j}: v" for j in range(10)) + "}"]
    lines += [f"m{i}: &m{i} {{<<: [" + ", ".join([f"*m{i - 1}"] * 10) + "]}" for i in range(1, 9)]
    return "\n".join(lines) + "\ntools:\n  - name: boom\n    exec: echo hi\n    defaults: *m8\n"


def wide_bomb() -> str:
    """Few values, long ones: a 100,000-character string repeated through two levels of aliases."""
    return (
        f"s: &s {'x' * 100_000}\n"
        "l1: &l1 [" + ", ".join(["*s"] * 100) + "]\n"
        "l2: &l2 [" + ", ".join(["*l1"] * 100) + "]\n"
        "tools:\n  - name: boom\n    exec: echo hi\n    params:\n      - {name: v, type: str, enum: *l2}\n"
    )


def line_of(text: str, prefix: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if line.startswith(prefix))


@pytest.mark.parametrize(
    ("make", "blamed"),
    [(laughs, "a5:"), (merge_bomb, "m5:"), (wide_bomb, "l1:")],
    ids=["billion-laughs", "merge-keys", "long-strings"],
)
def test_validate_catalog_refuses_an_alias_bomb_at_once_with_its_file_and_line(
    tmp_path: Path, make: object, blamed: str
) -> None:
    text = make()  # type: ignore[operator]
    catalog = write_catalog(tmp_path, text)
    started = time.monotonic()
    done = toolrun_cli("validate-catalog", str(catalog), env=clean_env(tmp_path / "home"), timeout=60)
    took = time.monotonic() - started

    assert done.returncode == 1, done
    assert f"{catalog}:{line_of(text, blamed)}:" in done.stdout, done.stdout
    assert "alias bomb" in done.stdout and "Traceback" not in done.stderr
    assert took < 10, f"validate-catalog took {took:.1f}s"


def test_a_recursive_alias_is_a_catalog_error_not_a_hang(tmp_path: Path) -> None:
    catalog = write_catalog(tmp_path, "loop: &loop [1, *loop]\ntools: []\n")
    done = toolrun_cli("validate-catalog", str(catalog), env=clean_env(tmp_path / "home"), timeout=60)
    assert done.returncode == 1, done
    assert f"{catalog}:1:7: -: a YAML alias refers to a value that contains it" in done.stdout, done.stdout


def test_anchors_and_merge_keys_of_an_ordinary_catalog_still_load(tmp_path: Path) -> None:
    text = """\
group: ops
tools:
  - name: t0
    exec: printf %s {{ v | quote }}
    params: &p [{name: v, type: str, enum: [a, b, c]}]
    <<: &common {timeout: 5, env: {REGION: eu}}
"""
    tool = "  - {{name: t{}, exec: 'printf %s {{{{ v | quote }}}}', params: *p, <<: *common}}\n"
    text += "".join(tool.format(i) for i in range(1, 300))
    catalog = write_catalog(tmp_path, text)
    done = toolrun_cli("validate-catalog", str(catalog), env=clean_env(tmp_path / "home"), timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "300 tools" in done.stdout + done.stderr


@pytest.fixture
def admin_server(tmp_path: Path) -> tuple[ToolrunServer, Path, str]:
    catalog = write_catalog(tmp_path, SERVED)
    server = ToolrunServer(
        tmp_path, catalog, {"SVC_RELOAD_INTERVAL": "0", "SVC_WORKERS": "1", "SVC_SHUTDOWN_GRACE": "2"}
    )
    return server, catalog, create_key(server.env, "root", "admin")


def stop_and_time(server: ToolrunServer) -> tuple[int, float]:
    signalled = time.monotonic()
    server.send(signal.SIGTERM)
    try:
        code = server.wait(15)
    except Exception:
        pytest.fail(f"SIGTERM did not stop the server in 15 s:\n{server.log()[-3000:]}")
    return code, time.monotonic() - signalled


def test_an_alias_bomb_written_over_a_served_catalog_is_refused_on_reload(
    admin_server: tuple[ToolrunServer, Path, str],
) -> None:
    server, catalog, admin = admin_server
    with server.start():
        catalog.write_text(laughs())
        started = time.monotonic()
        answer = httpx.post(server.url + "/admin/reload", headers={"X-API-Key": admin}, timeout=60)
        took = time.monotonic() - started

        assert answer.status_code == 422, answer.text
        problems = answer.json()["problems"]
        assert [p for p in problems if p.startswith(f"{catalog}:{line_of(laughs(), 'a5:')}:")], problems
        assert took < 10, f"the reload answered in {took:.1f}s"
        assert httpx.post(server.url + "/tools/ops.one", json={}).text == "one"  # the old catalog serves
        assert server.rss_kib() < 400 * 1024
        code, stopped = stop_and_time(server)
    assert (code, stopped < 2 + 1 + 1.5) == (0, True), (code, stopped)
    assert "alias bomb" in server.log()


def test_sigterm_ends_the_server_within_its_grace_while_a_reload_hangs(
    admin_server: tuple[ToolrunServer, Path, str],
) -> None:
    server, catalog, admin = admin_server
    started = catalog.parent / "import-started"
    module = f"import pathlib, time\npathlib.Path({str(started)!r}).touch()\ntime.sleep(120)\n"
    (catalog.parent / "stuckmod.py").write_text(module + "def f() -> str:\n    return 'x'\n")
    outcome: dict[str, object] = {}

    def reload() -> None:
        try:
            outcome["answer"] = httpx.post(server.url + "/admin/reload", headers={"X-API-Key": admin}, timeout=60)
        except httpx.HTTPError as exc:
            outcome["error"] = exc

    with server.start():
        catalog.write_text(SERVED + "  - name: stuck\n    fn: stuckmod:f\n")
        caller = threading.Thread(target=reload, daemon=True)
        caller.start()
        wait_until(started.exists, 20, "the reload to reach the module that hangs")
        code, stopped = stop_and_time(server)
        caller.join(10)

    assert stopped < 2 + 1 + 1.5, f"the server took {stopped:.1f}s to stop with a 2 s grace:\n{server.log()[-3000:]}"
    assert code == 0, server.log()[-3000:]  # the reload was abandoned: a drain, not the hard stop
    answer = outcome.get("answer")
    assert answer is None or (isinstance(answer, httpx.Response) and answer.status_code != 200)


STUBBORN = """\
import asyncio, pathlib


async def stubborn() -> str:
    pathlib.Path({marker!r}).touch()
    while True:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            pass  # a careless tool that swallows its cancellation
"""


def test_sigterm_ends_the_server_a_second_after_its_grace_whatever_still_runs(tmp_path: Path) -> None:
    marker = tmp_path / "stubborn-started"
    (tmp_path / "stubbornmod.py").write_text(STUBBORN.format(marker=str(marker)))
    catalog = write_catalog(tmp_path, SERVED + "  - name: stubborn\n    public: true\n    fn: stubbornmod:stubborn\n")
    server = ToolrunServer(tmp_path, catalog, {"SVC_WORKERS": "1", "SVC_SHUTDOWN_GRACE": "1"})

    def call() -> None:
        try:
            httpx.post(server.url + "/tools/ops.stubborn", json={}, timeout=30)
        except httpx.HTTPError:
            pass

    with server.start():
        threading.Thread(target=call, daemon=True).start()
        wait_until(marker.exists, 20, "the stubborn tool to start")
        code, stopped = stop_and_time(server)

    assert stopped < 1 + 1 + 1.5, f"the server took {stopped:.1f}s to stop with a 1 s grace"
    assert code == 1
    assert "exiting now" in server.log()


# -- a catalog path that leads elsewhere (item 8) --------------------------------------------------------------

SHADOW = """\
root:$y$j9T$Q2hhbmdlTWUh$T0pTZWNyZXRIYXNoVmFsdWUxMjM0NTY3ODkw:20228:0:99999:7:::
daemon:*:20228:0:99999:7:::
alice:$6$rounds=5000$c2FsdHNhbHQ$SGFzaGVkUGFzc3dvcmRPZkFsaWNl:20228:0:99999:7:::
"""
NSSWITCH = "passwd:         files systemd\ngroup:          files systemd\nhosts:          files dns\n"
TAGGED = "password: !hunter2-secret value\n"  # a YAML tag no constructor knows: its error would quote it


@pytest.mark.parametrize(
    ("content", "word"),
    [(SHADOW, "Q2hhbmdlTWUh"), (NSSWITCH, "systemd"), (TAGGED, "hunter2"), ("!hunter2-secret x\n", "hunter2")],
    ids=["shadow", "nsswitch", "tagged-mapping", "tagged-scalar"],
)
def test_a_catalog_linked_to_a_system_file_is_named_never_quoted(tmp_path: Path, content: str, word: str) -> None:
    target = tmp_path / "etc" / "shadow"
    target.parent.mkdir()
    target.write_text(content)
    catalog = tmp_path / "tools.yaml"
    catalog.symlink_to(target)
    done = toolrun_cli("validate-catalog", str(catalog), env=clean_env(tmp_path / "home"), timeout=60)

    assert done.returncode == 1
    assert f"{catalog}:1:1: -: " in done.stdout and f"(a link to {target})" in done.stdout, done.stdout
    assert word not in done.stdout + done.stderr
    for line in content.splitlines():
        for field in line.split(":"):
            if len(field.strip()) > 5:
                assert field.strip() not in done.stdout + done.stderr, field


def test_a_reload_of_a_catalog_swapped_for_a_link_to_a_password_file_never_quotes_it(
    admin_server: tuple[ToolrunServer, Path, str],
) -> None:
    server, catalog, admin = admin_server
    target = catalog.parent / "shadow"
    target.write_text(SHADOW)
    with server.start():
        catalog.unlink()
        catalog.symlink_to(target)
        answer = httpx.post(server.url + "/admin/reload", headers={"X-API-Key": admin}, timeout=60)
        assert answer.status_code == 422, answer.text
        assert answer.json()["problems"] == [
            f"{catalog}:1:1: -: not a catalog file (a link to {target}): a catalog is a mapping with `tools:`, "
            "and this one has other top-level fields (its content is not shown)"
        ]
        assert httpx.post(server.url + "/tools/ops.one", json={}).text == "one"
    log = server.log()
    assert f"{catalog}:1:1: -: not a catalog file (a link to {target})" in log
    for secret in ("Q2hhbmdlTWUh", "T0pTZWNyZXRIYXNoVmFsdWUxMjM0NTY3ODkw", "SGFzaGVkUGFzc3dvcmRPZkFsaWNl", "99999:7"):
        assert secret not in answer.text and secret not in log, secret


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_catalog_path_to_a_fifo_or_a_device_is_refused_without_reading_it(tmp_path: Path, kind: str) -> None:
    catalog = tmp_path / "tools.yaml"
    if kind == "fifo":
        os.mkfifo(catalog)  # opening it for reading would wait for a writer forever
        expected = f"{catalog}:1:1: -: not a catalog file: a named pipe"
    else:
        catalog.symlink_to("/dev/zero")  # reading it would never end
        expected = f"{catalog}:1:1: -: not a catalog file: a character device (a link to /dev/zero)"
    done = toolrun_cli("validate-catalog", str(catalog), env=clean_env(tmp_path / "home"), timeout=20)
    assert done.returncode == 1 and expected in done.stdout, done.stdout


def test_a_catalog_file_over_the_size_limit_is_refused_unread(tmp_path: Path) -> None:
    catalog = write_catalog(tmp_path, SERVED)
    with catalog.open("r+b") as fh:
        fh.truncate(33 * 1024 * 1024)  # sparse: no disk used
    done = toolrun_cli("validate-catalog", str(catalog), env=clean_env(tmp_path / "home"), timeout=20)
    assert done.returncode == 1
    assert "bytes, more than the 33,554,432 bytes a catalog file may have" in done.stdout, done.stdout

"""A third look at the sandbox's walls (issue 34): attacks a hostile tool tried after the first red team's fixes were
merged, each driven as a tool would, with a real bwrap, through the real `toolrun` command, once with the server as
root and once as a user that is not root. Each test failed on the code before its fix.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from support import jails
from support.jails import Jail, need_root, said, toolrun_as
from test_sandbox_redteam import _pids_with, _start_call

# The sandbox fixtures (support/jails.py): `server` ("root", "user"), `base` (a folder every user may enter), `jail`.
server, base, jail = jails.server, jails.base, jails.jail


def _xdg(jail: Jail) -> dict[str, str]:
    """The server's environment without TOOLRUN_HOME: config, data and cache folders in three trees of its home."""
    home = jail.home
    return {
        "TOOLRUN_HOME": "",
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
    }


def test_a_writable_path_cannot_plant_toolruns_config_before_it_exists(jail: Jail) -> None:
    """A writable path that holds toolrun's own folders fails the call, but only where they existed: with no config
    folder yet (no config file: the usual case), a tool with `writable: [~/.config]` made ~/.config/toolrun/config.toml,
    which the (root) server read at its next start: any setting, `sandbox_default` off and a `catalog` of the tool's
    own writing included (its tools then run with no sandbox, as the server's user)."""
    config_home = jail.writable("home/.config")
    planted = config_home / "toolrun" / "config.toml"
    jail.write(
        f"group: t\ntools:\n  - name: plant\n    exec: mkdir -p {planted.parent} && "
        f"printf 'sandbox_default = \"planted\"\\n' > {planted} && echo PLANTED\n"
        f"    sandbox: {{writable: [{config_home}]}}\n"
    )
    done = toolrun_as(jail.server, jail.home, "call", "-c", str(jail.catalog), "t.plant", env=_xdg(jail))
    assert "PLANTED" not in done.stdout and not planted.exists(), said(done)
    assert done.returncode != 0 and "runs in a sandbox" in done.stderr, said(done)
    assert "toolrun" in done.stderr and "Traceback" not in said(done), said(done)
    again = toolrun_as(jail.server, jail.home, "validate-catalog", str(jail.catalog), env=_xdg(jail))
    assert "planted" not in said(again), said(again)


def test_a_tool_holding_processes_does_not_starve_other_calls_with_a_process_limit(jail: Jail) -> None:
    """`limits.processes` was RLIMIT_NPROC set before bwrap, which counts every process of the user on the host: all
    of a root server's sandboxed tools run as `nobody`, so one call that kept a dozen processes alive made every
    other call with `limits.processes: 8` fail ("Creating new namespace failed: Resource temporarily unavailable").
    The limit now counts the call's own processes (set inside the sandbox's user namespace)."""
    marker = f"{uuid.uuid4().int % 10**6}.25"
    hog = "; ".join(f"sleep {marker} &" for _ in range(12)).replace("&;", "&") + " wait"
    jail.write(
        f"group: t\ntools:\n  - name: hog\n    exec: {hog!r}\n    sandbox: true\n    timeout: 60\n"
        "  - name: victim\n    exec: sleep 0.1 & sleep 0.1 & wait; echo DONE\n    limits: {processes: 8}\n"
        "    sandbox: true\n  - name: bomb\n    exec: for i in 1 2 3 4 5 6 7 8 9 10; do sleep 3 & done; wait\n"
        "    limits: {processes: 8}\n    sandbox: true\n"
    )
    call = _start_call(jail, "t.hog")
    try:
        deadline = time.monotonic() + 20
        while len(_pids_with(f"sleep\0{marker}")) < 12 and time.monotonic() < deadline:
            assert call.poll() is None, "the hog ended before its processes started"
            time.sleep(0.05)
        assert len(_pids_with(f"sleep\0{marker}")) == 12, "the hog never started its processes"
        done = jail.call("t.victim")
        assert done.returncode == 0 and "DONE" in done.stdout, said(done)
        bomb = jail.call("t.bomb")  # the limit still holds within a call
        assert "fork" in bomb.stderr.lower() or bomb.returncode != 0, said(bomb)
    finally:
        call.send_signal(signal.SIGKILL)
        call.wait(10)
        deadline = time.monotonic() + 5
        while _pids_with(f"sleep\0{marker}") and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in _pids_with(f"sleep\0{marker}"):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def etc_folder(jail: Jail) -> Iterator[Path]:
    """A folder under /etc, the server user's, where the docs' deployment keeps its catalog (/etc/toolrun)."""
    import shutil

    need_root()
    folder = Path("/etc") / f"toolrun-redteam-{uuid.uuid4().hex[:10]}"
    folder.mkdir(mode=0o700)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_catalog_and_env_files_under_etc_are_hidden_from_every_sandbox(jail: Jail, etc_folder: Path) -> None:
    """Every sandbox shows the host's /etc, where the docs keep the catalog (/etc/toolrun/catalog.d): toolrun covered
    its catalog and env files only inside a `readable` path or the `cwd`, so a tool of a server whose user owns
    them (the docs' `User=toolrun`; a root server's 0644 files) read every other tool's `env:` values and the env
    file's secrets from /etc."""
    from support.jails import unprivileged

    env_file = etc_folder / "secret.env"
    env_file.write_text("API_TOKEN=s3cret-from-the-env-file\n")
    catalog = etc_folder / "tools.yaml"
    catalog.write_text(
        "group: t\ntools:\n  - name: peek\n"
        f"    exec: cat {env_file} {catalog} {etc_folder}/config.toml; ls {etc_folder}; echo END\n"
        "    env_file: secret.env\n    env: {OTHER: inline-s3cret-of-the-catalog}\n    sandbox: true\n"
    )
    (etc_folder / "config.toml").write_text('# the config file\nredis_url = "redis://:s3cret-config@x"\n')
    owner = unprivileged() if jail.server == "user" else (0, 0)
    for path in (etc_folder, env_file, catalog, etc_folder / "config.toml"):
        os.chown(path, *owner)
        path.chmod(0o700 if path.is_dir() else 0o644 if jail.server == "root" else 0o600)
    if jail.server == "root":
        etc_folder.chmod(0o755)
    config = {"SVC_CONFIG": str(etc_folder / "config.toml")}
    done = toolrun_as(jail.server, jail.home, "call", "-c", str(catalog), "t.peek", env=config)
    assert "END" in done.stdout, said(done)  # the tool ran
    assert "s3cret" not in done.stdout, said(done)


def test_a_writable_path_cannot_add_a_catalog_file_to_a_catalog_folder(jail: Jail) -> None:
    """A catalog folder (`-c DIR`, `catalog = ["/etc/toolrun/catalog.d"]`) loads every *.yaml in it. Only the catalog
    files loaded were toolrun's own: a folder with none yet (or a `writable` path above one) could be a tool's
    `writable` path, and the tool added a catalog file whose tools ran with no sandbox at the next load."""
    folder = jail.writable("catalog.d")
    planted = folder / "planted.yaml"
    payload = "group: x\\ntools:\\n  - name: out\\n    exec: echo ESCAPED\\n"
    jail.write(
        f"group: t\ntools:\n  - name: plant\n    exec: |\n      printf '{payload}' > {planted} && echo PLANTED\n"
        f"    sandbox: {{writable: [{folder}]}}\n  - name: here\n    exec: echo HERE\n    cwd: {folder}\n"
        "    sandbox: true\n"
    )
    here = jail.call("t.here", "-c", str(folder))  # reading it stays allowed: the folder's catalog files are covered
    assert "HERE" in here.stdout, said(here)
    done = jail.call("t.plant", "-c", str(folder))
    assert "PLANTED" not in done.stdout and not planted.exists(), said(done)
    assert done.returncode != 0 and "runs in a sandbox" in done.stderr and "Traceback" not in said(done), said(done)
    again = toolrun_as(jail.server, jail.home, "call", "-c", str(jail.catalog), "-c", str(folder), "x.out")
    assert "ESCAPED" not in again.stdout, said(again)


def test_a_tool_cannot_pass_its_own_run_off_as_a_sandbox_that_never_started(jail: Jail) -> None:
    """A tool that prints the bound-path check's line and exits 125, after doing its work, is reported (and logged) as
    a sandbox that could not be set up: "it was not run"."""
    out = jail.writable("out")
    jail.write(
        "group: t\ntools:\n  - name: spoof\n    exec: |\n"
        f"      echo done > {out}/work\n"
        "      echo 'toolrun: a bound path changed while the sandbox was set up' >&2; exit 125\n"
        f"    sandbox: {{writable: [{out}]}}\n"
    )
    done = jail.call("t.spoof")
    assert (out / "work").exists(), said(done)  # it ran
    assert "it was not run" not in done.stderr, said(done)

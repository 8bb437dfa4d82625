"""Walls that hold (issue 34): each attack a hostile sandboxed tool tried, driven as a tool would, with a real bwrap,
through the real `toolrun` command, once with the server as root and once as a user that is not root.

A root server's sandboxed tools run as `nobody` (docs/security.md): the folders here are reachable by every user,
and a tool's writable folder belongs to the user its calls run as.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from support import jails
from support.binaries import require_binary
from support.jails import Jail, said, toolrun_as, unprivileged

# The sandbox fixtures (support/jails.py): `server` ("root", "user"), `base` (a folder every user may enter), `jail`.
server, base, jail = jails.server, jails.base, jails.jail


# -- item 1: no jail holds real root ---------------------------------------------------------------------------


def test_a_tool_cannot_write_host_sysctls(jail: Jail) -> None:
    # Writes each knob's own value back: harmless if it worked, which is what the test shows it does not.
    jail.write("""\
group: t
tools:
  - name: knob
    exec: |
      v=$(cat /proc/sys/kernel/core_pattern)
      printf '%s\\n' "$v" 2>&1 > /proc/sys/kernel/core_pattern && echo WROTE
      echo 0 2>&1 > /proc/sysrq-trigger && echo SYSRQ
      find /proc/sys -type f -writable | wc -l
      id -u
    sandbox: true
""")
    done = jail.call("t.knob")
    assert "WROTE" not in said(done) and "SYSRQ" not in said(done)
    assert done.stdout.split()[-2] == "0"  # no writable knob at all
    assert done.stdout.split()[-1] != "0"  # never uid 0 in the jail


def test_a_root_servers_tool_holds_no_root_on_files(jail: Jail) -> None:
    """Root-only files stay closed, a setuid program planted is not root's, and `limits.processes` binds."""
    secret = jail.base / "ro" / "secret"
    secret.parent.mkdir()
    secret.write_text("root only\n")
    os.chmod(secret, 0o600)
    out = jail.writable("out")
    command = f"cat {secret} || echo DENIED; cp /bin/sh {out}/sh && chmod 4755 {out}/sh; id -u"
    forks = "for i in 1 2 3 4 5 6 7 8 9 10 11 12; do sleep 2 & done 2>&1 | head -1; wait"
    jail.write(
        f"group: t\ntools:\n  - name: root\n    exec: {command!r}\n    sandbox: {{readable: [{secret.parent}], "
        f"writable: [{out}]}}\n  - name: forks\n    exec: {forks!r}\n    limits: {{processes: 4}}\n    sandbox: true\n"
    )
    done = jail.call("t.root")
    assert "root only" not in said(done) and "DENIED" in said(done)
    planted = out / "sh"
    if planted.exists():
        st = planted.stat()
        assert not (st.st_uid == 0 and st.st_mode & stat.S_ISUID)
    forked = jail.call("t.forks")
    assert "fork" in said(forked).lower() or "resource" in said(forked).lower(), said(forked)


# -- item 2: bind what was checked ------------------------------------------------------------------------------


def _swap_catalog(shared: Path, target: str, bound: str) -> str:
    """Tool `swap` may write `shared`; it turns `shared/dir` into a link to `target`. Tool `victim` binds
    `shared/dir` as `bound` (readable or writable) and lists or writes it."""
    return f"""\
group: t
tools:
  - name: swap
    exec: rm -rf {shared}/dir && ln -s {target} {shared}/dir && echo swapped
    sandbox: {{writable: [{shared}]}}
  - name: victim
    exec: ls {shared}/dir; touch {shared}/dir/planted && echo PLANTED
    sandbox: {{{bound}: [{shared}/dir]}}
"""


def test_a_readable_path_swapped_for_a_link_to_root_is_refused(jail: Jail) -> None:
    shared = jail.writable("shared")
    jail.writable("shared/dir")
    jail.write(_swap_catalog(shared, "/", "readable"))
    assert "PLANTED" not in jail.call("t.victim").stdout  # before the swap: an empty folder, read-only
    assert "swapped" in jail.call("t.swap").stdout
    done = jail.call("t.victim")
    assert done.returncode != 0
    assert "symbolic link" in done.stderr, said(done)
    assert "etc" not in done.stdout.split() and "home" not in done.stdout.split()  # never the host's /


def test_a_writable_path_swapped_for_a_link_into_toolruns_data_is_refused(jail: Jail) -> None:
    data = jail.home / "data"
    data.mkdir(parents=True)
    if jail.server == "user" and os.geteuid() == 0:
        for path in (jail.home, data):
            os.chown(path, *unprivileged())
    shared = jail.writable("shared")
    jail.writable("shared/dir")
    jail.write(_swap_catalog(shared, str(data), "writable"))
    assert "swapped" in jail.call("t.swap").stdout
    done = jail.call("t.victim")
    assert done.returncode != 0 and "PLANTED" not in done.stdout
    assert not (data / "planted").exists()
    assert "symbolic link" in done.stderr, said(done)


def test_validate_catalog_warns_about_a_path_under_another_tools_writable_path(jail: Jail) -> None:
    shared = jail.writable("shared")
    jail.writable("shared/dir")
    jail.write(_swap_catalog(shared, "/", "readable"))
    done = jail.validate()
    assert f"under tool t.swap's writable path {shared}" in said(done), said(done)


# -- the weak items ----------------------------------------------------------------------------------------------


def test_a_readable_root_or_proc_is_refused_at_load(jail: Jail) -> None:
    for path in ("/", "/proc", "/tmp"):
        jail.write(f"group: t\ntools:\n  - name: wide\n    exec: ls /proc\n    sandbox: {{readable: [{path}]}}\n")
        done = jail.validate()
        assert done.returncode != 0
        assert f"its sandbox may not bind {path} would lay the host's" in said(done), said(done)


def test_catalog_and_env_files_beside_the_cwd_are_hidden(jail: Jail) -> None:
    (jail.base / "cat").mkdir()
    (jail.base / "cat" / "secrets.env").write_text("OTHER_TOKEN=hunter2-env\n")
    (jail.base / "cat" / "input.txt").write_text("data\n")
    jail.write(
        "group: t\ntools:\n  - name: peek\n    exec: cat input.txt; cat tools.yaml; cat secrets.env\n    cwd: .\n"
        "    sandbox: true\n  - name: other\n    exec: echo $OTHER_TOKEN\n    env_file: secrets.env\n"
        "    env: {INLINE: hunter2-inline}\n"
    )
    for path in (jail.base / "cat").iterdir():
        path.chmod(0o644)
    done = jail.call("t.peek")
    assert "data" in done.stdout  # the cwd itself is there
    assert "hunter2" not in said(done) and "OTHER_TOKEN" not in said(done)


def test_tmp_has_a_finite_default_size_and_proc_hides_the_boot_arguments(jail: Jail) -> None:
    jail.write(
        "group: t\ntools:\n  - name: look\n    exec: df -k /tmp | tail -1; cat /proc/cmdline | wc -c\n"
        "    sandbox: true\n"
    )
    done = jail.call("t.look")
    lines = done.stdout.splitlines()
    assert lines[0].split()[1] == str(64 * 1024), said(done)  # 64 MiB, not half the RAM
    assert lines[1].strip() == "0"
    assert Path("/proc/cmdline").read_text().strip()  # the host has boot arguments to hide


def test_a_cwd_that_is_a_writable_path_stays_writable(jail: Jail) -> None:
    work = jail.writable("work")
    jail.write(
        f"group: t\ntools:\n  - name: build\n    exec: touch made && echo made\n    cwd: {work}\n"
        f"    sandbox: {{writable: [{work}]}}\n"
    )
    done = jail.call("t.build")
    assert done.stdout == "made\n", said(done)
    assert (work / "made").exists()


# -- found attacking the walls above ------------------------------------------------------------------------------


def test_a_profile_path_with_a_nul_byte_is_a_clear_load_error(jail: Jail) -> None:
    jail.write('group: t\ntools:\n  - name: a\n    exec: ls\n    sandbox: {readable: ["/tmp/a\\0b"]}\n')
    done = jail.validate()
    assert done.returncode == 1 and "Traceback" not in said(done)
    assert "holds a NUL byte" in said(done), said(done)


_SWAPPING_BWRAP = """\
#!/usr/bin/python3
# bwrap 0.8 turns --ro-bind-fd back into the descriptor's name and mounts that name: this one mounts what a name
# swapped in that window would show (the decoy), as a racing tool could make it do.
import os, sys
argv, out, i = sys.argv[1:], [], 0
while i < len(argv):
    if argv[i] in ("--ro-bind-fd", "--bind-fd"):
        out += ["--ro-bind", {decoy!r}, argv[i + 2]]
        i += 3
    elif argv[i] == "--":
        out += argv[i:]
        break
    else:
        out.append(argv[i])
        i += 1
os.execv({real!r}, [{real!r}, *out])
"""


def test_a_bound_path_mounted_as_another_object_stops_the_call_before_the_command(jail: Jail) -> None:
    real = require_binary("bwrap")
    decoy = jail.base / "decoy"
    decoy.mkdir()
    (decoy / "host-secret").write_text("not for this tool\n")
    fake = jail.base / "fakebin"
    fake.mkdir()
    (fake / "bwrap").write_text(_SWAPPING_BWRAP.format(decoy=str(decoy), real=real))
    (fake / "bwrap").chmod(0o755)
    data = jail.base / "data"
    data.mkdir()
    text = f"group: t\ntools:\n  - name: read\n    exec: ls {data}; echo RAN\n    sandbox: {{readable: [{data}]}}\n"
    jail.write(text)
    done = toolrun_as(
        jail.server, jail.home, "call", "-c", str(jail.catalog), "t.read", env={"PATH": f"{fake}:{os.environ['PATH']}"}
    )
    assert "RAN" not in done.stdout and "host-secret" not in done.stdout
    assert done.returncode != 0
    assert "a bound path changed while the sandbox was set up" in done.stderr, said(done)


def test_no_descriptor_of_a_bound_path_reaches_the_tool(jail: Jail) -> None:
    """An O_PATH descriptor of a readable folder would let the tool write there through /proc/self/fd/N (the host's
    mount, not the jail's read-only one): none may be open when the command starts."""
    data = jail.writable("data")
    work = jail.writable("work")
    jail.write(
        f"group: t\ntools:\n  - name: fds\n    exec: ls /proc/self/fd | sort -n | tr '\\n' ' '\n    cwd: {work}\n"
        f"    sandbox: {{readable: [{data}], writable: [{jail.writable('out')}]}}\n"
    )
    done = jail.call("t.fds")
    assert done.returncode == 0, said(done)
    assert done.stdout.split() == ["0", "1", "2", "3"], said(done)  # stdin, stdout, stderr, and ls's own


def test_odd_path_names_are_bound_and_checked_as_they_are(jail: Jail) -> None:
    odd = jail.base / "a'b $(touch pwned) \\ c"
    odd.mkdir()
    (odd / "inside").write_text("found\n")
    jail.write(
        f"group: t\ntools:\n  - name: odd\n    exec: cat *b*/inside\n    cwd: ..\n    sandbox:\n"
        f"      readable: [{json_quote(str(odd))}]\n"
    )
    done = jail.call("t.odd")
    assert done.stdout == "found\n", said(done)
    assert not any(p.name == "pwned" for p in jail.base.rglob("pwned"))


def json_quote(text: str) -> str:
    import json

    return json.dumps(text)


def test_a_cwd_swapped_for_a_link_is_refused(jail: Jail) -> None:
    shared = jail.writable("shared")
    jail.writable("shared/dir")
    jail.write(
        f"group: t\ntools:\n  - name: swap\n    exec: rm -rf {shared}/dir && ln -s / {shared}/dir\n"
        f"    sandbox: {{writable: [{shared}]}}\n  - name: victim\n    exec: ls\n    cwd: {shared}/dir\n"
        "    sandbox: true\n"
    )
    jail.call("t.swap")
    done = jail.call("t.victim")
    assert done.returncode != 0 and "etc" not in done.stdout.split()
    assert "symbolic link" in done.stderr, said(done)


def test_six_bound_paths_work_and_a_seventh_is_refused_by_name(jail: Jail) -> None:
    """The shell checks each bound path with a descriptor of its own, 4 to 9 (dash takes one digit; 3 is the check's
    own channel)."""
    paths = [jail.writable(f"p{i}") for i in range(7)]
    listed = ", ".join(str(p) for p in paths[:6])
    jail.write(
        f"group: t\ntools:\n  - name: six\n    exec: ls /proc/self/fd | wc -l; touch {paths[5]}/x && echo ok\n"
        f"    sandbox: {{writable: [{listed}]}}\n  - name: seven\n    exec: echo ran\n"
        f"    sandbox: {{writable: [{listed}, {paths[6]}]}}\n"
    )
    done = jail.call("t.six")
    assert done.stdout.split() == ["4", "ok"], said(done)
    seven = jail.call("t.seven")
    assert "ran" not in seven.stdout and "binds 7 paths" in seven.stderr and "at most 6" in seven.stderr, said(seven)


_RACING_BWRAP = """\
#!/usr/bin/python3
# A racing tool's move, between toolrun's check and bwrap's mount: the checked folder moved away, a link to /
# left at its name.
import os, sys
os.rename({data!r}, {data!r} + ".moved")
os.symlink("/", {data!r})
os.execv({real!r}, [{real!r}, *sys.argv[1:]])
"""


def test_a_link_swapped_in_after_the_check_binds_the_checked_folder_not_the_link(jail: Jail) -> None:
    real = require_binary("bwrap")
    jail.writable("shared")  # the racing tool may write here
    data = jail.writable("shared/data")
    (data / "mine").write_text("checked\n")
    fake = jail.base / "fakebin"
    fake.mkdir()
    (fake / "bwrap").write_text(_RACING_BWRAP.format(data=str(data), real=real))
    (fake / "bwrap").chmod(0o755)
    jail.write(f"group: t\ntools:\n  - name: read\n    exec: ls {data}\n    sandbox: {{readable: [{data}]}}\n")
    done = toolrun_as(
        jail.server, jail.home, "call", "-c", str(jail.catalog), "t.read", env={"PATH": f"{fake}:{os.environ['PATH']}"}
    )
    assert done.stdout.split() == ["mine"], said(done)  # the folder that was checked, never the host's /


def test_a_writable_path_holding_the_catalog_and_a_readable_env_file_are_refused(jail: Jail) -> None:
    """A tool that could rewrite the catalog could drop its own sandbox at the next reload; one that reads an env
    file reads other tools' secrets."""
    folder = jail.writable("cat")
    (folder / "secrets.env").write_text("TOKEN=hunter2\n")
    jail.write(
        f"group: t\ntools:\n  - name: rewrite\n    exec: echo ran\n    sandbox: {{writable: [{folder}]}}\n"
        f"  - name: peek\n    exec: cat {folder}/secrets.env\n    sandbox: {{readable: [{folder}/secrets.env]}}\n"
        "  - name: other\n    exec: echo $TOKEN\n    env_file: secrets.env\n"
    )
    for path in folder.iterdir():
        path.chmod(0o644)
    rewrite = jail.call("t.rewrite")
    assert "ran" not in rewrite.stdout and f"{folder} holds toolrun's own {folder}/" in rewrite.stderr, said(rewrite)
    peek = jail.call("t.peek")
    assert "hunter2" not in said(peek) and "toolrun's own" in peek.stderr, said(peek)


def test_a_catalog_file_reached_through_a_link_is_hidden_where_it_really_is(jail: Jail) -> None:
    real = jail.base / "real"
    real.mkdir()
    (real / "tools.yaml").write_text(
        f"group: t\ntools:\n  - name: peek\n    exec: cat {real}/tools.yaml || echo HIDDEN\n"
        f"    env: {{TOKEN: hunter2}}\n    sandbox: {{readable: [{real}]}}\n"
    )
    (real / "tools.yaml").chmod(0o644)
    (jail.base / "cat").mkdir()
    jail.catalog.symlink_to(real / "tools.yaml")
    done = jail.call("t.peek")
    assert "hunter2" not in said(done) and "HIDDEN" in done.stdout, said(done)


@pytest.mark.parametrize("openat2", [True, False], ids=["openat2", "walk"])
def test_opening_a_bound_path_refuses_links_dots_and_nul_bytes(
    base: Path, openat2: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both ways of opening (openat2, and the O_PATH|O_NOFOLLOW walk of kernels without it) refuse a link anywhere
    in the path, a path that is not absolute and normalized, and a NUL byte."""
    import errno

    from toolrun.exec import sandboxpaths

    monkeypatch.setattr(sandboxpaths, "_HAS_OPENAT2", [openat2])
    (base / "real" / "inner").mkdir(parents=True)
    (base / "link").symlink_to(base / "real")
    fd = sandboxpaths.open_nofollow(str(base / "real" / "inner"))
    assert os.path.samestat(os.fstat(fd), os.stat(base / "real" / "inner"))
    os.close(fd)
    for path, code in (
        (f"{base}/link/inner", errno.ELOOP),
        (f"{base}/link", errno.ELOOP),
        (f"{base}/real/../real/inner", errno.EINVAL),
        ("real/inner", errno.EINVAL),
        (f"{base}/real\0/inner", errno.EINVAL),
    ):
        with pytest.raises(OSError) as caught:
            sandboxpaths.open_nofollow(path)
        assert caught.value.errno == code, path

"""A fourth red team on the sandbox's walls (issue 34's "fresh red team"): attacks a hostile tool tried after the
first three red teams' fixes were merged, each driven as a tool would, with a real bwrap, through the real `toolrun`
command, once with the server as root and once as a user that is not root. Each test failed on the code before its
fix.
"""

from __future__ import annotations

import json
import stat

from support import jails
from support.jails import Jail, said

# The sandbox fixtures (support/jails.py): `server` ("root", "user"), `base` (a folder every user may enter), `jail`.
server, base, jail = jails.server, jails.base, jails.jail


def test_a_tool_cannot_plant_a_setuid_or_setgid_program_in_a_writable_path(jail: Jail) -> None:
    """A `writable` path is a folder on the host. A tool copied /bin/sh there and made it setuid (chmod 4755, or
    created it with that mode): a program of the tool's user that any local user could run as that user, outside
    every sandbox. Under a server that is not root that user is the server's own: `out/sh -p` run by `nobody` had
    euid toolrun-test and listed the key store's folder. (bwrap's nosuid mounts hold inside the jail only.) The
    filter now refuses a mode with S_ISUID or S_ISGID in chmod, fchmod, fchmodat, open, openat, creat and mknod."""
    out = jail.writable("out")
    command = (
        f"cp /bin/sh {out}/sh; chmod 4755 {out}/sh; chmod 2755 {out}/sh; "
        f"python3 -c \"import os; os.close(os.open('{out}/py', os.O_CREAT | os.O_WRONLY, 0o6755))\"; "
        f"cp /bin/sh {out}/gsh && chmod g+s {out}/gsh; echo DONE"
    )
    jail.write(
        f"group: t\ntools:\n  - name: plant\n    exec: {json.dumps(command)}\n    sandbox: {{writable: [{out}]}}\n"
    )
    done = jail.call("t.plant")
    assert "DONE" in done.stdout, said(done)
    assert (out / "sh").exists(), said(done)  # the copy itself is allowed, only the mode is not
    planted = {p.name: oct(p.stat().st_mode) for p in out.iterdir() if p.stat().st_mode & (stat.S_ISUID | stat.S_ISGID)}
    assert planted == {}, f"setuid or setgid files planted on the host: {planted}\n{said(done)}"
    assert "Operation not permitted" in done.stderr, said(done)


def test_a_bound_path_turned_into_a_link_before_a_load_is_refused_not_followed(jail: Jail) -> None:
    """Profile paths and `cwd` were resolved at load (Path.resolve follows links), and only the call refused a link.
    A tool that may write a folder turned another tool's `readable` and `cwd` path there into a link to a folder no
    profile binds; at the next load that read the catalog again (any edit of it, a restart without the cache), the
    other tool's sandbox bound the link's target, and `cat *` in its cwd printed it (under a server that is not root,
    a 0700 folder of the server's user, its ~/.ssh say). Now the paths are kept by name and the call refuses the
    link, and validate-catalog still sees that one tool's path lies under the other's writable path."""
    shared = jail.writable("shared")
    jail.writable("shared/in")
    secret = jail.base / "secret"
    secret.mkdir()
    (secret / "id_rsa").write_text("PRIVATE-KEY-OUTSIDE-EVERY-PROFILE\n")
    text = (
        "group: t\ntools:\n"
        f"  - name: swap\n    exec: rm -rf {shared}/in && ln -s {secret} {shared}/in && echo SWAPPED\n"
        f"    sandbox: {{writable: [{shared}]}}\n"
        f"  - name: list\n    exec: cat *\n    cwd: {shared}/in\n    sandbox: {{readable: [{shared}/in]}}\n"
    )
    jail.write(text)
    assert "SWAPPED" in jail.call("t.swap").stdout
    jail.write(text + "# edited by the operator: the next load reads the file again\n")
    done = jail.call("t.list")
    assert "PRIVATE-KEY" not in said(done), said(done)
    assert done.returncode != 0 and "symbolic link" in done.stderr, said(done)
    assert "under tool t.swap's writable path" in said(jail.validate())


def test_a_writable_path_cannot_rewrite_the_code_of_an_fn_tool(jail: Jail) -> None:
    """The catalog files and env files were toolrun's own (hidden, and a writable path holding one fails the call),
    but not the Python module of an fn tool, which the server imports and runs in its own process, unsandboxed. A
    sandboxed tool whose `writable` path held that module rewrote it, and the next `toolrun call` of the fn tool ran
    the tool's code as the server's user (uid 0 under a root server). Now every file the tools were built from (an
    fn tool's source, an output schema) is toolrun's own, as the catalog file is."""
    lib = jail.writable("cat/lib")
    (lib / "__init__.py").write_text("")
    (lib / "mod.py").write_text('def hello() -> str:\n    return "hello"\n')
    jail.home.mkdir(parents=True, exist_ok=True)
    marker = jail.home / "PWNED"
    payload = f'import os\\nopen("{marker}", "w").write(str(os.getuid()))\\ndef hello() -> str:\\n    return "owned"\\n'
    jail.write(
        "group: t\ntools:\n  - name: hello\n    fn: lib.mod:hello\n"
        f"  - name: writer\n    exec: rm -f {lib}/mod.py && printf '{payload}' > {lib}/mod.py && echo WROTE\n"
        f"    sandbox: {{writable: [{lib}]}}\n"
    )
    assert jail.call("t.hello").stdout.strip() == "hello"
    wrote = jail.call("t.writer")
    again = jail.call("t.hello")
    assert not marker.exists(), f"the server ran the sandboxed tool's code as uid {marker.read_text()}"
    assert again.stdout.strip() == "hello", said(again)
    assert "WROTE" not in wrote.stdout and "holds toolrun's own" in wrote.stderr, said(wrote)


def test_validate_catalog_warns_of_an_unsandboxed_cwd_under_a_sandboxed_writable_path(jail: Jail) -> None:
    """Weak, not broken: a sandboxed tool may write a folder where a tool without a sandbox runs (`cwd:`), and so
    choose the script or Makefile that tool runs, outside any sandbox. validate-catalog said nothing; it warns now."""
    work = jail.writable("work")
    jail.write(
        f"group: t\ntools:\n  - name: a\n    exec: echo hi > {work}/run.sh\n    sandbox: {{writable: [{work}]}}\n"
        f"  - name: b\n    exec: sh ./run.sh\n    cwd: {work}\n"
    )
    done = jail.validate()
    assert f"t.b: warning: it runs without a sandbox in {work}, under sandboxed tool t.a's writable path" in said(done)

"""Red team 10 on a second name of an env file (issue 34, an old weak point: "a hard link to an env file in a bound
folder that is not copied").

toolrun hides its catalog and env files from every sandbox by name (and where a link leads): a folder that holds
one is shown as a copy without it. A hard link is the same file under another name, in another folder; a sandbox
that binds that folder shows it, other tools' `env:` values and all (the kernel will not tell which folders hold
the other names of a file, short of reading every folder a call binds at every call). Nothing said so: a deploy
tool that hard-links releases (`cp -al`, `rsync --link-dest`) or an operator's backup put an env file's secrets
in front of a sandboxed tool without a word. validate-catalog (and `serve`, at start and each reload) now warns
of every catalog or env file with more than one name while the catalog has sandboxed tools.
"""

from __future__ import annotations

import os

from support import jails
from support.jails import Jail, said

server, base, jail = jails.server, jails.base, jails.jail


def test_an_env_file_with_a_second_name_is_warned_of(jail: Jail) -> None:
    """On the code before the fix validate-catalog said nothing, and the sandboxed tool read the secret."""
    data = jail.base / "data"
    data.mkdir(mode=0o755)
    jail.write(
        "group: t\ntools:\n"
        f"  - name: reader\n    public: true\n    exec: cat {data}/copy.env\n    sandbox: {{readable: [{data}]}}\n"
        "  - name: other\n    public: true\n    exec: echo $RT10_TOKEN\n    env_file: secrets.env\n"
    )
    env = jail.catalog.parent / "secrets.env"
    env.write_text("RT10_TOKEN=rt10-secret-value\n")
    env.chmod(0o644)
    os.link(env, data / "copy.env")
    done = jail.validate()
    text = said(done)
    assert f"{os.path.realpath(env)} has 2 names" in text, text
    assert done.returncode == 0, text  # a warning: the catalog is valid
    # what it warns of: the other name is shown in a sandbox that binds its folder
    assert "rt10-secret-value" in said(jail.call("t.reader"))

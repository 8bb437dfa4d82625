"""completions/: the committed scripts match the Typer app, and the app answers their protocol."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from support.binaries import require_binary

ROOT = Path(__file__).resolve().parent.parent
COMPLETIONS = ROOT / "completions"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("toolrun_completions_generate", COMPLETIONS / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_committed_completion_script_matches_the_app(shell: str) -> None:
    generate = _generator()
    path = COMPLETIONS / generate.FILES[shell]
    assert path.is_file(), f"{path} is missing: run `make completions`"
    expected = generate.script(shell)
    assert path.read_text(encoding="utf-8") == expected, f"{path} is stale: run `make completions`"


def test_every_script_names_the_toolrun_program_and_its_complete_variable() -> None:
    generate = _generator()
    for name in generate.FILES.values():
        text = (COMPLETIONS / name).read_text(encoding="utf-8")
        assert "_TOOLRUN_COMPLETE=complete_" in text, name
        assert "toolrun" in text, name


def test_zsh_script_is_named_for_fpath_autoload() -> None:
    text = (COMPLETIONS / "_toolrun").read_text(encoding="utf-8")
    assert text.startswith("#compdef toolrun")


def test_generation_leaves_shell_detection_setting_untouched() -> None:
    before = os.environ.get("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION")
    _generator().script("bash")
    assert os.environ.get("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION") == before


def _toolrun_bin() -> Path:
    path = Path(sys.executable).parent / "toolrun"
    assert path.is_file(), f"console script missing next to {sys.executable}: pip install -e ."
    return path


def test_bash_script_completes_subcommands_through_the_installed_command(tmp_path: Path) -> None:
    bash = shutil.which("bash")
    assert bash is not None
    script = COMPLETIONS / "toolrun.bash"
    probe = (
        f"source {script}\n"
        "COMP_WORDS=(toolrun val); COMP_CWORD=1\n"
        "_toolrun_completion toolrun\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    env = {**os.environ, "PATH": f"{_toolrun_bin().parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        [bash, "--norc", "--noprofile", "-c", probe], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["validate-catalog"]


def test_zsh_protocol_lists_matching_subcommands() -> None:
    env = {**os.environ, "_TOOLRUN_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": "toolrun des"}
    done = subprocess.run([str(_toolrun_bin())], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "describe" in done.stdout
    assert "validate-catalog" not in done.stdout


def test_fish_protocol_lists_options_of_call() -> None:
    env = {
        **os.environ,
        "_TOOLRUN_COMPLETE": "complete_fish",
        "_TYPER_COMPLETE_FISH_ACTION": "get-args",
        "_TYPER_COMPLETE_ARGS": "toolrun call --dr",
    }
    done = subprocess.run([str(_toolrun_bin())], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("--dry-run")


# -- tool keys, params and values, through a real interactive bash -----------------------------

COMPLETION_CATALOG = """\
group: ops
tools:
  - name: disk_usage
    description: Report the **disk** usage of a path.
    exec: du -sh -- {{ path | quote }}
    params:
      - {name: path, type: str, description: Where to look}
      - {name: unit, type: str, enum: [kilo, mega, giga], default: kilo}
      - {name: deep, type: bool, default: false}
  - name: restart
    exec: echo restart {{ service | quote }}
    params:
      - {name: service, type: str}
"""


class Pty:
    """An interactive `bash --norc` in a pseudo-terminal, with completions/toolrun.bash sourced."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        import pty

        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: become bash
            os.chdir(cwd)
            os.execvpe("bash", ["bash", "--norc", "--noprofile", "-i"], env)
        self.count = 0
        self.run(f"source {COMPLETIONS / 'toolrun.bash'}; bind 'set bell-style none'")

    def read_until(self, marker: str, timeout: float = 30.0) -> str:
        import select
        import time

        out = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.fd], [], [], 0.1)
            if ready:
                try:
                    out += os.read(self.fd, 65536)
                except OSError:
                    break
                for line in out.decode(errors="replace").replace("\r", "").split("\n"):
                    if line.startswith(marker):
                        return line[len(marker) :]
        raise TimeoutError(f"no {marker!r} from bash; got {out[-2000:]!r}")

    def run(self, command: str) -> str:
        self.count += 1
        marker = f"DONE{self.count}:"
        os.write(self.fd, f"{command}; echo {marker}$?\n".encode())
        return self.read_until(marker)

    def complete(self, typed: str) -> str:
        """Type `typed`, press TAB, and return the command line as bash completed it."""
        self.count += 1
        marker = f"LINE{self.count}:"
        # TAB completes; Ctrl-A, `echo MARK'`, Ctrl-E, `'`, Enter prints the completed line verbatim.
        os.write(self.fd, f"{typed}\t\x01echo {marker}'\x05'\n".encode())
        return self.read_until(marker)

    def close(self) -> None:
        import signal

        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        os.close(self.fd)


@pytest.fixture
def bash_pty(tmp_path: Path) -> Any:
    require_binary("bash")
    (tmp_path / "tools.yaml").write_text(COMPLETION_CATALOG, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SVC_") and k != "TOOLRUN_URL"}
    env.update(PATH=f"{_toolrun_bin().parent}{os.pathsep}{env.get('PATH', '')}", PS1="$ ", TERM="dumb")
    env["TOOLRUN_HOME"] = str(tmp_path / "home")
    shell = Pty(tmp_path, env)
    yield shell
    shell.close()


def test_bash_completes_tool_keys_param_names_and_enum_values(bash_pty: Any) -> None:
    assert bash_pty.run("complete -p toolrun") == "0"
    assert bash_pty.complete("toolrun call ops.d") == "toolrun call ops.disk_usage "
    assert bash_pty.complete("toolrun describe ops.r") == "toolrun describe ops.restart "
    # `name=` takes no space after it: the value comes next
    assert bash_pty.complete("toolrun call ops.disk_usage p") == "toolrun call ops.disk_usage path="
    assert bash_pty.complete("toolrun call ops.disk_usage u") == "toolrun call ops.disk_usage unit="
    assert bash_pty.complete("toolrun call ops.disk_usage unit=m") == "toolrun call ops.disk_usage unit=mega "
    assert bash_pty.complete("toolrun call ops.disk_usage deep=t") == "toolrun call ops.disk_usage deep=true "
    # a param already given is not offered again; options are still Typer's
    assert bash_pty.complete("toolrun call ops.disk_usage path=/ unit=kilo d") == (
        "toolrun call ops.disk_usage path=/ unit=kilo deep="
    )
    assert bash_pty.complete("toolrun call ops.disk_usage --dry") == "toolrun call ops.disk_usage --dry-run "


def test_completion_follows_catalog_edits(bash_pty: Any, tmp_path: Path) -> None:
    assert bash_pty.complete("toolrun call ops.res") == "toolrun call ops.restart "
    text = COMPLETION_CATALOG.replace("name: restart", "name: reboot")
    (tmp_path / "tools.yaml").write_text(text, encoding="utf-8")
    assert bash_pty.complete("toolrun call ops.reb") == "toolrun call ops.reboot "


def _complete(env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("SVC_") and k != "TOOLRUN_URL"}
    full.update(env, TOOLRUN_HOME=str(cwd / "home"))
    return subprocess.run([str(_toolrun_bin())], env=full, cwd=cwd, capture_output=True, text=True, timeout=60)


def test_zsh_and_fish_answers_for_keys_params_and_values(tmp_path: Path) -> None:
    (tmp_path / "tools.yaml").write_text(COMPLETION_CATALOG, encoding="utf-8")
    zsh = {"_TOOLRUN_COMPLETE": "complete_zsh"}
    done = _complete({**zsh, "_TYPER_COMPLETE_ARGS": "toolrun call ops.disk_usage "}, tmp_path)
    assert done.stdout.strip() == "compadd -S '' -- 'path=' 'unit=' 'deep='"
    done = _complete({**zsh, "_TYPER_COMPLETE_ARGS": "toolrun call ops.di"}, tmp_path)
    assert "'ops.disk_usage:Report the disk usage of a path.'" in done.stdout  # plain summary, no **
    assert "compadd -d _toolrun_d -l -- ${_toolrun_v[@]}" in done.stdout
    fish = {"_TOOLRUN_COMPLETE": "complete_fish", "_TYPER_COMPLETE_FISH_ACTION": "get-args"}
    done = _complete({**fish, "_TYPER_COMPLETE_ARGS": "toolrun call ops.disk_usage unit="}, tmp_path)
    assert done.stdout.split("\n")[:3] == ["unit=kilo", "unit=mega", "unit=giga"]
    done = _complete({**fish, "_TYPER_COMPLETE_ARGS": "toolrun call ops.disk_usage p"}, tmp_path)
    assert done.stdout.strip() == "path=\tstr: Where to look"


def test_a_broken_catalog_completes_nothing_and_prints_no_traceback(tmp_path: Path) -> None:
    (tmp_path / "tools.yaml").write_text("tools: [oops", encoding="utf-8")
    env = {"_TOOLRUN_COMPLETE": "complete_bash", "COMP_WORDS": "toolrun call o", "COMP_CWORD": "2"}
    done = _complete(env, tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")

"""completions/: the committed scripts match the Typer app, and the app answers their protocol."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

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

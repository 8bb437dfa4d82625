"""Shell shapes where `| quote` does not protect a value, and the lint that names each one.

Each shape is shown twice: a real `toolrun call` with a hostile value runs the injected command
(the marker file appears: `| quote` alone does not save such a catalog), and `validate-catalog`
warns about it, naming the role the value takes. The safe look-alikes stay quiet.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.catalogs import write_catalog
from support.servers import clean_env, toolrun_cli
from toolrun.catalog import dataflow

# (tool, exec template, a hostile value given the marker file's path, the warning's words)
SHAPES = [
    (
        "backslash",
        r"echo x\{{ v | quote }}",
        "; touch {marker} #",
        "comes right after a backslash, which escapes the opening quote",
    ),
    (
        "comment",
        "echo hi # note {{ v | quote }}",
        "x\ntouch {marker} #",
        "inside a shell comment (after `#`): a newline in the value ends the comment",
    ),
    (
        "eval_variable",
        'V={{ v | quote }}; eval "echo $V"',
        ";touch {marker}",
        "becomes shell code (the argument of `eval`) through the shell variable `$V`",
    ),
]


def _catalog(template: str) -> str:
    return f"group: s\ntools:\n  - name: t\n    exec: {json.dumps(template)}\n    params: [{{name: v, type: str}}]\n"


def _warnings(path: Path, env: dict[str, str]) -> list[str]:
    done = toolrun_cli("validate-catalog", "--format", "json", str(path), env=env)
    assert done.returncode == 0, done.stderr  # warnings only
    return [p["message"] for p in json.loads(done.stdout)["problems"] if p["severity"] == "warning"]


@pytest.mark.parametrize(("tool", "template", "hostile", "warning"), SHAPES, ids=[s[0] for s in SHAPES])
def test_the_injection_runs_and_validate_catalog_warns(
    tool: str, template: str, hostile: str, warning: str, tmp_path: Path
) -> None:
    env = clean_env(tmp_path / "home")
    path = write_catalog(tmp_path, _catalog(template))
    marker = tmp_path / f"pwned-{tool}"
    done = toolrun_cli("call", "s.t", f"v={hostile.format(marker=marker)}", "-c", str(path), env=env)
    assert marker.exists(), f"the injected command did not run: {done.stdout!r} {done.stderr!r}"
    found = [m for m in _warnings(path, env) if warning in m]
    assert found, _warnings(path, env)
    assert found[0].startswith("param 'v' ")


@pytest.mark.parametrize(
    "template",
    [
        "sh -c 'echo \"$1\"' sh {{ v | quote }}",  # a positional parameter of `sh -c`, not its code
        'V={{ v | quote }}; eval \'echo "$V"\'; echo "$V"',  # eval expands $V itself: one word
        "echo x\\\\{{ v | quote }}",  # an escaped backslash, then the quoted value
        "echo '#' {{ v | quote }} # a note",  # `#` inside quotes is no comment
        "echo a#{{ v | quote }}",  # `#` inside a word is no comment
        "cmd 2>&{{ v | quote }}",  # a redirection's descriptor, not a command name
    ],
)
def test_safe_look_alikes_get_no_shell_code_warning(template: str, tmp_path: Path) -> None:
    path = write_catalog(tmp_path, _catalog(template))
    assert _warnings(path, clean_env(tmp_path / "home")) == []


@pytest.mark.parametrize(
    ("template", "role", "words"),
    [
        ("{{ v | quote }} --help", "the command name", ""),
        ("eval {{ v | quote }}", "the argument of `eval`", ""),
        ("/bin/bash -x -c {{ v | quote }}", "the command string of `bash -c`", ""),
        ('sh -ec "ls {{ v | quote }}"', "the command string of `sh -c`", ""),
        ("export V={{ v | quote }}; $V x", "the command name", "through the shell variable `$V`"),
        ('V={{ v | quote }}; bash -c "echo ${V}"', "the command string of `bash -c`", "through the shell variable"),
    ],
)
def test_a_shell_code_warning_names_the_role_the_value_takes(template: str, role: str, words: str) -> None:
    from toolrun.catalog.templatelint import code_message

    coded = [u for u in dataflow.uses(template) if u.code]
    assert len(coded) == 1, coded
    message = code_message(coded[0])
    assert role in message and words in message, message


def test_the_three_shapes_are_in_the_scanner_model() -> None:
    (escaped,) = dataflow.uses(r"echo x\{{ v | quote }}")
    assert escaped.escaped and not escaped.code
    (commented,) = dataflow.uses("echo hi # note {{ v | quote }}")
    assert commented.comment
    direct, through = dataflow.uses('V={{ v | quote }}; eval "echo $V"')
    assert (direct.role, through.role, through.via) == ("", dataflow.EVAL, "$V")


@pytest.mark.parametrize(
    "template", ["cmd 2>&{{ v | quote }}", "cmd >&2 {{ v | quote }}", "cmd &>/dev/null {{ v | quote }}"]
)
def test_a_redirection_with_an_ampersand_does_not_end_the_command(template: str) -> None:
    """`2>&` is a redirection: the value after it is no command name."""
    assert [u.role for u in dataflow.uses(template)] == [""]
    assert [u.role for u in dataflow.uses("a && {{ v | quote }}")] == [dataflow.COMMAND]

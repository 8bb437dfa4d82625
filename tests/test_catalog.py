"""The catalog format: keys, groups, public, the spec 2.1 entry, runtime options, ${VAR}, fn tools, the cache."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import os
import re
import sys
import typing
import uuid
from pathlib import Path
from typing import Any

import pytest

from support.catalogs import EXAMPLES, generate_catalog, write_catalog
from toolrun import catalog
from toolrun.catalog import LoadOptions, child_env, load
from toolrun.catalog import cache as catalog_cache
from toolrun.catalog.loadcontext import Declared, LoadResult
from toolrun.errors import CatalogError, Problem
from toolrun.exec import render
from toolrun.models import EXEC_RETURN_TYPE, Identity, Param, ToolSpec
from toolrun.service import ToolService

ENV = {"PATH": "/usr/bin:/bin", "HOME": "/home/op", "LANG": "C.UTF-8"}
EXAMPLE_CALL = re.compile(r"^[\w.-]+\((\w+=.+(, \w+=.+)*)?\)$")


def load_text(tmp_path: Path, text: str, environ: dict[str, str] | None = None, **options: Any) -> catalog.Catalog:
    path = write_catalog(tmp_path, text)
    return load([path], ENV if environ is None else environ, LoadOptions(**options))


def errors_of(tmp_path: Path, text: str, environ: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(CatalogError) as caught:
        load_text(tmp_path, text, environ)
    return [str(p) for p in caught.value.problems]


def fn_module(tmp_path: Path, source: str) -> str:
    """Write a uniquely named module next to the catalog; return its name."""
    name = f"fns_{uuid.uuid4().hex[:10]}"
    (tmp_path / f"{name}.py").write_text(source, encoding="utf-8")
    return name


# -- keys, groups, public ----------------------------------------------------------------------


def test_a_tool_key_is_the_file_group_dot_the_tool_name(tmp_path: Path) -> None:
    cat = load_text(tmp_path, "group: ops\ntools:\n  - name: uptime\n    exec: uptime\n")
    assert list(cat.tools) == ["ops.uptime"]


def test_a_tool_level_group_overrides_the_file_group(tmp_path: Path) -> None:
    text = "group: ops\ntools:\n  - name: a\n    exec: 'true'\n  - name: b\n    group: web\n    exec: 'true'\n"
    assert list(load_text(tmp_path, text).tools) == ["ops.a", "web.b"]


def test_group_tags_are_the_key_group_then_the_declared_groups(tmp_path: Path) -> None:
    text = "group: ops\ntools:\n  - name: a\n    groups: [sre, ops, billing]\n    exec: 'true'\n"
    tool = load_text(tmp_path, text).tools["ops.a"]
    assert tool.groups == ("ops", "sre", "billing")
    assert not tool.public


def test_public_true_makes_a_tool_public_and_adds_the_public_tag(tmp_path: Path) -> None:
    tool = load_text(tmp_path, "group: ops\ntools:\n  - name: a\n    public: true\n    exec: 'true'\n").tools["ops.a"]
    assert tool.public and tool.groups == ("ops", "public")
    assert Identity().can_access(tool)


def test_a_public_group_tag_makes_a_tool_public(tmp_path: Path) -> None:
    tool = load_text(tmp_path, "group: ops\ntools:\n  - name: a\n    groups: [public]\n    exec: 'true'\n").tools[
        "ops.a"
    ]
    assert tool.public
    assert Identity().can_access(tool)


def test_a_private_tool_is_reachable_only_through_its_group_tags(tmp_path: Path) -> None:
    tool = load_text(tmp_path, "group: ops\ntools:\n  - name: a\n    groups: [sre]\n    exec: 'true'\n").tools["ops.a"]
    assert not Identity().can_access(tool)
    assert Identity(username="x", groups=frozenset({"sre"}), anonymous=False).can_access(tool)
    assert Identity(username="y", groups=frozenset({"ops"}), anonymous=False).can_access(tool)
    assert not Identity(username="z", groups=frozenset({"web"}), anonymous=False).can_access(tool)


def test_a_tool_without_any_group_is_an_error(tmp_path: Path) -> None:
    assert "no group" in errors_of(tmp_path, "tools:\n  - name: a\n    exec: 'true'\n")[0]


def test_a_directory_loads_every_yaml_file_in_it_sorted(tmp_path: Path) -> None:
    write_catalog(tmp_path, "group: b\ntools:\n  - name: x\n    exec: 'true'\n", "b.yml")
    write_catalog(tmp_path, "group: a\ntools:\n  - name: x\n    exec: 'true'\n", "a.yaml")
    (tmp_path / "notes.txt").write_text("group: c\n")
    cat = load([tmp_path], ENV)
    assert list(cat.tools) == ["a.x", "b.x"]
    assert cat.files == [str(tmp_path / "a.yaml"), str(tmp_path / "b.yml")]


def test_a_file_named_twice_is_loaded_once(tmp_path: Path) -> None:
    path = write_catalog(tmp_path, "group: ops\ntools:\n  - name: x\n    exec: 'true'\n")
    cat = load([path, tmp_path, str(path)], ENV)
    assert list(cat.tools) == ["ops.x"] and cat.files == [str(path)]


def test_the_same_key_in_two_files_is_an_error_naming_both(tmp_path: Path) -> None:
    a = write_catalog(tmp_path, "group: ops\ntools:\n  - name: x\n    exec: 'true'\n", "a.yaml")
    b = write_catalog(
        tmp_path, "group: ops\ntools:\n  - name: y\n    exec: 'true'\n  - name: x\n    exec: 'true'\n", "b.yaml"
    )
    with pytest.raises(CatalogError) as caught:
        load([a, b], ENV)
    assert [str(p) for p in caught.value.problems] == [
        f"{b}:5:5: ops.x: duplicate key 'ops.x' (first defined at {a}:3)"
    ]


def test_a_duplicate_yaml_field_fails_a_normal_load_too(tmp_path: Path) -> None:
    problems = errors_of(tmp_path, "group: ops\ntools:\n  - name: x\n    exec: 'true'\n    exec: 'false'\n")
    assert problems == [
        f"{tmp_path / 'tools.yaml'}:5:5: ops.x: duplicate field 'exec' (YAML would silently keep only the last)"
    ]


def test_a_yaml_merge_key_is_not_a_duplicate_field(tmp_path: Path) -> None:
    text = (
        "group: ops\ndefaults: &d\n  timeout: 5\ntools:\n"
        "  - name: x\n    exec: 'true'\n    limits: {<<: {cpu: 1}, cpu: 2}\n"
    )
    assert load_text(tmp_path, text).tools["ops.x"].limits.cpu == 2


# -- the spec 2.1 entry -------------------------------------------------------------------------


def test_an_exec_tool_entry_has_exactly_the_spec_fields(tmp_path: Path) -> None:
    text = """
group: ops
tools:
  - name: disk_usage
    description: Disk usage of a path.
    exec: du -sh -- {{ path | quote }} {% if all %}-a{% endif %}
    params:
      - name: path
        type: str
        description: Where.
        example: /var
      - name: all
        type: bool
        default: false
"""
    entry = load_text(tmp_path, text).tools["ops.disk_usage"].entry()
    assert entry == {
        "key": "ops.disk_usage",
        "groups": ["ops"],
        "params": [
            {
                "name": "path",
                "type": "str",
                "required": True,
                "default": None,
                "description": "Where.",
                "example": "/var",
            },
            {"name": "all", "type": "bool", "required": False, "default": False, "description": "", "example": False},
        ],
        "return_type": "str | (int, str, str)",
        "description": "Disk usage of a path.",
        "example": "ops.disk_usage(path='/var')",
    }
    assert list(entry) == ["key", "groups", "params", "return_type", "description", "example"]


def test_curl_tools_have_the_exec_return_type_and_the_curl_prefix(tmp_path: Path) -> None:
    text = """
group: web
tools:
  - name: get
    curl: --max-time 5 -- {{ url | quote }}
    params: [{name: url, type: str}]
  - name: post
    stdin: true
    curl: -X POST http://127.0.0.1:9/x
    params: [{name: msg, type: str}]
"""
    tools = load_text(tmp_path, text).tools
    assert tools["web.get"].return_type == EXEC_RETURN_TYPE == "str | (int, str, str)"
    assert tools["web.get"].source == "curl -sS -o - --proto =http,https --max-time 5 -- {{ url | quote }}"
    assert tools["web.post"].source == "curl -sS -o - --proto =http,https --json @- -X POST http://127.0.0.1:9/x"
    assert tools["web.post"].kind == "curl"


def test_the_example_call_is_key_then_param_equals_value_pairs(tmp_path: Path) -> None:
    text = """
group: ops
tools:
  - name: t
    exec: echo {{ a | quote }} {{ b }} {{ c | quote }} {{ d | quote }} {{ e }}
    params:
      - {name: a, type: str}
      - {name: b, type: int, min: 3}
      - {name: c, type: list, example: [x, y]}
      - {name: d, type: str, enum: [red, green]}
      - {name: e, type: float, required: false}
"""
    tool = load_text(tmp_path, text).tools["ops.t"]
    assert tool.example == "ops.t(a='text', b=3, c=['x', 'y'], d='red')"
    assert EXAMPLE_CALL.match(tool.example)


def test_a_tool_without_params_has_an_empty_example_call(tmp_path: Path) -> None:
    tool = load_text(tmp_path, "group: ops\ntools:\n  - name: up\n    exec: uptime\n").tools["ops.up"]
    assert tool.example == "ops.up()"
    assert tool.params == ()


def test_a_param_is_required_unless_it_has_a_default_or_says_otherwise(tmp_path: Path) -> None:
    text = """
group: ops
tools:
  - name: t
    exec: echo {{ a }} {{ b }} {{ c }}
    params:
      - {name: a, type: int}
      - {name: b, type: int, default: 2}
      - {name: c, type: int, required: false}
"""
    params = {p.name: p for p in load_text(tmp_path, text).tools["ops.t"].params}
    assert (params["a"].required, params["b"].required, params["c"].required) == (True, False, False)
    assert (params["b"].default, params["c"].default) == (2, None)


def test_a_float_param_accepts_an_int_default_as_a_float(tmp_path: Path) -> None:
    text = (
        "group: ops\ntools:\n  - name: t\n    exec: sleep {{ s }}\n    params: [{name: s, type: float, default: 1}]\n"
    )
    default = load_text(tmp_path, text).tools["ops.t"].params[0].default
    assert default == 1.0 and isinstance(default, float)


def test_every_example_tool_entry_follows_the_spec(tmp_path: Path) -> None:
    cat = load([EXAMPLES], ENV)
    assert {"ops.disk_usage", "web.http_get", "text.word_count"} <= set(cat.tools)
    assert not cat.warnings
    kinds = {t.kind for t in cat.tools.values()}
    assert kinds == {"exec", "curl", "fn"}
    assert any(t.stdin for t in cat.tools.values())
    types = {p.type for t in cat.tools.values() for p in t.params}
    assert {"list", "dict"} <= types
    for tool in cat.tools.values():
        entry = tool.entry()
        assert entry["key"] == tool.key and entry["groups"][0] == tool.key.rsplit(".", 1)[0]
        assert EXAMPLE_CALL.match(entry["example"]) and entry["example"].startswith(tool.key + "(")
        if tool.kind != "fn":
            assert entry["return_type"] == "str | (int, str, str)"
        for param in entry["params"]:
            # The spec's fields in order, then only the constraints that are declared.
            assert list(param)[:6] == ["name", "type", "required", "default", "description", "example"]
            assert set(list(param)[6:]) <= {"enum", "pattern", "min", "max", "secret"}
    assert cat.tools["ops.disk_usage"].params[0].name == "path"


# -- fn tools -----------------------------------------------------------------------------------


def test_fn_params_are_inferred_from_the_signature(tmp_path: Path) -> None:
    module = fn_module(
        tmp_path,
        "from typing import Optional\n"
        "def f(name: str, n: int, ratio: float = 0.5, on: bool = False, tags: list[str] | None = None,\n"
        "      meta: Optional[dict] = None, *, loose=3) -> dict[str, int]:\n"
        '    """Do f.\n\n    More text."""\n'
        "    return {}\n",
    )
    text = f"group: py\ntools:\n  - name: f\n    fn: {module}:f\n"
    tool = load_text(tmp_path, text).tools["py.f"]
    assert [(p.name, p.type, p.required, p.default) for p in tool.params] == [
        ("name", "str", True, None),
        ("n", "int", True, None),
        ("ratio", "float", False, 0.5),
        ("on", "bool", False, False),
        ("tags", "list", False, None),
        ("meta", "dict", False, None),
        ("loose", "int", False, 3),
    ]
    assert tool.return_type == "dict[str, int]"
    assert tool.description == "Do f.\n\nMore text."
    assert tool.kind == "fn" and tool.source == f"{module}:f"
    assert tool.example == "py.f(name='text', n=1)"


def test_an_fn_without_a_return_annotation_returns_unknown(tmp_path: Path) -> None:
    module = fn_module(tmp_path, "async def g(x: str):\n    return x\n")
    tool = load_text(tmp_path, f"group: py\ntools:\n  - name: g\n    fn: {module}:g\n").tools["py.g"]
    assert tool.return_type == "unknown"


def test_string_annotations_are_understood(tmp_path: Path) -> None:
    module = fn_module(tmp_path, "from __future__ import annotations\ndef h(x: int) -> str | None:\n    return None\n")
    tool = load_text(tmp_path, f"group: py\ntools:\n  - name: h\n    fn: {module}:h\n").tools["py.h"]
    assert tool.params[0].type == "int"
    assert tool.return_type == "str | None"


def test_declared_params_of_an_fn_win_over_inference_but_must_match_the_signature(tmp_path: Path) -> None:
    module = fn_module(tmp_path, "def f(a, b=1):\n    return a\n")
    text = f"""
group: py
tools:
  - name: f
    description: Declared.
    fn: {module}:f
    params:
      - {{name: a, type: list, description: Items.}}
"""
    tool = load_text(tmp_path, text).tools["py.f"]
    assert [(p.name, p.type, p.description) for p in tool.params] == [("a", "list", "Items.")]
    assert tool.description == "Declared."
    wrong = text.replace("name: a,", "name: z,")
    problems = errors_of(tmp_path, wrong)
    assert any("has no parameter 'z'" in p for p in problems)
    assert any("requires 'a', which is not a declared param" in p for p in problems)


def test_an_fn_param_without_a_usable_annotation_asks_for_params(tmp_path: Path) -> None:
    module = fn_module(tmp_path, "def f(thing):\n    return thing\n")
    (problem,) = errors_of(tmp_path, f"group: py\ntools:\n  - name: f\n    fn: {module}:f\n")
    assert "fn parameter 'thing' has no str/int/float/bool/list/dict annotation" in problem


def test_an_fn_param_annotated_with_a_literal_of_no_param_type_asks_for_params(tmp_path: Path) -> None:
    # Literal[None] once became a param of type 'NoneType', and `toolrun describe` then failed with a KeyError.
    source = "from typing import Literal\n\ndef f(mode: Literal[None] = None, n: Literal[1, 2] = 1):\n    return n\n"
    module = fn_module(tmp_path, source)
    (problem,) = errors_of(tmp_path, f"group: py\ntools:\n  - name: f\n    fn: {module}:f\n")
    assert "fn parameter 'mode' has no str/int/float/bool/list/dict annotation" in problem
    fixed = fn_module(tmp_path, source.replace("mode: Literal[None] = None, ", ""))
    tool = load_text(tmp_path, f"group: py\ntools:\n  - name: f\n    fn: {fixed}:f\n").tools["py.f"]
    assert [(p.name, p.type) for p in tool.params] == [("n", "int")]


def test_an_fn_that_does_not_import_is_a_load_error(tmp_path: Path) -> None:
    (problem,) = errors_of(tmp_path, "group: py\ntools:\n  - name: f\n    fn: toolrun_no_such_mod_x:f\n")
    assert "py.f: fn 'toolrun_no_such_mod_x:f' does not import: ModuleNotFoundError" in problem


def test_runtime_options_on_an_fn_tool_are_a_warning(tmp_path: Path) -> None:
    module = fn_module(tmp_path, "def f() -> int:\n    return 1\n")
    cat = load_text(tmp_path, f"group: py\ntools:\n  - name: f\n    fn: {module}:f\n    cwd: /tmp\n")
    assert [w.message for w in cat.warnings] == ["fn tools run in-process and ignore cwd"]


# -- runtime options ------------------------------------------------------------------------------


def test_file_defaults_are_inherited_and_tool_options_win(tmp_path: Path) -> None:
    text = """
group: ops
defaults:
  timeout: 7
  env: {A: "1", B: "2"}
  env_passthrough: [AWS_*]
  limits: {cpu: 3, memory: 64M}
tools:
  - name: a
    exec: 'true'
  - name: b
    exec: 'true'
    timeout: 2.5
    env: {B: three, C: 4, D: true}
    env_passthrough: [GITHUB_TOKEN]
    limits: {memory: 1G, open_files: 64}
"""
    tools = load_text(tmp_path, text).tools
    a, b = tools["ops.a"], tools["ops.b"]
    assert (a.timeout, a.env, a.env_passthrough) == (7, {"A": "1", "B": "2"}, ("AWS_*",))
    assert (a.limits.cpu, a.limits.memory) == (3, 64 * 1024**2)
    assert b.timeout == 2.5
    assert b.env == {"A": "1", "B": "three", "C": "4", "D": "true"}
    assert b.env_passthrough == ("AWS_*", "GITHUB_TOKEN")
    assert (b.limits.cpu, b.limits.memory, b.limits.open_files) == (3, 1024**3, 64)


def test_a_tool_without_a_timeout_gets_the_default_timeout(tmp_path: Path) -> None:
    cat = load_text(tmp_path, "group: ops\ntools:\n  - name: a\n    exec: 'true'\n", default_timeout=42.0)
    assert cat.tools["ops.a"].timeout == 42.0


@pytest.mark.parametrize(
    ("written", "size"),
    [("1048576", 1048576), ("512K", 512 * 1024), ("512M", 512 * 1024**2), ("2G", 2 * 1024**3), ("1 GiB", 1024**3)],
)
def test_limit_sizes_accept_bytes_and_binary_suffixes(tmp_path: Path, written: str, size: int) -> None:
    text = (
        f"group: ops\ntools:\n  - name: a\n    exec: 'true'\n    limits: {{file_size: {written}, output: {written}}}\n"
    )
    limits = load_text(tmp_path, text).tools["ops.a"].limits
    assert limits.file_size == size and limits.output == size


def test_limits_become_prlimit_flags(tmp_path: Path) -> None:
    text = (
        "group: ops\ntools:\n  - name: a\n    exec: 'true'\n"
        "    limits: {cpu: 2, memory: 1M, open_files: 32, file_size: 2K, processes: 50}\n"
    )
    limits = load_text(tmp_path, text).tools["ops.a"].limits
    assert limits.prlimit_args() == ["--cpu=2", "--as=1048576", "--nofile=32", "--fsize=2048", "--nproc=50"]


def test_output_defaults_to_the_load_option(tmp_path: Path) -> None:
    cat = load_text(tmp_path, "group: ops\ntools:\n  - name: a\n    exec: 'true'\n", max_output=1234)
    assert cat.tools["ops.a"].limits.output == 1234


def test_cwd_is_resolved_relative_to_the_catalog_file(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    tool = load_text(tmp_path, "group: ops\ntools:\n  - name: a\n    exec: pwd\n    cwd: work\n").tools["ops.a"]
    assert tool.cwd == str((tmp_path / "work").resolve())


def test_env_file_is_read_relative_to_the_catalog_and_env_wins(tmp_path: Path) -> None:
    (tmp_path / "app.env").write_text(
        "# comment\n\nexport TOKEN='s3 cret'\nURL=\"http://x/?a=1#frag\"\nPLAIN = value \nB=from-file\n",
        encoding="utf-8",
    )
    text = "group: ops\ntools:\n  - name: a\n    exec: 'true'\n    env_file: app.env\n    env: {B: from-env}\n"
    tool = load_text(tmp_path, text).tools["ops.a"]
    assert tool.env == {"TOKEN": "s3 cret", "URL": "http://x/?a=1#frag", "PLAIN": "value", "B": "from-env"}


def test_a_missing_env_file_is_a_load_error(tmp_path: Path) -> None:
    (problem,) = errors_of(tmp_path, "group: ops\ntools:\n  - name: a\n    exec: 'true'\n    env_file: nope.env\n")
    assert "cannot read env_file 'nope.env': No such file or directory" in problem


def test_the_child_environment_is_an_allowlist(tmp_path: Path) -> None:
    text = """
group: ops
tools:
  - name: a
    exec: env
    env: {MODE: prod}
    env_passthrough: [GITHUB_TOKEN, AWS_*]
"""
    tool = load_text(tmp_path, text).tools["ops.a"]
    server = {
        "PATH": "/opt/bin:/usr/bin",
        "HOME": "/home/op",
        "LANG": "C.UTF-8",
        "TZ": "UTC",
        "SVC_ADMIN_KEY": "secret",
        "DATABASE_URL": "postgres://secret",
        "GITHUB_TOKEN": "gh",
        "AWS_REGION": "eu",
        "AWS_SECRET_ACCESS_KEY": "aws",
        "AWSX": "no",
    }
    assert child_env(tool, server) == {
        "PATH": "/opt/bin:/usr/bin",
        "HOME": "/home/op",
        "LANG": "C.UTF-8",
        "TZ": "UTC",
        "GITHUB_TOKEN": "gh",
        "AWS_REGION": "eu",
        "AWS_SECRET_ACCESS_KEY": "aws",
        "MODE": "prod",
    }


def test_the_child_gets_a_default_path_when_the_server_has_none(tmp_path: Path) -> None:
    tool = load_text(tmp_path, "group: ops\ntools:\n  - name: a\n    exec: env\n").tools["ops.a"]
    assert child_env(tool, {}) == {"PATH": catalog.DEFAULT_PATH}


def test_the_base_environment_is_the_documented_list() -> None:
    assert catalog.BASE_ENV == (
        "PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "USER", "LOGNAME", "SHELL", "TERM"
    )  # fmt: skip


# -- ${VAR} -------------------------------------------------------------------------------------


def test_env_references_are_substituted_at_load_time(tmp_path: Path) -> None:
    text = """
group: web
tools:
  - name: get
    description: Fetches ${API_HOST}.
    curl: -H X-Region:${REGION} https://${API_HOST}/v1/{{ path | quote }}
    env: {TOKEN: "${API_TOKEN}"}
    params: [{name: path, type: str}]
"""
    environ = {**ENV, "API_HOST": "api.example.com", "REGION": "eu-1", "API_TOKEN": "t0k"}
    tool = load_text(tmp_path, text, environ).tools["web.get"]
    assert tool.source == (
        "curl -sS -o - --proto =http,https -H X-Region:eu-1 https://api.example.com/v1/{{ path | quote }}"
    )
    assert tool.description == "Fetches api.example.com."
    assert tool.env == {"TOKEN": "t0k"}


def test_a_default_applies_when_the_variable_is_unset_or_empty(tmp_path: Path) -> None:
    text = "group: ops\ntools:\n  - name: a\n    exec: echo ${A:-fallback} ${B:-x} ${C:-}\n"
    assert load_text(tmp_path, text, {"B": ""}).tools["ops.a"].source == "echo fallback x "
    assert load_text(tmp_path, text, {"A": "set"}).tools["ops.a"].source == "echo set x "


def test_a_doubled_dollar_keeps_the_reference_for_the_shell(tmp_path: Path) -> None:
    text = "group: ops\ntools:\n  - name: a\n    exec: echo $${HOME} $${X:-y} $$HOME\n"
    assert load_text(tmp_path, text, {"HOME": "/server"}).tools["ops.a"].source == "echo ${HOME} ${X:-y} $$HOME"


def test_an_unset_variable_is_a_load_error_naming_the_variable_and_the_tool(tmp_path: Path) -> None:
    text = (
        "group: ops\ntools:\n  - name: ok\n    exec: 'true'\n"
        "  - name: deploy\n    exec: deploy --token ${DEPLOY_TOKEN}\n"
    )
    (problem,) = errors_of(tmp_path, text, {})
    assert problem == (
        f"{tmp_path / 'tools.yaml'}:6:26: ops.deploy: environment variable 'DEPLOY_TOKEN' is not set "
        "(write ${DEPLOY_TOKEN:-default} for a default)"
    )


def test_an_env_value_that_looks_like_a_template_stays_literal(tmp_path: Path) -> None:
    text = (
        "group: ops\ntools:\n  - name: a\n"
        "    exec: printf '%s|' '${EVIL}' {{ msg | quote }}\n    params: [{name: msg, type: str}]\n"
    )
    evil = "{{ 7*7 }} {% if true %}yes{% endif %} {# c #} }}"
    tool = load_text(tmp_path, text, {**ENV, "EVIL": evil}).tools["ops.a"]
    assert render.render(tool.source, {"msg": "m"}) == f"printf '%s|' '{evil}' m"
    service = ToolService(catalog.Catalog({tool.key: tool}), environ=ENV)
    result = asyncio.run(service.call(Identity.operator(), "ops.a", {"msg": "m"}))
    assert result.value == f"{evil}|m|"


def test_an_env_value_in_a_non_template_field_is_inserted_verbatim(tmp_path: Path) -> None:
    text = "group: ops\ntools:\n  - name: a\n    exec: 'true'\n    env: {V: '${V}'}\n"
    assert load_text(tmp_path, text, {"V": "{{ 7*7 }}"}).tools["ops.a"].env == {"V": "{{ 7*7 }}"}


def test_a_substituted_default_is_coerced_to_the_param_type(tmp_path: Path) -> None:
    text = (
        "group: ops\ntools:\n  - name: a\n    exec: seq {{ n }}\n"
        "    params: [{name: n, type: int, default: '${N:-3}'}]\n"
    )
    assert load_text(tmp_path, text, {}).tools["ops.a"].params[0].default == 3


# -- templates --------------------------------------------------------------------------------


def test_a_template_syntax_error_is_a_load_error(tmp_path: Path) -> None:
    (problem,) = errors_of(
        tmp_path, "group: ops\ntools:\n  - name: a\n    exec: echo {{ x | quote }\n    params: [{name: x}]\n"
    )
    assert "ops.a: template error in exec" in problem


def test_a_template_variable_that_is_not_declared_is_a_load_error(tmp_path: Path) -> None:
    (problem,) = errors_of(tmp_path, "group: ops\ntools:\n  - name: a\n    exec: echo {{ y | quote }}\n")
    assert problem.endswith("ops.a: template uses 'y', which is not a declared param")


def test_a_param_named_like_a_template_keyword_is_rejected(tmp_path: Path) -> None:
    (problem,) = errors_of(tmp_path, "group: ops\ntools:\n  - name: a\n    exec: 'true'\n    params: [{name: in}]\n")
    assert "parameter name 'in' is a template keyword" in problem


def test_warnings_do_not_fail_a_load(tmp_path: Path) -> None:
    cat = load_text(tmp_path, "group: ops\ntools:\n  - name: a\n    exec: cat {{ f }}\n    params: [{name: f}]\n")
    assert "ops.a" in cat.tools
    assert [w.message for w in cat.warnings] == ["param 'f' (str) is interpolated without `| quote`"]


def test_stdin_tools_may_leave_params_out_of_the_command(tmp_path: Path) -> None:
    text = "group: ops\ntools:\n  - name: a\n    stdin: true\n    exec: jq .\n    params: [{name: doc, type: dict}]\n"
    assert not load_text(tmp_path, text).warnings


# -- the cache ---------------------------------------------------------------------------------


def test_a_warm_load_comes_from_the_cache_without_parsing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_catalog(tmp_path, generate_catalog(20))
    options = LoadOptions(cache_dir=tmp_path / "cache")
    cold = load([path], ENV, options)

    def no_parse(path: Path, environ: Any, options: LoadOptions) -> LoadResult:
        raise AssertionError("parsed again")

    monkeypatch.setattr(catalog_cache, "load_file", no_parse)
    warm = load([path], ENV, options)
    assert warm.tools == cold.tools and len(warm) == 20


def test_the_cache_keeps_warnings(tmp_path: Path) -> None:
    path = write_catalog(tmp_path, "group: ops\ntools:\n  - name: a\n    exec: cat {{ f }}\n    params: [{name: f}]\n")
    options = LoadOptions(cache_dir=tmp_path / "cache")
    first = load([path], ENV, options)
    assert list((tmp_path / "cache").iterdir())
    assert load([path], ENV, options).warnings == first.warnings != []


def test_the_cache_misses_when_the_file_an_env_value_or_an_env_file_changes(tmp_path: Path) -> None:
    (tmp_path / "x.env").write_text("A=1\n")
    text = "group: ops\ntools:\n  - name: a\n    exec: echo ${WHO}\n    env_file: x.env\n"
    path = write_catalog(tmp_path, text)
    options = LoadOptions(cache_dir=tmp_path / "cache")
    assert load([path], {"WHO": "ann"}, options).tools["ops.a"].source == "echo ann"
    assert load([path], {"WHO": "bob"}, options).tools["ops.a"].source == "echo bob"
    (tmp_path / "x.env").write_text("A=2\n")
    assert load([path], {"WHO": "bob"}, options).tools["ops.a"].env == {"A": "2"}
    path.write_text(text.replace("echo", "printf"))
    assert load([path], {"WHO": "bob"}, options).tools["ops.a"].source == "printf bob"


def test_a_catalog_with_errors_is_never_cached(tmp_path: Path) -> None:
    bad = write_catalog(tmp_path, "group: ops\ntools:\n  - name: a\n", "bad.yaml")
    cache = tmp_path / "cache"
    with pytest.raises(CatalogError):
        load([bad], ENV, LoadOptions(cache_dir=cache))
    assert not cache.exists() or not list(cache.iterdir())


def test_an_fn_catalog_is_cached_until_its_module_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = fn_module(tmp_path, "def f(a: int) -> int:\n    return a\n")
    path = write_catalog(tmp_path, f"group: py\ntools:\n  - name: f\n    fn: {module}:f\n")
    options = LoadOptions(cache_dir=tmp_path / "cache")
    assert load([path], ENV, options).tools["py.f"].params[0].type == "int"
    parsed: list[Path] = []
    real_load = catalog_cache.load_file

    def counting_load(path: Path, environ: Any, options: LoadOptions) -> LoadResult:
        parsed.append(path)
        return real_load(path, environ, options)

    monkeypatch.setattr(catalog_cache, "load_file", counting_load)
    assert load([path], ENV, options).tools["py.f"].return_type == "int"
    assert parsed == []
    source = tmp_path / f"{module}.py"
    source.write_text("def f(a: str) -> str:\n    return a\n", encoding="utf-8")
    # An edit made later, as a person makes it: in the same second, at the same size, Python would import the
    # bytecode it cached (__pycache__) of the old text, whatever toolrun decided.
    later = source.stat().st_mtime + 2
    os.utime(source, (later, later))
    sys.modules.pop(module, None)
    assert load([path], ENV, options).tools["py.f"].return_type == "str"
    assert parsed == [path]


def test_a_builtin_fn_makes_its_file_uncacheable(tmp_path: Path) -> None:
    path = write_catalog(
        tmp_path, "group: py\ntools:\n  - name: l\n    fn: math:hypot\n    params: [{name: x, type: float}]\n"
    )
    cache = tmp_path / "cache"
    load([path], ENV, LoadOptions(cache_dir=cache))
    assert not cache.exists() or not list(cache.iterdir())


def _layout(*fields: tuple[str, type]) -> type:
    return dataclasses.make_dataclass("Param", fields, frozen=True, slots=True)


def test_the_cache_key_follows_the_version_and_every_field_of_the_cached_records() -> None:
    base = _layout(("name", str), ("type", str), ("required", bool))
    key = catalog_cache.records_key([base], "1.0")
    assert catalog_cache.records_key([base], "1.0") == key
    assert catalog_cache.records_key([base], "1.1") != key
    changed = [
        _layout(("name", str), ("kind", str), ("type", str), ("required", bool)),  # a field inserted
        _layout(("name", str), ("kind", str), ("required", bool)),  # a field renamed
        _layout(("name", str), ("type", str), ("required", int)),  # a field retyped
        _layout(("name", str), ("required", bool), ("type", str)),  # fields reordered
        _layout(("name", str), ("type", str)),  # a field removed
    ]
    assert len({catalog_cache.records_key([c], "1.0") for c in changed} | {key}) == len(changed) + 1


def test_every_record_class_a_cache_entry_holds_is_in_the_key() -> None:
    reachable: set[type] = set()
    todo: list[Any] = [ToolSpec, Problem, Declared]
    while todo:
        item = todo.pop()
        if isinstance(item, type) and dataclasses.is_dataclass(item):
            if item in reachable:
                continue
            reachable.add(item)
            todo.extend(typing.get_type_hints(item).values())
        else:
            todo.extend(typing.get_args(item))
    assert reachable == set(catalog_cache.CACHED_RECORDS)


def test_an_entry_written_for_other_record_fields_is_never_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_catalog(tmp_path, "group: ops\ntools:\n  - name: a\n    exec: echo {{ n }}\n    params: [{name: n}]\n")
    options = LoadOptions(cache_dir=tmp_path / "cache")
    load([path], ENV, options)  # the entry the older code wrote
    older = {p: p.read_bytes() for p in (tmp_path / "cache").iterdir()}
    # The newer code's Param has one more field: read back by position, every value after it
    # would land one field off (the type in `required`, say).
    newer = _layout(*((f.name, f.type) for f in dataclasses.fields(Param)), ("hidden", bool))
    records = tuple(newer if r is Param else r for r in catalog_cache.CACHED_RECORDS)
    monkeypatch.setattr(catalog_cache, "CACHED_RECORDS", records)
    catalog_cache.cache_key.cache_clear()
    monkeypatch.setattr(catalog_cache, "cache_key", functools.cache(catalog_cache.cache_key.__wrapped__))
    parsed: list[Path] = []
    real_load = catalog_cache.load_file

    def counting_load(path: Path, environ: Any, options: LoadOptions) -> LoadResult:
        parsed.append(path)
        return real_load(path, environ, options)

    monkeypatch.setattr(catalog_cache, "load_file", counting_load)
    assert load([path], ENV, options).tools["ops.a"].params[0].required is True
    assert parsed == [path]
    assert {p: p.read_bytes() for p in older} == older  # the old entry is left alone, not read


def test_a_generated_catalog_loads_cleanly(tmp_path: Path) -> None:
    cat = load_text(tmp_path, generate_catalog(100))
    assert len(cat) == 100 and not cat.warnings
    assert {t.kind for t in cat.tools.values()} == {"exec", "curl"}


def test_a_tool_run_as_an_unknown_user_is_a_load_error(tmp_path: Path) -> None:
    path = write_catalog(tmp_path, "group: t\ntools:\n  - name: a\n    user: no-such-user-xyz\n    exec: id\n")
    _, problems = catalog.check([path], {}, LoadOptions(check=True))
    assert [p.message for p in problems if p.severity == "error"] == [
        "user 'no-such-user-xyz' does not exist on this machine"
    ]


def test_behaviour_hints_and_keywords_load_into_the_entry_only_when_declared(tmp_path: Path) -> None:
    text = """\
version: 1
group: ops
tools:
  - name: wipe
    exec: "true"
    destructive: true
    title: Wipe the scratch disk
    keywords: [erase, format, erase]
  - name: plain
    exec: "true"
  - name: odd
    exec: "true"
    read_only: true
    destructive: true
"""
    cat = load_text(tmp_path, text)
    wipe = cat.tools["ops.wipe"].entry()
    assert wipe["annotations"] == {"title": "Wipe the scratch disk", "destructive": True}
    assert wipe["keywords"] == ["erase", "format"]
    assert "annotations" not in cat.tools["ops.plain"].entry() and "keywords" not in cat.tools["ops.plain"].entry()
    assert [w.message for w in cat.warnings] == ["a read_only tool cannot be destructive"]
    (tmp_path / "bad").mkdir()
    bad = errors_of(tmp_path / "bad", "version: 1\ngroup: ops\ntools:\n  - {name: x, exec: 'true', read_only: maybe}\n")
    assert any("read_only" in e for e in bad), bad

"""render: the sandboxed template environment, the `quote` filter, and load-time analysis (spec 2.6)."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolrun.catalog import Catalog
from toolrun.errors import ToolFailed, UndefinedVariable
from toolrun.exec import executor, render
from toolrun.models import EXEC_RETURN_TYPE, Identity, Param, ToolSpec
from toolrun.service import ToolService

ENV = {"PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"), "LANG": "C.UTF-8"}
# Any text a parameter may carry: no NUL byte, no lone surrogate (params.validate rejects both).
PARAM_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=60)


def shell(command: str) -> Any:
    return asyncio.run(executor.run(command, timeout=10, env=ENV)).value()


# -- the quote filter (spec 2.6.6) ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("plain", "plain"),
        ("a b", "'a b'"),
        ("it's; rm -rf /", "'it'\"'\"'s; rm -rf /'"),
        ("", "''"),
        (5, "5"),
        (-2.5, "-2.5"),
        (True, "true"),
        (False, "false"),
        (None, "''"),
        (["a b", "c", ""], "'a b' c ''"),
        (("x", "$y"), "x '$y'"),
        ([], ""),
        ([1, True, None, ["n", 2]], "1 true '' '[\"n\",2]'"),
        ({"k": "v w", "n": 1}, '\'{"k":"v w","n":1}\''),
    ],
)
def test_quote_renders_each_type_as_documented(value: Any, expected: str) -> None:
    assert render.render("{{ v | quote }}", {"v": value}) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("a b", "a b"),
        (7, "7"),
        (0.5, "0.5"),
        (True, "true"),
        (False, "false"),
        (None, ""),
        (["a", 1, None], '["a",1,null]'),
        ({"é": [1, 2]}, '{"é":[1,2]}'),
    ],
)
def test_a_plain_expression_renders_each_type_as_documented(value: Any, expected: str) -> None:
    assert render.render("{{ v }}", {"v": value}) == expected


def test_a_quoted_list_arrives_as_the_same_argv() -> None:
    items = ["a b", "", "--help", "it's", "$(id)", "*", "é\n\t"]
    command = render.render(
        f"{shlex.quote(sys.executable)} -c 'import json,sys; print(json.dumps(sys.argv[1:]))' {{{{ items | quote }}}}",
        {"items": items},
    )

    assert json.loads(shell(command)) == items


@settings(max_examples=100, deadline=None)
@given(PARAM_TEXT)
def test_any_quoted_text_reaches_the_command_byte_for_byte(value: str) -> None:
    command = render.render("printf '%s' {{ v | quote }}", {"v": value})

    assert shell(command) == value


@settings(max_examples=80, deadline=None)
@given(st.lists(PARAM_TEXT, max_size=6))
def test_any_quoted_list_arrives_as_the_same_argv(items: list[str]) -> None:
    command = render.render("printf '%s\\0' argv {{ items | quote }}", {"items": items})

    assert str(shell(command)).split("\0")[1:-1] == items


# -- strictness and the sandbox (spec 2.6.8) -----------------------------------------------------


def test_an_undefined_variable_raises_naming_it() -> None:
    with pytest.raises(ToolFailed, match="'nope' is undefined"):
        render.render("echo {{ nope }}", {})


def exec_tool(template: str, *params: Param) -> ToolSpec:
    return ToolSpec(
        key="t.tool",
        name="tool",
        kind="exec",
        groups=("t",),
        public=False,
        description="",
        params=params,
        return_type=EXEC_RETURN_TYPE,
        example="",
        source=template,
        timeout=5,
    )


def test_an_undefined_variable_fails_the_call_before_any_process_starts(tmp_path: Path) -> None:
    # Built by hand: the catalog loader would already refuse a template using an undeclared name.
    marker = tmp_path / "ran"
    tool = exec_tool("touch {{ marker | quote }} {{ nope }}", Param("marker", "str", True))
    service = ToolService(Catalog(tools={tool.key: tool}))

    with pytest.raises(ToolFailed, match="nope"):
        asyncio.run(service.call(Identity.operator(), tool.key, {"marker": str(marker)}))
    assert not marker.exists()


def test_the_same_tool_with_every_variable_defined_does_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    tool = exec_tool("touch {{ marker | quote }}", Param("marker", "str", True))
    service = ToolService(Catalog(tools={tool.key: tool}))

    asyncio.run(service.call(Identity.operator(), tool.key, {"marker": str(marker)}))
    assert marker.exists()


def test_if_block_works_when_an_optional_param_is_absent() -> None:
    template = "ls{% if depth %} --depth={{ depth }}{% else %} -s{% endif %} {{ path | quote }}"

    assert render.render(template, {"path": "/a b"}) == "ls -s '/a b'"
    assert render.render(template, {"depth": 2, "path": "/"}) == "ls --depth=2 /"


@pytest.mark.parametrize(
    "template",
    [
        "[{{ ghost }}]",
        "[{{ ghost | quote }}]",
        "[{{ ghost | upper }}]",
        "[{{ 'x' ~ ghost }}]",
        "{% for g in ghost %}{% endfor %}",
    ],
)
def test_an_absent_variable_raises_whatever_the_expression(template: str) -> None:
    with pytest.raises(UndefinedVariable, match="'ghost' is undefined"):
        render.render(template, {})


def test_guards_of_an_absent_variable_work() -> None:
    template = "{% if ghost %}a{% endif %}{% if ghost is defined %}b{% endif %}{% if not ghost %}c{% endif %}"
    assert render.render(template + "{{ ghost | default('d') }}", {}) == "cd"


def test_an_absent_optional_param_is_false_in_a_guard_through_the_service() -> None:
    tool = exec_tool(
        "echo x{% if flag %}-flag{% endif %}{% if not name %}-anon{% endif %}",
        Param("flag", "bool", False),
        Param("name", "str", False),
    )
    service = ToolService(Catalog(tools={tool.key: tool}))

    assert service.plan(Identity.operator(), tool.key, {})["command"] == "echo x-anon"
    assert service.plan(Identity.operator(), tool.key, {"flag": True})["command"] == "echo x-flag-anon"


@pytest.mark.parametrize(
    "template",
    [
        "{{ v.__class__ }}",
        "{{ v.__class__.__mro__ }}",
        "{{ v.__init__.__globals__ }}",
        "{{ items.append(1) }}",
        "{{ items.__len__() }}",
    ],
)
def test_the_sandbox_blocks_attribute_and_method_escapes(template: str) -> None:
    with pytest.raises(ToolFailed):
        render.render(template, {"v": "text", "items": [1]})


def test_a_template_syntax_error_at_render_time_is_a_tool_failure() -> None:
    with pytest.raises(ToolFailed):
        render.render("{% if x %}a{% else %}b{% else %}c{% endif %}", {"x": 1})


def test_template_text_keeps_its_trailing_newline_and_shell_syntax() -> None:
    assert render.render("echo '{{ v }}' | tr a b\n", {"v": "a"}) == "echo 'a' | tr a b\n"


# -- load-time analysis --------------------------------------------------------------------------


def test_analysis_names_the_variables_and_the_unquoted_ones() -> None:
    analysis = render.analyse("cp {{ src | quote }} {{ dst }}{% if force %} -f{% endif %}")

    assert analysis.error is None
    assert analysis.names == {"src", "dst", "force"}
    assert analysis.unquoted == {"dst"}


def test_analysis_sees_through_loops_and_expressions() -> None:
    analysis = render.analyse("{% for f in files %}{{ f | quote }} {% endfor %}{{ a ~ b | quote }}")

    assert analysis.error is None
    assert analysis.names == {"files", "a", "b"}
    assert analysis.unquoted == {"a"}  # `a ~ (b | quote)`: the filter binds to b only


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{{ a | nosuch }}", "no filter named 'nosuch'"),
        ("{% if a is nosuch %}{% endif %}", "no test named 'nosuch'"),
        ("ok\n{{ a ", "unexpected"),
        ("{% if a %}x{% else %}y{% else %}z{% endif %}", "else"),
        ("{% if a %}x{% else %}y{% elif b %}z{% endif %}", "elif"),
        ("{% if not %}x{% endif %}", "unexpected"),
        ("{% if a %}", "endif"),
        ("{% endif %}", "endif"),
    ],
)
def test_analysis_reports_what_jinja_would_refuse(template: str, message: str) -> None:
    assert message in (render.analyse(template).error or "")


def test_analysis_reports_the_line_of_a_syntax_error() -> None:
    assert render.analyse("echo one\necho two\n{{ broken ").error_line == 3


def test_jinja_constants_are_not_variables() -> None:
    analysis = render.analyse("echo {{ true }} {{ none | quote }}{% if false %}x{% endif %}")

    assert analysis.error is None
    assert analysis.names == set()


FRAGMENT = st.one_of(
    st.sampled_from(["ls ", " -- ", "'", '"', "$x", ";", "\n", "{", "}", "%", "#", "-"]),
    st.builds(
        str.format,
        st.sampled_from(
            [
                "{{{{ {} }}}}",
                "{{{{ {} | quote }}}}",
                "{{{{{}|quote|upper}}}}",
                "{{{{ {} | nosuch }}}}",
                "{{% if {} %}}",
                "{{%- if not {} -%}}",
                "{{% elif {} %}}",
                "{{% else %}}{}",
                "{{% endif %}}{}",
                "{{# {} #}}",
            ]
        ),
        st.sampled_from(["a", "b", "path", "true", "none", "not", "in", "loop"]),
    ),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(FRAGMENT, max_size=12).map("".join))
def test_the_fast_analysis_agrees_with_jinja_whenever_it_answers(template: str) -> None:
    fast = render.analyse_simple(template)
    full = render.analyse("{# force the Jinja path #}" + template)
    if fast is None:
        return
    assert full.error is None
    render.environment().from_string(template)  # compiles
    assert (fast.names, fast.unquoted) == (full.names, full.unquoted)


PLAIN_FRAGMENT = st.one_of(
    st.sampled_from(["ls ", " -- ", "'", '"', "$x", ";", "\n", "\r\n", "{", "}", "%", "#", "-", "}}", "{ {"]),
    st.builds(
        str.format,
        st.sampled_from(["{{{{ {} }}}}", "{{{{{}|quote}}}}", "{{{{ {} | quote }}}}", "{{{{ {}|upper }}}}"]),
        st.sampled_from(["a", "b", "path", "missing", "true", "none", "range", "self", "loop", "namespace"]),
    ),
)
VALUE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    PARAM_TEXT,
    st.lists(PARAM_TEXT, max_size=3),
    st.dictionaries(st.sampled_from(["k", "é"]), st.integers(), max_size=2),
)


def _outcome(render_call: Any) -> tuple[str, str]:
    try:
        return "ok", render_call()
    except Exception as exc:
        error = exc.__cause__ if isinstance(exc, ToolFailed) else exc
        return type(error).__name__, str(error)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(PLAIN_FRAGMENT, max_size=10).map("".join),
    st.fixed_dictionaries({}, optional={"a": VALUE, "b": VALUE, "path": VALUE, "range": VALUE}),
)
def test_plain_templates_render_without_jinja_exactly_as_jinja_does(template: str, values: dict[str, Any]) -> None:
    """`{{ name }}` / `{{ name | quote }}` templates skip Jinja at call time; the text (or the error) is the same."""
    fast = _outcome(lambda: render.render(template, values))
    jinja = _outcome(lambda: str(render.compiled(template).render(values)))
    assert fast == jinja


def test_the_common_template_shapes_take_the_plain_path() -> None:
    assert render._plain_parts("printf '%s' {{ msg | quote }}") == ("printf '%s' ", ("msg", True))
    assert render._plain_parts("ls {{path}} {{ n }}") == ("ls ", ("path", False), " ", ("n", False))
    for jinja_only in ("{% if a %}x{% endif %}", "{{ a | upper }}", "{{ range }}", "a\r\nb {{ x }}", "{{- a }}"):
        assert render._plain_parts(jinja_only) is None


def test_the_globals_list_matches_jinjas_own() -> None:
    assert set(render.environment().globals) == render.JINJA_GLOBALS

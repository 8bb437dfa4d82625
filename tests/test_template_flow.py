"""dataflow.uses: where each value lands in the shell command, through the template's data flow.

validate-catalog's warnings about unquoted flows, quoting layers, shell code, option positions and
unguarded optional params come from here (their golden transcript is tests/golden/data_flow.out).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolrun.catalog import dataflow


def one(template: str, words: tuple[str, ...] = ()) -> dataflow.Use:
    found = dataflow.uses(template, words)
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize(
    ("template", "state", "via"),
    [
        ("ls {{ p }}", "raw", ""),
        ("ls {{ p | quote }}", "quoted", ""),
        ("ls {{ p | quote | upper }}", "raw", ""),
        ("{% set q = p | quote %}ls {{ q }}", "quoted", "{% set q %}"),
        ("{% set q = p %}ls {{ q | quote }}", "quoted", "{% set q %}"),
        ("{% set q %}x{{ p }}{% endset %}ls {{ q }}", "raw", "{% set q %}"),
        ("{% for t in p %}{{ t | quote }} {% endfor %}", "quoted", "{% for t %}"),
        ("{% for k, v in p.items() %}{{ v }}{% endfor %}", "raw", "{% for v %}"),
        ("{% filter upper %}{{ p | quote }}{% endfilter %}", "raw", ""),
        ("ls {{ p | length }}", "safe", ""),
        ("ls {{ p | int }}", "number", ""),
        ("ls {{ '--x=' ~ p | quote }}", "quoted", ""),
        ("ls {{ p | quote if p else 'none' }}", "quoted", ""),
    ],
)
def test_a_value_is_followed_through_the_template(template: str, state: str, via: str) -> None:
    use = one(template)
    assert (use.name, use.state, use.via) == ("p", state, via)


@pytest.mark.parametrize(
    ("template", "context", "code"),
    [
        ("echo {{ p | quote }}", "plain", False),
        ('echo "{{ p | quote }}"', "double", False),
        ("echo 'x {{ p | quote }}'", "single", False),
        ('echo "$(cat -- {{ p | quote }})"', "plain", False),
        ("echo `cat {{ p | quote }}`", "plain", False),
        ('sh -c "ls {{ p | quote }}"', "double", True),
        ("/bin/bash -x -c {{ p | quote }}", "plain", True),
        ("eval {{ p | quote }}", "plain", True),
        ("{{ p | quote }} --help", "plain", True),
        ("echo 'it''s' \\\" {{ p | quote }}", "plain", False),
        ('echo x # "\n{{ p | quote }}', "plain", True),
    ],
)
def test_the_shell_context_of_a_value(template: str, context: str, code: bool) -> None:
    use = one(template)
    assert (use.context, use.code) == (context, code)


@pytest.mark.parametrize(
    ("template", "start", "dashdash", "prev"),
    [
        ("cat {{ p }}", True, False, "cat"),
        ("cat -- {{ p }}", True, True, "--"),
        ("cat --x={{ p }}", False, False, "cat"),
        ("head -n {{ p }} -- f", True, False, "-n"),
        ("a -- b; cat {{ p }}", True, False, "cat"),
        ("{% if x %}cat --{% else %}cat{% endif %} {{ p }}", True, True, "--"),
    ],
)
def test_word_positions(template: str, start: bool, dashdash: bool, prev: str) -> None:
    use = one(template)
    assert (use.word_start, use.after_dashdash, use.prev_word) == (start, dashdash, prev)


@pytest.mark.parametrize(
    ("template", "guarded"),
    [
        ("x {{ p }}", False),
        ("{% if p %}{{ p }}{% endif %}", True),
        ("{% if p is defined %}{{ p }}{% endif %}", True),
        ("{% if not p %}{% else %}{{ p }}{% endif %}", True),
        ("{% if not p %}{% elif q %}{{ p }}{% endif %}", True),
        ("{% if p %}{% else %}{{ p }}{% endif %}", False),
        ("{% if not p %}{{ p }}{% endif %}", False),
        ("{% if p and q %}{{ p }}{% endif %}", True),
        ("{% if p or q %}{{ p }}{% endif %}", False),
        ("{% if q %}{% elif p %}{{ p }}{% endif %}", True),
        ("{{ p | default('x') }}", True),
        ("{{ p if p is defined else 'x' }}", True),
        ("{% set y = p %}{% if p %}{{ y }}{% endif %}", True),
    ],
)
def test_guards(template: str, guarded: bool) -> None:
    uses = [u for u in dataflow.uses(template) if u.name == "p"]
    assert uses and all(u.guarded == guarded for u in uses), uses


FRAGMENT = st.one_of(
    st.sampled_from(["ls ", " -- ", "'", '"', "$(", ")", "`", ";", "\n", " -n ", "sh -c ", "eval ", "#", "\\", " "]),
    st.builds(
        str.format,
        st.sampled_from(
            [
                "{{{{ {} }}}}",
                "{{{{ {} | quote }}}}",
                "{{{{ {}|quote|upper }}}}",
                "{{{{ {} | int }}}}",
                "{{{{ {} | default('x') }}}}",
                "{{% if {} %}}",
                "{{% if not {} %}}",
                "{{% elif {} %}}",
                "{{% else %}}",
                "{{% endif %}}",
            ]
        ),
        st.sampled_from(["a", "b", "path"]),
    ),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(FRAGMENT, max_size=12).map("".join))
def test_the_fast_path_finds_exactly_what_the_jinja_walk_finds(template: str) -> None:
    fast = dataflow._simple_events(template)
    if fast is None:
        return
    assert dataflow.uses(template) == dataflow.uses("{# force the Jinja path #}" + template)

"""params: validation and coercion of the six types, from JSON values and from CLI words (spec 2.2, 2.6.1)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolrun import params
from toolrun.errors import ParamError
from toolrun.exec import render
from toolrun.models import EXEC_RETURN_TYPE, Param, ToolSpec
from toolrun.paramtypes import PARAM_TYPES


def tool(*declared: Param) -> ToolSpec:
    return ToolSpec(
        key="t.tool",
        name="tool",
        kind="exec",
        groups=("t",),
        public=False,
        description="",
        params=declared,
        return_type=EXEC_RETURN_TYPE,
        example="",
    )


def one(kind: str, value: Any, **constraints: Any) -> Any:
    """Validate `{"p": value}` against a single required param `p` of type `kind`."""
    return params.validate(tool(Param("p", kind, True, **constraints)), {"p": value})["p"]


# -- coercion from JSON values -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "value", "expected"),
    [
        ("str", "a b", "a b"),
        ("str", "", ""),
        ("str", 5, "5"),
        ("str", 1.5, "1.5"),
        ("int", 5, 5),
        ("int", -3.0, -3),
        ("int", " +42 ", 42),
        ("int", "-7", -7),
        ("int", 10**300, 10**300),
        ("float", 2, 2.0),
        ("float", 2.5, 2.5),
        ("float", " 1e3 ", 1000.0),
        ("float", "-0.25", -0.25),
        ("bool", True, True),
        ("bool", False, False),
        ("bool", 1, True),
        ("bool", 0, False),
        ("bool", "yes", True),
        ("bool", " OFF ", False),
        ("bool", "True", True),
        ("bool", "0", False),
        ("list", ["a", 1, None, [2]], ["a", 1, None, [2]]),
        ("list", [], []),
        ("dict", {"k": [1, {"n": None}]}, {"k": [1, {"n": None}]}),
        ("dict", {}, {}),
    ],
)
def test_each_type_coerces_the_json_values_it_accepts(kind: str, value: Any, expected: Any) -> None:
    result = one(kind, value)

    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("kind", "value"),
    [
        ("str", True),
        ("str", [1]),
        ("str", {"a": 1}),
        ("str", float("nan")),
        ("str", float("inf")),
        ("int", True),
        ("int", False),
        ("int", 1.5),
        ("int", "1.5"),
        ("int", "x"),
        ("int", ""),
        ("int", "١٢"),  # Arabic-Indic digits: only ASCII digits are a number here
        ("int", float("nan")),
        ("int", float("inf")),
        ("int", [1]),
        ("float", True),
        ("float", "nan"),
        ("float", "inf"),
        ("float", "-Infinity"),
        ("float", float("nan")),
        ("float", float("-inf")),
        ("float", "1e400"),
        ("float", "abc"),
        ("float", None.__class__),
        ("float", {"a": 1}),
        ("bool", 2),
        ("bool", 1.0),
        ("bool", "maybe"),
        ("bool", []),
        ("list", "a,b"),
        ("list", {"a": 1}),
        ("list", [1, float("nan")]),
        ("list", [[[float("inf")]]]),
        ("dict", [["a", 1]]),
        ("dict", "{}"),
        ("dict", {"a": {"b": float("nan")}}),
        ("dict", {1: "non-str key"}),
    ],
)
def test_each_type_rejects_what_it_cannot_be_with_a_param_error_naming_the_param(kind: str, value: Any) -> None:
    with pytest.raises(ParamError, match="'p'"):
        one(kind, value)


@pytest.mark.parametrize("kind", ["int", "float", "str"])
def test_bool_is_never_accepted_as_a_number_or_text(kind: str) -> None:
    with pytest.raises(ParamError, match=f"'p' expects {kind}, got bool"):
        one(kind, True)


@pytest.mark.parametrize(
    ("kind", "value"),
    [
        ("str", "a\0b"),
        ("str", "lone \ud800 surrogate"),
        ("list", ["ok", "a\0b"]),
        ("list", [["deep", "\udfff"]]),
        ("dict", {"k\0": "v"}),
        ("dict", {"k": "v\0"}),
        ("dict", {"\ud83d": 1}),
        ("dict", {"k": [{"x": "\udc80"}]}),
    ],
)
def test_nul_bytes_and_lone_surrogates_are_rejected_anywhere_in_a_value(kind: str, value: Any) -> None:
    with pytest.raises(ParamError, match="'p'"):
        one(kind, value)


@pytest.mark.parametrize(
    ("kind", "value"),
    [
        ("int", "9" * 5000),
        ("int", 10**5000),
        ("str", 10**5000),
        ("float", 10**400),
        ("float", 10**5000),
        ("list", [10**5000]),
        ("dict", {"n": -(10**5000)}),
        ("list", [[[[["x"]]]]] * 2 + [json.loads("[" * 70 + "]" * 70)]),
    ],
    ids=["digits", "int", "int-as-str", "float-1e400", "float-1e5000", "list", "dict", "nesting"],
)
def test_absurd_numbers_and_nesting_are_param_errors_not_crashes(kind: str, value: Any) -> None:
    with pytest.raises(ParamError, match="'p'"):
        one(kind, value)


def test_an_int_past_its_maximum_is_reported_even_when_huge() -> None:
    with pytest.raises(ParamError, match="above the maximum 100"):
        one("int", 10**1000, max=100)


# -- constraints ---------------------------------------------------------------------------------


def test_enum_accepts_only_its_values() -> None:
    assert one("str", "b", enum=("a", "b")) == "b"
    with pytest.raises(ParamError, match="'p' must be one of 'a', 'b'; got 'c'"):
        one("str", "c", enum=("a", "b"))


def test_enum_applies_after_coercion() -> None:
    assert one("int", "2", enum=(1, 2)) == 2


def test_pattern_must_match_the_whole_value() -> None:
    assert one("str", "abc", pattern="[a-z]+") == "abc"
    with pytest.raises(ParamError, match="does not match"):
        one("str", "abc1", pattern="[a-z]+")
    with pytest.raises(ParamError, match="does not match"):
        one("str", "-abc", pattern="[a-z]+")


def test_pattern_applies_to_each_list_item() -> None:
    assert one("list", ["a", "b"], pattern="[a-z]") == ["a", "b"]
    with pytest.raises(ParamError, match="'B' does not match"):
        one("list", ["a", "B"], pattern="[a-z]")


@pytest.mark.parametrize(
    ("kind", "ok", "low", "high"),
    [
        ("int", [2, 5], 1, 6),
        ("float", [2.0, 5.0], 1.99, 5.01),
        ("str", ["ab", "abcde"], "a", "abcdef"),
        ("list", [[1, 2], [1, 2, 3, 4, 5]], [1], [1, 2, 3, 4, 5, 6]),
    ],
)
def test_min_and_max_bound_numbers_and_lengths_inclusively(kind: str, ok: list[Any], low: Any, high: Any) -> None:
    for value in ok:
        assert one(kind, value, min=2, max=5) == value
    with pytest.raises(ParamError, match="below the minimum 2"):
        one(kind, low, min=2, max=5)
    with pytest.raises(ParamError, match="above the maximum 5"):
        one(kind, high, min=2, max=5)


# -- the whole call ------------------------------------------------------------------------------


def test_missing_required_param_is_named_with_its_type_and_the_tool() -> None:
    with pytest.raises(ParamError, match=r"missing required parameter 'path' \(str\) for t.tool"):
        params.validate(tool(Param("path", "str", True)), {})


def test_null_for_a_required_param_counts_as_missing() -> None:
    with pytest.raises(ParamError, match="missing required parameter 'path'"):
        params.validate(tool(Param("path", "str", True)), {"path": None})


def test_unknown_param_is_named_with_the_accepted_ones() -> None:
    with pytest.raises(ParamError, match=r"unknown parameter 'pth' for t.tool \(accepted: path, depth\)"):
        params.validate(tool(Param("path", "str", True), Param("depth", "int", False)), {"path": "/", "pth": 1})


def test_absent_optional_params_are_bound_to_their_default_or_left_out() -> None:
    spec = tool(Param("a", "int", False, default=3), Param("b", "str", False), Param("c", "bool", False))

    assert params.validate(spec, {}) == {"a": 3}
    assert params.validate(spec, {"a": None, "c": "yes"}) == {"a": 3, "c": True}


def test_an_fn_tool_gets_none_for_an_absent_optional_param_without_default() -> None:
    spec = replace(tool(Param("a", "int", False, default=3), Param("b", "str", False)), kind="fn")

    assert params.validate(spec, {}) == {"a": 3, "b": None}


def test_a_call_cannot_change_a_list_or_dict_default_for_the_next_call() -> None:
    spec = tool(Param("tags", "list", False, default=["x"]), Param("opts", "dict", False, default={"k": [1]}))

    first = params.validate(spec, {})
    first["tags"].append("changed")
    first["opts"]["k"].append(2)

    assert params.validate(spec, {}) == {"tags": ["x"], "opts": {"k": [1]}}


# -- CLI words -----------------------------------------------------------------------------------

CLI_TOOL = tool(
    Param("s", "str", False),
    Param("n", "int", False),
    Param("f", "float", False),
    Param("b", "bool", False),
    Param("items", "list", False),
    Param("d", "dict", False),
)


def cli(*words: str) -> dict[str, Any]:
    """parse_cli_args, then validate, as `toolrun call` does."""
    return {k: v for k, v in params.validate(CLI_TOOL, params.parse_cli_args(CLI_TOOL, words)).items() if v is not None}


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (["s=hello world"], {"s": "hello world"}),
        (["s="], {"s": ""}),
        (["s=a=b"], {"s": "a=b"}),
        (['s:="json text"'], {"s": "json text"}),
        (["n=42"], {"n": 42}),
        (["n:=42"], {"n": 42}),
        (["f=0.5"], {"f": 0.5}),
        (["f:=1"], {"f": 1.0}),
        (["b=true"], {"b": True}),
        (["b=no"], {"b": False}),
        (["b:=false"], {"b": False}),
        (["items=a"], {"items": ["a"]}),
        (["items=a", "items=b c", "items="], {"items": ["a", "b c", ""]}),
        (['items:=["a", 1]'], {"items": ["a", 1]}),
        (['items:=["a"]', "items=b"], {"items": ["a", "b"]}),
        (['d={"k": "v"}'], {"d": {"k": "v"}}),
        (['d:={"k": [1]}'], {"d": {"k": [1]}}),
        (["s=x", "n=1", "b=on"], {"s": "x", "n": 1, "b": True}),
    ],
)
def test_cli_words_coerce_to_the_declared_types(words: list[str], expected: dict[str, Any]) -> None:
    assert cli(*words) == expected


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (["s"], "not of the form name=value"),
        (["=v"], "not of the form name=value"),
        ([":=1"], "not of the form name=value"),
        (["nope=1"], "unknown parameter 'nope'"),
        (["nope:=1"], "unknown parameter 'nope'"),
        (["n:=not json"], "'n'"),
        (["n:="], "'n'"),
        (["d=not json"], "'d' expects dict"),
        (["d=[1]"], "'d' expects dict"),
        (["n=1.5"], "'n' expects int"),
        (["f=nan"], "'f'"),
        (["f:=NaN"], "'f'"),
        (["f:=Infinity"], "'f'"),
        (["items:=[NaN]"], "'items'"),
        (["b=maybe"], "'b' expects bool"),
        (["s=a\0b"], "'s'"),
        (["items=\ud800"], "'items'"),
        (["d:=" + "[" * 100_000], "'d'"),
    ],
)
def test_bad_cli_words_are_param_errors_naming_the_param(words: list[str], message: str) -> None:
    with pytest.raises(ParamError, match=message.replace("[", r"\[")):
        cli(*words)


# -- properties ----------------------------------------------------------------------------------

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([63, 400, 5000]).map(lambda digits: -(10**digits)),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(st.characters(codec=None, categories=None), max_size=8),  # NUL and lone surrogates included
    st.sampled_from(["", "0", "1", "true", " 7 ", "1e999", "nan", "-inf", "9" * 5000, "a\0", "\udc80"]),
)
JSON_ISH = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=4), children, max_size=4),
    max_leaves=12,
)
CONSTRAINTS = st.fixed_dictionaries(
    {},
    optional={
        "enum": st.lists(SCALARS, min_size=1, max_size=3).map(tuple),
        "pattern": st.sampled_from(["[a-z]+", ".*", "[0-9]{1,3}"]),
        "min": st.floats(-10, 10),
        "max": st.floats(-10, 10),
    },
)


@settings(max_examples=250, deadline=None)
@given(kind=st.sampled_from(PARAM_TYPES), value=JSON_ISH, constraints=CONSTRAINTS, required=st.booleans())
def test_validate_raises_nothing_but_param_error_and_what_it_accepts_renders_and_serialises(
    kind: str, value: Any, constraints: dict[str, Any], required: bool
) -> None:
    spec = tool(Param("p", kind, required, **constraints))
    try:
        values = params.validate(spec, {"p": value})
    except ParamError as exc:
        assert "'p'" in str(exc)
        return
    json.dumps(values, allow_nan=False)  # stdin mode sends this
    if "p" in values:  # an optional param left out (null) is not provided: undefined in a template
        render.render("{{ p }} {{ p | quote }}", values)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(max_size=12) | st.sampled_from(["items=a", "d={", "n:=1e999", "s:=[1]"]), max_size=5))
def test_cli_parsing_raises_nothing_but_param_error(words: list[str]) -> None:
    try:
        params.validate(CLI_TOOL, params.parse_cli_args(CLI_TOOL, words))
    except ParamError:
        pass

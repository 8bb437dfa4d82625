"""Text forms shared by the doors: results as text and JSON, signatures, markdown and HTML blocks."""

from __future__ import annotations

from toolrun import formatting
from toolrun.models import EXEC_RETURN_TYPE, Param, ToolSpec


def spec(**overrides: object) -> ToolSpec:
    fields: dict[str, object] = {
        "key": "ops.disk_usage",
        "name": "disk_usage",
        "kind": "exec",
        "groups": ("ops", "public"),
        "public": True,
        "description": "Disk usage of a path.\n\nUses `du`.",
        "params": (
            Param("path", "str", True, description="Where | what", example="/var"),
            Param("depth", "int", False, default=None),
            Param("human", "bool", False, default=True),
        ),
        "return_type": EXEC_RETURN_TYPE,
        "example": "ops.disk_usage(path='/var')",
    }
    fields.update(overrides)
    return ToolSpec(**fields)  # type: ignore[arg-type]


def test_a_string_result_is_its_own_text() -> None:
    assert formatting.result_text("a\nb ") == "a\nb "


def test_a_tuple_result_is_its_python_repr() -> None:
    assert formatting.result_text((2, "out", "err\n")) == "(2, 'out', 'err\\n')"


def test_json_like_results_are_compact_json_text() -> None:
    assert formatting.result_text({"a": [1, True, None], "é": 1.5}) == '{"a": [1, true, null], "é": 1.5}'
    assert formatting.result_text(None) == ""
    assert formatting.result_text(False) == "false"


def test_other_results_are_their_str() -> None:
    class Thing:
        def __str__(self) -> str:
            return "thing"

    assert formatting.result_text(Thing()) == "thing"
    assert formatting.result_text({"x": Thing()}).startswith("{'x': ")


def test_a_tuple_result_is_a_json_object_in_json() -> None:
    assert formatting.result_json((1, "o", "e")) == {"returncode": 1, "stdout": "o", "stderr": "e"}
    assert formatting.result_json({"a": 1}) == {"a": 1}
    assert formatting.result_json({1, 2}) in ("{1, 2}", "{2, 1}")


def test_the_signature_is_python_style_with_defaults() -> None:
    assert formatting.signature(spec()) == (
        "ops.disk_usage(path: str, depth: int | None = None, human: bool = True) -> str | (int, str, str)"
    )
    assert formatting.signature(spec(params=(), return_type="unknown")) == "ops.disk_usage() -> unknown"


def test_markdown_has_the_signature_groups_description_params_and_example() -> None:
    md = formatting.markdown(spec())
    assert md.startswith("### `ops.disk_usage`\n\n```python\nops.disk_usage(path: str")
    assert "Groups: `ops`, `public`" in md
    assert "Uses `du`." in md
    assert "| `path` | str | yes |  | Where \\| what |" in md
    assert "| `human` | bool | no | true |" in md
    assert md.rstrip().endswith("Example: `ops.disk_usage(path='/var')`")


def test_html_escapes_every_catalog_string() -> None:
    evil = spec(description="<script>alert(1)</script>", params=(Param("p", "str", True, description="<b>x</b>"),))
    page = formatting.html_page([evil])
    assert "<script>" not in page and "&lt;script&gt;" in page and "&lt;b&gt;x&lt;/b&gt;" in page
    assert page.startswith("<!doctype html>")


def test_an_empty_listing_says_so() -> None:
    assert formatting.markdown_page([]) == "_No tools._\n"
    assert "<p>No tools.</p>" in formatting.html_page([])


def test_structured_result_shows_an_exec_failure_as_fields_and_an_fn_value_as_result() -> None:
    from toolrun.formatting import structured_result
    from toolrun.models import CallResult, ExecResult

    failed = ExecResult(3, "out", "err", truncated=True, bytes_kept=6, bytes_dropped=100)
    assert structured_result(CallResult("t.x", failed.value(), failed)) == {
        "key": "t.x",
        "ok": False,
        "returncode": 3,
        "stdout": "out",
        "stderr": "err",
        "timed_out": False,
        "truncated": True,
        "bytes_kept": 6,
        "bytes_dropped": 100,
    }
    assert structured_result(CallResult("t.f", {"n": 1})) == {"key": "t.f", "ok": True, "result": {"n": 1}}

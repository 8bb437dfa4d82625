"""schema/catalog.schema.json: generated from the pydantic models, committed, and never stale.

Regenerate after changing the models with either of:

    .venv/bin/python -m toolrun.catalog.schema > schema/catalog.schema.json
    UPDATE_GOLDEN=1 .venv/bin/pytest tests/test_schema.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from support.catalogs import EXAMPLES, ROOT, generate_catalog
from toolrun.catalog.schema import catalog_json_schema, catalog_json_schema_text

SCHEMA_FILE = ROOT / "schema" / "catalog.schema.json"
GOLDEN = Path(__file__).parent / "golden"


def validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text(encoding="utf-8")))


def test_the_committed_schema_matches_the_models() -> None:
    if os.environ.get("UPDATE_GOLDEN") == "1":
        SCHEMA_FILE.write_text(catalog_json_schema_text(), encoding="utf-8")
    assert SCHEMA_FILE.read_text(encoding="utf-8") == catalog_json_schema_text(), (
        "schema/catalog.schema.json is stale: run `make schema`"
    )


def test_python_m_toolrun_schema_prints_the_schema() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "toolrun.catalog.schema"], capture_output=True, text=True, timeout=60, check=True
    )
    assert proc.stdout == catalog_json_schema_text()


def test_the_schema_is_a_valid_draft_2020_12_schema() -> None:
    schema = catalog_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["additionalProperties"] is False
    tool = schema["$defs"]["ToolDef"]
    assert tool["required"] == ["name"]
    assert {"exec", "curl", "fn", "params", "stdin", "timeout", "cwd", "env", "env_file", "env_passthrough"} <= set(
        tool["properties"]
    )
    assert schema["$defs"]["ParamDef"]["properties"]["type"]["enum"] == ["str", "int", "float", "bool", "list", "dict"]


def test_the_example_catalog_validates_and_points_editors_at_the_schema() -> None:
    text = (EXAMPLES / "tools.yaml").read_text(encoding="utf-8")
    assert text.splitlines()[0] == "# yaml-language-server: $schema=../schema/catalog.schema.json"
    assert (EXAMPLES / "tools.yaml").parent.joinpath("../schema/catalog.schema.json").resolve() == SCHEMA_FILE
    assert list(validator().iter_errors(yaml.safe_load(text))) == []


def test_a_generated_catalog_validates() -> None:
    assert list(validator().iter_errors(yaml.safe_load(generate_catalog(25)))) == []


@pytest.mark.parametrize(
    "data",
    [
        {"group": "ops", "tools": [{"name": "a", "exce": "true"}]},
        {"group": "ops", "tools": [{"name": "a", "exec": "x", "curl": "y"}]},
        {"group": "ops", "tools": [{"name": "a"}]},
        {"group": "ops", "tools": [{"exec": "x"}]},
        {"group": "ops", "tools": [{"name": "a", "exec": "x", "params": [{"name": "p", "type": "integer"}]}]},
        {"group": "ops", "tools": [{"name": "a", "exec": "x", "limits": {"memory": "2 gigs"}}]},
        {"grup": "ops", "tools": []},
    ],
)
def test_broken_catalogs_fail_the_schema(data: dict[str, Any]) -> None:
    assert list(validator().iter_errors(data)) != []

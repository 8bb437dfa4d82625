"""How long each slow test took in a full run (durations.json beside this file), for the scheduler of `make test`
(support/scheduling.py): the longest work units are dealt first, so that no long test starts last and runs alone
at the end of the run while the other workers are idle.

Only the tests of 2 s or more are listed; any other test counts as `DEFAULT` seconds. A test missing from the
table (new, renamed) is only dealt later than it could be: refresh the table now and then from a full run's JUnit
report (`make pytest` writes build/pytest-parallel.xml: `python tests/support/durations.py build/pytest-parallel.xml`).
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from functools import cache
from pathlib import Path

TABLE = Path(__file__).with_name("durations.json")
DEFAULT = 0.2  # seconds of a test not in the table
LISTED = 2.0  # seconds from which a test is listed


@cache
def table() -> dict[str, float]:
    try:
        data = json.loads(TABLE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.items()} if isinstance(data, dict) else {}


def seconds(nodeid: str) -> float:
    return table().get(nodeid, DEFAULT)


def nodeid(classname: str, name: str) -> str:
    """A JUnit testcase's node id: `tests.test_x.speedups-off` + `test_y[a]` -> `tests/test_x.py::speedups-off::
    test_y[a]` (a class, or a door file's speedups-off copy, after the module)."""
    parts = classname.split(".")
    return "::".join([f"{parts[0]}/{parts[1]}.py", *parts[2:], name])


def from_junit(report: Path) -> dict[str, float]:
    times: dict[str, float] = {}
    for case in ET.parse(report).iter("testcase"):
        took = float(case.get("time") or 0)
        if took >= LISTED:
            key = nodeid(case.get("classname") or "", case.get("name") or "")
            times[key] = round(times.get(key, 0.0) + took, 1)
    return dict(sorted(times.items()))


if __name__ == "__main__":
    TABLE.write_text(json.dumps(from_junit(Path(sys.argv[1])), indent=0) + "\n", encoding="utf-8")

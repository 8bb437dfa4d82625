"""What a load is asked for (LoadOptions) and what it gives back (Catalog)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..errors import Problem
from ..models import ToolSpec


@dataclass
class Catalog:
    """The loaded tools, by key, sorted; plus any warnings found while loading."""

    tools: dict[str, ToolSpec]
    warnings: list[Problem] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.tools)


@dataclass(frozen=True)
class LoadOptions:
    default_timeout: float = 60.0
    max_output: int = 10 * 1024 * 1024
    cache_dir: Path | None = None
    check: bool = False  # validate-catalog: exact positions for every finding, never cached
    curl_protocols: tuple[str, ...] = ("http", "https")  # curl tools' `--proto` unless they set `protocols`
    sandbox_default: str = ""  # the profile exec tools that say nothing run in ("": none)

"""The patches of dependencies' private APIs fit the installed versions, and say so loudly when not.

cli/fastcoerce.py replaces a Typer internal (option coercion without pydantic), cli/helpwords.py the help
placeholders; server/protocol.py subclasses uvicorn's httptools protocol and overrides private methods
(deadlines and a size cap on request heads and bodies); server/mcp/fast.py reuses private pieces of the
MCP SDK; server/loop.py overrides a private method of asyncio's selector loop and calls three more.
pyproject.toml bounds these packages (and Python) to the versions they were written for; these tests
fail, naming the patch, on a version whose internals moved."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from toolrun import speedups
from toolrun.cli import fastcoerce
from toolrun.server import loop, protocol

ROOT = Path(__file__).resolve().parent.parent


def test_the_typer_patch_fits_the_installed_typer() -> None:
    assert fastcoerce.typer_misfit() is None


@pytest.mark.skipif(not speedups.on("cli_coercion"), reason="TOOLRUN_SPEEDUPS turns the patch off")
def test_the_typer_patch_is_installed_and_coerces_toolruns_options() -> None:
    import typer.main

    from toolrun.cli import app

    command = typer.main.get_command(app)
    call = command.commands["call"]  # type: ignore[attr-defined]
    option = next(p for p in call.params if p.name == "input_file")
    try:
        runtime = option.get_runtime_param()  # reads self._runtime_param and self.type_descriptor
    except AttributeError as exc:
        pytest.fail(f"{fastcoerce.PATCH} does not fit this Typer: {exc}")
    assert type(runtime).__name__ == "FastParam", fastcoerce.PATCH


def test_the_typer_check_names_the_patch_when_typer_internals_are_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer import core as typer_core
    from typer._coercion import RuntimeParam

    monkeypatch.delattr(typer_core._TyperParameter, "get_runtime_param")
    misfit = fastcoerce.typer_misfit()
    assert misfit is not None and fastcoerce.PATCH in misfit and "get_runtime_param is gone" in misfit
    monkeypatch.undo()

    def changed(self: object, value: object, ctx: object) -> object:  # a signature the patch does not fit
        return value

    monkeypatch.setattr(RuntimeParam, "_coerce_value", changed)
    misfit = fastcoerce.typer_misfit()
    assert misfit is not None and fastcoerce.PATCH in misfit and "_coerce_value" in misfit


def test_the_uvicorn_protocol_fits_the_installed_uvicorn() -> None:
    assert protocol.uvicorn_misfit() is None
    assert protocol.http_protocol(1.0).__name__ == "GuardedHttpToolsProtocol"


def test_serve_refuses_a_uvicorn_whose_protocol_internals_moved(monkeypatch: pytest.MonkeyPatch) -> None:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    monkeypatch.delattr(HttpToolsProtocol, "_unsupported_upgrade_warning")
    with pytest.raises(RuntimeError, match=re.escape(protocol.PATCH)) as caught:
        protocol.http_protocol(1.0)
    assert "_unsupported_upgrade_warning" in str(caught.value)


def test_pyproject_bounds_both_patched_packages_to_the_installed_minor_version() -> None:
    from importlib.metadata import version

    from packaging.requirements import Requirement

    deps = {
        Requirement(d).name: Requirement(d)
        for d in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    }
    for name in ("typer", "uvicorn", "mcp"):
        spec = deps[name].specifier
        assert any(s.operator == "<" for s in spec), f"{name} needs an upper bound: a patch relies on its internals"
        assert version(name) in spec, (name, version(name), str(spec))


def test_the_shutdown_hook_fits_the_installed_uvicorn() -> None:
    """server/run.py overrides `uvicorn.Server.shutdown` to end MCP event streams before the drain
    (tests/test_mcp_stream.py proves the effect); the method it extends must still be there."""
    import inspect

    import uvicorn

    assert list(inspect.signature(uvicorn.Server.shutdown).parameters) == ["self", "sockets"]


def test_the_mcp_fast_path_finds_the_sdk_pieces_it_reuses() -> None:
    """server/mcp/fast.py answers plain `tools/call` requests with pieces of the MCP SDK, some private: without
    them it turns itself off (every request goes to the SDK); tests/test_mcp_fast.py proves the answers equal."""
    import inspect

    from mcp.server.runner import ServerRunner
    from mcp.server.transport_security import TransportSecurityMiddleware

    from toolrun.server.mcp import fast as mcp_fast

    assert mcp_fast.AVAILABLE, "server/mcp/fast.py: an SDK private it imports is gone"
    assert list(inspect.signature(ServerRunner._serialize).parameters) == ["self", "method", "version", "result"]
    assert list(inspect.signature(TransportSecurityMiddleware._validate_host).parameters) == ["self", "host"]
    assert list(inspect.signature(TransportSecurityMiddleware._validate_origin).parameters) == ["self", "origin"]


def test_the_help_words_patch_fits_the_installed_typer() -> None:
    from toolrun.cli import helpwords

    assert helpwords.help_misfit() is None


def test_the_help_words_check_names_the_patch_when_typer_internals_move(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer import core as typer_core

    from toolrun.cli import helpwords

    monkeypatch.delattr(typer_core.TyperArgument, "_usage_display_name")
    misfit = helpwords.help_misfit()
    assert misfit is not None and helpwords.PATCH in misfit and "_usage_display_name is gone" in misfit


def test_the_server_loop_fits_this_pythons_asyncio() -> None:
    assert loop.asyncio_misfit() is None
    assert loop.server_loop() == "toolrun.server.loop:ServerLoop"


def test_serve_refuses_a_python_whose_asyncio_internals_moved(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio.selector_events

    base = asyncio.selector_events.BaseSelectorEventLoop

    def moved(self: object, protocol_factory: object, sock: object) -> None:  # a signature the override does not fit
        return None

    monkeypatch.setattr(base, "_start_serving", moved)
    with pytest.raises(RuntimeError, match=re.escape(loop.PATCH)) as caught:
        loop.server_loop()
    assert "_start_serving" in str(caught.value)
    monkeypatch.delattr(base, "_remove_reader")
    misfit = loop.asyncio_misfit()
    assert misfit is not None and "_remove_reader(self, fd) is gone or changed" in misfit


def test_requires_python_is_bounded_and_holds_this_python() -> None:
    import platform

    from packaging.specifiers import SpecifierSet

    spec = SpecifierSet(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"])
    assert any(s.operator == "<" for s in spec), "server/loop.py overrides asyncio internals: bound Python above"
    assert platform.python_version() in spec

"""Sandbox profiles: what one file declares and its tools ask for, then resolved over the whole catalog.

A file's load turns `sandbox:` (true, false, a profile's name, or a mapping) into a `Sandbox` naming
the profile it starts from, and each of the file's `sandboxes:` entries into a named declaration. Both
are cached with the file. Once every file is loaded, `resolve` gives each exec and curl tool its
finished sandbox: the profile's settings and the tool's own together (lists joined, scalars replaced),
`network` none for exec and host for curl unless said, and the `sandbox_default` setting applied to
the exec tools that say nothing. A profile is declared once, in any file, and used from every file.
"""

from __future__ import annotations

import os
import pwd
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..errors import Problem
from ..exec.sandbox import SANDBOX_USER, SYSTEM_READ_ONLY, engine, hide, holds_root, refused_path, resolve_path
from ..models import Sandbox, ToolSpec
from .loadcontext import Declared, LoadContext

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from .schema import CatalogFile, SandboxOptions

_OFF_WORDS = ("", "off", "false", "no", "none", "0")
_ON_WORDS = ("on", "true", "yes", "1", "default")


def sandbox_of(ctx: LoadContext, value: Any, kind: str, key: str, loc: tuple[Any, ...]) -> Sandbox | None:
    """The tool's `sandbox:` as a Sandbox to resolve later (None: not said); fn tools cannot have one."""
    if value is None:
        return None
    if kind == "fn":
        ctx.problem(
            (*loc, "sandbox"),
            key,
            "fn tools run inside the server and cannot be sandboxed: remove `sandbox:` (or make it an exec tool)",
        )
        return None
    if value is True:
        return Sandbox(profile="default")
    if value is False:
        return Sandbox(enabled=False)
    if isinstance(value, str):
        return Sandbox(profile=value)
    if not _plain_paths(ctx, value, (*loc, "sandbox"), key):
        return None
    return options_of(ctx.path.parent, value, value.profile or "default")


def _plain_paths(ctx: LoadContext, value: SandboxOptions, loc: tuple[Any, ...], key: str) -> bool:
    """False (with a problem) when a path holds a NUL byte: no file can have such a name."""
    for name in ("readable", "writable"):
        for path in getattr(value, name) or ():
            if "\0" in path:
                ctx.problem((*loc, name), key, f"sandbox {name} path {path!r} holds a NUL byte: no path can")
                return False
    return True


def options_of(base: Path, value: SandboxOptions, profile: str) -> Sandbox:
    """What a `sandbox:` mapping or a profile adds to `profile`, its paths resolved from the directory `base`."""
    return Sandbox(
        profile=profile,
        network=value.network or "",
        readable=tuple(resolve_path(p, base) for p in value.readable or ()),
        writable=tuple(resolve_path(p, base) for p in value.writable or ()),
        tmp_size=value.tmp_size,
    )


def declare_profiles(ctx: LoadContext, head: CatalogFile) -> None:
    """The file's `sandboxes:` entries, into `ctx.declared`."""
    for name, definition in (head.sandboxes or {}).items():
        line, col = ctx.locate.key(("sandboxes", name))
        if name == "default":
            ctx.problem_at((line, col), "", "sandbox profile `default` is built in: give yours another name")
            continue
        if not _plain_paths(ctx, definition, ("sandboxes", name), ""):
            continue
        declared = options_of(ctx.path.parent, definition, definition.extends or "default")
        ctx.declared.append(Declared(name, declared, ctx.name, line, col))


class _Resolver:
    def __init__(self, declared: list[Declared], problems: list[Problem]) -> None:
        self.problems = problems
        self.declared: dict[str, Declared] = {}
        for item in declared:
            first = self.declared.get(item.name)
            if first is not None:
                where = f"{first.file}:{first.line}"
                self.error(item, f"sandbox profile {item.name!r} is declared twice (first at {where})")
                continue
            self.declared[item.name] = item
        self.done: dict[str, Sandbox | None] = {"default": Sandbox(profile="default")}

    def error(self, item: Declared, message: str) -> None:
        self.problems.append(Problem(item.file, item.line, item.col, "", message))

    def profile(self, name: str, chain: tuple[str, ...] = ()) -> Sandbox | None:
        """The finished profile `name` (None: unknown, or in a cycle: reported once)."""
        if name in self.done:
            return self.done[name]
        item = self.declared.get(name)
        if item is None:
            return None
        if name in chain:
            self.error(item, f"sandbox profiles extend each other in a circle: {' -> '.join((*chain, name))}")
            self.done[name] = None
            return None
        base = self.profile(item.sandbox.profile, (*chain, name))
        if base is None and item.sandbox.profile not in self.done:
            self.error(item, f"sandbox profile {name!r} extends {item.sandbox.profile!r}, which is not declared")
        self.done[name] = None if base is None else replace(combine(base, item.sandbox), profile=name)
        return self.done[name]


def combine(base: Sandbox, own: Sandbox) -> Sandbox:
    """`own` on top of `base`: paths added (once each), network and tmp_size replaced when `own` sets them."""
    return Sandbox(
        profile=base.profile,
        network=own.network or base.network,
        readable=tuple(dict.fromkeys((*base.readable, *own.readable))),
        writable=tuple(dict.fromkeys((*base.writable, *own.writable))),
        tmp_size=own.tmp_size if own.tmp_size is not None else base.tmp_size,
    )


def default_profile(setting: str) -> str | None:
    """The profile the `sandbox_default` setting names (None: off)."""
    word = setting.strip()
    if word.lower() in _OFF_WORDS:
        return None
    return "default" if word.lower() in _ON_WORDS else word


def resolve(
    tools: dict[str, ToolSpec], declared: list[Declared], setting: str, problems: list[Problem], probe: bool = False
) -> dict[str, ToolSpec]:
    """Every tool with its finished sandbox (or None); problems for unknown or broken profiles, and a warning
    for each sandboxed tool when this host cannot enforce a sandbox (`probe`: run bwrap once to know)."""
    default = default_profile(setting)
    if not declared and default is None and all(t.sandbox is None for t in tools.values()):
        return tools  # the common case: no sandbox anywhere, nothing to do
    resolver = _Resolver(declared, problems)
    if default is not None and resolver.profile(default) is None:
        problems.append(
            Problem("-", 1, 1, "", f"setting sandbox_default names sandbox profile {default!r}, which no file declares")
        )
        default = None
    out: dict[str, ToolSpec] = {}
    for key, tool in tools.items():
        wanted = tool.sandbox
        if wanted is None and default is not None and tool.kind == "exec":
            wanted = Sandbox(profile=default)
        out[key] = tool if wanted is None else replace(tool, sandbox=_finish(resolver, tool, wanted))
    boxed = [t for t in out.values() if t.sandbox is not None]
    # The catalog files and env files: hidden from every sandbox (other tools' `env:` values, the sandboxes).
    hide({*(t.file for t in tools.values()), *(t.env_file for t in tools.values()), *(d.file for d in declared)})
    _host_warnings(boxed, probe, problems)
    _shared_user_errors(boxed, [t for t in out.values() if t.sandbox is None and t.user], problems)
    if probe:
        _own_file_warnings(boxed, tools, problems)
        _shared_warnings(boxed, problems)
        _unsandboxed_cwd_warnings(boxed, [t for t in out.values() if t.sandbox is None and t.cwd], problems)
    return out


def _own_files(tools: dict[str, ToolSpec]) -> Iterator[tuple[ToolSpec, str]]:
    """Each catalog file and env file once, resolved, with the first tool that names it (each path resolved once)."""
    seen: set[str] = set()
    said: set[str] = set()
    for t in tools.values():
        for path in (t.file, t.env_file):
            if not path or path in seen:
                continue
            seen.add(path)
            real = os.path.realpath(path)
            if real not in said:
                said.add(real)
                yield t, real


def _own_file_warnings(boxed: list[ToolSpec], tools: dict[str, ToolSpec], problems: list[Problem]) -> None:
    """validate-catalog, for each catalog file and env file while sandboxed tools exist:

    - one directly in /etc or /usr, which every sandbox shows: a folder holding toolrun's files is shown as a copy
      without them, but /etc itself is shown whole, so such a file is covered by a mount over its name only, and
      replacing it by rename while a sandboxed call runs shows that call the new file;
    - one with more than one name (a hard link): sandboxes hide it by name, so a sandbox that binds a folder holding
      another of its names shows it there (docs/security.md)."""
    if not boxed:
        return
    for t, real in _own_files(tools):
        if os.path.dirname(real) in SYSTEM_READ_ONLY:
            message = (
                f"{real} lies directly in {os.path.dirname(real)}, which every sandbox shows: replaced by rename "
                "while a sandboxed call runs, it shows there (keep it in a folder of its own, such as /etc/toolrun/)"
            )
            problems.append(Problem(t.file, t.line, t.col, t.key, message, "warning"))
        try:
            names = os.stat(real).st_nlink
        except OSError:
            continue
        if names > 1:
            message = (
                f"{real} has {names} names (hard links): sandboxes hide it by this name only, so one that binds "
                "a folder holding another of its names shows it there (give the file one name)"
            )
            problems.append(Problem(t.file, t.line, t.col, t.key, message, "warning"))


def _shared_warnings(boxed: list[ToolSpec], problems: list[Problem]) -> None:
    """validate-catalog: a tool's bound path under another tool's `writable:` path (that tool decides what is there;
    a link it makes there fails the other's calls, but the content is its to choose)."""
    writers = [(t.key, w) for t in boxed if t.sandbox is not None for w in t.sandbox.writable]
    for t in boxed:
        assert t.sandbox is not None
        for path in dict.fromkeys((*t.sandbox.readable, *t.sandbox.writable, *((t.cwd,) if t.cwd else ()))):
            for key, root in writers:
                if key != t.key and (path == root or path.startswith(root.rstrip("/") + "/")):
                    message = (
                        f"its sandbox binds {path}, under tool {key}'s writable path {root}: {key} decides what "
                        "this tool sees there (give each tool folders of its own)"
                    )
                    problems.append(Problem(t.file, t.line, t.col, t.key, message, "warning"))
                    break


def _unsandboxed_cwd_warnings(boxed: list[ToolSpec], plain: list[ToolSpec], problems: list[Problem]) -> None:
    """validate-catalog: a tool without a sandbox whose `cwd` lies under a sandboxed tool's `writable:` path: the
    sandboxed tool decides what the other finds there (a script, a Makefile, a `.env`) and runs outside any
    sandbox, as the server's user."""
    writers = [(t.key, w) for t in boxed if t.sandbox is not None for w in t.sandbox.writable]
    for t in plain:
        assert t.cwd is not None
        found = next(((k, r) for k, r in writers if t.cwd == r or t.cwd.startswith(r.rstrip("/") + "/")), None)
        if found is not None:
            key, root = found
            message = (
                f"it runs without a sandbox in {t.cwd}, under sandboxed tool {key}'s writable path {root}: {key} "
                "decides what this tool finds (and may run) there, outside any sandbox (give it a folder of its own)"
            )
            problems.append(Problem(t.file, t.line, t.col, t.key, message, "warning"))


def _shared_user_errors(boxed: list[ToolSpec], plain: list[ToolSpec], problems: list[Problem]) -> None:
    """A load error: a tool without a sandbox whose `user:` is the user a sandboxed tool runs as (its `user:`, or
    SANDBOX_USER for a root server's tool without one). On the host it would be that user, outside every namespace,
    and so own the user namespace of every such jail (the kernel then grants it every capability there: being
    non-dumpable protects nothing): it could read a sandboxed call's environment, write to its pipes and trace it,
    and give a jail waiting for its call (the jail pool) its own command, which reads that call's words (secrets
    included) and answers in its place."""
    as_root = os.geteuid() == 0
    users: dict[str | int, str] = {}
    for t in boxed:
        user = t.user or (SANDBOX_USER if as_root else None)
        if user is not None:
            users.setdefault(_uid(user), t.key)
    for t in plain:
        key = users.get(_uid(t.user)) if t.user else None
        if key is not None:
            message = (
                f"it runs as {t.user} without a sandbox, the user sandboxed tool {key} runs as: on the host it could "
                f"read {key}'s calls (their environment, stdin and output), trace them and take them over, waiting "
                f"jails included; give it another `user:` (one no sandboxed tool runs as), or a sandbox"
            )
            problems.append(Problem(t.file, t.line, t.col, t.key, message))


def _uid(user: str) -> str | int:
    """The user id `user` names (two names of one id are one user to the kernel), or the name when none does."""
    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        return user


def _host_warnings(boxed: list[ToolSpec], probe: bool, problems: list[Problem]) -> None:
    """Warnings for what would fail sandboxed calls on this host: no working bwrap; with `probe` (validate-catalog,
    which also runs bwrap once), a `writable` path that does not exist."""
    found = engine(probe=probe) if boxed else None
    for t in boxed:
        reasons = [] if found is None or found.ok else [f"its sandbox cannot be enforced on this host: {found.problem}"]
        if probe and t.sandbox is not None:
            reasons += [f"writable path {p} does not exist here" for p in t.sandbox.writable if not os.path.exists(p)]
        for reason in reasons:
            problems.append(Problem(t.file, t.line, t.col, t.key, f"{reason}; its calls will fail", "warning"))


def _finish(resolver: _Resolver, tool: ToolSpec, wanted: Sandbox) -> Sandbox | None:
    if not wanted.enabled or tool.kind == "fn":
        return None
    base = resolver.profile(wanted.profile)
    if base is None:
        known = ", ".join(sorted({"default", *resolver.declared})) or "default"
        message = f"sandbox profile {wanted.profile!r} is not declared (known: {known})"
        if wanted.profile in resolver.declared:
            message = f"sandbox profile {wanted.profile!r} is broken (see the error at its declaration)"
        resolver.problems.append(Problem(tool.file, tool.line, tool.col, tool.key, message))
        return None
    done = combine(base, wanted)
    if not done.network:
        done = replace(done, network="host" if tool.kind == "curl" else "none")
    for path in (*done.readable, *done.writable, *((tool.cwd,) if tool.cwd else ())):
        why = refused_path(path, cwd=path == tool.cwd)
        if why is not None:
            message = f"its sandbox may not bind {why}"
            resolver.problems.append(Problem(tool.file, tool.line, tool.col, tool.key, message))
            return None
    why = holds_root(tool.user) if tool.user is not None else None
    if why is not None:
        message = (
            f"it is sandboxed and runs as user {tool.user} ({why}): a sandbox never holds root; remove `user:` "
            f"(a root server's sandboxed tools run as {SANDBOX_USER}) or the sandbox"
        )
        resolver.problems.append(Problem(tool.file, tool.line, tool.col, tool.key, message))
        return None
    return done

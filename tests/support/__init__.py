"""What the tests (and the bench/ scripts) share; pytest's own fixtures and hooks stay in tests/conftest.py.

- `servers`: start real processes (`toolrun serve`, redis-server, nginx) on free ports, wait until ready, stop, logs
  (`ToolrunServer` is the one way a test starts a server process);
- `procs`: what is left of a tool's processes, read from /proc;
- `http`: plain HTTP against a real server (the JSON header, a raw request), and a loopback HTTP server (`local_http`);
- `app`: the in-process app of the HTTP tests (build_app behind a Starlette TestClient);
- `mcp`: the MCP tests' catalog, `toolrun serve` and the SDK's clients;
- `catalogs`: where things are, writing a catalog, generating a big one, the sleeping tools;
- `keys`: API keys, minted through the CLI or in-process;
- `jobs`: named users and the job actions (approve, deny, cancel, follow) over HTTP; the approval catalog;
- `binaries`: a system binary a test needs (skipped locally when missing, a failure under CI=true);
- `otlp`: a real OTLP/HTTP trace receiver;
- `jails`, `sysusers`: the sandbox tests' folders and fixtures, and running toolrun as a user that is not root;
- `speedups`: a speed trick turned off (or held) for one test;
- `clock`: an injected clock instead of a sleep;
- `scheduling`: how `make test` hands tests to pytest-xdist workers (door copies, files that run on one worker).

tests/ is on sys.path (pytest's rootdir conftest; the bench/ scripts add it): `from support.servers import ...`.
"""

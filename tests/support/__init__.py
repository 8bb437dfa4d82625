"""What the tests (and the bench/ scripts) share; pytest's own fixtures and hooks stay in tests/conftest.py.

- `servers`: start real processes (`toolrun serve`, redis-server, nginx) on free ports, wait until ready, stop, logs;
- `procs`: what is left of a tool's processes, read from /proc;
- `http`: plain HTTP against a real server (the JSON header, a raw request);
- `app`: the in-process app of the HTTP tests (build_app behind a Starlette TestClient);
- `mcp`: the MCP tests' catalog, `toolrun serve` and the SDK's clients;
- `catalogs`: where things are, writing a catalog, generating a big one, the sleeping tools;
- `keys`: API keys, minted through the CLI or in-process;
- `jobs`: named users and the job actions (approve, deny, cancel, follow) over HTTP;
- `binaries`: a system binary a test needs (skipped locally when missing, a failure under CI=true);
- `otlp`: a real OTLP/HTTP trace receiver.

tests/ is on sys.path (pytest's rootdir conftest; the bench/ scripts add it): `from support.servers import ...`.
"""

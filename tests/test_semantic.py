"""Semantic search (toolrun[semantic], installed by the test extra): the real packaged model, in process and in a
real `toolrun serve` with two workers (one model process, one cache file), scoped, and lexical when it fails."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.procs import gone, pids_matching, proc_stat, status_kib
from support.servers import ToolrunServer, wait_until
from toolrun.catalog import LoadOptions, load
from toolrun.errors import UsageError
from toolrun.models import Identity
from toolrun.registry import Registry
from toolrun.search.embedder import LocalModel, RemoteModel
from toolrun.search.semantic import Semantic, extra_installed
from toolrun.settings import Settings

ADMIN = Identity(username="root", groups=frozenset({"admin"}), anonymous=False)
OPS = Identity(username="olga", groups=frozenset({"ops"}), anonymous=False)

CATALOG = """\
version: 1
tools:
  - name: kill
    group: proc
    public: true
    description: Send a signal to a process by pid.
    exec: echo kill
  - name: usage
    group: disk
    public: true
    description: Show how much space a directory tree takes.
    exec: echo usage
  - name: create_invoice
    group: billing
    public: true
    description: Create an invoice for a customer with line items.
    exec: echo invoice
  - name: transcode
    group: media
    public: true
    description: Convert a video file to another codec.
    exec: echo transcode
  - name: ping
    group: net
    public: true
    description: Check that a host answers ICMP echo.
    exec: echo ping
  - name: send_message
    group: mail
    public: true
    description: Send an email message to recipients.
    exec: echo mail
"""
HIDDEN = """\
  - name: stop_program
    group: secret
    description: End a frozen application at once.
    exec: echo hidden
"""
# shares no word (nor synonym, nor related word of lexical search: `get rid of` would find kill) with proc.kill
PARAPHRASE = "finish off a frozen app"


@pytest.fixture(scope="module")
def model() -> LocalModel:
    return LocalModel()


def registry(tmp_path: Path, text: str) -> Registry:
    path = tmp_path / "tools.yaml"
    path.write_text(text, encoding="utf-8")
    return Registry(load([str(path)], {}, LoadOptions()).tools.values())


def test_the_extra_is_installed_and_the_packaged_model_embeds_by_meaning(model: LocalModel) -> None:
    assert extra_installed()
    vectors = model.embed(["restart the web server", "reboot nginx", "count the unpaid invoices"])
    assert vectors.shape == (3, 384)
    assert abs(float((vectors[0] ** 2).sum()) - 1.0) < 1e-4  # normalised
    assert float(vectors[0] @ vectors[1]) > float(vectors[0] @ vectors[2]) + 0.2


def test_a_query_sharing_no_word_with_its_tool_finds_it(tmp_path: Path, model: LocalModel) -> None:
    reg = registry(tmp_path, CATALOG)
    lexical = reg.search(ADMIN, PARAPHRASE)
    assert "proc.kill" not in [t.key for t in lexical.items]
    Semantic(model.embed, "test", tmp_path / "cache").prepare(reg, wait=True)
    page = reg.search(ADMIN, PARAPHRASE, min_score=0.0)  # a weak match (similarity 0.28): under the default floor
    assert page.items[0].key == "proc.kill"
    assert reg.search(ADMIN, "make a video smaller for phones").items[0].key == "media.transcode"
    assert reg.search(ADMIN, "invoice").items[0].key == "billing.create_invoice"  # a plain keyword still leads


def test_a_tool_the_caller_cannot_see_changes_nothing_in_their_results(tmp_path: Path, model: LocalModel) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    without = registry(tmp_path / "a", CATALOG)
    with_hidden = registry(tmp_path / "b", CATALOG + HIDDEN)
    for reg, where in ((without, "a"), (with_hidden, "b")):
        Semantic(model.embed, "test", tmp_path / where / "cache").prepare(reg, wait=True)
    admin_first = with_hidden.search(ADMIN, PARAPHRASE, min_score=0.0).items[0].key
    assert admin_first == "secret.stop_program"  # the admin sees it first
    for query in (PARAPHRASE, "application", "disk space", "send"):
        mine, theirs = without.search(OPS, query, 0, 20, 0.0), with_hidden.search(OPS, query, 0, 20, 0.0)
        assert [t.key for t in mine.items] == [t.key for t in theirs.items], query
        assert mine.total == theirs.total


def test_vectors_are_cached_per_catalog_version(tmp_path: Path, model: LocalModel) -> None:
    calls: list[int] = []

    def counting(texts: list[str]) -> Any:
        calls.append(len(texts))
        return model.embed(texts)

    cache = tmp_path / "cache"
    Semantic(counting, "test", cache).prepare(registry(tmp_path, CATALOG), wait=True)
    assert sum(calls) == 12 and len(list(cache.glob("*.npy"))) == 1  # two vectors a tool: its document, its params
    calls.clear()
    again = registry(tmp_path, CATALOG)
    Semantic(counting, "test", cache).prepare(again, wait=True)  # the same catalog: the file is reused
    assert calls == [] and again.semantic.vectors is not None
    Semantic(counting, "test", cache).prepare(registry(tmp_path, CATALOG + HIDDEN), wait=True)
    assert sum(calls) == 14 and len(list(cache.glob("*.npy"))) == 2  # a new version is embedded anew


def test_a_failing_model_leaves_search_lexical(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    def broken(texts: list[str]) -> Any:
        raise RuntimeError("model exploded")

    reg = registry(tmp_path, CATALOG)
    Semantic(broken, "test", tmp_path / "cache").prepare(reg, wait=True)
    assert reg.semantic.vectors is None
    assert reg.search(ADMIN, "invoice").items[0].key == "billing.create_invoice"
    assert "cannot embed the catalog (RuntimeError: model exploded)" in caplog.text


class Embeddings(BaseHTTPRequestHandler):
    """An OpenAI-compatible /v1/embeddings answering with the packaged model."""

    model: LocalModel
    seen: list[dict[str, Any]]

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append({"auth": self.headers.get("Authorization"), **body})
        vectors = self.model.embed(body["input"])
        data = [{"index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)][::-1]  # any order
        raw = json.dumps({"data": data}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def endpoint(model: LocalModel) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []
    handler = type("Handler", (Embeddings,), {"model": model, "seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1/embeddings", seen
    server.shutdown()
    server.server_close()


def test_an_openai_compatible_endpoint_embeds_instead(tmp_path: Path, endpoint: tuple[str, Any]) -> None:
    url, seen = endpoint
    remote = RemoteModel(url, "minilm", "s3cret")
    reg = registry(tmp_path, CATALOG)
    Semantic(remote.embed, "remote", tmp_path / "cache").prepare(reg, wait=True)
    assert reg.search(ADMIN, PARAPHRASE, min_score=0.0).items[0].key == "proc.kill"
    assert seen[0]["model"] == "minilm" and seen[0]["auth"] == "Bearer s3cret"


def test_the_settings_refuse_an_embeddings_url_that_is_not_http(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"search_embeddings_url .* expected an http:// or https:// URL"):
        Settings.load(environ={"TOOLRUN_HOME": str(tmp_path), "SVC_SEARCH_EMBEDDINGS_URL": "file:///etc/passwd"})


# -- a real server ------------------------------------------------------------------------------------


def helpers_of(server: ToolrunServer) -> list[int]:
    """Embedding helper processes started by this server's workers."""
    workers = {p for p in pids_matching("toolrun") if (s := proc_stat(p)) is not None and s[1] == server.pid}
    return [p for p in pids_matching("toolrun.search.embedder") if (s := proc_stat(p)) is not None and s[1] in workers]


def kills_first(server: ToolrunServer, key: str = "proc.kill") -> bool:
    with httpx.Client(timeout=5.0) as client:  # a new connection each time: the kernel spreads them over workers
        found = client.get(server.url + "/search", params={"q": PARAPHRASE, "min_score": "0"}).json()["items"]
    return bool(found) and found[0]["key"] == key


ARCHIVE = """\
  - name: archive
    group: mail
    public: true
    description: Move old mail to the archive folder.
    exec: echo archive
"""


def mail_archive_listed(server: ToolrunServer) -> bool:
    with httpx.Client(timeout=5.0) as client:
        return client.get(server.url + "/tools/mail.archive").status_code == 200


def test_two_workers_share_one_model_process_and_one_cache_file(tmp_path: Path) -> None:
    catalog = tmp_path / "tools.yaml"
    catalog.write_text(CATALOG, encoding="utf-8")
    settings = {"SVC_SEARCH_SEMANTIC": "true", "SVC_WORKERS": "2"}
    server = ToolrunServer(tmp_path, catalog, settings).start()
    try:
        wait_until(lambda: all(kills_first(server) for _ in range(8)), 120, "semantic results from both workers")
        helpers = helpers_of(server)
        assert len(helpers) == 1, helpers
        assert status_kib(helpers[0], "VmRSS") < 300 * 1024
        files = list((tmp_path / "home" / "cache" / "semantic").glob("*.npy"))
        assert len(files) == 1
        stamp = files[0].stat().st_mtime_ns
    finally:
        server.stop()
    assert gone(helpers, 10) == []  # the model process goes with the server
    (tmp_path / "again").mkdir()
    again = ToolrunServer(tmp_path / "again", catalog, settings, home=tmp_path / "home").start()
    try:
        wait_until(lambda: kills_first(again), 120, "semantic results after a restart")
        assert files[0].stat().st_mtime_ns == stamp  # the same catalog: its vectors are read, not embedded again
        assert "tools embedded" not in again.log()
        # a reload: the new catalog's vectors are built in the background, then both workers rank with them
        catalog.write_text(CATALOG + ARCHIVE, "utf-8")
        cache = tmp_path / "home" / "cache" / "semantic"
        wait_until(lambda: len(list(cache.glob("*.npy"))) == 2, 120, "the reloaded catalog's vectors")
        wait_until(lambda: all(mail_archive_listed(again) for _ in range(8)), 60, "the reloaded catalog")
        wait_until(lambda: all(kills_first(again) for _ in range(8)), 60, "semantic results after the reload")
    finally:
        again.stop()


@pytest.mark.parametrize("model_file", [None, b"this is not an onnx model"])
def test_a_missing_or_broken_model_leaves_the_server_searching_lexically(
    tmp_path: Path, model_file: bytes | None
) -> None:
    catalog = tmp_path / "tools.yaml"
    catalog.write_text(CATALOG, encoding="utf-8")
    model_dir = tmp_path / "model"
    if model_file is not None:
        model_dir.mkdir()
        (model_dir / "model.onnx").write_bytes(model_file)
        (model_dir / "tokenizer.json").write_text("{}", encoding="utf-8")
    settings = {"SVC_SEARCH_SEMANTIC": "true", "SVC_SEARCH_MODEL": str(model_dir)}
    server = ToolrunServer(tmp_path, catalog, settings).start()
    try:
        want = "the model is missing" if model_file is None else "the embedding helper failed"
        wait_until(lambda: want in server.log(), 60, f"{want!r} in the log")
        found = httpx.get(server.url + "/search", params={"q": "invoice"}, timeout=5).json()["items"]
        assert found[0]["key"] == "billing.create_invoice"
        assert httpx.get(server.url + "/readyz", timeout=5).status_code == 200
        # each worker's keeper tries the helper once: the other worker's try may still be loading the broken model
        wait_until(lambda: helpers_of(server) == [], 30, "no embedding helper left")
    finally:
        server.stop()


def test_nothing_heavy_is_imported_until_semantic_search_starts() -> None:
    import subprocess
    import sys

    code = (
        "import sys, toolrun.service, toolrun.search.semantic, toolrun.search.embedder, toolrun.search.vectors\n"
        "import toolrun.server.run, toolrun.cli\n"
        "print(sorted(m for m in ('numpy', 'onnxruntime', 'tokenizers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_tools_are_embedded_with_their_param_descriptions_and_keywords(tmp_path: Path) -> None:
    from toolrun.search.vectors import document

    reg = registry(tmp_path, CATALOG.replace("    exec: echo transcode\n", TRANSCODE_EXTRA))
    text = document(reg.tools["media.transcode"])
    assert text.startswith("media transcode: Convert a video file to another codec.")
    assert "shrink, phone" in text and "target codec: Codec to encode to, e.g. h264." in text


TRANSCODE_EXTRA = """\
    exec: echo transcode {{ target_codec }}
    keywords: [shrink, phone]
    params:
      - {name: target_codec, type: str, description: 'Codec to encode to, e.g. h264.'}
"""


def test_near_duplicates_take_turns_among_the_nearest_tools(model: LocalModel) -> None:
    from toolrun.search.vectors import diversify

    texts = ["show disk usage", "show the disk usage", "show disk usage now", "count the unpaid invoices"]
    vectors = model.embed(texts)
    query = model.embed(["how full is the disk"])[0]
    sims = vectors @ query
    assert list(sims.argsort()[::-1][:3]) == [0, 1, 2] or sims[3] < sims[:3].min()  # the invoices are farthest
    order = diversify(vectors[sims.argsort()[::-1]], sims[sims.argsort()[::-1]])
    nearest_first = [int(i) for i in sims.argsort()[::-1]]
    ranked = [nearest_first[i] for i in order]
    assert ranked[0] == nearest_first[0]  # the nearest stays first
    assert ranked[1] == 3  # then the one unlike it, before its near-duplicates


def test_a_catalog_batch_yields_the_cpu_to_queries() -> None:
    import os

    from toolrun.search.embedder import BATCH_NICE, yield_cpu

    seen: list[int] = []

    def batch() -> None:
        yield_cpu()
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))

    before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    worker = threading.Thread(target=batch)
    worker.start()
    worker.join()
    assert seen == [min(19, before + BATCH_NICE)] or seen == [BATCH_NICE]
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == before  # only that thread gave way


def test_the_dev_set_second_round_is_checked_like_held_out() -> None:
    bench = Path(__file__).resolve().parent.parent / "bench"
    import sys

    sys.path.insert(0, str(bench))
    try:
        import search_eval as se
    finally:
        while str(bench) in sys.path:  # search_eval adds it too; left there, bench/mcp.py would shadow the SDK
            sys.path.remove(str(bench))
    assert se.dev_overlaps() == []  # no second-round paraphrase shares a content word with its tool
    kinds = [kind for kind, _, _ in se.queries()]
    assert len(kinds) == 280 and kinds.count("paraphrase") == 80 and kinds.count("mixed") == 40


ACCOUNTS = """\
  - name: add
    group: users
    public: true
    description: Create a login for a new person on the machines.
    exec: echo add {{ login }}
    params:
      - {name: login, type: str, description: 'Login name of the person.'}
  - name: fetch
    group: http
    public: true
    description: Request a web page and print what the server answers.
    exec: echo fetch {{ address }}
    params:
      - {name: address, type: str, description: 'Where to send the request.'}
"""


def test_values_in_a_query_are_named_by_their_kind_before_it_is_embedded() -> None:
    from toolrun.search.vectors import query_text

    assert query_text("create an account for Backups@Example.com") == "create an account for email address"
    assert query_text("run uptime on root@10.0.0.7") == "run uptime on email address"
    assert query_text("fetch https://status.example.com/health?x=1 now") == "fetch url now"
    assert query_text("is port 443 open on 10.0.0.5:22") == "is port open on address"
    assert query_text("signal=KILL pid=4242 note='a b'") == "signal pid note"
    assert query_text("mute the disk alert for 2h since 2026-01-02") == "mute the disk alert for 2h since"
    assert query_text("kill 4242 'x'") == "kill"
    assert query_text("4242") == "4242"  # nothing else left: the query as typed


@pytest.mark.parametrize(
    ("query", "key"),
    [
        ("create an account for backups@example.com", "users.add"),
        ("set up deploy@ci.example.com so they can log in", "users.add"),
        ("what does https://status.example.com/health?verbose=1 answer", "http.fetch"),
        ("end the frozen application with pid 4242", "proc.kill"),
    ],
)
def test_a_query_carrying_values_still_finds_its_tool(tmp_path: Path, model: LocalModel, query: str, key: str) -> None:
    reg = registry(tmp_path, CATALOG + ACCOUNTS)
    Semantic(model.embed, "test", tmp_path / "cache").prepare(reg, wait=True)
    assert reg.search(ADMIN, query).items[0].key == key


def test_each_tool_has_a_second_vector_of_its_params(tmp_path: Path, model: LocalModel) -> None:
    from toolrun.search.vectors import params_document

    reg = registry(tmp_path, CATALOG + ACCOUNTS)
    assert params_document(reg.tools["users.add"]) == "login: Login name of the person."
    assert params_document(reg.tools["proc.kill"]) == "proc kill"  # no params: its groups and name
    Semantic(model.embed, "test", tmp_path / "cache").prepare(reg, wait=True)
    vectors = reg.semantic.vectors
    assert vectors is not None and vectors.params.shape == vectors.matrix.shape
    row = vectors.rows["users.add"]
    assert float(vectors.params[row] @ model.embed(["login: Login name of the person."])[0]) > 0.99
    assert float(vectors.matrix[row] @ model.embed(["login: Login name of the person."])[0]) < 0.9  # not the same


HIDDEN_PARAMS = """\
  - name: reaper
    group: secret
    description: Housekeeping.
    exec: echo reaper {{ pid }}
    params:
      - {name: pid, type: int, description: 'Id of the frozen application to end at once.'}
"""


def test_a_hidden_tools_params_change_nothing_in_the_callers_results(tmp_path: Path, model: LocalModel) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    without = registry(tmp_path / "a", CATALOG + ACCOUNTS)
    with_hidden = registry(tmp_path / "b", CATALOG + ACCOUNTS + HIDDEN_PARAMS)
    for reg, where in ((without, "a"), (with_hidden, "b")):
        Semantic(model.embed, "test", tmp_path / where / "cache").prepare(reg, wait=True)
    admin = [t.key for t in with_hidden.search(ADMIN, PARAPHRASE, min_score=0.0).items[:3]]
    assert "secret.reaper" in admin  # its params bring it near for whoever may see it
    for query in (PARAPHRASE, "end the application with pid 4242", "login", "frozen"):
        mine, theirs = without.search(OPS, query, 0, 20, 0.0), with_hidden.search(OPS, query, 0, 20, 0.0)
        assert [t.key for t in mine.items] == [t.key for t in theirs.items], query
        assert mine.total == theirs.total


# -- the helper ranks (the local model): the workers hold neither numpy nor the vectors ---------------


def numpy_mapped(pid: int) -> bool:
    """Whether the process has numpy's shared objects mapped (it imported numpy)."""
    return "/numpy/" in Path(f"/proc/{pid}/maps").read_text()


def test_a_servers_workers_rank_semantically_without_numpy(tmp_path: Path) -> None:
    catalog = tmp_path / "tools.yaml"
    catalog.write_text(CATALOG + HIDDEN, encoding="utf-8")
    server = ToolrunServer(tmp_path, catalog, {"SVC_SEARCH_SEMANTIC": "true", "SVC_WORKERS": "2"}).start()
    try:
        # anonymous callers see the public tools only: the hidden stop_program, nearest for the admin, is not theirs
        wait_until(lambda: all(kills_first(server) for _ in range(8)), 120, "semantic results from both workers")
        helpers = helpers_of(server)
        workers = [p for p in pids_matching("toolrun") if (s := proc_stat(p)) is not None and s[1] == server.pid]
        workers = [p for p in workers if p not in helpers]
        assert len(workers) == 2 and len(helpers) == 1, (workers, helpers)
        assert [p for p in [server.pid, *workers] if numpy_mapped(p)] == []
        assert numpy_mapped(helpers[0])  # the helper ranks
    finally:
        server.stop()


# a catalog larger than SEMANTIC_TOP, half of it hidden from OPS: the nearest lists are cut, and scoped
SUBJECTS = [
    "disk",
    "invoice",
    "video",
    "mail",
    "host",
    "process",
    "user",
    "backup",
    "cache",
    "queue",
    "log",
    "dns",
    "port",
    "cert",
    "job",
    "repo",
]
ACTIONS = ["show", "delete", "rotate", "check", "list", "copy", "restart"]


def many_tools() -> str:
    out = []
    for i, (subject, action) in enumerate((s, a) for s in SUBJECTS for a in ACTIONS):
        where = "    public: true\n" if i % 2 else ""
        out.append(
            f"  - name: {action}_{subject}\n    group: g{i % 5}\n{where}"
            f"    description: {action.capitalize()} the {subject} of the machines.\n"
            f"    exec: echo {{{{ target }}}}\n"
            f"    params:\n      - {{name: target, type: str, description: 'Which {subject} to {action}.'}}\n"
        )
    return CATALOG + HIDDEN + "".join(out)


def test_the_helper_ranks_a_scoped_view_exactly_as_this_process_would(
    tmp_path: Path, model: LocalModel, caplog: pytest.LogCaptureFixture
) -> None:
    import os
    import subprocess
    import sys

    import numpy as np

    from toolrun.search import embedder
    from toolrun.search.helper import Helper
    from toolrun.search.semantic import HelperSemantic
    from toolrun.search.vectors import document, nearest, query_text

    name = f"toolrun-semantic-test-{os.getpid()}"
    proc = subprocess.Popen([sys.executable, "-m", "toolrun.search.embedder", name])
    try:
        reg = registry(tmp_path, many_tools())
        semantic = HelperSemantic(Helper(name, ""), "test", tmp_path / "cache")
        semantic.keeper = None  # the helper is the one started above
        semantic.prepare(reg, wait=True)
        vectors = reg.semantic.vectors
        assert vectors is not None and vectors.matrix is None  # this process maps no vectors
        # the file it wrote without numpy is a .npy of the model's vectors: documents, then params
        matrix = np.load(vectors.path, mmap_mode="r")
        n = len(vectors.rows)
        assert matrix.shape == (2 * n, 384) and n > 100
        assert np.allclose(matrix[:n], model.embed([document(t) for t in reg.tools.values()]), atol=1e-4)
        scoped = reg.index(OPS)
        assert 50 < len(scoped.tools) < n
        for identity in (OPS, ADMIN):
            index = reg.index(identity)
            rows = np.array([vectors.rows[t.key] for t in index.tools])
            for query in (PARAPHRASE, "rotate the logs", "which queue is stuck", "copy user@example.com's mail"):
                vector = embedder.ask(name, [query_text(query)], 30.0)[0]
                want = (nearest(matrix[:n], rows, vector), nearest(matrix[n:], rows, vector))
                assert semantic.near(vectors, index, query)[:2] == want, (identity.username, query)
                assert len(want[0]) == 50
        assert reg.search(OPS, PARAPHRASE, min_score=0.0).items[0].key == "proc.kill"
        assert reg.search(ADMIN, PARAPHRASE, min_score=0.0).items[0].key == "secret.stop_program"
        proc.terminate()
        proc.wait(10)
        # the helper gone: search is lexical, and the log says why
        assert reg.search(OPS, "customer line items").items[0].key == "billing.create_invoice"
        assert "proc.kill" not in [t.key for t in reg.search(OPS, PARAPHRASE, min_score=0.0).items]
        assert "semantic search: cannot rank a query" in caplog.text
    finally:
        proc.terminate()
        proc.wait(10)

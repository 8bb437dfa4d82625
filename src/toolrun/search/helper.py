"""The embedding helper, a worker's side of it: supervision (start it when none answers) and its socket client.

Queries are embedded by one model session per server: a helper process (`python -m toolrun.search.embedder`) on an
abstract Unix socket named after the cache dir and the model. Every worker runs a keeper thread that starts the
helper when nothing answers there; a second helper finds the name taken and exits, so a server holds one model
(about 216 MB) whatever its worker count. The helper dies with the worker that started it (PR_SET_PDEATHSIG on
the keeper thread, which lives as long as the worker; a helper whose starter is gone before it set that exits at
once), and another worker's keeper starts a new one; a worker that is exiting starts none. The helper carries none
of the server's environment but what Python needs, and is non-dumpable (procguard.protect_helper): a tool of the
same user reads neither its environment nor its memory.
"""

from __future__ import annotations

import atexit
import logging
import subprocess
import sys
import threading
import time
from typing import Any

from ..exec.procguard import helper_env, this_python
from . import embedder

log = logging.getLogger("toolrun.search")

QUERY_TIMEOUT = 2.0  # seconds a query's embedding may take before the search answers lexically


# The helper's first statement makes it non-dumpable (before any import of toolrun's); procguard.protect_helper
# then does it again with the rest. An exec makes a process dumpable again: this is as early as it gets.
_HELPER_MAIN = (
    "import ctypes, runpy; ctypes.CDLL(None).prctl(4, 0, 0, 0, 0); "
    "runpy.run_module('toolrun.search.embedder', run_name='__main__', alter_sys=True)"
)


class Helper:
    """This worker's side of the one embedding helper of a server: asks it, and starts it when none answers."""

    def __init__(self, name: str, model_dir: str) -> None:
        self.name, self.model_dir = name, model_dir
        self.broken = ""
        self._keeper: threading.Thread | None = None
        self.stopping = threading.Event()
        atexit.register(self.stop)  # a helper started while the interpreter exits would outlive its server

    def embed(self, texts: list[str]) -> Any:
        if self.broken:
            raise RuntimeError(self.broken)
        return embedder.ask(self.name, texts, 60.0)

    def embed_raw(self, texts: list[str]) -> bytes:
        if self.broken:
            raise RuntimeError(self.broken)
        return embedder.ask_raw(self.name, texts, 60.0)

    def rank(self, ask: dict[str, Any]) -> bytes:
        """The helper's `Ranker.rank` of `ask`, as JSON."""
        if self.broken:
            raise RuntimeError(self.broken)
        return embedder.request(self.name, {"rank": ask}, QUERY_TIMEOUT)

    def embed_query(self, texts: list[str]) -> Any:
        if self.broken:
            raise RuntimeError(self.broken)
        return embedder.ask(self.name, texts, QUERY_TIMEOUT)

    def keep(self) -> None:
        """Start this process's keeper thread (once; a forked worker starts its own)."""
        if self._keeper is None or not self._keeper.is_alive():
            self._keeper = threading.Thread(target=self._keep, name="toolrun-semantic-helper", daemon=True)
            self._keeper.start()

    def _answers(self) -> bool:
        import socket

        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            try:
                sock.connect("\0" + self.name)
            except OSError:
                return False
        return True

    def start(self) -> subprocess.Popen[bytes]:
        """Start the helper: the model process, with none of this server's environment but what Python needs
        (procguard.helper_env: no secret of the operator's), non-dumpable, dying with this thread."""
        command = [sys.executable, "-c", _HELPER_MAIN, self.name, self.model_dir]
        return subprocess.Popen(
            command, executable=this_python(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=helper_env()
        )

    def stop(self) -> None:
        """Start no helper any more (the server stops): the one running ends with this process."""
        self.stopping.set()

    def _keep(self) -> None:
        """Start the helper whenever none answers; wait on the one this thread started (its death signal is tied
        to this thread, which must outlive it)."""
        while not self.broken:
            if self._answers():
                time.sleep(2.0)
                continue
            if self.stopping.is_set():
                return
            try:
                code = self.start().wait()
            except OSError as exc:
                self.broken = f"the embedding helper could not start: {exc}"
                log.warning("semantic search is off: %s", self.broken)
                return
            if code not in (0, -15):
                self.broken = f"the embedding helper failed (exit status {code}): see the log above"
                log.warning("semantic search is off: %s", self.broken)
            time.sleep(1.0)

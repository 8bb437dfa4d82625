"""The embedding helper's socket is abstract (no file, so no file permissions): the helper answers only processes of
its own user, and a worker talks only to a helper of its own user. Another local user can neither use the server's
model (nor, through it, read the vectors files it maps) nor stand in for the helper and steer search results.

Needs root (to run the other side as `nobody`): skipped otherwise, a failure under CI=true."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest

from toolrun.search import embedder

NOBODY = 65534
# The other user's side runs on the system Python with the standard library only (the venv may sit under /root).
OTHER_PYTHON = "/usr/bin/python3"

ASK = r"""
import json, socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(20)
s.connect("\0" + sys.argv[1])
payload = json.dumps({"texts": ["hello"]}).encode()
try:
    s.sendall(struct.pack("!I", len(payload)) + payload)
    head = s.recv(6)
    print("answered" if head[4:6] == b"ok" else "refused: " + repr(head))
except OSError as exc:
    print("refused: " + type(exc).__name__)
"""

FAKE_HELPER = r"""
import socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0" + sys.argv[1])
s.listen(8)
print("ready", flush=True)
while True:
    conn, _ = s.accept()
    try:
        size = struct.unpack("!I", conn.recv(4))[0]
        conn.recv(size)
        answer = b"ok" + b"\0" * (4 * 384)
        conn.sendall(struct.pack("!I", len(answer)) + answer)
    except OSError:
        pass
    conn.close()
"""


@pytest.fixture(autouse=True)
def as_root() -> None:
    if os.geteuid() != 0 or not os.path.exists(OTHER_PYTHON):
        message = f"needs root and {OTHER_PYTHON} (to run the other side as another user)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture
def helper() -> Iterator[str]:
    """The real helper with the packaged model, on a socket name of its own."""
    name = f"toolrun-test-{uuid.uuid4().hex[:12]}"
    proc = subprocess.Popen([sys.executable, "-m", "toolrun.search.embedder", name])
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                embedder.ask(name, ["hello"], 5)
                break
            except (OSError, ValueError):
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.2)
        yield name
    finally:
        proc.kill()
        proc.wait()


def test_the_helper_answers_no_other_user(helper: str) -> None:
    assert embedder.ask(helper, ["hello"], 5).shape == (1, 384)  # its own user is answered
    other = subprocess.run(
        [OTHER_PYTHON, "-I", "-c", ASK, helper], user=NOBODY, capture_output=True, text=True, timeout=60, check=True
    )
    assert other.stdout.startswith("refused"), other.stdout + other.stderr


def test_a_worker_refuses_a_helper_held_by_another_user() -> None:
    name = f"toolrun-test-{uuid.uuid4().hex[:12]}"
    fake = subprocess.Popen(
        [OTHER_PYTHON, "-I", "-c", FAKE_HELPER, name], user=NOBODY, stdout=subprocess.PIPE, text=True
    )
    try:
        assert fake.stdout is not None and fake.stdout.readline().strip() == "ready"
        with pytest.raises(OSError, match="another user"):
            embedder.ask(name, ["hello"], 5)
    finally:
        fake.kill()
        fake.wait()
        if fake.stdout is not None:
            fake.stdout.close()

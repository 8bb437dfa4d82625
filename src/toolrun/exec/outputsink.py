"""What a call keeps of a tool's output: the head and the tail up to a cap, with what was dropped counted."""

from __future__ import annotations


class OutputSink:
    """Collects up to `cap` bytes of a stream: the first half and the last half, counting what is dropped.

    Errors and summaries come at the end of an output, so the tail is kept as well as the head;
    the bytes in between are read and dropped (a flooding child costs no memory).
    """

    __slots__ = ("cap", "dropped", "head_cap", "parts", "size", "tail", "tail_cap")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.tail_cap = cap // 2
        self.head_cap = cap - self.tail_cap
        self.parts: list[bytes] = []
        self.size = 0  # bytes in `parts` (the head)
        self.tail = bytearray()
        self.dropped = 0

    def add(self, data: bytes) -> None:
        room = self.head_cap - self.size
        if room > 0:
            if len(data) <= room:
                self.parts.append(data)
                self.size += len(data)
                return
            self.parts.append(data[:room])
            self.size = self.head_cap
            data = data[room:]
        tail_cap = self.tail_cap
        if len(data) >= tail_cap:
            self.dropped += len(self.tail) + len(data) - tail_cap
            self.tail = bytearray(data[len(data) - tail_cap :]) if tail_cap else bytearray()
            return
        self.tail += data
        over = len(self.tail) - tail_cap
        if over > 0:
            del self.tail[:over]
            self.dropped += over

    @property
    def kept(self) -> int:
        return self.size + len(self.tail)

    def text(self, label: str) -> str:
        head = b"".join(self.parts)
        if not self.dropped:
            return (head + self.tail).decode("utf-8", errors="replace")
        tail = bytes(self.tail)
        skip = 0
        while skip < len(tail) and skip < 3 and tail[skip] & 0xC0 == 0x80:  # no half character at the cut
            skip += 1
        marker = (
            f"\n[toolrun: {label} truncated: kept the first {self.size} and the last {len(tail)} bytes, "
            f"dropped {self.dropped} in between]\n"
        )
        return head.decode("utf-8", errors="replace") + marker + tail[skip:].decode("utf-8", errors="replace")

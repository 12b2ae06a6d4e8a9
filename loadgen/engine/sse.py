"""Incremental Server-Sent Events parser.

Network chunks arrive cut anywhere (mid-line, mid-UTF-8 sequence, mid-`\\r\\n`). The
parser keeps one buffer, scans each byte once for line ends and hands back complete
events. It never raises on odd input: what it cannot parse it reports as a problem
string, so the client can classify the stream instead of crashing the run.
"""

from __future__ import annotations

from dataclasses import dataclass

# One event larger than this is a broken server, not a long answer.
MAX_EVENT_BYTES = 64 * 1024 * 1024
#: UTF-8's byte order mark: one at the very start of a stream is not part of its first
#: line (WHATWG); anywhere else it is, and that line is no field the rules know.
BOM = b"\xef\xbb\xbf"


@dataclass(slots=True)
class SSEEvent:
    data: bytes
    event: bytes = b""


class SSEParser:
    """Feed bytes, get complete events (per the WHATWG event-stream rules).

    Lines end with LF, CRLF or a lone CR. `data:` lines of one event are joined with
    LF; a blank line dispatches; lines starting with `:` are comments; `event:` names
    the event (an in-band `event: error` matters to us); other fields are ignored. A
    byte order mark that opens the stream is dropped (a server may write one); one
    later in the stream starts a line no field names, which is reported: a gateway that
    marks every piece it forwards would otherwise lose the events it marked.
    """

    __slots__ = ("_buf", "_data", "_event", "_has_data", "_head", "_pending_cr", "problem")

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[bytes] = []
        self._event = b""
        self._has_data = False
        self._pending_cr = False
        #: The stream's first bytes while they may still be a byte order mark; None once
        #: the start is past.
        self._head: bytes | None = b""
        self.problem: str | None = None

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        if not chunk:
            return []
        if self._head is not None:
            chunk = self._head + chunk
            if len(chunk) < len(BOM) and BOM.startswith(chunk):
                self._head = chunk  # a mark cut by the network: wait for the rest
                return []
            self._head = None
            if chunk.startswith(BOM):
                chunk = chunk[len(BOM):]
                if not chunk:
                    return []
        if self._pending_cr:
            # The previous chunk ended in CR: a following LF belongs to that line end.
            self._pending_cr = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        if b"\r" in chunk:
            if chunk.endswith(b"\r"):
                self._pending_cr = True
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        buf = self._buf + chunk if self._buf else chunk
        if not self._has_data and not self._event:
            # Fast path: what every OpenAI-compatible server sends, `data: ...` events
            # of one line each, split at C speed; anything else takes the general path.
            parts = buf.split(b"\n\n")
            rest = parts.pop()
            # Every part one `data: ` line, counted in C: no newline but the separators'
            # own pairs, and a `data: ` at the start and after each separator. (A JSON
            # string cannot hold a raw newline, so a separator is never inside a value.)
            whole = len(buf) - len(rest)
            if buf.count(b"\n", 0, whole) == 2 * len(parts) and (
                    not parts or (buf.startswith(b"data: ")
                    and buf.count(b"\n\ndata: ", 0, whole) == len(parts) - 1)):
                self._buf = rest
                if len(rest) > MAX_EVENT_BYTES:
                    self.problem = self.problem or f"SSE line over {MAX_EVENT_BYTES} bytes"
                    self._buf = b""
                return [SSEEvent(p[6:]) for p in parts]
        events: list[SSEEvent] = []
        start = 0
        find = buf.find
        while True:
            if not self._has_data and not self._event:
                # Fast path: a whole `data: ...` event (what every OpenAI-compatible
                # server sends) is one slice, not two lines through the state machine.
                end = find(b"\n\n", start)
                if end >= 0 and buf.startswith(b"data: ", start) and \
                        buf.find(b"\n", start, end) < 0:
                    events.append(SSEEvent(buf[start + 6:end]))
                    start = end + 2
                    continue
            end = find(b"\n", start)
            if end < 0:
                break
            self._line(buf[start:end], events)
            start = end + 1
        self._buf = buf[start:]
        if len(self._buf) > MAX_EVENT_BYTES:
            self.problem = self.problem or f"SSE line over {MAX_EVENT_BYTES} bytes"
            self._buf = b""
        return events

    def _line(self, line: bytes, events: list[SSEEvent]) -> None:
        if not line:
            if self._has_data:
                events.append(SSEEvent(b"\n".join(self._data), self._event))
            self._data = []
            self._event = b""
            self._has_data = False
            return
        if line[:5] == b"data:":
            value = line[6:] if line[5:6] == b" " else line[5:]
            self._data.append(value)
            self._has_data = True
            return
        if line[:1] == b":":
            return
        name, _, value = line.partition(b":")
        if value[:1] == b" ":
            value = value[1:]
        if name == b"event":
            self._event = value
        elif name not in (b"id", b"retry"):
            # Legal per the spec (ignored), but no OpenAI-compatible server sends it:
            # a qualifier reports it rather than guess.
            self.problem = self.problem or f"malformed SSE line: {line[:80]!r}"

    def close(self) -> list[SSEEvent]:
        """End of stream: a final event without its blank line still counts."""
        events: list[SSEEvent] = []
        if self._head:  # the stream was the start of a mark and nothing else
            self._buf, self._head = self._head, None
        if self._buf:
            # What is left may be several lines (the fast path keeps the unsplit rest,
            # such as the blank line after a stream's last event): each is one line.
            for line in self._buf.split(b"\n"):
                self._line(line, events)
            self._buf = b""
        if self._has_data:
            events.append(SSEEvent(b"\n".join(self._data), self._event))
            self._data = []
            self._has_data = False
        return events

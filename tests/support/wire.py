"""One streamed reply written on the wire every way HTTP/1.1 and the event-stream rules
allow, and in ways they do not: the transport conformance families.

An honest variant (`honest(seed)`) writes the same events as any other: its own line
ends (LF, CRLF, lone CR, mixed), a byte order mark, comments, `id`/`retry`/`event:
message` fields, `data:` with or without its space, one event's JSON over several
`data:` lines, extra blank lines; framed chunked (chunk sizes anywhere, in upper or
lower case, zero-padded, with extensions, with trailers), by Content-Length or by
closing; compressed or not (gzip in one member or several, `deflate` as zlib or raw
deflate); its head after interim 1xx heads (100 Continue, 102, 103 Early Hints), its
lines ended by CRLF or a bare LF, with a folded field (obs-fold) whose continuation
looks like a field of its own; written to the socket in cuts anywhere. A client must
read the same reply from each, on every transport.

A broken variant (`broken(seed)`) is an honest one with one defect of a generated kind
(`DEFECTS`): framing the reference HTTP stacks refuse, a body cut short or framed two
ways, events run together or split by a raw line break, a byte order mark in the middle
of the stream, an in-band error, a stream that ends without its events. A client must
fail the reply, on every transport. `broken_head(seed)` does the same with a defect
of the response head (`HEAD_DEFECTS`): a field line the reference stacks refuse, a bad
status line, a 101 Switching Protocols no request asked for.

`WireFront` serves the variants in front of the fake server (a re-framing gateway), so
a whole run reads them.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import random
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

BOM = b"\xef\xbb\xbf"
CONTENT_TYPE = b"content-type: text/event-stream; charset=utf-8\r\n"


@dataclass
class Variant:
    """How one reply goes on the wire: the writes, in order, and whether the server
    closes the connection after them."""

    name: str
    honest: bool
    writes: list[bytes] = field(default_factory=list)
    closes: bool = False


@dataclass
class _Plan:
    """An honest variant's choices, drawn from its seed; a defect may change them."""

    rng: random.Random
    eol: str  # "\n", "\r\n", "\r" or "mixed"
    bom: bool
    comments: float
    fields: float
    no_space: float
    split: float
    blanks: float
    framing: str  # "chunked", "length", "close10" or "close11"
    gzip: bool
    chunk_max: int
    upper: bool
    zeros: float
    extensions: float
    trailers: int
    cut_max: int
    # Drawn from a stream of their own, so the choices above stay each seed's own.
    coding: str = "gzip"  # when `gzip`: one of CODINGS
    interim: list[bytes] = field(default_factory=list)  # 1xx heads before the final one
    head_eol: str = "\r\n"  # "\r\n", "\n" or "mixed"
    fold: bytes = b""  # a folded field in the head (one of FOLDS), or none
    head_rng: random.Random = field(default_factory=random.Random)

    @classmethod
    def draw(cls, seed: int) -> _Plan:
        rng = random.Random(f"wire/{seed}")
        return cls(rng=rng, eol=rng.choice(("\n", "\r\n", "\r", "mixed")),
                   bom=rng.random() < 0.3, comments=rng.choice((0, 0, 0.2, 0.6)),
                   fields=rng.choice((0, 0.3)), no_space=rng.choice((0, 0, 0.5, 1)),
                   split=rng.choice((0, 0, 0.3)), blanks=rng.choice((0, 0.2)),
                   framing=rng.choice(("chunked", "chunked", "chunked", "length",
                                       "close10", "close11")),
                   gzip=rng.random() < 0.2, chunk_max=rng.choice((1, 7, 60, 400, 5000)),
                   upper=rng.random() < 0.5, zeros=rng.choice((0, 0, 0.3)),
                   extensions=rng.choice((0, 0, 0.3, 1)), trailers=rng.choice((0, 0, 1, 2)),
                   cut_max=rng.choice((1 << 20, 3, 50, 700)))\
            ._with_head(random.Random(f"wire/{seed}/head"))

    def _with_head(self, rng: random.Random) -> _Plan:
        self.head_rng = rng
        self.coding = rng.choice(CODINGS)
        self.interim = rng.sample(INTERIM, k=rng.choice((0, 0, 0, 1, 2)))
        self.head_eol = rng.choice(("\r\n", "\r\n", "\n", "mixed"))
        self.fold = rng.choice((b"", b"", b"", b"", *FOLDS))
        return self


# -- the event stream -----------------------------------------------------------------

Event = list[bytes]  # an event's lines, without their line ends


def _structural_commas(payload: bytes) -> list[int]:
    """Offsets just past each comma outside a JSON string: where a line break is JSON
    whitespace, so splitting there over `data:` lines keeps the JSON's value."""
    cuts, in_string, escaped = [], False, False
    for i, byte in enumerate(payload):
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte == 0x2C:
            cuts.append(i + 1)
    return cuts


def _events(payloads: list[bytes], plan: _Plan) -> list[Event]:
    rng = plan.rng
    out: list[Event] = []
    for number, payload in enumerate(payloads):
        lines: Event = []
        if rng.random() < plan.comments:
            lines.append(rng.choice((b": keep-alive", b":", b": ping " + b"x" * 3)))
        if rng.random() < plan.fields:
            lines += rng.sample([b"id: %d" % number, b"retry: 3000", b"event: message",
                                 b"id:"], k=rng.randint(1, 2))
        pieces = [payload]
        commas = _structural_commas(payload)
        if commas and rng.random() < plan.split:
            at = sorted(rng.sample(commas, k=min(len(commas), rng.randint(1, 3))))
            pieces = [payload[a:b] for a, b in zip([0, *at], [*at, len(payload)], strict=True)]
        for i, piece in enumerate(pieces):
            lines.append((b"data:" if rng.random() < plan.no_space else b"data: ") + piece)
            if i + 1 < len(pieces) and rng.random() < plan.comments:
                lines.append(b": still here")
        out.append(lines)
    return out


def _sse(events: list[Event], plan: _Plan) -> bytes:
    """The events with their line ends and blank lines: in mixed mode a lone CR is never
    followed by an LF that starts the next line (CR LF is one line end, not two)."""
    rng = plan.rng
    out: list[bytes] = [BOM] if plan.bom else []
    last = b""

    def line(text: bytes) -> None:
        nonlocal last
        if plan.eol == "mixed":
            options = [b"\n", b"\r\n", b"\r"]
            if last == b"\r" and not text:
                options.remove(b"\n")
            eol = rng.choice(options)
        else:
            eol = plan.eol.encode()
        out.append(text + eol)
        last = eol

    for event in events:
        for text in event:
            line(text)
        line(b"")
        while rng.random() < plan.blanks:
            line(b"")
    return b"".join(out)


# -- HTTP framing ---------------------------------------------------------------------

def _chunk_line(size: int, plan: _Plan) -> bytes:
    rng = plan.rng
    digits = (b"%X" if plan.upper else b"%x") % size
    if rng.random() < plan.zeros:
        digits = b"0" * rng.randint(1, 3) + digits
    if rng.random() < plan.extensions:
        digits += rng.choice((b";ext", b";a=b", b';name="q;v"', b";x=1;y", b";n=\"\""))
    return digits + b"\r\n"


def _chunks(body: bytes, plan: _Plan) -> list[tuple[bytes, bytes]]:
    """(size line, data) of each chunk but the last."""
    out, at = [], 0
    while at < len(body):
        size = plan.rng.randint(1, plan.chunk_max)
        out.append((_chunk_line(len(body[at:at + size]), plan), body[at:at + size]))
        at += size
    return out


def _last_chunk(plan: _Plan) -> bytes:
    trailers = [b"x-trace-id: 4bf92f3577b34da6", b"server-timing: total;dur=12",
                b"x-empty:"][:plan.trailers]
    return _chunk_line(0, plan) + b"".join(t + b"\r\n" for t in trailers) + b"\r\n"


#: Content codings a gateway may apply whatever the client asked: `gzip` in one
#: member, in several (one per flush), `deflate` as RFC 9110 says (zlib) and as many
#: servers write it (raw deflate, no zlib header).
CODINGS = ("gzip", "gzip_members", "deflate_zlib", "deflate_raw")
#: Interim heads a server may send before the final one (RFC 9110 15.2).
INTERIM = (b"HTTP/1.1 100 Continue\r\n\r\n", b"HTTP/1.1 102 Processing\r\n\r\n",
           b"HTTP/1.1 103 Early Hints\r\nlink: </v1/models>; rel=preload\r\n\r\n")
#: Folded fields (obs-fold, RFC 9112 5.2): the continuation belongs to the field above
#: (a recipient reads it as a space), even when it looks like a field of its own.
FOLDS = (b"x-upstream: vllm\r\n content-length: 3\r\n",
         b"x-route: a,\r\n\tb\r\n",
         b"x-note: kept\r\n  transfer-encoding: chunked\r\n")


def _compress(body: bytes, plan: _Plan) -> bytes:
    if plan.coding == "gzip_members":
        cuts = sorted(plan.rng.sample(range(1, len(body)), k=plan.rng.randint(1, 4)))
        return b"".join(gzip.compress(body[a:b], mtime=0)
                        for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True))
    if plan.coding.startswith("deflate"):
        packer = zlib.compressobj(wbits=15 if plan.coding == "deflate_zlib" else -15)
        return packer.compress(body) + packer.flush()
    return gzip.compress(body, mtime=0)


def _head_lines(head: bytes, plan: _Plan) -> bytes:
    """A head written with CRLF line ends as the plan ends its lines (CRLF, a bare LF
    or either)."""
    if plan.head_eol == "\r\n":
        return head
    lines = head.split(b"\r\n")
    ends = [b"\n" if plan.head_eol == "\n" else plan.head_rng.choice((b"\n", b"\r\n"))
            for _ in lines[1:]]
    return lines[0] + b"".join(end + line for end, line in zip(ends, lines[1:], strict=True))


def _head(plan: _Plan, length: int | None, extra: bytes = b"") -> bytes:
    rng = plan.rng
    version = b"HTTP/1.0" if plan.framing == "close10" else b"HTTP/1.1"
    lines = [version + b" 200 OK\r\n", CONTENT_TYPE]
    lines.append(plan.fold)
    if plan.gzip:
        lines.append(b"content-encoding: %s\r\n" % plan.coding.split("_")[0].encode())
    if plan.framing == "chunked":
        lines.append(rng.choice((b"transfer-encoding: chunked\r\n",
                                 b"Transfer-Encoding: Chunked\r\n")))
    elif plan.framing == "length":
        lines.append(b"Content-Length: %d\r\n" % length)
    elif plan.framing == "close11":
        lines.append(b"connection: close\r\n")
    # "given": the defect writes the framing fields itself
    if rng.random() < 0.5:
        lines.append(b"cache-control: no-cache\r\nx-accel-buffering: no\r\n")
    return b"".join(plan.interim) + _head_lines(b"".join(lines) + extra + b"\r\n", plan)


def _cut(wire: bytes, plan: _Plan) -> list[bytes]:
    """The response as the socket writes go: cut anywhere."""
    out, at = [], 0
    while at < len(wire):
        step = plan.rng.randint(1, plan.cut_max)
        out.append(wire[at:at + step])
        at += step
    return out


def _framed(body: bytes, plan: _Plan, extra: bytes = b"") -> bytes:
    if plan.gzip:
        body = _compress(body, plan)
    if plan.framing == "chunked":
        chunks = _chunks(body, plan)
        return _head(plan, None, extra) + b"".join(s + d + b"\r\n" for s, d in chunks) + \
            _last_chunk(plan)
    return _head(plan, len(body), extra) + body


def honest(seed: int, payloads: list[bytes]) -> Variant:
    """The events `payloads` (the data of each, `[DONE]` last) written the seed's way."""
    plan = _Plan.draw(seed)
    wire = _framed(_sse(_events(payloads, plan), plan), plan)
    return Variant(f"honest/{seed}/{plan.framing}/{plan.eol!r}", True, _cut(wire, plan),
                   closes=plan.framing.startswith("close"))


# -- defects --------------------------------------------------------------------------

Defect = Callable[[_Plan, list[bytes]], bytes]


def _token_events(payloads: list[bytes]) -> list[int]:
    """Events that carry generated text (a word of reasoning or of the answer)."""
    return [i for i, p in enumerate(payloads)
            if b'"reasoning":"' in p or (b'"content":"' in p and b'"content":""' not in p)]


def _chunked_with(change: Callable[[bytes, bytes, random.Random], tuple[bytes, bytes]]
                  ) -> Defect:
    """Chunked framing with one chunk (not the first) written wrong by `change`."""

    def defect(plan: _Plan, payloads: list[bytes]) -> bytes:
        plan.framing, plan.gzip = "chunked", False
        plan.chunk_max = max(plan.chunk_max, 40)
        chunks = _chunks(_sse(_events(payloads, plan), plan), plan)
        k = plan.rng.choice([i for i in range(1, len(chunks)) if len(chunks[i][1]) > 1])
        line, data = chunks[k]
        line, tail = change(line, data, plan.rng)
        wire = [s + d + b"\r\n" for s, d in chunks]
        wire[k] = line + tail
        return _head(plan, None) + b"".join(wire) + _last_chunk(plan)

    return defect


def _size(line: bytes) -> bytes:
    return line.split(b";")[0].strip().lstrip(b"0") or b"0"


CHUNK_DEFECTS: dict[str, Callable[[bytes, bytes, random.Random], tuple[bytes, bytes]]] = {
    # data not followed by CRLF (the next size line runs on from it)
    "chunk_no_crlf": lambda line, data, rng: (line, data),
    # size lines Python's int() reads but HTTP does not
    "chunk_size_0x": lambda line, data, rng: (b"0x" + _size(line) + b"\r\n", data + b"\r\n"),
    "chunk_size_sign": lambda line, data, rng: (b"+" + _size(line) + b"\r\n", data + b"\r\n"),
    "chunk_size_space": lambda line, data, rng: (b" " + _size(line) + b"\r\n",
                                                 data + b"\r\n"),
    "chunk_size_underscore": lambda line, data, rng: (
        b"0_" + _size(line) + b"\r\n", data + b"\r\n"),
    # a size line ended by a bare LF
    "chunk_bare_lf": lambda line, data, rng: (line[:-2] + b"\n", data + b"\r\n"),
    # a size that is not the data's
    "chunk_size_short": lambda line, data, rng: (b"%x\r\n" % (len(data) - 1), data + b"\r\n"),
    "chunk_size_long": lambda line, data, rng: (b"%x\r\n" % (len(data) + 1), data + b"\r\n"),
}


def _no_last_chunk(plan: _Plan, payloads: list[bytes]) -> bytes:
    """Every chunk, then the connection closes without the last one."""
    plan.framing, plan.gzip = "chunked", False
    chunks = _chunks(_sse(_events(payloads, plan), plan), plan)
    return _head(plan, None) + b"".join(s + d + b"\r\n" for s, d in chunks)


def _bad_trailer(plan: _Plan, payloads: list[bytes]) -> bytes:
    """A trailer section whose line is no header field."""
    plan.framing, plan.gzip = "chunked", False
    chunks = _chunks(_sse(_events(payloads, plan), plan), plan)
    bad = plan.rng.choice((b"no colon here", b"bad name: 1", b": empty name"))
    return _head(plan, None) + b"".join(s + d + b"\r\n" for s, d in chunks) + \
        b"0\r\n" + bad + b"\r\n\r\n"


def _length(plan: _Plan, payloads: list[bytes], said: Callable[[int], bytes],
            keep: Callable[[bytes], bytes] = lambda body: body) -> bytes:
    plan.framing = "given"
    body = _sse(_events(payloads, plan), plan)
    if plan.gzip:
        body = _compress(body, plan)
    return _head(plan, None, said(len(body))) + keep(body)


def _length_short_body(plan: _Plan, payloads: list[bytes]) -> bytes:
    """A Content-Length larger than the body the server sends before it closes."""
    more = plan.rng.randint(1, 500)
    return _length(plan, payloads, lambda n: b"content-length: %d\r\n" % (n + more))


def _length_conflict(plan: _Plan, payloads: list[bytes]) -> bytes:
    """Two Content-Length values: the body's and another, in two fields or in one."""
    other = plan.rng.randint(1, 50)
    two = plan.rng.random() < 0.5

    def said(n: int) -> bytes:
        values = (n, n + other) if plan.rng.random() < 0.5 else (n + other, n)
        if two:
            return b"content-length: %d\r\ncontent-length: %d\r\n" % values
        return b"content-length: %d, %d\r\n" % values

    return _length(plan, payloads, said)


def _length_cut(plan: _Plan, payloads: list[bytes]) -> bytes:
    """A Content-Length that ends the body inside its last events (a proxy that counted
    before the server finished)."""
    plan.gzip = False
    cut = plan.rng.randint(20, 200)
    return _length(plan, payloads, lambda n: b"content-length: %d\r\n" % (n - cut),
                   lambda body: body[:-cut])


def _gzip_cut(plan: _Plan, payloads: list[bytes]) -> bytes:
    """A gzip body whose compressed stream stops early, framed as complete."""
    plan.gzip, plan.framing = False, "given"
    body = gzip.compress(_sse(_events(payloads, plan), plan), mtime=0)
    body = body[:len(body) - plan.rng.randint(9, max(10, len(body) // 3))]
    return _head(plan, None, b"content-encoding: gzip\r\ncontent-length: %d\r\n"
                 % len(body)) + body


def _with_events(change: Callable[[list[Event], list[bytes], random.Random], None]
                 ) -> Defect:
    """Honest framing of an event stream that `change` got wrong."""

    def defect(plan: _Plan, payloads: list[bytes]) -> bytes:
        events = _events(payloads, plan)
        change(events, payloads, plan.rng)
        return _framed(_sse(events, plan), plan)

    return defect


def _glued(events: list[Event], payloads: list[bytes], rng: random.Random) -> None:
    """One blank line between two events left out: they read as one."""
    k = rng.choice(_token_events(payloads)[:-1])
    events[k:k + 2] = [events[k] + events[k + 1]]


def _raw_line_break(events: list[Event], payloads: list[bytes], rng: random.Random) -> None:
    """A line break written raw inside a JSON string (not escaped): the event's data
    line ends there, and what follows is a line of no field."""
    lines = events[rng.choice(_token_events(payloads))]
    for i, line in enumerate(lines):
        for key in (b'"reasoning":"', b'"content":"'):
            at = line.find(key) + len(key)
            if at >= len(key) and line[at:at + 1] != b'"':
                lines[i:i + 1] = [line[:at] + b"a", b"b" + line[at:]]
                return


def _bom_mid_stream(events: list[Event], payloads: list[bytes], rng: random.Random) -> None:
    """A byte order mark before a later event (a gateway that marks what it forwards):
    a line `\\ufeffdata: ...` is no data line, and the event is lost to a lenient
    parser."""
    for k in rng.sample(_token_events(payloads), k=rng.randint(1, 3)):
        events[k][0] = BOM + events[k][0]


def _inband_error(events: list[Event], payloads: list[bytes], rng: random.Random) -> None:
    """An error told inside a 200 stream, in each of the forms servers use."""
    k = rng.choice(_token_events(payloads))
    form = rng.randrange(3)
    if form == 0:
        events[k].insert(0, b"event: error")
    else:
        obj = (b'{"error":{"message":"engine dead","type":"InternalServerError",'
               b'"code":500}}' if form == 1 else
               b'{"object":"error","message":"engine dead","code":500}')
        events.insert(k, [b"data: " + obj])


def _ends_early(events: list[Event], payloads: list[bytes], rng: random.Random) -> None:
    """The stream ends, well framed, inside an event or before `[DONE]`."""
    k = rng.choice(_token_events(payloads))
    del events[k + 1:]
    if rng.random() < 0.5:
        line = events[k][-1]
        events[k][-1] = line[:rng.randint(6, len(line) - 2)]


def _empty(events: list[Event], payloads: list[bytes], rng: random.Random) -> None:
    """A 200 stream with nothing in it: no event at all, or `[DONE]` alone."""
    del events[:-1]
    if rng.random() < 0.5:
        events.clear()


DEFECTS: dict[str, Defect] = {
    **{name: _chunked_with(change) for name, change in CHUNK_DEFECTS.items()},
    "no_last_chunk": _no_last_chunk,
    "bad_trailer": _bad_trailer,
    "length_short_body": _length_short_body,
    "length_conflict": _length_conflict,
    "length_cut": _length_cut,
    "gzip_cut": _gzip_cut,
    "glued_events": _with_events(_glued),
    "raw_line_break": _with_events(_raw_line_break),
    "bom_mid_stream": _with_events(_bom_mid_stream),
    "inband_error": _with_events(_inband_error),
    "ends_early": _with_events(_ends_early),
    "empty_stream": _with_events(_empty),
}


def broken(seed: int, payloads: list[bytes]) -> Variant:
    """An honest variant of `seed` with the defect `DEFECTS` gives that seed."""
    name = sorted(DEFECTS)[seed % len(DEFECTS)]
    plan = _Plan.draw(seed)
    wire = DEFECTS[name](plan, payloads)
    # A broken reply's connection is closed after it: a client must not wait for a body
    # the framing promised and the server never sends.
    return Variant(f"broken/{seed}/{name}", False, _cut(wire, plan), closes=True)


HeadDefect = Callable[[_Plan, list[bytes]], bytes]


def _with_head_line(*lines: bytes) -> HeadDefect:
    """Honest bytes but for one field line of these, which no field is (RFC 9112 5)."""

    def defect(plan: _Plan, payloads: list[bytes]) -> bytes:
        return _framed(_sse(_events(payloads, plan), plan), plan,
                       plan.rng.choice(lines) + b"\r\n")

    return defect


def _status_line(plan: _Plan, payloads: list[bytes]) -> bytes:
    """A final head whose status line is no HTTP/1.x status line."""
    wire = _framed(_sse(_events(payloads, plan), plan), plan)
    good = b"HTTP/1.0 200 OK" if plan.framing == "close10" else b"HTTP/1.1 200 OK"
    bad = plan.rng.choice((b"HTTP/1.1 20 OK", b"HTTP/1.1 OK", b"HTTP/1.1 2000 OK",
                           b"ICY 200 OK", b"HTTP/1.1  200 OK"))
    at = wire.rindex(good)  # the final head's, past any interim head
    return wire[:at] + bad + wire[at + len(good):]


def _final_101(plan: _Plan, payloads: list[bytes]) -> bytes:
    """A 101 Switching Protocols as the final head (no request here asks for an
    upgrade), then the reply as if nothing happened: what follows a 101 is not HTTP."""
    return b"HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: %s\r\n\r\n" \
        % plan.rng.choice((b"h2c", b"websocket")) + \
        _framed(_sse(_events(payloads, plan), plan), plan)


def _fold_first(plan: _Plan, payloads: list[bytes]) -> bytes:
    """A continuation line before any field: there is no field for it to continue."""
    plan.interim = []
    wire = _framed(_sse(_events(payloads, plan), plan), plan)
    end = wire.index(b"\n") + 1
    return wire[:end] + b" x-folded: 1\r\n" + wire[end:]


HEAD_DEFECTS: dict[str, HeadDefect] = {
    "space_before_colon": _with_head_line(b"x-trace : 1", b"content-type :text/plain"),
    "no_colon": _with_head_line(b"x-trace 1", b"garbage", b"x-trace=1"),
    "empty_name": _with_head_line(b": 1", b":"),
    "bad_name": _with_head_line(b"x trace: 1", b"x(trace): 1", b"x\x7ftrace: 1"),
    "nul_in_value": _with_head_line(b"x-trace: a\x00b"),
    "lone_cr": _with_head_line(b"x-trace: 1\rx-other: 2"),
    "status_line": _status_line,
    "final_101": _final_101,
    "fold_first": _fold_first,
}


def broken_head(seed: int, payloads: list[bytes]) -> Variant:
    """An honest variant of `seed` with the head defect `HEAD_DEFECTS` gives that seed."""
    name = sorted(HEAD_DEFECTS)[seed % len(HEAD_DEFECTS)]
    plan = _Plan.draw(seed)
    wire = HEAD_DEFECTS[name](plan, payloads)
    return Variant(f"broken_head/{seed}/{name}", False, _cut(wire, plan), closes=True)


def payloads_of(sse: bytes) -> list[bytes]:
    """The data of each event of a stream written `data: X\\n\\n` (as the fake writes)."""
    return [event[6:] for event in sse.split(b"\n\n") if event.startswith(b"data: ")]


# -- a re-framing front ---------------------------------------------------------------

class WireFront:
    """An HTTP/1.1 front for another server (the fake) that forwards every request and
    writes each streamed chat reply back as the variant `variant(n)` writes it (n: the
    chat replies so far); everything else goes back with a Content-Length."""

    def __init__(self, upstream: str, variant: Callable[[int, list[bytes]], Variant]) -> None:
        self.upstream = upstream
        self.variant = variant
        self.served: list[str] = []  # each chat reply's variant name, in order
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._stop: asyncio.Event | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> WireFront:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("wire front did not start")
        return self

    def stop(self) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=10)

    def _run(self) -> None:
        self._loop.run_until_complete(self._main())

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        async with httpx.AsyncClient(base_url=self.upstream, timeout=60) as up:
            server = await asyncio.start_server(lambda r, w: self._serve(up, r, w),
                                                "127.0.0.1", 0)
            self.port = server.sockets[0].getsockname()[1]
            self._ready.set()
            await self._stop.wait()
            server.close()

    async def _serve(self, up: httpx.AsyncClient, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = dict(line.split(":", 1) for line in lines[1:] if ":" in line)
                headers = {k.strip().lower(): v.strip() for k, v in headers.items()}
                body = await reader.readexactly(int(headers.get("content-length", 0)))
                forward = {k: v for k, v in headers.items()
                           if k in ("content-type", "accept", "authorization")}
                reply = await up.request(method, path, content=body, headers=forward)
                if path.endswith("/chat/completions") and reply.status_code == 200 and \
                        reply.headers.get("content-type", "").startswith("text/event-stream"):
                    variant = self.variant(len(self.served), payloads_of(reply.content))
                    self.served.append(variant.name)
                    for piece in variant.writes:
                        writer.write(piece)
                        await writer.drain()
                    if variant.closes:
                        return
                    continue
                keep = {k: v for k, v in reply.headers.items() if k in (
                    "content-type", "retry-after")}
                writer.write(b"HTTP/1.1 %d %s\r\n" % (reply.status_code,
                                                     reply.reason_phrase.encode())
                             + b"".join(f"{k}: {v}\r\n".encode() for k, v in keep.items())
                             + b"content-length: %d\r\n\r\n" % len(reply.content)
                             + reply.content)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            with contextlib.suppress(Exception):
                writer.close()

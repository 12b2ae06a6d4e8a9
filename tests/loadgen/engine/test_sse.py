"""The incremental SSE parser: cut anywhere, any line ending, never raises."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from loadgen.engine.sse import SSEParser

STREAM = (
    b'data: {"choices":[{"delta":{"role":"assistant","content":""}}]}\n\n'
    b": keep-alive comment\n\n"
    b'data: {"choices":[{"delta":{"reasoning":"caf\xc3\xa9 "}}]}\n\n'
    b"event: error\ndata: {\"error\": {\"message\": \"boom\"}}\n\n"
    b"data: first line\ndata: second line\n\n"
    b"data: [DONE]\n\n"
)
EXPECTED = [
    (b'{"choices":[{"delta":{"role":"assistant","content":""}}]}', b""),
    (b'{"choices":[{"delta":{"reasoning":"caf\xc3\xa9 "}}]}', b""),
    (b'{"error": {"message": "boom"}}', b"error"),
    (b"first line\nsecond line", b""),
    (b"[DONE]", b""),
]


def _parse(chunks: list[bytes]) -> tuple[list[tuple[bytes, bytes]], str | None]:
    p = SSEParser()
    out = []
    for c in chunks:
        out += [(e.data, e.event) for e in p.feed(c)]
    out += [(e.data, e.event) for e in p.close()]
    return out, p.problem


def test_whole_stream() -> None:
    assert _parse([STREAM]) == (EXPECTED, None)


def test_every_split_point_gives_the_same_events() -> None:
    for i in range(len(STREAM) + 1):
        assert _parse([STREAM[:i], STREAM[i:]]) == (EXPECTED, None), i


def test_byte_at_a_time() -> None:
    assert _parse([STREAM[i:i + 1] for i in range(len(STREAM))]) == (EXPECTED, None)


def test_crlf_and_lone_cr_line_endings_split_anywhere() -> None:
    for ending in (b"\r\n", b"\r"):
        stream = STREAM.replace(b"\n", ending)
        for i in range(len(stream) + 1):
            assert _parse([stream[:i], stream[i:]]) == (EXPECTED, None), (ending, i)


def test_final_event_without_blank_line_still_counts() -> None:
    assert _parse([b"data: [DONE]"]) == ([(b"[DONE]", b"")], None)


def test_data_without_space_and_id_retry_fields() -> None:
    events, problem = _parse([b"id: 7\nretry: 100\ndata:{}\n\n"])
    assert events == [(b"{}", b"")] and problem is None


def test_malformed_line_is_reported_not_raised() -> None:
    events, problem = _parse([b"this is not sse\n\ndata: [DONE]\n\n"])
    assert events == [(b"[DONE]", b"")]
    assert problem is not None and "malformed SSE line" in problem


def test_multi_megabyte_event() -> None:
    big = b"x" * (3 * 1024 * 1024)
    chunks = [b"data: " + big[:100], big[100:], b"\n\n"]
    events, problem = _parse(chunks)
    assert problem is None and events == [(big, b"")]


@given(st.lists(st.binary(max_size=64), max_size=40))
def test_fuzz_never_raises(chunks: list[bytes]) -> None:
    p = SSEParser()
    for c in chunks:
        for e in p.feed(c):
            assert isinstance(e.data, bytes)
    p.close()


@given(st.binary(max_size=400), st.integers(min_value=0, max_value=400))
def test_fuzz_split_invariance(data: bytes, cut: int) -> None:
    """Where the network cuts the bytes never changes the events."""
    whole = _parse([data])
    cut = min(cut, len(data))
    assert _parse([data[:cut], data[cut:]])[0] == whole[0]


def _reference(stream: bytes) -> list[tuple[bytes, bytes]]:
    """The event-stream rules, line by line (LF only), as the spec states them."""
    events, data, name = [], [], b""
    for line in stream.split(b"\n")[:-1]:  # the last piece has no line end yet
        if not line:
            if data:
                events.append((b"\n".join(data), name))
            data, name = [], b""
        elif line.startswith(b"data:"):
            data.append(line[6:] if line[5:6] == b" " else line[5:])
        elif line.startswith(b"event:"):
            name = line[6:].lstrip(b" ")
    return events


SSE_ATOMS = st.sampled_from([b"data: ", b"data:", b"event: error", b"\n", b"\n\n",
                             b'{"a":1}', b"x", b"data: [DONE]", b": ping", b"\n\ndata: "])


@given(st.lists(SSE_ATOMS, max_size=30), st.lists(st.integers(0, 300), max_size=6))
def test_stream_like_input_gives_the_events_the_rules_give(atoms: list[bytes],
                                                           cuts: list[int]) -> None:
    """Streams made of SSE's own pieces, cut anywhere: the fast path (all `data:`
    events) and the line-by-line path give what the rules give."""
    stream = b"".join(atoms)
    parser = SSEParser()
    got = []
    at = 0
    for cut in [*sorted({min(c, len(stream)) for c in cuts}), len(stream)]:
        got += [(e.data, e.event) for e in parser.feed(stream[at:cut])]
        at = cut
    assert got == _reference(stream)


_BOM_STREAMS = st.lists(st.sampled_from([b'data: {"a":1}', b"data:[DONE]", b": c", b"id: 1",
                                         b"event: message", b""]), max_size=12)


@given(_BOM_STREAMS, st.sampled_from([b"\n", b"\r\n", b"\r"]), st.integers(0, 3),
       st.lists(st.integers(0, 200), max_size=5))
def test_a_byte_order_mark_opening_the_stream_is_dropped_wherever_it_is_cut(
        lines: list[bytes], eol: bytes, blanks: int, cuts: list[int]) -> None:
    """A mark first, the stream's own line ends, trailing blank lines, cut anywhere (the
    mark too): the events and the verdict on the stream are the unmarked stream's."""
    stream = b"".join(line + eol for line in lines) + eol * blanks
    marked = b"\xef\xbb\xbf" + stream
    at = sorted({min(c, len(marked)) for c in cuts})
    pieces = [marked[a:b] for a, b in zip([0, *at], [*at, len(marked)], strict=True)]
    assert _parse(pieces) == _parse([stream])
    assert _parse(pieces)[1] is None


def test_a_byte_order_mark_later_in_the_stream_is_reported() -> None:
    _, problem = _parse([b"data: [DONE]\n\n", b"\xef\xbb\xbfdata: {}\n\n"])
    assert problem is not None and "malformed SSE line" in problem
    assert _parse([b"\xef\xbb"]) == ([], "malformed SSE line: b'\\xef\\xbb'")


@given(st.lists(st.sampled_from([b'data: {"a":1}\n\n', b"data: [DONE]\n\n", b"\n",
                                 b"\r\n", b": ping\n\n"]), min_size=1, max_size=8),
       st.integers(0, 400))
def test_blank_lines_after_the_last_event_are_no_line_of_their_own(
        events: list[bytes], cut: int) -> None:
    """A stream whose last events come in one read with a blank line or two after them
    (the fast path keeps them unsplit until the end): no malformed line at close."""
    stream = b"".join(events)
    cut = min(cut, len(stream))
    assert _parse([stream[:cut], stream[cut:]]) == (_reference(stream + b"\n\n"), None)

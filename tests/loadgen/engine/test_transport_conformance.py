"""The transport conformance families: one reply, written on the wire every way HTTP/1.1
and the event-stream rules allow (and ways they do not), read by the client on every
transport.

Honest variants (tests/support/wire.py `honest`) must give the very record the plain
stream gives, judged ok, on each transport; broken ones (`broken`, `broken_head`: one
generated defect each) must fail on each, as a stream error. A server writes the
variants' bytes itself, cut where the variant says, keeping the connection where the
framing lets it: a decoder that stops short of a body's end (a trailer left unread)
fails the next reply.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

import orjson
import pytest

from loadgen.engine.client import Timeouts
from loadgen.records import RequestRecord
from loadgen.workload.tools import BILLING_TOOLS
from tests.loadgen.conftest import REPO, run_cli
from tests.support import wire
from tests.support.chat_reads import read_in_turn, reply_of
from tests.support.loopback import read_request, with_server
from tests.support.openai_fake import MODEL, FakeOpenAI

TRANSPORTS = ["raw", "aiohttp", "httpx"]
# The whole reply is written at once: an idle second is a client that stopped reading.
TIMEOUTS = Timeouts(connect=2.0, first_token=3.0, idle=1.0, total=10.0)
#: Defects of the HTTP framing, not of the event stream.
FRAMING = {*wire.CHUNK_DEFECTS, "bad_trailer"}
HONEST = range(72)
BROKEN = range(4 * len(wire.DEFECTS))
BROKEN_HEADS = range(4 * len(wire.HEAD_DEFECTS))
BODY = {"model": MODEL, "messages": [{"role": "user", "content":
        "Move account XEHM4B to the business plan."}], "max_tokens": 64, "stream": True,
        "tools": BILLING_TOOLS}


def _payloads() -> list[bytes]:
    """A healthy tool turn as the fake streams it: role, reasoning, the call, finish,
    usage, [DONE]."""
    parts = FakeOpenAI()._healthy_tool(BODY)
    return wire.payloads_of(b"".join(parts))


PAYLOADS = _payloads()


def _plain(seed: int, payloads: list[bytes]) -> wire.Variant:
    sse = b"".join(b"data: " + p + b"\n\n" for p in payloads)
    return wire.Variant("plain", True, [b"HTTP/1.1 200 OK\r\n" + wire.CONTENT_TYPE +
                                        b"content-length: %d\r\n\r\n" % len(sse) + sse])


async def _serve_variants(variants: list[wire.Variant],
                          body: Callable[[str], Awaitable[None]]) -> None:
    """A server that answers request k (the body's `wire`) with variants[k]'s bytes."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            _, request = await read_request(reader)
            variant = variants[orjson.loads(request)["wire"]]
            for piece in variant.writes:
                writer.write(piece)
                await writer.drain()
            if variant.closes:
                return

    await with_server(answer, body)


def _read_all(transport: str, variants: list[wire.Variant]) -> list[RequestRecord]:
    """Each variant read in turn by one client (one pool) on `transport`, judged as the
    tool turn it answers."""
    records: list[RequestRecord] = []
    bodies = [orjson.dumps({**BODY, "wire": k}) for k in range(len(variants))]

    async def body(url: str) -> None:
        records.extend(await read_in_turn(transport, url, bodies, TIMEOUTS))

    asyncio.run(_serve_variants(variants, body))
    return records


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_every_honest_writing_gives_the_plainreply_of(transport: str) -> None:
    """72 generated writings of one reply (plus the plain one first) on one pool: every
    record is the plain stream's, judged ok."""
    variants = [_plain(0, PAYLOADS), *(wire.honest(seed, PAYLOADS) for seed in HONEST)]
    records = _read_all(transport, variants)
    plain = reply_of(records[0])
    assert plain[1] is None and plain[-1] == ["ok"], plain
    wrong = [(v.name, r.error, r.verdicts) for v, r in zip(variants, records, strict=True)
             if reply_of(r) != plain]
    assert wrong == [], wrong


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_every_broken_writing_fails_thereply_of(transport: str) -> None:
    """Each generated defect, over four honest writings each: no reply judged ok, and
    a framing or stream fault is a stream error, never a wrong answer. aiohttp's own
    leniencies are pinned apart (`test_what_aiohttp_lets_by`)."""
    variants = [wire.broken(seed, PAYLOADS) for seed in BROKEN]
    records = _read_all(transport, variants)
    passed = [(v.name, r.verdicts) for v, r in zip(variants, records, strict=True)
              if "ok" in r.verdicts]
    if transport == "aiohttp":
        passed = [(name, verdicts) for name, verdicts in passed
                  if not name.endswith("/chunk_bare_lf")]
    assert passed == [], passed
    # A stream of `[DONE]` alone is well formed: it fails as the empty reply it is.
    kinds = Counter(r.verdicts[0] for v, r in zip(variants, records, strict=True)
                    if "ok" not in r.verdicts and (
                        r.error is not None or not v.name.endswith("/empty_stream")))
    stalled = Counter(v.name.split("/")[2] for v, r in zip(variants, records, strict=True)
                      if r.verdicts[0] == "timeout")
    if transport == "aiohttp":  # a malformed chunk after the head stalls it: see below
        assert set(stalled) <= FRAMING, stalled
        kinds.pop("timeout", None)
    assert set(kinds) == {"stream_error"}, (kinds, stalled)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_every_broken_head_fails_thereply_of(transport: str) -> None:
    """Each generated head defect, over four honest writings each: no reply is read from
    a head the reference stacks refuse (no status, a stream error, on every transport),
    a 101 no request asked for included. aiohttp's leniency (a continuation line before
    any field) is pinned apart (`test_what_aiohttp_lets_by`)."""
    variants = [wire.broken_head(seed, PAYLOADS) for seed in BROKEN_HEADS]
    records = _read_all(transport, variants)
    read = [(v.name, r.status, r.error, r.verdicts)
            for v, r in zip(variants, records, strict=True)
            if r.status is not None or r.verdicts != ["stream_error"]
            or not (r.error or "").startswith("stream broken: RemoteProtocolError")]
    if transport == "aiohttp":
        read = [case for case in read if not case[0].endswith("/fold_first")]
    assert read == [], read


def _onereply_of(transport: str, wire_bytes: bytes) -> RequestRecord:
    return _read_all(transport, [wire.Variant("one", False, [wire_bytes], closes=True)])[0]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_what_aiohttp_lets_by(transport: str) -> None:
    """Where aiohttp (llhttp) is lenient, pinned so a change shows: a continuation line
    opening the head is read past there; a chunk-size line
    with an extension ended by a bare LF is read as a chunk there, refused by h11 and by
    the raw transport (the default); a malformed chunk that comes after the head's read
    is not raised to the body's reader there, so the reply fails only when the idle
    timeout ends it (a timeout, not a stream error; never ok)."""
    sse = b"".join(b"data: " + p + b"\n\n" for p in PAYLOADS)
    head = b"HTTP/1.1 200 OK\r\n" + wire.CONTENT_TYPE + b"transfer-encoding: chunked\r\n\r\n"
    cut = len(sse) // 2
    bare_lf = head + b"%x\r\n%s\r\n%x;n=1\n%s\r\n0\r\n\r\n" % (
        cut, sse[:cut], len(sse) - cut, sse[cut:])
    record = _onereply_of(transport, bare_lf)
    if transport == "aiohttp":
        assert record.verdicts == ["ok"], record.error
    else:
        assert record.verdicts == ["stream_error"], record.error
        assert (record.error or "").startswith("stream broken"), record.error
    sign = head + b"%x\r\n%s\r\n+%x\r\n%s\r\n0\r\n\r\n" % (
        cut, sse[:cut], len(sse) - cut, sse[cut:])
    record = _onereply_of(transport, sign)
    # aiohttp raises it when it came in the read that brought the head, else stalls.
    expected = {"timeout", "stream_error"} if transport == "aiohttp" else {"stream_error"}
    assert set(record.verdicts) <= expected, record.error
    # A continuation line before any field (nothing to continue): aiohttp reads past it,
    # h11 and the raw transport refuse the head.
    fold_first = b"HTTP/1.1 200 OK\r\n x-folded: 1\r\n" + wire.CONTENT_TYPE + \
        b"content-length: %d\r\n\r\n" % len(sse) + sse
    record = _onereply_of(transport, fold_first)
    assert record.verdicts == (["ok"] if transport == "aiohttp" else ["stream_error"]), \
        record.error


def test_the_families_are_what_they_say() -> None:
    """The generators cover what the suite claims: every framing, line end, mark,
    trailer and extension among the honest writings; every defect among the broken."""
    honest = [wire._Plan.draw(seed) for seed in HONEST]
    assert {p.framing for p in honest} == {"chunked", "length", "close10", "close11"}
    assert {p.eol for p in honest} == {"\n", "\r\n", "\r", "mixed"}
    for flag in ("bom", "gzip", "trailers", "extensions", "split", "comments", "fields",
                 "zeros", "blanks", "interim", "fold"):
        assert any(getattr(p, flag) for p in honest), flag
    assert {p.coding for p in honest if p.gzip} == set(wire.CODINGS)
    assert {p.head_eol for p in honest} == {"\r\n", "\n", "mixed"}
    assert {h for p in honest for h in p.interim} == set(wire.INTERIM)
    assert {p.fold for p in honest} == {b"", *wire.FOLDS}
    names = Counter(wire.broken(seed, PAYLOADS).name.split("/")[2] for seed in BROKEN)
    assert names == {name: 4 for name in wire.DEFECTS}
    heads = Counter(wire.broken_head(seed, PAYLOADS).name.split("/")[2]
                    for seed in BROKEN_HEADS)
    assert heads == {name: 4 for name in wire.HEAD_DEFECTS}


SMOKE = REPO / "scenarios" / "smoke.toml"


def _tolerant(tmp_path: Path) -> str:
    """The smoke scenario with room for every infrastructure error: each reply of the run
    is served and judged, none stops it early."""
    text = SMOKE.read_text()
    assert "max_infra_errors = 0" in text
    path = tmp_path / "smoke-tolerant.toml"
    path.write_text(text.replace("max_infra_errors = 0", "max_infra_errors = 1000"))
    return str(path)


@pytest.mark.parametrize("family", ["honest", "broken", "broken_tolerant"])
def test_a_whole_run_through_a_reframing_front(fake_server, tmp_path: Path,
                                               family: str) -> None:
    """`dsv4-qual run` against the fake behind a front that writes every streamed reply
    as the next variant of a family. The honest family's run passes, every reply ok.
    The broken family's run is invalid at its first reply (a stream error is an
    infrastructure error, none allowed: exit 2); given room for them all, each defect is
    served twice, no reply is ok and the run still does not pass."""
    _, srv = fake_server(("ok",))
    front = wire.WireFront(srv.url, wire.honest if family == "honest" else wire.broken)
    front.start()
    out = tmp_path / "run"
    scenario = _tolerant(tmp_path) if family == "broken_tolerant" else str(SMOKE)
    try:
        proc = run_cli("run", scenario, "--base-url", front.url, "--out", str(out),
                       "--quiet")
    finally:
        front.stop()
    summary = json.loads((out / "summary.json").read_text())
    verdicts = Counter[str]()
    for phase in summary["phases"].values():
        verdicts.update(phase["primary_verdicts"])
    if family == "honest":
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert summary["phases"]["measurement"]["verdicts"] == {"ok": 32}, front.served
        assert len(set(front.served)) == 40
    elif family == "broken":
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "RUN INVALID" in proc.stdout and "stream" in proc.stdout, proc.stdout
        assert "ok" not in verdicts, verdicts
    else:
        assert proc.returncode != 0, proc.stdout + proc.stderr
        assert len(front.served) == 40 and "ok" not in verdicts, verdicts
        assert sum(verdicts.values()) == 40, verdicts
        assert Counter(name.split("/")[2] for name in front.served) == \
            {name: 2 for name in wire.DEFECTS}

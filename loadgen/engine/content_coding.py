"""A reply body's Content-Encoding, decoded the same way whichever transport read it.

The client sends no Accept-Encoding of its own on the raw transport, but a gateway may
compress a stream regardless, and httpx advertises `gzip, deflate` for the others. The
transports' own decoders do not agree on what they accept: httpx's gzip decoder stops
at the end of the first gzip member and drops the rest unseen (a gateway that
compresses each event as it flushes writes one member per event), its deflate decoder
takes a raw (header-less) deflate stream only when the first read already shows the
zlib header is missing, and a compressed stream cut short passes as a short body. So
the client reads every body as it came on the wire and decodes it here: gzip of any
number of members, `deflate` as RFC 9110 means it (zlib) or as many servers send it
(raw deflate), told apart by the zlib header; a stream that stops inside a member is a
decoding error, as is a coding this does not know.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator

import httpx

#: The codings decoded here; `identity` is no coding at all.
CODINGS = ("gzip", "x-gzip", "deflate")


def _is_zlib_header(head: bytes) -> bool:
    """Whether two bytes open a zlib stream (RFC 1950 2.2: method 8, window at most
    32 KB, the pair a multiple of 31): else a `deflate` body is raw deflate."""
    cmf, flg = head[0], head[1]
    return cmf & 0x0F == 8 and cmf >> 4 <= 7 and ((cmf << 8) | flg) % 31 == 0


class BodyDecoder:
    """One Content-Encoding (`gzip`, `x-gzip` or `deflate`) decoded piece by piece."""

    __slots__ = ("_coding", "_decoder", "_pending", "_seen")

    def __init__(self, coding: str) -> None:
        if coding not in CODINGS:
            raise httpx.DecodingError(f"unsupported Content-Encoding {coding!r}")
        self._coding = coding
        self._decoder: zlib._Decompress | None = (
            zlib.decompressobj(wbits=31) if "gzip" in coding else None)
        self._pending = b""  # a deflate body's first byte, until its second tells its kind
        self._seen = False  # any byte of the body came

    def decode(self, data: bytes) -> bytes:
        if not data:
            return b""
        self._seen = True
        if self._decoder is None:  # deflate, its kind not known yet
            data = self._pending + data
            if len(data) < 2:
                self._pending = data
                return b""
            self._pending = b""
            self._decoder = zlib.decompressobj(wbits=15 if _is_zlib_header(data) else -15)
        out: list[bytes] = []
        try:
            while data:
                out.append(self._decoder.decompress(data))
                data = b""
                if self._decoder.eof and "gzip" in self._coding:
                    # The member ended: what follows is the next member (RFC 1952 2.2).
                    data = self._decoder.unused_data
                    self._decoder = zlib.decompressobj(wbits=31)
                    if not data:
                        self._seen = False  # a body may end between members
        except zlib.error as exc:
            raise httpx.DecodingError(f"Content-Encoding {self._coding}: {exc}") from exc
        return b"".join(out)

    def flush(self) -> bytes:
        """What is left at the body's end; an error when the compressed stream was cut
        (the body ended inside a member: its tail is lost)."""
        if not self._seen:
            return b""
        if self._decoder is None or not self._decoder.eof:
            raise httpx.DecodingError(
                f"Content-Encoding {self._coding}: the compressed stream is cut")
        return b""


def codings(header: str | None) -> list[str]:
    """The codings of a Content-Encoding value, in the order they were applied
    (`identity` dropped)."""
    names = [c.strip().lower() for c in (header or "").split(",")]
    return [c for c in names if c and c != "identity"]


async def decoded(body: AsyncIterator[bytes], header: str | None) -> AsyncIterator[bytes]:
    """`body` (as it came on the wire) decoded by its Content-Encoding `header`."""
    decoders = [BodyDecoder(c) for c in reversed(codings(header))]
    if not decoders:
        async for piece in body:
            yield piece
        return
    async for piece in body:
        for decoder in decoders:
            piece = decoder.decode(piece)
        if piece:
            yield piece
    rest = b""
    for decoder in decoders:
        rest = decoder.decode(rest) + decoder.flush()
    if rest:
        yield rest

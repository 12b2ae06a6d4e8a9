"""The one Content-Encoding decoder every transport's replies go through: any body,
compressed every way a gateway writes it and cut into any pieces, decodes to itself;
a compressed stream cut short never passes as a shorter body."""

from __future__ import annotations

import asyncio
import gzip
import itertools
import zlib

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loadgen.engine.content_coding import decoded


def _coded(body: bytes, how: str, members: list[int]) -> tuple[str, bytes]:
    if how == "gzip":
        cuts = sorted({m % (len(body) + 1) for m in members})
        edges = [0, *cuts, len(body)]
        return "gzip", b"".join(gzip.compress(body[a:b], mtime=0)
                                for a, b in itertools.pairwise(edges))
    packer = zlib.compressobj(wbits=15 if how == "zlib" else -15)
    return "deflate", packer.compress(body) + packer.flush()


async def _pieces(data: bytes, cuts: list[int]):
    at = 0
    for cut in sorted({c % (len(data) + 1) for c in cuts}):
        yield data[at:cut]
        at = cut
    yield data[at:]


def _decode(header: str, data: bytes, cuts: list[int]) -> bytes:
    async def run() -> bytes:
        return b"".join([p async for p in decoded(_pieces(data, cuts), header)])
    return asyncio.run(run())


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=1, max_size=2000), st.sampled_from(["gzip", "zlib", "raw"]),
       st.lists(st.integers(0, 4000), max_size=4), st.lists(st.integers(0, 4000),
                                                             max_size=12))
def test_any_body_decodes_to_itself(body: bytes, how: str, members: list[int],
                                    cuts: list[int]) -> None:
    header, data = _coded(body, how, members)
    assert _decode(header, data, cuts) == body


@settings(max_examples=100, deadline=None)
@given(st.binary(min_size=1, max_size=2000), st.sampled_from(["gzip", "zlib", "raw"]),
       st.integers(1, 4000), st.lists(st.integers(0, 4000), max_size=6))
def test_a_cut_stream_is_an_error(body: bytes, how: str, short: int,
                                  cuts: list[int]) -> None:
    header, data = _coded(body, how, [])
    data = data[:-(1 + short % (len(data) - 1))]  # at least a byte of it left
    with pytest.raises(httpx.DecodingError):
        _decode(header, data, cuts)


def test_identity_and_unknown_codings() -> None:
    assert _decode("identity", b"abc", [1]) == b"abc"
    with pytest.raises(httpx.DecodingError):
        _decode("br", b"abc", [])

"""RequestRecord: one request's forensics, one JSON line in records.jsonl.

The top-level keys are a public contract (other tools read them; people attach these
lines to bug reports), so raw reasoning and content are kept verbatim. The writer
appends and flushes each record as it completes, so a killed run keeps every finished
request; the reader tolerates a torn last line.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import IO, Annotated, Any

import orjson
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field


class ErrorKind(StrEnum):
    """Why a request produced no complete reply; `error` keeps the words, this the class.

    The verdicts count infrastructure failures by it, and the runner reads
    `CONNECT` and `BROKEN` as "the server may have gone away".
    """

    HTTP = "http"  # the server answered with a non-200 status
    CONNECT = "connect"  # no connection (refused, reset before a response, DNS)
    BROKEN = "broken"  # the connection broke mid-response (reset, protocol error)
    TIMEOUT = "timeout"  # connect, first-token, idle or total limit
    STREAM = "stream"  # malformed stream: bad SSE or JSON, in-band error, no [DONE]
    TRANSPORT = "transport"  # any other transport failure
    INTERRUPTED = "interrupted"  # the run was stopped while this request was in flight

    @property
    def server_gone(self) -> bool:
        return self in (ErrorKind.CONNECT, ErrorKind.BROKEN)


@dataclass(slots=True)
class Timings:
    """`sent` is wall-clock epoch seconds; every other point is seconds after `sent`."""

    sent: float = 0.0
    first_byte: float | None = None
    first_reasoning: float | None = None
    first_content: float | None = None
    end: float | None = None
    chunks: int = 0  # deltas that carried a token (text, reasoning or a call)
    reasoning_chunks: int = 0  # of them, those that carried reasoning
    gap_mean: float | None = None
    gap_p50: float | None = None
    gap_max: float | None = None

    @property
    def ttft(self) -> float | None:
        """Time to the first generated token, reasoning or visible."""
        points = [p for p in (self.first_reasoning, self.first_content) if p is not None]
        return min(points) if points else None


@dataclass(slots=True)
class Usage:
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    #: Prompt tokens the server's prefix cache served (`prompt_tokens_details`), where
    #: the server says (vLLM: with --enable-prompt-tokens-details).
    cached_tokens: int | None = None


#: The identity keys every writer of this release writes; what `read` assumes without them.
_UNWRITTEN: dict[str, Any] = {"run_id": "", "scenario": "", "phase": "measurement", "seq": -1,
                              "endpoint": "", "item_id": ""}


@dataclass(slots=True)
class RequestRecord:
    run_id: str
    scenario: str
    phase: str
    seq: int
    endpoint: str
    item_id: str
    params: dict[str, Any] = field(default_factory=dict)
    timings: Timings = field(default_factory=Timings)
    status: int | None = None
    finish_reason: str | None = None
    reasoning: str = ""
    content: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
    verdicts: list[str] = field(default_factory=list)
    error_kind: ErrorKind | None = None
    findings: dict[str, Any] = field(default_factory=dict)  # why the verdicts were given
    #: What a correct reply contains (loadgen.expectations), where the workload knows it.
    expected: dict[str, Any] | None = None
    # Not part of the frozen contract, but kept for the report's plots and checks.
    in_flight: int = 0
    body_hash: str = ""
    greedy: bool = False
    worker: int = 0
    #: A kept connection the server had closed failed before any byte of the reply: the
    #: request was sent again, once, on a new connection (the first attempt's error). A
    #: transport event, never a server failure.
    transport_retry: str | None = None
    #: What the order of the reply's deltas showed wrong, where it showed anything
    #: (`judge.reply.sequence.stream_facts`): a run of deltas replayed, reasoning that came
    #: after the answer began. The joined text cannot show it; None when clean.
    sequence: dict[str, Any] | None = None

    def to_json(self) -> bytes:
        # orjson serialises (slotted) dataclasses natively, ~10x faster than asdict().
        return orjson.dumps(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RequestRecord:
        """The record a dict holds: keys of no field are left out (`data` is not changed).
        Every line of a run is read so after the run (`read`), more than once."""
        timings = data.get("timings") or {}
        usage = data.get("usage") or {}
        return cls(timings=Timings(**{k: v for k, v in timings.items() if k in _TIMINGS}),
                   usage=Usage(**{k: v for k, v in usage.items() if k in _USAGE}),
                   error_kind=_kind(data.get("error_kind")),
                   **{k: v for k, v in data.items() if k in _PLAIN})

    @classmethod
    def read(cls, data: dict[str, Any]) -> RequestRecord:
        """A record as a run wrote it, read back for judging: a key an older release or
        another writer left out takes its default (`seq` -1, the measurement phase), so
        the judge counts what is there instead of stopping at it. Values are as written:
        the readers still check the type of a figure before they do arithmetic on it."""
        return cls.from_dict({**_UNWRITTEN, **data})

    def fail(self, kind: ErrorKind, message: str, *, first_only: bool = True) -> None:
        """Record why the request failed. Within a stream the first problem is the one
        kept; an exception that ends the exchange (`first_only=False`) says the last word."""
        if self.error is None or not first_only:
            self.error = message
            self.error_kind = kind


_TIMINGS = frozenset(Timings.__slots__)
_USAGE = frozenset(Usage.__slots__)
#: The fields `from_dict` takes as they are (the others are typed there).
_PLAIN = frozenset(RequestRecord.__slots__) - {"timings", "usage", "error_kind"}


def _kind(value: Any) -> ErrorKind | None:
    return ErrorKind(value) if value in ErrorKind._value2member_map_ else None


class LandedUsage(BaseModel):
    completion_tokens: int | None = None


class Landed(BaseModel):
    """What the parent of worker processes reads of each record as it lands (progress,
    the phase's error budget): the few keys it needs, typed, parsed straight from the
    line. It reads every line of a run while the run goes, and this costs no more than
    `orjson.loads` alone, where a whole `RequestRecord` costs about three times that.
    A line without verdicts is not a record this release wrote, and is refused."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    seq: int
    verdicts: Annotated[list[str], Field(min_length=1)]
    endpoint: str = ""
    usage: LandedUsage | None = None
    error: str | None = None
    error_kind: Annotated[ErrorKind | None, BeforeValidator(_kind)] = None

    @property
    def completion_tokens(self) -> int:
        return (self.usage.completion_tokens if self.usage else None) or 0


class RecordWriter:
    """Append-only records.jsonl; every line is flushed to the OS when written.

    A flush per record costs one write(2) and means that SIGKILL, an OOM kill or a
    crash of the client loses no finished request. The file is created with the first
    record: a run that sent nothing (the server never became ready) leaves no empty
    records file that would read as "0 requests, all fine".
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: IO[bytes] | None = None
        self.count = 0

    def write(self, record: RequestRecord) -> None:
        if self._fh is None:
            self._fh = open(self.path, "ab", buffering=0)  # noqa: SIM115
        self._fh.write(record.to_json() + b"\n")
        self.count += 1

    def close(self) -> None:
        if self._fh is not None and not self._fh.closed:
            os.fsync(self._fh.fileno())
            self._fh.close()

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def iter_record_dicts(path: Path) -> Iterator[dict[str, Any]]:
    """Yield each complete record; a torn or garbled line (a killed writer) is skipped."""
    with open(path, "rb") as fh:
        for _, _, obj in iter_record_lines(fh):
            yield obj


def iter_record_lines(fh: IO[bytes]) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """Each complete record of an open records file, with where its line lies (byte
    offset, length): a reader that needs a few lines whole again later reads just those
    (`record_at`), not the file. Lines are skipped as `iter_record_dicts` skips them."""
    at = fh.tell()
    for line in fh:
        start, at = at, at + len(line)
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            yield start, len(line), obj


def record_at(fh: IO[bytes], offset: int, length: int) -> dict[str, Any]:
    """The record on the line `iter_record_lines` placed at (offset, length)."""
    fh.seek(offset)
    obj = orjson.loads(fh.read(length))
    if not isinstance(obj, dict):
        raise ValueError(f"no record at byte {offset}")
    return obj

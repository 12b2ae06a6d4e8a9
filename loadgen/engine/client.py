"""One chat completion -> one filled-in RequestRecord.

The client never raises out of `send`: a refused connection, a reset, a stall, a
malformed stream or an in-band error event all end as a record whose `error` says
what happened, so the runner keeps going and the verdicts can count it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

import httpx
import orjson

from loadgen import __version__
from loadgen.engine.content_coding import decoded
from loadgen.engine.raw_http import RawReply, RawTransport, StaleConnection, origin
from loadgen.engine.sse import SSEParser
from loadgen.judge.reply.sequence import stream_facts
from loadgen.records import ErrorKind, RequestRecord

CHAT_PATH = "/v1/chat/completions"
MAX_ERROR_BODY = 64 * 1024


@dataclass(frozen=True, slots=True)
class Timeouts:
    connect: float
    first_token: float
    idle: float
    total: float


class HttpxReply:
    """An httpx response as the client reads a reply, the shape a raw reply has: its
    status, a header by name, its body decoded by the one decoder every transport's
    replies go through (engine/content_coding; httpx's own decoders stop at a gzip
    body's first member), and `aclose`."""

    __slots__ = ("response", "status_code")

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.status_code = response.status_code

    def header(self, name: bytes) -> str | None:
        return self.response.headers.get(name.decode("latin-1"))

    def aiter_bytes(self) -> AsyncIterator[bytes]:
        try:
            # A reply given whole, read already (an `httpx.MockTransport` handler's):
            # httpx decoded it as it read it, and it has no wire bytes left to give.
            whole = self.response.content
        except httpx.ResponseNotRead:
            return decoded(self.response.aiter_raw(), self.header(b"content-encoding"))
        return _once(whole)

    async def aread(self) -> bytes:
        return b"".join([piece async for piece in self.aiter_bytes()])

    async def aclose(self) -> None:
        await self.response.aclose()


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


#: A reply as the client reads it, whichever transport brought it.
Reply = RawReply | HttpxReply


class ChatTransport(Protocol):
    """How the client sends a chat request and tells a kept connection the server had
    closed (safe to send again once) from any other failure: one interface, so the
    client never asks which stack is under it."""

    async def open(self, endpoint: str, body: bytes, fresh: bool = False) -> Reply:
        """Send the request; the reply once its head has come. `fresh`: on a new
        connection, where the stack lets the caller choose."""
        ...

    def stale(self, exc: httpx.TransportError) -> bool: ...


class RawChat:
    """Chat requests as bytes on the raw transport, past httpx's request and response
    objects: a request's head is the same bytes every time but the length."""

    __slots__ = ("_headers", "_raw", "_timeouts", "_wire")

    def __init__(self, raw: RawTransport, headers: dict[str, str], timeouts: Timeouts) -> None:
        self._raw = raw
        self._headers = headers
        self._timeouts = timeouts
        self._wire: dict[str, tuple[tuple[str, str, int], bytes]] = {}

    async def open(self, endpoint: str, body: bytes, fresh: bool = False) -> Reply:
        key, head = self._wire.get(endpoint) or self._head(endpoint)
        return await self._raw.send_bytes(
            key, b"%s%d\r\n\r\n%s" % (head, len(body), body),
            connect_timeout=self._timeouts.connect, read_timeout=None,
            write_timeout=self._timeouts.connect, fresh=fresh)

    def stale(self, exc: httpx.TransportError) -> bool:
        """The raw transport knows the connection was a kept one."""
        return isinstance(exc, StaleConnection)

    def _head(self, endpoint: str) -> tuple[tuple[str, str, int], bytes]:
        """An endpoint's chat request head, all but its length: built once."""
        url = httpx.URL(endpoint + CHAT_PATH)
        lines = [b"POST %s HTTP/1.1" % url.raw_path, b"host: " + url.netloc,
                 b"user-agent: dsv4-qual/" + __version__.encode(),
                 *(f"{k}: {v}".encode("latin-1") for k, v in self._headers.items()),
                 b"content-length: "]
        self._wire[endpoint] = (origin(url), b"\r\n".join(lines))
        return self._wire[endpoint]


class HttpxChat:
    """Chat requests through an httpx client, whatever transport is under it (httpcore,
    aiohttp, a mock)."""

    __slots__ = ("_headers", "_http", "_timeout", "_urls")

    def __init__(self, http: httpx.AsyncClient, headers: dict[str, str],
                 timeouts: Timeouts) -> None:
        self._http = http
        self._headers = headers
        # Every read is bounded by the client's own watchdog (first-token / idle /
        # total); httpx enforces only the connect timeout.
        self._timeout = httpx.Timeout(
            connect=timeouts.connect, read=None, write=timeouts.connect, pool=None)
        self._urls: dict[str, httpx.URL] = {}

    async def open(self, endpoint: str, body: bytes, fresh: bool = False) -> Reply:
        url = self._urls.get(endpoint)
        if url is None:  # parse each endpoint's URL once, not per request
            url = self._urls[endpoint] = httpx.URL(endpoint + CHAT_PATH)
        request = self._http.build_request(
            "POST", url, content=body, headers=self._headers, timeout=self._timeout)
        return HttpxReply(await self._http.send(request, stream=True))

    def stale(self, exc: httpx.TransportError) -> bool:
        """Over httpx or aiohttp, a disconnect before the reply is taken for a kept
        connection the server closed (aiohttp's ServerDisconnectedError arrives as a
        ConnectError; so does its ClientOSError "Can not write request body", a write on
        a kept socket the server had closed, while a failure to connect at all is its
        ClientConnectorError)."""
        if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
            return True
        kinds = {cls.__name__ for cls in type(exc.__cause__).__mro__}
        return "ServerDisconnectedError" in kinds or (
            "ClientOSError" in kinds and "ClientConnectorError" not in kinds)


class _Watchdog:
    """One timer per request that cancels it when its current deadline passes.

    Deadlines move with every chunk (idle timeout); rescheduling a timer per chunk
    costs a heap operation each, so the timer is only re-armed when it fires early.
    """

    __slots__ = ("_handle", "_loop", "_task", "deadline", "expired", "reason")

    def __init__(self, loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any]) -> None:
        self._loop = loop
        self._task = task
        self._handle: asyncio.TimerHandle | None = None
        self.deadline = 0.0
        self.reason = ""
        self.expired: str | None = None

    def arm(self, deadline: float, reason: str) -> None:
        self.deadline = deadline
        self.reason = reason
        if self._handle is None or self._handle.when() > deadline:
            if self._handle is not None:
                self._handle.cancel()
            self._handle = self._loop.call_at(deadline, self._fire)

    def _fire(self) -> None:
        self._handle = None
        if self.expired is not None:
            return
        if self._loop.time() >= self.deadline:
            self.expired = self.reason
            self._task.cancel()
        else:
            self._handle = self._loop.call_at(self.deadline, self._fire)

    def disarm(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


class _ToolCalls:
    """Assembles `delta.tool_calls` fragments into complete calls, as servers send them.

    OpenAI sends a call's id and name once, then argument pieces under its `index`.
    vLLM and SGLang also: repeat the function name (or the id) in every fragment (kept
    once, never concatenated); leave `index` off continuation fragments (they continue
    the current call); give every parallel call `index` 0 and tell them apart by `id`
    (a fragment with a new id starts the next call, whatever its index); send the
    arguments in pieces, whole in one fragment, or whole again at the end (a fragment
    that starts with all the arguments so far replaces them).
    """

    __slots__ = ("_calls", "_current", "_latest")

    def __init__(self) -> None:
        self._calls: list[tuple[int, dict[str, Any]]] = []  # (index, call), by arrival
        self._latest: dict[int, int] = {}  # index -> position of its latest call
        self._current: int | None = None  # the call a fragment without index continues

    def add(self, fragments: list[Any]) -> bool:
        """Merge fragments; False when one is not shaped like a tool-call delta."""
        for frag in fragments:
            if not isinstance(frag, dict):
                return False
            index = frag.get("index")
            fn = frag.get("function") or {}
            if index is not None and (not isinstance(index, int) or isinstance(index, bool)):
                return False
            if not isinstance(fn, dict):
                return False
            name, args = fn.get("name"), fn.get("arguments")
            if not isinstance(name or "", str) or not isinstance(args or "", str):
                return False
            call_id = str(frag["id"]) if frag.get("id") else None
            call = self._calls[self._target(index, call_id, name)][1]
            if call_id and not call["id"]:
                call["id"] = call_id
            if frag.get("type"):
                call["type"] = str(frag["type"])
            if name:
                call["function"]["name"] = _merged_name(call["function"]["name"], name)
            if args:
                call["function"]["arguments"] = _merged_arguments(call["function"]["arguments"],
                                                                  args)
        return True

    def _target(self, index: int | None, call_id: str | None, name: str | None) -> int:
        """The position of the call a fragment belongs to, a new one if it starts one."""
        pos = self._current if index is None else self._latest.get(index)
        if pos is not None:
            call = self._calls[pos][1]
            fn = call["function"]
            if (call_id and call["id"] and call_id != call["id"]) or \
                    (name and fn["arguments"] and _merged_name(fn["name"], name) != fn["name"]):
                pos = None  # a new id, or a new name once the arguments began: the next call
        if pos is None:
            if index is None:
                index = max(self._latest, default=-1) + 1
            pos = len(self._calls)
            self._calls.append((index, {"id": None, "type": "function",
                                        "function": {"name": "", "arguments": ""}}))
            self._latest[index] = pos
        self._current = pos
        return pos

    def result(self) -> list[dict[str, Any]]:
        order = sorted(range(len(self._calls)), key=lambda p: (self._calls[p][0], p))
        return [self._calls[p][1] for p in order]


def _merged_name(current: str, name: str) -> str:
    """A name repeated (or sent whole again) is kept once; pieces of one are joined."""
    if not current or name.startswith(current):
        return name
    return current + name


def _merged_arguments(current: str, piece: str) -> str:
    """Pieces are joined; a fragment that repeats all the arguments so far replaces them."""
    if current and piece.startswith(current):
        return piece
    return current + piece


def _count(value: Any, default: int | None) -> int | None:
    """A token count from a usage object; anything but a non-negative int is ignored."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return default


def _reasoning_of(obj: dict[str, Any]) -> str | None:
    """vLLM >= 0.26 says `reasoning`; older vLLM, SGLang and others `reasoning_content`."""
    value = obj.get("reasoning")
    if value is None:
        value = obj.get("reasoning_content")
    return value if isinstance(value, str) else None


def _error_text(obj: Any) -> str:
    if isinstance(obj, dict):
        err = obj.get("error", obj)
        if isinstance(err, dict):
            msg = err.get("message") or err.get("msg") or orjson.dumps(err).decode()
            code = err.get("code") or err.get("type")
            return f"{code}: {msg}" if code else str(msg)
        return str(err)
    return str(obj)


class ChatClient:
    """Streams chat completions over one shared httpx.AsyncClient."""

    def __init__(
        self, http: httpx.AsyncClient, timeouts: Timeouts, api_key: str | None = None
    ) -> None:
        self.http = http
        self.timeouts = timeouts
        headers = {"content-type": "application/json", "accept": "text/event-stream"}
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        raw: RawTransport | None = getattr(http, "raw", None)
        #: How chat requests go out: the one seam the client talks to, whatever the stack.
        self._chat: ChatTransport = (
            HttpxChat(http, headers, timeouts) if raw is None else RawChat(raw, headers, timeouts))

    async def send(self, record: RequestRecord, body: bytes, stream: bool) -> float | None:
        """Fill `record` with what the server answered; never raises (but CancelledError).

        Returns the server's Retry-After in seconds when it asked for a back-off.
        """
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        dog = _Watchdog(loop, task)
        t0 = loop.time()
        record.timings.sent = time.time()
        dog.arm(t0 + min(self.timeouts.first_token, self.timeouts.total), "first-token")
        total_deadline = t0 + self.timeouts.total
        state = _StreamState(record, loop, t0)
        retry_after = None
        try:
            retry_after = await self._exchange(record, body, stream, dog, state, total_deadline)
        except asyncio.CancelledError:
            if dog.expired is None:
                state.finish_timings()
                raise  # an interrupt from outside: the runner records it
            task.uncancel()
            record.fail(ErrorKind.TIMEOUT, _timeout_message(dog.expired, self.timeouts),
                        first_only=False)
        except httpx.ConnectTimeout as exc:
            if _really_timed_out(exc):
                record.fail(ErrorKind.TIMEOUT,
                            f"timeout: connect ({exc or 'no connection within limit'})",
                            first_only=False)
            else:
                record.fail(ErrorKind.CONNECT, f"connection failed: {exc.__cause__ or exc}",
                            first_only=False)
        except httpx.ConnectError as exc:
            record.fail(ErrorKind.CONNECT, f"connection failed: {exc or type(exc).__name__}",
                        first_only=False)
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
            record.fail(ErrorKind.BROKEN, f"stream broken: {type(exc).__name__}: {exc}",
                        first_only=False)
        except httpx.DecodingError as exc:
            # The body came whole but its Content-Encoding does not decode (a gzip stream
            # corrupt or cut): the server's stream is malformed, not the path to it.
            record.fail(ErrorKind.STREAM, f"stream error: {type(exc).__name__}: {exc}",
                        first_only=False)
        except httpx.TimeoutException as exc:
            record.fail(ErrorKind.TIMEOUT, f"timeout: {type(exc).__name__}: {exc}",
                        first_only=False)
        except (httpx.HTTPError, OSError) as exc:
            record.fail(ErrorKind.TRANSPORT, f"transport error: {type(exc).__name__}: {exc}",
                        first_only=False)
        finally:
            dog.disarm()
        state.finish_timings()
        return retry_after

    async def _exchange(
        self,
        record: RequestRecord,
        body: bytes,
        stream: bool,
        dog: _Watchdog,
        state: _StreamState,
        total_deadline: float,
    ) -> float | None:
        try:
            response = await self._chat.open(record.endpoint, body)
        except httpx.TransportError as exc:
            # No byte of a reply came: a kept connection the server closed as the request
            # went out (its keep-alive ran out), so the server never saw it. Sent again,
            # once, on a new connection; the record says so.
            if not self._chat.stale(exc):
                raise
            record.transport_retry = f"{type(exc).__name__}: {exc}"
            response = await self._chat.open(record.endpoint, body, fresh=True)
        try:
            record.status = response.status_code
            if response.status_code != 200:
                return await self._read_error(record, response)
            if stream:
                await state.consume(response, dog, self.timeouts, total_deadline)
            else:
                await state.consume_json(response)
            return None
        finally:
            with contextlib.suppress(Exception):
                await response.aclose()

    async def _read_error(self, record: RequestRecord, response: Reply) -> float | None:
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if size >= MAX_ERROR_BODY:
                break
        text = b"".join(chunks)[:MAX_ERROR_BODY]
        try:
            detail = _error_text(orjson.loads(text))
        except orjson.JSONDecodeError:
            detail = text.decode("utf-8", "replace").strip()[:2000]
        record.fail(ErrorKind.HTTP, f"HTTP {response.status_code}: {detail}", first_only=False)
        retry_after = response.header(b"retry-after")
        if retry_after is not None:
            with contextlib.suppress(ValueError):
                return max(0.0, float(retry_after))
        return None


def _really_timed_out(exc: BaseException) -> bool:
    """httpx-aiohttp maps every aiohttp connection error to ConnectTimeout; the cause
    tells a refused or reset connection from one that really ran out of time."""
    cause = exc.__cause__
    return cause is None or isinstance(cause, TimeoutError)


def _timeout_message(which: str, timeouts: Timeouts) -> str:
    limit = {"first-token": timeouts.first_token, "idle": timeouts.idle,
             "total": timeouts.total}[which]
    what = {
        "first-token": "no first token",
        "idle": "stream idle",
        "total": "request still running",
    }[which]
    return f"timeout: {which} ({what} after {limit:g} s)"


def _choices_asked(params: dict[str, Any] | None) -> int:
    """How many choices the request asked for (the body's `n`, 1 when it set none)."""
    n = (params or {}).get("n")
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 1 else 1


class _StreamState:
    """What one response has delivered so far (also on a timeout or a reset)."""

    __slots__ = (
        "_answered",
        "_content",
        "_done",
        "_gaps",
        "_last_tok",
        "_late",
        "_loop",
        "_reasoning",
        "_t0",
        "_tools",
        "rec",
    )

    def __init__(self, record: RequestRecord, loop: asyncio.AbstractEventLoop, t0: float):
        self.rec = record
        self._loop = loop
        self._t0 = t0
        self._reasoning: list[str] = []
        self._content: list[str] = []
        self._tools = _ToolCalls()
        self._gaps: list[float] = []
        self._last_tok: float | None = None
        self._done = 0
        # The order of the channels: whether visible content has begun, and how many
        # reasoning deltas came after it (`judge.reply.sequence`).
        self._answered = False
        self._late = 0

    async def consume(
        self,
        response: Reply,
        dog: _Watchdog,
        timeouts: Timeouts,
        total_deadline: float,
    ) -> None:
        rec = self.rec
        timings = rec.timings
        loop = self._loop
        parser = SSEParser()
        idle = timeouts.idle
        got_token = False
        async for chunk in response.aiter_bytes():
            now = loop.time()
            if timings.first_byte is None:
                timings.first_byte = now - self._t0
            for event in parser.feed(chunk):
                if self._event(event.data, event.event, now):
                    got_token = True
            if got_token:
                dog.arm(min(now + idle, total_deadline), "idle" if now + idle < total_deadline
                        else "total")
        for event in parser.close():
            self._event(event.data, event.event, loop.time())
        if parser.problem:
            rec.fail(ErrorKind.STREAM, f"stream error: {parser.problem}")
        if self._done == 0:
            rec.fail(ErrorKind.STREAM, "stream error: stream ended without [DONE]")

    def _event(self, data: bytes, event: bytes, now: float) -> bool:
        """Apply one SSE event; True when it carried generated text or a tool call."""
        rec = self.rec
        if data == b"[DONE]":
            self._done += 1
            if self._done > 1:
                rec.fail(ErrorKind.STREAM, "stream error: duplicate [DONE]")
            return False
        if self._done:
            rec.fail(ErrorKind.STREAM, "stream error: data after [DONE]")
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            rec.fail(ErrorKind.STREAM, f"stream error: invalid JSON in data line: {data[:120]!r}")
            return False
        if not isinstance(obj, dict):
            rec.fail(ErrorKind.STREAM,
                     f"stream error: data is not a JSON object: {data[:120]!r}")
            return False
        # `"error": null` on every chunk is a server saying "no error" (some gateways do).
        if event == b"error" or obj.get("error") is not None or obj.get("object") == "error":
            rec.fail(ErrorKind.STREAM, f"stream error: in-band error event: {_error_text(obj)}")
            return False
        usage = obj.get("usage")
        if usage:
            self._usage(usage)
        choices = obj.get("choices")
        if not choices:
            return False
        if not isinstance(choices, list):
            return self._malformed(f"choices is not a list: {data[:120]!r}")
        choice = self._judged_choice(choices)
        if choice is None:  # another sample of the request (n > 1), or a stray index
            return self._other_choices(choices, data)
        if not (isinstance(choice, dict)
                and isinstance(delta := choice.get("delta") or {}, dict)):
            return self._malformed(f"choices[0].delta is not an object: {data[:120]!r}")
        token = False
        reasoning = delta.get("reasoning")  # vLLM >= 0.26; older servers: reasoning_content
        if reasoning is None:
            reasoning = delta.get("reasoning_content")
        if reasoning:
            if not isinstance(reasoning, str):
                return self._malformed(f"reasoning is not text: {data[:120]!r}")
            self._reasoning.append(reasoning)
            rec.timings.reasoning_chunks += 1
            if self._answered:
                self._late += 1
            if rec.timings.first_reasoning is None:
                rec.timings.first_reasoning = now - self._t0
            token = True
        content = delta.get("content")
        if content:
            if not isinstance(content, str):
                return self._malformed(f"content is not text: {data[:120]!r}")
            self._content.append(content)
            if not self._answered and not content.isspace():
                self._answered = True
            token = True
            if rec.timings.first_content is None:
                rec.timings.first_content = now - self._t0
        tool_calls = delta.get("tool_calls")
        if tool_calls:
            if not isinstance(tool_calls, list) or not self._tools.add(tool_calls):
                return self._malformed(f"malformed tool_calls: {data[:120]!r}")
            token = True
            if rec.timings.first_content is None:
                rec.timings.first_content = now - self._t0
        finish = choice.get("finish_reason")
        if finish:
            rec.finish_reason = str(finish)
        if token:
            if self._last_tok is not None:
                self._gaps.append(now - self._last_tok)
            self._last_tok = now
            rec.timings.chunks += 1
        return token

    @staticmethod
    def _judged_choice(choices: list[Any]) -> Any:
        """The choice the record judges: index 0 (a choice without an index is index 0, as
        a server that never sends more than one writes it). None when the chunk carries
        only other choices."""
        for choice in choices:
            index = choice.get("index", 0) if isinstance(choice, dict) else 0
            if index == 0 and not isinstance(index, bool):
                return choice
        return None

    def _other_choices(self, choices: list[Any], data: bytes) -> bool:
        """A chunk of the other samples a request asked for (`n`): not the judged reply's
        text, but the reply's traffic all the same (the idle watchdog is re-armed). An
        index the request did not ask for is a broken stream: a choice of nobody's, or
        of another request's."""
        asked = _choices_asked(self.rec.params)
        for choice in choices:
            index = choice.get("index") if isinstance(choice, dict) else None
            if not (isinstance(index, int) and not isinstance(index, bool)
                    and 0 < index < asked):
                return self._malformed(f"a choice with index {index!r} where the request "
                                       f"asked for {asked}: {data[:120]!r}")
        return any(isinstance(c.get("delta"), dict) and any(
            c["delta"].get(k) for k in ("content", "reasoning", "reasoning_content",
                                        "tool_calls")) for c in choices)

    def _malformed(self, what: str) -> bool:
        self.rec.fail(ErrorKind.STREAM, f"stream error: {what}")
        return False

    def _usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            self._malformed("usage is not an object")
            return
        u = self.rec.usage
        u.prompt_tokens = _count(usage.get("prompt_tokens"), u.prompt_tokens)
        u.completion_tokens = _count(usage.get("completion_tokens"), u.completion_tokens)
        details = usage.get("completion_tokens_details") or {}
        if isinstance(details, dict):
            u.reasoning_tokens = _count(details.get("reasoning_tokens"), u.reasoning_tokens)
        prompt = usage.get("prompt_tokens_details") or {}
        if isinstance(prompt, dict):
            u.cached_tokens = _count(prompt.get("cached_tokens"), u.cached_tokens)

    async def consume_json(self, response: Reply) -> None:
        raw = await response.aread()
        now = self._loop.time()
        rec = self.rec
        rec.timings.first_byte = now - self._t0
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            rec.fail(ErrorKind.STREAM, f"stream error: response is not JSON: {raw[:120]!r}")
            return
        choices = obj.get("choices") if isinstance(obj, dict) else None
        if (isinstance(obj, dict) and obj.get("error") is not None) or not choices \
                or not isinstance(choices, list) or not isinstance(choices[0], dict):
            rec.fail(ErrorKind.STREAM,
                     f"stream error: unexpected response: {_error_text(obj)}"[:2000])
            return
        choice = self._judged_choice(choices) or choices[0]
        msg = choice.get("message") or {}
        if not isinstance(msg, dict):
            rec.fail(ErrorKind.STREAM, "stream error: choices[0].message is not an object")
            return
        reasoning = _reasoning_of(msg)
        if reasoning:
            self._reasoning.append(reasoning)
            rec.timings.first_reasoning = rec.timings.first_byte
        content = msg.get("content")
        if content:
            if not isinstance(content, str):
                rec.fail(ErrorKind.STREAM, "stream error: message.content is not text")
                return
            self._content.append(content)
            rec.timings.first_content = rec.timings.first_byte
        calls = msg.get("tool_calls") or []
        if not isinstance(calls, list) or not self._tools.add(
                [{**c, "index": i} if isinstance(c, dict) else c for i, c in enumerate(calls)]):
            rec.fail(ErrorKind.STREAM, "stream error: malformed message.tool_calls")
            return
        finish = choice.get("finish_reason")
        rec.finish_reason = str(finish) if finish is not None else None
        if obj.get("usage"):
            self._usage(obj["usage"])
        self._done = 1

    def finish_timings(self) -> None:
        rec = self.rec
        if rec.timings.end is None:
            rec.timings.end = self._loop.time() - self._t0
        rec.reasoning = "".join(self._reasoning)
        rec.content = "".join(self._content)
        # The deltas in order, looked at once while they are still apart: only what
        # was wrong with them is kept.
        rec.sequence = stream_facts(self._reasoning, self._content, self._late)
        rec.tool_calls = self._tools.result()
        gaps = self._gaps
        if gaps:
            rec.timings.gap_mean = sum(gaps) / len(gaps)
            rec.timings.gap_max = max(gaps)
            rec.timings.gap_p50 = sorted(gaps)[len(gaps) // 2]

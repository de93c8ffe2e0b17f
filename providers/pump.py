"""The streaming pump: read a 200 stream under every budget, fold it, end it exactly once.

Each read waits for the earliest applicable deadline: the trailer grace once the
terminal event arrived, the first-token budget until a token arrived, then the idle
budget since the last chunk, and always the total budget; one timer per stream enforces
that (:class:`_Watchdog`), not a timeout armed and cancelled per chunk (about a fifth
of the pump's profiled CPU at one small chunk per token). Events go through the wire's
:class:`~providers.wire.StreamState`; malformed ones are skipped and counted until they
are too many, a reply above ``max_reply_bytes`` is abandoned at once, progress is
reported as text arrives, and every way the stream can end that is not its terminal
event becomes one typed error carrying the partial text (:func:`classify_stream_end`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx

from agent_failover.providers.base import CALL_ERRORS, Call, oversized_error
from agent_failover.providers.classify import (
    Phase,
    StreamEnd,
    classify_exception,
    classify_stream_end,
)
from agent_failover.providers.client import Budgets
from agent_failover.providers.wire import StreamDecoder, StreamFramingError, StreamState
from agent_failover.resilience.errors import MalformedStreamError, ProviderError

#: After a stream's last event, how long and how much of the body's end (the chunked
#: terminator) is read so the connection goes back to the pool instead of being closed.
STREAM_DRAIN_S = 0.02
STREAM_DRAIN_BYTES = 64 * 1024


@dataclass
class _Marks:
    """When the stream's milestones happened, in loop time."""

    started: float
    last_chunk_at: float
    first_token_at: float | None = None
    finished_at: float | None = None


def _next_deadline(b: Budgets, m: _Marks) -> tuple[float, StreamEnd]:
    """The deadline of the next read and what passing it means."""
    if m.finished_at is not None:
        deadline, end = m.finished_at + b.trailer_grace_s, StreamEnd.COMPLETE
    elif m.first_token_at is None:
        deadline, end = m.started + b.ttft_s, StreamEnd.FIRST_TOKEN_TIMEOUT
    else:
        deadline, end = m.last_chunk_at + b.idle_s, StreamEnd.IDLE_TIMEOUT
    total_at = m.started + b.total_s
    if total_at < deadline:
        deadline = total_at
        if end is not StreamEnd.COMPLETE:
            end = (
                StreamEnd.FIRST_TOKEN_TIMEOUT
                if m.first_token_at is None
                else StreamEnd.TOTAL_TIMEOUT
            )
    return deadline, end


class _Watchdog:
    """One timer per stream instead of a timeout armed and cancelled around every read.

    The deadline of the next read (:func:`_next_deadline`) only moves later while tokens
    flow, so the timer is left armed at an earlier time and, when it fires early, moved to
    the deadline as it then stands; :meth:`arm` moves it earlier when a milestone (the
    first token, the terminal event) brings the deadline forward. When the deadline has
    truly passed during a read, the task is cancelled and the read raises
    :class:`TimeoutError`, with the same cancellation bookkeeping as ``asyncio.timeout``:
    a cancellation from outside (a hedge's loser) stays a cancellation.
    """

    def __init__(self, budgets: Budgets, marks: _Marks) -> None:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a stream is read under its budgets only inside a task")
        self._loop, self._task, self._cancelling = asyncio.get_running_loop(), task, 0
        self._budgets, self._marks = budgets, marks
        self._handle: asyncio.TimerHandle | None = None
        self._armed_at = float("inf")
        self._reading = False
        self._overdue = False
        self.time = self._loop.time
        #: What passing the deadline meant, once it passed during a read.
        self.expired: StreamEnd | None = None

    def arm(self) -> None:
        """Arm the timer at the current deadline when that is earlier than the armed one."""
        deadline, _ = _next_deadline(self._budgets, self._marks)
        if deadline < self._armed_at:
            self._set(deadline)

    def stop(self) -> None:
        """Disarm; the stream is no longer read under the budgets."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    async def read(self, chunks: AsyncIterator[bytes]) -> bytes:
        """The next chunk, or :class:`TimeoutError` when the deadline passes first."""
        if self._overdue:
            self._overdue = False
            self._set(self.time(), soon=True)
        self._cancelling = self._task.cancelling()  # as asyncio.timeout does on entry
        self._reading = True
        try:
            return await anext(chunks)
        except asyncio.CancelledError as exc:
            if self.expired is not None and self._task.uncancel() <= self._cancelling:
                raise TimeoutError from exc
            raise
        finally:
            self._reading = False

    def _set(self, when: float, *, soon: bool = False) -> None:
        self.stop()
        self._armed_at = when
        self._handle = (
            self._loop.call_soon(self._wake) if soon else self._loop.call_at(when, self._wake)
        )

    def _wake(self) -> None:
        self._handle = None
        deadline, end = _next_deadline(self._budgets, self._marks)
        if deadline > self._armed_at:
            self._set(deadline)  # chunks arrived since it was armed: not yet
        elif not self._reading:
            self._overdue = True  # checked again at the next read, as a timeout would be
        elif self.expired is None:
            self.expired = end
            self._task.cancel()


async def pump(call: Call, response: httpx.Response, state: StreamState) -> float | None:
    """Read the stream until its terminal event (plus trailer grace); return the TTFT in ms."""
    decoder = state.new_decoder()
    chunks = _body(response)
    marks = _Marks(started=call.started, last_chunk_at=call.clock())
    watch = _Watchdog(call.budgets, marks)
    watch.arm()
    eof = False
    try:
        while not state.done:
            try:
                chunk = await watch.read(chunks)
            except StopAsyncIteration:
                eof = True
                break
            except TimeoutError as exc:
                end = watch.expired or _next_deadline(call.budgets, marks)[1]
                if end is StreamEnd.COMPLETE:
                    break  # terminal event seen; the missing trailer is not worth waiting for
                detail = f"after {call.clock() - call.started:.3g}s"
                raise _stream_error(call, state, end, detail) from exc
            except CALL_ERRORS as exc:
                if state.finished:
                    break  # the content is complete; a broken trailer does not lose it
                raise _read_error(call, state, marks, exc) from exc
            marks.last_chunk_at = watch.time()
            await _fold_chunk(call, state, decoder, chunk, marks, watch)
    finally:
        watch.stop()
    if eof and not state.done:
        for event in decoder.flush():
            await _apply(call, state, event)
    if not eof and state.done:
        await _drain(
            chunks, min(call.clock() + STREAM_DRAIN_S, call.started + call.budgets.total_s)
        )
    _check_ending(call, state)
    if marks.first_token_at is None:
        return None
    return (marks.first_token_at - call.started) * 1000.0


def _body(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body's chunks: raw (one generator and decoder fewer per chunk) when the body is
    not content-encoded and not already read (a test's prepared response)."""
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding in ("", "identity") and not response.is_stream_consumed:
        return response.aiter_raw()
    return response.aiter_bytes()


def _read_error(call: Call, state: StreamState, marks: _Marks, exc: Exception) -> ProviderError:
    phase = Phase.AWAITING_FIRST_TOKEN if marks.first_token_at is None else Phase.STREAMING
    return classify_exception(exc, endpoint=call.name, phase=phase, partial_text=state.text)


async def _fold_chunk(
    call: Call,
    state: StreamState,
    decoder: StreamDecoder,
    chunk: bytes,
    marks: _Marks,
    watch: _Watchdog,
) -> None:
    """Fold the events ``chunk`` completes, marking the first token and the terminal event."""
    for event in _decode(call, state, decoder, chunk):
        if _fold(call, state, event) and call.on_progress is not None:
            await call.progress(state.text)
        if marks.first_token_at is None and state.content_events:
            marks.first_token_at = watch.time()
            watch.arm()
        if state.finished and marks.finished_at is None:
            marks.finished_at = watch.time()
            watch.arm()
        if state.done:
            break


def _check_ending(call: Call, state: StreamState) -> None:
    """A stream that stopped being read fails when it was too malformed or never finished."""
    if state.too_malformed():
        raise _stream_error(
            call, state, StreamEnd.MALFORMED, f"{state.malformed} of {state.events} events"
        )
    if not state.finished:
        raise _stream_error(
            call, state, StreamEnd.EOF_BEFORE_TERMINAL, f"after {len(state.text)} characters"
        )


async def _drain(chunks: AsyncIterator[bytes], deadline: float) -> None:
    """Read what is left of a finished stream, briefly and ignoring it.

    A response closed before its body's end closes its connection: each call then paid a
    new connection (a TLS handshake, with a real provider). The end usually arrives with
    the last event; a server that holds the stream open keeps it closed as before.
    """
    size = 0
    try:
        async with asyncio.timeout_at(deadline):
            async for chunk in chunks:
                size += len(chunk)
                if size > STREAM_DRAIN_BYTES:
                    return
    except (TimeoutError, *CALL_ERRORS):
        return  # the answer is complete; only the connection's reuse is lost


def _decode(call: Call, state: StreamState, decoder: StreamDecoder, chunk: bytes) -> list[Any]:
    try:
        return decoder.feed(chunk)
    except StreamFramingError as exc:
        raise _stream_error(call, state, StreamEnd.MALFORMED, f"broken framing: {exc}") from exc


async def _apply(call: Call, state: StreamState, event: Any) -> None:
    if _fold(call, state, event) and call.on_progress is not None:
        await call.progress(state.text)


def _fold(call: Call, state: StreamState, event: Any) -> bool:
    """Fold one event into ``state``; whether it added content (progress to report)."""
    before = state.content_events
    state.on_event(event)
    if state.malformed and state.too_malformed():
        raise _stream_error(
            call, state, StreamEnd.MALFORMED, f"{state.malformed} of {state.events} events"
        )
    limit = call.budgets.max_reply_bytes
    if limit is not None and state.text_bytes > limit:
        # Stop reading now: an endless or runaway stream must not be buffered to the end.
        raise oversized_error(call.name, state.text_bytes, limit, state.text, streaming=True)
    return state.content_events > before


def _stream_error(call: Call, state: StreamState, end: StreamEnd, detail: str) -> ProviderError:
    err = classify_stream_end(end, endpoint=call.name, partial_text=state.text, detail=detail)
    # Only StreamEnd.COMPLETE maps to None, and a completed stream never asks for an error.
    return err or MalformedStreamError(detail, endpoint=call.name, partial_text=state.text)

"""The streaming pump: read a 200 stream under every budget, fold it, end it exactly once.

Each read waits for the earliest applicable deadline: the trailer grace once the
terminal event arrived, the first-token budget until a token arrived, then the idle
budget since the last chunk, and always the total budget; one timer per stream enforces
that (:class:`_Watchdog`), not a timeout armed and cancelled per chunk (about a fifth
of the pump's profiled CPU at one small chunk per token). Events go through the wire's
:class:`~providers.wire.StreamState`; malformed ones are skipped and counted until they
are too many, a reply above ``max_reply_bytes`` is abandoned at once, progress is
reported as text arrives (at most once per chunk, and only when a report is due), and
every way the stream can end that is not its terminal event becomes one typed error
carrying the partial text (:func:`classify_stream_end`). After the terminal event the
same loop, under the same timer, reads the body's end (:data:`STREAM_DRAIN_S`).
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
#: terminator) is read so the connection goes back to the pool instead of being closed: a
#: response closed before its body's end closes its connection, and each call then paid a
#: new one (a TLS handshake, with a real provider). The end usually arrives with the last
#: event; a server that holds the stream open has its connection closed, as before.
STREAM_DRAIN_S = 0.02
STREAM_DRAIN_BYTES = 64 * 1024


@dataclass
class _Marks:
    """When the stream's milestones happened, in loop time."""

    started: float
    last_chunk_at: float
    first_token_at: float | None = None
    finished_at: float | None = None
    #: Once the stream is done: until when the body's end is read (:data:`STREAM_DRAIN_S`).
    drain_until: float | None = None


def _next_deadline(b: Budgets, m: _Marks) -> tuple[float, StreamEnd]:
    """The deadline of the next read and what passing it means."""
    if m.drain_until is not None:
        return m.drain_until, StreamEnd.COMPLETE  # never past the total budget
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
    truly passed during a read, the task is cancelled and the reader, asking :meth:`fired`,
    ends the stream by what the deadline meant, with the same cancellation bookkeeping as
    ``asyncio.timeout``: a cancellation from outside (a hedge's loser) stays one.
    """

    def __init__(self, budgets: Budgets, marks: _Marks) -> None:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a stream is read under its budgets only inside a task")
        self._loop, self._task, self._cancelling = asyncio.get_running_loop(), task, 0
        self._budgets, self._marks = budgets, marks
        self._handle: asyncio.TimerHandle | None = None
        self._armed_at = float("inf")
        #: A read is being awaited (set by :meth:`enter_read`, cleared by the reader).
        self.reading = False
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

    def enter_read(self) -> None:
        """A read is about to be awaited: the deadline may cancel the task until it returns
        (the reader clears :attr:`reading` then)."""
        if self._overdue:
            self._overdue = False
            self._set(self.time(), soon=True)
        self._cancelling = self._task.cancelling()  # as asyncio.timeout does on entry
        self.reading = True

    def fired(self) -> bool:
        """Whether the cancellation a read just raised is this timer's: its deadline passed
        during the read. Call once per cancellation caught (it uncancels the task)."""
        self.reading = False
        return self.expired is not None and self._task.uncancel() <= self._cancelling

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
        elif not self.reading:
            self._overdue = True  # checked again at the next read, as a timeout would be
        elif self.expired is None:
            self.expired = end
            self._task.cancel()


async def pump(call: Call, response: httpx.Response, state: StreamState) -> float | None:
    """Read the stream until its terminal event (plus trailer grace); return the TTFT in ms."""
    decoder = state.new_decoder()
    marks = _Marks(started=call.started, last_chunk_at=call.clock())
    watch = _Watchdog(call.budgets, marks)
    watch.arm()
    try:
        eof = await _read(call, state, decoder, _body(response), (marks, watch))
    finally:
        watch.stop()
    if eof and not state.done and _fold_events(call, state, decoder.flush()):
        await call.progress(state.text)
    _check_ending(call, state)
    if marks.first_token_at is None:
        return None
    return (marks.first_token_at - call.started) * 1000.0


async def _read(
    call: Call,
    state: StreamState,
    decoder: StreamDecoder,
    chunks: AsyncIterator[bytes],
    timing: tuple[_Marks, _Watchdog],
) -> bool:
    """Read and fold chunks until the stream is done, then drain the body's end (see
    :data:`STREAM_DRAIN_S`); True when the body ended (EOF).

    One loop for the whole stream: each read is awaited here under the watchdog, not in a
    coroutine of its own, and the chunk's arrival time is read once for every mark.
    """
    marks, watch = timing
    drained = 0
    while True:
        watch.enter_read()
        try:
            chunk = await anext(chunks)
        except StopAsyncIteration:
            return True
        except (asyncio.CancelledError, TimeoutError) as exc:
            if isinstance(exc, asyncio.CancelledError) and not watch.fired():
                raise  # a cancellation from outside (a hedge's loser) stays one
            err = _timed_out(call, state, marks, watch)
            if err is None:
                return False  # terminal event seen; the missing trailer is not worth waiting for
            raise err from exc
        except CALL_ERRORS as exc:
            if state.finished or marks.drain_until is not None:
                return False  # the content is complete; a broken trailer does not lose it
            raise _read_error(call, state, marks, exc) from exc
        watch.reading = False
        now = marks.last_chunk_at = watch.time()
        if marks.drain_until is not None:
            drained += len(chunk)
            if drained > STREAM_DRAIN_BYTES:
                return False
        elif _on_chunk(call, state, _decode(call, state, decoder, chunk), now, timing):
            await call.progress(state.text)


def _body(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body's chunks: raw (one generator and decoder fewer per chunk) when the body is
    not content-encoded and not already read (a test's prepared response)."""
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding in ("", "identity") and not response.is_stream_consumed:
        return response.aiter_raw()
    return response.aiter_bytes()


def _timed_out(
    call: Call, state: StreamState, marks: _Marks, watch: _Watchdog
) -> ProviderError | None:
    """The error of a read whose deadline passed; None when the content was complete."""
    end = watch.expired or _next_deadline(call.budgets, marks)[1]
    if end is StreamEnd.COMPLETE:
        return None
    return _stream_error(call, state, end, f"after {call.clock() - call.started:.3g}s")


def _read_error(call: Call, state: StreamState, marks: _Marks, exc: Exception) -> ProviderError:
    phase = Phase.AWAITING_FIRST_TOKEN if marks.first_token_at is None else Phase.STREAMING
    return classify_exception(exc, endpoint=call.name, phase=phase, partial_text=state.text)


def _on_chunk(
    call: Call, state: StreamState, events: list[Any], now: float, timing: tuple[_Marks, _Watchdog]
) -> bool:
    """Fold the events a chunk completed and mark the milestones it reached (the first token,
    the terminal event, the end of the content) at its arrival; whether progress is due."""
    marks, watch = timing
    added = _fold_events(call, state, events)
    if added and marks.first_token_at is None:
        marks.first_token_at = now
        watch.arm()
    if state.finished and marks.finished_at is None:
        marks.finished_at = now
        watch.arm()
    if state.done:
        # Read what is left (the chunked terminator, usually already buffered) so the
        # connection goes back to the pool: see STREAM_DRAIN_S.
        marks.drain_until = min(now + STREAM_DRAIN_S, call.started + call.budgets.total_s)
        watch.arm()
    return added and call.on_progress is not None and now >= call.next_progress_at


def _check_ending(call: Call, state: StreamState) -> None:
    """A stream that stopped being read fails when it was too malformed or never finished."""
    if state.too_malformed():
        raise _too_malformed(call, state)
    if not state.finished:
        raise _stream_error(
            call, state, StreamEnd.EOF_BEFORE_TERMINAL, f"after {len(state.text)} characters"
        )


def _decode(call: Call, state: StreamState, decoder: StreamDecoder, chunk: bytes) -> list[Any]:
    try:
        return decoder.feed(chunk)
    except StreamFramingError as exc:
        raise _stream_error(call, state, StreamEnd.MALFORMED, f"broken framing: {exc}") from exc


def _fold_events(call: Call, state: StreamState, events: list[Any]) -> bool:
    """Fold ``events`` into ``state`` until it is done; whether they added content.

    The limits are checked after every event: a stream too malformed or above
    ``max_reply_bytes`` stops at the event that crossed the line, not at the chunk's end.
    """
    before = state.content_events
    limit = call.budgets.max_reply_bytes
    for event in events:
        state.on_event(event)
        if state.malformed and state.too_malformed():
            raise _too_malformed(call, state)
        if limit is not None and state.text_bytes > limit:
            # Stop reading now: an endless or runaway stream must not be buffered to the end.
            raise oversized_error(call.name, state.text_bytes, limit, state.text, streaming=True)
        if state.done:
            break
    return state.content_events > before


def _too_malformed(call: Call, state: StreamState) -> ProviderError:
    return _stream_error(
        call, state, StreamEnd.MALFORMED, f"{state.malformed} of {state.events} events"
    )


def _stream_error(call: Call, state: StreamState, end: StreamEnd, detail: str) -> ProviderError:
    err = classify_stream_end(end, endpoint=call.name, partial_text=state.text, detail=detail)
    # Only StreamEnd.COMPLETE maps to None, and a completed stream never asks for an error.
    return err or MalformedStreamError(detail, endpoint=call.name, partial_text=state.text)

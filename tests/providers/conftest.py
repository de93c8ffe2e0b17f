"""Fixtures for the adapter tests: the sentinel key in the environment, a recording transport."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from tests.providers.wire import KEY_ENV, SENTINEL_KEY


@pytest.fixture(autouse=True)
def sentinel_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs with the sentinel key set; tests assert it never leaks."""
    monkeypatch.setenv(KEY_ENV, SENTINEL_KEY)
    return SENTINEL_KEY


class Recorder:
    """A MockTransport handler that records requests and answers with a scripted response."""

    def __init__(self, respond: Callable[[httpx.Request], object]) -> None:
        self.respond = respond
        self.requests: list[httpx.Request] = []

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        result = self.respond(request)
        if hasattr(result, "__await__"):
            result = await result  # type: ignore[misc]
        if isinstance(result, BaseException):
            raise result
        assert isinstance(result, httpx.Response)
        return result


@pytest.fixture
def mock_client() -> Callable[
    [Callable[[httpx.Request], object]], tuple[httpx.AsyncClient, Recorder]
]:
    """Factory: a client whose every request goes to a Recorder answering with ``respond``."""
    from agent_failover.providers.client import build_http_client

    def make(respond: Callable[[httpx.Request], object]) -> tuple[httpx.AsyncClient, Recorder]:
        recorder = Recorder(respond)
        return build_http_client(transport=httpx.MockTransport(recorder)), recorder

    return make

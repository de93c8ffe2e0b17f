"""The worker's logging setup masks credentials: a Gemini call against the simulator with
httpx/httpcore at DEBUG (request lines, a header-dumping hook) never prints the key."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from agent_failover import logs
from agent_failover.logs import RedactSecrets, configure_logging, redact_policy_secrets
from agent_failover.providers.client import Budgets, build_http_client
from agent_failover.providers.registry import complete
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.testing.sim.server import start_simulator

KEY = "SENTINEL-gemini-7f3a9c1e"  # not key-shaped: masked by name and by env value
KEY_ENV = "FAILOVER_TEST_GEMINI_KEY"
log = logging.getLogger("agent_failover.test_redaction")


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    saved = (root.level, list(root.handlers), set(logs._secret_values))
    yield
    root.handlers[:] = saved[1]
    root.setLevel(saved[0])
    logs._secret_values.clear()
    logs._secret_values.update(saved[2])
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.NOTSET)


class Capture(logging.Handler):
    """Every record as it arrives, before any filter of other handlers rewrites it."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


async def test_gemini_call_at_debug_never_logs_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    shown = io.StringIO()
    raw = Capture()
    configure_logging("DEBUG", handlers=[logging.StreamHandler(shown)])
    sim = await start_simulator()
    try:
        # A key in the URL as well as the header: what a ``query: {key: ...}`` policy sends.
        ep = sim.endpoint_config("gemini-flash", api_key_env=KEY_ENV, query={"key": KEY})
        redact_policy_secrets(SimpleNamespace(endpoints={ep.name: ep}))
        logging.getLogger().handlers.insert(0, raw)  # sees records before redaction

        async def dump(request) -> None:
            log.debug("request %s %s headers %s", request.method, request.url, request.headers)

        async with build_http_client([ep]) as http:
            http.event_hooks["request"] = [dump]
            reply = await complete(
                http,
                ep,
                ChatRequest(messages=[Message(role="user", content="hi")], max_tokens=32),
                Budgets(total_s=5.0),
            )
        assert reply.text
        log.debug("the key itself: %s", KEY)
        try:
            raise RuntimeError(f"provider echoed {KEY}")
        except RuntimeError:
            log.exception("call failed")
    finally:
        await sim.stop()
    out = shown.getvalue()
    # The key was really logged (httpx's request line, the header dump, a message) ...
    assert any("HTTP Request: POST" in line and KEY in line for line in raw.lines)
    assert any("x-goog-api-key" in line and KEY in line for line in raw.lines)
    assert any(line == f"the key itself: {KEY}" for line in raw.lines)
    # ... and the worker's handler printed none of it.
    assert KEY not in out
    assert "HTTP Request: POST" in out and "<redacted>" in out and "RuntimeError" in out


def test_filter_renders_args_once_and_keeps_plain_records() -> None:
    rec = logging.LogRecord("x", logging.INFO, __file__, 1, "n=%d url=%s", (3, "/a?b=1"), None)
    assert RedactSecrets().filter(rec)
    assert rec.getMessage() == "n=3 url=/a?b=1" and rec.args is None
    pct = logging.LogRecord("x", logging.INFO, __file__, 1, "100% sure", None, None)
    assert RedactSecrets().filter(pct) and pct.getMessage() == "100% sure"


def test_policy_secrets_come_from_the_named_env_vars() -> None:
    ep = SimpleNamespace(api_key_env="K_ENV", headers_from_env={"x-extra": "H_ENV"})
    env = {"K_ENV": "value-of-key-1", "H_ENV": "value-of-header", "OTHER": "not-a-key-val"}
    redact_policy_secrets(SimpleNamespace(endpoints={"e": ep}), env)
    rec = logging.LogRecord("x", logging.INFO, __file__, 1, "%s %s %s", tuple(env.values()), None)
    RedactSecrets().filter(rec)
    assert rec.getMessage() == "<redacted> <redacted> not-a-key-val"

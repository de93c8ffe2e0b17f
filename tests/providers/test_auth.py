"""Cloud credentials: tokens refreshed before expiry, one refresh at a time, real
google-auth against the simulator's OAuth endpoint, SigV4 accepted where auth is
required, every credential failure typed, missing extras named."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent_failover.providers.auth import (
    AccessToken,
    CredentialStore,
    TokenCache,
    attach_credentials,
    credential_error,
)
from agent_failover.providers.client import Budgets, build_http_client
from agent_failover.providers.extras import missing_extras
from agent_failover.providers.registry import complete
from agent_failover.resilience import errors as E
from agent_failover.resilience.endpoint import EndpointConfig
from agent_failover.resilience.models import ChatRequest, Message
from agent_failover.testing.sim.config import load_sim_config
from agent_failover.testing.sim.server import RunningSimulator, start_simulator

NOW = 1_750_000_000.0
BUDGETS = Budgets(connect_s=2.0, ttft_s=5.0, idle_s=2.0, total_s=10.0)


class CountingSource:
    """A token source whose tokens live ``lifetime`` seconds from a settable clock."""

    def __init__(self, lifetime: float = 3600.0) -> None:
        self.lifetime = lifetime
        self.now = NOW
        self.fetched = 0
        self.gate: threading.Event | None = None

    def fetch(self) -> AccessToken:
        if self.gate is not None:
            self.gate.wait(5)
        self.fetched += 1
        return AccessToken(f"tok-{self.fetched}", self.now + self.lifetime)


async def test_token_is_reused_until_the_refresh_margin() -> None:
    """A token is reused while it has more than the margin left, then refreshed early."""
    source = CountingSource(lifetime=3600)
    cache = TokenCache(source, "a token", margin_s=300)
    assert (await cache.get(NOW)).token == "tok-1"
    assert (await cache.get(NOW + 3299)).token == "tok-1"
    # 300 s before expiry: refreshed although the old token is still valid
    source.now = NOW + 3300
    assert (await cache.get(NOW + 3300)).token == "tok-2"
    assert source.fetched == 2 and cache.fetches == 2


async def test_concurrent_calls_share_one_refresh() -> None:
    """Calls that find the token stale together wait for one fetch, not one each."""
    source = CountingSource()
    source.gate = threading.Event()
    cache = TokenCache(source, "a token")
    calls = [asyncio.create_task(cache.get(NOW)) for _ in range(8)]
    await asyncio.sleep(0)  # every call is now waiting on the lock or the fetch
    source.gate.set()
    tokens = {t.token for t in await asyncio.gather(*calls)}
    assert tokens == {"tok-1"} and source.fetched == 1


def test_access_token_repr_hides_the_token() -> None:
    """The token never appears in a repr (logs, exceptions)."""
    assert "secret-value" not in repr(AccessToken("secret-value", 1.0))


class ServiceRequestError(Exception):
    """Named like azure-core's transport failure."""


@pytest.mark.parametrize(
    ("exc", "cls"),
    [
        (LookupError("no AWS credentials found"), E.AuthError),
        (ValueError("invalid_grant: account disabled"), E.AuthError),
        (ServiceRequestError("connection refused"), E.ConnectError),
        (TimeoutError(), E.ConnectError),
        (ConnectionRefusedError(), E.ConnectError),
    ],
)
def test_credential_failures_are_typed(exc, cls) -> None:
    """No credentials or a rejected refresh is AuthError; an unreachable endpoint ConnectError."""
    err = credential_error(exc, "ep", "a token")
    assert type(err) is cls and err.endpoint == "ep"


def test_missing_extras_are_named_per_field(monkeypatch) -> None:
    """config check can say which extra each route needs and which field asks for it."""
    monkeypatch.setitem(sys.modules, "google.auth", None)
    monkeypatch.setitem(sys.modules, "google.auth.transport.requests", None)
    ep = EndpointConfig(
        name="v", provider="gemini", cloud="gcp", region="us-east5", project="p", model="g"
    )
    [(field, message)] = missing_extras(ep)
    assert field == "auth" and "agent-failover[vertex]" in message


# -- real libraries against the simulator -------------------------------------------------


@pytest.fixture(scope="module")
async def auth_sim() -> AsyncIterator[RunningSimulator]:
    """A simulator that refuses requests without credentials."""
    config = load_sim_config().model_copy(update={"require_auth": True})
    server = await start_simulator(config=config)
    yield server
    await server.stop()


def _service_account(path: Path, token_uri: str) -> Path:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    info = {
        "type": "service_account",
        "project_id": "sim-project",
        "private_key_id": "k1",
        "private_key": pem,
        "client_email": "failover@sim-project.iam.gserviceaccount.com",
        "client_id": "1",
        "token_uri": token_uri,
    }
    path.write_text(json.dumps(info))
    return path


REQ = ChatRequest(messages=[Message(role="user", content="hi")], max_tokens=32)


async def test_google_auth_service_account_token_refreshed_before_expiry(
    auth_sim, tmp_path, monkeypatch
) -> None:
    """google-auth signs a JWT, the simulator's token endpoint answers, Vertex accepts the
    bearer; the token is reused, then refreshed once its remaining life drops under the
    margin (the injected clock moves, nothing sleeps)."""
    sa = _service_account(tmp_path / "sa.json", f"{auth_sim.url}/_oauth/token")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(sa))
    auth_sim.state.oauth.expires_in = 3600
    ep = auth_sim.endpoint_config("vertex-europe-west1", auth="google_oauth")
    clock = {"now": NOW}
    async with build_http_client([ep]) as client:
        attach_credentials(client, CredentialStore(refresh_margin_s=300))

        async def once() -> None:
            reply = await complete(client, ep, REQ, BUDGETS, now=lambda: clock["now"])
            assert reply.text

        import time

        clock["now"] = time.time()  # google-auth stamps expiry from the real clock
        await once()
        # The token's expiry is "when google-auth got it + 3600 s" on the real clock: some
        # time after clock["now"] (signing and the token round trip take a second or more on
        # a loaded machine), but no later than now.
        issued_by = time.time()
        await once()
        assert len(auth_sim.state.oauth.issued) == 1
        clock["now"] = issued_by + 3600 - 299  # at most 299 s of life left: under the margin
        await once()
        assert len(auth_sim.state.oauth.issued) == 2
    assert [a.outcome.value for a in auth_sim.state.attempts] == ["ok"] * 3


async def test_google_auth_missing_credentials_file_is_auth_error(tmp_path, monkeypatch) -> None:
    """ADC pointing at a missing file fails the route as AuthError, naming the problem."""
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    ep = EndpointConfig(
        name="v", provider="anthropic", cloud="gcp", region="europe-west1", project="p",
        base_url="http://127.0.0.1:9", model="claude",
    )  # fmt: skip
    async with build_http_client([ep]) as client:
        attach_credentials(client, CredentialStore())
        with pytest.raises(E.AuthError, match="DefaultCredentialsError"):
            await complete(client, ep, REQ, BUDGETS)


async def test_vertex_without_token_is_refused_by_the_simulator(auth_sim) -> None:
    """The simulator enforces presence: an unauthenticated Vertex call is a 401 AuthError."""
    ep = auth_sim.endpoint_config("vertex-europe-west1")
    async with build_http_client([ep]) as client:
        with pytest.raises(E.AuthError) as info:
            await complete(client, ep, REQ, BUDGETS)
    assert info.value.status == 401


async def test_botocore_chain_signs_for_a_simulator_that_requires_auth(
    auth_sim, tmp_path, monkeypatch
) -> None:
    """auth: aws_sigv4 with env credentials: the signed Converse call is accepted, and an
    unsigned one is a 403 (MissingAuthenticationTokenException → AuthError)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIASIMULATORTEST02")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    signed = auth_sim.endpoint_config("bedrock-us-west-2", auth="aws_sigv4")
    unsigned = auth_sim.endpoint_config("bedrock-us-west-2")
    async with build_http_client([signed]) as client:
        attach_credentials(client, CredentialStore())
        for stream in (False, True):
            reply = await complete(
                client, signed, REQ.model_copy(update={"stream": stream}), BUDGETS
            )
            assert reply.text.startswith("[echo: hi]")
        with pytest.raises(E.AuthError) as info:
            await complete(client, unsigned, REQ, BUDGETS)
    assert info.value.status == 403 and "missingauthenticationtoken" in str(info.value).lower()

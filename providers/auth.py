"""Cloud credentials at call time: Entra ID and Google OAuth bearer tokens, AWS SigV4.

Nothing here is configuration: a policy only says *which* method a route uses
(:class:`~resilience.endpoint.AuthMethod`); the secret material comes from the
platform's own credential chain when a call is made — ``azure-identity``'s
``DefaultAzureCredential``, ``google-auth``'s application default credentials (service
account file, workload identity, metadata server), botocore's chain (env, profile, SSO,
container and instance roles). Each library is an optional extra, imported lazily.

A :class:`CredentialStore` belongs to one HTTP client (the worker's shared client) and
holds one signer per credential source, so tokens are fetched once and shared by every
route and call. :class:`TokenCache` refreshes a bearer token *before* it expires (a
margin ahead of ``expires_at``, measured with the call's injected clock), with one
refresh in flight at a time; the blocking library calls run in a thread. Every failure
becomes one typed error: no credentials, a rejected refresh or a missing extra is an
:class:`~resilience.errors.AuthError` for the route; an unreachable token endpoint is a
:class:`~resilience.errors.ConnectError`. Tokens and session tokens are returned as
secrets so the adapter masks them in any error text.
"""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass
from datetime import UTC
from typing import Any, Protocol

import httpx

from agent_failover.providers.error_body import MAX_MESSAGE_CHARS, scrub
from agent_failover.providers.extras import (
    AZURE_IDENTITY,
    BOTOCORE,
    GOOGLE_AUTH,
    GOOGLE_AUTH_REQUESTS,
    MissingExtraError,
    require,
)
from agent_failover.resilience.endpoint import AuthMethod, EndpointConfig
from agent_failover.resilience.errors import AuthError, ConnectError, ProviderError

#: Refresh a bearer token when it has less than this left (google-auth's own is 3m45s).
DEFAULT_REFRESH_MARGIN_S = 300.0
#: Azure's library refreshes 5 min ahead itself; a smaller margin never asks it twice.
AZURE_REFRESH_MARGIN_S = 120.0
GOOGLE_SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
AZURE_SCOPE = "https://cognitiveservices.azure.com/.default"
#: botocore's signing name for bedrock-runtime.
BEDROCK_SERVICE = "bedrock"
# Exception class names (google-auth, azure-core, botocore) that mean "could not reach the
# token endpoint" rather than "no valid credentials": the route may work a moment later.
_TRANSPORT_ERRORS = frozenset(
    {
        "TransportError",
        "ServiceRequestError",
        "ServiceResponseError",
        "EndpointConnectionError",
        "ConnectTimeoutError",
        "ReadTimeoutError",
        "ConnectionError",
    }
)


@dataclass(frozen=True)
class AccessToken:
    """A bearer token and when it expires (epoch seconds; ``None``: unknown)."""

    token: str
    expires_at: float | None = None

    def __repr__(self) -> str:
        return f"AccessToken(token='[redacted]', expires_at={self.expires_at!r})"


class TokenSource(Protocol):
    """Fetches a fresh token (blocking; called in a thread)."""

    def fetch(self) -> AccessToken: ...


class Signer(Protocol):
    """Adds credentials to a built request; returns the secrets it put there."""

    async def sign(
        self, request: httpx.Request, endpoint: EndpointConfig, now: float
    ) -> tuple[str, ...]: ...


def credential_error(exc: BaseException, endpoint: str, what: str) -> ProviderError:
    """The typed error for a failure to obtain credentials (never raises)."""
    if isinstance(exc, ProviderError):
        return exc
    if isinstance(exc, MissingExtraError):
        return AuthError(str(exc), endpoint=endpoint)
    detail = f"{type(exc).__name__}: {scrub(str(exc))[:MAX_MESSAGE_CHARS]}".rstrip(": ")
    if isinstance(exc, TimeoutError | OSError) or any(
        c.__name__ in _TRANSPORT_ERRORS for c in type(exc).__mro__
    ):
        return ConnectError(f"could not reach the {what} endpoint ({detail})", endpoint=endpoint)
    return AuthError(f"could not obtain {what} ({detail})", endpoint=endpoint)


class TokenCache:
    """One token source's current token, refreshed ``margin_s`` before it expires."""

    def __init__(
        self, source: TokenSource, what: str, margin_s: float = DEFAULT_REFRESH_MARGIN_S
    ) -> None:
        self.source = source
        self.what = what
        self.margin_s = margin_s
        self.fetches = 0
        self._token: AccessToken | None = None
        self._lock: asyncio.Lock | None = None

    def _fresh(self, now: float) -> bool:
        t = self._token
        return t is not None and (t.expires_at is None or now < t.expires_at - self.margin_s)

    async def get(self, now: float) -> AccessToken:
        """The cached token, or a new one if it is missing or within the margin of expiry."""
        if self._fresh(now):
            assert self._token is not None
            return self._token
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            # Another call may have refreshed while this one waited for the lock.
            if not self._fresh(now):
                self.fetches += 1
                self._token = await asyncio.to_thread(self.source.fetch)
            assert self._token is not None
            return self._token


class BearerSigner:
    """``Authorization: Bearer <token>`` from a :class:`TokenCache`."""

    def __init__(self, cache: TokenCache) -> None:
        self.cache = cache

    async def sign(
        self, request: httpx.Request, endpoint: EndpointConfig, now: float
    ) -> tuple[str, ...]:
        try:
            token = await self.cache.get(now)
        except Exception as exc:
            raise credential_error(exc, endpoint.name, self.cache.what) from exc
        request.headers["authorization"] = f"Bearer {token.token}"
        return (token.token,)


class GoogleTokenSource:
    """Application default credentials (``google.auth.default``), refreshed on every fetch."""

    def __init__(self, scopes: tuple[str, ...] = GOOGLE_SCOPES) -> None:
        self.scopes = scopes
        self._credentials: Any = None

    def fetch(self) -> AccessToken:
        require(GOOGLE_AUTH[0], GOOGLE_AUTH[1], "Google OAuth tokens")
        transport = require(*GOOGLE_AUTH_REQUESTS, "Google OAuth tokens")
        if self._credentials is None:
            import google.auth

            self._credentials, _ = google.auth.default(scopes=list(self.scopes))
        creds = self._credentials
        creds.refresh(transport.Request())
        expiry = getattr(creds, "expiry", None)
        # google-auth keeps expiry as a naive UTC datetime.
        expires_at = expiry.replace(tzinfo=UTC).timestamp() if expiry is not None else None
        return AccessToken(str(creds.token), expires_at)


class AzureTokenSource:
    """A token for Azure OpenAI from ``credential`` (default: ``DefaultAzureCredential``)."""

    def __init__(self, credential: Any = None, scope: str = AZURE_SCOPE) -> None:
        self.scope = scope
        self._credential = credential

    def fetch(self) -> AccessToken:
        if self._credential is None:
            identity = require(*AZURE_IDENTITY, "Entra ID tokens")
            self._credential = identity.DefaultAzureCredential()
        token = self._credential.get_token(self.scope)
        return AccessToken(str(token.token), float(token.expires_on))


class AwsCredentialSource(Protocol):
    """Current AWS credentials (``access_key``, ``secret_key``, ``token``); blocking."""

    def frozen(self) -> Any: ...


class BotocoreChain:
    """botocore's default credential chain, resolved once, refreshed by botocore itself."""

    def __init__(self, profile: str | None = None) -> None:
        self.profile = profile
        self._credentials: Any = None

    def frozen(self) -> Any:
        require(*BOTOCORE, "AWS SigV4 signing")
        if self._credentials is None:
            import botocore.session

            session = botocore.session.Session(profile=self.profile)
            creds = session.get_credentials()
            if creds is None:
                raise LookupError(
                    "no AWS credentials found: set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "
                    "a profile, SSO, or run with a container or instance role"
                )
            self._credentials = creds
        return self._credentials.get_frozen_credentials()


class SigV4Signer:
    """Signs with botocore's ``SigV4Auth`` for the route's region (service ``bedrock``)."""

    def __init__(self, source: AwsCredentialSource, service: str = BEDROCK_SERVICE) -> None:
        self.source = source
        self.service = service
        self._lock: asyncio.Lock | None = None

    async def sign(
        self, request: httpx.Request, endpoint: EndpointConfig, now: float
    ) -> tuple[str, ...]:
        try:
            require(*BOTOCORE, "AWS SigV4 signing")
            if self._lock is None:
                self._lock = asyncio.Lock()
            async with self._lock:
                # The chain may do IO (profile files, SSO, instance metadata) on first use
                # and when botocore refreshes temporary credentials.
                creds = await asyncio.to_thread(self.source.frozen)
        except Exception as exc:
            raise credential_error(exc, endpoint.name, "AWS credentials") from exc
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        aws = AWSRequest(
            method=request.method,
            url=str(request.url),
            data=request.content,
            headers={
                "host": request.headers["host"],
                "content-type": request.headers.get("content-type", "application/json"),
            },
        )
        SigV4Auth(creds, self.service, endpoint.region).add_auth(aws)
        for name in ("Authorization", "X-Amz-Date", "X-Amz-Security-Token"):
            if name in aws.headers:
                request.headers[name.lower()] = aws.headers[name]
        return tuple(s for s in (creds.token, creds.secret_key) if s)


class CredentialStore:
    """The signers of one HTTP client, built on first use and shared by every call."""

    def __init__(
        self,
        *,
        google: TokenSource | None = None,
        azure: TokenSource | None = None,
        aws: AwsCredentialSource | None = None,
        refresh_margin_s: float = DEFAULT_REFRESH_MARGIN_S,
    ) -> None:
        self._google = google
        self._azure = azure
        self._aws = aws
        self.refresh_margin_s = refresh_margin_s
        self._signers: dict[AuthMethod, Signer] = {}

    def signer(self, endpoint: EndpointConfig) -> Signer | None:
        """The signer for ``endpoint``'s auth method; ``None`` for key headers or no auth."""
        method = endpoint.auth
        if method not in self._signers:
            built = self._build(method)
            if built is None:
                return None
            self._signers[method] = built  # type: ignore[index]
        return self._signers[method]  # type: ignore[index]

    def _build(self, method: AuthMethod | None) -> Signer | None:
        if method is AuthMethod.GOOGLE_OAUTH:
            source = self._google or GoogleTokenSource()
            return BearerSigner(TokenCache(source, "a Google OAuth token", self.refresh_margin_s))
        if method is AuthMethod.ENTRA_ID:
            source = self._azure or AzureTokenSource()
            margin = min(self.refresh_margin_s, AZURE_REFRESH_MARGIN_S)
            return BearerSigner(TokenCache(source, "an Entra ID token", margin))
        if method is AuthMethod.AWS_SIGV4:
            return SigV4Signer(self._aws or BotocoreChain())
        return None


_STORES: weakref.WeakKeyDictionary[httpx.AsyncClient, CredentialStore] = weakref.WeakKeyDictionary()


def attach_credentials(client: httpx.AsyncClient, store: CredentialStore) -> CredentialStore:
    """Use ``store`` for every call made through ``client`` (tests inject fakes here)."""
    _STORES[client] = store
    return store


def credentials_for(client: httpx.AsyncClient) -> CredentialStore:
    """The client's store, created with the platform chains on first use."""
    store = _STORES.get(client)
    if store is None:
        store = attach_credentials(client, CredentialStore())
    return store

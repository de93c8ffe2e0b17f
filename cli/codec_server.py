"""``failover codec-server``: Temporal's codec-server protocol over the payload codec.

The Temporal Web UI and CLI cannot read encrypted history on their own: they post the
payloads to a codec server and show what it returns. This server speaks that protocol —
``POST /encode`` and ``POST /decode`` (also under ``/{namespace}/...``, the CLI's
templated form), each taking and returning ``{"payloads": [...]}`` in protobuf JSON — with
the keys of ``FAILOVER_CODEC_KEYS``, so only people who can reach it (and hold its token)
see decrypted prompts and answers; the copy in Temporal stays ciphertext.

Browsers call it from the UI's origin, so it answers CORS preflights for the origins it is
told to trust (``--cors-origin`` / ``FAILOVER_CODEC_CORS_ORIGINS``) and no others. With
``FAILOVER_CODEC_SERVER_TOKEN`` set (comma-separated for rotation), every encode/decode
request must carry ``Authorization: Bearer <token>`` (the Temporal CLI's ``--codec-auth``);
the token is read from the environment, never from the command line, which ``ps`` shows.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import hdrs, web
from google.protobuf import json_format
from temporalio.api.common.v1 import Payloads
from temporalio.converter import PayloadCodec

from agent_failover.codec import PayloadDecryptError

log = logging.getLogger("agent_failover.codec_server")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8081
ENV_CORS_ORIGINS = "FAILOVER_CODEC_CORS_ORIGINS"
ENV_TOKEN = "FAILOVER_CODEC_SERVER_TOKEN"
#: The Temporal UI of docker-compose (8080) and of `temporal server start-dev` (8233).
DEFAULT_CORS_ORIGINS = (
    "http://localhost:8080",
    "http://127.0.0.1:8080",
    "http://localhost:8233",
    "http://127.0.0.1:8233",
)
#: Event-history downloads are decoded in one request; a payload may be up to 2 MB.
MAX_BODY_BYTES = 16 * 1024 * 1024
_ALLOWED_HEADERS = "authorization, content-type, x-namespace"


@dataclass(frozen=True)
class CodecServerSettings:
    """Who may call the server: trusted browser origins and the accepted bearer tokens."""

    cors_origins: tuple[str, ...] = DEFAULT_CORS_ORIGINS
    tokens: tuple[str, ...] = ()

    @classmethod
    def from_env(
        cls, cors_origins: Sequence[str] | None = None, env: dict[str, str] | None = None
    ) -> CodecServerSettings:
        """Origins from the arguments, else ``FAILOVER_CODEC_CORS_ORIGINS``, else the
        defaults; tokens from ``FAILOVER_CODEC_SERVER_TOKEN``."""
        environ = os.environ if env is None else env
        origins = tuple(cors_origins or ()) or _split(environ.get(ENV_CORS_ORIGINS, ""))
        return cls(
            cors_origins=tuple(o.rstrip("/") for o in origins) or DEFAULT_CORS_ORIGINS,
            tokens=_split(environ.get(ENV_TOKEN, "")),
        )


def _split(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split(",") if p.strip())


def _cors_headers(request: web.Request, settings: CodecServerSettings) -> dict[str, str]:
    origin = request.headers.get(hdrs.ORIGIN)
    if origin is None or origin.rstrip("/") not in settings.cors_origins:
        return {}
    return {
        hdrs.ACCESS_CONTROL_ALLOW_ORIGIN: origin,
        hdrs.ACCESS_CONTROL_ALLOW_METHODS: "POST, OPTIONS",
        hdrs.ACCESS_CONTROL_ALLOW_HEADERS: _ALLOWED_HEADERS,
        # The UI's `includeCredentials` sends cookies to an SSO-protected codec server.
        hdrs.ACCESS_CONTROL_ALLOW_CREDENTIALS: "true",
        hdrs.VARY: "Origin",
    }


def _authorised(request: web.Request, settings: CodecServerSettings) -> bool:
    if not settings.tokens:
        return True
    given = request.headers.get(hdrs.AUTHORIZATION, "")
    scheme, _, token = given.partition(" ")
    if scheme.lower() != "bearer" or not token:
        return False
    # Compare against every accepted token in constant time (rotation keeps two).
    matches = [hmac.compare_digest(token.encode(), t.encode()) for t in settings.tokens]
    return any(matches)


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


def build_app(codec: PayloadCodec, settings: CodecServerSettings) -> web.Application:
    """The aiohttp application serving ``/encode`` and ``/decode`` with ``codec``."""

    @web.middleware
    async def cors_and_auth(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        cors = _cors_headers(request, settings)
        if request.method == hdrs.METH_OPTIONS:
            # Preflights carry no credentials; they only learn what the real call may send.
            response: web.StreamResponse = web.Response(status=204 if cors else 403)
        elif request.path != "/healthz" and not _authorised(request, settings):
            response = _error(401, "missing or wrong bearer token (FAILOVER_CODEC_SERVER_TOKEN)")
        else:
            try:
                response = await handler(request)
            except web.HTTPException as exc:
                response = _error(exc.status, exc.reason)
        response.headers.update(cors)
        return response

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application(middlewares=[cors_and_auth], client_max_size=MAX_BODY_BYTES)
    encode = _payloads_handler(codec.encode, "encode")
    decode = _payloads_handler(codec.decode, "decode")
    app.add_routes(
        [
            web.get("/healthz", healthz),
            web.post("/encode", encode),
            web.post("/decode", decode),
            web.post("/{namespace}/encode", encode),
            web.post("/{namespace}/decode", decode),
        ]
    )
    return app


def _payloads_handler(
    apply: Callable[[Any], Awaitable[list[Any]]], verb: str
) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handle(request: web.Request) -> web.Response:
        if request.content_type != "application/json":
            return _error(415, "send the payloads as application/json")
        try:
            payloads = json_format.Parse(await request.read(), Payloads())
        except json_format.ParseError as exc:
            return _error(400, f'the body is not {{"payloads": [...]}} protobuf JSON: {exc}')
        try:
            result = Payloads(payloads=await apply(payloads.payloads))
        except PayloadDecryptError as exc:
            log.warning("%s refused for namespace %s: %s", verb, _namespace(request), exc)
            return _error(400, str(exc))
        return web.json_response(text=json_format.MessageToJson(result))

    return handle


def _namespace(request: web.Request) -> str:
    return request.match_info.get("namespace") or request.headers.get("X-Namespace", "?")


@dataclass
class RunningCodecServer:
    """A codec server started by :func:`start_codec_server`."""

    url: str
    runner: web.AppRunner

    async def stop(self) -> None:
        await self.runner.cleanup()


async def start_codec_server(
    codec: PayloadCodec,
    settings: CodecServerSettings,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
) -> RunningCodecServer:
    """Serve in the running event loop (``port=0``: any free port); ``stop()`` ends it."""
    runner = web.AppRunner(build_app(codec, settings), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0][1]
    return RunningCodecServer(url=f"http://{host}:{bound}", runner=runner)


def serve(codec: PayloadCodec, settings: CodecServerSettings, *, host: str, port: int) -> None:
    """Run until SIGINT/SIGTERM (the ``failover codec-server`` command)."""

    async def _run() -> None:
        import signal

        server = await start_codec_server(codec, settings, host=host, port=port)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        print(
            f"codec server on {server.url} (POST /encode, /decode); CORS origins: "
            f"{', '.join(settings.cors_origins)}; bearer token "
            f"{'required' if settings.tokens else 'not required'}",
            flush=True,
        )
        try:
            await stop.wait()
        finally:
            await server.stop()

    asyncio.run(_run())

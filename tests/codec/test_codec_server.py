"""``failover codec-server`` over HTTP on 127.0.0.1: the codec-server protocol, CORS for the
UI's origin only, the bearer token, and clear refusals."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads
from typer.testing import CliRunner

from agent_failover.cli.codec_server import (
    CodecServerSettings,
    RunningCodecServer,
    start_codec_server,
)
from agent_failover.cli.main import app
from agent_failover.codec import ENCODING, META_KEY_ID, AesGcmCodec, generate_key

UI = "http://ui.example:8080"
KEY = base64.b64decode(generate_key())
SECRET = b'"the answer nobody else may read"'


@pytest_asyncio.fixture
async def server() -> AsyncIterator[RunningCodecServer]:
    settings = CodecServerSettings(cors_origins=(UI,), tokens=("tok-old", "tok-new"))
    running = await start_codec_server(AesGcmCodec({"k1": KEY}), settings, port=0)
    yield running
    await running.stop()


def _body(*payloads: Payload) -> str:
    return json_format.MessageToJson(Payloads(payloads=list(payloads)))


def _payloads(response: httpx.Response) -> list[Payload]:
    return list(json_format.Parse(response.content, Payloads()).payloads)


AUTH = {"Authorization": "Bearer tok-new", "Content-Type": "application/json"}
PLAIN = Payload(metadata={"encoding": b"json/plain"}, data=SECRET)


async def test_encode_then_decode_round_trips(server: RunningCodecServer) -> None:
    """/encode seals payloads under the active key id; /decode (and /{ns}/decode) opens them."""
    async with httpx.AsyncClient(base_url=server.url) as http:
        enc = await http.post("/encode", content=_body(PLAIN), headers=AUTH)
        assert enc.status_code == 200, enc.text
        (sealed,) = _payloads(enc)
        assert sealed.metadata["encoding"] == ENCODING and sealed.metadata[META_KEY_ID] == b"k1"
        assert SECRET not in sealed.data
        for path in ("/decode", "/default/decode"):
            dec = await http.post(path, content=_body(sealed, PLAIN), headers=AUTH)
            assert dec.status_code == 200 and _payloads(dec) == [PLAIN, PLAIN]


async def test_bearer_token_required_any_current_token_accepted(server: RunningCodecServer) -> None:
    """No token or a wrong one: 401; either configured token (rotation) works; /healthz is open."""
    async with httpx.AsyncClient(base_url=server.url) as http:
        ctype = {"Content-Type": "application/json"}
        assert (await http.post("/decode", content=_body(PLAIN), headers=ctype)).status_code == 401
        wrong = {**ctype, "Authorization": "Bearer tok-guess"}
        assert (await http.post("/decode", content=_body(PLAIN), headers=wrong)).status_code == 401
        basic = {**ctype, "Authorization": "Basic tok-new"}
        assert (await http.post("/decode", content=_body(PLAIN), headers=basic)).status_code == 401
        old = {**ctype, "Authorization": "Bearer tok-old"}
        assert (await http.post("/decode", content=_body(PLAIN), headers=old)).status_code == 200
        assert (await http.get("/healthz")).text == "ok"


async def test_cors_only_for_the_ui_origin(server: RunningCodecServer) -> None:
    """The UI's preflight is answered with its origin and headers; other origins get nothing."""
    async with httpx.AsyncClient(base_url=server.url) as http:
        pre = await http.options(
            "/decode",
            headers={
                "Origin": UI,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type,x-namespace,authorization",
            },
        )
        assert pre.status_code == 204
        assert pre.headers["access-control-allow-origin"] == UI
        allowed = pre.headers["access-control-allow-headers"]
        assert {"x-namespace", "authorization", "content-type"} <= set(allowed.split(", "))
        evil = await http.options("/decode", headers={"Origin": "http://evil.example"})
        assert evil.status_code == 403 and "access-control-allow-origin" not in evil.headers
        post = await http.post(
            "/decode", content=_body(PLAIN), headers={**AUTH, "Origin": UI, "X-Namespace": "x"}
        )
        assert post.headers["access-control-allow-origin"] == UI
        denied = await http.post("/decode", content=_body(PLAIN), headers={"Origin": UI})
        assert denied.status_code == 401 and denied.headers["access-control-allow-origin"] == UI


async def test_refusals_say_why(server: RunningCodecServer) -> None:
    """Unknown key id, wrong content type and a malformed body: 4xx with the reason."""
    other = AesGcmCodec({"retired": base64.b64decode(generate_key())})
    (foreign,) = await other.encode([PLAIN])
    async with httpx.AsyncClient(base_url=server.url) as http:
        bad_key = await http.post("/decode", content=_body(foreign), headers=AUTH)
        assert bad_key.status_code == 400 and "'retired'" in bad_key.json()["error"]
        text = {**AUTH, "Content-Type": "text/plain"}
        assert (await http.post("/decode", content="x", headers=text)).status_code == 415
        garbage = await http.post("/decode", content='{"payloads": 3}', headers=AUTH)
        assert garbage.status_code == 400 and "protobuf JSON" in garbage.json()["error"]
        assert (await http.post("/nope/nope/decode", headers=AUTH)).status_code == 404


def test_cli_without_keys_exits_2(monkeypatch: pytest.MonkeyPatch) -> None:
    """`failover codec-server` with no keys configured refuses to start, naming the variables."""
    monkeypatch.delenv("FAILOVER_CODEC_KEYS", raising=False)
    monkeypatch.delenv("FAILOVER_CODEC_KEYS_FILE", raising=False)
    result = CliRunner().invoke(app, ["codec-server", "--port", "0"])
    assert result.exit_code == 2
    assert "FAILOVER_CODEC_KEYS" in result.output


def test_settings_from_environment() -> None:
    """Origins: arguments, else FAILOVER_CODEC_CORS_ORIGINS, else the UI defaults; tokens."""
    env = {
        "FAILOVER_CODEC_CORS_ORIGINS": "https://ui.corp/, https://b",
        "FAILOVER_CODEC_SERVER_TOKEN": "a,b",
    }
    s = CodecServerSettings.from_env(None, env)
    assert s.cors_origins == ("https://ui.corp", "https://b") and s.tokens == ("a", "b")
    assert CodecServerSettings.from_env(["http://x"], env).cors_origins == ("http://x",)
    assert "http://localhost:8080" in CodecServerSettings.from_env(None, {}).cors_origins

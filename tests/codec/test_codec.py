"""The AES-GCM payload codec: ciphertext, key ids and rotation, clear errors, failures encoded,
keys from the environment, and how the plugin and the converter helpers install it."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.api.failure.v1 import Failure
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import (
    DataConverter,
    DefaultFailureConverter,
    DefaultFailureConverterWithEncodedAttributes,
)
from temporalio.exceptions import ApplicationError

from agent_failover.codec import (
    ENCODING,
    META_KEY_ID,
    AesGcmCodec,
    CodecConfigError,
    PayloadDecryptError,
    codec_from_env,
    failover_data_converter,
    generate_key,
    parse_keys,
    with_codec,
)
from agent_failover.converter import FailoverPayloadConverter
from agent_failover.plugin import FailoverPlugin

SECRET = "patient 4711 has condition X"
K1, K2 = base64.b64decode(generate_key()), base64.b64decode(generate_key())


def codec(active: str = "k1", **keys: bytes) -> AesGcmCodec:
    return AesGcmCodec(keys or {"k1": K1}, active)


async def test_payloads_become_ciphertext_with_their_key_id() -> None:
    """Encoded payloads carry the encrypted encoding and key id, and none of the plaintext."""
    conv = failover_data_converter(codec())
    (p,) = await conv.encode([{"prompt": SECRET}])
    assert p.metadata["encoding"] == ENCODING and p.metadata[META_KEY_ID] == b"k1"
    assert SECRET.encode() not in p.SerializeToString()
    assert await conv.decode([p], [dict]) == [{"prompt": SECRET}]


async def test_each_encryption_uses_a_fresh_nonce() -> None:
    """The same value encrypted twice gives two different ciphertexts."""
    c = codec()
    plain = Payload(metadata={"encoding": b"json/plain"}, data=b'"same"')
    a, b = await c.encode([plain, plain])
    assert a.data != b.data
    assert await c.decode([a, b]) == [plain, plain]


async def test_rotation_old_key_still_decrypts_new_payloads_use_new_id() -> None:
    """After rotation, payloads of the old key decrypt; new ones are under the new key id."""
    old = codec("k1", k1=K1)
    rotated = codec("k2", k1=K1, k2=K2)
    plain = Payload(metadata={"encoding": b"json/plain"}, data=b'"x"')
    (before,) = await old.encode([plain])
    (after,) = await rotated.encode([plain])
    assert after.metadata[META_KEY_ID] == b"k2"
    assert await rotated.decode([before, after]) == [plain, plain]
    retired = codec("k2", k2=K2)  # k1 dropped too early
    with pytest.raises(PayloadDecryptError, match=r"key id 'k1'.*does not have") as info:
        await retired.decode([before])
    assert info.value.key_id == "k1" and "FAILOVER_CODEC_KEYS" in str(info.value)


async def test_wrong_key_under_the_same_id_is_a_clear_error() -> None:
    """A key id whose key differs from the encrypting one fails naming the id, not garbage."""
    (p,) = await codec("k1", k1=K1).encode([Payload(data=b"x")])
    with pytest.raises(PayloadDecryptError, match="key id 'k1': the key under that id"):
        await codec("k1", k1=K2).decode([p])


async def test_relabelled_or_tampered_payloads_fail() -> None:
    """The key id is authenticated: relabelling it, or flipping a byte, fails to decrypt."""
    both = codec("k1", k1=K1, k2=K1)  # same key bytes under two ids
    (p,) = await both.encode([Payload(data=b"x")])
    relabelled = Payload()
    relabelled.CopyFrom(p)
    relabelled.metadata[META_KEY_ID] = b"k2"
    with pytest.raises(PayloadDecryptError, match="'k2'"):
        await both.decode([relabelled])
    tampered = Payload()
    tampered.CopyFrom(p)
    tampered.data = p.data[:-1] + bytes([p.data[-1] ^ 1])
    with pytest.raises(PayloadDecryptError, match="altered"):
        await both.decode([tampered])


async def test_clear_payloads_pass_through_decode() -> None:
    """History written before the codec was turned on stays readable."""
    (plain,) = await pydantic_data_converter.encode([{"a": 1}])
    assert await failover_data_converter(codec()).decode([plain], [dict]) == [{"a": 1}]


async def test_failure_message_and_details_are_encrypted() -> None:
    """Failure messages and stack traces move into encoded attributes, details are sealed."""
    conv = failover_data_converter(codec())
    failure = Failure()
    await conv.encode_failure(ApplicationError(SECRET, {"partial": SECRET}, type="t"), failure)
    assert failure.message == "Encoded failure" and failure.stack_trace == ""
    assert SECRET.encode() not in failure.SerializeToString()
    assert failure.encoded_attributes.metadata["encoding"] == ENCODING
    back = await conv.decode_failure(failure)
    assert isinstance(back, ApplicationError) and back.message == SECRET
    assert back.details == ({"partial": SECRET},)


def test_with_codec_keeps_the_users_codec_and_failure_converter() -> None:
    """A converter with its own codec is left alone; a custom failure converter is kept."""
    mine = codec()
    users = DataConverter(payload_codec=mine)
    assert with_codec(users, codec("k2", k2=K2)) is users

    class MyFailures(DefaultFailureConverter):
        pass

    custom = with_codec(DataConverter(failure_converter_class=MyFailures), mine)
    assert custom.payload_codec is mine and custom.failure_converter_class is MyFailures
    default = with_codec(DataConverter(), mine)
    assert default.failure_converter_class is DefaultFailureConverterWithEncodedAttributes
    assert with_codec(users, None) is users


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"FAILOVER_CODEC_KEYS": " "}, None),
        ({"FAILOVER_CODEC_KEYS": "k1"}, "entry 1: expected id:base64"),
        ({"FAILOVER_CODEC_KEYS": "bad/id:AAAA"}, "entry 1 ('bad/id'): a key id is"),
        ({"FAILOVER_CODEC_KEYS": "k1:not*base64"}, "not valid base64"),
        ({"FAILOVER_CODEC_KEYS": "k1:" + base64.b64encode(b"short").decode()}, "32 bytes"),
        (
            {"FAILOVER_CODEC_KEYS": f"k1:{generate_key()},k1:{generate_key()}"},
            "'k1' appears twice",
        ),
        (
            {"FAILOVER_CODEC_KEYS": f"k1:{generate_key()}\nk2:{generate_key()}"},
            "no active one: set FAILOVER_CODEC_KEY_ID",
        ),
        (
            {"FAILOVER_CODEC_KEYS": f"k1:{generate_key()}", "FAILOVER_CODEC_KEY_ID": "k9"},
            "FAILOVER_CODEC_KEY_ID='k9' is not among the configured key ids (k1)",
        ),
        ({"FAILOVER_CODEC_KEYS_FILE": "/nonexistent/keys"}, "cannot read it"),
    ],
)
def test_environment_errors_name_the_variable_and_entry(
    env: dict[str, str], expected: str | None
) -> None:
    """Bad key settings fail at start-up with the variable, the entry and the reason."""
    if expected is None:
        assert codec_from_env(env) is None
        return
    with pytest.raises(CodecConfigError) as info:
        codec_from_env(env)
    assert expected in str(info.value)


def test_keys_file_and_active_key(tmp_path: Path) -> None:
    """Keys may come from a secrets file, one per line; the active id picks the encrypting key."""
    keys = tmp_path / "keys"
    keys.write_text(f"old:{generate_key()}\nnew:{generate_key()}\n")
    c = codec_from_env({"FAILOVER_CODEC_KEYS_FILE": str(keys), "FAILOVER_CODEC_KEY_ID": "new"})
    assert c is not None and c.active_key_id == "new" and c.key_ids == ["new", "old"]
    with pytest.raises(CodecConfigError, match="not both"):
        codec_from_env({"FAILOVER_CODEC_KEYS_FILE": str(keys), "FAILOVER_CODEC_KEYS": "x:y"})
    assert list(parse_keys(f"a:{generate_key()}, b:{generate_key()}")) == ["a", "b"]


def test_plugin_codec_from_argument_or_environment(
    monkeypatch: pytest.MonkeyPatch, policy_path: Path
) -> None:
    """codec=None follows FAILOVER_CODEC_KEYS, False turns it off, True requires keys; the
    plugin's converter callable adds the codec to the pydantic converter."""
    monkeypatch.delenv("FAILOVER_CODEC_KEYS", raising=False)
    assert FailoverPlugin(policy_path, stores="memory").codec is None
    with pytest.raises(CodecConfigError, match="neither FAILOVER_CODEC_KEYS"):
        FailoverPlugin(policy_path, stores="memory", codec=True)
    monkeypatch.setenv("FAILOVER_CODEC_KEYS", f"env1:{generate_key()}")
    plugin = FailoverPlugin(policy_path, stores="memory")
    assert isinstance(plugin.codec, AesGcmCodec) and plugin.codec.active_key_id == "env1"
    assert FailoverPlugin(policy_path, stores="memory", codec=False).codec is None
    conv = plugin._data_converter(None)
    assert conv.payload_codec is plugin.codec
    assert conv.payload_converter_class is FailoverPayloadConverter
    mine = codec()
    users = plugin._data_converter(DataConverter(payload_codec=mine))
    assert users.payload_codec is mine  # the user's own codec wins

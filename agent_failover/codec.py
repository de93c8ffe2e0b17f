"""Opt-in payload encryption: AES-256-GCM over every Temporal payload, keys from the environment.

Prompts, answers, heartbeat partial text and failure messages all travel as Temporal
payloads and stay in workflow history for the namespace's retention period. With the
codec on, every payload leaves the process encrypted (``encoding: binary/encrypted``,
the id of the key in ``encryption-key-id``), so the Temporal service, its database and
anyone reading history without the key see ciphertext. Failure messages and stack traces
are moved into encoded attributes (``DefaultFailureConverterWithEncodedAttributes``) so
they are encrypted too.

Keys come from ``FAILOVER_CODEC_KEYS`` (or the file named by ``FAILOVER_CODEC_KEYS_FILE``,
for Docker/Kubernetes secrets): ``id:base64`` entries separated by commas or newlines,
each key 32 random bytes. ``FAILOVER_CODEC_KEY_ID`` names the key new payloads are
encrypted with (optional when there is one key). Rotation: add the new key, point
``FAILOVER_CODEC_KEY_ID`` at it, and keep old keys for as long as histories (and cache
entries) encrypted with them must stay readable; the key id in each payload picks the key.
Payloads that are not encrypted (written before the codec was turned on) pass through
``decode`` unchanged.

The key id is authenticated (it is the AES-GCM associated data), so relabelling a payload
with another id fails instead of decrypting under the wrong key.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    DataConverter,
    DefaultFailureConverter,
    DefaultFailureConverterWithEncodedAttributes,
    PayloadCodec,
)

ENV_KEYS = "FAILOVER_CODEC_KEYS"
ENV_KEYS_FILE = "FAILOVER_CODEC_KEYS_FILE"
ENV_KEY_ID = "FAILOVER_CODEC_KEY_ID"
#: Metadata of an encrypted payload (the names Temporal's encryption samples use).
ENCODING = b"binary/encrypted"
META_KEY_ID = "encryption-key-id"
META_CIPHER = "encryption-cipher"
CIPHER = b"AES256-GCM"
KEY_BYTES = 32
NONCE_BYTES = 12
_KEY_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_AAD_PREFIX = b"agent-failover/aes256-gcm/"


class CodecConfigError(ValueError):
    """The key configuration is unusable; the message names the variable and the entry."""


class PayloadDecryptError(ValueError):
    """A payload cannot be decrypted; ``key_id`` is the key it says it was encrypted with."""

    def __init__(self, message: str, key_id: str) -> None:
        super().__init__(message)
        self.key_id = key_id


def generate_key() -> str:
    """A new random key, base64-encoded, for ``FAILOVER_CODEC_KEYS`` (``id:<this>``)."""
    return base64.b64encode(os.urandom(KEY_BYTES)).decode()


def parse_keys(text: str, *, source: str = ENV_KEYS) -> dict[str, bytes]:
    """``id:base64`` entries (comma, whitespace or newline separated) → {key id: key}."""
    keys: dict[str, bytes] = {}
    entries = [e for e in re.split(r"[\s,]+", text.strip()) if e]
    if not entries:
        raise CodecConfigError(f"{source} is empty: expected id:base64 entries")
    for n, entry in enumerate(entries, 1):
        key_id, sep, b64 = entry.partition(":")
        where = f"{source} entry {n} ({key_id!r})"
        if not sep:
            raise CodecConfigError(f"{source} entry {n}: expected id:base64, got no ':'")
        if not _KEY_ID.match(key_id):
            raise CodecConfigError(
                f"{where}: a key id is 1-64 letters, digits, '.', '_' or '-', "
                "starting with a letter or digit"
            )
        if key_id in keys:
            raise CodecConfigError(f"{where}: key id {key_id!r} appears twice")
        try:
            key = base64.b64decode(b64, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise CodecConfigError(f"{where}: the key is not valid base64 ({exc})") from None
        if len(key) != KEY_BYTES:
            raise CodecConfigError(
                f"{where}: the key must be {KEY_BYTES} bytes (AES-256), got {len(key)}"
            )
        keys[key_id] = key
    return keys


def _aesgcm(key: bytes):
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError as exc:  # pragma: no cover - depends on the optional install
        raise CodecConfigError(
            "the payload codec needs the `cryptography` package: "
            "pip install 'agent-failover[crypto]'"
        ) from exc
    return AESGCM(key)


class AesGcmCodec(PayloadCodec):
    """AES-256-GCM payload codec with key ids for rotation.

    ``keys`` maps key ids to 32-byte keys; ``active_key_id`` (default: the only key)
    encrypts new payloads, every key decrypts.
    """

    def __init__(self, keys: Mapping[str, bytes], active_key_id: str | None = None) -> None:
        if not keys:
            raise CodecConfigError("AesGcmCodec needs at least one key")
        for key_id, key in keys.items():
            if not _KEY_ID.match(key_id):
                raise CodecConfigError(f"invalid key id {key_id!r}")
            if len(key) != KEY_BYTES:
                raise CodecConfigError(
                    f"key {key_id!r} must be {KEY_BYTES} bytes (AES-256), got {len(key)}"
                )
        if active_key_id is None:
            if len(keys) > 1:
                raise CodecConfigError(
                    f"{len(keys)} keys ({', '.join(sorted(keys))}) and no active one: "
                    f"set {ENV_KEY_ID} to the id new payloads are encrypted with"
                )
            active_key_id = next(iter(keys))
        if active_key_id not in keys:
            raise CodecConfigError(
                f"{ENV_KEY_ID}={active_key_id!r} is not among the configured key ids "
                f"({', '.join(sorted(keys))})"
            )
        self._ciphers = {key_id: _aesgcm(key) for key_id, key in keys.items()}
        self.active_key_id = active_key_id

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> AesGcmCodec:
        """The codec configured by ``FAILOVER_CODEC_KEYS`` (or ``_FILE``) and ``_KEY_ID``."""
        codec = codec_from_env(env)
        if codec is None:
            raise CodecConfigError(
                f"the payload codec is on but neither {ENV_KEYS} nor {ENV_KEYS_FILE} is set"
            )
        return codec

    @property
    def key_ids(self) -> list[str]:
        """Every key id this codec can decrypt."""
        return sorted(self._ciphers)

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        """Encrypt every payload with the active key."""
        return [self.encrypt(p) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        """Decrypt our payloads; leave any other payload (not encrypted) as it is."""
        return [self.decrypt(p) if is_encrypted(p) else p for p in payloads]

    def encrypt(self, payload: Payload) -> Payload:
        """One payload, encrypted with the active key (a fresh random nonce each time)."""
        key_id = self.active_key_id
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._ciphers[key_id].encrypt(nonce, payload.SerializeToString(), _aad(key_id))
        return Payload(
            metadata={
                "encoding": ENCODING,
                META_KEY_ID: key_id.encode(),
                META_CIPHER: CIPHER,
            },
            data=nonce + sealed,
        )

    def decrypt(self, payload: Payload) -> Payload:
        """One encrypted payload back to the original; a clear error naming its key id."""
        from cryptography.exceptions import InvalidTag

        key_id = payload.metadata.get(META_KEY_ID, b"").decode(errors="replace")
        cipher = payload.metadata.get(META_CIPHER, CIPHER)
        if cipher != CIPHER:
            raise PayloadDecryptError(
                f"payload encrypted with key id {key_id!r} uses cipher "
                f"{cipher.decode(errors='replace')!r}; this codec only knows AES256-GCM",
                key_id,
            )
        aes = self._ciphers.get(key_id)
        if aes is None:
            raise PayloadDecryptError(
                f"payload encrypted with key id {key_id!r}, which this process does not have "
                f"(it has: {', '.join(self.key_ids)}); add that key to {ENV_KEYS}",
                key_id,
            )
        data = payload.data
        try:
            if len(data) <= NONCE_BYTES:
                raise InvalidTag
            plain = aes.decrypt(data[:NONCE_BYTES], data[NONCE_BYTES:], _aad(key_id))
        except InvalidTag:
            raise PayloadDecryptError(
                f"cannot decrypt a payload encrypted with key id {key_id!r}: the key under "
                f"that id in {ENV_KEYS} is not the one it was encrypted with, or the payload "
                "was altered",
                key_id,
            ) from None
        return Payload.FromString(plain)


def _aad(key_id: str) -> bytes:
    return _AAD_PREFIX + key_id.encode()


def is_encrypted(payload: Payload) -> bool:
    """True for a payload this codec (or a compatible one) encrypted."""
    return payload.metadata.get("encoding") == ENCODING


def codec_from_env(env: Mapping[str, str] | None = None) -> AesGcmCodec | None:
    """The codec the environment configures, or None when no keys are set (codec off)."""
    environ = os.environ if env is None else env
    text = environ.get(ENV_KEYS, "").strip()
    source = ENV_KEYS
    path = environ.get(ENV_KEYS_FILE, "").strip()
    if path:
        if text:
            raise CodecConfigError(f"set {ENV_KEYS} or {ENV_KEYS_FILE}, not both")
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise CodecConfigError(f"{ENV_KEYS_FILE}={path}: cannot read it ({exc})") from None
        source = f"{ENV_KEYS_FILE} ({path})"
    if not text:
        return None
    keys = parse_keys(text, source=source)
    return AesGcmCodec(keys, environ.get(ENV_KEY_ID, "").strip() or None)


def with_codec(converter: DataConverter, codec: PayloadCodec | None) -> DataConverter:
    """``converter`` with ``codec`` and encoded failure attributes.

    A converter that already has a codec keeps it (the user's own encryption wins), and a
    custom failure converter is kept as it is.
    """
    if codec is None or converter.payload_codec is not None:
        return converter
    failure_class = converter.failure_converter_class
    if failure_class is DefaultFailureConverter:
        # Messages and stack traces would otherwise stay in clear text in history.
        failure_class = DefaultFailureConverterWithEncodedAttributes
    return dataclasses.replace(
        converter, payload_codec=codec, failure_converter_class=failure_class
    )


def failover_data_converter(codec: PayloadCodec | None = None) -> DataConverter:
    """The pydantic data converter (ours: :mod:`agent_failover.converter`, the SDK's
    ``pydantic_data_converter`` on the wire), with ``codec`` (and encoded failure
    attributes) if given."""
    from agent_failover.converter import failover_pydantic_data_converter

    return with_codec(failover_pydantic_data_converter(), codec)

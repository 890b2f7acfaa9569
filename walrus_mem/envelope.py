"""The sealed envelope: one record = one blob. Pure functions, no I/O.

Layout (version 1; byte-by-byte in docs/envelope-format.md)::

    offset  size  field
    0       4     magic b"WMEM"
    4       1     format version (1)
    5       1     suite id (1 = XChaCha20-Poly1305-IETF + Ed25519 + BLAKE2b)
    6       16    key fingerprint (BLAKE2b-128 of the namespace verify key)
    22      24    random nonce
    46      n     AEAD ciphertext of the padded plaintext, AD = bytes[0:46]
    46+n    64    Ed25519 signature over bytes[0:46+n]

Padded plaintext = u32-BE length L || canonical JSON (L bytes) || zeros, to
the smallest size bucket that fits (see :func:`bucket_size`).
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable, Mapping
from typing import Any, Final

import nacl.bindings
import nacl.exceptions
import nacl.signing
import nacl.utils

from .errors import (
    BlobMismatch,
    InvalidEnvelope,
    InvalidInput,
    PayloadTooLarge,
    TamperedBlob,
    UnsupportedVersion,
    WrongNamespace,
)
from .keys import NamespaceKeys

__all__ = [
    "DEFAULT_MAX_PLAINTEXT",
    "HEADER_SIZE",
    "MAGIC",
    "SIGNATURE_SIZE",
    "SUITE_ID",
    "VERSION",
    "bucket_size",
    "canonical_json",
    "envelope_fingerprint",
    "open_envelope",
    "seal",
]

MAGIC: Final = b"WMEM"
VERSION: Final = 1
SUITE_ID: Final = 1
FPR_SIZE: Final = 16
NONCE_SIZE: Final = nacl.bindings.crypto_aead_xchacha20poly1305_ietf_NPUBBYTES  # 24
TAG_SIZE: Final = nacl.bindings.crypto_aead_xchacha20poly1305_ietf_ABYTES  # 16
SIGNATURE_SIZE: Final = 64
HEADER_SIZE: Final = 4 + 1 + 1 + FPR_SIZE + NONCE_SIZE  # 46
MIN_SIZE: Final = HEADER_SIZE + TAG_SIZE + 256 + SIGNATURE_SIZE
DEFAULT_MAX_PLAINTEXT: Final = 64 * 1024
_LEN_PREFIX: Final = 4
_MIN_BUCKET: Final = 256
_MIB: Final = 1024 * 1024


def bucket_size(n: int) -> int:
    """Smallest padding bucket >= n: powers of two from 256 B to 1 MiB, then whole MiB."""
    if n <= _MIN_BUCKET:
        return _MIN_BUCKET
    if n <= _MIB:
        return 1 << math.ceil(math.log2(n))
    return -(-n // _MIB) * _MIB


def canonical_json(record: Mapping[str, Any]) -> bytes:
    """Deterministic UTF-8 JSON: sorted keys, no whitespace, no NaN."""
    try:
        return json.dumps(
            record, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        ).encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError) as exc:
        raise InvalidInput(f"record is not JSON-serialisable: {exc}") from exc


def seal(
    keys: NamespaceKeys,
    record: Mapping[str, Any],
    *,
    max_plaintext: int = DEFAULT_MAX_PLAINTEXT,
    nonce: bytes | None = None,
    random: Callable[[int], bytes] = nacl.utils.random,
) -> bytes:
    """Seal ``record`` (must carry string ``id`` and ``kind``) for ``keys``' namespace.

    ``nonce`` is for known-answer vectors only; leave it ``None`` so a fresh
    random nonce is used for every seal.
    """
    if not isinstance(record.get("id"), str) or not isinstance(record.get("kind"), str):
        raise InvalidInput("a sealed record needs string 'id' and 'kind' fields")
    body = canonical_json(record)
    if len(body) > max_plaintext:
        raise PayloadTooLarge(
            f"sealed record is {len(body)} bytes; the limit is {max_plaintext} bytes"
        )
    padded_len = bucket_size(_LEN_PREFIX + len(body))
    plaintext = struct.pack(">I", len(body)) + body + bytes(padded_len - _LEN_PREFIX - len(body))
    if nonce is None:
        nonce = random(NONCE_SIZE)
    if len(nonce) != NONCE_SIZE:
        raise InvalidInput(f"nonce must be {NONCE_SIZE} bytes")
    header = MAGIC + bytes([VERSION, SUITE_ID]) + keys.fingerprint_bytes + nonce
    ciphertext = nacl.bindings.crypto_aead_xchacha20poly1305_ietf_encrypt(
        plaintext, header, nonce, keys.sealing_key
    )
    signed = header + ciphertext
    signature = keys.signing_key.sign(signed).signature
    return signed + signature


def envelope_fingerprint(blob: bytes) -> bytes:
    """The key fingerprint an envelope claims, after only a structural check."""
    _check_structure(blob)
    return bytes(blob[6 : 6 + FPR_SIZE])


def _check_structure(blob: bytes) -> None:
    if not isinstance(blob, bytes | bytearray | memoryview):
        raise InvalidEnvelope("envelope must be bytes")
    if len(blob) < 6 or bytes(blob[:4]) != MAGIC:
        raise InvalidEnvelope("not a walrus_mem envelope (bad magic or too short)")
    if blob[4] != VERSION:
        raise UnsupportedVersion(f"envelope format version {blob[4]} is not supported")
    if blob[5] != SUITE_ID:
        raise UnsupportedVersion(f"envelope cipher suite {blob[5]} is not supported")
    if len(blob) < MIN_SIZE:
        raise InvalidEnvelope(f"envelope truncated: {len(blob)} bytes, at least {MIN_SIZE} needed")


def open_envelope(
    keys: NamespaceKeys,
    blob: bytes,
    *,
    expected_id: str | None = None,
    expected_kind: str | None = None,
) -> dict[str, Any]:
    """Verify, decrypt and parse an envelope; return the sealed record.

    Raises an :class:`~walrus_mem.errors.EnvelopeError` subclass on any problem,
    never partial data. ``expected_id``/``expected_kind`` detect a valid blob of
    this namespace substituted for another record.
    """
    blob = bytes(blob)
    _check_structure(blob)
    if blob[6 : 6 + FPR_SIZE] != keys.fingerprint_bytes:
        raise WrongNamespace("envelope was sealed under another namespace key")
    signed, signature = blob[:-SIGNATURE_SIZE], blob[-SIGNATURE_SIZE:]
    try:
        keys.signing_key.verify_key.verify(signed, signature)
    except nacl.exceptions.BadSignatureError as exc:
        raise TamperedBlob("envelope signature does not verify") from exc
    header = signed[:HEADER_SIZE]
    nonce = header[6 + FPR_SIZE :]
    try:
        plaintext = nacl.bindings.crypto_aead_xchacha20poly1305_ietf_decrypt(
            signed[HEADER_SIZE:], header, nonce, keys.sealing_key
        )
    except nacl.exceptions.CryptoError as exc:
        raise TamperedBlob("envelope ciphertext failed authentication") from exc
    (length,) = struct.unpack(">I", plaintext[:_LEN_PREFIX])
    body = plaintext[_LEN_PREFIX : _LEN_PREFIX + length]
    if len(body) != length or any(plaintext[_LEN_PREFIX + length :]):
        raise TamperedBlob("envelope padding is inconsistent")
    try:
        record = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise TamperedBlob("envelope plaintext is not valid JSON") from exc
    if not isinstance(record, dict) or not isinstance(record.get("id"), str):
        raise TamperedBlob("envelope plaintext is not a record")
    if expected_id is not None and record["id"] != expected_id:
        raise BlobMismatch("envelope holds another memory than the one requested")
    if expected_kind is not None and record.get("kind") != expected_kind:
        raise BlobMismatch(f"envelope holds a {record.get('kind')!r} record, not {expected_kind!r}")
    return record

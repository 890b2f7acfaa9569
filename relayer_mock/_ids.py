"""Identifiers as Walrus prints them: blob ids, quilt patch ids, Sui object ids, tx digests.

Blob ids here are a deterministic stand-in (BLAKE2b-256 of the content, base64url without
padding): same shape as real ids (43 characters, 32 bytes) but not the Red Stuff Merkle-root
derivation, which needs a full erasure encoding. Clients must treat ids as opaque.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import secrets
import struct

BLOB_ID_BYTES = 32
BLOB_ID_CHARS = 43
QUILT_PATCH_VERSION_V1 = 0x01
QUILT_PATCH_ID_BYTES = BLOB_ID_BYTES + 1 + 2 + 2  # quilt id || version || u16 start || u16 end
QUILT_PATCH_ID_CHARS = 50

_B64URL_RE = re.compile(r"^[A-Za-z0-9_-]+$")
_HEX_RE = re.compile(r"^0[xX]([0-9a-fA-F]{1,64})$")
_BASE58_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def b64url_encode(raw: bytes) -> str:
    """URL-safe base64 without padding (Walrus' display form for ids)."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def b64url_decode(text: str, expected_len: int) -> bytes:
    """Strictly decode unpadded URL-safe base64 of exactly ``expected_len`` bytes.

    Rejects padding, foreign characters and non-canonical trailing bits (the Rust decoder
    does too), so every id has exactly one accepted spelling.
    """
    if not _B64URL_RE.match(text):
        raise ValueError("not URL-safe base64 without padding")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise ValueError("not URL-safe base64 without padding") from exc
    if len(raw) != expected_len:
        raise ValueError(f"expected {expected_len} bytes, got {len(raw)}")
    if b64url_encode(raw) != text:
        raise ValueError("non-canonical base64 encoding")
    return raw


def blob_id_for(data: bytes) -> str:
    """The mock's blob id for ``data``: base64url-nopad(BLAKE2b-256(data))."""
    return b64url_encode(hashlib.blake2b(data, digest_size=BLOB_ID_BYTES).digest())


def blob_id_from_digest(digest: bytes) -> str:
    if len(digest) != BLOB_ID_BYTES:
        raise ValueError("a blob id digest has 32 bytes")
    return b64url_encode(digest)


def parse_blob_id(text: str) -> bytes:
    """Validate a blob id string (43 chars of base64url for 32 bytes); returns the raw bytes."""
    if len(text) != BLOB_ID_CHARS:
        raise ValueError(f"a blob ID has {BLOB_ID_CHARS} characters")
    return b64url_decode(text, BLOB_ID_BYTES)


def blob_file_name(blob_id: str) -> str:
    """Lowercase hex of the raw id: safe as a file name on case-insensitive file systems."""
    return parse_blob_id(blob_id).hex()


def quilt_patch_id(quilt_id: str, start: int, end: int) -> str:
    """base64url-nopad(quiltId(32) || 0x01 || u16le(start) || u16le(end)): 50 characters."""
    raw = parse_blob_id(quilt_id) + struct.pack("<BHH", QUILT_PATCH_VERSION_V1, start, end)
    return b64url_encode(raw)


def parse_quilt_patch_id(text: str) -> tuple[str, int, int]:
    """Split a quilt patch id into (quilt id, start sliver, end sliver)."""
    if len(text) != QUILT_PATCH_ID_CHARS:
        raise ValueError(f"a quilt patch ID has {QUILT_PATCH_ID_CHARS} characters")
    raw = b64url_decode(text, QUILT_PATCH_ID_BYTES)
    version, start, end = struct.unpack("<BHH", raw[BLOB_ID_BYTES:])
    if version != QUILT_PATCH_VERSION_V1:
        raise ValueError(f"unsupported quilt patch id version {version}")
    return b64url_encode(raw[:BLOB_ID_BYTES]), start, end


def normalize_sui_address(text: str) -> str:
    """Parse ``0x`` + 1..64 hex digits (Sui's hex literal); returns ``0x`` + 64 lowercase hex."""
    match = _HEX_RE.match(text)
    if not match:
        raise ValueError("expected 0x followed by at most 64 hex digits")
    return "0x" + match.group(1).lower().rjust(64, "0")


def new_object_id() -> str:
    """A fresh Sui object id: ``0x`` + 64 lowercase hex characters."""
    return "0x" + secrets.token_hex(32)


def base58_encode(raw: bytes) -> str:
    """Bitcoin-alphabet base58 (Sui transaction digests)."""
    number = int.from_bytes(raw, "big")
    out = []
    while number:
        number, rem = divmod(number, 58)
        out.append(_BASE58_ALPHABET[rem])
    leading_zeros = len(raw) - len(raw.lstrip(b"\0"))
    return "1" * leading_zeros + "".join(reversed(out))


def new_tx_digest() -> str:
    """A fresh Sui transaction digest: base58 of 32 random bytes."""
    return base58_encode(secrets.token_bytes(32))

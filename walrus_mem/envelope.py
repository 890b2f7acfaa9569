"""The sealed envelope: one record = one blob. Pure functions, no I/O.

Layout (version 1; byte by byte in docs/envelope-format.md)::

    offset  size  field
    0       4     magic b"WMEM"
    4       1     format version (1)
    5       1     suite id (1 = XChaCha20-Poly1305-IETF + Ed25519 + BLAKE2b)
    6       16    key fingerprint (BLAKE2b-128 of the namespace verify key)
    22      24    random nonce
    46      n     AEAD ciphertext of the padded plaintext, AD = bytes[0:46]
    46+n    64    Ed25519 signature over bytes[0:46+n]

Padded plaintext = u32-BE length L || canonical JSON (L bytes) || zeros, to
the smallest size bucket that fits (see :func:`bucket_size`), so
``n = bucket + 16`` and a blob's length reveals only its bucket.

Version 2 (a record holding ``bytes`` values, e.g. a fact's carried vector) adds a
u32-BE attachment length A to the header (50 bytes) and appends the values' raw
bytes after the padded JSON: ``n = bucket + A + 16``. The JSON holds ``null`` where
each value was and a top-level ``"#bytes"`` list of ``[path, length]`` saying where
the attachment's slices go. A record without bytes is sealed as version 1, byte for
byte as before.

Opening checks, in order: structure (:class:`InvalidEnvelope`), version and
suite (:class:`UnsupportedVersion`), fingerprint (:class:`WrongNamespace`),
signature and AEAD (:class:`TamperedBlob`), record shape
(:class:`InvalidEnvelope`), expected id/kind (:class:`BlobMismatch`).
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable, Mapping
from typing import Any, Final

import nacl.bindings
import nacl.exceptions
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
from .keys import FINGERPRINT_SIZE, NamespaceKeys

__all__ = [
    "DEFAULT_MAX_PLAINTEXT",
    "HEADER_SIZE",
    "MAGIC",
    "MAX_JSON_DEPTH",
    "MIN_SIZE",
    "NONCE_SIZE",
    "SIGNATURE_SIZE",
    "SUITE_ID",
    "TAG_SIZE",
    "VERSION",
    "VERSION_ATTACHED",
    "bucket_size",
    "canonical_json",
    "envelope_fingerprint",
    "open_envelope",
    "open_own_copy",
    "seal",
]

MAGIC: Final = b"WMEM"
VERSION: Final = 1
VERSION_ATTACHED: Final = 2  # the layout with a raw-bytes attachment (docs/envelope-format.md)
ATTACHED_KEY: Final = "#bytes"  # version 2: where the attachment's slices go
SUITE_ID: Final = 1
FPR_SIZE: Final = FINGERPRINT_SIZE  # 16
NONCE_SIZE: Final = nacl.bindings.crypto_aead_xchacha20poly1305_ietf_NPUBBYTES  # 24
TAG_SIZE: Final = nacl.bindings.crypto_aead_xchacha20poly1305_ietf_ABYTES  # 16
SIGNATURE_SIZE: Final = 64
HEADER_SIZE: Final = 4 + 1 + 1 + FPR_SIZE + NONCE_SIZE  # 46
_MIN_BUCKET: Final = 256
MIN_SIZE: Final = HEADER_SIZE + _MIN_BUCKET + TAG_SIZE + SIGNATURE_SIZE  # 382
DEFAULT_MAX_PLAINTEXT: Final = 64 * 1024
MAX_JSON_DEPTH: Final = 64  # nesting limit of a record (sealing and opening)
_LEN_PREFIX: Final = 4
_MIB: Final = 1024 * 1024
_FPR_AT: Final = 6
_NONCE_AT: Final = _FPR_AT + FPR_SIZE
_ATTACHED_HEADER: Final = HEADER_SIZE + 4  # 50: version 2 adds the u32 attachment length
_MIN_SIZE_ATTACHED: Final = _ATTACHED_HEADER + _MIN_BUCKET + TAG_SIZE + SIGNATURE_SIZE  # 386


def bucket_size(n: int) -> int:
    """Smallest padding bucket >= n: powers of two from 256 B to 1 MiB, then whole MiB."""
    if n <= _MIN_BUCKET:
        return _MIN_BUCKET
    if n <= _MIB:
        return 1 << (n - 1).bit_length()
    return -(-n // _MIB) * _MIB


def _is_bucket(n: int) -> bool:
    return n >= _MIN_BUCKET and bucket_size(n) == n


def _plain_json(value: Any, depth: int) -> Any:
    """Copy ``value`` as plain JSON types, rejecting what JSON cannot carry exactly."""
    if depth > MAX_JSON_DEPTH:
        raise InvalidInput(f"record nests deeper than {MAX_JSON_DEPTH} levels")
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInput("record holds a NaN or infinite number; JSON cannot carry it")
        return value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                # json.dumps would silently turn 1 into "1" (and could then duplicate keys)
                raise InvalidInput(f"record keys must be strings, not {type(k).__name__}")
            out[k] = _plain_json(v, depth + 1)
        return out
    if isinstance(value, list | tuple):
        return [_plain_json(v, depth + 1) for v in value]
    raise InvalidInput(f"record holds a {type(value).__name__}, which is not JSON")


def canonical_json(record: Mapping[str, Any]) -> bytes:
    """Deterministic UTF-8 JSON: sorted keys, no whitespace, no NaN, string keys only.

    Tuples are encoded as arrays. Raises :class:`InvalidInput` for anything
    JSON cannot represent exactly (non-string keys, NaN, sets, lone surrogates,
    nesting deeper than :data:`MAX_JSON_DEPTH`).
    """
    plain = _plain_json(record, 0)
    try:
        return json.dumps(
            plain, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        ).encode("utf-8")
    except (ValueError, UnicodeEncodeError) as exc:
        # ValueError: an int beyond the interpreter's digit limit.
        # UnicodeEncodeError: a lone surrogate (its message quotes no record text).
        raise InvalidInput(f"record is not JSON-serialisable: {type(exc).__name__}") from exc


def _detach(value: Mapping[str, Any], path: list[str], slices: list[tuple[list[str], bytes]],
            depth: int) -> dict[str, Any]:
    """A copy of ``value`` with every ``bytes`` value (in objects, at any depth) replaced
    by ``None`` and appended to ``slices`` with its path, in sorted-key order."""
    if depth > MAX_JSON_DEPTH:
        raise InvalidInput(f"record nests deeper than {MAX_JSON_DEPTH} levels")
    out: dict[str, Any] = {}
    for k in sorted(value, key=lambda k: (not isinstance(k, str), str(k))):
        v = value[k]
        if isinstance(v, bytes | bytearray | memoryview) and isinstance(k, str):
            slices.append(([*path, k], bytes(v)))
            out[k] = None
        elif isinstance(v, Mapping) and isinstance(k, str):
            out[k] = _detach(v, [*path, k], slices, depth + 1)
        else:
            out[k] = v  # canonical_json checks it (and refuses bytes inside arrays)
    return out


def seal(
    keys: NamespaceKeys,
    record: Mapping[str, Any],
    *,
    max_plaintext: int = DEFAULT_MAX_PLAINTEXT,
    nonce: bytes | None = None,
    random: Callable[[int], bytes] = nacl.utils.random,
) -> bytes:
    """Seal ``record`` (must carry string ``id`` and ``kind``) for ``keys``' namespace.

    ``max_plaintext`` bounds the canonical JSON of the record plus its bytes values
    (:class:`PayloadTooLarge`). A record holding ``bytes`` values (in objects, not in
    arrays) is sealed as version 2, their raw bytes after the padded JSON; any other
    as version 1. ``nonce`` is for known-answer vectors only;
    leave it ``None`` so a fresh random nonce is used for every seal.
    """
    if not isinstance(keys, NamespaceKeys):
        raise InvalidInput("seal() needs NamespaceKeys")
    if not isinstance(record, Mapping):
        raise InvalidInput("a sealed record must be a mapping")
    if not isinstance(record.get("id"), str) or not isinstance(record.get("kind"), str):
        raise InvalidInput("a sealed record needs string 'id' and 'kind' fields")
    if ATTACHED_KEY in record:
        raise InvalidInput(f"the record key {ATTACHED_KEY!r} is reserved")
    slices: list[tuple[list[str], bytes]] = []
    plain = _detach(record, [], slices, 0)
    attachment = b"".join(raw for _, raw in slices)
    if slices:
        plain[ATTACHED_KEY] = [[path, len(raw)] for path, raw in slices]
    body = canonical_json(plain)
    if len(body) + len(attachment) > max_plaintext:
        raise PayloadTooLarge(
            f"sealed record is {len(body) + len(attachment)} bytes; "
            f"the limit is {max_plaintext} bytes"
        )
    padded_len = bucket_size(_LEN_PREFIX + len(body))
    plaintext = (struct.pack(">I", len(body)) + body + bytes(padded_len - _LEN_PREFIX - len(body))
                 + attachment)
    if nonce is None:
        nonce = random(NONCE_SIZE)
    if not isinstance(nonce, bytes) or len(nonce) != NONCE_SIZE:
        raise InvalidInput(f"nonce must be {NONCE_SIZE} bytes")
    header = MAGIC + bytes([VERSION, SUITE_ID]) + keys.fingerprint_bytes + nonce
    if slices:
        header = (MAGIC + bytes([VERSION_ATTACHED, SUITE_ID]) + keys.fingerprint_bytes + nonce
                  + struct.pack(">I", len(attachment)))
    ciphertext = nacl.bindings.crypto_aead_xchacha20poly1305_ietf_encrypt(
        plaintext, header, nonce, keys.sealing_key
    )
    signed = header + ciphertext
    signature = keys.signing_key.sign(signed).signature
    return signed + signature


def _check_structure(blob: bytes) -> int:
    """Check what can be checked without keys; return the header's size."""
    if len(blob) < len(MAGIC) or blob[: len(MAGIC)] != MAGIC:
        raise InvalidEnvelope("not a walrus_mem envelope (bad magic or too short)")
    if len(blob) < _FPR_AT:
        raise InvalidEnvelope(f"envelope truncated: {len(blob)} bytes")
    # Version before size: the minimum size belongs to a version.
    if blob[4] not in (VERSION, VERSION_ATTACHED):
        raise UnsupportedVersion(f"envelope format version {blob[4]} is not supported")
    if blob[5] != SUITE_ID:
        raise UnsupportedVersion(f"envelope cipher suite {blob[5]} is not supported")
    least = MIN_SIZE if blob[4] == VERSION else _MIN_SIZE_ATTACHED
    if len(blob) < least:
        raise InvalidEnvelope(f"envelope truncated: {len(blob)} bytes, at least {least} needed")
    if not _is_bucket(len(blob) - _header_size(blob) - _attached_size(blob) - TAG_SIZE
                      - SIGNATURE_SIZE):
        raise InvalidEnvelope(
            f"envelope length {len(blob)} matches no padding bucket (truncated or extended)"
        )
    return _header_size(blob)


def _header_size(blob: bytes) -> int:
    return HEADER_SIZE if blob[4] == VERSION else _ATTACHED_HEADER


def _attached_size(blob: bytes) -> int:
    if blob[4] == VERSION:
        return 0
    (size,) = struct.unpack(">I", blob[HEADER_SIZE:_ATTACHED_HEADER])
    return int(size)


def _as_bytes(blob: object) -> bytes:
    if not isinstance(blob, bytes | bytearray | memoryview):
        raise InvalidEnvelope(f"envelope must be bytes, not {type(blob).__name__}")
    return bytes(blob)


def envelope_fingerprint(blob: bytes | bytearray | memoryview) -> bytes:
    """The key fingerprint an envelope claims, after only a structural check.

    Unauthenticated: use it to pick keys, never to trust the blob.
    """
    data = _as_bytes(blob)
    _check_structure(data)
    return data[_FPR_AT:_NONCE_AT]


def _parse_record(plaintext: bytes, attached: int = 0) -> dict[str, Any]:
    """Unpad and parse an authenticated plaintext; only its sealer could have made it bad.
    ``attached``: the length of a version 2 envelope's attachment (its last bytes)."""
    plaintext = plaintext[: len(plaintext) - attached]
    (length,) = struct.unpack(">I", plaintext[:_LEN_PREFIX])
    body = plaintext[_LEN_PREFIX : _LEN_PREFIX + length]
    if len(body) != length or any(plaintext[_LEN_PREFIX + length :]):
        raise InvalidEnvelope("authentic envelope has inconsistent padding")
    if bucket_size(_LEN_PREFIX + length) != len(plaintext):
        raise InvalidEnvelope("authentic envelope is padded to the wrong bucket")
    failure: str | None = None
    try:
        record = json.loads(
            body.decode("utf-8"), parse_constant=_reject_constant, object_pairs_hook=_unique_keys
        )
        _plain_json(record, 0)  # depth limit, finite numbers
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        # InvalidInput (from _plain_json) is a ValueError too.
        failure = type(exc).__name__
    if failure is not None:
        # Raised outside the handler: the decoder errors carry the decrypted
        # text (.object / .doc), which must not ride along as __context__.
        raise InvalidEnvelope(f"authentic envelope holds malformed JSON ({failure})")
    if not isinstance(record, dict):
        raise InvalidEnvelope("authentic envelope does not hold a JSON object")
    if not isinstance(record.get("id"), str) or not isinstance(record.get("kind"), str):
        raise InvalidEnvelope("authentic envelope holds a record without string id and kind")
    return record


def _attach(record: dict[str, Any], attachment: bytes) -> dict[str, Any]:
    """Put a version 2 record's attachment back where its ``"#bytes"`` list says."""
    spec = record.pop(ATTACHED_KEY, None)
    if not isinstance(spec, list) or not spec:
        raise InvalidEnvelope("authentic version 2 envelope says nothing of its attachment")
    at = 0
    seen: set[tuple[str, ...]] = set()
    for item in spec:
        ok = (isinstance(item, list) and len(item) == 2 and isinstance(item[0], list)
              and item[0] and all(isinstance(k, str) for k in item[0])
              and type(item[1]) is int and 0 <= item[1] <= len(attachment) - at)
        if not ok or tuple(item[0]) in seen:
            raise InvalidEnvelope("authentic envelope has a malformed attachment list")
        seen.add(tuple(item[0]))
        *parents, last = item[0]
        node: Any = record
        for k in parents:
            node = node.get(k) if isinstance(node, dict) else None
        if not isinstance(node, dict) or last not in node or node[last] is not None:
            raise InvalidEnvelope("authentic envelope's attachment list names no null value")
        node[last] = attachment[at : at + item[1]]
        at += item[1]
    if at != len(attachment):
        raise InvalidEnvelope("authentic envelope's attachment list leaves bytes over")
    return record


def _reject_constant(name: str) -> Any:
    raise ValueError(f"JSON constant {name} is not allowed")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("duplicate key in JSON object")
    return out


def open_own_copy(keys: NamespaceKeys, blob: bytes | bytearray | memoryview) -> dict[str, Any]:
    """Decrypt and parse an envelope this data dir sealed or verified before (its
    catalog's sealed copy) without checking the signature again: the AEAD tag still
    authenticates it under the sealing key, and at about 8 µs instead of 120 µs a
    rebuild can read a million vectors from the sealed copies. Never for bytes that
    came from storage: :func:`open_envelope` checks those."""
    return _open(keys, blob, verify=False)


def open_envelope(
    keys: NamespaceKeys,
    blob: bytes | bytearray | memoryview,
    *,
    expected_id: str | None = None,
    expected_kind: str | None = None,
) -> dict[str, Any]:
    """Verify, decrypt and parse an envelope; return the sealed record.

    Raises an :class:`~walrus_mem.errors.EnvelopeError` subclass on any problem,
    never partial data. ``expected_id``/``expected_kind`` detect a valid blob of
    this namespace substituted for another record (:class:`BlobMismatch`).
    """
    record = _open(keys, blob, verify=True)
    if expected_id is not None and record["id"] != expected_id:
        raise BlobMismatch("envelope holds another memory than the one requested")
    if expected_kind is not None and record["kind"] != expected_kind:
        raise BlobMismatch(f"envelope holds a {record['kind']!r} record, not {expected_kind!r}")
    return record


def _open(keys: NamespaceKeys, blob: bytes | bytearray | memoryview, *,
          verify: bool) -> dict[str, Any]:
    data = _as_bytes(blob)
    header_size = _check_structure(data)
    if not isinstance(keys, NamespaceKeys):
        raise InvalidInput("open_envelope() needs NamespaceKeys")
    if data[_FPR_AT:_NONCE_AT] != keys.fingerprint_bytes:
        raise WrongNamespace("envelope was sealed under another namespace key")
    signed, signature = data[:-SIGNATURE_SIZE], data[-SIGNATURE_SIZE:]
    if verify:
        try:
            keys.signing_key.verify_key.verify(signed, signature)
        except nacl.exceptions.BadSignatureError as exc:
            raise TamperedBlob("envelope signature does not verify") from exc
    header = signed[:header_size]
    try:
        plaintext = nacl.bindings.crypto_aead_xchacha20poly1305_ietf_decrypt(
            signed[header_size:], header, header[_NONCE_AT:_NONCE_AT + NONCE_SIZE],
            keys.sealing_key
        )
    except nacl.exceptions.CryptoError as exc:
        raise TamperedBlob("envelope ciphertext failed authentication") from exc
    attached = _attached_size(data)
    record = _parse_record(plaintext, attached)
    if data[4] == VERSION_ATTACHED:
        record = _attach(record, plaintext[len(plaintext) - attached :])
    return record

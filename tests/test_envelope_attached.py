"""Envelope version 2: a record's ``bytes`` values travel raw after the padded JSON (a
fact's carried vector, issue 28), so 768 bytes of float16 cost 768 bytes, not the 1,024 of
their base64 plus a doubled bucket. Records without bytes stay version 1, byte for byte."""

from __future__ import annotations

import struct
from typing import Any

import nacl.bindings
import pytest

from walrus_mem.envelope import (
    HEADER_SIZE,
    MAGIC,
    SIGNATURE_SIZE,
    SUITE_ID,
    TAG_SIZE,
    VERSION,
    VERSION_ATTACHED,
    bucket_size,
    canonical_json,
    envelope_fingerprint,
    open_envelope,
    seal,
)
from walrus_mem.errors import (
    EnvelopeError,
    InvalidEnvelope,
    PayloadTooLarge,
    TamperedBlob,
    UnsupportedVersion,
    WrongNamespace,
)
from walrus_mem.keys import MasterSeed, NamespaceKeys

from .helpers_keys import vectors

V2_HEADER = HEADER_SIZE + 4


@pytest.fixture(scope="module")
def keys() -> NamespaceKeys:
    return NamespaceKeys.derive(MasterSeed.from_hex(vectors()["master_seed_hex"]), "default")


def _fact(**extra: Any) -> dict[str, Any]:
    return {"id": "mem-0001", "kind": "fact", "text": "The user prefers tea.", "metadata": {},
            **extra}


RAW = bytes(range(256)) * 3  # 768 bytes: a 384-d float16 vector's size


def test_bytes_values_travel_raw_after_the_padded_json(keys):
    record = _fact(vec={"dim": 384, "dtype": "f16", "data": RAW}, more={"a": {"b": b"\x00\x01"}})
    blob = seal(keys, record)
    assert blob[:4] == MAGIC and blob[4] == VERSION_ATTACHED and blob[5] == SUITE_ID
    (attached,) = struct.unpack(">I", blob[HEADER_SIZE:V2_HEADER])
    assert attached == len(RAW) + 2
    body = canonical_json({**_fact(vec={"dim": 384, "dtype": "f16", "data": None},
                                   more={"a": {"b": None}}),
                           "#bytes": [[["more", "a", "b"], 2], [["vec", "data"], 768]]})
    bucket = bucket_size(4 + len(body))
    assert len(blob) == V2_HEADER + bucket + attached + TAG_SIZE + SIGNATURE_SIZE
    # by hand: the header (with the attachment length) is the AD, the JSON padded to its
    # bucket, then the raw values in the order the list gives
    plaintext = nacl.bindings.crypto_aead_xchacha20poly1305_ietf_decrypt(
        blob[V2_HEADER:-64], blob[:V2_HEADER], blob[22:46], keys.sealing_key)
    assert plaintext[:4 + len(body)] == struct.pack(">I", len(body)) + body
    assert plaintext[4 + len(body):bucket] == bytes(bucket - 4 - len(body))
    assert plaintext[bucket:] == b"\x00\x01" + RAW
    assert open_envelope(keys, blob, expected_id="mem-0001") == record
    assert envelope_fingerprint(blob) == keys.fingerprint_bytes
    # the same fact with the vector as base64 JSON would need the 2,048 bucket; raw, the
    # JSON keeps the 256-byte one and the envelope is 256 + 768 + 2 + 130 bytes
    assert len(blob) == 256 + 770 + 130


def test_a_record_without_bytes_is_still_version_1(keys):
    blob = seal(keys, _fact())
    assert blob[4] == VERSION and len(blob) - HEADER_SIZE - 80 == bucket_size(
        4 + len(canonical_json(_fact())))


def test_the_bytes_count_against_the_limit(keys):
    record = _fact(vec={"data": RAW})
    limit = len(canonical_json({**_fact(vec={"data": None}), "#bytes": [[["vec", "data"], 768]]}))
    seal(keys, record, max_plaintext=limit + 768)
    with pytest.raises(PayloadTooLarge):
        seal(keys, record, max_plaintext=limit + 767)


def _flip_error(pos: int) -> tuple[type[EnvelopeError], ...]:
    if pos < 4:
        return (InvalidEnvelope,)
    if pos < 6:
        return (UnsupportedVersion,)
    if pos < 22:
        return (WrongNamespace,)
    if HEADER_SIZE <= pos < V2_HEADER:  # the attachment length: no longer adds up
        return (InvalidEnvelope, TamperedBlob)
    return (TamperedBlob,)


@pytest.mark.parametrize("mask", [0x01, 0xFF])
def test_every_single_byte_flip_is_rejected(keys, mask):
    blob = seal(keys, _fact(vec={"data": RAW[:40]}), nonce=bytes(24))
    for pos in range(len(blob)):
        bad = bytearray(blob)
        bad[pos] ^= mask
        with pytest.raises(EnvelopeError) as info:
            open_envelope(keys, bytes(bad))
        assert type(info.value) in _flip_error(pos), pos


def test_every_truncation_and_extension_is_rejected(keys):
    blob = seal(keys, _fact(vec={"data": RAW[:40]}))
    for n in range(len(blob)):
        with pytest.raises(EnvelopeError):
            open_envelope(keys, blob[:n])
    for extra in [b"\x00", bytes(40), bytes(256)]:
        with pytest.raises(EnvelopeError):
            open_envelope(keys, blob + extra)


def test_a_version_1_blob_relabelled_version_2_fails(keys):
    blob = bytearray(seal(keys, _fact()))
    blob[4] = VERSION_ATTACHED
    with pytest.raises(EnvelopeError):
        open_envelope(keys, bytes(blob))


def _seal_v2(keys: NamespaceKeys, body: bytes, attachment: bytes) -> bytes:
    nonce = bytes(range(24))
    header = (MAGIC + bytes([VERSION_ATTACHED, SUITE_ID]) + keys.fingerprint_bytes + nonce
              + struct.pack(">I", len(attachment)))
    plaintext = (struct.pack(">I", len(body)) + body
                 + bytes(bucket_size(4 + len(body)) - 4 - len(body)) + attachment)
    ct = nacl.bindings.crypto_aead_xchacha20poly1305_ietf_encrypt(
        plaintext, header, nonce, keys.sealing_key)
    return header + ct + keys.signing_key.sign(header + ct).signature


@pytest.mark.parametrize(
    ("body", "attachment", "match"),
    [
        (b'{"id":"m","kind":"f","x":null}', b"ab", "says nothing"),
        (b'{"#bytes":[],"id":"m","kind":"f","x":null}', b"", "says nothing"),
        (b'{"#bytes":[[["x"],3]],"id":"m","kind":"f","x":null}', b"ab", "malformed"),
        (b'{"#bytes":[[["x"],-1]],"id":"m","kind":"f","x":null}', b"ab", "malformed"),
        (b'{"#bytes":[[[],2]],"id":"m","kind":"f","x":null}', b"ab", "malformed"),
        (b'{"#bytes":[[["x"],1],[["x"],1]],"id":"m","kind":"f","x":null}', b"ab", "malformed"),
        (b'{"#bytes":[[["x"],2]],"id":"m","kind":"f","x":1}', b"ab", "no null value"),
        (b'{"#bytes":[[["y"],2]],"id":"m","kind":"f","x":null}', b"ab", "no null value"),
        (b'{"#bytes":[[["x","y"],2]],"id":"m","kind":"f","x":null}', b"ab", "no null value"),
        (b'{"#bytes":[[["x"],1]],"id":"m","kind":"f","x":null}', b"ab", "left over|leaves"),
        (b'{"#bytes":"x","id":"m","kind":"f","x":null}', b"ab", "says nothing"),
    ],
)
def test_authentic_but_malformed_attachment_is_invalid_envelope(keys, body, attachment, match):
    with pytest.raises(InvalidEnvelope, match=match) as info:
        open_envelope(keys, _seal_v2(keys, body, attachment))
    assert info.value.__cause__ is None and info.value.__context__ is None


def test_another_implementation_may_order_the_list_its_own_way(keys):
    body = b'{"#bytes":[[["y"],1],[["x"],2]],"id":"m","kind":"f","x":null,"y":null}'
    assert open_envelope(keys, _seal_v2(keys, body, b"Yxx")) == {
        "id": "m", "kind": "f", "x": b"xx", "y": b"Y"}

"""The sealed envelope: vectors, round trips, tampering, namespaces, padding, purity."""

from __future__ import annotations

import builtins
import io
import json
import os
import socket
import struct
from typing import Any

import nacl.bindings
import nacl.signing
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import walrus_mem.errors as errors
from walrus_mem.config import Settings
from walrus_mem.envelope import (
    DEFAULT_MAX_PLAINTEXT,
    HEADER_SIZE,
    MAGIC,
    MAX_JSON_DEPTH,
    MIN_SIZE,
    NONCE_SIZE,
    SIGNATURE_SIZE,
    SUITE_ID,
    TAG_SIZE,
    VERSION,
    bucket_size,
    canonical_json,
    envelope_fingerprint,
    open_envelope,
    seal,
)
from walrus_mem.errors import (
    BlobMismatch,
    EnvelopeError,
    InvalidEnvelope,
    InvalidInput,
    PayloadTooLarge,
    TamperedBlob,
    UnsupportedVersion,
    WrongNamespace,
)
from walrus_mem.keys import MasterSeed, NamespaceKeys

from .helpers_keys import seed_bytes, vectors

OVERHEAD = HEADER_SIZE + TAG_SIZE + SIGNATURE_SIZE  # 126


@pytest.fixture(scope="module")
def master() -> MasterSeed:
    return MasterSeed.from_hex(vectors()["master_seed_hex"])


@pytest.fixture(scope="module")
def keys(master) -> NamespaceKeys:
    return NamespaceKeys.derive(master, "default")


def _record(i: int = 1, text: str = "The user prefers tea over coffee.", **extra: Any) -> dict:
    return {"id": f"mem-{i:04d}", "kind": "fact", "text": text, "metadata": {}, **extra}


def _keys_for(spec: dict) -> NamespaceKeys:
    if spec["mode"] == "derived":
        return NamespaceKeys.derive(
            MasterSeed.from_hex(vectors()["master_seed_hex"]), spec["namespace"]
        )
    seed = bytes.fromhex(vectors()["independent_agent"]["agent_seed_hex"])
    return NamespaceKeys.from_agent_key(seed, spec["namespace"])


def _vector_blob(name: str) -> bytes:
    (env,) = [e for e in vectors()["envelopes"] if e["name"] == name]
    return bytes.fromhex(env["envelope_hex"])


# -- known-answer envelopes --------------------------------------------------


def test_vectors_have_the_required_envelopes():
    envs = vectors()["envelopes"]
    assert len(envs) >= 2
    assert any(e["record"]["metadata"] and not e["record"]["text"].isascii() for e in envs)
    assert any(e["keys"]["mode"] == "independent" for e in envs)


def _record_of(value: Any) -> Any:
    """A vectors.json record with its ``{"$hex": ...}`` values as the bytes they stand for."""
    if isinstance(value, dict):
        if set(value) == {"$hex"}:
            return bytes.fromhex(value["$hex"])
        return {k: _record_of(v) for k, v in value.items()}
    return value


def _nulled(value: Any) -> Any:
    if isinstance(value, dict):
        return None if set(value) == {"$hex"} else {k: _nulled(v) for k, v in value.items()}
    return value


@pytest.mark.parametrize("env", vectors()["envelopes"], ids=lambda e: e["name"])
def test_envelope_vector_byte_for_byte(env):
    keys = _keys_for(env["keys"])
    nonce = bytes.fromhex(env["nonce_hex"])
    blob = bytes.fromhex(env["envelope_hex"])
    body = bytes.fromhex(env["canonical_json_hex"])
    record = _record_of(env["record"])
    attachment = bytes.fromhex(env.get("attachment_hex", ""))
    header_size = HEADER_SIZE + (4 if attachment else 0)

    # The library reproduces the exact bytes and opens them to the record.
    assert seal(keys, record, nonce=nonce) == blob
    assert open_envelope(keys, blob, expected_id=record["id"]) == record
    if not attachment:
        assert canonical_json(record) == body
    assert len(blob) == env["envelope_size"] == (
        env["padded_plaintext_size"] + len(attachment) + OVERHEAD + header_size - HEADER_SIZE)

    # Field by field, with primitives only (no walrus_mem code).
    assert blob[0:4] == b"WMEM" and blob[4] == (2 if attachment else 1) and blob[5] == 1
    entry = (
        vectors()["independent_agent"]
        if env["keys"]["mode"] == "independent"
        else next(n for n in vectors()["namespaces"] if n["namespace"] == env["keys"]["namespace"])
    )
    assert blob[6:22].hex() == entry["fingerprint_hex"]
    assert blob[22:46] == nonce
    if attachment:
        assert blob[46:50] == struct.pack(">I", len(attachment))
    verify_key = nacl.signing.VerifyKey(bytes.fromhex(entry["verify_key_hex"]))
    assert verify_key.verify(blob[:-64], blob[-64:]) == blob[:-64]
    plaintext = nacl.bindings.crypto_aead_xchacha20poly1305_ietf_decrypt(
        blob[header_size:-64], blob[:header_size], nonce, bytes.fromhex(entry["sealing_key_hex"])
    )
    padded = len(plaintext) - len(attachment)
    assert padded == env["padded_plaintext_size"] == bucket_size(4 + len(body))
    assert plaintext[:4] == struct.pack(">I", len(body))
    assert plaintext[4 : 4 + len(body)] == body
    assert plaintext[4 + len(body) : padded] == bytes(padded - 4 - len(body))
    assert plaintext[padded:] == attachment
    expected = json.loads(body) if attachment else env["record"]
    if attachment:  # the JSON holds null where each bytes value was, and where they go
        assert {k: v for k, v in expected.items() if k != "#bytes"} == _nulled(env["record"])
        assert sum(n for _, n in expected["#bytes"]) == len(attachment)
    assert body == json.dumps(
        expected, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    ).encode("utf-8")


@pytest.mark.parametrize("env", vectors()["envelopes"], ids=lambda e: e["name"])
def test_envelope_signature_verifies_with_a_second_implementation(env):
    ed = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.ed25519")
    blob = bytes.fromhex(env["envelope_hex"])
    keys = _keys_for(env["keys"])
    ed.Ed25519PublicKey.from_public_bytes(keys.verify_key).verify(blob[-64:], blob[:-64])


@pytest.mark.parametrize("rej", vectors()["rejections"], ids=lambda r: r["change"][:30])
def test_rejection_vectors(rej):
    master = MasterSeed.from_hex(vectors()["master_seed_hex"])
    blob = bytes.fromhex(rej["blob_hex"]) if "blob_hex" in rej else _vector_blob(rej["envelope"])
    keys = NamespaceKeys.derive(master, rej.get("open_with_namespace", "default"))
    with pytest.raises(getattr(errors, rej["error"])) as info:
        open_envelope(keys, blob, expected_id=rej.get("expected_id"))
    assert type(info.value).__name__ == rej["error"]


# -- round trips -------------------------------------------------------------

JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5)
    ),
    max_leaves=25,
)


@settings(max_examples=150, deadline=None)
@given(
    text=st.text(max_size=3000),
    metadata=st.dictionaries(st.text(max_size=20), JSON_VALUES, max_size=8),
    memory_id=st.text(min_size=1, max_size=60),
    kind=st.sampled_from(["fact", "manifest", "episode", "x"]),
)
def test_round_trip(keys, text, metadata, memory_id, kind):
    record = {"id": memory_id, "kind": kind, "text": text, "metadata": metadata, "created_at": 1.5}
    blob = seal(keys, record)
    assert open_envelope(keys, blob, expected_id=memory_id, expected_kind=kind) == record
    assert len(blob) == OVERHEAD + bucket_size(4 + len(canonical_json(record)))


def test_round_trip_accepts_bytearray_and_memoryview(keys):
    blob = seal(keys, _record())
    assert open_envelope(keys, bytearray(blob)) == _record()
    assert open_envelope(keys, memoryview(blob)) == _record()


def test_tuples_are_sealed_as_arrays(keys):
    rec = _record(metadata={"tags": ("a", "b")})
    assert open_envelope(keys, seal(keys, rec))["metadata"] == {"tags": ["a", "b"]}


# -- tampering: every byte, every length ---------------------------------------


def _expected_flip_error(pos: int, size: int) -> type[EnvelopeError]:
    if pos < 4:
        return InvalidEnvelope  # magic
    if pos < 6:
        return UnsupportedVersion  # version, suite
    if pos < 22:
        return WrongNamespace  # fingerprint
    return TamperedBlob  # nonce, ciphertext, signature


@pytest.mark.parametrize("name", ["small-fact", "unicode-fact-with-metadata"])
@pytest.mark.parametrize("mask", [0x01, 0xFF])
def test_every_single_byte_flip_is_rejected(master, name, mask):
    blob = _vector_blob(name)
    keys = NamespaceKeys.derive(master, "default" if name == "small-fact" else "team-alpha")
    assert open_envelope(keys, blob)  # the original opens
    for pos in range(len(blob)):
        bad = bytearray(blob)
        bad[pos] ^= mask
        with pytest.raises(EnvelopeError) as info:
            open_envelope(keys, bytes(bad))
        assert type(info.value) is _expected_flip_error(pos, len(blob)), pos


@pytest.mark.parametrize("name", ["small-fact", "unicode-fact-with-metadata"])
def test_every_truncation_is_rejected(master, name):
    blob = _vector_blob(name)
    keys = NamespaceKeys.derive(master, "default" if name == "small-fact" else "team-alpha")
    for n in range(len(blob)):
        with pytest.raises(EnvelopeError) as info:
            open_envelope(keys, blob[:n])
        # Structurally impossible lengths are caught before any crypto; a cut that
        # happens to land on a smaller bucket's size fails the signature instead.
        on_bucket = n >= MIN_SIZE and bucket_size(n - OVERHEAD) == n - OVERHEAD
        assert type(info.value) is (TamperedBlob if on_bucket else InvalidEnvelope), n


def test_appending_bytes_is_rejected(keys):
    blob = seal(keys, _record())
    for extra in [b"\x00", b"\xff" * 7, bytes(64), bytes(255)]:
        with pytest.raises(InvalidEnvelope, match="no padding bucket"):
            open_envelope(keys, blob + extra)
    # Growing to exactly the next bucket's size passes the structure check, not the signature.
    with pytest.raises(TamperedBlob):
        open_envelope(keys, blob + bytes(256))


def test_empty_and_foreign_bytes(keys):
    for junk in [b"", b"W", b"WMEM", b"WMEM\x01", b"%PDF-1.7" + bytes(500), bytes(1000)]:
        with pytest.raises(InvalidEnvelope):
            open_envelope(keys, junk)
    for not_bytes in ["WMEM", None, 123, [1, 2]]:
        with pytest.raises(InvalidEnvelope, match="must be bytes"):
            open_envelope(keys, not_bytes)  # type: ignore[arg-type]


@pytest.mark.parametrize("version", [0, 3, 255])
def test_unsupported_version(keys, version):
    blob = bytearray(seal(keys, _record()))
    blob[4] = version
    with pytest.raises(UnsupportedVersion, match=f"version {version}"):
        open_envelope(keys, bytes(blob))
    with pytest.raises(UnsupportedVersion):
        open_envelope(keys, bytes(blob[:10]))  # version is known before the size is


@pytest.mark.parametrize("suite", [0, 2, 255])
def test_unsupported_suite_even_when_validly_signed(keys, suite):
    blob = bytearray(seal(keys, _record()))
    blob[5] = suite
    signed = bytes(blob[:-SIGNATURE_SIZE])
    resigned = signed + keys.signing_key.sign(signed).signature
    with pytest.raises(UnsupportedVersion, match=f"suite {suite}"):
        open_envelope(keys, resigned)


# -- namespaces --------------------------------------------------------------


def test_cross_namespace_every_ordered_pair(master):
    names = [f"ns-{i}" for i in range(10)]
    ks = {n: NamespaceKeys.derive(master, n) for n in names}
    blobs = {n: seal(ks[n], _record(text=f"secret of {n}")) for n in names}
    for a in names:
        for b in names:
            if a == b:
                assert open_envelope(ks[b], blobs[a])["text"] == f"secret of {a}"
            else:
                with pytest.raises(WrongNamespace):
                    open_envelope(ks[b], blobs[a])


def test_forged_fingerprint_still_fails(master):
    a, b = NamespaceKeys.derive(master, "alpha"), NamespaceKeys.derive(master, "beta")
    blob = bytearray(seal(a, _record()))
    blob[6:22] = b.fingerprint_bytes  # A's envelope claiming to be B's
    with pytest.raises(TamperedBlob, match="signature"):
        open_envelope(b, bytes(blob))


def test_same_signing_key_other_sealing_key_fails_aead(keys):
    other = NamespaceKeys(
        namespace=keys.namespace,
        signing_key=keys.signing_key,
        sealing_key=seed_bytes(1),
        dedupe_key=keys.dedupe_key,
    )
    with pytest.raises(TamperedBlob, match="ciphertext failed authentication"):
        open_envelope(other, seal(keys, _record()))


def test_independent_and_derived_keys_of_one_namespace_are_separate(master):
    derived = NamespaceKeys.derive(master, "agent_007")
    agent = NamespaceKeys.from_agent_key(seed_bytes(2), "agent_007")
    with pytest.raises(WrongNamespace):
        open_envelope(derived, seal(agent, _record()))
    with pytest.raises(WrongNamespace):
        open_envelope(agent, seal(derived, _record()))


def test_namespace_name_is_not_in_the_blob(master):
    keys = NamespaceKeys.derive(master, "very-distinctive-namespace")
    blob = seal(keys, _record())
    assert b"very-distinctive" not in blob
    assert envelope_fingerprint(blob) == keys.fingerprint_bytes


# -- substitution ------------------------------------------------------------


def test_substituted_blob_is_detected_by_expected_id(keys):
    blob_1 = seal(keys, _record(1))
    blob_2 = seal(keys, _record(2))
    assert open_envelope(keys, blob_2, expected_id="mem-0002")["id"] == "mem-0002"
    with pytest.raises(BlobMismatch, match="another memory"):
        open_envelope(keys, blob_2, expected_id="mem-0001")
    with pytest.raises(BlobMismatch):
        open_envelope(keys, blob_1, expected_id="mem-0002")


def test_expected_kind(keys):
    blob = seal(keys, {"id": "m", "kind": "manifest", "entries": []})
    assert open_envelope(keys, blob, expected_kind="manifest")["entries"] == []
    with pytest.raises(BlobMismatch, match="'manifest' record, not 'fact'"):
        open_envelope(keys, blob, expected_kind="fact")


# -- size limits and padding ---------------------------------------------------


def _record_of_json_size(n: int) -> dict:
    base = {"id": "m", "kind": "fact", "text": ""}
    pad = n - len(canonical_json(base))
    rec = {**base, "text": "x" * pad}
    assert len(canonical_json(rec)) == n
    return rec


def test_default_max_plaintext_matches_settings():
    assert DEFAULT_MAX_PLAINTEXT == 64 * 1024 == Settings().max_fact_bytes


@pytest.mark.parametrize("limit", [DEFAULT_MAX_PLAINTEXT, 1000])
def test_payload_too_large_at_the_configured_max(keys, limit):
    kwargs = {} if limit == DEFAULT_MAX_PLAINTEXT else {"max_plaintext": limit}
    at_limit = _record_of_json_size(limit)
    assert open_envelope(keys, seal(keys, at_limit, **kwargs)) == at_limit
    with pytest.raises(PayloadTooLarge, match=f"limit is {limit} bytes") as info:
        seal(keys, _record_of_json_size(limit + 1), **kwargs)
    assert isinstance(info.value, ValueError)


def test_bucket_table():
    table = {
        0: 256, 1: 256, 256: 256, 257: 512, 512: 512, 513: 1024, 4096: 4096, 4097: 8192,
        65536: 65536, 65540: 131072, 2**20: 2**20, 2**20 + 1: 2 * 2**20, 3 * 2**20: 3 * 2**20,
    }  # fmt: skip
    for n, bucket in table.items():
        assert bucket_size(n) == bucket, n


def test_blob_size_reveals_only_the_bucket(keys):
    short = seal(keys, _record(text="a"))
    longer = seal(keys, _record(text="a" * 150))
    assert len(short) == len(longer) == OVERHEAD + 256
    bigger = seal(keys, _record(text="a" * 300))
    assert len(bigger) == OVERHEAD + 512
    sizes = {len(seal(keys, _record(text="b" * n))) for n in range(500, 900, 37)}
    assert sizes == {OVERHEAD + 1024}


def test_largest_default_record_fits_its_bucket(keys):
    blob = seal(keys, _record_of_json_size(DEFAULT_MAX_PLAINTEXT))
    assert len(blob) == OVERHEAD + 131072  # 64 KiB + 4-byte length prefix -> 128 KiB bucket


# -- nonces ------------------------------------------------------------------


def test_two_seals_of_one_record_differ(keys):
    a, b = seal(keys, _record()), seal(keys, _record())
    assert a != b and a[22:46] != b[22:46]
    assert open_envelope(keys, a) == open_envelope(keys, b) == _record()


def test_nonces_are_unique_over_many_seals(keys):
    nonces = {seal(keys, _record())[22:46] for _ in range(500)}
    assert len(nonces) == 500


def test_nonce_source_is_injectable(keys):
    calls: list[int] = []

    def source(n: int) -> bytes:
        calls.append(n)
        return bytes([7]) * n

    blob = seal(keys, _record(), random=source)
    assert calls == [NONCE_SIZE] and blob[22:46] == bytes([7]) * 24
    with pytest.raises(InvalidInput, match="24 bytes"):
        seal(keys, _record(), random=lambda n: bytes(n - 1))
    with pytest.raises(InvalidInput, match="24 bytes"):
        seal(keys, _record(), nonce=bytes(12))


# -- bad records -------------------------------------------------------------


@pytest.mark.parametrize(
    ("record", "match"),
    [
        ({"kind": "fact"}, "'id' and 'kind'"),
        ({"id": "m"}, "'id' and 'kind'"),
        ({"id": 1, "kind": "fact"}, "'id' and 'kind'"),
        ({"id": "m", "kind": None}, "'id' and 'kind'"),
        ({"id": "m", "kind": "f", "x": float("nan")}, "NaN"),
        ({"id": "m", "kind": "f", "x": float("inf")}, "NaN or infinite"),
        ({"id": "m", "kind": "f", "x": {1: "a"}}, "keys must be strings"),
        ({"id": "m", "kind": "f", "x": {1: "a", "1": "b"}}, "keys must be strings"),
        ({"id": "m", "kind": "f", "x": {"a", "b"}}, "set"),
        ({"id": "m", "kind": "f", "x": [b"bytes"]}, "bytes"),  # bytes only as object values
        ({"id": "m", "kind": "f", "#bytes": []}, "reserved"),
        ({"id": "m", "kind": "f", "x": object()}, "object"),
        ({"id": "m", "kind": "f", "x": "\ud800"}, "JSON-serialisable"),
        ({"id": "m", "kind": "f", "x": 10**5000}, "JSON-serialisable"),
    ],
)
def test_bad_records_are_invalid_input(keys, record, match):
    with pytest.raises(InvalidInput, match=match):
        seal(keys, record)


def test_record_nesting_limit(keys):
    deep: Any = "leaf"
    for _ in range(MAX_JSON_DEPTH - 1):
        deep = [deep]
    ok = {"id": "m", "kind": "f", "x": deep}
    assert open_envelope(keys, seal(keys, ok)) == ok
    with pytest.raises(InvalidInput, match="deeper than"):
        seal(keys, {"id": "m", "kind": "f", "x": [deep]})


def test_self_referencing_record_is_invalid_input(keys):
    rec: dict[str, Any] = {"id": "m", "kind": "f"}
    rec["self"] = rec
    with pytest.raises(InvalidInput, match="deeper than"):
        seal(keys, rec)


def test_non_mapping_record_and_wrong_keys_type(keys):
    with pytest.raises(InvalidInput, match="mapping"):
        seal(keys, [("id", "m")])  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="NamespaceKeys"):
        seal("keys", _record())  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="NamespaceKeys"):
        open_envelope("keys", seal(keys, _record()))  # type: ignore[arg-type]


# -- authentic envelopes with a bad plaintext (only a key holder can make these) --


def _seal_raw(keys: NamespaceKeys, plaintext: bytes) -> bytes:
    nonce = bytes(range(24))
    header = MAGIC + bytes([VERSION, SUITE_ID]) + keys.fingerprint_bytes + nonce
    ct = nacl.bindings.crypto_aead_xchacha20poly1305_ietf_encrypt(
        plaintext, header, nonce, keys.sealing_key
    )
    return header + ct + keys.signing_key.sign(header + ct).signature


def _padded(body: bytes, size: int | None = None) -> bytes:
    size = size or bucket_size(4 + len(body))
    return struct.pack(">I", len(body)) + body + bytes(size - 4 - len(body))


@pytest.mark.parametrize(
    ("plaintext", "match"),
    [
        (_padded(b"not json"), "malformed JSON"),
        (_padded(b"\xff\xfe"), "malformed JSON"),
        (_padded(b'["id","kind"]'), "JSON object"),
        (_padded(b'{"id":"m","kind":"f","x":NaN}'), "malformed JSON"),
        (_padded(b'{"id":"m","kind":"f","x":1e400}'), "malformed JSON"),
        (_padded(b'{"id":"m","id":"n","kind":"f"}'), "malformed JSON"),
        (_padded(b'{"id":"m"}'), "string id and kind"),
        (_padded(b'{"id":1,"kind":"f"}'), "string id and kind"),
        (_padded(b"[" * 100_000 + b"]" * 100_000), "malformed JSON"),
        (_padded(b'{"id":"m","kind":"f","x":' + b"[" * 70 + b"]" * 70 + b"}"), "malformed"),
        (_padded(b'{"id":"m","kind":"f"}')[:-1] + b"\x01", "padding"),
        (struct.pack(">I", 10_000) + bytes(252), "padding"),
        (_padded(b'{"id":"m","kind":"f"}', 512), "wrong bucket"),
    ],
)
def test_authentic_but_malformed_plaintext_is_invalid_envelope(keys, plaintext, match):
    with pytest.raises(InvalidEnvelope, match=match) as info:
        open_envelope(keys, _seal_raw(keys, plaintext))
    # The decrypted text must not ride along on the exception chain.
    assert info.value.__cause__ is None and info.value.__context__ is None


def test_non_canonical_but_valid_json_from_another_implementation_opens(keys):
    body = b'{ "kind": "fact", "id": "m", "x": 1E-7 }'
    assert open_envelope(keys, _seal_raw(keys, _padded(body))) == {
        "id": "m", "kind": "fact", "x": 1e-07,
    }  # fmt: skip


# -- purity ------------------------------------------------------------------


def test_seal_and_open_do_no_io(keys, monkeypatch):
    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("I/O attempted")

    blob = seal(keys, _record())  # warm up any lazy imports first
    monkeypatch.setattr(builtins, "open", forbidden)
    monkeypatch.setattr(io, "open", forbidden)
    monkeypatch.setattr(os, "open", forbidden)
    monkeypatch.setattr(socket, "socket", forbidden)
    monkeypatch.setattr(socket, "create_connection", forbidden)
    again = seal(keys, _record(text="ünïcode"))
    assert open_envelope(keys, again, expected_id="mem-0001")["text"] == "ünïcode"
    assert open_envelope(keys, blob) == _record()
    with pytest.raises(TamperedBlob):
        open_envelope(keys, blob[:-1] + bytes([blob[-1] ^ 1]))


def test_envelope_fingerprint_is_structural_only(keys):
    blob = seal(keys, _record())
    assert envelope_fingerprint(blob) == keys.fingerprint_bytes
    with pytest.raises(InvalidEnvelope):
        envelope_fingerprint(blob[:50])
    with pytest.raises(UnsupportedVersion):
        envelope_fingerprint(blob[:4] + b"\x09" + blob[5:])

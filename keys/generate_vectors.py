#!/usr/bin/env python3
"""Regenerate keys/vectors.json, the published known-answer TEST vectors.

    python keys/generate_vectors.py          # rewrite keys/vectors.json
    python keys/generate_vectors.py --check  # exit 1 if the file is stale

Every secret here is derived from PUBLIC test seeds (bytes 00..1f and 20..3f).
They are test vectors only, never keys to use. tests/test_keys.py and
tests/test_envelope.py recompute every value byte for byte; regenerating is
only right after a deliberate, versioned change of the derivation or format
(see docs/keys.md and docs/envelope-format.md).
"""

from __future__ import annotations

import base64
import json
import math
import struct
import sys
from pathlib import Path
from typing import Any

import nacl.signing

from walrus_mem.envelope import (
    HEADER_SIZE,
    SIGNATURE_SIZE,
    SUITE_ID,
    TAG_SIZE,
    VERSION,
    VERSION_ATTACHED,
    bucket_size,
    canonical_json,
    seal,
)
from walrus_mem.keys import MasterSeed, NamespaceKeys

VECTORS_PATH = Path(__file__).with_name("vectors.json")

TEST_MASTER_SEED = bytes(range(32))  # 000102...1f
TEST_AGENT_SEED = bytes(range(32, 64))  # 202122...3f

NAMESPACES = [
    "default",
    "a",
    "0",
    "team-alpha",
    "agent_007",
    "9-lives_x",
    "n" + "-_0123456789abcdefghijklmnopqrstuvwxyz" + "z" * 25,  # 64 characters
]
AGENT_NAMESPACE = "agent_007"
DEDUPE_SAMPLE = "the user prefers tea over coffee"

# 384 values, unit length: cos(0.37 i + 0.5) / 13.86... (rounded to float16 in the vector)
_RAW = [math.cos(0.37 * i + 0.5) for i in range(384)]
SAMPLE_VECTOR = [x / math.sqrt(sum(v * v for v in _RAW)) for x in _RAW]
_SAMPLE_F16 = b"".join(struct.pack("<e", x) for x in SAMPLE_VECTOR)


def _tea_fact_with_vector(data: str | bytes) -> dict[str, Any]:
    """The tea fact with its carried vector: ``data`` base64 (envelope version 1) or the
    raw float16 bytes (version 2)."""
    return {
        "id": "0190f3c2a1b24c8d9e0f112233445566",
        "kind": "fact",
        "format": 1,
        "version": 1,
        "text": "The user prefers tea over coffee.",
        "metadata": {},
        "category": "preference",
        "importance": 0.85,
        "created_at": 1735689600.0,
        "updated_at": 1735689600.0,
        "expires_at": None,
        "vec": {
            "model": "sentence-transformers/all-MiniLM-L6-v2",
            "weights": "7cdf38ecb8fe8399309ec2c49a7d9df8",
            "dim": 384,
            "dtype": "f16",
            "data": data,
        },
    }


ENVELOPES: list[dict[str, Any]] = [
    {
        "name": "small-fact",
        "mode": "derived",
        "namespace": "default",
        "nonce": bytes(range(0x40, 0x40 + 24)),
        "record": {
            "id": "mem-0001",
            "kind": "fact",
            "text": "The user prefers tea over coffee.",
            "metadata": {},
            "created_at": "2025-01-01T00:00:00Z",
        },
    },
    {
        "name": "unicode-fact-with-metadata",
        "mode": "derived",
        "namespace": "team-alpha",
        "nonce": bytes(range(0x80, 0x80 + 24)),
        "record": {
            "id": "mem-ünï-0002",
            "kind": "fact",
            "text": (
                'Zoë 🐙 prefers 日本語 docs — naïve café notes, "quoted", tab\tand newline\n'
                "Ελληνικά, עברית, العربية, emoji 👩‍💻🇳🇿; long enough to need a bigger bucket "
                "than the smallest one (256 bytes), so a second bucket size is "
                "covered by the vectors as well."
            ),
            "metadata": {
                "tags": ["food", "日本", "préférence"],
                "source": "chat",
                "score": 0.5,
                "count": 3,
                "pinned": True,
                "expires": None,
                "nested": {"b": [1, 2, 3], "a": {"z": -1.25e-7}},
            },
            "created_at": "2025-06-30T23:59:59.123456Z",
            "updated_at": "2025-07-01T00:00:00Z",
        },
    },
    {
        # A fact as Memory.remember seals it since issue 28: the record's fields and the
        # vector it travels with ("vec": float16 little-endian, base64; docs/envelope-format.md).
        "name": "fact-with-vector",
        "mode": "derived",
        "namespace": "default",
        "nonce": bytes(range(0xC0, 0xC0 + 24)),
        "record": _tea_fact_with_vector(base64.b64encode(_SAMPLE_F16).decode("ascii")),
    },
    {
        # The same fact as Memory.remember seals it since the footprint round of issue 28:
        # envelope version 2, the vector's 768 float16 bytes raw after the padded JSON
        # (the JSON holds null at vec.data and "#bytes": [[["vec", "data"], 768]]).
        "name": "fact-with-raw-vector",
        "mode": "derived",
        "namespace": "default",
        "nonce": bytes(range(0xE0, 0xE0 + 24)),
        "record": _tea_fact_with_vector(_SAMPLE_F16),
    },
    {
        "name": "independent-agent-fact",
        "mode": "independent",
        "namespace": AGENT_NAMESPACE,
        "nonce": bytes(24),
        "record": {"id": "mem-0003", "kind": "fact", "text": "sealed with an agent's own key"},
    },
]


def _detached(record: dict[str, Any], path: list[str], slices: list[list[Any]]) -> dict[str, Any]:
    """``record`` with each bytes value replaced by null (collected, in sorted-key order)."""
    out: dict[str, Any] = {}
    for key in sorted(record):
        value = record[key]
        if isinstance(value, bytes):
            slices.append([[*path, key], value])
            out[key] = None
        elif isinstance(value, dict):
            out[key] = _detached(value, [*path, key], slices)
        else:
            out[key] = value
    return out


def _as_json(value: Any) -> Any:
    """``value`` with each bytes value written as ``{"$hex": ...}`` (vectors.json is JSON)."""
    if isinstance(value, bytes):
        return {"$hex": value.hex()}
    if isinstance(value, dict):
        return {k: _as_json(v) for k, v in value.items()}
    return value


def _derived_entry(keys: NamespaceKeys, signing_seed: bytes) -> dict[str, Any]:
    return {
        "namespace": keys.namespace,
        "namespace_utf8_hex": keys.namespace.encode("utf-8").hex(),
        "signing_seed_hex": signing_seed.hex(),
        "verify_key_hex": keys.verify_key.hex(),
        "fingerprint_hex": keys.fingerprint_bytes.hex(),
        "fingerprint_short": keys.fingerprint,
        "sealing_key_hex": keys.sealing_key.hex(),
        "dedupe_key_hex": keys.dedupe_key.hex(),
        "dedupe_hash": {"text": DEDUPE_SAMPLE, "hash_hex": keys.dedupe_hash(DEDUPE_SAMPLE)},
    }


def _keys_for(mode: str, namespace: str) -> NamespaceKeys:
    if mode == "derived":
        return NamespaceKeys.derive(MasterSeed(TEST_MASTER_SEED), namespace)
    return NamespaceKeys.from_agent_key(TEST_AGENT_SEED, namespace)


def build_vectors() -> dict[str, Any]:
    """The whole vectors document, computed with the library."""
    master = MasterSeed(TEST_MASTER_SEED)
    namespaces = []
    for ns in NAMESPACES:
        keys = NamespaceKeys.derive(master, ns)
        namespaces.append(_derived_entry(keys, bytes(keys.signing_key)))

    agent = NamespaceKeys.from_agent_key(TEST_AGENT_SEED, AGENT_NAMESPACE)
    secret_key_64 = TEST_AGENT_SEED + bytes(nacl.signing.SigningKey(TEST_AGENT_SEED).verify_key)
    independent = {
        "agent_seed_hex": TEST_AGENT_SEED.hex(),
        "agent_secret_key_64_hex": secret_key_64.hex(),
        "agent_seed_base64": base64.b64encode(TEST_AGENT_SEED).decode(),
        "agent_seed_base64url_unpadded": base64.urlsafe_b64encode(TEST_AGENT_SEED)
        .decode()
        .rstrip("="),
        **_derived_entry(agent, TEST_AGENT_SEED),
    }
    del independent["signing_seed_hex"]  # it is the agent seed itself

    envelopes = []
    for spec in ENVELOPES:
        keys = _keys_for(spec["mode"], spec["namespace"])
        blob = seal(keys, spec["record"], nonce=spec["nonce"])
        slices: list[list[Any]] = []
        body = canonical_json(_detached(spec["record"], [], slices))
        if slices:  # version 2: the JSON names where the attachment's slices go
            body = canonical_json({**_detached(spec["record"], [], []), "#bytes": [
                [path, len(raw)] for path, raw in slices]})
        entry = {
            "name": spec["name"],
            "keys": {"mode": spec["mode"], "namespace": spec["namespace"]},
            "nonce_hex": spec["nonce"].hex(),
            "record": _as_json(spec["record"]),
            "canonical_json_hex": body.hex(),
            "padded_plaintext_size": bucket_size(4 + len(body)),
            "envelope_size": len(blob),
            "envelope_hex": blob.hex(),
        }
        if slices:
            entry["attachment_hex"] = b"".join(raw for _, raw in slices).hex()
        envelopes.append(entry)

    small = bytes.fromhex(envelopes[0]["envelope_hex"])
    rejections = [
        {
            "envelope": "small-fact",
            "change": "open with the keys of namespace 'a'",
            "open_with_namespace": "a",
            "error": "WrongNamespace",
        },
        {
            "envelope": "small-fact",
            "change": "last byte XOR 0x01 (signature)",
            "blob_hex": (small[:-1] + bytes([small[-1] ^ 1])).hex(),
            "error": "TamperedBlob",
        },
        {
            "envelope": "small-fact",
            "change": "byte 4 (version) set to 3",
            "blob_hex": (small[:4] + b"\x03" + small[5:]).hex(),
            "error": "UnsupportedVersion",
        },
        {
            "envelope": "small-fact",
            "change": "byte 5 (suite) set to 2",
            "blob_hex": (small[:5] + b"\x02" + small[6:]).hex(),
            "error": "UnsupportedVersion",
        },
        {
            "envelope": "small-fact",
            "change": "truncated to 100 bytes",
            "blob_hex": small[:100].hex(),
            "error": "InvalidEnvelope",
        },
        {
            "envelope": "small-fact",
            "change": "one zero byte appended",
            "blob_hex": (small + b"\x00").hex(),
            "error": "InvalidEnvelope",
        },
        {
            "envelope": "small-fact",
            "change": "opened with expected_id 'mem-9999'",
            "expected_id": "mem-9999",
            "error": "BlobMismatch",
        },
    ]

    return {
        "_comment": [
            "TEST VECTORS ONLY. Every secret below is derived from public test seeds.",
            "Never use any of these values as a real key. Regenerate with",
            "`python keys/generate_vectors.py`; see keys/README.md.",
        ],
        "kdf": {
            "hash": "BLAKE2b (RFC 7693), keyed, no salt, personalisation zero-padded to 16 bytes",
            "sign": {"person": "walrusmem.sign", "digest_size": 32},
            "seal": {"person": "walrusmem.seal", "digest_size": 32},
            "dedupe": {"person": "walrusmem.dedup", "digest_size": 32},
            "independent_seal": {"person": "walrusmem.iseal", "digest_size": 32},
            "independent_dedupe": {"person": "walrusmem.idedup", "digest_size": 32},
            "fingerprint": {"person": "walrusmem.fpr", "digest_size": 16, "key": ""},
            "dedupe_hash": {"person": "walrusmem.dhash", "digest_size": 32},
        },
        "envelope_format": {
            "version": VERSION,
            "version_attached": VERSION_ATTACHED,
            "header_size_attached": HEADER_SIZE + 4,
            "suite": SUITE_ID,
            "header_size": HEADER_SIZE,
            "tag_size": TAG_SIZE,
            "signature_size": SIGNATURE_SIZE,
        },
        "master_seed_hex": TEST_MASTER_SEED.hex(),
        "master_fingerprint_short": master.fingerprint,
        "namespaces": namespaces,
        "independent_agent": independent,
        "envelopes": envelopes,
        "rejections": rejections,
    }


def render(vectors: dict[str, Any]) -> str:
    return json.dumps(vectors, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    text = render(build_vectors())
    if "--check" in argv:
        current = VECTORS_PATH.read_text(encoding="utf-8") if VECTORS_PATH.exists() else ""
        if current != text:
            print(f"{VECTORS_PATH} is stale; rerun keys/generate_vectors.py", file=sys.stderr)
            return 1
        print(f"{VECTORS_PATH} is up to date")
        return 0
    VECTORS_PATH.write_text(text, encoding="utf-8")
    print(f"wrote {VECTORS_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

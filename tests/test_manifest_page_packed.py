"""Manifest pages carry their entries zlib-packed (issue 28 footprint): a page of 1,000
entries was a 256 KiB-1 MiB bucket of JSON (381 B a memory in the embedded relayer at
200k), and pages written before (an ``entries`` list) still read."""

from __future__ import annotations

import zlib

import pytest

from walrus_mem._log import manifest as mf
from walrus_mem._log.publishing import MANIFEST_MAX_PLAINTEXT
from walrus_mem.envelope import open_envelope
from walrus_mem.envelope import seal as _seal
from walrus_mem.errors import BlobMismatch, TamperedBlob
from walrus_mem.keys import MasterSeed, NamespaceKeys


@pytest.fixture(scope="module")
def keys() -> NamespaceKeys:
    return NamespaceKeys.derive(MasterSeed.from_hex("28" * 32), "pages")


def _entries(n: int) -> list[mf.Entry]:
    out = []
    for i in range(n):
        blob = f"{i // 600:02d}" + "Q" * 41
        out.append(mf.Entry(f"{i:08x}" + "a1b2c3d4" * 3, 1, blob, blob + f"BAgA{i % 600:03d}",
                            6, 1795966245.5 + i, f"{i:064x}"))
    out.append(mf.Entry.tombstone("gone" + "0" * 28, 3))
    return out


def seal(keys: NamespaceKeys, record: dict) -> bytes:
    return _seal(keys, record, max_plaintext=MANIFEST_MAX_PLAINTEXT)


def _open(keys: NamespaceKeys, sealed: bytes, digest: str) -> list[mf.Entry]:
    return mf.parse_page(open_envelope(keys, sealed, expected_id=f"page-{digest}",
                                       expected_kind="manifest-page"), digest)


def test_a_page_is_packed_and_reads_back(keys: NamespaceKeys) -> None:
    entries = _entries(1000)
    record, digest = mf.page_record(entries)
    sealed = seal(keys, record)
    assert _open(keys, sealed, digest) == entries
    assert digest == mf.entries_digest(entries)  # the digest roots name is unchanged
    old = seal(keys, {"id": f"page-{digest}", "kind": "manifest-page", "format": mf.FORMAT,
                      "entries": [e.to_json() for e in entries]})
    assert len(sealed) < 0.5 * len(old)


def test_a_page_written_before_still_reads(keys: NamespaceKeys) -> None:
    entries = _entries(50)
    digest = mf.entries_digest(entries)
    old = seal(keys, {"id": f"page-{digest}", "kind": "manifest-page", "format": mf.FORMAT,
                      "entries": [e.to_json() for e in entries]})
    assert _open(keys, old, digest) == entries


def test_the_packed_length_shows_only_a_bucket(keys: NamespaceKeys) -> None:
    for n in (3, 200, 1000):
        record, _ = mf.page_record(_entries(n))
        size = len(record["packed"])
        assert size >= 256 and size & (size - 1) == 0


def test_a_bad_packed_page_is_refused(keys: NamespaceKeys) -> None:
    entries = _entries(20)
    record, digest = mf.page_record(entries)
    cases = [
        b"not zlib at all",
        zlib.compress(b'{"i": 1}') + bytes(200),  # not a list
        zlib.compress(b"[]") + b"\x01" + bytes(199),  # padding that is not zeros
        zlib.compress(b"[" + b" " * (mf.PACKED_MAX + 10) + b"]"),  # inflates past the cap
        zlib.compress(b'[{"i":"x","v":1,"b":"b","p":null,"e":1,"t":NaN,"h":null}]'),
    ]
    for packed in cases:
        with pytest.raises(TamperedBlob):
            mf.parse_page({**record, "packed": packed}, digest)
    other = mf.page_record(_entries(21))[0]
    with pytest.raises(BlobMismatch):
        mf.parse_page(other, digest)
    with pytest.raises(TamperedBlob):
        mf.parse_page({**record, "packed": None}, digest)

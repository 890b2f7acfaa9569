"""Sealed manifests: how a namespace is found again on Walrus from nothing but its key.

A manifest is a sealed record (kind ``manifest``) listing every live memory
of a namespace: memory id → version, blob id, quilt patch id, end epoch.
Everything else restore needs (text, metadata, timestamps, ...) is inside the
fact blobs themselves, so a manifest entry is ~130 bytes. Embeddings are *not*
included (see docs/architecture.md: restore re-embeds, which keeps manifests
small and lets a restore switch models).

Each manifest is a complete snapshot and links to the previous one
(``prev``); restore reads one manifest, never merges the chain, so a memory
forgotten before a manifest was published is not in it and never comes back.

Small namespaces (≤ :data:`INLINE_MAX` entries) keep the entries in the root.
Larger ones split them into sealed **pages** (kind ``manifest-page``) chosen by
content-defined chunking: a page ends after an entry whose id hash hits
``0 mod PAGE_TARGET`` (or at :data:`PAGE_MAX` entries). Adding, updating or
forgetting a memory therefore changes one page, and unchanged pages (same
digest) are reused from earlier manifests instead of being published again.
The entries of changed pages ride inline in the root while they number at
most :data:`CHANGED_INLINE_MAX` (about 1 MiB of root): a steady trickle of
writes, or a batch of a few thousand facts, costs one store call per
manifest. Beyond that they are published as pages.
The root lists the pages' locations (blob id, quilt patch id) and digests.
The pages new in one manifest are stored together as one quilt, so publishing
a manifest costs at most two store calls whatever the namespace size, and
every blob stays far below Walrus' 10 MiB limit.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import nacl.encoding
import nacl.hash

from .errors import BlobMismatch, TamperedBlob

__all__ = [
    "CHANGED_INLINE_MAX",
    "INLINE_MAX",
    "PAGE_MAX",
    "PAGE_TARGET",
    "Entry",
    "chunk_entries",
    "entries_digest",
    "page_record",
    "parse_page",
    "parse_root",
    "root_record",
    "sealed_digest",
]

FORMAT: Final = 1
INLINE_MAX: Final = 500
CHANGED_INLINE_MAX: Final = 8000
"""Changed entries (of a namespace above INLINE_MAX) that still ride inline in the root.

About 1 MiB of root plaintext. On Walrus a blob costs about 4.5x its size plus
64 MB of fixed metadata, so a 1 MiB root costs a few percent more than a tiny
one, while storing the pages apart costs a second store call and a second
fixed overhead. A remember_many batch of a few thousand facts is therefore
followed by a one-call manifest; beyond this the changed entries become pages."""
PAGE_TARGET: Final = 1000
PAGE_MAX: Final = 4000
_INT64: Final = 2**63  # numbers go into SQLite INTEGER columns


def _int64(value: Any, what: str) -> int:
    """A non-negative integer that fits SQLite's INTEGER (ValueError otherwise)."""
    number = int(value)
    if not 0 <= number < _INT64:
        raise ValueError(f"{what} {number} is out of range")
    return number


@dataclass(frozen=True)
class Entry:
    """Where one memory's current version lives."""

    memory_id: str
    version: int
    blob_id: str
    patch_id: str | None
    end_epoch: int | None

    def to_json(self) -> dict[str, Any]:
        return {
            "i": self.memory_id,
            "v": self.version,
            "b": self.blob_id,
            "p": self.patch_id,
            "e": self.end_epoch,
        }

    @classmethod
    def from_json(cls, data: Any) -> Entry:
        if not isinstance(data, dict):
            raise TamperedBlob("manifest entry is not an object")
        try:
            memory_id, version, blob_id = data["i"], data["v"], data["b"]
            patch_id, end_epoch = data.get("p"), data.get("e")
        except KeyError as exc:
            raise TamperedBlob(f"manifest entry lacks {exc}") from exc
        if not (
            isinstance(memory_id, str)
            and isinstance(version, int)
            and isinstance(blob_id, str)
            and (patch_id is None or isinstance(patch_id, str))
            and (end_epoch is None or isinstance(end_epoch, int))
        ):
            raise TamperedBlob("manifest entry has fields of the wrong type")
        if not 0 <= version < _INT64 or not (end_epoch is None or 0 <= end_epoch < _INT64):
            raise TamperedBlob("manifest entry has a number out of range")
        return cls(memory_id, version, blob_id, patch_id, end_epoch)


def sealed_digest(sealed: bytes) -> str:
    """BLAKE2b-256 of sealed bytes (hex): what head references and manifest entries bind."""
    return nacl.hash.blake2b(sealed, digest_size=32, encoder=nacl.encoding.HexEncoder).decode()


def entries_digest(entries: Sequence[Entry]) -> str:
    body = json.dumps([e.to_json() for e in entries], sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(body.encode(), digest_size=32).hexdigest()


def _is_boundary(memory_id: str) -> bool:
    h = hashlib.blake2b(memory_id.encode(), digest_size=8, person=b"walrusmem.cdc").digest()
    return int.from_bytes(h, "little") % PAGE_TARGET == 0


def chunk_entries(entries: Iterable[Entry]) -> list[list[Entry]]:
    """Split entries (in a stable order) into pages at content-defined boundaries."""
    pages: list[list[Entry]] = []
    current: list[Entry] = []
    for entry in entries:
        current.append(entry)
        if _is_boundary(entry.memory_id) or len(current) >= PAGE_MAX:
            pages.append(current)
            current = []
    if current:
        pages.append(current)
    return pages


def page_record(entries: Sequence[Entry]) -> tuple[dict[str, Any], str]:
    """The sealed-record dict of a page and its digest (also its id)."""
    digest = entries_digest(entries)
    record = {
        "id": f"page-{digest}",
        "kind": "manifest-page",
        "format": FORMAT,
        "entries": [e.to_json() for e in entries],
    }
    return record, digest


def root_record(
    *,
    manifest_id: str,
    seq: int,
    created_at: float,
    prev: str | None,
    model_id: str | None,
    dim: int | None,
    count: int,
    entries: Sequence[Entry] | None,
    pages: Sequence[tuple[str, str | None, str, int]],
) -> dict[str, Any]:
    """The root record: inline ``entries`` plus ``pages`` of (blob id, patch id, digest, count).

    New pages of one manifest are stored together as one quilt, so a page is
    usually a quilt patch (``patch id``), else a blob of its own.
    """
    return {
        "id": manifest_id,
        "kind": "manifest",
        "format": FORMAT,
        "seq": seq,
        "created_at": created_at,
        "prev": prev,
        "model_id": model_id,
        "dim": dim,
        "count": count,
        "entries": None if entries is None else [e.to_json() for e in entries],
        "pages": [{"b": b, "p": p, "d": d, "n": n} for b, p, d, n in pages],
    }


@dataclass(frozen=True)
class Root:
    seq: int
    created_at: float
    prev: str | None
    count: int
    entries: list[Entry] | None
    pages: list[tuple[str, str | None, str, int]]


def parse_root(record: dict[str, Any]) -> Root:
    """Validate an opened root manifest record."""
    if record.get("format") != FORMAT:
        raise TamperedBlob(f"unsupported manifest format {record.get('format')!r}")
    try:
        raw_entries = record.get("entries")
        entries = None if raw_entries is None else [Entry.from_json(e) for e in raw_entries]
        pages = [
            (str(p["b"]), None if p.get("p") is None else str(p["p"]), str(p["d"]),
             _int64(p["n"], "page size"))
            for p in record.get("pages") or []
        ]
        root = Root(
            seq=_int64(record["seq"], "seq"),
            created_at=float(record["created_at"]),
            prev=record.get("prev"),
            count=_int64(record["count"], "count"),
            entries=entries,
            pages=pages,
        )
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise TamperedBlob(f"manifest root is malformed: {exc}") from exc
    listed = len(entries or []) + sum(n for _, _, _, n in pages)
    if listed != root.count:
        raise TamperedBlob(f"manifest lists {listed} entries but says {root.count}")
    return root


def parse_page(record: dict[str, Any], digest: str) -> list[Entry]:
    """Validate an opened page against the digest the root gave for it."""
    raw = record.get("entries")
    if not isinstance(raw, list):
        raise TamperedBlob("manifest page has no entry list")
    entries = [Entry.from_json(e) for e in raw]
    if entries_digest(entries) != digest:
        raise BlobMismatch("manifest page does not match the digest in its root")
    return entries

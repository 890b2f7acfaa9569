"""Sealed manifests: how a namespace is found again on Walrus from nothing but its key.

A manifest is a sealed record (kind ``manifest``, format 2) listing every
live memory of a namespace (memory id → version, blob id, quilt patch id, end
epoch, update time, digest of the sealed fact) and every forgotten one (a
tombstone: id and version). Everything else restore needs (text, metadata,
...) is inside the fact blobs themselves, so an entry is ~200 bytes.
Embeddings are *not* included (see docs/architecture.md: restore re-embeds,
which keeps manifests small and lets a restore switch models).

Each manifest is a complete snapshot and a node of the namespace's history:
inside the sealed, signed root it names its parents (the head references it
descends from), a sequence number one above its highest parent's and the
writer that published it. namespace_log.py checks all of it on every read;
merge.py says how two snapshots combine (docs/sync.md).

Small namespaces (≤ :data:`INLINE_MAX` entries) keep the entries in the root.
Larger ones split them into sealed **pages** (kind ``manifest-page``, the entries
zlib-packed: about 70 bytes an entry, :func:`page_record`) chosen by
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
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..envelope import bucket_size
from ..errors import BlobMismatch, TamperedBlob

__all__ = [
    "CHANGED_INLINE_MAX",
    "INLINE_MAX",
    "PACKED_MAX",
    "PAGE_MAX",
    "PAGE_TARGET",
    "Entry",
    "Root",
    "chunk_entries",
    "entries_digest",
    "is_boundary",
    "page_record",
    "parse_page",
    "parse_root",
    "root_record",
    "sealed_digest",
]

FORMAT: Final = 2
INLINE_MAX: Final = 500
CHANGED_INLINE_MAX: Final = 8000
"""Changed entries (of a namespace above INLINE_MAX) that still ride inline in the root.

About 1 MiB of root plaintext. On Walrus a blob costs about 4.5x its size plus
64 MB of fixed metadata, so a 1 MiB root costs a few percent more than a tiny
one, while storing the pages apart costs a second store call and a second
fixed overhead. A remember_many batch of a few thousand facts is therefore
followed by a one-call manifest; beyond this the changed entries become pages."""
PACKED_MAX: Final = 64 * 1024 * 1024
"""The most a page's ``packed`` entries may inflate to (a page holds at most PAGE_MAX
entries of a few hundred bytes; this only bounds what a bad page can make us allocate)."""
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
    """Where one memory's current version lives, or its tombstone.

    ``updated_at`` and ``digest`` (BLAKE2b-256 of the fact's sealed bytes) let a
    merge pick the winner of two versions from manifests alone and let a reader
    check that a fact blob is exactly the version listed. A tombstone
    (``deleted``) has no location: the memory was forgotten at ``version``.
    """

    memory_id: str
    version: int
    blob_id: str | None
    patch_id: str | None
    end_epoch: int | None
    updated_at: float | None = None
    digest: str | None = None
    deleted: bool = False

    @classmethod
    def tombstone(cls, memory_id: str, version: int) -> Entry:
        return cls(memory_id, version, None, None, None, deleted=True)

    def to_json(self) -> dict[str, Any]:
        if self.deleted:
            return {"i": self.memory_id, "v": self.version, "x": 1}
        return {
            "i": self.memory_id,
            "v": self.version,
            "b": self.blob_id,
            "p": self.patch_id,
            "e": self.end_epoch,
            "t": self.updated_at,
            "h": self.digest,
        }

    @classmethod
    def from_json(cls, data: Any) -> Entry:
        if not isinstance(data, dict):
            raise TamperedBlob("manifest entry is not an object")
        memory_id, version = data.get("i"), data.get("v")
        if not isinstance(memory_id, str) or isinstance(version, bool) \
                or not isinstance(version, int) or not 0 <= version < _INT64:
            raise TamperedBlob("manifest entry has no valid id / version")
        if data.get("x") == 1:
            return cls.tombstone(memory_id, version)
        blob_id, patch_id, end_epoch = data.get("b"), data.get("p"), data.get("e")
        updated_at, digest = data.get("t"), data.get("h")
        if not (
            isinstance(blob_id, str)
            and (patch_id is None or isinstance(patch_id, str))
            and (end_epoch is None or (isinstance(end_epoch, int)
                                       and not isinstance(end_epoch, bool)))
            and (updated_at is None or (isinstance(updated_at, int | float)
                                        and not isinstance(updated_at, bool)))
            and (digest is None or (isinstance(digest, str) and len(digest) == 64))
        ):
            raise TamperedBlob("manifest entry has fields of the wrong type")
        if not (end_epoch is None or 0 <= end_epoch < _INT64):
            raise TamperedBlob("manifest entry has a number out of range")
        return cls(memory_id, version, blob_id, patch_id, end_epoch,
                   None if updated_at is None else float(updated_at), digest)

    def rank(self) -> tuple[int, float, str]:
        """The conflict rule's order: higher version, then later update, then larger digest."""
        return (self.version, self.updated_at or 0.0, self.digest or "")


def sealed_digest(sealed: bytes) -> str:
    """BLAKE2b-256 of sealed bytes (hex): what head references and manifest entries bind."""
    return hashlib.blake2b(sealed, digest_size=32).hexdigest()  # libsodium's, unkeyed


def entries_digest(entries: Sequence[Entry]) -> str:
    body = json.dumps([e.to_json() for e in entries], sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(body.encode(), digest_size=32).hexdigest()


def is_boundary(memory_id: str) -> bool:
    """A page ends after this entry (content-defined: the id's hash hits the target)."""
    h = hashlib.blake2b(memory_id.encode(), digest_size=8, person=b"walrusmem.cdc").digest()
    return int.from_bytes(h, "little") % PAGE_TARGET == 0


_is_boundary = is_boundary  # the name tests/test_memory_sync.py uses


def chunk_entries(entries: Iterable[Entry]) -> list[list[Entry]]:
    """Split entries (in a stable order) into pages at content-defined boundaries."""
    pages: list[list[Entry]] = []
    current: list[Entry] = []
    for entry in entries:
        current.append(entry)
        if is_boundary(entry.memory_id) or len(current) >= PAGE_MAX:
            pages.append(current)
            current = []
    if current:
        pages.append(current)
    return pages


def page_record(entries: Sequence[Entry]) -> tuple[dict[str, Any], str]:
    """The sealed-record dict of a page and its digest (also its id).

    The entries travel zlib-packed (``packed``, raw bytes: the envelope attaches them
    after its JSON), zero-padded to a size bucket so the length shows no more than the
    envelope's own padding did: a page of 1,000 entries is about 70 KB packed against
    250 KB of JSON (ids, hashes and a blob id repeated per entry). The digest is over the
    entries' JSON as before, so roots and reuse are unchanged."""
    digest = entries_digest(entries)
    body = json.dumps([e.to_json() for e in entries], separators=(",", ":")).encode()
    packed = zlib.compress(body, 6)
    record = {
        "id": f"page-{digest}",
        "kind": "manifest-page",
        "format": FORMAT,
        "packed": packed + bytes(bucket_size(len(packed)) - len(packed)),
    }
    return record, digest


def root_record(
    *,
    manifest_id: str,
    seq: int,
    writer: str,
    parents: Sequence[str],
    origins: Sequence[str],
    created_at: float,
    model_id: str | None,
    dim: int | None,
    count: int,
    entries: Sequence[Entry] | None,
    pages: Sequence[tuple[str, str | None, str, int]],
    clock: dict[str, Any] | None = None,
    ends_by: int | None = None,
) -> dict[str, Any]:
    """The root record: inline ``entries`` plus ``pages`` of (blob id, patch id, digest, count).

    ``ends_by``: the highest end epoch the root's own blob can get when stored now
    (the writer's bound; None when its clock cannot bound the epoch). A reader keeps
    it with the head: a 404 for the manifest proves nothing before that epoch passed.

    ``parents`` are the head references this manifest descends from (all
    inside the sealed, signed record), ``seq`` is one more than the highest
    parent's, ``writer`` the publishing data dir's id and ``origins`` the blob
    ids of the first manifests of the histories merged into it. New pages of
    one manifest are stored together as one quilt, so a page is usually a
    quilt patch (``patch id``), else a blob of its own.
    """
    return {
        "id": manifest_id,
        "kind": "manifest",
        "format": FORMAT,
        "seq": seq,
        "writer": writer,
        "parents": list(parents),
        "origins": sorted(set(origins)),
        "created_at": created_at,
        "model_id": model_id,
        "dim": dim,
        "count": count,
        "entries": None if entries is None else [e.to_json() for e in entries],
        "pages": [{"b": b, "p": p, "d": d, "n": n} for b, p, d, n in pages],
        # Optional: lets a fresh machine tell expired blobs from missing ones.
        **({"clock": clock} if clock is not None else {}),
        **({"ends_by": ends_by} if ends_by is not None else {}),
    }


@dataclass(frozen=True)
class Root:
    seq: int
    writer: str
    parents: list[str]
    origins: list[str]
    created_at: float
    count: int
    entries: list[Entry] | None
    pages: list[tuple[str, str | None, str, int]]
    clock: dict[str, Any] | None = None  # the writer's newest epoch sighting (expiry.py)
    ends_by: int | None = None  # the highest its blob's end epoch can be (None: unknown)


def parse_root(record: dict[str, Any]) -> Root:
    """Validate an opened root manifest record (structure only; the chain is checked
    by the namespace log against the head reference)."""
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
        parents, origins, writer = record["parents"], record["origins"], record["writer"]
        if not (isinstance(parents, list) and all(isinstance(p, str) for p in parents)
                and isinstance(origins, list) and all(isinstance(o, str) for o in origins)
                and isinstance(writer, str)):
            raise TypeError("parents / origins / writer have the wrong type")
        root = Root(
            seq=_int64(record["seq"], "seq"),
            writer=writer,
            parents=list(parents),
            origins=list(origins),
            created_at=float(record["created_at"]),
            count=_int64(record["count"], "count"),
            entries=entries,
            pages=pages,
            clock=record["clock"] if isinstance(record.get("clock"), dict) else None,
            ends_by=None if record.get("ends_by") is None
            else _int64(record["ends_by"], "ends_by"),
        )
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise TamperedBlob(f"manifest root is malformed: {exc}") from exc
    listed = len(entries or []) + sum(n for _, _, _, n in pages)
    if listed != root.count:
        raise TamperedBlob(f"manifest lists {listed} entries but says {root.count}")
    return root


def parse_page(record: dict[str, Any], digest: str) -> list[Entry]:
    """Validate an opened page against the digest the root gave for it: its ``packed``
    entries (page_record), or an ``entries`` list (pages written before)."""
    raw = record.get("entries")
    if raw is None and "packed" in record:
        raw = _unpack(record["packed"])
    if not isinstance(raw, list):
        raise TamperedBlob("manifest page has no entry list")
    entries = [Entry.from_json(e) for e in raw]
    if entries_digest(entries) != digest:
        raise BlobMismatch("manifest page does not match the digest in its root")
    return entries


def _unpack(packed: Any) -> Any:
    """The entry list of a ``packed`` page: zlib, then zeros only; bounded inflation."""
    if not isinstance(packed, bytes):
        raise TamperedBlob("manifest page's packed entries are not bytes")
    inflate = zlib.decompressobj()
    try:
        body = inflate.decompress(packed, PACKED_MAX)
    except zlib.error:
        raise TamperedBlob("manifest page's packed entries do not inflate") from None
    if inflate.unconsumed_tail or not inflate.eof:
        raise TamperedBlob("manifest page's packed entries are cut or too large")
    if any(inflate.unused_data):
        raise TamperedBlob("manifest page's packed entries have bytes after them")
    try:
        return json.loads(body.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise TamperedBlob("manifest page's packed entries are not JSON") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")

"""Reading format-1 manifests: what every ``sync`` published before format 2.

A format-1 manifest (root kind ``manifest``, ``"format": 1``) is a sealed,
signed snapshot of a namespace's live memories, named by nothing but its
blob id: no parents, no writer, no head reference binding its digest and seq,
no tombstones, no fact digests. The envelope still proves it was sealed with
this namespace's key, so a manifest of another namespace or key is refused,
but nothing proves it is the *newest* one: an aggregator (or an old note)
can hand back any earlier manifest of the namespace and no reader can tell.
That is why the namespace log reads one only when the caller says so
(``allow_legacy=True``, ``walrus-mem restore --legacy``) and treats what it
restores as a root of no history (docs/sync.md, "Manifests from before
format 2").

This module only parses; it never writes format 1. Entries become
:class:`~walrus_mem._log.manifest.Entry` without ``updated_at`` / ``digest``, which
the merge rule ranks below any format-2 entry of the same version.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..errors import BlobMismatch, TamperedBlob
from .manifest import Entry

__all__ = ["FORMAT_1", "LegacyRoot", "is_format_1", "parse_page_v1", "parse_root_v1"]

FORMAT_1: Final = 1
_INT64: Final = 2**63


@dataclass(frozen=True)
class LegacyRoot:
    """A verified format-1 root: its inline entries and page locations."""

    blob_id: str
    seq: int
    created_at: float
    count: int
    entries: list[Entry] | None
    pages: list[tuple[str, str | None, str, int]]


def is_format_1(record: dict[str, Any]) -> bool:
    return record.get("format") == FORMAT_1 and not isinstance(record.get("format"), bool)


def _number(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < _INT64:
        raise TamperedBlob(f"format-1 manifest has a bad {what}")
    return value


def _entry(data: Any) -> Entry:
    """One format-1 entry ``{i, v, b, p, e}`` (a live memory; format 1 had no tombstones)."""
    if not isinstance(data, dict):
        raise TamperedBlob("format-1 manifest entry is not an object")
    memory_id, blob_id = data.get("i"), data.get("b")
    patch_id, end_epoch = data.get("p"), data.get("e")
    if not (isinstance(memory_id, str) and memory_id and isinstance(blob_id, str) and blob_id
            and (patch_id is None or isinstance(patch_id, str))):
        raise TamperedBlob("format-1 manifest entry has fields of the wrong type")
    version = _number(data.get("v"), "version")
    end = None if end_epoch is None else _number(end_epoch, "end epoch")
    return Entry(memory_id, version, blob_id, patch_id, end)


def _v1_json(entry: Entry) -> dict[str, Any]:
    return {"i": entry.memory_id, "v": entry.version, "b": entry.blob_id,
            "p": entry.patch_id, "e": entry.end_epoch}


def entries_digest_v1(entries: Sequence[Entry]) -> str:
    """The page digest format 1 used (over the five-field entries)."""
    body = json.dumps([_v1_json(e) for e in entries], sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(body.encode(), digest_size=32).hexdigest()


def parse_root_v1(record: dict[str, Any], blob_id: str) -> LegacyRoot:
    """Validate an opened format-1 root record."""
    if not is_format_1(record):
        raise TamperedBlob(f"not a format-1 manifest (format {record.get('format')!r})")
    raw_entries, raw_pages = record.get("entries"), record.get("pages") or []
    if not (raw_entries is None or isinstance(raw_entries, list)) \
            or not isinstance(raw_pages, list):
        raise TamperedBlob("format-1 manifest has no entry / page list")
    entries = None if raw_entries is None else [_entry(e) for e in raw_entries]
    pages: list[tuple[str, str | None, str, int]] = []
    for page in raw_pages:
        if not isinstance(page, dict):
            raise TamperedBlob("format-1 manifest page reference is not an object")
        b, p, d = page.get("b"), page.get("p"), page.get("d")
        if not (isinstance(b, str) and b and (p is None or isinstance(p, str))
                and isinstance(d, str) and len(d) == 64):
            raise TamperedBlob("format-1 manifest page reference is malformed")
        pages.append((b, p, d, _number(page.get("n"), "page size")))
    created_at = record.get("created_at")
    if isinstance(created_at, bool) or not isinstance(created_at, int | float):
        raise TamperedBlob("format-1 manifest has a bad created_at")
    root = LegacyRoot(blob_id=blob_id, seq=_number(record.get("seq"), "seq"),
                      created_at=float(created_at), count=_number(record.get("count"), "count"),
                      entries=entries, pages=pages)
    listed = len(entries or []) + sum(n for _, _, _, n in pages)
    if listed != root.count:
        raise TamperedBlob(f"format-1 manifest lists {listed} entries but says {root.count}")
    return root


def parse_page_v1(record: dict[str, Any], digest: str, count: int) -> list[Entry]:
    """Validate an opened format-1 page against the digest and size its root gave."""
    raw = record.get("entries")
    if not is_format_1(record) or not isinstance(raw, list):
        raise TamperedBlob("not a format-1 manifest page")
    entries = [_entry(e) for e in raw]
    if entries_digest_v1(entries) != digest or len(entries) != count:
        raise BlobMismatch("format-1 manifest page does not match the digest in its root")
    return entries

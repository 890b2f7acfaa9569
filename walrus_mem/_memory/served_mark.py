"""Each namespace's served mark: the head last found served, and the blobs that had to be
live then (network_reset.py decides when to set it and how to read it).

The mark lives in the catalog (meta ``served_mark:<ns>``), and a copy of it, with the end
epochs of its blobs, in heads.sqlite3: a catalog lost to garbage takes its mark with it,
and its repair then has only the heads the data dir remembers. After a change of network
those answer 404, just as they do behind an aggregator that lags, and a head alone
cannot tell the two apart (N14 of .ci/stateful_findings.md); the copy's blobs can
(repair_network.py).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Final

from .._log.heads import HeadRef
from ..errors import WalrusMemError

if TYPE_CHECKING:
    from .parts import Parts

__all__ = ["MARK_KEY", "clear_mark", "kept_witnesses", "read_mark", "write_mark"]

MARK_KEY: Final = "served_mark"
"""Catalog meta ``served_mark:<ns>``: the head last found served and the blobs that had
to be live then (network_reset.py ``check_served``)."""


def _key(ns: str) -> str:
    return f"{MARK_KEY}:{ns}"


def read_mark(parts: Parts, ns: str) -> tuple[HeadRef, list[str]] | None:
    """The catalog's mark of ``ns``: the head, and the blobs that had to be live then."""
    raw = parts.catalog.get_meta(_key(ns))
    try:
        record = json.loads(raw) if raw else None
        if not isinstance(record, dict):
            return None
        return HeadRef.parse(str(record["head"])), [str(b) for b in record["witnesses"]]
    except (ValueError, KeyError, TypeError, WalrusMemError):
        return None


def write_mark(parts: Parts, ns: str, ref: HeadRef, witnesses: list[str]) -> None:
    """Mark ``ref`` with ``witnesses``, in the catalog and in heads.sqlite3 (with the end
    epoch each blob is known to the catalog to live until)."""
    parts.catalog.set_meta(_key(ns), json.dumps({"head": str(ref), "witnesses": witnesses}))
    ends = dict.fromkeys(witnesses, None)
    if witnesses:  # by blob id (indexes), never a scan of the memories
        for blob, end in parts.catalog.query(
                "SELECT value, max(coalesce((SELECT max(end_epoch) FROM memories m WHERE "
                "m.blob_id = j.value), 0), coalesce((SELECT max(end_epoch) FROM manifests f "
                "WHERE f.blob_id = j.value), 0)) FROM json_each(?) j", (json.dumps(witnesses),)):
            ends[str(blob)] = int(end) or None
    copy = {"head": str(ref), "witnesses": [[b, e] for b, e in ends.items()]}
    if parts.log.seen.kept_mark(ns) != copy:  # each sync marks: no write when unchanged
        parts.log.seen.keep_mark(ns, copy)


def clear_mark(parts: Parts, ns: str) -> None:
    """No mark for ``ns`` (``compact`` may have deleted the marked head or a witness from
    the embedded relayer): the next sync marks the newest head."""
    parts.catalog.set_meta(_key(ns), "")
    parts.log.seen.keep_mark(ns, None)


def kept_witnesses(parts: Parts, ns: str) -> list[str]:
    """The blobs of the copy of ``ns``'s mark in heads.sqlite3 that must still be live by
    the clock (all of them when the clock knows no epoch: a catalog rebuilt from
    nothing), unless a forget deleted them since."""
    record = parts.log.seen.kept_mark(ns)
    now = parts.epochs.clock.current() or 0
    out: list[str] = []
    try:
        for blob, end in (record or {}).get("witnesses", []):
            if end is None or int(end) > now:
                out.append(str(blob))
    except (ValueError, TypeError):
        return []
    return out

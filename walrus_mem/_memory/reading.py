"""Memory's local reads: recall (ANN + bm25, fused, filtered), list, history, and the
remote check of one memory (get(verify=True)). No network except that check."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from .._catalog.rows import expired, loads_metadata, record_from_row, view_of_row
from .._recall.filters import compile_filters
from .._recall.index import NamespaceIndex
from .._recall.ranking import DEFAULT_MIN_SCORE, DEFAULT_PARAMS, FusionParams
from .._recall.recall import hybrid_recall
from .._walrus.blobio import read_checked
from .._walrus.retry import call_deadline
from ..envelope import open_envelope
from ..errors import InvalidInput, MemoryNotFound
from ..models import HistoryEntry, MemoryRecord, RecallResult, from_timestamp
from .inputs import validate_memory_id

if TYPE_CHECKING:
    from .parts import Parts

__all__ = ["MAX_K", "history", "newest", "recall", "verify_remote"]

MAX_K: Final = 1000


def _recallable(info: sqlite3.Row | None) -> bool:
    """Whether a namespace row says the namespace holds memories to recall."""
    return info is not None and info["model_id"] is not None


def recall(parts: Parts, ns: str, query: str, *, k: int,
           filters: Mapping[str, Any] | None, min_score: float | None,
           include_expired: bool, params: FusionParams | None) -> RecallResult:
    """Memory.recall of ``ns`` (validated), as its doc says."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise InvalidInput(f"k must be an integer between 1 and {MAX_K}")
    if not isinstance(query, str) or not query.strip():
        raise InvalidInput("query must be a non-empty string")
    predicate = compile_filters(filters)
    if min_score is None:
        cutoff = parts.settings.min_score or DEFAULT_MIN_SCORE
    elif isinstance(min_score, bool) or not isinstance(min_score, int | float):
        raise InvalidInput("min_score must be a number")
    else:
        cutoff = float(min_score)
    parts.keys.authorize(ns)
    # Nothing to embed the query for in a namespace with no memories: the namespace
    # row as last read answers that (a read that found it needs no re-check here:
    # the snapshot below checks it again), an unknown one is read afresh.
    if not _recallable(parts.catalog.cached_namespace(ns)) \
            and not _recallable(parts.catalog.namespace(ns)):
        return RecallResult()
    vector = parts.embedding.embed_query(query.strip())
    def run(idx: NamespaceIndex) -> RecallResult:
        return hybrid_recall(parts.catalog, idx, query, vector, k=k, predicate=predicate,
                             cutoff=cutoff, include_expired=include_expired,
                             params=params or DEFAULT_PARAMS)

    with parts.lock:
        emb = parts.embedding.embedder
        # One read snapshot: one view of the rows, postings and counts, and one check
        # that nothing changed. An index that must catch up first does so outside it
        # (catching up may write the catalog), and the recall takes a new snapshot.
        with parts.catalog.snapshot():
            info = parts.catalog.namespace(ns)
            if not _recallable(info):
                return RecallResult()
            parts.embedding.check_model(ns, info)
            idx = parts.indexes.current(ns, emb.model_id, emb.dim)
            if idx is not None:
                return run(idx)
        idx = parts.indexes.get(ns, emb.model_id, emb.dim)
        with parts.catalog.snapshot():
            return run(idx)


def newest(parts: Parts, ns: str, *, filters: Mapping[str, Any] | None, limit: int,
           offset: int, include_expired: bool) -> list[MemoryRecord]:
    """Memory.list of ``ns`` (validated): newest first, filtered, paged."""
    for name, value, low in (("limit", limit, 1), ("offset", offset, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise InvalidInput(f"{name} must be an integer >= {low}")
    predicate = compile_filters(filters)
    parts.keys.authorize(ns)
    now = time.time()
    out: list[MemoryRecord] = []
    skipped = 0
    cursor: tuple[float, int] | None = None
    while len(out) < limit:
        rows = parts.catalog.newest_first(ns, cursor)
        if not rows:
            break
        for row in rows:
            if not include_expired and expired(row, now):
                continue
            if predicate is not None and not predicate(view_of_row(row)):
                continue
            if skipped < offset:
                skipped += 1
                continue
            out.append(record_from_row(row))
            if len(out) >= limit:
                break
        cursor = (float(rows[-1]["created_at"]), int(rows[-1]["key"]))
    return out


def history(parts: Parts, ns: str, memory_id: str) -> list[HistoryEntry]:
    """Memory.history of a memory of ``ns`` (validated)."""
    mid = validate_memory_id(memory_id)
    parts.keys.authorize(ns)
    rows = parts.catalog.history_rows(ns, mid)
    if not rows:
        raise MemoryNotFound(f"no memory {mid} in namespace {ns!r}")
    entries = []
    for r in rows:
        at = from_timestamp(r["at"])
        assert at is not None
        entries.append(HistoryEntry(
            memory_id=mid, namespace=ns, version=r["version"], event=r["event"],
            text=r["text"],
            metadata=None if r["metadata"] is None else loads_metadata(r["metadata"]),
            at=at, blob_id=r["blob_id"], quilt_patch_id=r["quilt_patch_id"],
            end_epoch=r["end_epoch"],
        ))
    return entries


def verify_remote(parts: Parts, ns: str, record: MemoryRecord) -> None:
    """Fetch a memory's blob and check it is what the catalog holds (get(verify=True))."""
    if record.blob_id is None:
        raise InvalidInput(
            f"memory {record.id} is queued (not yet on Walrus); run sync() before verifying"
        )
    keys = parts.keys.for_namespace(ns)

    def check(data: bytes) -> None:
        opened = open_envelope(keys, data, expected_id=record.id, expected_kind="fact")
        if (
            opened.get("version") != record.version
            or opened.get("text") != record.text
            or opened.get("metadata") != record.metadata
            or opened.get("category") != record.category
        ):
            raise InvalidInput("blob content differs from the local catalog")

    sealed = parts.catalog.sealed_of(ns, record.id)  # its size bounds the read
    with call_deadline(parts.settings.read_deadline):  # the plain and the verified read
        read_checked(parts.publisher.backend().client, check, blob_id=record.blob_id,
                     patch_id=record.quilt_patch_id,
                     max_size=len(sealed[0]) if sealed is not None else None)

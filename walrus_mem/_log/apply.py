"""Applying a merge: the fetched winners made current, the losers kept as history.

The merge rule (merge.py) decides from the manifests' entries; this module
applies its plan once the winning versions are fetched and opened, deciding
what only the opened records can tell: whether two versions hold the same fact
(the same edit made on two machines is no conflict), whether a lower version is
an ancestor by lineage (lineage.py), and whether a memory updated here while
the pull fetched still wins. A version that loses to a concurrent one goes to
history as ``CONFLICT``; two memories of one text stay twins
(``Catalog.dedupe_slot``). Called by :class:`~walrus_mem._log.namespace_log.NamespaceLog`.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from .._catalog import merged_pages
from .._catalog.catalog import Catalog, dedupe_key, vector_to_blob
from .._recall.carried import carried_vector, identity, mismatch
from ..envelope import open_envelope
from ..errors import WalrusMemError
from ..keys import NamespaceKeys
from . import manifest as mf
from .lineage import descends, is_ancestor
from .merge import LocalVersion, MergePlan

if TYPE_CHECKING:
    from .context import LogContext

__all__ = ["Tally", "apply_fetched", "concurrent_check", "local_state", "record_rivals"]

log = logging.getLogger(__name__)

DEFAULT_IMPORTANCE: Final = 0.5


@dataclass
class Tally:
    """What a merge did, counted for its PullReport."""

    added: int = 0
    updated: int = 0
    forgotten: int = 0
    conflicts: int = 0
    deduplicated: int = 0
    forgotten_blobs: dict[str, bool | None] = field(default_factory=dict)
    missing: list[tuple[str, str]] = field(default_factory=list)
    expired: list[tuple[str, str]] = field(default_factory=list)
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    reembedded: int = 0
    reembed_reasons: Counter[str] = field(default_factory=Counter)
    # the plan's memory ids (add, kept, conflicts), made once per merge: made per chunk,
    # they cost O(namespace) a chunk (14.5 of 60 CPU seconds restoring 100k memories)
    plan_ids: tuple[frozenset[str], frozenset[str], frozenset[str]] | None = None

    def ids_of(self, plan: MergePlan) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
        if self.plan_ids is None:
            self.plan_ids = (frozenset(e.memory_id for e in plan.add),
                             frozenset(e.memory_id for e in plan.kept),
                             frozenset(e.memory_id for e in plan.conflicts))
        return self.plan_ids


def _local_record(catalog: Catalog, ns: str, keys: NamespaceKeys,
                  mid: str) -> dict[str, Any] | None:
    """The local current version's fact record, if it opens."""
    data, _ = _local_sealed(catalog, ns, mid)
    if data is None:
        return None
    try:
        return open_envelope(keys, data, expected_id=mid, expected_kind="fact")
    except (WalrusMemError, ValueError):
        return None


def _local_sealed(catalog: Catalog, ns: str, mid: str) -> tuple[bytes | None, str | None]:
    # the embedded relayer's copy when the row keeps none (_catalog/held.py)
    return catalog.sealed_and_digest(ns, mid)


def concurrent_check(catalog: Catalog, ns: str,
                     keys: NamespaceKeys) -> Callable[[str, mf.Entry], bool]:
    """For plan_merge: a remote version lower than ours is concurrent unless our
    version's lineage holds its digest (lineage.py)."""
    def concurrent(mid: str, entry: mf.Entry) -> bool:
        data, _ = _local_sealed(catalog, ns, mid)
        if data is None or entry.digest is None:
            return False
        try:
            ours = open_envelope(keys, data, expected_id=mid, expected_kind="fact")
        except (WalrusMemError, ValueError):
            return False
        if is_ancestor(entry.digest, ours):
            return False
        # beyond the lineage window: ours descends from it if it once was ours
        return not catalog.had_version(ns, mid, entry.version, entry.blob_id,
                                       entry.patch_id)
    return concurrent


def local_state(catalog: Catalog, ns: str, ids: Collection[str] | None = None,
                ) -> tuple[dict[str, LocalVersion], dict[str, int]]:
    """The live versions and tombstones of ``ns`` (``ids``: of those memories only)."""
    if ids is None:
        versions, tombstones = catalog.versions_now(ns), catalog.tombstones(ns)
    else:
        versions = merged_pages.versions_of(catalog, ns, ids)
        tombstones = merged_pages.tombstones_of(catalog, ns, ids)
    live = {mid: LocalVersion(version, updated_at, digest or "")
            for mid, (version, updated_at, digest) in versions.items()}
    return live, tombstones


def apply_fetched(nslog: LogContext, ns: str, keys: NamespaceKeys, plan: MergePlan,
                  fetched: list[tuple[mf.Entry, bytes, dict[str, Any]]], tally: Tally,
                  planned: Mapping[str, LocalVersion]) -> None:
    """Make the fetched winners current. ``planned``: the local versions the plan
    was made against; a memory changed since (an update made while this pull
    fetched) is decided again, here, under the catalog transaction."""
    if not fetched:
        return
    adds, kept, conflicts = tally.ids_of(plan)
    incoming = [(e, d, r) for e, d, r in fetched if e.memory_id not in kept]
    texts = [str(r.get("text", "")) for _, _, r in incoming]
    vectors, carried = _vectors(nslog, [r for _, _, r in incoming], texts, tally)
    emb = nslog.host.embedder
    now = time.time()
    # What the index needs of each row inserted here, so its catch-up need not read the
    # rows back (whose vectors are in their sealed copies: each read opens one). Rows
    # replaced (an update keeps its created_at) are read back.
    written: dict[int, tuple[bytes, tuple[float, float, float | None]]] = {}
    with nslog.lock, nslog.catalog.write():
        version = nslog.catalog.data_version()  # no other connection commits before ours
        nslog.catalog.adopt_model(ns, emb.model_id, emb.dim)
        forgotten = _tombstoned(nslog.catalog, ns,
                                [e.memory_id for e, _, _ in incoming if e.memory_id in adds])
        for entry, _, rec in fetched:
            if entry.memory_id in kept:  # ours wins at the same version: theirs -> history
                ours = nslog.catalog.memory(ns, entry.memory_id)
                if ours is not None and _same_content(ours, rec):
                    continue  # the same edit made on both machines is no conflict
                ours_rec = _local_record(nslog.catalog, ns, keys, entry.memory_id)
                if (ours_rec is not None and entry.version < int(ours_rec.get("version", 0))
                        and descends(entry.digest, rec, ours_rec)):
                    continue  # an ancestor resealed elsewhere (key rotation)
                nslog.catalog.add_history(
                    ns, entry.memory_id, entry.version, "CONFLICT", now,
                    text=str(rec.get("text", "")), metadata=_metadata_json(rec),
                    blob_id=entry.blob_id, patch_id=entry.patch_id,
                    end_epoch=entry.end_epoch)
                tally.conflicts += 1
        for (entry, data, rec), text, vector, from_sealed in zip(incoming, texts, vectors,
                                                                 carried, strict=True):
            mid = entry.memory_id
            # Another memory with this text (written on another machine) stays: a
            # merge never forgets one memory for another (docs/sync.md, twins).
            dedupe_hash = nslog.catalog.dedupe_slot(ns, dedupe_key(keys, text), mid)
            if ":" in dedupe_hash:
                tally.deduplicated += 1
            vector_bytes = vector
            row: dict[str, Any] = {
                "id": mid, "text": text, "metadata": _metadata_json(rec),
                "category": rec.get("category"),
                "importance": float(rec.get("importance") or DEFAULT_IMPORTANCE),
                "created_at": float(rec.get("created_at") or now),
                "updated_at": float(rec.get("updated_at") or now),
                "expires_at": rec.get("expires_at"), "version": entry.version,
                "dedupe_hash": dedupe_hash, "status": "published",
                "blob_id": entry.blob_id, "quilt_patch_id": entry.patch_id,
                "end_epoch": entry.end_epoch, "sealed": data,
                "vector": vector_bytes, "digest": entry.digest or mf.sealed_digest(data),
            }
            if mid in adds:
                if mid in forgotten:
                    continue  # forgotten meanwhile (a tombstone only ever wins)
                key = nslog.catalog.insert_memory(ns, row, event="RESTORE", at=now,
                                                  carried=from_sealed)
                if key is not None:
                    tally.added += 1
                    attrs = _attrs(row)
                    if attrs is not None:
                        written[key] = (vector_bytes, attrs)
                continue
            current = nslog.catalog.memory(ns, mid)
            if current is None:  # forgotten meanwhile
                continue
            _, now_digest = _local_sealed(nslog.catalog, ns, mid)
            was = planned.get(mid)
            conflict = mid in conflicts
            if was is not None and now_digest != was.digest:
                if _keep_changed(nslog.catalog, ns, keys, current, now_digest, entry, rec,
                                 tally, now):
                    continue
                # decided again below, against the new version: the same version is a
                # conflict, a higher one by lineage
                conflict = entry.version == int(current["version"])
            if not conflict and entry.version > int(current["version"]):
                _, our_digest = _local_sealed(nslog.catalog, ns, mid)
                if not descends(our_digest, _local_record(nslog.catalog, ns, keys, mid), rec):
                    # concurrent, ours loses
                    conflict = True
            if conflict and not _same_content(current, rec):
                # ours loses to a concurrent version: it goes to history (an identical
                # edit made on both machines is no conflict: the winner's blob is
                # adopted so the digests converge, and ours stays in history)
                nslog.catalog.add_history(
                    ns, mid, int(current["version"]), "CONFLICT", now,
                    text=str(current["text"]), metadata=str(current["metadata"]),
                    blob_id=current["blob_id"], patch_id=current["quilt_patch_id"],
                    end_epoch=current["end_epoch"])
                tally.conflicts += 1
            nslog.catalog.replace_version(ns, int(current["key"]), row,
                                          vector=vector_bytes, event="MERGE", at=now,
                                          carried=from_sealed)
            nslog.catalog.drop_queued(ns, mid)
            tally.updated += 1
    with nslog.lock:  # into the graph after the merge, in the background (index_builder.py)
        nslog.indexes.refresh(ns, defer=True, known=written, known_at=version)


def _tombstoned(catalog: Catalog, ns: str, ids: list[str]) -> set[str]:
    """Which of ``ids`` have a tombstone (``Catalog.is_tombstoned``), in one query: a
    chunk's adds asked one by one cost a query each, and SQLite answered each from the
    (namespace, event) index, i.e. by reading every tombstone of the namespace. The ``+``
    keeps it on the primary key (memory_id, version): one lookup per id."""
    if not ids:
        return set()
    return {str(r[0]) for r in catalog.query(
        "SELECT j.value FROM json_each(?) AS j WHERE EXISTS (SELECT 1 FROM versions AS v "
        "WHERE v.memory_id = j.value AND +v.namespace = ? AND +v.event = 'DELETE')",
        (json.dumps(ids), ns))}


def _attrs(row: Mapping[str, Any]) -> tuple[float, float, float | None] | None:
    """(created_at, importance, expires_at) of a row as the catalog stores them (REAL
    columns), or None when expires_at is not a number (then the index reads the row)."""
    expires = row["expires_at"]
    if expires is not None and (isinstance(expires, bool)
                                or not isinstance(expires, int | float)):
        return None
    return (float(row["created_at"]), float(row["importance"]),
            None if expires is None else float(expires))


def _vectors(nslog: LogContext, records: list[dict[str, Any]], texts: list[str],
             tally: Tally) -> tuple[list[bytes], list[bool]]:
    """The catalog vectors (float16 bytes) of fetched records: the one each carries
    sealed when this Memory's embedder made it (model id, weights digest, dim:
    _recall/carried.py), else the text embedded again here (counted, and said once
    per merge with the reason); and, per record, whether its vector is the one its
    sealed copy carries (the catalog need not open that copy again to know)."""
    emb = nslog.host.embedder
    ident = identity(emb)
    out = [carried_vector(r, ident) for r in records]
    carried = [v is not None for v in out]
    need = [i for i, v in enumerate(out) if v is None]
    if not need:
        return [v for v in out if v is not None], carried
    for i in need:
        tally.reembed_reasons[mismatch(records[i], ident)] += 1
    if not tally.reembedded:
        why = "; ".join(f"{n} {reason}" for reason, n in tally.reembed_reasons.most_common())
        log.warning("re-embedding fetched memories with %s (their sealed vectors cannot be "
                    "used here: %s); slower than inserting them (progress counts on)",
                    emb.model_id, why)
    tally.reembedded += len(need)
    fresh = nslog.host.embed_texts([texts[i] for i in need])
    for i, vector in zip(need, fresh, strict=True):
        out[i] = vector_to_blob(vector)
    return [v for v in out if v is not None], carried


def _keep_changed(catalog: Catalog, ns: str, keys: NamespaceKeys, current: Any,
                  digest: str | None, entry: mf.Entry, rec: dict[str, Any],
                  tally: Tally, now: float) -> bool:
    """A memory updated here after the plan was made: whether its new local version
    stays (then the remote one goes to history as CONFLICT unless it is an ancestor
    or the same edit). False: the remote version still wins; the caller replaces
    ours and decides the conflict by lineage as usual."""
    mid = entry.memory_id
    version = int(current["version"])
    ours_rank = (version, float(current["updated_at"]), digest or "")
    if entry.rank() > ours_rank:
        return False
    data, _ = _local_sealed(catalog, ns, mid)
    try:
        ours = open_envelope(keys, data or b"", expected_id=mid, expected_kind="fact")
    except (WalrusMemError, ValueError):
        ours = {}
    ancestor = entry.version < version and descends(entry.digest, rec, ours)
    if not ancestor and not _same_content(current, rec):
        catalog.add_history(
            ns, mid, entry.version, "CONFLICT", now, text=str(rec.get("text", "")),
            metadata=_metadata_json(rec), blob_id=entry.blob_id,
            patch_id=entry.patch_id, end_epoch=entry.end_epoch)
        tally.conflicts += 1
    return True


def record_rivals(nslog: LogContext, ns: str, keys: NamespaceKeys, rivals: list[mf.Entry],
                  tally: Tally) -> None:
    """Remote versions that lost to another head of the same pull: each one concurrent
    with the version now current goes to history as CONFLICT and is counted, as in
    a pull of one head at a time (merge.py). A rival that cannot be fetched is left
    out of history (logged), never fatal: it lost the merge either way."""
    fetched: list[tuple[mf.Entry, bytes, dict[str, Any]]] = []
    for entry in rivals:
        try:
            fetched.append(nslog._fetch(keys, entry))
        except (WalrusMemError, ValueError) as exc:
            log.info("losing version %d of %s not readable (%s); not kept in history",
                     entry.version, entry.memory_id, type(exc).__name__)
    if not fetched:
        return
    now = time.time()
    with nslog.lock, nslog.catalog.write():
        for entry, _, rec in fetched:
            mid = entry.memory_id
            current = nslog.catalog.memory(ns, mid)
            data, digest = _local_sealed(nslog.catalog, ns, mid)
            if current is None or data is None or digest == entry.digest:
                continue  # forgotten / collapsed meanwhile, or it is the current version
            try:
                ours = open_envelope(keys, data, expected_id=mid, expected_kind="fact")
            except (WalrusMemError, ValueError):
                continue
            same_version = entry.version == int(current["version"])
            if not same_version and descends(entry.digest, rec, ours):
                continue
            if _same_content(current, rec):
                continue  # the same edit made elsewhere is no conflict
            nslog.catalog.add_history(
                ns, mid, entry.version, "CONFLICT", now, text=str(rec.get("text", "")),
                metadata=_metadata_json(rec), blob_id=entry.blob_id,
                patch_id=entry.patch_id, end_epoch=entry.end_epoch)
            tally.conflicts += 1


def _same_content(current: Any, record: dict[str, Any]) -> bool:
    """Whether a local row and a fetched record hold the same fact (text, metadata,
    category, importance, expiry): then two versions differ only in sealing."""
    importance = float(record.get("importance") or DEFAULT_IMPORTANCE)
    return (str(current["text"]) == str(record.get("text", ""))
            and json.loads(str(current["metadata"] or "{}")) == json.loads(
                _metadata_json(record))
            and current["category"] == record.get("category")
            and float(current["importance"]) == importance
            and current["expires_at"] == record.get("expires_at"))


def _metadata_json(record: dict[str, Any]) -> str:
    metadata = record.get("metadata")
    return json.dumps(metadata if isinstance(metadata, dict) else {}, sort_keys=True)

